//! Fault-injection points: named places in the run lifecycle where a test can make cyclix die
//! with SIGKILL, as a real crash would (security-cases §3, "SIGKILL of toolkit mid-teardown …
//! repeat at each step"; issue 6's 100-run soak). Built on the `fail` crate (`TiKV`'s
//! fail-points).
//!
//! Armed only in debug builds (the ones the test suite runs), from the environment variable
//! `CYCLIX_FAILPOINTS`: a comma-separated list of point names, e.g.
//! `CYCLIX_FAILPOINTS=teardown.files`. Release builds never read it, so a shipped cyclix
//! cannot be made to die this way.
//!
//! Point names: `phase.NAME` at the start of each run phase (`phase.prepare`, …,
//! `phase.teardown`, `phase.audit`), `teardown.STEP` before each teardown step
//! ([`TEARDOWN_STEPS`]), `ledger.KIND` right after each append of that kind to the run's
//! ledger (`run::ledger::KINDS`), and `record.written` between writing the run record and
//! removing the run's ledger. A fill of a warm pool passes `pool.fill` once its subnet is reserved
//! and `pool.fill.started` once its environment runs; the *hold* point `pool.fill.held`
//! ([`hold_point`]) there blocks instead of dying, for a test that kills the process from outside.

/// The phases of a run of tier `container` that gets to its gate, in order, each a point
/// `phase.NAME` (the run record's `phases` list the same names). A spec with `gate.protected`
/// has `gate-base` before `gate` (unless the base's inventory is kept from an earlier run);
/// a passed run of a spec with `delivery:` has `deliver` after `collect`.
pub const PHASES: &[&str] = &[
    "queue",
    "prepare",
    "render",
    "install",
    "reload",
    "start",
    "probe",
    "agent",
    "escape-check",
    "import",
    "gate",
    "gate-escape-check",
    "collect",
    "teardown",
    "audit",
];

/// The teardown steps, in order, each a point `teardown.STEP`.
pub const TEARDOWN_STEPS: &[&str] = &[
    "stop-units",
    "files",
    "reload",
    "podman",
    "secrets",
    "branch",
    "worktree",
    "run-dir",
];

/// The environment variable that arms points in debug builds.
pub const ENV: &str = "CYCLIX_FAILPOINTS";

/// Arms the points named in [`ENV`] (debug builds only); returns their names.
///
/// # Errors
/// A name the `fail` crate rejects (the message names it).
pub fn arm_from_env() -> Result<Vec<String>, String> {
    if !cfg!(debug_assertions) {
        return Ok(Vec::new());
    }
    let Ok(list) = std::env::var(ENV) else {
        return Ok(Vec::new());
    };
    let names: Vec<String> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    for n in &names {
        fail::cfg(n.as_str(), "return").map_err(|e| format!("{ENV}: point `{n}`: {e}"))?;
    }
    Ok(names)
}

/// Dies with SIGKILL here if the point `name` is armed; otherwise does nothing.
pub fn kill_point(name: &str) {
    fail::fail_point!(name, |_| {
        tracing::warn!("fail point {name}: SIGKILL");
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    });
}

/// Blocks here for good if the point `name` is armed (the process waits to be killed from
/// outside, e.g. a test's `systemctl --user kill -s KILL` of a keeper mid-fill); otherwise
/// does nothing.
pub fn hold_point(name: &str) {
    fail::fail_point!(name, |_| {
        tracing::warn!("fail point {name}: holding until killed");
        crate::stderrln!("fail point {name}: holding until killed");
        loop {
            std::thread::park();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unarmed_point_does_nothing() {
        kill_point("phase.never-armed");
    }

    #[test]
    fn teardown_steps_are_distinct() {
        let mut v = TEARDOWN_STEPS.to_vec();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), TEARDOWN_STEPS.len());
    }
}
