//! `cyclix twin TENANT [--json]`: builds two environments of the tenant from one commit at the
//! same time, runs the gate's quick suite in each and in a reference, tears everything down
//! and compares (`run::twin`, verdict in `twin`). Exit 0 when both environments and the
//! reference agree and nothing is shared or left; 1 otherwise; 2 when cyclix itself failed.

use std::path::Path;
use std::time::SystemTime;

use anyhow::Result;

use super::clock::{new_run_id, now_ms};
use super::tenant;
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::git::Git;
use crate::render::Backend;
use crate::run::host::RealRunHost;
use crate::run::lock::{self, Acquire, Holder};
use crate::run::twin::{self, TwinInputs};

/// `--if-setup-changed REV --at AT`: the commit of `AT` when a setup path of `spec` (its
/// `setup:` with the Containerfiles `build:` names, and `.cyclix/`) differs between the
/// commits of `REV` and `AT` in the tenant's repository (tree to tree, and every commit on
/// the way), after saying which; `None` after printing "setup unchanged".
///
/// # Errors
/// A revision that names no commit (an input error naming it); git failures.
fn setup_changed(spec: &crate::spec::Spec, rev: &str, at: &str) -> Result<Option<String>> {
    let git = Git::new(&spec.repo.path);
    let resolve = |r: &str, flag: &str| {
        git.rev_parse_commit(r).map_err(|e| {
            crate::exit::input(format!(
                "{flag} {r}: {e}; fix: name a commit, branch or tag of {}",
                spec.repo.path
            ))
        })
    };
    let from = resolve(rev, "--if-setup-changed")?;
    let to = resolve(at, "--at")?;
    let paths = crate::spec::setup_pathspecs(&spec.setup, false);
    let changed = git.touched_among(&from, &to, &paths)?;
    let short = |c: &str| c.get(..12).unwrap_or(c).to_string();
    if changed.is_empty() {
        crate::outln!(
            "setup unchanged between {rev} ({}) and {at} ({}): twin skipped",
            short(&from),
            short(&to)
        );
        return Ok(None);
    }
    // The paths are names in commits (the agent's, once merged): control characters are
    // replaced before they reach a terminal or a CI log (attack review 17).
    let names: Vec<String> = changed.iter().map(|p| crate::text::printable(p)).collect();
    crate::stderrln!(
        "cyclix: setup changed between {rev} and {at}: {}; running the twin at {}",
        names.join(", "),
        short(&to)
    );
    Ok(Some(to))
}

/// [`run`] with the arguments of `cyclix twin` (`cmd` is [`crate::cli::Command::Twin`]).
///
/// # Errors
/// As [`run`].
pub fn dispatch(env: &HostEnv, cmd: &crate::cli::Command) -> Result<Outcome> {
    let crate::cli::Command::Twin {
        tenant,
        spec,
        backend,
        json,
        if_setup_changed,
        at,
    } = cmd
    else {
        anyhow::bail!("invariant: twin_cmd::dispatch is called for `cyclix twin` only");
    };
    run(
        env,
        tenant,
        spec.as_deref(),
        *backend,
        *json,
        if_setup_changed.as_deref().map(|r| (r, at.as_deref())),
    )
}

/// Runs the verb.
///
/// # Errors
/// Failures of cyclix itself (no runtime dir, no user bus, unreadable spec).
pub fn run(
    env: &HostEnv,
    tenant: &str,
    spec_path: Option<&Path>,
    force_backend: Option<Backend>,
    json: bool,
    if_setup_changed: Option<(&str, Option<&str>)>,
) -> Result<Outcome> {
    let runtime_dir = env.runtime_dir()?.clone();
    // A twin compares two sandboxed environments: only tier `container` has them.
    let container_only = |spec: &crate::spec::Spec| {
        (!spec.tier.is_sandboxed()).then(|| {
            format!(
                "tenant {tenant} has tier `{}`: a twin compares two sandboxed environments \
                 (pod, networks, proxy), which only tier `container` has; set `tier: container`",
                spec.tier
            )
        })
    };
    let Some((mut spec, backend)) =
        tenant::runnable_spec(env, tenant, spec_path, force_backend, &container_only)?
    else {
        return Ok(Outcome::Findings);
    };
    if let Some((rev, at)) = if_setup_changed {
        let Some(at) = setup_changed(&spec, rev, at.unwrap_or("HEAD"))? else {
            return Ok(Outcome::Ok);
        };
        spec.repo.base = at;
    }
    // One commit for both environments and the reference: the base ref resolved once.
    let commit = Git::new(&spec.repo.path).rev_parse_commit(&spec.repo.base)?;
    spec.repo.base.clone_from(&commit);
    let quick = spec.gate.quick_argv().to_vec();
    let id = new_run_id(SystemTime::now(), std::process::id());
    // Images built from the project's files: once, from the same commit, for both sides.
    if crate::run::phases::build::has_builds(&spec) {
        spec = super::image_builds::build_images(&spec, &commit, &id)?.0;
    }
    let holder = Holder {
        run_id: format!("{id}-a"),
        pid: std::process::id(),
        started_ms: now_ms(),
    };
    let _lock = match lock::try_acquire(&lock::path(&runtime_dir, tenant), &holder)? {
        Acquire::Held(l) => l,
        Acquire::Busy(h) => {
            crate::stderrln!(
                "error: tenant {tenant} is busy{}; wait for it or `cyclix stop {tenant}`",
                h.map(|h| format!(" with run {} (pid {})", h.run_id, h.pid))
                    .unwrap_or_default()
            );
            return Ok(Outcome::Findings);
        }
    };
    let Some(task) = tenant::task_text(&spec) else {
        return Ok(Outcome::Findings);
    };
    // No agent runs in a twin, so it needs none of the agent's secrets (issue 19, item 4): its
    // variables and credentials are left out (the services keep theirs).
    let mut twin_spec = spec.clone();
    twin_spec.agent.env.clear();
    twin_spec.agent.credentials.clear();
    let side = |suffix: &str| {
        tenant::run_inputs(
            env,
            &runtime_dir,
            twin_spec.clone(),
            format!("{id}-{suffix}"),
            backend,
            task.clone(),
        )
    };
    let inputs = TwinInputs {
        a: side("a")?,
        b: side("b")?,
        reference: side("ref")?,
        quick,
    };
    crate::stderrln!(
        "cyclix: twin of tenant {tenant} at {}: environments {id}-a and {id}-b ({backend:?} units), reference {id}-ref",
        &commit[..12.min(commit.len())]
    );
    let units = tenant::unit_manager(env)?;
    let file = spec_path.map_or_else(|| tenant::tenant_spec_path(env, tenant), Path::to_path_buf);
    let host = RealRunHost::new().with_mount_guard(file.display().to_string(), env.clone());
    let report = twin::execute(&inputs, &units, &host);
    if json {
        crate::outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        crate::out!("{}", report.text());
    }
    Ok(Outcome::from_passed(report.verdict.passed))
}
