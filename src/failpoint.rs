//! Fault-injection points: named places in the run lifecycle where a test can make cyclix die
//! with SIGKILL, as a real crash would (security-cases §3, "SIGKILL of toolkit mid-teardown …
//! repeat at each step"; issue 6's 100-run soak). Built on the `fail` crate (`TiKV`'s
//! fail-points).
//!
//! Armed only in debug builds (the ones the test suite runs), from the environment variable
//! `CYCLIX_FAILPOINTS`: a comma-separated list of point names, e.g.
//! `CYCLIX_FAILPOINTS=teardown.files`; `NAME=pause` makes the point pause instead, until the
//! test creates a file ([`PAUSE_DIR_ENV`]), so it can inject a fault (a manager reexec) at
//! exactly that place. Release builds never read it, so a shipped cyclix cannot be made to
//! die or wait this way.
//!
//! Point names: `phase.NAME` at the start of each run phase (`phase.prepare`, …,
//! `phase.teardown`, `phase.audit`), `teardown.STEP` before each teardown step
//! ([`TEARDOWN_STEPS`]), `ledger.KIND` right after each append of that kind to the run's
//! ledger (`run::ledger::KINDS`), and `record.written` between writing the run record and
//! removing the run's ledger, and `reload.confirm` between the install of a run's generated units and the look that
//! loads them (the place where a manager reexec met a run's `LoadUnit`, issue 36), and `claim.handed` right
//! after a claimed environment's proxy got the run's credentials, before the run takes it over, and `probe.reported` once the probe report is in, before the look that wants the held agent
//! container to hold only its init and agent-wait. A fill of a warm pool passes `pool.fill` once its subnet is reserved
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
    "load",
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
    "podman",
    "stop-units",
    "files",
    "reload",
    "secrets",
    "worktree",
    "branch",
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
        let (point, action) = match n.split_once('=') {
            Some((point, "pause")) => {
                if std::env::var_os(PAUSE_DIR_ENV).is_none() {
                    return Err(format!(
                        "{ENV}: point `{n}` pauses, but {PAUSE_DIR_ENV} (the directory of its \
                         `.paused` and `.go` files) is not set"
                    ));
                }
                (point, "return(pause)")
            }
            Some((_, other)) => {
                return Err(format!(
                    "{ENV}: point `{n}`: unknown action `{other}` (a name alone kills; NAME=pause pauses)"
                ));
            }
            None => (n.as_str(), "return"),
        };
        fail::cfg(point, action).map_err(|e| format!("{ENV}: point `{n}`: {e}"))?;
    }
    Ok(names)
}

/// The environment variable naming the directory of the pause points' files (debug builds):
/// at a point armed `NAME=pause` the process writes `DIR/NAME.paused` and waits until a test
/// creates `DIR/NAME.go`.
pub const PAUSE_DIR_ENV: &str = "CYCLIX_FAILPOINT_DIR";

/// The longest a pause point waits for its `.go` file before going on by itself: 300 s (a test
/// that died must not leave a run paused for good).
const PAUSE_MAX: std::time::Duration = std::time::Duration::from_secs(300);

/// Dies with SIGKILL here if the point `name` is armed; if it is armed `NAME=pause`, writes
/// `NAME.paused` in [`PAUSE_DIR_ENV`]'s directory and waits until `NAME.go` appears there (at
/// most [`PAUSE_MAX`]), so a test can inject a fault at exactly this place; otherwise does
/// nothing.
pub fn kill_point(name: &str) {
    fail::fail_point!(name, |action: Option<String>| {
        if action.as_deref() == Some("pause") {
            pause(name);
            return;
        }
        tracing::warn!("fail point {name}: SIGKILL");
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    });
}

/// The wait of a pause point (see [`kill_point`]).
fn pause(name: &str) {
    let Some(dir) = std::env::var_os(PAUSE_DIR_ENV).map(std::path::PathBuf::from) else {
        return;
    };
    let go = dir.join(format!("{name}.go"));
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::remove_file(&go);
    let _ = std::fs::write(dir.join(format!("{name}.paused")), b"");
    tracing::warn!("fail point {name}: paused until {} exists", go.display());
    let end = std::time::Instant::now() + PAUSE_MAX;
    while !go.exists() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
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
