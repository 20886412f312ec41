//! `cyclix stop TENANT`: stops the tenant's run, however it was started (its teardown still
//! runs), or says that nothing runs or that it cannot.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::tenant::{run_unit, unit_manager};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::systemd::{ActiveState, JobMode, UnitManager};

/// How long `stop` waits for a run to end (its teardown included): 150 s, the run unit's
/// `TimeoutStopSec=` plus its own margin.
const STOP_WAIT: Duration = Duration::from_secs(150);

/// `cyclix stop TENANT`: a run of the unit `cyclix-run@TENANT` (systemd, the timer) is stopped
/// through the user manager; a run started with `cyclix run TENANT` (it holds the tenant lock,
/// no unit) gets SIGTERM, as the unit's stop would send, and `stop` waits until it has released
/// the lock (its teardown done). With neither, it says that no run is active.
///
/// # Errors
/// D-Bus failures; the run's process cannot be signalled (another user's); the run did not
/// end within [`STOP_WAIT`].
pub fn run(env: &HostEnv, tenant: &str) -> Result<Outcome> {
    let unit = run_unit(env, tenant)?;
    let manager = unit_manager(env)?;
    let state = manager.unit_status(&unit).map(|s| s.active_state);
    if matches!(
        state,
        Ok(ActiveState::Active | ActiveState::Activating | ActiveState::Deactivating)
    ) {
        let o = manager.stop(&unit, JobMode::Replace, STOP_WAIT)?;
        crate::outln!("stopped {unit}: {}", o.status.summary());
        return Ok(Outcome::Ok);
    }
    let Some(current) = super::current_run::current_run(env, tenant) else {
        crate::outln!(
            "no run of {tenant} is active: {unit} is not running and no `cyclix run {tenant}` \
             holds the tenant lock; nothing stopped"
        );
        return Ok(Outcome::Ok);
    };
    stop_process(env, tenant, &current)
}

/// SIGTERM to the `cyclix run` process holding `tenant`'s lock, then waits until the lock is
/// free (the run tore down and wrote its record).
fn stop_process(
    env: &HostEnv,
    tenant: &str,
    current: &super::current_run::CurrentRun,
) -> Result<Outcome> {
    let lock = env.runtime()?.tenant_lock(tenant);
    let holding = |pid: u32| {
        crate::run::storage_lock::file_lock_holders(&lock)
            .is_ok_and(|h| h.iter().any(|e| e.pid == Some(pid)))
    };
    // Only the pid the kernel says holds the lock (never the file's word alone: it may be a
    // reused pid's), and only while it still holds it.
    let pid = current.pid;
    if !holding(pid) {
        crate::outln!(
            "run {} of {tenant} ended meanwhile (pid {pid} holds the tenant lock no more); nothing stopped",
            current.run_id
        );
        return Ok(Outcome::Ok);
    }
    let target = nix::unistd::Pid::from_raw(i32::try_from(pid)?);
    if let Err(e) = nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGTERM) {
        bail!(
            "cannot stop run {} of {tenant}: signalling its process {pid} failed ({e}); it \
             was not started by this user's `cyclix run` or systemd unit — stop it as its owner",
            current.run_id
        );
    }
    let end = Instant::now() + STOP_WAIT;
    while holding(pid) {
        if Instant::now() >= end {
            bail!(
                "run {} of {tenant} (pid {pid}) got SIGTERM but still holds the tenant lock \
                 after {} s: see `cyclix status {tenant}`; `kill -KILL {pid}` leaves its \
                 sandbox to the next run's convergence",
                current.run_id,
                STOP_WAIT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    crate::outln!(
        "stopped run {} of {tenant} (pid {pid}, started with `cyclix run`): its teardown ran; \
         see `cyclix status {tenant}`",
        current.run_id
    );
    Ok(Outcome::Ok)
}
