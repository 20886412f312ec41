//! `cyclix stop TENANT`: stops the tenant's running run (its teardown still runs).

use std::time::Duration;

use anyhow::Result;

use super::tenant::{run_unit, unit_manager};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::systemd::{JobMode, UnitManager};

/// `cyclix stop TENANT`: stops a running run (its teardown runs on SIGTERM).
///
/// # Errors
/// D-Bus failures.
pub fn run(env: &HostEnv, tenant: &str) -> Result<Outcome> {
    let unit = run_unit(env, tenant)?;
    let o = unit_manager(env)?.stop(&unit, JobMode::Replace, Duration::from_secs(150))?;
    crate::outln!("stopped {unit}: {}", o.status.summary());
    Ok(Outcome::Ok)
}
