//! What `cyclix install [--tenant T]` does (and `resume`, `uninstall` share): the unit templates, and timers that follow the specs: a
//! scheduled tenant's timer is installed and started; a timer whose tenant has no schedule any
//! more, no spec, or is paused is stopped, disabled and its drop-in removed (issue 19, item 2).
//! Likewise the pool keepers (`cyclix-pool@TENANT.service`, issue 16: [`pools`]).

pub mod docs;
pub mod drift;
pub mod notify;
pub mod packaged;
pub mod pools;
pub mod timers;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

use super::clock::elapse_text;
use super::tenant::{tenant_spec_path, unit_manager};
use crate::context::{HostEnv, current_exe, path_str};
use crate::exit::Outcome;
use crate::render;
use crate::systemd::{ActiveState, JobMode, UnitManager};
use packaged::Templates;
use timers::SpecState;

/// How long starting or stopping one timer may take.
const TIMER_JOB_DEADLINE: Duration = Duration::from_secs(30);

/// `cyclix install`: writes the unit templates (with this binary's absolute path) to
/// `~/.config/systemd/user/`, a timer drop-in for every tenant with a schedule (or only for
/// `only`) that is not paused, removes the timers of tenants that have no schedule, no spec
/// or are paused, reloads, enables and starts the kept timers, and fails if a timer has no
/// next elapse (B25). With the Debian package installed ([`packaged`]) the templates, man
/// pages, completion and schema are the package's: none is written, the user's copies go.
///
/// # Errors
/// I/O or D-Bus failures.
pub fn install(env: &HostEnv, only: Option<&str>) -> Result<Outcome> {
    let bin = path_str(&current_exe()?);
    let source = Templates::of_host(bin.clone());
    let mut manager = None;
    install_with(env, only, &source, &bin, || {
        Ok(&*manager.insert(unit_manager(env)?))
    })
}

/// [`install`] with its seams: where the templates come from (`source`), this binary's path
/// (`bin`) and the user manager (`connect`, called once the files are written).
///
/// # Errors
/// As [`install`].
pub(crate) fn install_with<'m, U: UnitManager + Sync + 'm>(
    env: &HostEnv,
    only: Option<&str>,
    source: &Templates,
    bin: &str,
    connect: impl FnOnce() -> Result<&'m U>,
) -> Result<Outcome> {
    let unit_dir = env.layout().user_units_dir();
    let mut files = match source {
        Templates::Written { bin } => {
            render::units::templates(bin).map_err(|e| anyhow::anyhow!("{e}"))?
        }
        Templates::Packaged { .. } => Vec::new(),
    };
    let tenants_dir = env.layout().tenants_dir();
    let mut specs = drift::spec_files(&tenants_dir);
    let installed = timers::installed(&unit_dir);
    if let Some(t) = only {
        specs.retain(|p| p.file_stem().is_some_and(|s| s == t));
        if specs.is_empty() && !installed.contains(t) && !pools::installed(&unit_dir).contains(t) {
            bail!(
                "no spec for tenant `{t}` at {}",
                tenant_spec_path(env, t).display()
            );
        }
    }
    drift::print_plan_with(env, only, source)?;
    let (states, dropins, ok) = load_states(env, &specs)?;
    let mut ok = ok;
    let paused = paused_tenants(&env.layout().paused_dir());
    let plan = timers::plan(&states, &installed, &paused, only);
    files.extend(
        dropins
            .into_iter()
            .filter(|(t, _)| plan.install.contains(t))
            .map(|(_, d)| d),
    );
    for f in &files {
        let path = unit_dir.join(&f.name);
        std::fs::create_dir_all(path.parent().context("invariant: unit path has a parent")?)?;
        crate::atomic::write(&path, f.contents.as_bytes())?;
        crate::outln!("wrote {}", path.display());
    }
    shared_files(env, &unit_dir, source, bin)?;
    notify::install(env, &unit_dir, &specs)?;
    let units = connect()?;
    for (t, why) in &plan.remove {
        remove_timer(units, &unit_dir, t)?;
        crate::outln!(
            "removed {} (stopped, disabled, drop-in deleted): {}",
            crate::naming::run_timer(t),
            why.text()
        );
    }
    units.reload()?;
    for t in &plan.paused {
        crate::outln!(
            "{} not installed: the tenant is paused (`cyclix resume {t}`)",
            crate::naming::run_timer(t)
        );
    }
    for t in &plan.left {
        crate::outln!(
            "{} left as it was: its spec does not load (fix it and run `cyclix install` again)",
            crate::naming::run_timer(t)
        );
    }
    if plan.install.is_empty() {
        // About the tenant named when one is (issue 32 item 3: `resume T` said no tenant had
        // a schedule while another tenant's timer ran).
        let none = match only {
            _ if !(plan.paused.is_empty() && plan.left.is_empty()) => {
                "no timer to enable".to_string()
            }
            Some(t) => format!("{t} has no schedule"),
            None => "no tenant has a schedule".to_string(),
        };
        crate::outln!(
            "{none}; start runs with `systemctl --user start cyclix-run@{}`",
            only.unwrap_or("TENANT")
        );
        // After the timers: a keeper reads its tenant's timer when it starts (warm_before).
        ok &= pools::install(env, units, &unit_dir, &specs, only)?;
        return Ok(Outcome::from_passed(ok));
    }
    let timers: Vec<String> = plan
        .install
        .iter()
        .map(|t| crate::naming::run_timer(t))
        .collect();
    let names: Vec<&str> = timers.iter().map(String::as_str).collect();
    units.enable_unit_files(&names)?;
    for t in &timers {
        ok &= start_timer(units, t)?;
    }
    ok &= pools::install(env, units, &unit_dir, &specs, only)?;
    Ok(Outcome::from_passed(ok))
}

/// The files every tenant shares, after the templates (and drop-ins) are written: without the
/// package the man pages, completion, schema and notify template for the user; with it, the
/// user's copies of those and of the templates removed, and where the units come from said.
fn shared_files(env: &HostEnv, unit_dir: &Path, source: &Templates, bin: &str) -> Result<()> {
    match source {
        Templates::Written { bin } => {
            docs::install(env, bin)?;
            notify::install_template(unit_dir, bin)?;
        }
        Templates::Packaged { dir } => {
            packaged::remove_shadowing_templates(unit_dir, dir)?;
            let user_docs: Vec<PathBuf> =
                docs::files(env, "/")?.into_iter().map(|f| f.path).collect();
            packaged::remove_user_docs(&user_docs, &super::spec_file::schema_path(env))?;
            crate::outln!(
                "the unit templates, man pages, bash completion and spec schema are the package's ({}, /usr/share); they run {}",
                dir.display(),
                packaged::BIN
            );
            if bin != packaged::BIN {
                crate::outln!(
                    "note: this cyclix ({bin}) is not the package's: the units run {}",
                    packaged::BIN
                );
            }
        }
    }
    Ok(())
}

/// What each spec in `specs` says about its timer, the drop-ins of the scheduled ones, and
/// false when a spec did not load. One bad spec must not keep the other tenants' timers from
/// being installed: it is reported, its timer left as it was, and `install` exits 1 at the end.
#[allow(clippy::type_complexity)]
fn load_states(
    env: &HostEnv,
    specs: &[PathBuf],
) -> Result<(
    Vec<(String, SpecState)>,
    Vec<(String, render::RenderedFile)>,
    bool,
)> {
    let mut ok = true;
    let mut states = Vec::new();
    let mut dropins = Vec::new();
    for p in specs {
        let Some(tenant) = p.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        match super::spec_file::load_spec(p, env)? {
            Ok(spec) => {
                let d = render::units::timer_dropin(&spec).map_err(|e| anyhow::anyhow!("{e}"))?;
                states.push((
                    spec.tenant.clone(),
                    if d.is_some() {
                        SpecState::Scheduled
                    } else {
                        SpecState::Unscheduled
                    },
                ));
                dropins.extend(d.map(|d| (spec.tenant.clone(), d)));
            }
            Err(e) => {
                crate::stderrln!(
                    "{e}\n  (its timer is left as it was; the other tenants are installed)"
                );
                states.push((tenant.to_owned(), SpecState::Broken));
                ok = false;
            }
        }
    }
    Ok((states, dropins, ok))
}

/// Starts timer `t` and reports its next elapse; false (after disabling it again) when it has
/// none and would never fire (B25).
fn start_timer(units: &impl UnitManager, t: &str) -> Result<bool> {
    units.start(t, JobMode::Replace, TIMER_JOB_DEADLINE)?;
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
        crate::outln!(
            "{t} fired at once (a missed run caught up, Persistent=true); {service} is {}",
            fired.summary()
        );
    } else if next.is_scheduled() {
        crate::outln!("enabled {t}: next elapse {}", elapse_text(next));
    } else {
        crate::stderrln!(
            "error: {t} has no next elapse: it would never fire (check its OnCalendar=); disabled it again"
        );
        // Never leave an enabled timer that cannot fire looking healthy (B25).
        let _ = units.stop(t, JobMode::Replace, TIMER_JOB_DEADLINE);
        let _ = units.disable_unit_files(&[t]);
        return Ok(false);
    }
    Ok(true)
}

/// Stops and disables tenant `t`'s timer and deletes its drop-in (and the drop-in directory
/// when nothing else is in it). A run the timer started is not touched. The caller reloads.
///
/// # Errors
/// D-Bus failures, or the drop-in cannot be removed.
pub(crate) fn remove_timer(units: &impl UnitManager, unit_dir: &Path, t: &str) -> Result<()> {
    let timer = crate::naming::run_timer(t);
    // A timer the manager does not know (never enabled, or already removed) is off already.
    let gone = |r: Result<(), crate::systemd::Error>| match r {
        Err(crate::systemd::Error::NoSuchUnit { .. }) | Ok(()) => Ok(()),
        Err(e) => Err(e),
    };
    gone(
        units
            .stop(&timer, JobMode::Replace, TIMER_JOB_DEADLINE)
            .map(drop),
    )?;
    gone(units.disable_unit_files(&[timer.as_str()]).map(drop))?;
    let dropin = unit_dir.join(crate::naming::schedule_dropin(t));
    match std::fs::remove_file(&dropin) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("removing {}", dropin.display())),
    }
    if let Some(dir) = dropin.parent() {
        // Only an empty directory goes: a person's own drop-ins there stay.
        let _ = std::fs::remove_dir(dir);
    }
    Ok(())
}

/// The paused tenants: the names of the files in `dir` (missing dir: none).
#[must_use]
pub(crate) fn paused_tenants(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|t| crate::spec::validate::tenant_name(t).is_ok())
                .collect()
        })
        .unwrap_or_default()
}
