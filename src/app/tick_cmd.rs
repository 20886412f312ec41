//! `cyclix tick TENANT`: what `cyclix-run@TENANT.timer` runs when it fires (through
//! `cyclix-tick@TENANT.service`). Starts the run unit without waiting for it, or records the
//! skipped trigger while a run is active (`run::tick`).

use anyhow::Result;

use super::ops::{now_ms, run_unit, unit_manager, utc_timestamp};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::run::tick::{self, Decision, Skip};
use crate::run::{lock, record, storage_lock};
use crate::systemd::{JobMode, UnitManager};

/// The log line of a skip: `skipped: run R active since T (…)`.
#[must_use]
pub fn skip_line(s: &Skip) -> String {
    let run = s.active_run.as_deref().unwrap_or("(unnamed)");
    let since = s
        .active_since_ms
        .map_or_else(|| "an unknown time".to_string(), utc_timestamp);
    format!(
        "skipped: run {run} active since {since} (cyclix-run@{}.service {}); {} fired at {}",
        s.tenant,
        s.unit_state,
        s.trigger,
        utc_timestamp(s.time_ms)
    )
}

/// `cyclix tick TENANT`.
///
/// # Errors
/// D-Bus failures, an unreadable `/proc/locks`, or a skip that cannot be written.
pub fn run(tenant: &str) -> Result<Outcome> {
    let env = HostEnv::from_env()?;
    let unit = run_unit(tenant)?;
    let units = unit_manager(&env)?;
    let status = units.unit_status(&unit)?;
    let lock_path = lock::path(env.runtime_dir()?, tenant);
    let held = !storage_lock::file_lock_holders(&lock_path)?.is_empty();
    let holder = lock::peek(&lock_path);
    match tick::decide(tenant, now_ms(), &status, held, holder.as_ref()) {
        Decision::Start => {
            let job = units.start_no_block(&unit, JobMode::Replace)?;
            println!("started {unit} (job {job})");
        }
        Decision::Skip(s) => {
            let path = tick::append(&record::tenant_dir(&env.state_home, tenant), &s)?;
            crate::stderrln!("cyclix: {} (recorded in {})", skip_line(&s), path.display());
        }
    }
    Ok(Outcome::Ok)
}
