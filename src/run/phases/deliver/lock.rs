//! The branch lock of a delivery: one writer per remote branch, across tenants and runs. An
//! advisory `flock` on `LOCKS/delivery-HASH.lock` (HASH from the push URL and the branch),
//! holding the holder's run id, tenant and pid so a refused run can name it; released on drop
//! and by the kernel when cyclix dies.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use crate::flock::{self, Poll, Take, WaitEnd};

/// How often a run waiting for the branch lock tries again.
const LOCK_POLL: Duration = Duration::from_millis(250);

/// Who holds a branch lock (written into the lock file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// Run id.
    pub run_id: String,
    /// Tenant.
    pub tenant: String,
    /// Process id of its cyclix.
    pub pid: u32,
    /// When it took the lock, in ms since the Unix epoch.
    pub since_ms: u128,
}

/// A held branch lock; dropping it releases it (the kernel does so too when cyclix dies).
pub type BranchLock = flock::Held;

/// `LOCKS/delivery-HASH.lock`, HASH the first 16 bytes (hex) of SHA-256 over the push URL, a
/// NUL and the branch.
#[must_use]
pub fn lock_path(locks_dir: &Path, url: &str, branch: &str) -> PathBuf {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(url.as_bytes());
    h.update([0]);
    h.update(branch.as_bytes());
    let hex = super::core::hex(h.finalize().get(..16).unwrap_or_default());
    locks_dir.join(format!("delivery-{hex}.lock"))
}

/// Now, in ms since the Unix epoch.
#[must_use]
pub fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Takes the lock at `path` for `holder`, waiting up to `wait` (polling) while another run
/// holds it; `interrupted` ends the wait.
///
/// # Errors
/// The lock stayed held (naming the holder, `what` and the fix), the run was interrupted, or
/// I/O failures.
pub fn acquire(
    path: &Path,
    holder: &Holder,
    wait: Duration,
    interrupted: &AtomicBool,
    what: &str,
) -> Result<BranchLock> {
    let mut last: Option<Holder> = None;
    let taken =
        flock::wait(
            Poll::every(LOCK_POLL, wait),
            Some(interrupted),
            || match flock::try_take(path, holder)? {
                Take::Held(h) => Ok(Some(h)),
                Take::Busy(who) => {
                    last = who;
                    Ok(None)
                }
            },
        );
    match taken {
        Ok(lock) => Ok(lock),
        Err(WaitEnd::Failed(e)) => Err(e),
        Err(WaitEnd::Interrupted) => {
            bail!("interrupted while waiting for the delivery lock on {what}")
        }
        Err(WaitEnd::Deadline) => {
            let who = last.map_or_else(
                || "another run (its holder record is unreadable)".to_owned(),
                |h| format!("run {} (tenant {}, pid {})", h.run_id, h.tenant, h.pid),
            );
            Err(super::Refusal(format!(
                "{what} is being delivered by {who}; waited {} s (lock {}): one run writes a \
                 branch at a time; wait for that run, or raise `delivery.lock_wait`",
                wait.as_secs(),
                path.display()
            ))
            .into())
        }
    }
}
