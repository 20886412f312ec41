//! `cyclix install [--tenant T]`: the unit templates and the timers of scheduled tenants.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

use super::clock::elapse_text;
use super::tenant::{tenant_spec_path, unit_manager};
use crate::context::{HostEnv, current_exe, path_str};
use crate::exit::Outcome;
use crate::render;
use crate::run::record;
use crate::systemd::{ActiveState, JobMode, UnitManager};

/// `cyclix install`: writes the unit templates (with this binary's absolute path) to
/// `~/.config/systemd/user/`, a timer drop-in for every tenant with a schedule (or only for
/// `only`), reloads,
/// enables and starts those timers, and fails if a timer has no next elapse (B25).
///
/// # Errors
/// I/O or D-Bus failures.
pub fn run(env: &HostEnv, only: Option<&str>) -> Result<Outcome> {
    let unit_dir = env.layout().user_units_dir();
    let bin = path_str(&current_exe()?);
    let mut files = render::units::templates(&bin).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut timers = Vec::new();
    let tenants_dir = env.layout().tenants_dir();
    let mut specs: Vec<PathBuf> = match std::fs::read_dir(&tenants_dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect(),
        Err(_) => Vec::new(),
    };
    specs.sort();
    if let Some(t) = only {
        specs.retain(|p| p.file_stem().is_some_and(|s| s == t));
        if specs.is_empty() {
            bail!(
                "no spec for tenant `{t}` at {}",
                tenant_spec_path(env, t).display()
            );
        }
    }
    // One bad spec must not keep the other tenants' timers from being installed: report it,
    // go on, and exit 1 at the end.
    let mut ok = true;
    for p in &specs {
        match super::spec_file::load_spec(p, env)? {
            Ok(spec) => {
                if let Some(d) =
                    render::units::timer_dropin(&spec).map_err(|e| anyhow::anyhow!("{e}"))?
                {
                    files.push(d);
                    timers.push(crate::naming::run_timer(&spec.tenant));
                }
            }
            Err(e) => {
                crate::stderrln!("{e}\n  (its timer is not installed; the other tenants are)");
                ok = false;
            }
        }
    }
    for f in &files {
        let path = unit_dir.join(&f.name);
        std::fs::create_dir_all(path.parent().context("invariant: unit path has a parent")?)?;
        record::atomic_write(&path, f.contents.as_bytes())?;
        println!("wrote {}", path.display());
    }
    let units = unit_manager(env)?;
    units.reload()?;
    if timers.is_empty() {
        println!(
            "no tenant has a schedule; start runs with `systemctl --user start cyclix-run@TENANT`"
        );
        return Ok(Outcome::from_passed(ok));
    }
    let names: Vec<&str> = timers.iter().map(String::as_str).collect();
    units.enable_unit_files(&names)?;
    for t in &timers {
        units.start(t, JobMode::Replace, Duration::from_secs(30))?;
        let next = units.timer_next_elapse(t)?;
        let service = t.replace(".timer", ".service");
        let fired = units.unit_status(&service)?;
        if !next.is_scheduled()
            && matches!(
                fired.active_state,
                ActiveState::Activating | ActiveState::Active
            )
        {
            // Persistent=true catching up a missed run fires at once; the next elapse is only
            // computed when that run ends.
            println!(
                "{t} fired at once (a missed run caught up, Persistent=true); {service} is {}",
                fired.summary()
            );
        } else if next.is_scheduled() {
            println!("enabled {t}: next elapse {}", elapse_text(next));
        } else {
            crate::stderrln!(
                "error: {t} has no next elapse: it would never fire (check its OnCalendar=); disabled it again"
            );
            // Never leave an enabled timer that cannot fire looking healthy (B25).
            let _ = units.stop(t, JobMode::Replace, Duration::from_secs(30));
            let _ = units.disable_unit_files(&[t.as_str()]);
            ok = false;
        }
    }
    Ok(Outcome::from_passed(ok))
}
