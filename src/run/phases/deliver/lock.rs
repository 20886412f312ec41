//! The branch lock of a delivery: one writer per remote branch, across tenants and runs. An
//! advisory `flock` on `LOCKS/delivery-HASH.lock` (HASH from the push URL and the branch),
//! holding the holder's run id, tenant and pid so a refused run can name it; released on drop
//! and by the kernel when cyclix dies.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

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
#[derive(Debug)]
pub struct BranchLock {
    file: File,
}

impl Drop for BranchLock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

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
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("opening lock {}", path.display()))?;
    let began = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()));
            }
        }
        if interrupted.load(Ordering::SeqCst) {
            bail!("interrupted while waiting for the delivery lock on {what}");
        }
        if began.elapsed() >= wait {
            let mut s = String::new();
            let _ = file.seek(SeekFrom::Start(0));
            let _ = file.read_to_string(&mut s);
            let who = serde_json::from_str::<Holder>(&s).map_or_else(
                |_| "another run (its holder record is unreadable)".to_owned(),
                |h| format!("run {} (tenant {}, pid {})", h.run_id, h.tenant, h.pid),
            );
            return Err(super::Refusal(format!(
                "{what} is being delivered by {who}; waited {} s (lock {}): one run writes a \
                 branch at a time; wait for that run, or raise `delivery.lock_wait`",
                wait.as_secs(),
                path.display()
            ))
            .into());
        }
        std::thread::sleep(LOCK_POLL);
    }
    file.set_len(0).context("truncating the lock file")?;
    file.seek(SeekFrom::Start(0))
        .context("seeking the lock file")?;
    file.write_all(&serde_json::to_vec(holder).context("serialising the lock holder")?)
        .and_then(|()| file.flush())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(BranchLock { file })
}
