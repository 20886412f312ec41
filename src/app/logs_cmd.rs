//! `cyclix logs TENANT [-n N]`: the run unit's journal.

use anyhow::Result;

use super::tenant::run_unit;
use crate::context::HostEnv;
use crate::exit::Outcome;

/// `cyclix logs TENANT`: the run unit's journal (what `cyclix run` printed, with timestamps).
///
/// # Errors
/// journalctl failures (`crate::journal`).
pub fn run(env: &HostEnv, tenant: &str, lines: u32) -> Result<Outcome> {
    let unit = run_unit(env, tenant)?;
    let out = crate::journal::unit_log(&unit, lines)?;
    print!("{out}");
    Ok(Outcome::Ok)
}
