//! `cyclix start TENANT`: a run under the user manager, waited for.

use std::time::Duration;

use anyhow::Result;

use super::tenant::{run_unit, unit_manager};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::run::record;
use crate::systemd::{JobMode, UnitManager};

/// `cyclix start TENANT`: `StartUnit cyclix-run@TENANT.service`, waiting up to `wait` for the
/// run to finish (it is a oneshot), then prints the run's summary. While a run of the tenant
/// is in progress it starts nothing and names that run (exit 1).
///
/// # Errors
/// D-Bus failures.
pub fn run(env: &HostEnv, tenant: &str, wait: Duration) -> Result<Outcome> {
    let unit = run_unit(env, tenant)?;
    // A second start would queue behind the running one and wait silently (issue 19, item 5).
    if let Some(c) = super::status_cmd::current_run(env, tenant) {
        crate::stderrln!(
            "{unit} is busy: {}; nothing started (`cyclix status {tenant}` follows it, `cyclix stop {tenant}` stops it)",
            super::status_cmd::current_line(&c)
        );
        return Ok(Outcome::Findings);
    }
    let units = unit_manager(env)?;
    let r = units.start(&unit, JobMode::Replace, wait);
    if let Some(rec) = record::latest(&env.state_home, tenant)? {
        print!("{}", record::summary(&rec));
    }
    match r {
        Ok(_) => Ok(Outcome::Ok),
        Err(e) => {
            crate::stderrln!("error: {e}");
            Ok(Outcome::Findings)
        }
    }
}
