//! `cyclix tick TENANT`: what `cyclix-run@TENANT.timer` runs when it fires (through
//! `cyclix-tick@TENANT.service`). Starts the run unit without waiting for it, or records the
//! skipped trigger while a run is active (`run::tick`).

use anyhow::Result;

use super::clock::now_ms;
use super::schedule::skip_line;
use super::tenant::{run_unit, unit_manager};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::run::tick::{self, Ticked};
use crate::run::{lock, record};

/// `cyclix tick TENANT`.
///
/// # Errors
/// D-Bus failures, an unreadable `/proc/locks`, or a skip that cannot be written.
pub fn run(env: &HostEnv, tenant: &str) -> Result<Outcome> {
    let unit = run_unit(env, tenant)?;
    // A paused tenant's timer is off; one started by hand anyway still starts no run.
    if let Some(why) = super::schedule::paused(env, tenant) {
        crate::stderrln!(
            "cyclix: {tenant} is paused ({why}): the trigger starts no run; `cyclix resume {tenant}` undoes the pause"
        );
        return Ok(Outcome::Ok);
    }
    let units = unit_manager(env)?;
    let lock_path = lock::path(env.runtime_dir()?, tenant);
    let records = record::tenant_dir(&env.state_home, tenant);
    match tick::tick(&units, tenant, &lock_path, &records, now_ms())? {
        Ticked::Started(job) => crate::outln!("started {unit} (job {job})"),
        Ticked::Skipped(s, path) => {
            crate::stderrln!("cyclix: {} (recorded in {})", skip_line(&s), path.display());
        }
    }
    Ok(Outcome::Ok)
}
