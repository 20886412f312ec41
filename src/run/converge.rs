//! Convergence after a cyclix that died mid-run (SIGKILL, OOM, power loss of the session): each
//! run keeps a ledger (`RUN.running` beside its record, [`super::ledger`]) naming everything
//! it may have created; the next run of the tenant, holding the tenant lock (so the ledger's
//! owner is gone), finishes that run's teardown over its ledger (the same teardown a live run
//! ends with), audits it and records what it found (security-cases §3 "SIGKILL of toolkit
//! mid-teardown"). A step that fails is named in the record, never hidden.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::ledger::{self, Entry, Ledger, Owner};
use super::phases::{audit, teardown};
use super::record::{self, RunRecord};
use super::seam::RunHost;
use super::state::RunState;
use super::storage_lock::{self, WaitError};
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

/// Bound on one convergence, all dead runs of the tenant together (5 min): each podman and
/// systemd call has its own deadline, and a run whose turn comes after the bound is left, with
/// its marker, for the next run (issue 20 item 3: a convergence under a held storage lock ran
/// 226 s).
pub const DEADLINE: Duration = Duration::from_secs(300);

/// What convergence needs besides the tenant's records dir.
pub struct Converging<'a> {
    /// The user manager.
    pub units: &'a (dyn UnitManager + Sync),
    /// The host.
    pub host: &'a dyn RunHost,
    /// The converging run's id (named in the dead run's record).
    pub by: &'a str,
    /// How long to wait for podman's storage lock before giving up on a dead run that made
    /// podman objects (the run's `--storage-lock-wait`).
    pub lock_wait: Duration,
    /// When the user manager now running started (ms since the epoch, from
    /// [`super::procs::user_manager_started_ms`]); a dead run that began before it lost its
    /// user manager mid-run.
    pub manager_started_ms: Option<u64>,
    /// This user's uid (the user manager is `user@UID.service`).
    pub uid: u32,
}

/// Finishes the teardown of every run of the tenant whose cyclix died (call holding the
/// tenant lock), writes each one's record (unless it had written its own: then that stays
/// the truth; a record an earlier convergence wrote is replaced) and removes its marker only
/// when the teardown had no error and the audit found nothing left; otherwise the marker stays
/// and the next run tries again. Returns a notice per dead run for the record of run `by`.
///
/// # Errors
/// A record could not be written.
pub fn converge_tenant(records: &Path, c: &Converging<'_>) -> Result<Vec<String>> {
    let t0 = Instant::now();
    let mut converged = Vec::new();
    for (owner, entries) in ledger::all(records) {
        let run_id = owner.run_id.clone();
        let left_time = DEADLINE.saturating_sub(t0.elapsed());
        if left_time.is_zero() {
            converged.push(format!(
                "run {run_id} left by a cyclix that died was not converged: convergence ran \
                 out of its {} s; its marker is kept, the next run tries again",
                DEADLINE.as_secs()
            ));
            continue;
        }
        crate::stderrln!(
            "cyclix: run {run_id} of tenant {} was left mid-way; finishing its teardown",
            owner.tenant
        );
        let died_in = ledger::last_phase(records, &run_id);
        let files = RunFiles::new(records, &run_id);
        let earlier = std::fs::read(files.record())
            .ok()
            .and_then(|b| serde_json::from_slice::<RunRecord>(&b).ok());
        let wait = c.lock_wait.min(left_time);
        let (mut rec, done) = converge(&owner, entries, c, wait, died_in);
        // A cyclix that died after writing its own record (between the record and the
        // ledger's removal) had finished: its record stays the truth. A record convergence
        // wrote (phase `interrupted`) is an earlier attempt: replaced, and named.
        let finished = earlier
            .as_ref()
            .is_some_and(|r| r.failed_phase.as_deref() != Some("interrupted"));
        if !finished {
            if let Some(e) = earlier.and_then(|r| r.error) {
                rec.notices
                    .push(format!("an earlier convergence kept the marker: {e}"));
            }
            record::write_only(records, &rec)?;
        }
        let manager = if rec.causes.iter().any(|c| c.starts_with(MANAGER_DIED)) {
            " (its user manager died mid-run)"
        } else {
            ""
        };
        if done {
            ledger::remove(records, &run_id);
            converged.push(format!(
                "converged run {run_id} left by a cyclix that died{}{manager}: {} leftover(s)",
                if finished {
                    " after writing its record"
                } else {
                    ""
                },
                rec.leftovers.len()
            ));
        } else {
            converged.push(format!(
                "run {run_id} left by a cyclix that died{manager} is NOT converged: {}; its marker \
                 {} is kept and the next run tries again",
                rec.causes.join("; "),
                files.marker().display()
            ));
        }
    }
    converged.extend(record_runs_dead_before_their_ledger(records)?);
    Ok(converged)
}

/// The runs whose cyclix died before it made their ledger (waiting for a run slot, or in the
/// claim: `cyclix run` queues before it claims): only their phase note (`RUN.phase`, no
/// `RUN.running`) is left, and nothing of them to tear down. Each gets its record (`died_in`
/// the noted phase, no leftovers) unless it has one, and its note goes. The caller holds the
/// tenant lock, so no such note is a live run's.
fn record_runs_dead_before_their_ledger(records: &Path) -> Result<Vec<String>> {
    let tenant = records
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut notes = Vec::new();
    let Ok(rd) = std::fs::read_dir(records) else {
        return Ok(notes);
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(run_id) = name.strip_suffix(".phase") else {
            continue;
        };
        let files = RunFiles::new(records, run_id);
        if files.marker().exists() {
            continue;
        }
        let phase = ledger::last_phase(records, run_id).unwrap_or_else(|| "queue".into());
        if !files.record().exists() {
            let mut rec = RunRecord::interrupted(
                &tenant,
                run_id,
                format!(
                    "its cyclix died in phase {phase}, before the run made anything (no ledger): \
                     nothing to tear down"
                ),
                Vec::new(),
            );
            rec.died_in = Some(phase.clone());
            record::write_only(records, &rec)?;
            notes.push(format!(
                "run {run_id} died in phase {phase} before it made anything: recorded, nothing left"
            ));
        }
        let _ = std::fs::remove_file(files.phase());
    }
    Ok(notes)
}

/// How a cause naming a user manager that died mid-run starts.
const MANAGER_DIED: &str = "the user manager died or restarted during the run";

/// Finishes the teardown of the dead run of `owner` over its ledger `entries` and audits it;
/// returns its record (result `error`, phase `interrupted`, what was left after convergence,
/// any teardown step that failed, the causes) and whether the run is converged (no step
/// failed, nothing left). When the run made podman objects and podman's storage lock stays
/// held for `lock_wait`, nothing is touched: podman could not remove anything.
#[must_use]
pub fn converge(
    owner: &Owner,
    entries: Vec<Entry>,
    c: &Converging<'_>,
    lock_wait: Duration,
    died_in: Option<String>,
) -> (RunRecord, bool) {
    let ledger = Ledger::of(entries);
    let files = ledger.files().filter(|f| f.exists()).count();
    let during = died_in
        .as_deref()
        .map_or_else(|| "the run".to_string(), |p| format!("phase {p}"));
    let mut causes = Vec::new();
    if let Some(m) = c.manager_started_ms.filter(|m| *m > owner.started_ms) {
        causes.push(format!(
            "{MANAGER_DIED}: the user manager running now started {} s after the run began, so \
             it stopped the run's cyclix and units with it (a SIGKILL of `systemd --user`, an \
             OOM kill, a reboot); linger does not restart a user manager that died: as root \
             `systemctl start user@{}.service` (`cyclix check` tells)",
            (m - owner.started_ms) / 1000,
            c.uid
        ));
    }
    let ended = format!(
        "cyclix (pid {}) ended during {during} without tearing the run down",
        owner.pid
    );
    if ledger.podman()
        && let Err(WaitError::Busy { holders, waited }) = storage_lock::wait_free(
            || c.host.storage_lock_holders(None),
            lock_wait,
            Duration::from_millis(100).min(lock_wait),
            || false,
        )
    {
        let held = format!(
            "podman's storage lock is held: {} (for more than {} s)",
            storage_lock::describe(&holders),
            waited.as_secs()
        );
        causes.push(format!("convergence blocked: {held}"));
        return (
            blocked(owner, &ledger, c, &ended, &held, causes, died_in),
            false,
        );
    }
    let mut st = RunState::new(ledger);
    let t = teardown::Teardown {
        run_id: &owner.run_id,
        repo: &owner.repo,
        stop: STOP,
        progress: None,
        converging: true,
    };
    // A build's `RUN` steps outlive a killed cyclix in scopes of their own: killed first.
    c.host.kill_build_steps(&owner.run_id);
    let torn = teardown::teardown(&t, c.units, c.host, &mut st);
    // Teardown's only notice is the run branch's deletion (it had no commits).
    let branch_note = if st.notices.is_empty() {
        ""
    } else {
        ", its branch (no commits)"
    };
    let mut left = audit::of_ledger(&owner.run_id, c.units, c.host, &st.ledger)
        .unwrap_or_else(|e| vec![Leftover::finding(format!("inventory failed: {e:#}"))]);
    left.extend(
        c.host
            .run_processes(&owner.run_id)
            .unwrap_or_else(|e| vec![Leftover::finding(format!("process listing failed: {e:#}"))]),
    );
    let what = format!(
        "{files} unit files, the labelled podman objects, secrets, worktree{branch_note}, run dir"
    );
    let left = inventory::texts(&left);
    let error = match &torn {
        Ok(()) if left.is_empty() => {
            format!("{ended}; run {} finished the teardown ({what})", c.by)
        }
        Ok(()) => format!(
            "{ended}; run {} ran the teardown ({what}), but the audit found {} thing(s) left; \
             the run's marker is kept: the tenant's next run tries again",
            c.by,
            left.len()
        ),
        Err(e) => format!(
            "{ended}; run {} tried to finish the teardown ({what}), and these steps failed: \
             {e:#}; the run's marker is kept: the tenant's next run tries again",
            c.by
        ),
    };
    let done = torn.is_ok() && left.is_empty();
    if !done {
        causes.push(format!(
            "convergence incomplete: {}",
            match &torn {
                Err(_) => "teardown steps failed".to_string(),
                Ok(()) => format!("{} thing(s) left", left.len()),
            }
        ));
    }
    let all = format!("{error} {}", left.join(" "));
    if let Some(fix) = podman_fix(&all) {
        causes.push(fix);
    }
    let mut rec = RunRecord::interrupted(&owner.tenant, &owner.run_id, error, left);
    rec.died_in = died_in;
    rec.causes = causes;
    (rec, done)
}

/// The record of a dead run whose convergence could not reach podman (`held`: why): nothing
/// was touched; what the ledger names that is still there, and the podman objects unlisted.
fn blocked(
    owner: &Owner,
    ledger: &Ledger,
    c: &Converging<'_>,
    ended: &str,
    held: &str,
    causes: Vec<String>,
    died_in: Option<String>,
) -> RunRecord {
    let error = format!(
        "{ended}; run {} could not finish the teardown: {held}, so podman can neither stop \
         nor remove the run's objects; nothing was removed and the run's marker is kept: \
         the tenant's next run tries again (if the holder is stuck, end it: `kill PID`)",
        c.by
    );
    let mut left = remaining_without_podman(owner, ledger, c);
    left.push(format!(
        "the run's podman objects (label {}): not listed, podman waits for its storage lock",
        crate::naming::run_filter(&owner.run_id)
    ));
    let mut rec = RunRecord::interrupted(&owner.tenant, &owner.run_id, error, left);
    rec.died_in = died_in;
    rec.causes = causes;
    rec
}

/// The things of `ledger` (without its podman objects) still there, for a convergence that
/// could not ask podman.
fn remaining_without_podman(owner: &Owner, ledger: &Ledger, c: &Converging<'_>) -> Vec<String> {
    let no_podman = Ledger::of(
        ledger
            .entries()
            .iter()
            .filter(|e| !matches!(e, Entry::Podman))
            .cloned()
            .collect(),
    );
    inventory::texts(
        &audit::of_ledger(&owner.run_id, c.units, c.host, &no_podman)
            .unwrap_or_else(|e| vec![Leftover::finding(format!("inventory failed: {e:#}"))]),
    )
}

/// A cause with the fix when podman's own words in `text` ask for `podman system migrate`
/// (measured after a SIGKILL of the user manager: podman's pause process was gone and podman
/// printed "invalid internal status, try resetting the pause process with \"podman system
/// migrate\""; the migrate itself then crashed in `teardownNetworkBackend` once per running
/// container, podman 5.4.2, and exited 0 on the call after the last).
#[must_use]
pub fn podman_fix(text: &str) -> Option<String> {
    (text.contains("podman system migrate") || text.contains("invalid internal status")).then(
        || {
            "podman needs `podman system migrate` (its pause process died, e.g. with the user \
         manager): run `podman system migrate` as this user (it stops the user's containers; \
         podman 5.4 may crash in it once per container it stops: repeat until it exits 0), \
         then run again (the tenant's next run converges what is left)"
                .to_string()
        },
    )
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
