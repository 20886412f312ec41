//! `cyclix run TENANT`: one run, end to end, in this process (what `cyclix-run@TENANT.service`
//! executes): the tenant lock, convergence of a run whose cyclix died, the lifecycle, the record
//! and the summary.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use super::launch::{RunOpts, run_with};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::render::Backend;
use crate::run::inputs::Override;

/// `cyclix run TENANT`: one run, end to end. Exit status 0 gate passed, 1 gate or agent failed
/// (or the spec/tier was refused), 2 cyclix failed.
///
/// # Errors
/// Failures of cyclix before the lifecycle starts (no runtime dir, unreadable spec).
pub fn run(
    env: &HostEnv,
    tenant: &str,
    spec_path: Option<&Path>,
    run_id: Option<&str>,
    force_backend: Option<Backend>,
    storage_lock_wait: Duration,
) -> Result<Outcome> {
    // Before anything of the run exists: this process gets its own random canary (it re-executes
    // itself once to carry it in its initial environment; see `run::canary`).
    crate::run::canary::ensure()?;
    let opts = RunOpts {
        spec_path,
        run_id,
        force_backend,
        storage_lock_wait,
    };
    Ok(run_with(env, tenant, &opts, Override::default())?.0)
}
