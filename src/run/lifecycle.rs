//! The lifecycle of one run, over the two seams (`systemd::UnitManager`, `run::seam::RunHost`).
//!
//! Order (DESIGN.md): prepare (base commit, worktree on the run branch, run dir, task file,
//! secrets) → render → install → reload (+ confirm every unit is loaded, B01) → start the
//! proxy and services → agent (runs to its end) → gate (no network) → collect (commits, proxy
//! decisions) → teardown (stop every unit incl. the generated -network/-pod oneshots, reset
//! failed ones, remove files, reload, remove labelled objects and secrets, remove the worktree,
//! keep the branch) → audit (anything left is a leftover and fails the run). Teardown runs
//! whatever phase failed; every failure names its phase.

use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, anyhow, bail};

use super::boundary::{self, Watched};
use super::record::{Phase, RunRecord, RunResult};
use super::seam::RunHost;
use super::tripwire::{self, Tripwires};
use crate::render::{self, Backend, Dest, RunContext, plan::TASK_FILE};
use crate::spec::Spec;
use crate::systemd::{ActiveState, Error as UnitError, JobMode, LoadState, UnitManager};
use crate::tier::Tier;

/// Deadlines of the lifecycle, in one place.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    /// Starting one unit (job + state), e.g. the proxy or the pod.
    pub start: Duration,
    /// Stopping one unit.
    pub stop: Duration,
    /// Polling interval while the agent or gate runs.
    pub poll: Duration,
    /// Slack on top of the spec's agent/gate timeouts (systemd's `RuntimeMaxSec=` fires first).
    pub slack: Duration,
    /// The whole pre-agent probe run (`cyclix probe` in the agent container).
    pub probe: Duration,
    /// Interval of the leak watch (★ probes + host-side environment scan) while the agent runs.
    pub watch: Duration,
    /// How long the audit waits for the run's processes (conmon, B11) to be gone after
    /// teardown before it counts them as leftovers.
    pub settle: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            start: Duration::from_secs(90),
            stop: Duration::from_secs(45),
            poll: Duration::from_millis(100),
            slack: Duration::from_secs(60),
            probe: Duration::from_secs(30),
            watch: Duration::from_secs(5),
            settle: Duration::from_secs(3),
        }
    }
}

/// Where a run's files go (resolved by the caller from the host environment).
#[derive(Debug, Clone)]
pub struct RunPaths {
    /// Quadlet's runtime user directory (`$XDG_RUNTIME_DIR/containers/systemd`).
    pub quadlet_dir: PathBuf,
    /// The runtime user unit directory (`$XDG_RUNTIME_DIR/systemd/user`).
    pub units_dir: PathBuf,
    /// This run's state directory (`$XDG_RUNTIME_DIR/cyclix/runs/RUN`).
    pub run_dir: PathBuf,
    /// This run's worktree.
    pub worktree: PathBuf,
}

/// Everything one run needs, resolved by the caller.
#[derive(Debug, Clone)]
pub struct RunInputs {
    /// The validated spec.
    pub spec: Spec,
    /// The run id.
    pub run_id: String,
    /// Unit flavour.
    pub backend: Backend,
    /// Paths.
    pub paths: RunPaths,
    /// The task text (from `task.text` or the file `task.file`, read by the caller).
    pub task: String,
    /// Secret values by variable name (read from cyclix's own environment by the caller).
    pub secrets: Vec<(String, Vec<u8>)>,
    /// Deadlines.
    pub deadlines: Deadlines,
    /// Notices to carry into the record (e.g. the tier's "no isolation").
    pub notices: Vec<String>,
    /// Absolute path of the cyclix binary, mounted into the agent container.
    pub cyclix_bin: PathBuf,
    /// What the probes must find (written to the control directory as `probe.json`).
    pub probe_context: crate::probe::Context,
    /// Host variables the sandbox must never see (by name and by value).
    pub watched: Vec<Watched>,
    /// Where the escape tripwires are planted (the user's home: never mounted into a sandbox).
    pub tripwire_dir: PathBuf,
    /// Host sockets the escape probe tries to reach (user bus, podman socket).
    pub probe_sockets: Vec<String>,
    /// Set by SIGTERM/SIGINT (`cyclix stop`, `systemctl --user stop`, Ctrl-C): the run stops
    /// at the next check, and teardown and the audit still run.
    pub interrupted: Arc<AtomicBool>,
    /// Where the run notes the phase (and teardown step) it is in, one line, replaced at each
    /// (`RUN.phase` beside the run's marker): convergence reads it to say where a cyclix that
    /// died was. `None`: not noted.
    pub progress: Option<PathBuf>,
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Records each phase's timing and outcome; a phase that fails adds `phase NAME` to the error.
pub(crate) struct Recorder {
    pub(crate) phases: Vec<Phase>,
    interrupted: Option<Arc<AtomicBool>>,
    progress: Option<PathBuf>,
}

/// Notes `what` (a phase, `teardown/STEP`) in the progress file, then passes the fail point
/// of that name (`crate::failpoint`). Best effort: the note is for convergence's record only.
fn reached(progress: Option<&Path>, point: &str, what: &str) {
    if let Some(p) = progress {
        let tmp = p.with_extension("phase.tmp");
        if std::fs::write(&tmp, what).is_ok() {
            let _ = std::fs::rename(&tmp, p);
        }
    }
    crate::failpoint::kill_point(point);
}

impl Recorder {
    /// A recorder whose phases (except `teardown` and `audit`) fail once `interrupted` is set;
    /// each phase is noted in `progress` (for convergence) when given.
    pub(crate) fn new(interrupted: Option<Arc<AtomicBool>>, progress: Option<PathBuf>) -> Self {
        Recorder {
            phases: Vec::new(),
            interrupted,
            progress,
        }
    }

    pub(crate) fn phase<T>(&mut self, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        reached(self.progress.as_deref(), &format!("phase.{name}"), name);
        let start_ms = now_ms();
        let interrupted = !matches!(name, "teardown" | "audit")
            && self
                .interrupted
                .as_ref()
                .is_some_and(|i| i.load(Ordering::SeqCst));
        let r = if interrupted {
            Err(anyhow!(
                "interrupted (SIGTERM or SIGINT) before this phase; tearing down"
            ))
        } else {
            f()
        };
        let outcome = match &r {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("{e:#}"),
        };
        self.phases.push(Phase {
            name: name.into(),
            start_ms,
            end_ms: now_ms(),
            outcome,
        });
        r.with_context(|| format!("phase {name}"))
    }
}

/// What was created, so teardown undoes exactly that (plus a by-label sweep).
#[derive(Debug, Default)]
pub(crate) struct Created {
    pub(crate) tripwires: Option<Tripwires>,
    pub(crate) subnet_reservation: Option<PathBuf>,
    pub(crate) worktree: bool,
    pub(crate) run_dir: bool,
    pub(crate) secrets: Vec<String>,
    pub(crate) files: Vec<PathBuf>,
    pub(crate) units: Vec<String>,
    /// The repository's refs before the run (for the audit's ref check).
    pub(crate) refs_before: Option<Vec<(String, String)>>,
    /// The run branch's full ref and the commit it was created at, once created.
    pub(crate) branch: Option<(String, String)>,
    /// Set by teardown: the run branch had no commits and was deleted.
    pub(crate) branch_deleted: bool,
    /// Set by teardown: a git operation was half done in the worktree when it was removed.
    pub(crate) in_progress: Option<String>,
}

/// The run branch: `cyclix/TENANT/RUN`.
#[must_use]
pub fn branch_name(tenant: &str, run_id: &str) -> String {
    format!("cyclix/{tenant}/{run_id}")
}

/// Reserves the run's `10.213.N.0/24` among concurrent runs: podman only learns of the network
/// when its unit starts, so two runs that list the networks at the same time could pick the
/// same subnet (seen in parallel e2e runs: "subnet … is already used"). A reservation is a file
/// `RUNS_ROOT/../subnets/N` created exclusively and holding the run id; one whose run dir is
/// gone (a run that died, converged since) is stale and reclaimed. Returns the octet and the
/// file, which teardown removes.
///
/// # Errors
/// When no subnet is free, or on I/O failures.
pub fn reserve_subnet(runs_root: &Path, run_id: &str, used: &[String]) -> Result<(u8, PathBuf)> {
    let dir = runs_root.parent().unwrap_or(runs_root).join("subnets");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let start = u16::from(crate::app::default_subnet_octet(run_id));
    for i in 0..254u16 {
        let n = u8::try_from((start - 1 + i) % 254 + 1)
            .map_err(|_| anyhow!("invariant: octet fits in u8"))?;
        if used.iter().any(|u| u == &format!("10.213.{n}.0/24")) {
            continue;
        }
        let file = dir.join(n.to_string());
        for attempt in 0..2 {
            match std::fs::File::options()
                .write(true)
                .create_new(true)
                .open(&file)
            {
                Ok(mut f) => {
                    std::io::Write::write_all(&mut f, run_id.as_bytes())
                        .with_context(|| format!("writing {}", file.display()))?;
                    return Ok((n, file));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt == 0 => {
                    let owner = std::fs::read_to_string(&file).unwrap_or_default();
                    if owner.is_empty() || runs_root.join(owner.trim()).exists() {
                        break; // held by a live run
                    }
                    let _ = std::fs::remove_file(&file); // stale: its run is gone
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => break,
                Err(e) => return Err(e).with_context(|| format!("reserving {}", file.display())),
            }
        }
    }
    bail!(
        "all 254 run subnets 10.213.1-254.0/24 are in use; remove stale networks (`podman network ls`, `cyclix leftovers`)"
    )
}

/// Runs the whole lifecycle and returns the record (never an `Err`: failures are recorded
/// with their phase). The caller writes the record.
pub fn execute(inp: &RunInputs, units: &(dyn UnitManager + Sync), host: &dyn RunHost) -> RunRecord {
    let mut rec = new_record(inp);
    let mut r = Recorder::new(Some(inp.interrupted.clone()), inp.progress.clone());
    let mut created = Created::default();
    let outcome = bring_up_and_run(inp, units, host, &mut r, &mut created, &mut rec);
    match outcome {
        Ok(result) => rec.result = result,
        Err(e) => {
            rec.result = RunResult::Error;
            rec.failed_phase = r
                .phases
                .iter()
                .rev()
                .find(|p| p.outcome != "ok")
                .map(|p| p.name.clone());
            rec.error = Some(format!("{e:#}"));
        }
    }
    let torn = r.phase("teardown", || teardown(inp, units, host, &mut created));
    if created.branch_deleted {
        rec.notices.push(format!(
            "run branch {} deleted at teardown: it had no commits",
            rec.branch
        ));
    }
    let audit = r.phase("audit", || audit(inp, units, host, &created));
    match audit {
        Ok(left) => rec.leftovers = left,
        Err(e) => rec.leftovers.push(format!("audit could not run: {e:#}")),
    }
    if let Err(e) = torn {
        if rec.error.is_none() {
            rec.failed_phase = Some("teardown".into());
            rec.error = Some(format!("{e:#}"));
        }
        rec.result = RunResult::Error;
    }
    if !rec.leftovers.is_empty() && rec.result != RunResult::Error {
        rec.failed_phase = Some("audit".into());
        rec.error = Some(format!(
            "{} leftover(s) after teardown",
            rec.leftovers.len()
        ));
        rec.result = RunResult::Error;
    }
    rec.phases = r.phases;
    rec
}

/// The run's record before its first phase (result `error` until a phase decides otherwise).
pub(crate) fn new_record(inp: &RunInputs) -> RunRecord {
    let spec = &inp.spec;
    RunRecord {
        version: 1,
        tenant: spec.tenant.clone(),
        run_id: inp.run_id.clone(),
        tier: spec.tier.to_string(),
        result: RunResult::Error,
        failed_phase: None,
        error: None,
        phases: Vec::new(),
        agent_exit: None,
        gate_exit: None,
        branch: branch_name(&spec.tenant, &inp.run_id),
        base_commit: String::new(),
        commits: Vec::new(),
        probes: Vec::new(),
        agent_log: Vec::new(),
        gate_log: Vec::new(),
        refusal: Vec::new(),
        watch_rounds: 0,
        egress_decisions: Vec::new(),
        secret_names: inp.secrets.iter().map(|(k, _)| k.clone()).collect(),
        notices: inp.notices.clone(),
        leftovers: Vec::new(),
        units: Vec::new(),
        agent_ready_ms: None,
        go_ms: None,
        died_in: None,
    }
}

fn bring_up_and_run(
    inp: &RunInputs,
    units: &(dyn UnitManager + Sync),
    host: &dyn RunHost,
    r: &mut Recorder,
    created: &mut Created,
    rec: &mut RunRecord,
) -> Result<RunResult> {
    let spec = &inp.spec;
    let repo = PathBuf::from(&spec.repo.path);
    let (base, common, octet) = r.phase("prepare", || prepare(inp, host, created, &rec.branch))?;
    rec.base_commit.clone_from(&base);
    let run_ctx = run_context(inp, &common, octet);
    let rendered = r.phase("render", || {
        Ok(render::render(spec, &run_ctx, inp.backend)?)
    })?;
    rec.units.clone_from(&rendered.units.all);
    rec.notices.extend(rendered.warnings.iter().cloned());
    r.phase("install", || install(inp, &rendered, created))?;
    created.units.clone_from(&rendered.units.all);
    r.phase("reload", || reload_and_confirm(units, &rendered.units))?;
    r.phase("start", || start_units(inp, units, &rendered.units, rec))?;
    let result = agent_and_gate(inp, units, host, r, created, &rendered.units, rec)?;
    r.phase("collect", || {
        // `direct` works in the user's own checkout: its commits are on HEAD there.
        let tip = if spec.tier == Tier::Direct {
            "HEAD".to_string()
        } else {
            rec.branch.clone()
        };
        collect(units, host, &repo, &base, &rendered.units, rec, &tip)?;
        let secrets: Vec<&[u8]> = inp.secrets.iter().map(|(_, v)| v.as_slice()).collect();
        rec.agent_log = log_tail(&host.unit_journal(&rendered.units.agent)?, &secrets);
        if rec.gate_exit.is_some() {
            rec.gate_log = log_tail(&host.unit_journal(&rendered.units.gate)?, &secrets);
        }
        Ok(())
    })?;
    if let Some(tw) = created.tripwires.as_mut() {
        let tripped = r.phase("escape-check", || tripwire::check(tw))?;
        if !tripped.is_empty() {
            rec.refusal.extend(tripped);
            return Ok(RunResult::LeakDetected);
        }
    }
    Ok(result)
}

/// The run's host facts for the renderer.
pub(crate) fn run_context(inp: &RunInputs, common: &Path, octet: u8) -> RunContext {
    RunContext {
        run_id: inp.run_id.clone(),
        worktree: inp.paths.worktree.display().to_string(),
        git_common_dir: common.display().to_string(),
        run_dir: inp.paths.run_dir.display().to_string(),
        subnet_octet: octet,
        proxy_image: crate::images::PROXY_IMAGE.to_string(),
        cyclix_bin: inp.cyclix_bin.display().to_string(),
    }
}

/// The install phase: writes the rendered files (never over an existing one), recording each
/// for teardown.
pub(crate) fn install(
    inp: &RunInputs,
    rendered: &render::Rendered,
    created: &mut Created,
) -> Result<()> {
    for f in &rendered.files {
        let dir = match f.dest {
            Dest::Quadlet => &inp.paths.quadlet_dir,
            Dest::RuntimeUnits => &inp.paths.units_dir,
            Dest::RunDir => &inp.paths.run_dir,
            Dest::UserConfig => continue,
        };
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(&f.name);
        if path.exists() {
            bail!(
                "{} exists already: another run with the id {} is installed",
                path.display(),
                inp.run_id
            );
        }
        super::record::atomic_write(&path, f.contents.as_bytes())?;
        // Unit files and the proxy config hold no secret; the proxy reads its config as its
        // own (mapped) user, so it must be world-readable (0600 gave "Permission denied").
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .with_context(|| format!("setting the mode of {}", path.display()))?;
        created.files.push(path);
    }
    Ok(())
}

/// The reload phase: Reload, then confirm every unit of the run is loaded (B01).
pub(crate) fn reload_and_confirm(
    units: &dyn UnitManager,
    names: &render::plan::UnitNames,
) -> Result<()> {
    units.reload()?;
    for u in &names.all {
        let state = units.load_unit(u)?;
        if state != LoadState::Loaded {
            bail!(
                "unit {u} is {state} after the reload: the generator did not produce it \
                 (is Quadlet's user generator installed? `cyclix check` tells)"
            );
        }
    }
    Ok(())
}

/// The start phase: the proxy (and what it pulls in) and, for tier `container`, the agent
/// unit. The agent unit starts as a job of its own next to the proxy's (systemd runs
/// independent jobs in parallel; the agent's `cyclix agent-wait` holds it until the probes
/// pass): about 200 ms of bring-up on the testbed (bench/run, issue 7). Sets
/// `rec.agent_ready_ms`.
pub(crate) fn start_units(
    inp: &RunInputs,
    units: &(dyn UnitManager + Sync),
    names: &render::plan::UnitNames,
    rec: &mut RunRecord,
) -> Result<()> {
    let container = inp.spec.tier == Tier::Container;
    std::thread::scope(|s| {
        let agent = container
            .then(|| s.spawn(|| units.start(&names.agent, JobMode::Replace, inp.deadlines.start)));
        let mut infra = Ok(());
        for u in &names.infra {
            if let Err(e) = units.start(u, JobMode::Replace, inp.deadlines.start) {
                infra = Err(e);
                break;
            }
        }
        if let Some(h) = agent {
            h.join()
                .map_err(|_| anyhow!("starting {} panicked", names.agent))??;
            rec.agent_ready_ms = Some(now_ms());
        }
        infra?;
        Ok(())
    })
}

/// The probe phase, then (if the boundary is proven) the agent under the leak watch, then
/// (if it succeeded) the gate.
fn agent_and_gate(
    inp: &RunInputs,
    units: &dyn UnitManager,
    host: &dyn RunHost,
    r: &mut Recorder,
    created: &mut Created,
    names: &render::plan::UnitNames,
    rec: &mut RunRecord,
) -> Result<RunResult> {
    let spec = &inp.spec;
    let agent = names.agent.trim_end_matches(".service").to_string();
    let agent_budget = Duration::from_secs(spec.agent.timeout_s) + inp.deadlines.slack;
    let end = if spec.tier == Tier::Container {
        let proven = r.phase("probe", || {
            prove(inp, host, &agent, created.tripwires.as_mut(), rec)
        })?;
        if !proven {
            return Ok(RunResult::ProbeRefused);
        }
        r.phase("agent", || {
            watch_to_end(inp, units, host, &names.agent, &agent, agent_budget, rec)
        })?
    } else {
        // The host tiers run the agent as a plain user unit: nothing to probe or watch.
        AgentEnd::Exit(r.phase("agent", || {
            run_to_end(
                units,
                &names.agent,
                inp.deadlines,
                agent_budget,
                &inp.interrupted,
            )
        })?)
    };
    let code = match end {
        AgentEnd::Leak => return Ok(RunResult::LeakDetected),
        AgentEnd::Exit(code) => code,
    };
    rec.agent_exit = Some(code);
    if code != 0 {
        return Ok(RunResult::AgentFailed);
    }
    let gate_budget = Duration::from_secs(spec.gate.timeout_s) + inp.deadlines.slack;
    let gate_exit = r.phase("gate", || {
        run_to_end(
            units,
            &names.gate,
            inp.deadlines,
            gate_budget,
            &inp.interrupted,
        )
    })?;
    rec.gate_exit = Some(gate_exit);
    Ok(if gate_exit == 0 {
        RunResult::Passed
    } else {
        RunResult::GateFailed
    })
}

/// Commits on the run branch, the proxy's health and its decisions.
fn collect(
    units: &dyn UnitManager,
    host: &dyn RunHost,
    repo: &Path,
    base: &str,
    names: &render::plan::UnitNames,
    rec: &mut RunRecord,
    tip: &str,
) -> Result<()> {
    rec.commits = host.commits(repo, base, tip)?;
    if let Some(proxy) = names.infra.first() {
        // Fail closed is not enough: a proxy that died means the run did not have the
        // egress its spec states, so the run is not trustworthy as a result.
        let st = units.unit_status(proxy)?;
        if st.active_state != ActiveState::Active {
            bail!(
                "the egress proxy {proxy} is {} while the run was on: the agent had no egress; \
                 see `journalctl --user -u {proxy}`",
                st.summary()
            );
        }
        rec.egress_decisions = host
            .unit_journal(proxy)?
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
            .filter(serde_json::Value::is_object)
            .collect();
    }
    Ok(())
}

/// Base commit, git common dir and subnet; run dir with the task; worktree on the run branch;
/// the run's secrets. Records what it created for teardown.
pub(crate) fn prepare(
    inp: &RunInputs,
    host: &dyn RunHost,
    created: &mut Created,
    branch: &str,
) -> Result<(String, PathBuf, u8)> {
    let spec = &inp.spec;
    let repo = PathBuf::from(&spec.repo.path);
    let base = host.rev_parse(&repo, &spec.repo.base)?;
    let common = host.common_dir(&repo)?;
    // The agent's container mounts these read-only over the shared git dir (B27); they
    // must exist to be mounted.
    for sub in ["hooks", "info"] {
        std::fs::create_dir_all(common.join(sub))
            .with_context(|| format!("creating {}", common.join(sub).display()))?;
    }
    std::fs::create_dir_all(&inp.paths.run_dir)
        .with_context(|| format!("creating run dir {}", inp.paths.run_dir.display()))?;
    created.run_dir = true;
    let used = host.used_subnets()?;
    let runs_root = inp
        .paths
        .run_dir
        .parent()
        .context("invariant: the run dir has a parent")?;
    let (octet, reservation) = reserve_subnet(runs_root, &inp.run_id, &used)?;
    created.subnet_reservation = Some(reservation);
    std::fs::write(inp.paths.run_dir.join(TASK_FILE), &inp.task)
        .context("writing the task file")?;
    let ctl = inp.paths.run_dir.join(render::plan::CTL_DIR);
    std::fs::create_dir_all(&ctl).with_context(|| format!("creating {}", ctl.display()))?;
    // The host tiers have no boundary to prove (their records say so): no tripwires, no probes.
    if spec.tier == Tier::Container {
        let tw = tripwire::plant(&inp.tripwire_dir, &common, &inp.run_id)?;
        let mut ctx = inp.probe_context.clone();
        let escape = crate::probe::Escape {
            key: tw.key.display().to_string(),
            outside: tw.outside.display().to_string(),
            sentinel_pid: i32::try_from(tw.sentinel_pid()).unwrap_or(i32::MAX),
            sockets: inp.probe_sockets.clone(),
        };
        boundary::complete_context(&mut ctx, &inp.run_id, octet, &common, escape);
        created.tripwires = Some(tw);
        std::fs::write(
            ctl.join(render::plan::PROBE_CONTEXT_FILE),
            serde_json::to_vec_pretty(&ctx).context("serialising the probe context")?,
        )
        .context("writing the probe context")?;
    }
    if let Some(parent) = inp.paths.worktree.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    created.refs_before = Some(host.refs(&repo)?);
    host.worktree_add(&repo, &inp.paths.worktree, branch, &base)?;
    created.worktree = true;
    created.branch = Some((format!("refs/heads/{branch}"), base.clone()));
    if spec.tier != Tier::Container {
        // No container: the values go to the host unit through an env file (mode 0600) in
        // the run directory, removed with it; the unit file only names the file.
        let path = inp.paths.run_dir.join(render::plan::HOST_ENV_FILE);
        let mut text = Vec::new();
        for (var, value) in &inp.secrets {
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
        return Ok((base, common, octet));
    }
    for (var, value) in &inp.secrets {
        let name = render::plan::secret_name(&inp.run_id, var);
        let labels = vec![
            ("io.cyclix.tenant".to_string(), spec.tenant.clone()),
            ("io.cyclix.run".to_string(), inp.run_id.clone()),
        ];
        host.secret_create(&name, value, &labels)?;
        created.secrets.push(name);
    }
    Ok((base, common, octet))
}

/// How many lines of the agent's and the gate's output the record keeps.
pub const LOG_TAIL_LINES: usize = 40;

/// The last [`LOG_TAIL_LINES`] lines a container printed, from its unit's journal: podman's own
/// event lines and conmon's warnings left out, every secret value replaced by `***`.
pub(crate) fn log_tail(journal: &[String], secrets: &[&[u8]]) -> Vec<String> {
    let mut lines: Vec<String> = journal
        .iter()
        .filter(|l| !l.contains(" UTC m=+") && !l.starts_with("conmon ") && !l.is_empty())
        .map(|l| {
            let mut l = l.clone();
            for s in secrets.iter().filter(|s| s.len() >= 4) {
                l = l.replace(&*String::from_utf8_lossy(s), "***");
            }
            l
        })
        .collect();
    let skip = lines.len().saturating_sub(LOG_TAIL_LINES);
    lines.drain(..skip);
    lines
}

/// A value for a systemd `EnvironmentFile=` line: double-quoted, with `\\`, `"`, `$` and
/// newlines escaped (systemd.exec(5), `EnvironmentFile=`).
fn systemd_env_quote(v: &[u8]) -> Vec<u8> {
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

/// Starts the agent's unit (its container holds the agent back in `agent-wait`), runs the
/// probes inside that very container, scans its processes' environments from the host, and
/// then lets the agent go (`ctl/go`) or refuses (`ctl/refused`). Returns whether it went.
fn prove(
    inp: &RunInputs,
    host: &dyn RunHost,
    container: &str,
    tripwires: Option<&mut Tripwires>,
    rec: &mut RunRecord,
) -> Result<bool> {
    let ctl = inp.paths.run_dir.join(render::plan::CTL_DIR);
    let go = boundary_proven(inp, host, container, tripwires, rec)?;
    let file = ctl.join(if go {
        render::plan::GO_FILE
    } else {
        render::plan::REFUSED_FILE
    });
    std::fs::write(&file, b"").with_context(|| format!("writing {}", file.display()))?;
    rec.go_ms = Some(now_ms());
    Ok(go)
}

/// The boundary check of [`prove`] without its verdict file: runs the probes inside the
/// agent's (held back) container, scans its processes' environments from the host, lists
/// strangers on the run's network and checks the tripwires. Sets `rec.probes` and
/// `rec.refusal`; returns whether everything passed.
pub(crate) fn boundary_proven(
    inp: &RunInputs,
    host: &dyn RunHost,
    container: &str,
    tripwires: Option<&mut Tripwires>,
    rec: &mut RunRecord,
) -> Result<bool> {
    // The agent unit was started in the start phase, next to the proxy.
    let (exit, stdout) = host.probe(container, &[], inp.deadlines.probe)?;
    let (probes, ok, mut why) = boundary::judge(exit, &stdout);
    rec.probes = probes;
    if !ok && why.is_empty() {
        why.push(format!(
            "the probe run exited {exit} without a complete report"
        ));
    }
    why.extend(boundary::leaks(
        &host.sandbox_environ(container)?,
        &inp.watched,
    ));
    let network = format!("cyclix-{}", inp.run_id);
    why.extend(boundary::network_strangers(
        &network,
        &host.network_members(&network)?,
    ));
    if let Some(tw) = tripwires {
        why.extend(tripwire::check(tw)?);
    }
    let go = ok && why.is_empty();
    rec.refusal = why;
    Ok(go)
}

/// How the agent's time ended.
enum AgentEnd {
    /// It exited with this status (0 for success).
    Exit(i32),
    /// The leak watch stopped it (the reasons are in `rec.refusal`).
    Leak,
}

/// Waits for the (already started) agent to end, re-running the ★ probes and the host-side
/// environment scan every `deadlines.watch`; stops the agent on the first finding.
fn watch_to_end(
    inp: &RunInputs,
    units: &dyn UnitManager,
    host: &dyn RunHost,
    unit: &str,
    container: &str,
    budget: Duration,
    rec: &mut RunRecord,
) -> Result<AgentEnd> {
    let d = inp.deadlines;
    let interrupted = &inp.interrupted;
    let t0 = Instant::now();
    let mut next_watch = Instant::now() + d.watch;
    loop {
        if let Some(code) = ended(units, unit)? {
            return Ok(AgentEnd::Exit(code));
        }
        if Instant::now() >= next_watch {
            let findings = watch_round(inp, host, container);
            next_watch = Instant::now() + d.watch;
            // The agent may have ended during the round: that is not a finding.
            if let Some(code) = ended(units, unit)? {
                return Ok(AgentEnd::Exit(code));
            }
            rec.watch_rounds += 1;
            if !findings.is_empty() {
                rec.refusal = findings;
                units.stop(unit, JobMode::Replace, d.stop)?;
                return Ok(AgentEnd::Leak);
            }
        }
        keep_waiting(units, unit, d, t0.elapsed() > budget, budget, interrupted)?;
        std::thread::sleep(d.poll);
    }
}

/// The two reasons to stop waiting for a running `unit`: its budget is spent, or cyclix was
/// asked to stop. Either way the unit is stopped and the error says why.
fn keep_waiting(
    units: &dyn UnitManager,
    unit: &str,
    d: Deadlines,
    overdue: bool,
    budget: Duration,
    interrupted: &AtomicBool,
) -> Result<()> {
    if overdue {
        let _ = units.stop(unit, JobMode::Replace, d.stop);
        bail!(
            "{unit} did not finish within {} s; stopped it",
            budget.as_secs()
        );
    }
    if interrupted.load(Ordering::SeqCst) {
        let _ = units.stop(unit, JobMode::Replace, d.stop);
        bail!("interrupted (SIGTERM or SIGINT) while {unit} ran; stopped it, tearing down");
    }
    Ok(())
}

/// One leak-watch round; a round that cannot run is itself a finding (fail closed).
fn watch_round(inp: &RunInputs, host: &dyn RunHost, container: &str) -> Vec<String> {
    let mut findings = match host.probe(container, boundary::WATCH_PROBES, inp.deadlines.probe) {
        Ok((exit, out)) => {
            let (_, ok, why) = boundary::judge(exit, &out);
            if ok || !why.is_empty() {
                why
            } else {
                vec![format!(
                    "the watch probes exited {exit} without a complete report"
                )]
            }
        }
        Err(e) => vec![format!("the watch probes could not run: {e:#}")],
    };
    match host.sandbox_environ(container) {
        Ok(procs) => findings.extend(boundary::leaks(&procs, &inp.watched)),
        Err(e) => findings.push(format!("the sandbox environment could not be read: {e:#}")),
    }
    findings
}

/// `Some(exit status)` once `unit` has ended, `None` while it runs.
fn ended(units: &dyn UnitManager, unit: &str) -> Result<Option<i32>> {
    let st = units.unit_status(unit)?;
    Ok(match st.active_state {
        ActiveState::Inactive | ActiveState::Failed if !st.job_pending => {
            Some(match st.result.as_deref() {
                Some("success") => 0,
                Some("timeout") => {
                    bail!("{unit} ran past its timeout and was stopped by systemd (RuntimeMaxSec=)")
                }
                _ => st.exec_main_status.filter(|s| *s != 0).unwrap_or(1),
            })
        }
        _ => None,
    })
}

/// Starts `unit` and waits until it has finished; returns its exit status (0 for success).
pub(crate) fn run_to_end(
    units: &dyn UnitManager,
    unit: &str,
    d: Deadlines,
    budget: Duration,
    interrupted: &AtomicBool,
) -> Result<i32> {
    let t0 = Instant::now();
    match units.start(unit, JobMode::Replace, d.start) {
        // A start that "failed" may be a container that already ended with an error: that is
        // an exit status read below, not a cyclix failure. Anything else is.
        Ok(_) | Err(UnitError::JobFailed { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    loop {
        if let Some(code) = ended(units, unit)? {
            return Ok(code);
        }
        keep_waiting(units, unit, d, t0.elapsed() > budget, budget, interrupted)?;
        std::thread::sleep(d.poll);
    }
}

/// Teardown, step by step (each a point `teardown.STEP` of [`crate::failpoint::TEARDOWN_STEPS`],
/// noted in the progress file): stop units, remove files, reload, remove the labelled podman
/// objects, the secrets, the worktree (after noting a half-done git operation in it), the run
/// branch if it has no commits (a temporary ref), the run dir. Every step runs whatever
/// failed before it; the errors are joined.
pub(crate) fn teardown(
    inp: &RunInputs,
    units: &dyn UnitManager,
    host: &dyn RunHost,
    c: &mut Created,
) -> Result<()> {
    let mut errors: Vec<String> = Vec::new();
    let step = |name: &str| {
        reached(
            inp.progress.as_deref(),
            &format!("teardown.{name}"),
            &format!("teardown/{name}"),
        );
    };
    if let Some(tw) = c.tripwires.as_mut() {
        tripwire::remove(tw);
    }
    if let Some(r) = &c.subnet_reservation {
        let _ = std::fs::remove_file(r);
    }
    let mut note = |what: &str, r: Result<()>| {
        if let Err(e) = r {
            errors.push(format!("{what}: {e:#}"));
        }
    };
    step("stop-units");
    for u in &c.units {
        note(
            &format!("stopping {u}"),
            units
                .stop(u, JobMode::Replace, inp.deadlines.stop)
                .map(|_| ())
                .map_err(Into::into),
        );
        // A failed unit stays loaded until its failure is reset; reset it so nothing remains.
        let _ = units.reset_failed(u);
    }
    step("files");
    for f in &c.files {
        note(&format!("removing {}", f.display()), remove_file(f));
    }
    step("reload");
    if !c.files.is_empty() {
        note("reloading", units.reload().map_err(Into::into));
    }
    step("podman");
    if inp.spec.tier == Tier::Container {
        note(
            "removing the run's podman objects",
            host.remove_run_objects(&inp.run_id),
        );
    }
    step("secrets");
    for s in &c.secrets {
        note(&format!("removing secret {s}"), host.secret_remove(s));
    }
    step("worktree");
    let repo = Path::new(&inp.spec.repo.path);
    if c.worktree {
        if inp.paths.worktree.exists() {
            // Removing the worktree also drops its git dir, where a half-done merge or rebase
            // lives: note it first, the audit reports it.
            c.in_progress = host.in_progress(&inp.paths.worktree).ok().flatten();
        }
        note(
            "removing the worktree",
            host.worktree_remove(repo, &inp.paths.worktree),
        );
    }
    step("branch");
    if let Some((branch, base)) = &c.branch {
        // Compare-and-delete: a branch with the agent's commits has moved and is kept.
        match host.delete_ref_at(repo, branch, base) {
            Ok(deleted) => c.branch_deleted = deleted,
            Err(e) => note("deleting the run branch (no commits)", Err(e)),
        }
    }
    step("run-dir");
    if c.run_dir && inp.paths.run_dir.exists() {
        note(
            "removing the run dir",
            std::fs::remove_dir_all(&inp.paths.run_dir)
                .with_context(|| format!("removing {}", inp.paths.run_dir.display())),
        );
    }
    if errors.is_empty() {
        Ok(())
    } else {
        bail!("{}", errors.join("; "))
    }
}

fn remove_file(p: &Path) -> Result<()> {
    match std::fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", p.display())),
    }
}

pub(crate) fn audit(
    inp: &RunInputs,
    units: &dyn UnitManager,
    host: &dyn RunHost,
    c: &Created,
) -> Result<Vec<String>> {
    let mut left = if inp.spec.tier == Tier::Container {
        host.inventory(&inp.run_id)?
    } else {
        Vec::new()
    };
    for u in &c.units {
        // Inactive with its file gone is what systemd garbage-collects; running or failed stays.
        let st = units.unit_status(u)?;
        if !matches!(st.active_state, ActiveState::Inactive) {
            left.push(format!("unit {u} still {}", st.summary()));
        }
    }
    for f in &c.files {
        if f.exists() {
            left.push(format!("file {}", f.display()));
        }
    }
    if inp.paths.worktree.exists() {
        left.push(format!("worktree {}", inp.paths.worktree.display()));
    }
    if inp.paths.run_dir.exists() {
        left.push(format!("run dir {}", inp.paths.run_dir.display()));
    }
    let repo = Path::new(&inp.spec.repo.path);
    if let Some(op) = &c.in_progress {
        left.push(format!(
            "{op} was in progress in the run's worktree when it was removed: the run's commits \
             are not a finished result"
        ));
    }
    if inp.spec.tier == Tier::Direct
        && let Some(op) = host.in_progress(repo)?
    {
        left.push(format!(
            "{op} in progress in {} (the direct tier's checkout); finish or abort it there",
            repo.display()
        ));
    }
    if let Some(before) = &c.refs_before {
        let own = c.branch.as_ref().map_or("", |(b, _)| b.as_str());
        left.extend(ref_changes(
            before,
            &host.refs(repo)?,
            own,
            inp.spec.tier == Tier::Direct,
        ));
    }
    // conmon exits right after its container; give it `settle` before counting it (B11).
    let t0 = Instant::now();
    loop {
        let procs = host.run_processes(&inp.run_id)?;
        if procs.is_empty() || t0.elapsed() >= inp.deadlines.settle {
            left.extend(procs);
            break;
        }
        std::thread::sleep(inp.deadlines.poll);
    }
    Ok(left)
}

/// What changed in the repository's refs during a run outside its own branch `own`: refs
/// created, deleted or moved (the agent's container can write the shared git dir's refs).
/// Not counted: remote-tracking refs (`refs/remotes/`, moved by fetches), cyclix's run
/// branches (`refs/heads/cyclix/`, written by concurrent runs of the same repository) and, for
/// the direct tier (`heads_move`), branches (its commits land on the checked-out branch).
#[must_use]
pub fn ref_changes(
    before: &[(String, String)],
    after: &[(String, String)],
    own: &str,
    heads_move: bool,
) -> Vec<String> {
    const FIX: &str = "not the run's branch: the run wrote to the repository's refs; if you \
                       changed it yourself meanwhile, ignore this";
    let skip = |r: &str| {
        r == own
            || r.starts_with("refs/remotes/")
            || r.starts_with("refs/heads/cyclix/")
            || (heads_move && r.starts_with("refs/heads/"))
    };
    let short = |s: &str| s.get(..12).unwrap_or(s).to_string();
    let find =
        |v: &[(String, String)], r: &str| v.iter().find(|(n, _)| n == r).map(|(_, s)| s.clone());
    let mut out = Vec::new();
    for (r, sha) in after.iter().filter(|(r, _)| !skip(r)) {
        match find(before, r) {
            None => out.push(format!(
                "ref {r} created during the run at {}: {FIX}",
                short(sha)
            )),
            Some(old) if &old != sha => out.push(format!(
                "ref {r} moved during the run from {} to {}: {FIX}",
                short(&old),
                short(sha)
            )),
            Some(_) => {}
        }
    }
    for (r, sha) in before.iter().filter(|(r, _)| !skip(r)) {
        if find(after, r).is_none() {
            out.push(format!(
                "ref {r} deleted during the run (was {}): {FIX}",
                short(sha)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::seam::FakeRunHost;
    use crate::spec::SpecContext;
    use crate::systemd::fake::Call;
    use crate::systemd::{FakeUnitManager, Op};

    type Script = Box<dyn Fn(&FakeUnitManager)>;

    struct World {
        _dir: tempfile::TempDir,
        inp: RunInputs,
    }

    fn world() -> World {
        let dir = tempfile::tempdir().expect("tmp");
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).expect("repo");
        let yaml = format!(
            "tenant: acme\nrepo: {{path: {}, base: main}}\ntask: {{text: fix it}}\n\
             agent: {{image: localhost/a, unpinned_local_image: true, command: [agent], env: [API_KEY]}}\n\
             gate: {{image: localhost/a, unpinned_local_image: true, command: [check]}}\n",
            repo.display()
        );
        let ctx = SpecContext {
            file: "t.yaml".into(),
            home: "/home/t".into(),
            runtime_dir: "/run/user/1000".into(),
        };
        let spec = crate::spec::parse(&yaml, &ctx).expect("spec");
        let inp = RunInputs {
            spec,
            run_id: "r1".into(),
            backend: Backend::Quadlet,
            paths: RunPaths {
                quadlet_dir: dir.path().join("quadlet"),
                units_dir: dir.path().join("units"),
                run_dir: dir.path().join("run/r1"),
                worktree: dir.path().join("wt/r1"),
            },
            task: "fix it".into(),
            secrets: vec![("API_KEY".into(), b"s3cret".to_vec())],
            deadlines: Deadlines {
                poll: Duration::from_millis(1),
                ..Deadlines::default()
            },
            notices: Vec::new(),
            cyclix_bin: PathBuf::from("/usr/local/bin/cyclix"),
            interrupted: Arc::new(AtomicBool::new(false)),
            progress: None,
            probe_context: serde_json::from_value(serde_json::json!({
                "proxy_url": "", "proxy_name": "", "subnet": "", "gateway_ip": "",
                "denied_host": "denied.example", "host_namespaces": {}, "host_uid": 1000
            }))
            .expect("context"),
            probe_sockets: Vec::new(),
            tripwire_dir: dir.path().to_path_buf(),
            watched: vec![Watched {
                name: "CYCLIX_CANARY".into(),
                value: b"canary-0123456789".to_vec(),
            }],
        };
        World { _dir: dir, inp }
    }

    fn nothing_left(w: &World, rec: &RunRecord, host: &FakeRunHost) {
        assert!(rec.leftovers.is_empty(), "leftovers: {:?}", rec.leftovers);
        assert!(!w.inp.paths.worktree.exists(), "worktree left");
        assert!(!w.inp.paths.run_dir.exists(), "run dir left");
        for d in [&w.inp.paths.quadlet_dir, &w.inp.paths.units_dir] {
            let n = std::fs::read_dir(d).map_or(0, Iterator::count);
            assert_eq!(n, 0, "files left in {}", d.display());
        }
        assert!(
            host.objects.lock().expect("lock").is_empty(),
            "podman objects left"
        );
    }

    fn started(units: &FakeUnitManager) -> Vec<String> {
        units
            .calls()
            .iter()
            .filter_map(|c| match c {
                Call::Start { unit, .. } => Some(unit.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_passing_run_goes_through_every_phase_and_leaves_nothing() {
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 0);
        units.exit_after_start("cyclix-r1-gate.service", 0);
        let host = FakeRunHost {
            journal: vec![
                r#"{"status":"403","host":"x"}"#.into(),
                "squid started".into(),
            ],
            ..Default::default()
        };
        let rec = execute(&w.inp, &units, &host);
        assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
        let names: Vec<&str> = rec.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "prepare",
                "render",
                "install",
                "reload",
                "start",
                "probe",
                "agent",
                "gate",
                "collect",
                "escape-check",
                "teardown",
                "audit"
            ]
        );
        // The proxy and the agent start as parallel jobs, in either order; the gate after both.
        let mut order = started(&units);
        order[..2].sort();
        assert_eq!(
            order,
            [
                "cyclix-r1-agent.service",
                "cyclix-r1-proxy.service",
                "cyclix-r1-gate.service"
            ]
        );
        assert!(rec.agent_ready_ms.is_some() && rec.go_ms >= rec.agent_ready_ms);
        assert_eq!((rec.agent_exit, rec.gate_exit), (Some(0), Some(0)));
        assert_eq!(rec.branch, "cyclix/acme/r1");
        assert_eq!(rec.commits.len(), 1);
        assert_eq!(
            rec.egress_decisions.len(),
            1,
            "only JSON lines are decisions"
        );
        assert_eq!(rec.secret_names, ["API_KEY"]);
        assert!(
            !serde_json::to_string(&rec)
                .expect("json")
                .contains("s3cret"),
            "a secret value reached the record"
        );
        nothing_left(&w, &rec, &host);
        // every unit of the run was stopped, including the generated -network/-pod oneshots
        let stopped: Vec<String> = units
            .calls()
            .iter()
            .filter(|c| c.op() == Op::Stop)
            .flat_map(|c| c.units().into_iter().map(str::to_owned))
            .collect();
        for u in [
            "cyclix-r1-pod.service",
            "cyclix-r1-network.service",
            "cyclix-r1-egress-network.service",
        ] {
            assert!(stopped.iter().any(|s| s == u), "{u} not stopped");
        }
    }

    #[test]
    fn agent_and_gate_failures_are_results_not_errors() {
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 3);
        let host = FakeRunHost::default();
        let rec = execute(&w.inp, &units, &host);
        assert_eq!(
            (rec.result, rec.agent_exit, rec.gate_exit),
            (RunResult::AgentFailed, Some(3), None)
        );
        assert_eq!(rec.result.exit_code(), 1);
        assert!(
            !started(&units).contains(&"cyclix-r1-gate.service".to_string()),
            "gate ran after a failed agent"
        );
        nothing_left(&w, &rec, &host);

        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 0);
        units.exit_after_start("cyclix-r1-gate.service", 1);
        let host = FakeRunHost::default();
        let rec = execute(&w.inp, &units, &host);
        assert_eq!(
            (rec.result, rec.gate_exit),
            (RunResult::GateFailed, Some(1))
        );
        nothing_left(&w, &rec, &host);
    }

    fn fails_in(phase: &str, rec: &RunRecord) {
        assert_eq!(rec.result, RunResult::Error, "{rec:?}");
        assert_eq!(rec.failed_phase.as_deref(), Some(phase), "{rec:?}");
        assert!(
            rec.error
                .as_deref()
                .is_some_and(|e| e.contains(&format!("phase {phase}"))),
            "{:?}",
            rec.error
        );
        assert_eq!(rec.result.exit_code(), 2);
    }

    #[test]
    fn every_phase_failure_is_named_and_torn_down() {
        for op in [
            "rev_parse",
            "used_subnets",
            "worktree_add",
            "secret_create",
            "commits",
        ] {
            let w = world();
            let units = FakeUnitManager::new();
            units.exit_after_start("cyclix-r1-agent.service", 0);
            units.exit_after_start("cyclix-r1-gate.service", 0);
            let host = FakeRunHost {
                fail: vec![op.into()],
                ..Default::default()
            };
            let rec = execute(&w.inp, &units, &host);
            fails_in(
                if op == "commits" {
                    "collect"
                } else {
                    "prepare"
                },
                &rec,
            );
            nothing_left(&w, &rec, &host);
        }
        let cases: Vec<(&str, Script)> = vec![
            (
                "reload",
                Box::new(|u: &FakeUnitManager| {
                    u.fail_next(
                        Op::Reload,
                        None,
                        crate::systemd::Error::Dbus {
                            op: Op::Reload,
                            unit: "user manager".into(),
                            message: "boom".into(),
                        },
                    );
                }),
            ),
            (
                "reload",
                Box::new(|u: &FakeUnitManager| u.set_missing("cyclix-r1-pod.service")),
            ),
            (
                "start",
                Box::new(|u: &FakeUnitManager| {
                    u.fail_next(
                        Op::Start,
                        Some("cyclix-r1-proxy.service"),
                        crate::systemd::Error::StartSkipped {
                            unit: "cyclix-r1-proxy.service".into(),
                        },
                    );
                }),
            ),
            // The agent unit starts next to the proxy, so its failure is the start phase's.
            (
                "start",
                Box::new(|u: &FakeUnitManager| {
                    u.fail_next(
                        Op::Start,
                        Some("cyclix-r1-agent.service"),
                        crate::systemd::Error::NoSuchUnit {
                            unit: "cyclix-r1-agent.service".into(),
                        },
                    );
                }),
            ),
        ];
        for (phase, script) in cases {
            let w = world();
            let units = FakeUnitManager::new();
            units.exit_after_start("cyclix-r1-agent.service", 0);
            units.exit_after_start("cyclix-r1-gate.service", 0);
            script(&units);
            let host = FakeRunHost::default();
            let rec = execute(&w.inp, &units, &host);
            fails_in(phase, &rec);
            nothing_left(&w, &rec, &host);
        }
    }

    #[test]
    fn an_agent_that_never_ends_is_stopped_at_its_budget() {
        let mut w = world();
        w.inp.spec.agent.timeout_s = 0;
        w.inp.deadlines.slack = Duration::from_millis(30);
        let units = FakeUnitManager::new();
        let host = FakeRunHost::default();
        let rec = execute(&w.inp, &units, &host);
        fails_in("agent", &rec);
        assert!(
            rec.error
                .as_deref()
                .is_some_and(|e| e.contains("did not finish")),
            "{:?}",
            rec.error
        );
        nothing_left(&w, &rec, &host);
    }

    #[test]
    fn anything_left_after_teardown_fails_the_run() {
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 0);
        units.exit_after_start("cyclix-r1-gate.service", 0);
        let host = FakeRunHost::default();
        host.objects
            .lock()
            .expect("lock")
            .push("network cyclix-r1".into());
        // the fake keeps non-secret objects until remove_run_objects; make removal fail
        let host = FakeRunHost {
            fail: vec!["remove_run_objects".into()],
            objects: std::sync::Mutex::new(vec!["network cyclix-r1".into()]),
            ..Default::default()
        };
        let rec = execute(&w.inp, &units, &host);
        assert_eq!(rec.result, RunResult::Error);
        assert!(
            rec.leftovers.iter().any(|l| l == "network cyclix-r1"),
            "{:?}",
            rec.leftovers
        );
    }

    #[test]
    fn refs_the_run_writes_outside_its_branch_processes_and_half_done_merges_are_leftovers() {
        let base = "0123456789abcdef0123456789abcdef01234567".to_string();
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 0);
        units.exit_after_start("cyclix-r1-gate.service", 0);
        let mut inp = w.inp.clone();
        inp.deadlines.settle = Duration::from_millis(50);
        let host = FakeRunHost {
            refs: std::sync::Mutex::new(vec![
                ("refs/heads/main".into(), base.clone()),
                ("refs/tags/v1".into(), base.clone()),
                ("refs/remotes/origin/main".into(), base.clone()),
            ]),
            refs_later: vec![
                ("refs/heads/stray".into(), "a".repeat(40)),
                ("refs/remotes/origin/feature".into(), "b".repeat(40)),
                ("refs/heads/cyclix/other/r7".into(), "c".repeat(40)),
            ],
            in_progress: Some("a merge (MERGE_HEAD)".into()),
            processes: vec!["process 77 (conmon): /usr/bin/conmon -n cyclix-r1-agent".into()],
            ..Default::default()
        };
        let rec = execute(&inp, &units, &host);
        assert_eq!(rec.result, RunResult::Error);
        assert_eq!(rec.failed_phase.as_deref(), Some("audit"));
        let left = rec.leftovers.join("\n");
        assert!(
            left.contains("ref refs/heads/stray created during the run"),
            "{left}"
        );
        assert!(
            !left.contains("origin/feature") && !left.contains("cyclix/other"),
            "{left}"
        );
        assert!(
            left.contains("a merge (MERGE_HEAD) was in progress"),
            "{left}"
        );
        assert!(left.contains("process 77 (conmon)"), "{left}");
        // The fake's commits() reports one commit: the branch is the result, never deleted.
        assert!(
            !rec.notices
                .iter()
                .any(|n| n.contains("deleted at teardown"))
        );
    }

    #[test]
    fn a_run_branch_without_commits_is_deleted_only_while_it_points_at_the_base() {
        let base = "0123456789abcdef0123456789abcdef01234567".to_string();
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 3);
        let host = FakeRunHost {
            refs: std::sync::Mutex::new(vec![("refs/heads/main".into(), base.clone())]),
            ..Default::default()
        };
        // The fake worktree_add does not create the branch; the real git does, at the base.
        host.refs
            .lock()
            .expect("lock")
            .push(("refs/heads/cyclix/acme/r1".into(), base.clone()));
        let rec = execute(&w.inp, &units, &host);
        assert_eq!(rec.result, RunResult::AgentFailed, "{rec:?}");
        assert!(
            host.calls()
                .contains(&format!("delete_ref_at refs/heads/cyclix/acme/r1 {base}")),
            "{:?}",
            host.calls()
        );
        assert!(
            rec.notices
                .iter()
                .any(|n| n.contains("deleted at teardown")),
            "{:?}",
            rec.notices
        );
        assert!(rec.leftovers.is_empty(), "{:?}", rec.leftovers);
        // A direct-tier style change of an existing branch is a leftover on other tiers.
        assert_eq!(
            ref_changes(
                &[("refs/heads/main".into(), base.clone())],
                &[("refs/heads/main".into(), "e".repeat(40))],
                "refs/heads/cyclix/acme/r1",
                false
            )
            .len(),
            1
        );
        assert!(
            ref_changes(
                &[("refs/heads/main".into(), base.clone())],
                &[("refs/heads/main".into(), "e".repeat(40))],
                "refs/heads/cyclix/acme/r1",
                true
            )
            .is_empty()
        );
        let gone = ref_changes(&[("refs/tags/v1".into(), base)], &[], "x", true);
        assert!(
            gone[0].starts_with("ref refs/tags/v1 deleted during the run"),
            "{gone:?}"
        );
    }

    const FAILING: &str = "{\"id\":\"P19\",\"expect\":\"no podman socket\",\"got\":\"/run/podman/podman.sock\",\"verdict\":\"FAIL\"}\n{\"summary\":true,\"pass\":0,\"fail\":1}\n";

    #[test]
    fn a_failed_probe_refuses_the_agent_and_still_tears_down() {
        let w = world();
        let units = FakeUnitManager::new();
        let host = FakeRunHost {
            probe_report: Some((1, FAILING.into())),
            ..Default::default()
        };
        let rec = execute(&w.inp, &units, &host);
        assert_eq!(rec.result, RunResult::ProbeRefused, "{rec:?}");
        assert_eq!(rec.result.exit_code(), 1);
        assert_eq!(
            rec.refusal,
            ["P19: expected no podman socket, got /run/podman/podman.sock"]
        );
        assert!(!started(&units).contains(&"cyclix-r1-gate.service".to_string()));
        assert_eq!(rec.agent_exit, None, "the agent never ran");
        nothing_left(&w, &rec, &host);
    }

    #[test]
    fn a_host_secret_in_the_sandbox_refuses_before_the_agent_starts() {
        let w = world();
        let units = FakeUnitManager::new();
        let leak = crate::run::boundary::ProcessEnv {
            pid: 4242,
            comm: "catatonit".into(),
            vars: vec![("CYCLIX_CANARY".into(), b"canary-0123456789".to_vec())],
        };
        let host = FakeRunHost {
            environ: vec![leak],
            ..Default::default()
        };
        let rec = execute(&w.inp, &units, &host);
        assert_eq!(rec.result, RunResult::ProbeRefused);
        assert_eq!(
            rec.refusal,
            ["pid 4242 (catatonit): variable CYCLIX_CANARY is set"]
        );
        nothing_left(&w, &rec, &host);
    }

    #[test]
    fn the_leak_watch_stops_a_running_agent_on_a_failing_watch_probe() {
        let mut w = world();
        w.inp.deadlines.watch = Duration::from_millis(5);
        let units = FakeUnitManager::new(); // the agent never ends by itself
        let host = FakeRunHost {
            watch_report: Some((1, FAILING.into())),
            ..Default::default()
        };
        let rec = execute(&w.inp, &units, &host);
        assert_eq!(rec.result, RunResult::LeakDetected, "{rec:?}");
        assert_eq!(rec.result.exit_code(), 1);
        assert_eq!(rec.watch_rounds, 1);
        assert!(rec.refusal[0].starts_with("P19"), "{:?}", rec.refusal);
        let watched: Vec<String> = host
            .calls()
            .into_iter()
            .filter(|c| c.starts_with("probe "))
            .collect();
        assert!(
            watched.iter().any(|c| c.contains("P22")),
            "the watch re-runs the starred probes: {watched:?}"
        );
        nothing_left(&w, &rec, &host);
    }

    #[test]
    fn an_interrupted_run_stops_the_agent_and_still_tears_down() {
        let w = world();
        let units = FakeUnitManager::new(); // the agent would run until its budget
        let host = FakeRunHost::default();
        let flag = w.inp.interrupted.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            flag.store(true, Ordering::SeqCst);
        });
        let rec = execute(&w.inp, &units, &host);
        t.join().expect("join");
        assert_eq!(rec.result, RunResult::Error);
        assert_eq!(rec.failed_phase.as_deref(), Some("agent"), "{rec:?}");
        assert!(
            rec.error
                .as_deref()
                .is_some_and(|e| e.contains("interrupted")),
            "{:?}",
            rec.error
        );
        nothing_left(&w, &rec, &host);
    }

    #[test]
    fn a_worktree_tier_run_uses_host_units_and_no_container_machinery() {
        let mut w = world();
        w.inp.spec.tier = Tier::Worktree;
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 0);
        units.exit_after_start("cyclix-r1-gate.service", 0);
        let host = FakeRunHost::default();
        let rec = execute(&w.inp, &units, &host);
        assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
        assert!(
            rec.notices.iter().any(|n| n.contains("tier `worktree`")),
            "{:?}",
            rec.notices
        );
        assert!(rec.probes.is_empty());
        let calls = host.calls();
        for podman_op in [
            "secret_create",
            "probe",
            "remove_run_objects",
            "inventory",
            "sandbox_environ",
        ] {
            assert!(
                !calls.iter().any(|c| c.starts_with(podman_op)),
                "{podman_op} called: {calls:?}"
            );
        }
        assert_eq!(
            started(&units),
            ["cyclix-r1-agent.service", "cyclix-r1-gate.service"]
        );
        assert!(
            w.inp
                .paths
                .quadlet_dir
                .read_dir()
                .map_or(true, |mut d| d.next().is_none())
        );
        nothing_left(&w, &rec, &host);
    }

    #[test]
    fn log_tails_drop_podman_noise_and_redact_secrets() {
        let journal = vec![
            "2026-11-30 12:33:25.88 +0000 UTC m=+0.04 container exec 945e".to_string(),
            "conmon 945e <nwarn>: Failed to add inotify watch".to_string(),
            "FAILED tests/test_calc.py::test_subtract - assert 4 == 2".to_string(),
            "token is s3cret-value".to_string(),
        ];
        let tail = log_tail(&journal, &[b"s3cret-value".as_slice()]);
        assert_eq!(
            tail,
            [
                "FAILED tests/test_calc.py::test_subtract - assert 4 == 2",
                "token is ***"
            ]
        );
        let long: Vec<String> = (0..100).map(|i| i.to_string()).collect();
        assert_eq!(log_tail(&long, &[]).len(), LOG_TAIL_LINES);
        assert_eq!(log_tail(&long, &[]).last().map(String::as_str), Some("99"));
    }

    #[test]
    fn concurrent_runs_never_reserve_the_same_subnet_and_stale_reservations_are_reclaimed() {
        let dir = tempfile::tempdir().expect("tmp");
        let runs = dir.path().join("runs");
        for id in ["a1", "a2", "a3"] {
            std::fs::create_dir_all(runs.join(id)).expect("run dir");
        }
        // Same preferred octet for all: the run id decides it, so force a collision with one id.
        let (n1, f1) = reserve_subnet(&runs, "a1", &[]).expect("first");
        std::fs::create_dir_all(runs.join("a1-twin")).expect("dir");
        let (n2, _) = reserve_subnet(&runs, "a1", &[]).expect("second with the same preference");
        assert_ne!(n1, n2, "two live runs got one subnet");
        // A reservation whose run dir is gone is stale and reclaimed.
        std::fs::write(&f1, "gone-run").expect("stale owner");
        let (n3, _) = reserve_subnet(&runs, "a1", &[]).expect("reclaim");
        assert_eq!(n3, n1);
        let used: Vec<String> = (1..=254).map(|n| format!("10.213.{n}.0/24")).collect();
        assert!(reserve_subnet(&runs, "a2", &used).is_err());
    }
}
