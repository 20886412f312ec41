//! `cyclix twin TENANT`, the pure half: what the two environments and the reference produced
//! goes in, a verdict and the report come out. No I/O (guarded by tests/integration/architecture.rs).
//!
//! The twin fails on (one [`FailureClass`] each):
//! - `build`: an environment (or the reference) could not be built, started or run to the end
//!   of its quick suite;
//! - `probe`: a boundary probe failed in an environment;
//! - `results`: per-test results differ between the environments or from the reference (a
//!   test skipped in one and passed in another is a difference; a test missing on one side
//!   too), or, without `JUnit` results, the exit status or the normalised output digest differ;
//! - `counts`: the passed/failed/skipped/error counts differ;
//! - `shared`: the two rendered plans share a name or address ([`shared_names`]);
//! - `leftover`: anything was left after teardown.
//!
//! Per-test results ([`junit`]): the quick suite may write `JUnit` XML to `$CYCLIX_RESULTS`.
//! Without a results file the comparison falls back to the exit status plus a digest of the
//! suite's normalised output ([`output_digest`]), and the report says so.

mod comparison;
pub mod diff;
pub mod junit;
mod output;
mod report;
mod shared_names;

use serde::{Deserialize, Serialize};

pub use comparison::{Comparison, Failure, FailureClass, Row, judge};
pub use output::{cannot_start, normalise, output_digest};
pub use report::Report;
pub use shared_names::{SHAREABLE, Shared, shared_names};

use crate::render::plan::{Bind, RunPlan};

/// The report's JSON schema name.
pub const SCHEMA: &str = "cyclix-twin/1";

/// The results variable, directory and file of a gate's container (the quick suite's too):
/// [`crate::render::plan::RESULTS_ENV`] and its neighbours.
pub use crate::render::plan::{RESULTS_DIR_PATH, RESULTS_ENV, RESULTS_FILE};

/// The results directory's name in the run directory on the host.
pub const RESULTS_DIR: &str = "results";

/// How one test ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestOutcome {
    /// It passed.
    Passed,
    /// An assertion failed (`<failure>`).
    Failed,
    /// It was skipped (`<skipped>`, also pytest's xfail).
    Skipped,
    /// It could not run (`<error>`: a fixture or collection error).
    Error,
}

impl TestOutcome {
    /// `passed`, `failed`, `skipped`, `error`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            TestOutcome::Passed => "passed",
            TestOutcome::Failed => "failed",
            TestOutcome::Skipped => "skipped",
            TestOutcome::Error => "error",
        }
    }
}

/// One test's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestCase {
    /// `CLASSNAME::NAME` (see [`junit`]).
    pub name: String,
    /// How it ended.
    pub outcome: TestOutcome,
}

/// What the quick suite left to compare.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "contract")]
pub enum Results {
    /// Per-test results from the `JUnit` XML file at `$CYCLIX_RESULTS`.
    Junit {
        /// The test cases, in report order.
        tests: Vec<TestCase>,
    },
    /// No results file: the SHA-256 of the normalised output ([`output_digest`]).
    Digest {
        /// Lowercase hex.
        sha256: String,
        /// The normalised lines it digests (at most [`diff::MAX_LINES`]): the failure shows
        /// how they differ.
        #[serde(skip)]
        lines: Vec<String>,
    },
    /// A results file that could not be read or parsed.
    Unreadable {
        /// Why.
        reason: String,
    },
}

/// One run of the quick suite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SuiteRun {
    /// Its exit status.
    pub exit: i32,
    /// What it left to compare.
    pub results: Results,
}

/// Counts of outcomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Passed tests.
    pub passed: usize,
    /// Failed tests.
    pub failed: usize,
    /// Skipped tests.
    pub skipped: usize,
    /// Tests that could not run.
    pub error: usize,
}

impl Counts {
    /// The counts of `tests`.
    #[must_use]
    pub fn of(tests: &[TestCase]) -> Self {
        let mut c = Counts::default();
        for t in tests {
            match t.outcome {
                TestOutcome::Passed => c.passed += 1,
                TestOutcome::Failed => c.failed += 1,
                TestOutcome::Skipped => c.skipped += 1,
                TestOutcome::Error => c.error += 1,
            }
        }
        c
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped, {} error",
            self.passed, self.failed, self.skipped, self.error
        )
    }
}

/// What one side (environment A, B or the reference) produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Side {
    /// `A`, `B` or `reference`.
    pub label: String,
    /// Its run id.
    pub run_id: String,
    /// Its podman networks (`none` for the reference's `Network=none` container).
    pub networks: Vec<String>,
    /// Its internal subnet, when it has one.
    pub subnet: Option<String>,
    /// Its pod, when it has one.
    pub pod: Option<String>,
    /// How many boundary probes passed (environments only).
    pub probes_passed: usize,
    /// Failed probes and other boundary findings, each `ID: expected …, got …`.
    pub probe_failures: Vec<String>,
    /// The first error that stopped it, naming its phase (`phase start: …`).
    pub error: Option<String>,
    /// The quick suite's run, when it ran to its end.
    pub suite: Option<SuiteRun>,
    /// What was left after its teardown.
    pub leftovers: Vec<String>,
    /// When it was up (probes passed), ms since the Unix epoch.
    pub up_ms: Option<u128>,
    /// When its teardown started, ms since the Unix epoch.
    pub down_ms: Option<u128>,
}

/// Makes a plan's gate container run the quick suite with a results directory: `argv` as its
/// command, `results_host_dir` mounted read-write at [`RESULTS_DIR_PATH`] and
/// `CYCLIX_RESULTS=RESULTS_DIR_PATH/RESULTS_FILE` in its environment. Everything else of the
/// gate (Network=none, read-only root and worktree, dropped capabilities) stays.
///
/// # Errors
/// When the plan has no gate container (a non-container tier).
pub fn quick_gate(
    plan: &mut RunPlan,
    argv: &[String],
    results_host_dir: &str,
) -> Result<(), String> {
    let names = crate::naming::RunNames::new(&plan.run_id);
    // The gate's run on the base tree (`gate.protected`) is the run's, not the twin's.
    let base_stem = names.gate_base();
    plan.containers.retain(|c| c.stem != base_stem);
    if let Some(unit) = plan.units.gate_base.take() {
        plan.units.all.retain(|u| *u != unit);
    }
    let gate_stem = names.gate();
    let gate = plan
        .containers
        .iter_mut()
        .find(|c| c.stem == gate_stem)
        .ok_or_else(|| format!("the plan has no gate container {gate_stem}"))?;
    gate.exec = argv.to_vec();
    gate.exec_key = "gate.quick".into();
    gate.binds.retain(|b| b.target != RESULTS_DIR_PATH);
    gate.env.retain(|(k, _)| k != RESULTS_ENV);
    gate.binds.push(Bind {
        source: results_host_dir.to_string(),
        target: RESULTS_DIR_PATH.into(),
        read_only: false,
    });
    gate.env.push((
        RESULTS_ENV.into(),
        format!("{RESULTS_DIR_PATH}/{RESULTS_FILE}"),
    ));
    Ok(())
}

#[cfg(test)]
mod tests;
