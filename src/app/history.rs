//! The run history as the verbs show it (`runs`, `notify`): one line per run record, newest
//! first, with its cause.

use std::path::Path;

use serde::Serialize;

use super::clock::utc_timestamp;
use crate::run::record::{RunRecord, RunResult};

/// The JSON schema name of `cyclix runs --json`.
pub const SCHEMA: &str = "cyclix-runs/1";

/// One line of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunLine {
    /// Tenant.
    pub tenant: String,
    /// Run id.
    pub run_id: String,
    /// When the run started, ms since the Unix epoch (its first phase); `None` when it
    /// recorded no phase.
    pub started_ms: Option<u128>,
    /// Its start as `YYYY-MM-DD HH:MM:SS UTC`.
    pub started: Option<String>,
    /// Wall time from the first phase's start to the last phase's end, in ms.
    pub duration_ms: Option<u128>,
    /// The result (`passed`, `gate_failed`, …).
    pub result: RunResult,
    /// The run branch when it was kept (it has commits); `None` otherwise.
    pub branch: Option<String>,
    /// Why it did not pass: the first cause the host gave, the first refusal, the failed phase
    /// and its error, the agent's or gate's exit status, or the first leftover; `None` for a
    /// pass.
    pub cause: Option<String>,
}

/// The history line of one record.
#[must_use]
pub fn line(r: &RunRecord) -> RunLine {
    let started_ms = r.phases.first().map(|p| p.start_ms);
    let ended_ms = r.phases.iter().map(|p| p.end_ms).max();
    let cause = if r.result == RunResult::Passed {
        None
    } else {
        r.causes
            .first()
            .cloned()
            .or_else(|| r.refusal.first().cloned())
            .or_else(|| {
                r.failed_phase.as_ref().map(|p| match &r.error {
                    Some(e) => format!(
                        "phase {p}: {}",
                        e.strip_prefix(&format!("phase {p}: ")).unwrap_or(e)
                    ),
                    None => format!("phase {p}"),
                })
            })
            .or_else(|| match r.result {
                RunResult::AgentFailed => r.agent_exit.map(|c| format!("the agent exited {c}")),
                RunResult::AgentTimeout => Some("the agent ran past agent.timeout".to_string()),
                RunResult::GateFailed => r.gate_exit.map(|c| format!("the gate exited {c}")),
                RunResult::GateWeakened => r.gate_inventory.as_ref().map(|g| {
                    g.weakened.first().map_or_else(
                        || "the gate's results contradict its exit status".to_string(),
                        |w| format!("{} no longer runs ({} in all)", w.test, g.weakened_total),
                    )
                }),
                _ => None,
            })
            .or_else(|| r.leftovers.first().map(|l| format!("leftover: {l}")))
    };
    RunLine {
        tenant: r.tenant.clone(),
        run_id: r.run_id.clone(),
        started_ms,
        started: started_ms.map(utc_timestamp),
        duration_ms: started_ms.zip(ended_ms).map(|(s, e)| e.saturating_sub(s)),
        result: r.result,
        branch: (!r.commits.is_empty() && !r.branch.is_empty()).then(|| r.branch.clone()),
        cause,
    }
}

/// The lines of every record under `records_root` (only `tenant`'s when given), newest
/// first, and the records that did not parse (`path: error`).
#[must_use]
pub fn history(records_root: &Path, tenant: Option<&str>) -> (Vec<RunLine>, Vec<String>) {
    let (records, bad) = records(records_root, tenant);
    (records.iter().map(line).collect(), bad)
}

/// The run records of `tenant` (every tenant with `None`) under `records_root`, newest first
/// (by start, then run id), and one line per record file that does not parse.
#[must_use]
pub fn records(records_root: &Path, tenant: Option<&str>) -> (Vec<RunRecord>, Vec<String>) {
    let mut records = Vec::new();
    let mut bad = Vec::new();
    visit(records_root, tenant, &mut |r| match r {
        Ok(r) => records.push(r),
        Err(e) => bad.push(e),
    });
    let started = |r: &RunRecord| r.phases.first().map(|p| p.start_ms);
    records.sort_by(|a, b| {
        started(b)
            .cmp(&started(a))
            .then_with(|| b.run_id.cmp(&a.run_id))
    });
    bad.sort();
    (records, bad)
}

/// Hands each run record file of `tenant` (every tenant with `None`) under `records_root` to
/// `each`, one at a time in no order: the record, or `path: error` when it does not parse
/// (the metrics fold them without holding them all).
pub fn visit(
    records_root: &Path,
    tenant: Option<&str>,
    each: &mut dyn FnMut(Result<RunRecord, String>),
) {
    let dirs: Vec<std::path::PathBuf> = match tenant {
        Some(t) => vec![records_root.join(t)],
        None => std::fs::read_dir(records_root)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect(),
    };
    for dir in dirs {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !matches!(crate::layout::parse_run_file(&name), Some((_, "json"))) {
                continue;
            }
            let p = e.path();
            each(
                std::fs::read(&p)
                    .map_err(|e| e.to_string())
                    .and_then(|b| {
                        serde_json::from_slice::<RunRecord>(&b).map_err(|e| e.to_string())
                    })
                    .map_err(|e| format!("{}: {e}", p.display())),
            );
        }
    }
}

/// One line of text: `STARTED  TENANT  RUN  RESULT  DURATION  CAUSE (branch B)`: the cause of
/// a run that did not pass, then its kept branch; a pass shows `branch B`, or `no commits`
/// when the agent committed nothing.
#[must_use]
pub fn text_line(l: &RunLine) -> String {
    let dash = || "-".to_owned();
    let duration = l
        .duration_ms
        .map_or_else(dash, |ms| format!("{}s", ms.div_ceil(1000)));
    // Why a run did not pass comes first; its kept branch (the work to look at) after it.
    let what = match (&l.branch, &l.cause) {
        (Some(b), Some(c)) => format!("{c} (branch {b})"),
        (Some(b), None) => format!("branch {b}"),
        (None, Some(c)) => c.clone(),
        // A pass that kept no branch: the agent committed nothing (newcomer trial 7, item 16).
        (None, None) if l.result == RunResult::Passed => "no commits".to_owned(),
        (None, None) => String::new(),
    };
    let result = l.result.as_str();
    format!(
        "{}  {}  {}  {result}  {duration}  {what}",
        l.started.clone().unwrap_or_else(dash),
        l.tenant,
        l.run_id
    )
    .trim_end()
    .to_owned()
}
