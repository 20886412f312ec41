//! The per-tenant run lock: an advisory `flock`-style lock on
//! `$XDG_RUNTIME_DIR/cyclix/locks/TENANT.lock`, taken before any podman or D-Bus call and
//! released by the kernel when cyclix exits, even on SIGKILL (security-cases §3 "Two runs for
//! the same tenant at once"). The file holds the holder's run id, pid and start time so a
//! refused run can name it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

/// Who holds a tenant's lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The holder's run id.
    pub run_id: String,
    /// The holder's process id.
    pub pid: u32,
    /// When the holder started, in ms since the Unix epoch.
    pub started_ms: u128,
}

/// A held lock; dropping it releases the lock.
#[derive(Debug)]
pub struct TenantLock {
    file: File,
    path: PathBuf,
}

/// The outcome of trying to lock.
#[derive(Debug)]
pub enum Acquire {
    /// We hold it.
    Held(TenantLock),
    /// Someone else does (their record, if it could be read).
    Busy(Option<Holder>),
}

/// `$XDG_RUNTIME_DIR/cyclix/locks/TENANT.lock`.
#[must_use]
pub fn path(runtime_dir: &Path, tenant: &str) -> PathBuf {
    crate::layout::Runtime(runtime_dir.to_path_buf()).tenant_lock(tenant)
}

/// Tries to take the lock without waiting; on success writes `holder` into it.
///
/// # Errors
/// I/O failures other than "held by someone else".
pub fn try_acquire(lock_path: &Path, holder: &Holder) -> Result<Acquire> {
    if let Some(dir) = lock_path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(lock_path)
        .with_context(|| format!("opening lock {}", lock_path.display()))?;
    match file.try_lock() {
        Ok(()) => {
            file.set_len(0).context("truncating the lock file")?;
            file.seek(SeekFrom::Start(0))
                .context("seeking the lock file")?;
            file.write_all(&serde_json::to_vec(holder).context("serialising the lock holder")?)
                .and_then(|()| file.flush())
                .with_context(|| format!("writing {}", lock_path.display()))?;
            Ok(Acquire::Held(TenantLock {
                file,
                path: lock_path.to_path_buf(),
            }))
        }
        Err(TryLockError::WouldBlock) => {
            let mut s = String::new();
            let _ = file.read_to_string(&mut s);
            Ok(Acquire::Busy(serde_json::from_str(&s).ok()))
        }
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", lock_path.display()))
        }
    }
}

/// What the lock file at `lock_path` says about its holder, without taking the lock (the
/// content may be a dead run's: pair it with a look at who holds the lock).
#[must_use]
pub fn peek(lock_path: &Path) -> Option<Holder> {
    serde_json::from_slice(&std::fs::read(lock_path).ok()?).ok()
}

impl TenantLock {
    /// Rewrites the holder in the held lock (a run that adopted a claimed environment's id).
    ///
    /// # Errors
    /// I/O failures.
    pub fn set_holder(&mut self, holder: &Holder) -> Result<()> {
        self.file.set_len(0).context("truncating the lock file")?;
        self.file
            .seek(SeekFrom::Start(0))
            .context("seeking the lock file")?;
        self.file
            .write_all(&serde_json::to_vec(holder).context("serialising the lock holder")?)
            .and_then(|()| self.file.flush())
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

impl Drop for TenantLock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(id: &str) -> Holder {
        Holder {
            run_id: id.into(),
            pid: 42,
            started_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn second_taker_is_refused_with_the_holder_named_and_may_retry_after_release() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = path(dir.path(), "acme");
        let Acquire::Held(first) = try_acquire(&p, &holder("r1")).expect("lock") else {
            panic!("first must hold")
        };
        match try_acquire(&p, &holder("r2")).expect("try") {
            Acquire::Busy(Some(h)) => assert_eq!(h, holder("r1")),
            other => panic!("expected busy with holder, got {other:?}"),
        }
        drop(first);
        assert!(matches!(
            try_acquire(&p, &holder("r3")).expect("try"),
            Acquire::Held(_)
        ));
    }
}
