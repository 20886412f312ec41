//! The run of a tenant in progress, as `status`, `start`, `logs` and `uninstall` show it:
//! the tenant lock's holder (seen in `/proc/locks`, never taken), its phase note and its
//! services.

use std::time::SystemTime;

use serde::Serialize;

use crate::context::HostEnv;
use crate::run::record;

/// A run in progress, from the tenant lock's holder and the run's phase note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CurrentRun {
    /// The run id.
    pub run_id: String,
    /// The pid of the cyclix process running it.
    pub pid: u32,
    /// When it started (`YYYY-MM-DD HH:MM:SS UTC`).
    pub started: String,
    /// The phase it noted last (`probe`, `agent`, `teardown/files`, …), `None` before the first.
    pub phase: Option<String>,
    /// Seconds since it entered that phase (the phase note's modification time).
    pub in_phase_s: Option<u64>,
    /// Its services as the agent reaches them, from the run's context file (written by
    /// cyclix, bound read-only into the agent): `app at 127.0.0.1:20000 (in the pod; runs
    /// /work)`. Empty before the run rendered it or when it has no service.
    pub services: Vec<String>,
}

/// The run of `tenant` in progress: someone holds the tenant lock (seen in `/proc/locks`,
/// never taken here) and its file names the holder. `None` when no run holds it (nobody, or a
/// cyclix converging the tenant's dead claims: `run::lock::CONVERGING`).
#[must_use]
pub fn current_run(env: &HostEnv, tenant: &str) -> Option<CurrentRun> {
    let lock_path = env.runtime().ok()?.tenant_lock(tenant);
    let held = crate::run::storage_lock::file_lock_holders(&lock_path).is_ok_and(|h| !h.is_empty());
    let holder = held
        .then(|| crate::run::lock::peek(&lock_path))
        .flatten()
        .filter(|h| h.run_id != crate::run::lock::CONVERGING)?;
    let dir = record::tenant_dir(&env.state_home, tenant);
    let note = crate::layout::RunFiles::new(&dir, &holder.run_id).phase();
    let in_phase_s = std::fs::metadata(note)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .map(|d| d.as_secs());
    let services = env
        .runtime()
        .map(|rt| {
            service_lines(
                &rt.run_dir(&holder.run_id)
                    .join(crate::render::plan::CONTEXT_FILE),
            )
        })
        .unwrap_or_default();
    Some(CurrentRun {
        services,
        phase: crate::run::ledger::last_phase(&dir, &holder.run_id),
        in_phase_s,
        started: super::clock::utc_timestamp(holder.started_ms),
        pid: holder.pid,
        run_id: holder.run_id,
    })
}

/// One line per service of the run's context file `path` (`cyclix-context/1`, see
/// `render::plan::context_json`); none when it is absent or unreadable.
fn service_lines(path: &std::path::Path) -> Vec<String> {
    let Some(v) = std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
    else {
        return Vec::new();
    };
    let field = |s: &serde_json::Value, k: &str| s[k].as_str().unwrap_or("?").to_owned();
    v["services"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    let runs = s["worktree"]
                        .as_str()
                        .map_or(String::new(), |w| format!("; runs {w}"));
                    format!(
                        "{} at {} (in the pod{runs})",
                        field(s, "name"),
                        field(s, "address")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `run R in progress: phase P for N s (started T, pid P)`.
#[must_use]
pub fn current_line(c: &CurrentRun) -> String {
    let phase = c.phase.as_deref().map_or_else(
        || "starting".to_owned(),
        |p| match c.in_phase_s {
            Some(s) => format!("phase {p} for {s} s"),
            None => format!("phase {p}"),
        },
    );
    format!(
        "run {} in progress: {phase} (started {}, pid {})",
        c.run_id, c.started, c.pid
    )
}
