//! The effectful side of the probe suite: each `pN`/`nN` function observes (reads `/proc`,
//! calls syscalls with bad arguments, connects with deadlines, talks HTTP/1.1 to the proxy,
//! attempts mounts and writes) and hands the observation to the pure [`super::verdict`].
//!
//! Nothing here changes state outside the sandbox's own scratch space: writes are made under
//! `/tmp` or the project and removed at once; kernel knobs are only *opened* for writing,
//! never written; mounts that would succeed go to a fresh directory under `/tmp`.
//!
//! Layout: one file per probe family (the same families as [`super::verdict`]); the low-level
//! clients (HTTP, DNS, rtnetlink) are in [`super::clients`]. This file holds the few helpers
//! several families share.

use crate::probe::clients::io_attempt;
use crate::probe::verdict::Attempt;

pub mod credentials;
pub mod dns;
pub mod escape;
pub mod filesystem;
pub mod kernel;
pub mod network;
pub mod privilege;
pub mod processes;
pub mod proxy;
pub mod sockets;

fn unique(tag: &str) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("probe-{tag}-{}-{n:x}", std::process::id())
}

fn ns_inode(name: &str) -> Option<u64> {
    let l = std::fs::read_link(format!("/proc/self/ns/{name}")).ok()?;
    let s = l.to_string_lossy();
    s.split_once('[')?.1.trim_end_matches(']').parse().ok()
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

fn create_remove(path: &str) -> Attempt {
    let r = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path);
    if r.is_ok() {
        let _ = std::fs::remove_file(path);
    }
    io_attempt(r)
}
