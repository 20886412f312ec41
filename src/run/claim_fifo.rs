//! The FIFO on which a pooled environment's held agent container waits for its claim (issue
//! 33, `run::pool::held`): `ctl/claim` in the run's control directory, made by the fill before
//! the container starts; its `cyclix agent-wait --claim` blocks in `open(2)` of it for reading
//! (no clock, no polling) until the claiming run's start phase opens it for writing ([`wake`]).

use std::path::Path;

use anyhow::{Context as _, Result, bail};

/// Makes the claim FIFO `path` (mode 0600) before the held container starts.
///
/// # Errors
/// `mkfifo` failed.
pub fn make_claim(path: &Path) -> Result<()> {
    crate::run::report_fifo::make_private(path, "the claim FIFO")
}

/// Wakes the held agent-wait: opens the claim FIFO `path` for writing without blocking (so it
/// fails unless agent-wait is blocked opening it for reading), closes it and unlinks it.
///
/// # Errors
/// Nobody waits on it (`ENXIO`: agent-wait is not held there), or it cannot be opened or
/// unlinked.
pub fn wake(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path);
    match f {
        Ok(f) => drop(f),
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => bail!(
            "the held agent container's agent-wait is not waiting on {} (it ended, or \
             something woke it before the claim)",
            path.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    }
    std::fs::remove_file(path).with_context(|| format!("removing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waking_needs_a_waiter_and_the_waiter_goes_on_only_when_woken() {
        let dir = tempfile::tempdir().expect("tmp");
        let claim = dir.path().join(crate::render::plan::CLAIM_FILE);
        make_claim(&claim).expect("fifo");
        let err = wake(&claim).expect_err("nobody waits");
        assert!(format!("{err:#}").contains("not waiting"), "{err:#}");
        assert!(claim.exists(), "a failed wake leaves the FIFO");
        let c = claim.clone();
        let waiter = std::thread::spawn(move || {
            std::fs::read(&c).expect("read");
        });
        // The wake succeeds only once the waiter is blocked in its open (ENXIO before).
        loop {
            match wake(&claim) {
                Ok(()) => break,
                Err(_) => std::thread::yield_now(),
            }
        }
        waiter.join().expect("woken");
        assert!(!claim.exists(), "the wake unlinks the FIFO");
    }
}
