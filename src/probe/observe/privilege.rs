//! Identity and privilege (P1–P9): `/proc/self/status`, the LSM label, the user namespace
//! map, a setuid binary, bad-argument syscalls, mounts and a nested user namespace (in a fresh
//! child process, `cyclix probe --child userns`).

use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};

use super::filesystem::mountinfo;
use super::{euid, ns_inode, unique};
use crate::probe::Context;
use crate::probe::clients::{io_attempt, nix_attempt};
use crate::probe::sys::{self, TryCall};
use crate::probe::verdict::privilege as v;
use crate::probe::verdict::{Attempt, Judged};

/// The fields of a `/proc/PID/status` file ([`parse_status`]); empty when it cannot be read.
fn status_fields(path: &str) -> BTreeMap<String, String> {
    parse_status(&std::fs::read_to_string(path).unwrap_or_default())
}

/// `Name:\tvalue` lines → name → value, both trimmed; lines without a `:` are skipped.
#[must_use]
pub fn parse_status(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// P1.
#[must_use]
pub fn p1(ctx: &Context) -> Judged {
    let s = status_fields("/proc/self/status");
    let caps = s
        .into_iter()
        .filter(|(k, _)| k.starts_with("Cap"))
        .collect();
    v::p1(&caps, ctx.profile)
}

/// P2.
#[must_use]
pub fn p2(_: &Context) -> Judged {
    let s = status_fields("/proc/self/status");
    // gVisor's status has no NoNewPrivs line: then the kernel is asked (prctl(2)
    // PR_GET_NO_NEW_PRIVS), which every kernel answers.
    let asked = nix::sys::prctl::get_no_new_privs()
        .ok()
        .map(|b| if b { "1" } else { "0" }.to_string());
    v::p2(s.get("NoNewPrivs").or(asked.as_ref()).map(String::as_str))
}

/// P3.
#[must_use]
pub fn p3(ctx: &Context) -> Judged {
    let s = status_fields("/proc/self/status");
    v::p3(
        s.get("Seccomp").map(String::as_str),
        s.get("Seccomp_filters").map(String::as_str),
        ctx.profile,
    )
}

/// P4.
#[must_use]
pub fn p4(ctx: &Context) -> Judged {
    let label = std::fs::read_to_string("/proc/self/attr/current")
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO));
    v::p4(&label, ctx.lsm.as_deref())
}

/// P5.
#[must_use]
pub fn p5(ctx: &Context) -> Judged {
    let u = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
    let g = std::fs::read_to_string("/proc/self/gid_map").unwrap_or_default();
    v::p5(&u, &g, ns_inode("user"), ctx)
}

/// Setuid-root binaries P6 tries, in order; `passwd` waits on stdin, so its status can be
/// read while it runs.
pub const SETUID_CANDIDATES: &[&str] = &[
    "/usr/bin/passwd",
    "/usr/bin/chfn",
    "/usr/bin/chsh",
    "/bin/passwd",
];

/// P6.
#[must_use]
pub fn p6(_: &Context) -> Judged {
    let mut o = v::SetuidObs {
        own_euid: euid(),
        ..Default::default()
    };
    let bin = SETUID_CANDIDATES
        .iter()
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o4000 != 0));
    let Some(bin) = bin else { return v::p6(&o) };
    o.binary = Some((*bin).to_string());
    let child = std::process::Command::new(bin)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            o.error = Some(format!("exec {bin}: {e}"));
            return v::p6(&o);
        }
    };
    let name = Path::new(bin)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let deadline = Instant::now() + Duration::from_millis(1200);
    let path = format!("/proc/{}/status", child.id());
    while Instant::now() < deadline {
        let s = status_fields(&path);
        if s.get("Name") == Some(&name) {
            let e = s
                .get("Uid")
                .and_then(|u| u.split_whitespace().nth(1)?.parse().ok());
            if let (Some(e), Some(cap)) = (e, s.get("CapEff")) {
                o.status = Some((e, cap.clone()));
                break;
            }
        }
        if s.is_empty() {
            o.error = Some(format!("{bin} exited before its status could be read"));
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if o.status.is_none() && o.error.is_none() {
        o.error = Some(format!("{bin} never showed its status"));
    }
    let _ = child.kill();
    let _ = child.wait();
    v::p6(&o)
}

/// P7.
#[must_use]
pub fn p7(ctx: &Context) -> Judged {
    let calls: Vec<(String, Attempt)> = TryCall::ALL
        .iter()
        .map(|c| (c.name().to_string(), Attempt::of(sys::try_call(*c))))
        .collect();
    v::p7(&calls, ctx.profile)
}

fn scratch_dir(tag: &str) -> Result<String, Attempt> {
    let d = format!("/tmp/{}", unique(tag));
    std::fs::create_dir(&d).map_err(|e| Attempt::Missing(format!("creating {d}: {e}")))?;
    Ok(d)
}

fn try_mount(fstype: &str, data: Option<&str>, target: &str) -> Attempt {
    let r = mount(Some(fstype), target, Some(fstype), MsFlags::empty(), data);
    if r.is_ok() {
        let _ = nix::mount::umount(target);
    }
    nix_attempt(r)
}

/// P8.
#[must_use]
pub fn p8(_: &Context) -> Judged {
    let d = match scratch_dir("mnt") {
        Ok(d) => d,
        Err(a) => return v::p8(&[("scratch".into(), a)]),
    };
    let items = vec![
        ("tmpfs".to_string(), try_mount("tmpfs", None, &d)),
        (
            "cgroup".to_string(),
            try_mount("cgroup", Some("memory"), &d),
        ),
        ("proc".to_string(), try_mount("proc", None, &d)),
    ];
    let _ = std::fs::remove_dir(&d);
    v::p8(&items)
}

/// P9: runs `cyclix probe --child userns` (a fresh single-threaded process: `unshare` of a
/// user namespace fails with `EINVAL` in a threaded one) and reads its JSON answer.
#[must_use]
pub fn p9(_: &Context) -> Judged {
    let before = mountinfo().len();
    let mut o = match run_child("userns") {
        Ok(text) => serde_json::from_str(text.trim()).unwrap_or_else(|e| v::UsernsObs {
            error: Some(format!("unreadable answer {text:?}: {e}")),
            ..Default::default()
        }),
        Err(e) => v::UsernsObs {
            error: Some(e),
            ..Default::default()
        },
    };
    o.mounts_unchanged = mountinfo().len() == before;
    v::p9(&o)
}

fn run_child(what: &str) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding our own binary: {e}"))?;
    let mut child = std::process::Command::new(exe)
        .args(["probe", "--child", what])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("spawning the child: {e}"))?;
    let deadline = Instant::now() + Duration::from_millis(1500);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("the child did not finish within 1.5 s".into());
            }
            Err(e) => return Err(format!("waiting for the child: {e}")),
        }
    }
    let mut s = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut s)
            .map_err(|e| format!("reading the child: {e}"))?;
    }
    Ok(s)
}

/// The `--child` side of the probes that need a fresh process. Prints one JSON line.
///
/// # Errors
/// An unknown child name; stdout failures.
pub fn child_main(what: &str) -> anyhow::Result<bool> {
    anyhow::ensure!(what == "userns", "unknown probe child `{what}`");
    let mut o = v::UsernsObs::default();
    let uid = euid();
    let gid = nix::unistd::getegid().as_raw();
    let r = nix_attempt(unshare(CloneFlags::CLONE_NEWUSER));
    o.unshare_user = Some(r.clone());
    if r == Attempt::Ok {
        let _ = std::fs::write("/proc/self/setgroups", "deny");
        let map = io_attempt(std::fs::write("/proc/self/uid_map", format!("0 {uid} 1")));
        let _ = std::fs::write("/proc/self/gid_map", format!("0 {gid} 1"));
        o.uid_map = Some(map);
        let m = nix_attempt(unshare(CloneFlags::CLONE_NEWNS));
        o.unshare_mnt = Some(m);
        if let Ok(d) = scratch_dir("userns") {
            o.mount_proc = Some(try_mount("proc", None, &d));
            o.mount_cgroup = Some(try_mount("cgroup2", None, &d));
            let _ = std::fs::remove_dir(&d);
        }
    }
    println!("{}", serde_json::to_string(&o)?);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_become_trimmed_fields() {
        let s = parse_status(
            "Name:\tpasswd\nUid:\t0\t0\t0\t0\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n",
        );
        assert_eq!(s.get("Name").map(String::as_str), Some("passwd"));
        assert_eq!(s.get("Uid").map(String::as_str), Some("0\t0\t0\t0"));
        assert_eq!(s.get("NoNewPrivs").map(String::as_str), Some("1"));
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn odd_status_lines() {
        assert!(parse_status("").is_empty());
        assert!(parse_status("no colon here\n\n").is_empty());
        let s = parse_status("Key:\nA: b: c\nKey: again\n");
        assert_eq!(
            s.get("A").map(String::as_str),
            Some("b: c"),
            "split at the first colon"
        );
        assert_eq!(
            s.get("Key").map(String::as_str),
            Some("again"),
            "the last wins"
        );
    }
}
