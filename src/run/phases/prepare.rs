//! The prepare phase: the base commit, the run dir with the task, the subnet and port
//! reservations, the tripwires and the probes' context, the work tree on the run branch and
//! the run's secrets; each is in the ledger before it is created. It first waits, bounded,
//! for podman's storage lock (security-cases §3, `run::storage_lock`).

use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result};

use super::super::boundary;
use super::super::ledger::{Entry, Ledger};
use super::super::reserve::{reserve_ports, reserve_subnet};
use super::super::state::RunState;
use super::super::tripwire::{self, Tripwires};
use crate::render::{self, plan::TASK_FILE};
use crate::run::seam::{RunGit, RunHost, RunPodman, RunProcs};
use crate::spec::Spec;

/// What the prepare phase needs of the run's inputs.
pub(crate) struct Prepare<'a> {
    /// The validated spec (its mounts are checked; repository, tier, services, tenant).
    pub(crate) spec: &'a Spec,
    /// The run id.
    pub(crate) run_id: &'a str,
    /// This run's state directory (created here, with the task and control directory).
    pub(crate) run_dir: &'a Path,
    /// This run's work tree (created here).
    pub(crate) worktree: &'a Path,
    /// The task text.
    pub(crate) task: &'a str,
    /// Secret values by variable name.
    pub(crate) secrets: &'a [(String, Vec<u8>)],
    /// How long to wait for podman's storage lock (`Deadlines::storage_lock`).
    pub(crate) storage_lock: Duration,
    /// Set by SIGTERM/SIGINT: the wait for the storage lock ends.
    pub(crate) interrupted: &'a AtomicBool,
    /// What the tripwires and the probes' context need.
    pub(crate) tripwires: Plant<'a>,
    /// A claimed environment's subnet octet (reserved by its fill); `None`: reserve one.
    pub(crate) octet: Option<u8>,
}

/// What [`prepare`] made: the base commit, the git common dir, the subnet octet, the services'
/// ports and the setup paths bound read-only over the work tree.
pub(crate) type Prepared = (String, PathBuf, u8, Vec<u16>, Vec<String>);

/// What [`plant_and_describe`] needs of the run's inputs.
pub(crate) struct Plant<'a> {
    /// The run id.
    pub(crate) run_id: &'a str,
    /// Where the escape tripwires are planted.
    pub(crate) tripwire_dir: &'a Path,
    /// What the probes must find (completed here, then written as `probe.json`).
    pub(crate) probe_context: &'a crate::probe::Context,
    /// Host sockets the escape probe tries to reach.
    pub(crate) probe_sockets: &'a [String],
}

/// The run's base commit (`base_override`, else `repo.base`) and the repository's common git
/// dir. A base that names a branch since deleted, or `main` in a `master` repository, and a
/// `repo.path` that is no git work tree name the spec's file, line and key (newcomer trial 8).
fn base_and_common(
    spec: &crate::spec::Spec,
    host: &dyn RunGit,
    repo: &Path,
    base_override: Option<&str>,
) -> Result<(String, PathBuf)> {
    let base = match base_override {
        Some(b) => host.rev_parse(repo, b)?,
        None => host
            .rev_parse(repo, &spec.repo.base)
            .with_context(|| spec.at(spec.repo.base_line, "repo.base"))?,
    };
    let common = host
        .common_dir(repo)
        .with_context(|| spec.at(spec.repo.path_line, "repo.path"))?;
    Ok((base, common))
}

/// The run's report FIFO (`render::plan::report_fifo`); under tier `gvisor` in a directory of
/// its own beside the private repository, in the ledger (removed as plain files with the gates'
/// trees) before it exists.
///
/// # Errors
/// The directory or the FIFO cannot be made (named with the path).
fn make_report_fifo(inp: &Prepare<'_>, ledger: &mut crate::run::ledger::Ledger) -> Result<()> {
    let tier = inp.spec.tier;
    let fifo = render::plan::report_fifo(inp.run_dir, inp.worktree, tier);
    if tier == crate::tier::Tier::Gvisor {
        let dir = crate::layout::report_tree(inp.worktree);
        ledger.record(crate::run::ledger::Entry::GateTree { path: dir.clone() })?;
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    crate::run::report_fifo::make(&fifo)
}

/// Base commit (`base_override`, else `repo.base`), git common dir and subnet; run dir with
/// the task; worktree on the run branch; the run's secrets. Each is in the ledger before it
/// is created. Tier `container`: also the setup paths to bind read-only over the work tree
/// (`run::phases::setup`, resolved in the user's repository at the base), declared to the probes.
pub(crate) fn prepare(
    inp: &Prepare<'_>,
    host: &dyn RunHost,
    created: &mut RunState,
    branch: &str,
    base_override: Option<&str>,
) -> Result<Prepared> {
    let spec = inp.spec;
    host.check_mounts(spec)?; // before anything exists: `host::mount_scan` (issue 11)
    let repo = PathBuf::from(&spec.repo.path);
    if spec.tier.is_sandboxed() {
        // Before anything exists: a stuck holder fails the run here, with nothing to undo.
        wait_for_storage_lock(
            inp.storage_lock,
            inp.interrupted,
            host,
            &mut created.notices,
        )?;
    }
    // A delivery to a fixed branch starts from its remote tip (`run::phases::deliver::start`).
    let (base, common) = base_and_common(spec, host, &repo, base_override)?;
    let (setup, declared) = setup_mounts(inp, host, &base)?;
    let ledger = &mut created.ledger;
    ledger.record(Entry::RunDir {
        path: inp.run_dir.to_path_buf(),
    })?;
    std::fs::create_dir_all(inp.run_dir)
        .with_context(|| format!("creating run dir {}", inp.run_dir.display()))?;
    let runs_root = inp
        .run_dir
        .parent()
        .context("invariant: the run dir has a parent")?;
    let reservations = |kind| Entry::Reservations {
        dir: crate::layout::reservations_beside(runs_root, kind),
    };
    ledger.record(reservations(crate::layout::SUBNETS_DIR))?;
    let octet = match inp.octet {
        // A claimed environment's subnet, reserved by its fill under this run's id.
        Some(n) => super::super::reserve::held_subnet(runs_root, inp.run_id, n)?,
        // Only a run that reserves one lists the subnets in use (a podman call).
        None => reserve_subnet(runs_root, inp.run_id, &host.used_subnets()?)?.0,
    };
    let ports = if spec.tier.is_sandboxed() {
        if !spec.services.is_empty() {
            ledger.record(reservations(crate::layout::PORTS_DIR))?;
        }
        reserve_ports(runs_root, inp.run_id, &spec.services, &mut Vec::new())?
    } else {
        // The host tiers run no services (their agent runs on the host, not in a pod).
        Vec::new()
    };
    // A preset CLI reads its environment first, then the task (issue 14 item 2).
    let task = match &spec.agent.preset {
        Some(_) => std::borrow::Cow::Owned(crate::render::prompt::compose(spec, inp.task)),
        None => std::borrow::Cow::Borrowed(inp.task),
    };
    std::fs::write(inp.run_dir.join(TASK_FILE), task.as_bytes())
        .context("writing the task file")?;
    let ctl = inp.run_dir.join(render::plan::CTL_DIR);
    std::fs::create_dir_all(&ctl).with_context(|| format!("creating {}", ctl.display()))?;
    // The host tiers have no boundary to prove (their records say so): no tripwires, no probes.
    if spec.tier.is_sandboxed() {
        make_report_fifo(inp, &mut created.ledger)?;
        if !spec.agent.env.is_empty() {
            crate::run::handover::make(&ctl.join(render::plan::HANDOVER_FILE))?;
        }
        let tw = plant_and_describe(
            &inp.tripwires,
            &mut created.ledger,
            (&common, octet, &ctl),
            &declared,
        )?;
        created.tripwires = Some(tw);
    }
    if let Some(parent) = inp.worktree.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    if spec.tier.is_sandboxed() {
        // A private repository: nothing of the user's is mounted into any container, and the
        // run branch appears in the user's repository only when the import creates it.
        created.repo_before = Some(host.repo_state(&repo)?);
        created.ledger.record(Entry::Worktree {
            path: inp.worktree.to_path_buf(),
            private: true,
        })?;
        host.private_repo(&repo, inp.worktree, branch, &base)?;
    } else {
        created.refs_before = Some(host.refs(&repo)?);
        created.ledger.record(Entry::Worktree {
            path: inp.worktree.to_path_buf(),
            private: false,
        })?;
        created.ledger.record(Entry::Branch {
            refname: format!("refs/heads/{branch}"),
            base: base.clone(),
        })?;
        host.worktree_add(&repo, inp.worktree, branch, &base)?;
        created.branch_made = true;
    }
    // A credential's value is among the run's secrets (for redaction and the delivery scan)
    // but goes to no container as a variable: only into the proxy's include file below.
    let handed = |var: &str| !spec.agent.credentials.iter().any(|c| c.env == var);
    let to_containers: Vec<(String, Vec<u8>)> = inp
        .secrets
        .iter()
        .filter(|(var, _)| handed(var))
        .cloned()
        .collect();
    if !spec.tier.is_sandboxed() {
        write_host_env(inp.run_dir, &to_containers)?;
        return Ok((base, common, octet, ports, setup));
    }
    create_secrets(inp, host, created, &to_containers)?;
    Ok((base, common, octet, ports, setup))
}

/// Tier `container`: the setup paths to bind read-only over the work tree, resolved in the
/// user's repository at `base` before the agent exists (it never writes there), and the same
/// as mounts declared to the probes (P18 then proves each is read-only).
fn setup_mounts(
    inp: &Prepare<'_>,
    host: &dyn RunGit,
    base: &str,
) -> Result<(Vec<String>, Vec<crate::probe::DeclaredMount>)> {
    if !inp.spec.tier.is_sandboxed() {
        return Ok((Vec::new(), Vec::new()));
    }
    let setup = super::setup::resolve(inp.spec, host, base)?;
    let declared = setup
        .iter()
        .map(|p| crate::probe::DeclaredMount {
            target: format!("{}/{p}", render::plan::WORKDIR),
            source: inp.worktree.join(p).display().to_string(),
            read_only: true,
        })
        .collect();
    Ok((setup, declared))
}

/// The run's podman secrets (each in the ledger first): one per variable a service receives
/// (the agent's come through the hand-over), and the proxy's credential include file when the
/// spec has credentials.
fn create_secrets(
    inp: &Prepare<'_>,
    host: &dyn RunPodman,
    created: &mut RunState,
    to_containers: &[(String, Vec<u8>)],
) -> Result<()> {
    let spec = inp.spec;
    created.ledger.record(Entry::Podman)?;
    let names = crate::naming::RunNames::new(inp.run_id);
    let labels = vec![
        (
            crate::naming::label::TENANT.to_string(),
            spec.tenant.clone(),
        ),
        (
            crate::naming::label::RUN.to_string(),
            inp.run_id.to_string(),
        ),
    ];
    // The agent's variables reach it at the go through the hand-over FIFO (`run::handover`):
    // podman secrets only for what a service takes.
    let to_services = to_containers
        .iter()
        .filter(|(var, _)| spec.services.iter().any(|s| s.env.contains(var)));
    for (var, value) in to_services {
        let name = names.secret(var);
        created
            .ledger
            .record(Entry::Secret { name: name.clone() })?;
        host.secret_create(&name, value, &labels)?;
    }
    // A claimed warm environment's proxy reads the lines from its credential file, written at
    // the claim (`run::pool::credfile`): no secret for it.
    if !spec.agent.credentials.is_empty() && inp.octet.is_none() {
        let include = credential_include(spec, inp.secrets)?;
        let name = names.secret(render::plan::CREDENTIALS_SECRET_VAR);
        created
            .ledger
            .record(Entry::Secret { name: name.clone() })?;
        host.secret_create(&name, include.as_bytes(), &labels)?;
    }
    Ok(())
}

/// The proxy's include file (`render::proxy::credentials::include_file`) from the values of
/// the spec's credentials among `secrets`.
///
/// # Errors
/// A credential whose value is missing or cannot be carried in a header.
pub(crate) fn credential_include(
    spec: &crate::spec::Spec,
    secrets: &[(String, Vec<u8>)],
) -> Result<String> {
    let mut values: Vec<&[u8]> = Vec::new();
    for c in &spec.agent.credentials {
        let Some((_, v)) = secrets.iter().find(|(k, _)| *k == c.env) else {
            anyhow::bail!("agent.credentials: no value for `{}`", c.env);
        };
        values.push(v);
    }
    Ok(render::proxy::credentials::include_file(
        &spec.agent.credentials,
        &values,
    )?)
}

/// Plants the run's tripwires (each in the ledger first) and writes the probes' context
/// (what they must find, where the tripwires are, `extra` mounts such as the read-only setup
/// paths, each expected and declared) to the control directory `ctl`.
pub(crate) fn plant_and_describe(
    inp: &Plant<'_>,
    ledger: &mut Ledger,
    (common, octet, ctl): (&Path, u8, &Path),
    extra: &[crate::probe::DeclaredMount],
) -> Result<Tripwires> {
    for path in tripwire::paths(inp.tripwire_dir, inp.run_id) {
        ledger.record(Entry::Tripwire { path })?;
    }
    ledger.record(Entry::Sentinel {
        name: tripwire::sentinel_name(inp.run_id),
    })?;
    let tw = tripwire::plant(inp.tripwire_dir, common, inp.run_id)?;
    let mut ctx = inp.probe_context.clone();
    let escape = crate::probe::Escape {
        key: tw.key.display().to_string(),
        outside: tw.outside.display().to_string(),
        sentinel_pid: i32::try_from(tw.sentinel_pid()).unwrap_or(i32::MAX),
        sockets: inp.probe_sockets.to_vec(),
    };
    boundary::complete_context(&mut ctx, inp.run_id, octet, common, escape);
    ctx.expected_binds
        .extend(extra.iter().map(|m| m.target.clone()));
    ctx.declared_mounts.extend(extra.iter().cloned());
    std::fs::write(
        ctl.join(render::plan::PROBE_CONTEXT_FILE),
        serde_json::to_vec_pretty(&ctx).context("serialising the probe context")?,
    )
    .context("writing the probe context")?;
    Ok(tw)
}

/// No container: the secret values go to the host unit through an env file (mode 0600) in
/// the run directory, removed with it; the unit file only names the file.
pub(crate) fn write_host_env(run_dir: &Path, secrets: &[(String, Vec<u8>)]) -> Result<()> {
    let path = run_dir.join(render::plan::HOST_ENV_FILE);
    let mut text = Vec::new();
    for (var, value) in secrets {
        text.extend_from_slice(var.as_bytes());
        text.push(b'=');
        text.extend_from_slice(&systemd_env_quote(value));
        text.push(b'\n');
    }
    let mut f = std::fs::File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    std::io::Write::write_all(&mut f, &text)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// A value for a systemd `EnvironmentFile=` line: double-quoted, with `\\`, `"`, `$` and
/// newlines escaped (systemd.exec(5), `EnvironmentFile=`).
pub(crate) fn systemd_env_quote(v: &[u8]) -> Vec<u8> {
    let mut out = vec![b'"'];
    for &b in v {
        match b {
            b'\\' | b'"' | b'$' | b'`' => {
                out.push(b'\\');
                out.push(b);
            }
            b'\n' => out.extend_from_slice(b"\\n"),
            _ => out.push(b),
        }
    }
    out.push(b'"');
    out
}

/// Waits (at most `wait`) until no other process holds podman's storage
/// locks; a holder that stays is named in the error (security-cases §3). A wait longer than a
/// second is noted in the record.
pub(crate) fn wait_for_storage_lock(
    wait: Duration,
    interrupted: &AtomicBool,
    host: &dyn RunProcs,
    notices: &mut Vec<String>,
) -> Result<()> {
    let waited = crate::run::storage_lock::wait_free(
        || host.storage_lock_holders(None),
        wait,
        Duration::from_millis(100).min(wait),
        || interrupted.load(Ordering::SeqCst),
    )?;
    if waited >= Duration::from_secs(1) {
        notices.push(format!(
            "waited {} ms for podman's storage lock before the run could start",
            waited.as_millis()
        ));
    }
    Ok(())
}
