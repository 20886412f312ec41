//! The per-tenant run lock: an advisory `flock`-style lock on
//! `$XDG_RUNTIME_DIR/cyclix/locks/TENANT.lock`, taken before any podman or D-Bus call and
//! released by the kernel when cyclix exits, even on SIGKILL (security-cases §3 "Two runs for
//! the same tenant at once"). The file holds the holder's run id, pid and start time so a
//! refused run can name it.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::flock;

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

/// The holder's `run_id` of a cyclix process that holds the tenant lock not for a run but to
/// converge the tenant's dead claims (the pool's keeper, `cyclix check`): a run that finds it
/// waits for it (at most [`CONVERGING_WAIT`]) instead of being refused.
pub const CONVERGING: &str = "(converging dead claims)";

/// How long a run waits for a [`CONVERGING`] holder: 300 s, the bound of a tenant's whole
/// convergence (destroying an environment under a held storage lock took 74 s and 149 s in the
/// fault trial).
pub const CONVERGING_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// The outcome of trying to lock: held (a [`flock::Held`]: dropping it releases the lock,
/// `set_holder` rewrites the record for a run that adopted a claimed environment's id), or
/// busy with the holder's record if it could be read.
pub type Acquire = flock::Take<Holder>;

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
    flock::try_take(lock_path, holder)
}

/// What the lock file at `lock_path` says about its holder, without taking the lock (the
/// content may be a dead run's: pair it with a look at who holds the lock).
#[must_use]
pub fn peek(lock_path: &Path) -> Option<Holder> {
    flock::peek(lock_path)
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
