//! `cyclix start TENANT`: a run under the user manager, waited for.

use std::time::Duration;

use anyhow::Result;

use super::tenant::{run_unit, unit_manager};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::run::record;
use crate::systemd::{JobMode, UnitManager};

/// `cyclix start TENANT`: `StartUnit cyclix-run@TENANT.service`, waiting up to `wait` for the
/// run to finish (it is a oneshot), then prints the run's summary.
///
/// # Errors
/// D-Bus failures.
pub fn run(env: &HostEnv, tenant: &str, wait: Duration) -> Result<Outcome> {
    let unit = run_unit(env, tenant)?;
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
