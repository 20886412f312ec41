//! Escape attempts (E1): the host tripwires from inside.

use super::create_remove;
use crate::probe::Context;
use crate::probe::clients::{io_attempt, nix_attempt};
use crate::probe::verdict::escape as v;
use crate::probe::verdict::{Attempt, Judged};

/// E1: the escape attempts of issue 5 from inside: read the planted host key, create a file
/// outside the workdir at a host path, signal the host sentinel, connect to the host's user bus
/// and podman socket. Each must fail; the host checks the tripwires' effect independently.
#[must_use]
pub fn e1(ctx: &Context) -> Judged {
    let Some(e) = &ctx.escape else {
        return v::e1(&[]);
    };
    let mut items = vec![
        (format!("read {}", e.key), io_attempt(std::fs::read(&e.key))),
        (format!("create {}", e.outside), create_remove(&e.outside)),
        (
            format!("kill {}", e.sentinel_pid),
            // A pid that exists in our own namespace is one of ours, not the host sentinel:
            // never signal it; that attempt cannot be made here.
            if std::path::Path::new(&format!("/proc/{}", e.sentinel_pid)).exists() {
                Attempt::Missing(format!(
                    "pid {} exists inside the sandbox; not signalled",
                    e.sentinel_pid
                ))
            } else {
                nix_attempt(nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(e.sentinel_pid),
                    nix::sys::signal::Signal::SIGTERM,
                ))
            },
        ),
    ];
    for sock in &e.sockets {
        items.push((
            format!("connect {sock}"),
            io_attempt(std::os::unix::net::UnixStream::connect(sock)),
        ));
    }
    v::e1(&items)
}
