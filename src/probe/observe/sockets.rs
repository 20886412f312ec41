//! Sockets (P19): a walk of the tree for socket files, `/proc/net/unix`, socket variables.

use std::os::unix::fs::FileTypeExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use super::unique;
use crate::probe::Context;
use crate::probe::verdict::Judged;
use crate::probe::verdict::sockets as v;

/// P19: walks the tree (not `/proc`, `/sys`) for sockets, with a bound on time, after binding
/// a socket of its own in `/tmp` as the positive control.
#[must_use]
pub fn p19(_: &Context) -> Judged {
    let ctl = format!("/tmp/{}.sock", unique("sock"));
    let listener = std::os::unix::net::UnixListener::bind(&ctl);
    let deadline = Instant::now() + Duration::from_millis(1300);
    let mut o = v::SocketObs {
        complete: true,
        ..Default::default()
    };
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
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                if p != Path::new("/proc") && p != Path::new("/sys") && !p.ends_with(".git/objects")
                {
                    stack.push(p);
                }
            } else if ft.is_socket()
                // A bind-mounted socket shows the d_type of the placeholder file podman
                // created for the mount point; lstat sees the mounted socket itself.
                || std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_socket())
            {
                o.found.push(p.to_string_lossy().into_owned());
            }
        }
    }
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
