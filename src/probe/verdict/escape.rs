//! Escape attempts (E1).

use super::{Attempt, Judged, all_errno};

/// E1: every escape attempt fails: the host key and sockets are not there (`ENOENT`), the host
/// path cannot be created (`ENOENT`, `EROFS`, `EACCES`), the host sentinel cannot be signalled
/// (`ESRCH`, `EPERM`). Nothing attempted is a FAIL.
#[must_use]
pub fn e1(items: &[(String, Attempt)]) -> Judged {
    all_errno(
        "each attempt fails: ENOENT/EROFS/EACCES for host paths, ESRCH/EPERM for the sentinel, ENOENT/ECONNREFUSED for host sockets",
        items,
        &[
            libc::ENOENT,
            libc::EROFS,
            libc::EACCES,
            libc::ESRCH,
            libc::EPERM,
            libc::ECONNREFUSED,
        ],
    )
}
