//! A warm pool as `cyclix status` shows it: the spec's size, what the pool's state holds and
//! its keeper (`cyclix-pool@TENANT.service`: the unit's state and what it wrote down last).
//! Pure: the caller reads the state, the unit and the keeper's file.

use anyhow::Result;
use serde::Serialize;

use super::Counts;
use super::keeper::KeeperState;
use crate::spec::Pool;

/// The keeper of a pool as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeeperView {
    /// `cyclix-pool@TENANT.service`.
    pub unit: String,
    /// Its `ActiveState` (`active`, `inactive`, `failed`, …), or why it could not be read.
    pub active_state: String,
    /// What it wrote down last (`keeper.json`); `None` when no keeper wrote one.
    pub state: Option<KeeperState>,
    /// Why that file could not be read; empty otherwise.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// A pool as `cyclix status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolView {
    /// Environments the spec asks to keep ready.
    pub size: u32,
    /// The state's counts; `None` when the state could not be read (`error` says why).
    pub counts: Option<Counts>,
    /// Why the state could not be read; empty otherwise.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// Whether the pool is being kept: its keeper runs and its last fill did not fail.
    pub refilling: bool,
    /// Why not, when it is not (empty when it is).
    pub why_not: String,
    /// The keeper.
    pub keeper: KeeperView,
}

impl PoolView {
    /// The view of `pool` whose state read as `counts`, with its keeper `keeper`.
    #[must_use]
    pub fn new(pool: &Pool, counts: Result<Counts>, keeper: KeeperView) -> Self {
        let (counts, error) = match counts {
            Ok(c) => (Some(c), String::new()),
            Err(e) => (None, format!("{e:#}")),
        };
        let why_not = why_not(&keeper);
        PoolView {
            size: pool.size,
            counts,
            error,
            refilling: why_not.is_empty(),
            why_not,
            keeper,
        }
    }

    /// Lines for people at `now_ms` (`ts` formats a time in ms since the epoch):
    /// `pool: size 2: 1 ready, 1 filling, 0 claimed, 0 expiring` and the keeper's line.
    #[must_use]
    pub fn lines(&self, now_ms: u128, ts: &dyn Fn(u128) -> String) -> Vec<String> {
        let held = match &self.counts {
            Some(c) => format!(
                "{} ready, {} filling, {} claimed, {} expiring",
                c.ready, c.filling, c.claimed, c.expiring
            ),
            None => format!("state unreadable ({})", self.error),
        };
        let k = &self.keeper;
        let what = match (&k.state, k.active_state.as_str()) {
            (Some(s), "active" | "activating" | "reloading") => s.line(now_ms, ts),
            (Some(s), _) if !s.last_error.is_empty() => {
                format!("its last words: {}", s.line(now_ms, ts))
            }
            (None, "active" | "activating") => "starting".to_string(),
            _ => String::new(),
        };
        let mut keeper = format!("{}: {}", k.unit, k.active_state);
        if !what.is_empty() {
            keeper.push_str(": ");
            keeper.push_str(&what);
        }
        if !self.why_not.is_empty() {
            keeper.push_str("; cannot refill: ");
            keeper.push_str(&self.why_not);
        }
        vec![format!("pool: size {}: {held}", self.size), keeper]
    }
}

/// Why the pool of `keeper` is not refilled now, or empty when it is.
fn why_not(k: &KeeperView) -> String {
    let fix = "`cyclix install` enables and starts it";
    match k.active_state.as_str() {
        "active" | "activating" | "reloading" => {}
        "failed" => {
            return format!(
                "the keeper failed (`journalctl --user -u {}` says why); {fix}",
                k.unit
            );
        }
        s if s.contains(' ') => return format!("its state cannot be read ({s})"),
        _ => return format!("the keeper is not running; {fix}"),
    }
    match &k.state {
        Some(s) if s.state == "blocked" => s.last_error.clone(),
        Some(s) if s.failures > 0 => format!(
            "its last {} fill(s) failed (`journalctl --user -u {}`)",
            s.failures, k.unit
        ),
        _ if !k.error.is_empty() => format!("its state file cannot be read ({})", k.error),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(active: &str, state: Option<KeeperState>) -> PoolView {
        let pool = Pool {
            size: 2,
            max_idle_s: 7200,
            warm_before_s: 600,
        };
        PoolView::new(
            &pool,
            Ok(Counts::default()),
            KeeperView {
                unit: "cyclix-pool@t.service".into(),
                active_state: active.into(),
                state,
                error: String::new(),
            },
        )
    }

    #[test]
    fn a_running_keeper_refills_and_a_stopped_or_failing_one_does_not() {
        let ts = |ms: u128| format!("T{ms}");
        let full = KeeperState {
            state: "full".into(),
            want: 2,
            ..KeeperState::default()
        };
        let v = view("active", Some(full.clone()));
        assert!(v.refilling, "{v:?}");
        assert_eq!(
            v.lines(0, &ts),
            [
                "pool: size 2: 0 ready, 0 filling, 0 claimed, 0 expiring",
                "cyclix-pool@t.service: active: keeping 2 ready"
            ]
        );
        let v = view("inactive", Some(full));
        assert!(!v.refilling);
        assert_eq!(
            v.lines(0, &ts)[1],
            "cyclix-pool@t.service: inactive; cannot refill: the keeper is not running; `cyclix install` enables and starts it"
        );
        let failing = KeeperState {
            state: "retrying".into(),
            last_error: "boom".into(),
            failures: 3,
            ..KeeperState::default()
        };
        let v = view("active", Some(failing.clone()));
        assert!(!v.refilling);
        assert!(v.why_not.contains("its last 3 fill(s) failed"), "{v:?}");
        assert!(v.lines(0, &ts)[1].contains("last fill error (T0, 3 in a row): boom"));
        let v = view("failed", Some(failing));
        assert!(v.lines(0, &ts)[1].contains("its last words: cannot refill; last fill error"));
        assert!(v.why_not.starts_with("the keeper failed"), "{v:?}");
    }
}
