//! `cyclix pause TENANT` / `cyclix resume TENANT`: stop a tenant's schedule for a while
//! (issue 19, item 2). A pause is a file in `$XDG_STATE_HOME/cyclix/paused/` — it outlives
//! reboots and `cyclix install`, which keeps a paused tenant's timer off and says so. A run
//! started by hand (`cyclix start`, `systemctl --user start cyclix-run@T`) is not refused: a
//! pause is about the schedule.

use anyhow::{Context as _, Result};

use super::installer::remove_timer;
use super::schedule::paused;
use super::tenant::{run_unit, unit_manager};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::systemd::{ActiveState, UnitManager};

/// `cyclix pause TENANT`: writes the pause marker, then stops and disables the tenant's timer
/// and removes its drop-in (a timer the manager does not know is off already: a tenant with
/// no schedule is paused all the same, so a schedule added later stays off until `resume`). A
/// second pause says so and changes nothing. A run in progress goes on (`cyclix stop`).
///
/// # Errors
/// An unknown tenant, I/O or D-Bus failures.
pub fn pause(env: &HostEnv, tenant: &str) -> Result<Outcome> {
    let unit = run_unit(env, tenant)?;
    let marker = env.layout().pause_marker(tenant);
    if let Some(since) = paused(env, tenant) {
        crate::outln!("{tenant} is already paused ({since}); `cyclix resume {tenant}` ends it");
        return Ok(Outcome::Ok);
    }
    std::fs::create_dir_all(marker.parent().context("invariant: marker has a parent")?)?;
    let when = super::clock::utc_timestamp(super::clock::now_ms());
    crate::atomic::write(
        &marker,
        format!("paused at {when} by `cyclix pause {tenant}`\n").as_bytes(),
    )?;
    let units = unit_manager(env)?;
    let timer = crate::naming::run_timer(tenant);
    // Whether the tenant had a timer to stop: its schedule drop-in, or a timer the manager
    // runs (issue 32 item 3: a pause of a tenant with no schedule said it stopped a timer).
    let dropin = env
        .layout()
        .user_units_dir()
        .join(crate::naming::schedule_dropin(tenant));
    let had_timer = dropin.exists()
        || units.unit_status(&timer).is_ok_and(|s| {
            matches!(
                s.active_state,
                ActiveState::Active | ActiveState::Activating
            )
        });
    remove_timer(&units, &env.layout().user_units_dir(), tenant)?;
    units.reload()?;
    if had_timer {
        crate::outln!(
            "paused {tenant}: {timer} is stopped and disabled and stays so across `cyclix install` until `cyclix resume {tenant}`"
        );
    } else {
        crate::outln!(
            "paused {tenant}: it has no schedule (no {timer} to stop); a schedule added to its spec stays off until `cyclix resume {tenant}`"
        );
    }
    let st = units.unit_status(&unit)?;
    if matches!(
        st.active_state,
        ActiveState::Active | ActiveState::Activating
    ) {
        crate::outln!(
            "a run is in progress ({unit}: {}); `cyclix stop {tenant}` stops it",
            st.summary()
        );
    }
    Ok(Outcome::Ok)
}

/// `cyclix resume TENANT`: removes the pause marker and installs the tenant's timer again
/// (as `cyclix install --tenant TENANT` does) when its spec has a schedule.
///
/// # Errors
/// An unknown tenant, I/O or D-Bus failures.
pub fn resume(env: &HostEnv, tenant: &str) -> Result<Outcome> {
    run_unit(env, tenant)?;
    let marker = env.layout().pause_marker(tenant);
    match std::fs::remove_file(&marker) {
        Ok(()) => crate::outln!("resumed {tenant}"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            crate::outln!("{tenant} was not paused");
        }
        Err(e) => return Err(e).with_context(|| format!("removing {}", marker.display())),
    }
    super::installer::install(env, Some(tenant))
}
