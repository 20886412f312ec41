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

/// Moves the records a full state dir left in `fallback` (the runtime dir) back into `records`
/// (oldest first, so `latest.json` ends at the newest); one notice each. A record that still
/// cannot be written stays where it is, and the notice says so. Such a run finished: its
/// ledger may still be in `records` (its removal failed too), and [`converge_tenant`] then
/// finds the record and keeps it instead of writing a death.
#[must_use]
pub fn restore_fallback(records: &Path, fallback: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(fallback) else {
        return Vec::new();
    };
    let mut files: Vec<std::path::PathBuf> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name().is_some_and(|n| n != "latest.json")
        })
        .collect();
    files.sort();
    let mut notes = Vec::new();
    for f in files {
        let moved = std::fs::read(&f)
            .ok()
            .and_then(|b| serde_json::from_slice::<RunRecord>(&b).ok())
            .map(|rec| record::write(records, &rec).map(|_| rec.run_id));
        match moved {
            Some(Ok(run)) => {
                let _ = std::fs::remove_file(&f);
                notes.push(format!(
                    "run {run}'s record was in {} (the state dir could not take it then); moved back to {}",
                    fallback.display(),
                    records.display()
                ));
            }
            Some(Err(e)) => notes.push(format!(
                "{} is still in the runtime dir: {e:#}",
                f.display()
            )),
            None => notes.push(format!(
                "{} is not a run record; left as it is",
                f.display()
            )),
        }
    }
    let _ = std::fs::remove_file(fallback.join("latest.json"));
    let _ = std::fs::remove_dir(fallback);
    notes
}

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
