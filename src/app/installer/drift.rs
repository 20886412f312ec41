//! What `cyclix install` would change (issue 32 item 2, "no silent drift"): the unit
//! templates this cyclix writes against those installed (with the Debian package: the user's
//! copies that would shadow the package's, [`super::packaged`]), each tenant's timer, notify
//! drop-in and pool keeper against its spec. Read from the files alone (the user unit directory, the
//! specs, the pause markers): nothing is changed and the user manager is not asked. `check`,
//! `status` and `install` (as its plan, before it acts) print it.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::packaged::{self, Templates};
use super::pools::{self, PoolSpec};
use super::timers::{self, SpecState};
use crate::context::HostEnv;
use crate::render::{self, RenderedFile};

/// One thing `cyclix install` would change, and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// The tenant it concerns; `None` for the templates every tenant shares.
    pub tenant: Option<String>,
    /// What differs and what `install` would do, in the user's words.
    pub what: String,
}

/// A file as installed against as this cyclix would write it: `None` when they agree.
#[must_use]
pub fn file_drift(installed: Option<&str>, wanted: &str, name: &str) -> Option<String> {
    match installed {
        None => Some(format!("{name} is not installed: install writes it")),
        Some(text) if text != wanted => Some(format!(
            "{name} differs from what this cyclix writes (an older cyclix, another binary path, \
             or an edit): install rewrites it"
        )),
        Some(_) => None,
    }
}

/// Everything `cyclix install` (for all tenants) would change on this host.
///
/// # Errors
/// The running binary's path cannot be read, or a template cannot be rendered.
pub fn drift(env: &HostEnv) -> Result<Vec<Drift>> {
    let bin = crate::context::path_str(&std::env::current_exe()?);
    drift_with(env, &Templates::of_host(bin))
}

/// [`drift`] with the templates from `source`: written for the user, they drift when missing
/// or different; the package's, a user's copy drifts (it shadows the package's and `install`
/// removes it).
///
/// # Errors
/// A template cannot be rendered.
pub fn drift_with(env: &HostEnv, source: &Templates) -> Result<Vec<Drift>> {
    let unit_dir = env.layout().user_units_dir();
    let read = |name: &str| read_unit(&unit_dir.join(name));
    let mut out = Vec::new();
    match source {
        Templates::Written { bin } => {
            for f in &packaged::user_templates(bin)? {
                out.extend(
                    file_drift(read(&f.name).as_deref(), &f.contents, &f.name)
                        .map(|what| Drift { tenant: None, what }),
                );
            }
        }
        Templates::Packaged { dir } => {
            for name in packaged::TEMPLATE_NAMES {
                if std::fs::symlink_metadata(unit_dir.join(name)).is_ok() {
                    out.push(Drift {
                        tenant: None,
                        what: format!(
                            "{name} in {} shadows the package's {}: install removes it",
                            unit_dir.display(),
                            dir.join(name).display()
                        ),
                    });
                }
            }
        }
    }
    let specs = spec_files(&env.layout().tenants_dir());
    let mut states = Vec::new();
    let mut pool_states = Vec::new();
    let mut dropins: Vec<(String, RenderedFile)> = Vec::new();
    for p in &specs {
        let Some(t) = p.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
            continue;
        };
        // One load per spec: its timer, notify drop-in and keeper come from it.
        let Ok(Ok(spec)) = crate::app::spec_file::load_spec(p, env) else {
            pool_states.push((t.clone(), PoolSpec::Broken));
            states.push((t, SpecState::Broken));
            continue;
        };
        pool_states.push((t.clone(), pools::pool_spec_of(&spec)));
        let timer = render::units::timer_dropin(&spec).ok().flatten();
        states.push((
            t.clone(),
            if timer.is_some() {
                SpecState::Scheduled
            } else {
                SpecState::Unscheduled
            },
        ));
        dropins.extend(timer.map(|d| (t.clone(), d)));
        let notify_path = crate::naming::notify_dropin(&t);
        let what = match (render::units::notify_dropin(&spec), read(&notify_path)) {
            (Some(d), got) => file_drift(got.as_deref(), &d.contents, &notify_path)
                .map(|w| format!("{w} (its spec has `notify:`)")),
            (None, Some(_)) => Some(format!(
                "{notify_path} is still installed but the spec has no `notify:`: install removes it"
            )),
            (None, None) => None,
        };
        out.extend(what.map(|what| Drift {
            tenant: Some(t.clone()),
            what,
        }));
    }
    let paused = super::paused_tenants(&env.layout().paused_dir());
    let plan = timers::plan(&states, &timers::installed(&unit_dir), &paused, None);
    out.extend(timer_drift(&unit_dir, &plan, &dropins));
    out.extend(keeper_drift(&unit_dir, &pool_states));
    Ok(out)
}

/// The timers `plan` installs whose drop-in or enablement is not as it would be, and those it
/// removes.
fn timer_drift(
    unit_dir: &Path,
    plan: &timers::TimerPlan,
    dropins: &[(String, RenderedFile)],
) -> Vec<Drift> {
    let mut out = Vec::new();
    let read = |name: &str| read_unit(&unit_dir.join(name));
    let enabled = |t: &str| {
        unit_dir
            .join("timers.target.wants")
            .join(crate::naming::run_timer(t))
            .exists()
    };
    for (t, d) in dropins.iter().filter(|(t, _)| plan.install.contains(t)) {
        let timer = crate::naming::run_timer(t);
        let what = file_drift(read(&d.name).as_deref(), &d.contents, &d.name)
            .map(|w| format!("{w} (the schedule of its spec)"))
            .or_else(|| {
                (!enabled(t))
                    .then(|| format!("{timer} is not enabled: install enables and starts it"))
            });
        out.extend(what.map(|what| Drift {
            tenant: Some(t.clone()),
            what,
        }));
    }
    for t in &plan.left {
        out.push(Drift {
            tenant: Some(t.clone()),
            what: format!(
                "{} is left as it was: the spec of {t} does not load (fix it; install then converges the timer)",
                crate::naming::run_timer(t)
            ),
        });
    }
    for (t, why) in &plan.remove {
        out.push(Drift {
            tenant: Some(t.clone()),
            what: format!(
                "{} is still installed, but {}: install stops and removes it",
                crate::naming::run_timer(t),
                why.text()
            ),
        });
    }
    out
}

/// The pool keepers not enabled for a spec with a pool, and those left enabled without one.
fn keeper_drift(unit_dir: &Path, pool_states: &[(String, PoolSpec)]) -> Vec<Drift> {
    let installed = pools::installed(unit_dir);
    let keepers = pools::plan(pool_states, &installed, None);
    let mut out: Vec<Drift> = keepers
        .keep
        .iter()
        .filter(|t| !installed.contains(*t))
        .map(|t| Drift {
            tenant: Some(t.clone()),
            what: format!(
                "{} is not enabled, but its spec has a pool: install enables and starts it",
                crate::naming::pool_service(t)
            ),
        })
        .collect();
    out.extend(keepers.remove.iter().map(|t| Drift {
        tenant: Some(t.clone()),
        what: format!(
            "{} is still enabled, but its spec has no pool any more: install stops it and destroys the pool",
            crate::naming::pool_service(t)
        ),
    }));
    out
}

/// Prints what an install of `only` (all tenants with `None`) will change, before it acts
/// (issue 32 item 2): the lines `check` and `status` show, with the templates from `source`.
///
/// # Errors
/// Writing to stdout failed.
pub fn print_plan_with(env: &HostEnv, only: Option<&str>, source: &Templates) -> Result<()> {
    match lines_of(drift_with(env, source), only) {
        Ok(d) if d.is_empty() => {
            crate::outln!("plan: nothing to change; the files are written again as they are");
        }
        Ok(d) => {
            crate::outln!("plan: {} change(s):", d.len());
            for l in &d {
                crate::outln!("  {l}");
            }
        }
        Err(e) => crate::outln!("plan: could not be read ({e:#}); installing anyway"),
    }
    Ok(())
}

/// The lines of [`drift`] that concern `tenant` (and the shared templates), all with `None`.
///
/// # Errors
/// As [`drift`].
pub fn lines(env: &HostEnv, tenant: Option<&str>) -> Result<Vec<String>> {
    lines_of(drift(env), tenant)
}

fn lines_of(drift: Result<Vec<Drift>>, tenant: Option<&str>) -> Result<Vec<String>> {
    Ok(drift?
        .into_iter()
        .filter(|x| tenant.is_none() || x.tenant.is_none() || x.tenant.as_deref() == tenant)
        .map(|x| x.what)
        .collect())
}

/// A unit file as installed: its text when it is a regular file of at most 1 MiB (a FIFO
/// would hang the read; attack review), `None` otherwise (missing, or not a file cyclix
/// writes: then it differs).
fn read_unit(path: &Path) -> Option<String> {
    const MAX: u64 = 1 << 20;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The tenants' spec files (`*.yaml` in `dir`), sorted; none when `dir` is missing.
pub(crate) fn spec_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_drifts_when_missing_or_different_and_not_when_equal() {
        assert!(
            file_drift(None, "a", "x.service")
                .is_some_and(|w| w.contains("x.service is not installed"))
        );
        assert!(
            file_drift(Some("old"), "new", "x.service")
                .is_some_and(|w| w.contains("differs from what this cyclix writes"))
        );
        assert_eq!(file_drift(Some("same"), "same", "x.service"), None);
    }
}
