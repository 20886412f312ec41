//! `cyclix status TENANT [--json]`: the run unit, the timer and the last run record.

use anyhow::Result;

use super::clock::elapse_text;
use super::tenant::{run_unit, unit_manager};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::run::record;
use crate::systemd::UnitManager;

/// `cyclix status TENANT`: the run unit's state, the timer's next elapse and the last record.
///
/// # Errors
/// D-Bus or record read failures.
pub fn run(env: &HostEnv, tenant: &str, json: bool) -> Result<Outcome> {
    let unit = run_unit(env, tenant)?;
    let units = unit_manager(env)?;
    let st = units.unit_status(&unit)?;
    let timer = crate::naming::run_timer(tenant);
    let next = units.timer_next_elapse(&timer).ok();
    // A damaged record must not hide the unit's state.
    let last = record::latest(&env.state_home, tenant).unwrap_or_else(|e| {
        crate::stderrln!("warning: the last run record cannot be read: {e:#}");
        None
    });
    let (skips, unreadable) = crate::run::tick::read(&record::tenant_dir(&env.state_home, tenant))
        .unwrap_or_else(|e| {
            crate::stderrln!("warning: the skipped triggers cannot be read: {e:#}");
            (Vec::new(), 0)
        });
    let paused = super::pause_cmd::paused(env, tenant);
    if json {
        let v = serde_json::json!({"unit": unit, "status": st, "timer_next_elapse": next,
            "paused": paused,
            "skips": {"count": skips.len(), "last": skips.last(), "unreadable_lines": unreadable},
            "last_run": last});
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(Outcome::Ok);
    }
    println!("{unit}: {}", st.summary());
    match next {
        Some(n) if n.is_scheduled() => println!("{timer}: next elapse {}", elapse_text(n)),
        _ => println!("{timer}: not scheduled"),
    }
    if let Some(why) = &paused {
        println!("{tenant} is paused ({why}); `cyclix resume {tenant}` undoes it");
    }
    if let Some(s) = skips.last() {
        println!(
            "{timer}: {} trigger(s) skipped while a run was active; last: {}",
            skips.len(),
            super::tick_cmd::skip_line(s)
        );
    }
    match last {
        Some(r) => print!("last {}", record::summary(&r)),
        None => println!("no run recorded yet"),
    }
    Ok(Outcome::Ok)
}
