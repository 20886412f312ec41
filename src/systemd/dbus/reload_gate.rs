//! The lock that serialises cyclix's own reloads against queueing its jobs (B21): an
//! in-process gate per lock file plus a `flock` on the file, so two cyclix processes of one user
//! serialise too.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::{Call, STATE_NOT_READ, ZbusUnitManager};
pub(super) use crate::flock::Access;
use crate::flock::{self, Poll, WaitEnd};
use crate::systemd::Error;

/// The in-process half of the reload/job lock, per lock file: how many jobs hold it and whether
/// a reload does. (`flock` alone would also exclude threads, since each acquisition opens its own
/// file description; the gate keeps threads from polling the file against each other.)
static GATES: Mutex<BTreeMap<PathBuf, GateCount>> = Mutex::new(BTreeMap::new());

#[derive(Debug, Default)]
pub(super) struct GateCount {
    jobs: usize,
    reload: bool,
}

/// A held in-process gate; released on drop.
pub(super) struct Gate {
    path: PathBuf,
    access: Access,
}

pub(super) fn gates() -> MutexGuard<'static, BTreeMap<PathBuf, GateCount>> {
    // The counts stay consistent even if a holder panicked: they are updated in one step.
    GATES.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Gate {
    pub(super) fn try_take(path: &Path, access: Access) -> Option<Gate> {
        let mut gates = gates();
        let count = gates.entry(path.to_owned()).or_default();
        let free = match access {
            Access::Shared => !count.reload,
            Access::Exclusive => !count.reload && count.jobs == 0,
        };
        if !free {
            return None;
        }
        match access {
            Access::Shared => count.jobs += 1,
            Access::Exclusive => count.reload = true,
        }
        Some(Gate {
            path: path.to_owned(),
            access,
        })
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let mut gates = gates();
        if let Some(count) = gates.get_mut(&self.path) {
            match self.access {
                Access::Shared => count.jobs = count.jobs.saturating_sub(1),
                Access::Exclusive => count.reload = false,
            }
            if count.jobs == 0 && !count.reload {
                gates.remove(&self.path);
            }
        }
    }
}

/// A held lock: the in-process gate plus the `flock` on the lock file (released when the file
/// closes).
pub(super) struct LockGuard {
    _file: File,
    _gate: Gate,
}

/// Why the lock could not be taken.
pub(super) enum LockFailure {
    /// The deadline passed while another holder kept it.
    Busy,
    /// The lock file could not be created or locked.
    Io(std::io::Error),
}

/// Takes the process gate and the `flock` on `path` (created mode 0600, its directory mode 0700),
/// polling until `deadline` (2 ms, doubling to 50 ms between attempts).
pub(super) fn acquire_lock(
    path: &Path,
    access: Access,
    deadline: Instant,
) -> Result<LockGuard, LockFailure> {
    let poll = Poll {
        deadline,
        pause: Duration::from_millis(2),
        max_pause: Duration::from_millis(50),
    };
    let ended = |end: WaitEnd<std::io::Error>| match end {
        WaitEnd::Failed(e) => LockFailure::Io(e),
        WaitEnd::Deadline | WaitEnd::Interrupted => LockFailure::Busy,
    };
    let gate = flock::wait(poll, None, || {
        Ok::<_, std::io::Error>(Gate::try_take(path, access))
    })
    .map_err(ended)?;
    // The error's own words without flock's context: `Error::Lock` names the path.
    let file = flock::open(path).map_err(|e| {
        LockFailure::Io(
            e.downcast::<std::io::Error>()
                .unwrap_or_else(|e| std::io::Error::other(format!("{e:#}"))),
        )
    })?;
    flock::wait(poll, None, || {
        flock::try_lock(&file, access).map(|taken| taken.then_some(()))
    })
    .map_err(ended)?;
    Ok(LockGuard {
        _file: file,
        _gate: gate,
    })
}

impl ZbusUnitManager {
    /// Takes the reload/job lock for `call`, within its deadline.
    pub(super) fn lock(&self, call: &Call<'_>, access: Access) -> Result<LockGuard, Error> {
        acquire_lock(&self.lock_path, access, call.deadline).map_err(|failure| match failure {
            LockFailure::Busy => call.deadline_error(
                "waiting for the cyclix systemd lock (another cyclix reload or job holds it)",
                STATE_NOT_READ.to_owned(),
            ),
            LockFailure::Io(err) => Error::Lock {
                path: self.lock_path.display().to_string(),
                message: err.to_string(),
            },
        })
    }
}
