//! What a run of the lifecycle should end with, as one row of a table (the shape of
//! nextest's expected outcomes and just's `Test`): the result and its exit code, the failed
//! phase and what its error says, the agent's and the gate's exit, whether the gate ran; and
//! always that the run left nothing. [`Expect::check`] reports every mismatch at once, with the
//! record.

use super::{World, nothing_left, started};
use crate::run::record::{RunRecord, RunResult};
use crate::run::seam::FakeRunHost;
use crate::systemd::FakeUnitManager;

/// An exit code to check: not at all, or as read (`None`: none was).
#[derive(Debug, Clone, Copy, Default)]
enum Exit {
    #[default]
    Unchecked,
    Is(Option<i32>),
}

/// One row: what is set is checked, the rest is not.
#[derive(Debug, Clone, Default)]
pub(super) struct Expect {
    result: Option<RunResult>,
    failed_phase: Option<&'static str>,
    error_has: Vec<String>,
    agent_exit: Exit,
    gate_exit: Exit,
    gate_ran: Option<bool>,
}

impl Expect {
    /// A run with `result`.
    pub(super) fn result(result: RunResult) -> Self {
        Expect {
            result: Some(result),
            ..Expect::default()
        }
    }

    /// A run that is an error (exit 2) in `phase`, its error naming the phase, torn down to
    /// nothing.
    pub(super) fn error_in(phase: &'static str) -> Self {
        Expect {
            result: Some(RunResult::Error),
            failed_phase: Some(phase),
            error_has: vec![format!("phase {phase}")],
            ..Expect::default()
        }
    }

    /// The agent's exit code as read (`None`: none was).
    pub(super) fn agent(mut self, exit: Option<i32>) -> Self {
        self.agent_exit = Exit::Is(exit);
        self
    }

    /// The gate's exit code as read (`None`: none was).
    pub(super) fn gate(mut self, exit: Option<i32>) -> Self {
        self.gate_exit = Exit::Is(exit);
        self
    }

    /// Whether the gate's unit was started at all.
    pub(super) fn gate_ran(mut self, ran: bool) -> Self {
        self.gate_ran = Some(ran);
        self
    }

    /// The record's error holds `text`.
    pub(super) fn error_has(mut self, text: impl Into<String>) -> Self {
        self.error_has.push(text.into());
        self
    }

    /// Checks `rec`, then that nothing is left on `host` or in `w`'s directories; panics
    /// listing every mismatch, labelled `row`.
    pub(super) fn check(
        &self,
        row: &str,
        w: &World,
        rec: &RunRecord,
        units: &FakeUnitManager,
        host: &FakeRunHost,
    ) {
        let mut wrong: Vec<String> = Vec::new();
        let mut want = |what: &str, ok: bool, saw: String| {
            if !ok {
                wrong.push(format!("{what}: saw {saw}"));
            }
        };
        if let Some(r) = self.result {
            want(
                &format!("result {r:?}"),
                rec.result == r,
                format!("{:?}", rec.result),
            );
            let code = r.exit_code();
            want(
                &format!("exit code {code}"),
                rec.result.exit_code() == code,
                rec.result.exit_code().to_string(),
            );
        }
        if let Some(p) = self.failed_phase {
            want(
                &format!("failed phase {p}"),
                rec.failed_phase.as_deref() == Some(p),
                format!("{:?}", rec.failed_phase),
            );
        }
        for text in &self.error_has {
            want(
                &format!("an error holding {text:?}"),
                rec.error
                    .as_deref()
                    .is_some_and(|e| e.contains(text.as_str())),
                format!("{:?}", rec.error),
            );
        }
        if let Exit::Is(e) = self.agent_exit {
            want(
                &format!("agent exit {e:?}"),
                rec.agent_exit == e,
                format!("{:?}", rec.agent_exit),
            );
        }
        if let Exit::Is(e) = self.gate_exit {
            want(
                &format!("gate exit {e:?}"),
                rec.gate_exit == e,
                format!("{:?}", rec.gate_exit),
            );
        }
        if let Some(ran) = self.gate_ran {
            let gate = "cyclix-r1-gate.service".to_owned();
            let did = started(units).contains(&gate);
            want(&format!("gate ran: {ran}"), did == ran, did.to_string());
        }
        assert!(
            wrong.is_empty(),
            "{row}: {}\nrecord: {rec:?}",
            wrong.join("; ")
        );
        nothing_left(w, rec, host);
    }
}

/// The control: a row that does not hold fails, naming what it wanted and what it saw.
#[test]
#[should_panic(expected = "the agent exits 3: result Passed: saw AgentFailed")]
fn a_row_that_does_not_hold_fails_naming_what_it_wanted() {
    let w = super::world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 3);
    let host = FakeRunHost::default();
    let rec = super::execute(
        &w.inp,
        crate::run::ledger::Ledger::in_memory(),
        &units,
        &host,
    );
    Expect::result(RunResult::Passed).check("the agent exits 3", &w, &rec, &units, &host);
}
