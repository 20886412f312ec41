//! `cyclix uninstall`: removes what `cyclix install` installed: the pool keepers (stopped,
//! disabled, their pools' environments destroyed), the tenants' timers (stopped,
//! disabled, drop-ins deleted), the unit templates, the man pages, the bash completion and the
//! spec's schema; never specs, env files, records, work trees or run branches, and says so
//! (issue 18, item 7). Refused while a run is in progress (its unit file would go from under it).

use anyhow::{Context as _, Result};

use super::installer::{docs, pools, remove_timer, timers};
use super::tenant::unit_manager;
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::naming::template;
use crate::systemd::UnitManager as _;

/// `cyclix uninstall`.
///
/// # Errors
/// A run in progress (an input error naming it), D-Bus or I/O failures.
pub fn run(env: &HostEnv) -> Result<Outcome> {
    let layout = env.layout();
    let unit_dir = layout.user_units_dir();
    let installed = timers::installed(&unit_dir);
    let mut tenants: std::collections::BTreeSet<String> = installed.clone();
    tenants.extend(super::completion::tenant_names(&layout.tenants_dir()));
    for t in &tenants {
        if let Some(c) = super::current_run::current_run(env, t) {
            return Err(crate::exit::input(format!(
                "tenant {t}: {}; fix: wait for it or `cyclix stop {t}`, then uninstall",
                super::current_run::current_line(&c)
            )));
        }
    }
    let units = unit_manager(env)?;
    // The pool keepers first (a keeper fills from the templates' binary), then their pools.
    let keepers = pools::installed(&unit_dir);
    let mut pooled = keepers.clone();
    pooled.extend(tenants.iter().cloned());
    if let Ok(rt) = env.runtime() {
        pooled.extend(pool_tenants(&rt.cyclix_dir().join("pool")));
    }
    for t in &pooled {
        pools::remove(env, &units, t, !keepers.contains(t))?;
    }
    for t in &installed {
        remove_timer(&units, &unit_dir, t)?;
        crate::outln!(
            "removed {} (stopped, disabled, drop-in deleted)",
            crate::naming::run_timer(t)
        );
    }
    let mut removed = Vec::new();
    let templates = [
        template::RUN_SERVICE,
        template::RUN_TIMER,
        template::TICK_SERVICE,
        template::NOTIFY_SERVICE,
        template::POOL_SERVICE,
    ];
    let mut paths: Vec<std::path::PathBuf> = templates.iter().map(|n| unit_dir.join(n)).collect();
    paths.extend(
        tenants
            .iter()
            .map(|t| unit_dir.join(crate::naming::notify_dropin(t))),
    );
    paths.extend(docs::files(env, "/")?.into_iter().map(|f| f.path));
    for p in paths {
        match std::fs::remove_file(&p) {
            Ok(()) => {
                if p.to_string_lossy().ends_with("notify.conf")
                    && let Some(dir) = p.parent()
                {
                    let _ = std::fs::remove_dir(dir);
                }
                removed.push(p);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", p.display())),
        }
    }
    units.reload()?;
    for p in &removed {
        crate::outln!("removed {}", p.display());
    }
    if removed.is_empty() && installed.is_empty() && keepers.is_empty() {
        crate::outln!("nothing of cyclix was installed");
    }
    if let super::installer::packaged::Templates::Packaged { dir } =
        super::installer::packaged::Templates::of_host(String::new())
    {
        crate::outln!(
            "the Debian package's unit templates ({}), man pages, completion and schema stay: `apt remove cyclix` removes them",
            dir.display()
        );
    }
    crate::outln!(
        "left as they were: the specs and env files in {}, the run records in {}, the work trees in {}, the run branches (`cyclix/TENANT/RUN`) in your repositories, and the images",
        layout.tenants_dir().display(),
        layout.records_root().display(),
        layout.worktrees_root().display()
    );
    Ok(Outcome::Ok)
}

/// The tenants with a pool directory in `dir` (`$XDG_RUNTIME_DIR/cyclix/pool/`); none when it
/// does not exist.
fn pool_tenants(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|t| super::tenant::check_name(t).is_ok())
        .collect()
}
