//! What `cyclix-run@TENANT.timer` does when it fires (`cyclix tick TENANT`, run by
//! `cyclix-tick@TENANT.service`): start the tenant's run, or, while one is active, record the
//! skipped trigger (security-cases §3 "timer fires while the previous run is active").
//!
//! systemd starts nothing when a timer elapses while the unit it triggers is still active and
//! says nothing about it (systemd.timer(5)); a run that outlasts its schedule's period would
//! lose triggers silently. The decision is [`decide`] (pure); the skips are JSON lines
//! appended to `$XDG_STATE_HOME/cyclix/runs/TENANT/skips.jsonl` (one `write` each, so
//! concurrent appends do not interleave), which `cyclix status` counts.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use super::lock::Holder;
use crate::systemd::{ActiveState, JobMode, UnitManager, UnitStatus};

/// The skips file in a tenant's records directory.
pub const SKIPS_FILE: &str = "skips.jsonl";

/// One trigger that did not start a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skip {
    /// When the trigger came, in ms since the Unix epoch.
    pub time_ms: u128,
    /// The tenant.
    pub tenant: String,
    /// What fired (`cyclix-run@TENANT.timer`).
    pub trigger: String,
    /// The active run, when its tenant lock names it.
    pub active_run: Option<String>,
    /// When that run started, in ms since the Unix epoch.
    pub active_since_ms: Option<u128>,
    /// The pid of the run's cyclix.
    pub active_pid: Option<u32>,
    /// The run unit's state at the trigger (`activating/start`), or `inactive/dead` when only
    /// the tenant lock was held (a `cyclix run TENANT` outside the unit).
    pub unit_state: String,
}

/// What a trigger does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start `cyclix-run@TENANT.service`.
    Start,
    /// A run is active: record this.
    Skip(Skip),
}

/// Decides a trigger of `tenant`'s timer at `now_ms`, from the run unit's status and the
/// tenant lock (`held`: some process holds it; `holder`: what the lock file says). The run is
/// active when its unit is activating/active/deactivating/reloading, has a job queued, or
/// the lock is held. Pure.
#[must_use]
pub fn decide(
    tenant: &str,
    now_ms: u128,
    unit: &UnitStatus,
    held: bool,
    holder: Option<&Holder>,
) -> Decision {
    let unit_busy = !matches!(
        unit.active_state,
        ActiveState::Inactive | ActiveState::Failed
    ) || unit.job_pending;
    if !unit_busy && !held {
        return Decision::Start;
    }
    // A lock file that is not locked may hold a dead run's name: only trust a held one.
    let holder = holder.filter(|_| held);
    Decision::Skip(Skip {
        time_ms: now_ms,
        tenant: tenant.to_string(),
        trigger: crate::naming::run_timer(tenant),
        active_run: holder.map(|h| h.run_id.clone()),
        active_since_ms: holder.map(|h| h.started_ms),
        active_pid: holder.map(|h| h.pid),
        unit_state: format!("{}/{}", unit.active_state, unit.sub_state),
    })
}

/// What a tick did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ticked {
    /// The run unit's start job was queued (its object path).
    Started(String),
    /// A run was active: the skip was appended to this file.
    Skipped(Skip, PathBuf),
}

/// One trigger of `tenant`'s timer: reads the run unit's status and who holds the tenant lock
/// at `lock_path` (from `/proc/locks`, without taking it), then queues the run unit's start
/// without waiting, or appends the skip to `records/skips.jsonl`.
///
/// # Errors
/// D-Bus failures, an unreadable `/proc/locks`, a skip that cannot be written.
pub fn tick(
    units: &dyn UnitManager,
    tenant: &str,
    lock_path: &Path,
    records: &Path,
    now_ms: u128,
) -> Result<Ticked> {
    let unit = crate::naming::run_service(tenant);
    let status = units.unit_status(&unit)?;
    let holder = super::lock::peek(lock_path);
    // A cyclix converging dead claims holds the lock for a moment, not a run: the run started
    // now waits for it (`lock::CONVERGING`).
    let held = !super::storage_lock::file_lock_holders(lock_path)?.is_empty()
        && holder
            .as_ref()
            .is_none_or(|h| h.run_id != super::lock::CONVERGING);
    Ok(
        match decide(tenant, now_ms, &status, held, holder.as_ref()) {
            Decision::Start => Ticked::Started(units.start_no_block(&unit, JobMode::Replace)?),
            Decision::Skip(s) => {
                let path = append(records, &s)?;
                Ticked::Skipped(s, path)
            }
        },
    )
}

/// Appends `skip` to `dir/skips.jsonl` (created if missing) in one write, and syncs it.
///
/// # Errors
/// I/O failures, naming the file.
pub fn append(dir: &Path, skip: &Skip) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(SKIPS_FILE);
    let mut line = serde_json::to_vec(skip).context("serialising the skip")?;
    line.push(b'\n');
    let mut f = std::fs::File::options()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    f.write_all(&line)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("appending to {}", path.display()))?;
    Ok(path)
}

/// The skips recorded in `dir` (none when the file does not exist), oldest first, and how
/// many lines could not be read.
///
/// # Errors
/// I/O failures other than a missing file.
pub fn read(dir: &Path) -> Result<(Vec<Skip>, usize)> {
    let path = dir.join(SKIPS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut bad = 0;
    let skips = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let s = serde_json::from_str(l).ok();
            bad += usize::from(s.is_none());
            s
        })
        .collect();
    Ok((skips, bad))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: ActiveState, sub: &str, job_pending: bool) -> UnitStatus {
        let mut s = UnitStatus::not_found();
        s.active_state = state;
        s.sub_state = sub.into();
        s.job_pending = job_pending;
        s
    }

    fn holder() -> Holder {
        Holder {
            run_id: "20261130t020000-abcd".into(),
            pid: 4242,
            started_ms: 1_796_000_000_000,
        }
    }

    #[test]
    fn an_idle_tenant_starts_and_a_busy_one_records_the_skip_with_its_run() {
        let idle = status(ActiveState::Inactive, "dead", false);
        assert_eq!(decide("acme", 1, &idle, false, None), Decision::Start);
        let failed = status(ActiveState::Failed, "failed", false);
        assert_eq!(
            decide("acme", 1, &failed, false, Some(&holder())),
            Decision::Start,
            "a stale lock file alone is no run"
        );
        let running = status(ActiveState::Activating, "start", false);
        let Decision::Skip(s) = decide("acme", 7, &running, true, Some(&holder())) else {
            panic!("a running run must be skipped")
        };
        assert_eq!(
            s,
            Skip {
                time_ms: 7,
                tenant: "acme".into(),
                trigger: "cyclix-run@acme.timer".into(),
                active_run: Some("20261130t020000-abcd".into()),
                active_since_ms: Some(1_796_000_000_000),
                active_pid: Some(4242),
                unit_state: "activating/start".into(),
            }
        );
        // A `cyclix run acme` outside the unit holds only the lock; a queued start job is busy
        // too; an unheld lock file names no run.
        assert!(
            matches!(decide("acme", 1, &idle, true, Some(&holder())), Decision::Skip(s) if s.unit_state == "inactive/dead" && s.active_pid == Some(4242))
        );
        assert!(matches!(
            decide(
                "acme",
                1,
                &status(ActiveState::Inactive, "dead", true),
                false,
                None
            ),
            Decision::Skip(_)
        ));
        assert!(
            matches!(decide("acme", 1, &running, false, Some(&holder())), Decision::Skip(s) if s.active_run.is_none())
        );
    }

    #[test]
    fn a_tick_starts_an_idle_tenant_without_waiting_and_records_a_busy_one() {
        use crate::systemd::FakeUnitManager;
        use crate::systemd::fake::Call;
        let dir = tempfile::tempdir().expect("tmp");
        let lock_path = super::super::lock::path(dir.path(), "acme");
        let records = dir.path().join("records");
        let units = FakeUnitManager::new();
        let t = tick(&units, "acme", &lock_path, &records, 1).expect("tick");
        assert!(matches!(t, Ticked::Started(_)), "{t:?}");
        assert!(
            units
                .calls()
                .iter()
                .any(|c| matches!(c, Call::Start { unit, timeout, .. }
                if unit == "cyclix-run@acme.service" && timeout.is_zero())),
            "queued without waiting: {:?}",
            units.calls()
        );
        // The run is on now (its unit active, its cyclix holding the tenant lock): the next
        // trigger is recorded, with the run named, and starts nothing.
        let held = match super::super::lock::try_acquire(&lock_path, &holder()).expect("lock") {
            super::super::lock::Acquire::Held(l) => l,
            super::super::lock::Acquire::Busy(_) => panic!("free"),
        };
        let starts = |u: &FakeUnitManager| {
            u.calls()
                .iter()
                .filter(|c| matches!(c, Call::Start { .. }))
                .count()
        };
        let before = starts(&units);
        let t = tick(&units, "acme", &lock_path, &records, 2).expect("tick");
        let Ticked::Skipped(s, path) = t else {
            panic!("{t:?}")
        };
        assert_eq!(s.active_run.as_deref(), Some("20261130t020000-abcd"));
        assert_eq!(s.unit_state, "active/running");
        assert_eq!(path, records.join(SKIPS_FILE));
        assert_eq!(starts(&units), before, "a busy tenant gets no second start");
        // The lock alone (a `cyclix run` outside the unit) also counts.
        units
            .stop(
                "cyclix-run@acme.service",
                JobMode::Replace,
                std::time::Duration::from_secs(1),
            )
            .expect("stop");
        assert!(matches!(
            tick(&units, "acme", &lock_path, &records, 3).expect("tick"),
            Ticked::Skipped(..)
        ));
        drop(held);
        assert!(matches!(
            tick(&units, "acme", &lock_path, &records, 4).expect("tick"),
            Ticked::Started(_)
        ));
        assert_eq!(read(&records).expect("read").0.len(), 2);
    }

    #[test]
    fn skips_append_one_line_each_and_read_back_in_order() {
        let dir = tempfile::tempdir().expect("tmp");
        assert_eq!(read(dir.path()).expect("none yet"), (Vec::new(), 0));
        let running = status(ActiveState::Activating, "start", false);
        for t in [1, 2, 3] {
            let Decision::Skip(s) = decide("acme", t, &running, true, Some(&holder())) else {
                panic!()
            };
            append(dir.path(), &s).expect("append");
        }
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(SKIPS_FILE))
            .and_then(|mut f| f.write_all(b"{not json\n"))
            .expect("damage");
        let (skips, bad) = read(dir.path()).expect("read");
        assert_eq!(
            skips.iter().map(|s| s.time_ms).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(bad, 1);
    }
}
