//! The pool keepers of `cyclix install` (issue 16): `cyclix-pool@TENANT.service` enabled and
//! (re)started for every tenant whose spec has a pool of size > 0 and whose runs can claim a
//! pooled environment; stopped, disabled and its pool destroyed for a tenant whose pool was
//! removed, set to 0, or whose spec is gone. A spec that does not load leaves its keeper as
//! it was. `cyclix uninstall` removes every keeper and destroys every pool ([`remove`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};

use crate::context::HostEnv;
use crate::run::host::RealRunHost;
use crate::run::pool::PoolState;
use crate::systemd::{JobMode, UnitManager};

/// How long starting or stopping one keeper may take: a stop waits for a fill in progress
/// (its unit starts are bounded by 60 s each) and the unit's `TimeoutStopSec=` is 180 s.
const KEEPER_JOB_DEADLINE: Duration = Duration::from_secs(200);
/// How long a pool's destruction waits for podman's storage lock.
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// What a tenant's spec says about its keeper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolSpec {
    /// A pool of size > 0 its runs can claim from.
    Kept,
    /// No pool, size 0, or one its runs cannot claim from (why).
    NotKept(Option<String>),
    /// The spec does not load: the keeper is left as it was.
    Broken,
}

/// What `install` does with the keepers.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct KeeperPlan {
    /// Enabled and (re)started.
    pub keep: Vec<String>,
    /// Stopped, disabled, their pools destroyed.
    pub remove: Vec<String>,
}

/// Decides, for the tenants in `specs` (or only `only`) and every tenant with an `installed`
/// keeper, what `install` does. Pure.
#[must_use]
pub fn plan(
    specs: &[(String, PoolSpec)],
    installed: &BTreeSet<String>,
    only: Option<&str>,
) -> KeeperPlan {
    let wanted = |t: &str| only.is_none_or(|o| o == t);
    let mut out = KeeperPlan::default();
    for (t, s) in specs.iter().filter(|(t, _)| wanted(t)) {
        match s {
            PoolSpec::Kept => out.keep.push(t.clone()),
            PoolSpec::NotKept(_) if installed.contains(t) => out.remove.push(t.clone()),
            PoolSpec::NotKept(_) | PoolSpec::Broken => {}
        }
    }
    for t in installed.iter().filter(|t| wanted(t)) {
        if !specs.iter().any(|(s, _)| s == t) {
            out.remove.push(t.clone());
        }
    }
    out
}

/// The tenants with a keeper enabled in the user unit directory `unit_dir`: an enablement
/// link `default.target.wants/cyclix-pool@T.service`. A missing directory is an empty set.
#[must_use]
pub fn installed(unit_dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(unit_dir.join("default.target.wants"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter_map(|n| {
                    n.strip_prefix("cyclix-pool@")
                        .and_then(|r| r.strip_suffix(".service"))
                        .filter(|t| crate::spec::validate::tenant_name(t).is_ok())
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What the spec at `path` says about its keeper.
fn pool_spec(env: &HostEnv, path: &Path) -> Result<PoolSpec> {
    Ok(match super::super::spec_file::load_spec(path, env)? {
        Err(_) => PoolSpec::Broken,
        Ok(spec) => pool_spec_of(&spec),
    })
}

/// What the loaded `spec` says about its keeper.
pub(crate) fn pool_spec_of(spec: &crate::spec::Spec) -> PoolSpec {
    match spec.pool.as_ref() {
        Some(p) if p.size > 0 => {
            // The backend is the keeper's to find out (it says so in its state).
            match crate::run::pool::why_cold(spec, crate::render::Backend::Quadlet) {
                None => PoolSpec::Kept,
                Some(why) => PoolSpec::NotKept(Some(why.to_string())),
            }
        }
        _ => PoolSpec::NotKept(None),
    }
}

/// The keepers' part of `cyclix install` (after the templates are written and the manager
/// reloaded): enables and restarts the kept ones (a restart picks up a changed spec or
/// binary), removes the others. Returns false when a keeper did not start.
///
/// # Errors
/// D-Bus or I/O failures.
pub fn install(
    env: &HostEnv,
    units: &(impl UnitManager + Sync),
    unit_dir: &Path,
    specs: &[PathBuf],
    only: Option<&str>,
) -> Result<bool> {
    let mut states = Vec::new();
    for p in specs {
        if let Some(t) = p.file_stem().and_then(|s| s.to_str()) {
            let s = pool_spec(env, p)?;
            if let PoolSpec::NotKept(Some(why)) = &s {
                crate::outln!(
                    "{} not installed: the pool of {t} cannot be kept: {why}",
                    crate::naming::pool_service(t)
                );
            }
            states.push((t.to_owned(), s));
        }
    }
    let plan = plan(&states, &installed(unit_dir), only);
    for t in &plan.remove {
        remove(env, units, t, false)?;
    }
    let names: Vec<String> = plan
        .keep
        .iter()
        .map(|t| crate::naming::pool_service(t))
        .collect();
    if names.is_empty() {
        return Ok(true);
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    units.enable_unit_files(&refs)?;
    let mut ok = true;
    for u in &names {
        match units.restart(u, JobMode::Replace, KEEPER_JOB_DEADLINE) {
            Ok(_) => crate::outln!("enabled and started {u} (it fills the pool in the background)"),
            Err(e) => {
                crate::stderrln!("error: {u} did not start: {e} (`journalctl --user -u {u}`)");
                ok = false;
            }
        }
    }
    Ok(ok)
}

/// Stops and disables tenant `t`'s keeper and destroys its pool ([`drain`]); prints what it
/// did (with `quiet`, nothing when there was no keeper enabled and no environment).
///
/// # Errors
/// D-Bus failures, or the pool's state cannot be read.
pub fn remove(
    env: &HostEnv,
    units: &(impl UnitManager + Sync),
    t: &str,
    quiet: bool,
) -> Result<()> {
    let unit = crate::naming::pool_service(t);
    let gone = |r: Result<(), crate::systemd::Error>| match r {
        Err(crate::systemd::Error::NoSuchUnit { .. }) | Ok(()) => Ok(()),
        Err(e) => Err(e),
    };
    gone(
        units
            .stop(&unit, JobMode::Replace, KEEPER_JOB_DEADLINE)
            .map(drop),
    )?;
    gone(units.disable_unit_files(&[unit.as_str()]).map(drop))?;
    let dir = crate::layout::Runtime(env.runtime_dir()?.clone()).pool_dir(t);
    let (n, problems) = drain(units, &dir)?;
    if !quiet || n > 0 {
        crate::outln!(
            "removed {unit} (stopped, disabled); destroyed {n} environment(s) of its pool"
        );
    }
    for p in problems {
        crate::stderrln!("error: pool {t}: {p}");
    }
    Ok(())
}

/// Destroys every environment of the pool in `dir` that no run holds (ready, expiring, and
/// being filled by a filler that is dead) and the keeper's state file; a claimed one is its
/// run's. Returns how many were destroyed and what could not be.
///
/// # Errors
/// The pool's state cannot be read.
pub fn drain(units: &(impl UnitManager + Sync), dir: &Path) -> Result<(usize, Vec<String>)> {
    let state = PoolState::new(dir.to_path_buf());
    let host = RealRunHost::new();
    let mut paths: Vec<(String, PathBuf)> = state
        .take_expired(u128::MAX, 0)?
        .into_iter()
        .map(|f| {
            let p = state.expiring_path(&f.env);
            (f.env, p)
        })
        .collect();
    for (id, path, f) in state.filling()? {
        let pid = f.as_ref().map_or(0, |f| f.pid);
        if pid == 0 || !Path::new(&format!("/proc/{pid}")).exists() {
            paths.push((id, path));
        }
    }
    for (env, _) in state.held()?.into_iter().filter(|(_, s)| *s == "expiring") {
        if !paths.iter().any(|(id, _)| *id == env) {
            let p = state.expiring_path(&env);
            paths.push((env, p));
        }
    }
    let mut problems = Vec::new();
    let mut n = 0;
    for (id, path) in paths {
        match crate::run::pool::env::destroy(&state, units, &host, LOCK_WAIT, &id, &path) {
            None => n += 1,
            Some(l) => problems.push(l),
        }
    }
    let keeper = crate::run::pool::keeper::KeeperState::path(dir);
    if let Err(e) = std::fs::remove_file(&keeper)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(e).with_context(|| format!("removing {}", keeper.display()));
    }
    Ok((n, problems))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(xs: &[&str]) -> BTreeSet<String> {
        xs.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn keepers_follow_the_pools_of_the_specs() {
        let specs = vec![
            ("a".to_owned(), PoolSpec::Kept),
            ("b".to_owned(), PoolSpec::NotKept(None)),
            ("c".to_owned(), PoolSpec::Broken),
            (
                "d".to_owned(),
                PoolSpec::NotKept(Some("credentials".into())),
            ),
            ("e".to_owned(), PoolSpec::NotKept(None)),
        ];
        let p = plan(&specs, &set(&["a", "b", "c", "d", "gone"]), None);
        assert_eq!(p.keep, ["a"]);
        assert_eq!(p.remove, ["b", "d", "gone"]);
        let p = plan(&specs, &set(&["b", "gone"]), Some("a"));
        assert_eq!(
            (p.keep.as_slice(), p.remove.len()),
            (["a".to_owned()].as_slice(), 0)
        );
    }

    #[test]
    fn installed_reads_the_enablement_links() {
        let d = tempfile::tempdir().expect("tempdir");
        let w = d.path().join("default.target.wants");
        std::fs::create_dir_all(&w).expect("test dir");
        for n in [
            "cyclix-pool@a.service",
            "cyclix-run@b.service",
            "cyclix-pool@..service",
        ] {
            std::fs::write(w.join(n), "").expect("test file");
        }
        assert_eq!(installed(d.path()), set(&["a"]));
        assert!(installed(&d.path().join("missing")).is_empty());
    }
}
