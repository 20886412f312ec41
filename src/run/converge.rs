//! Convergence after a cyclix that died mid-run (SIGKILL, OOM, power loss of the session): each
//! run keeps a ledger (`RUN.running` beside its record, [`super::ledger`]) naming everything
//! it may have created; the next run of the tenant, holding the tenant lock (so the ledger's
//! owner is gone), finishes that run's teardown over its ledger (the same teardown a live run
//! ends with), audits it and records what it found (security-cases §3 "SIGKILL of toolkit
//! mid-teardown"). A step that fails is named in the record, never hidden.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::ledger::{self, Entry, Ledger, Owner};
use super::lifecycle::RunState;
use super::phases::{audit, teardown};
use super::record::{self, RunRecord};
use super::seam::RunHost;
use crate::inventory::{self, Leftover};
use crate::layout::RunFiles;
use crate::systemd::UnitManager;

/// How long convergence waits for one of the dead run's units to stop.
const STOP: Duration = Duration::from_secs(45);

/// Finishes the teardown of every run of the tenant whose cyclix died (call holding the
/// tenant lock), writes each one's record (unless it had written its own: then that stays
/// the truth) and removes its ledger. Returns a notice per converged run for the record of
/// run `by`.
///
/// # Errors
/// A record could not be written.
pub fn converge_tenant(
    records: &Path,
    units: &dyn UnitManager,
    host: &dyn RunHost,
    by: &str,
) -> Result<Vec<String>> {
    let mut converged = Vec::new();
    for (owner, entries) in ledger::all(records) {
        let run_id = owner.run_id.clone();
        crate::stderrln!(
            "cyclix: run {run_id} of tenant {} was left mid-way; finishing its teardown",
            owner.tenant
        );
        let died_in = ledger::last_phase(records, &run_id);
        let rec = converge(&owner, entries, units, host, by, died_in);
        // A cyclix that died after writing its own record (between the record and the
        // ledger's removal) had finished: its record stays the truth.
        let finished = RunFiles::new(records, &run_id).record().exists();
        if !finished {
            record::write_only(records, &rec)?;
        }
        ledger::remove(records, &run_id);
        converged.push(format!(
            "converged run {run_id} left by a cyclix that died{}: {} leftover(s)",
            if finished {
                " after writing its record"
            } else {
                ""
            },
            rec.leftovers.len()
        ));
    }
    Ok(converged)
}

/// Finishes the teardown of the dead run of `owner` over its ledger `entries` and audits it;
/// returns its record (result `error`, phase `interrupted`, what was left after convergence,
/// and any teardown step that failed).
pub fn converge(
    owner: &Owner,
    entries: Vec<Entry>,
    units: &dyn UnitManager,
    host: &dyn RunHost,
    by: &str,
    died_in: Option<String>,
) -> RunRecord {
    let ledger = Ledger::of(entries);
    let files = ledger.files().filter(|f| f.exists()).count();
    let mut st = RunState::new(ledger);
    let t = teardown::Teardown {
        run_id: &owner.run_id,
        repo: &owner.repo,
        stop: STOP,
        progress: None,
        converging: true,
    };
    let torn = teardown::teardown(&t, units, host, &mut st);
    // Teardown's only notice is the run branch's deletion (it had no commits).
    let branch_note = if st.notices.is_empty() {
        ""
    } else {
        ", its branch (no commits)"
    };
    let mut left = audit::of_ledger(&owner.run_id, units, host, &st.ledger)
        .unwrap_or_else(|e| vec![Leftover::finding(format!("inventory failed: {e:#}"))]);
    left.extend(
        host.run_processes(&owner.run_id)
            .unwrap_or_else(|e| vec![Leftover::finding(format!("process listing failed: {e:#}"))]),
    );
    let during = died_in
        .as_deref()
        .map_or_else(|| "the run".to_string(), |p| format!("phase {p}"));
    let what = format!(
        "{files} unit files, the labelled podman objects, secrets, worktree{branch_note}, run dir"
    );
    let error = match torn {
        Ok(()) => format!(
            "cyclix (pid {}) ended during {during} without tearing the run down; run {by} \
             finished the teardown ({what})",
            owner.pid
        ),
        Err(e) => format!(
            "cyclix (pid {}) ended during {during} without tearing the run down; run {by} \
             tried to finish the teardown ({what}), and these steps failed: {e:#}",
            owner.pid
        ),
    };
    let mut rec =
        RunRecord::interrupted(&owner.tenant, &owner.run_id, error, inventory::texts(&left));
    rec.died_in = died_in;
    rec
}

impl RunRecord {
    /// The record of a run whose cyclix died and that a later run converged.
    #[must_use]
    pub fn interrupted(tenant: &str, run_id: &str, error: String, leftovers: Vec<String>) -> Self {
        RunRecord {
            failed_phase: Some("interrupted".into()),
            error: Some(error),
            leftovers,
            ..RunRecord::new(tenant, run_id, String::new())
        }
    }
}

#[cfg(test)]
mod tests;
