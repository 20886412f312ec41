//! What the warm pool's keeper (`cyclix pool keep`, `cyclix-pool@TENANT.service`) decides and
//! what it writes down (issue 16). Pure but for [`KeeperState::read`] and
//! [`KeeperState::write`].
//!
//! [`decide`] turns (now, the pool's size and state, `max_idle`, `warm_before`, the tenant
//! timer's next elapse, a pending retry) into "expire now", "fill one now" and "sleep until T
//! or until the pool changes". The keeper's loop (`app::pool_cmd::keep`) acts on it and waits on an
//! inotify event of the pool's `ready/` directory (a claim renames `ready/ENV` away) with the
//! decision's deadline as timeout: no fixed-period polling.
//!
//! `warm_before`: a tenant whose timer (`cyclix-run@TENANT.timer`) is active has a schedule;
//! its pool is filled only from `warm_before` before the timer's next elapse
//! (`NextElapseUSecRealtime`), so a nightly tenant does not churn environments all day. Ready
//! environments left after the window stay until `max_idle`. A tenant without an active timer
//! has no schedule: its pool is kept full.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

/// The keeper's state file in a pool's directory.
pub const STATE_FILE: &str = "keeper.json";

/// The first retry of a failed fill comes this long after it (ms); each further failure
/// doubles it, up to [`BACKOFF_MAX_MS`].
pub const BACKOFF_FIRST_MS: u128 = 5_000;
/// The longest wait between two attempts to fill after failures (ms).
pub const BACKOFF_MAX_MS: u128 = 300_000;
/// The longest the keeper waits without an event (ms): the timer's next elapse can change
/// without an event the keeper sees (a schedule edited by hand, the clock set), so it is read
/// again at least this often.
pub const MAX_WAIT_MS: u128 = 600_000;
/// How soon the keeper reads an active timer again whose next elapse is not set (ms): systemd
/// computes it only once the unit the timer triggered has finished (`cyclix-tick@`, seconds).
pub const PENDING_WAIT_MS: u128 = 15_000;

/// The tenant's schedule as the keeper sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "ms")]
pub enum Schedule {
    /// No active timer: runs come on demand; the pool is kept full.
    None,
    /// The timer's next elapse (`NextElapseUSecRealtime`), in ms since the Unix epoch.
    Next(u128),
    /// The timer is active but has no next elapse now (it just fired; systemd computes the
    /// next one when the triggered unit has finished): nothing is filled until it has one.
    Pending,
}

/// What [`decide`] decides from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// Now, in ms since the Unix epoch.
    pub now_ms: u128,
    /// The spec's `pool.size`.
    pub size: usize,
    /// When each ready environment became ready (ms since the epoch).
    pub ready_ms: Vec<u128>,
    /// Environments being filled (`filling/`, by a live filler).
    pub filling: usize,
    /// `pool.max_idle`, in ms.
    pub max_idle_ms: u128,
    /// `pool.warm_before`, in ms.
    pub warm_before_ms: u128,
    /// The tenant's schedule.
    pub schedule: Schedule,
    /// After a failed fill: not before this time (ms since the epoch).
    pub retry_at_ms: Option<u128>,
}

/// What the keeper does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Some ready environment is idle past `max_idle`: expire it now.
    pub expire: bool,
    /// The pool holds fewer than it should now and no retry is pending: fill one now.
    pub fill: bool,
    /// How many environments the pool should hold now: `size`, or 0 outside `warm_before`.
    pub want: usize,
    /// Outside `warm_before`: when the window opens (ms since the epoch).
    pub warm_from_ms: Option<u128>,
    /// When to decide again if nothing happens before (ms since the epoch; at most
    /// [`MAX_WAIT_MS`] from now).
    pub wake_ms: u128,
}

/// Decides what the keeper does at `f.now_ms` (see the module docs).
#[must_use]
pub fn decide(f: &Facts) -> Decision {
    let now = f.now_ms;
    let expires = |r: u128| r.saturating_add(f.max_idle_ms);
    let expire = f.ready_ms.iter().any(|&r| expires(r) <= now);
    let (want, warm_from_ms, schedule_wake) = match f.schedule {
        Schedule::None => (f.size, None, None),
        Schedule::Next(t) => {
            let from = t.saturating_sub(f.warm_before_ms);
            if now >= from {
                (f.size, None, None)
            } else {
                (0, Some(from), Some(from))
            }
        }
        Schedule::Pending => (0, None, Some(now + PENDING_WAIT_MS)),
    };
    let kept = f.ready_ms.iter().filter(|&&r| expires(r) > now).count() + f.filling;
    let short = kept < want;
    let retry_pending = f.retry_at_ms.filter(|&r| r > now);
    let fill = short && !expire && retry_pending.is_none();
    let mut wake = now + MAX_WAIT_MS;
    let deadlines = f
        .ready_ms
        .iter()
        .map(|&r| expires(r))
        .filter(|&e| e > now)
        .chain(schedule_wake)
        .chain(retry_pending.filter(|_| short));
    for d in deadlines {
        wake = wake.min(d);
    }
    Decision {
        expire,
        fill,
        want,
        warm_from_ms,
        wake_ms: if expire || fill { now } else { wake },
    }
}

/// How long after the `failures`-th failed fill in a row the keeper tries again (ms):
/// [`BACKOFF_FIRST_MS`] doubled per failure, at most [`BACKOFF_MAX_MS`].
#[must_use]
pub fn backoff_ms(failures: u32) -> u128 {
    let doublings = failures.saturating_sub(1).min(16);
    (BACKOFF_FIRST_MS << doublings).min(BACKOFF_MAX_MS)
}

/// What the keeper wrote down last (`keeper.json` in the pool's directory): what `cyclix
/// status` and `cyclix check` show. Holds no secret (mode 0644 like the pool's directories).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeeperState {
    /// The keeper's pid.
    pub pid: u32,
    /// When it wrote this, in ms since the Unix epoch.
    pub updated_ms: u128,
    /// `filling`, `full`, `waiting` (outside `warm_before`), `retrying` (after a failed
    /// fill), `stopped` (it exited on SIGTERM) or `blocked` (the tenant cannot have a pool).
    pub state: String,
    /// Environments it keeps ready now (`size`, or 0 outside `warm_before`).
    pub want: usize,
    /// Outside `warm_before`: when it begins to fill (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_from_ms: Option<u128>,
    /// The timer's next elapse it read (ms since the epoch), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_elapse_ms: Option<u128>,
    /// When it decides again at the latest (ms since the epoch).
    #[serde(default)]
    pub next_wake_ms: u128,
    /// The last failed fill's error (or why the tenant cannot have a pool); empty after a
    /// fill succeeded.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_error: String,
    /// When that failure was (ms since the epoch).
    #[serde(default)]
    pub last_error_ms: u128,
    /// Failed fills in a row.
    #[serde(default)]
    pub failures: u32,
    /// When it tries to fill again after them (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at_ms: Option<u128>,
    /// Environments it filled since it started.
    #[serde(default)]
    pub filled: u64,
    /// Environments it destroyed idle past `max_idle` since it started.
    #[serde(default)]
    pub expired: u64,
    /// Ready environments it destroyed dead (their proxy or pod unit not active:
    /// [`super::dead`]) since it started.
    #[serde(default)]
    pub dead: u64,
}

impl KeeperState {
    /// The state file of the pool whose directory is `pool_dir`.
    #[must_use]
    pub fn path(pool_dir: &Path) -> PathBuf {
        pool_dir.join(STATE_FILE)
    }

    /// Reads the state file in `pool_dir`; `Ok(None)` when no keeper wrote one.
    ///
    /// # Errors
    /// The file cannot be read or parsed.
    pub fn read(pool_dir: &Path) -> Result<Option<Self>> {
        let path = Self::path(pool_dir);
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .with_context(|| format!("parsing {}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// Writes it atomically into `pool_dir` (created if needed).
    ///
    /// # Errors
    /// I/O.
    pub fn write(&self, pool_dir: &Path) -> Result<()> {
        std::fs::create_dir_all(pool_dir)
            .with_context(|| format!("creating {}", pool_dir.display()))?;
        let text = serde_json::to_vec_pretty(self).context("serialising the keeper's state")?;
        crate::atomic::write(&Self::path(pool_dir), &text)
    }

    /// One line for people, at `now_ms`, with `ts` formatting a time (ms since the epoch):
    /// what it does and, after failures, the last error and when it retries.
    #[must_use]
    pub fn line(&self, now_ms: u128, ts: &dyn Fn(u128) -> String) -> String {
        let mut out = match self.state.as_str() {
            "waiting" => match self.warm_from_ms {
                Some(t) => format!(
                    "waiting for warm_before until {} (the timer's next elapse is {})",
                    ts(t),
                    self.next_elapse_ms.map_or_else(|| "unknown".into(), ts)
                ),
                None => "waiting for the timer's next elapse".to_string(),
            },
            "full" => format!("keeping {} ready", self.want),
            "filling" => format!("filling to {}", self.want),
            "retrying" => "cannot refill".to_string(),
            "blocked" => "cannot keep a pool".to_string(),
            other => other.to_string(),
        };
        if !self.last_error.is_empty() {
            let _ = write!(
                out,
                "; last fill error ({}, {} in a row): {}",
                ts(self.last_error_ms),
                self.failures,
                self.last_error
            );
            if let Some(r) = self.retry_at_ms.filter(|&r| r > now_ms) {
                let _ = write!(out, "; retries at {}", ts(r));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
