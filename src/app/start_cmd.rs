//! `cyclix start TENANT`: a run under the user manager, waited for.

use std::time::Duration;

use anyhow::Result;

use super::tenant::{run_unit, unit_manager};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::run::record::{self, RunRecord};
use crate::systemd::{JobMode, UnitManager};

/// How many of the run unit's last journal lines `start` prints when its run wrote no record.
const TAIL_LINES: usize = 12;

/// `cyclix start TENANT`: `StartUnit cyclix-run@TENANT.service`, waiting up to `wait` for the
/// run to finish (it is a oneshot), then prints the summary of the run THIS start made (never
/// an earlier run's) and exits by its result: 0 passed, 3 interrupted, 1 for any other
/// result (`exit`). A run that ended before writing a record (a missing
/// variable or image, found in `prepare`) gets the run unit's own lines of this start from the
/// journal, so the reason is on the terminal, not only in `journalctl`. While a run of the
/// tenant is in progress it starts nothing and names that run (exit 1).
///
/// # Errors
/// D-Bus failures.
pub fn run(env: &HostEnv, tenant: &str, wait: Duration) -> Result<Outcome> {
    let unit = run_unit(env, tenant)?;
    // A second start would queue behind the running one and wait silently (issue 19, item 5).
    if let Some(c) = super::current_run::current_run(env, tenant) {
        crate::stderrln!(
            "{unit} is busy: {}; nothing started (`cyclix status {tenant}` follows it, `cyclix stop {tenant}` stops it)",
            super::current_run::current_line(&c)
        );
        return Ok(Outcome::Findings);
    }
    let before = record::latest(&env.state_home, tenant)?.map(|r| r.run_id);
    let started_ms = super::clock::now_ms();
    let units = unit_manager(env)?;
    let t0 = std::time::Instant::now();
    let r = units.start(&unit, JobMode::Replace, wait);
    if r.is_err() {
        // A stop cancels the start job while the run still tears down and writes its record
        // (`deactivating`): the record is there once the unit has ended.
        wait_until_ended(&units, &unit, wait.saturating_sub(t0.elapsed()));
    }
    let ours =
        record::latest(&env.state_home, tenant)?.filter(|r| Some(&r.run_id) != before.as_ref());
    if let Some(rec) = &ours {
        crate::out!("{}", record::summary(rec));
    }
    Ok(outcome(ours.as_ref(), r.as_ref().err(), || {
        let status = units.unit_status(&unit).ok();
        let interrupted = status
            .as_ref()
            .and_then(|s| s.exec_main_status)
            .is_some_and(|c| c == i32::from(crate::exit::INTERRUPTED));
        let id = unit.strip_suffix(".service").unwrap_or(&unit);
        let lines = crate::journal::unit_messages_since(&unit, id, started_ms).unwrap_or_default();
        (interrupted, lines)
    }))
}

/// Waits (polling every 100 ms, at most `budget`) while `unit` is still activating or
/// deactivating; a unit whose state cannot be read ends the wait.
fn wait_until_ended(units: &dyn UnitManager, unit: &str, budget: Duration) {
    use crate::systemd::ActiveState;
    let t0 = std::time::Instant::now();
    while t0.elapsed() < budget {
        match units.unit_status(unit) {
            Ok(s)
                if matches!(
                    s.active_state,
                    ActiveState::Activating | ActiveState::Deactivating
                ) =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            _ => return,
        }
    }
}

/// The verb's outcome: the record's result when this start wrote one; otherwise the unit's
/// failure, with its journal lines of this start (`no_record()`: whether its main process
/// exited [`crate::exit::INTERRUPTED`], and its lines) on stderr.
fn outcome(
    ours: Option<&RunRecord>,
    failed: Option<&crate::systemd::Error>,
    no_record: impl FnOnce() -> (bool, Vec<String>),
) -> Outcome {
    if let Some(rec) = ours {
        return match rec.result.exit_code() {
            crate::exit::OK => Outcome::Ok,
            crate::exit::INTERRUPTED => Outcome::Interrupted,
            _ => Outcome::Findings,
        };
    }
    let Some(e) = failed else {
        // The unit finished and wrote no record: nothing ran (e.g. an `ExecCondition=`).
        crate::stderrln!("the run unit finished without writing a run record");
        return Outcome::Findings;
    };
    let (interrupted, lines) = no_record();
    crate::stderrln!("error: {e}");
    let own: Vec<&String> = lines
        .iter()
        .filter(|l| !l.starts_with("Starting ") && !l.starts_with("Started "))
        .collect();
    if !own.is_empty() {
        crate::stderrln!("the run wrote no record; the run unit said:");
        for l in &own[own.len().saturating_sub(TAIL_LINES)..] {
            crate::stderrln!("  {}", crate::text::printable(l));
        }
    }
    if interrupted {
        Outcome::Interrupted
    } else {
        Outcome::Findings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::record::RunResult;
    use crate::systemd::{JobResult, Op};

    fn rec(result: RunResult) -> RunRecord {
        let mut r = RunRecord::new("acme", "20261202t000000-abcd", "container".into());
        r.result = result;
        r
    }

    fn failed() -> crate::systemd::Error {
        crate::systemd::Error::JobFailed {
            unit: "cyclix-run@acme.service".into(),
            op: Op::Start,
            result: JobResult::Canceled,
            state: "inactive/dead".into(),
        }
    }

    #[test]
    fn the_outcome_follows_this_starts_record_and_never_reads_the_journal_then() {
        let never =
            || -> (bool, Vec<String>) { panic!("the journal is read only without a record") };
        assert_eq!(
            outcome(Some(&rec(RunResult::Passed)), None, never),
            Outcome::Ok
        );
        assert_eq!(
            outcome(Some(&rec(RunResult::Interrupted)), Some(&failed()), never),
            Outcome::Interrupted
        );
        assert_eq!(
            outcome(Some(&rec(RunResult::GateFailed)), Some(&failed()), never),
            Outcome::Findings
        );
        assert_eq!(
            outcome(Some(&rec(RunResult::Error)), Some(&failed()), never),
            Outcome::Findings
        );
    }

    #[test]
    fn without_a_record_the_units_exit_status_decides() {
        let lines = vec![
            "Starting cyclix-run@acme.service...".to_string(),
            "error: agent.env names `K`".into(),
        ];
        assert_eq!(
            outcome(None, Some(&failed()), || (true, lines.clone())),
            Outcome::Interrupted
        );
        assert_eq!(
            outcome(None, Some(&failed()), || (false, lines)),
            Outcome::Findings
        );
        assert_eq!(
            outcome(None, None, || (false, Vec::new())),
            Outcome::Findings
        );
    }
}
