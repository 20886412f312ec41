//! Sockets (P19): a walk of the tree for socket files, `/proc/net/unix`, socket variables.

use std::os::unix::fs::FileTypeExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use super::unique;
use crate::probe::Context;
use crate::probe::verdict::Judged;
use crate::probe::verdict::sockets as v;

/// How long P19's walk of the tree may take (the probe's hard deadline is
/// [`crate::probe::PROBE_TIMEOUT`], 2 s; the rest is left for `/proc/net/unix`). An unfinished
/// walk FAILS: it proves nothing.
pub const WALK_BUDGET: Duration = Duration::from_millis(1500);

/// P19: walks the tree (not `/proc`, `/sys`) for sockets, with a bound on time
/// ([`WALK_BUDGET`]), after binding a socket of its own in `/tmp` as the positive control.
///
/// A socket is reachable in one of two ways, and each is looked at where it can be seen: a
/// socket inode in a directory (its `d_type` in the directory listing says socket, so the walk
/// needs no `lstat` per file), or a socket bind-mounted onto a placeholder file (the listing
/// shows the placeholder's type; every such mount is a line of `/proc/self/mountinfo`, and its
/// mount point is `lstat`ed).
#[must_use]
pub fn p19(_: &Context) -> Judged {
    let ctl = format!("/tmp/{}.sock", unique("sock"));
    let listener = std::os::unix::net::UnixListener::bind(&ctl);
    let deadline = Instant::now() + WALK_BUDGET;
    let mut o = v::SocketObs {
        complete: true,
        ..Default::default()
    };
    for m in super::filesystem::mountinfo() {
        if std::fs::symlink_metadata(&m.point).is_ok_and(|md| md.file_type().is_socket()) {
            o.found.push(m.point);
        }
    }
    let mut stack = vec![std::path::PathBuf::from("/")];
    while let Some(dir) = stack.pop() {
        if Instant::now() > deadline {
            o.complete = false;
            break;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.filter_map(Result::ok) {
            // `file_type` is the listing's d_type (an lstat only where the file system
            // gives none).
            let Ok(ft) = e.file_type() else { continue };
            let p = e.path();
            if ft.is_dir() {
                if p != Path::new("/proc") && p != Path::new("/sys") && !p.ends_with(".git/objects")
                {
                    stack.push(p);
                }
            } else if ft.is_socket() {
                o.found.push(p.to_string_lossy().into_owned());
            }
        }
    }
    o.found.sort();
    o.found.dedup();
    o.control_found = o.found.contains(&ctl);
    o.found.retain(|f| *f != ctl);
    drop(listener);
    let _ = std::fs::remove_file(&ctl);
    o.net_unix = std::fs::read_to_string("/proc/net/unix")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(7).map(str::to_string))
        .filter(|p| !p.contains(&ctl))
        .collect();
    o.env = [
        "SSH_AUTH_SOCK",
        "DBUS_SESSION_BUS_ADDRESS",
        "DBUS_SYSTEM_BUS_ADDRESS",
        "DOCKER_HOST",
        "CONTAINER_HOST",
        "XDG_RUNTIME_DIR",
    ]
    .iter()
    .filter(|k| std::env::var_os(k).is_some())
    .map(|k| (*k).to_string())
    .collect();
    v::p19(&o)
}
