//! The lifecycle of one run, over the two seams (`systemd::UnitManager`, `run::seam::RunHost`).
//!
//! Order (DESIGN.md): prepare (base commit, worktree on the run branch, run dir, task file,
//! secrets) → render → install → reload (+ confirm every unit is loaded, B01) → start the
//! proxy and services → agent (runs to its end) → gate (no network) → collect (commits, proxy
//! decisions) → teardown (stop every unit incl. the generated -network/-pod oneshots, reset
//! failed ones, remove files, reload, remove labelled objects and secrets, remove the worktree,
//! keep the branch) → audit (anything left is a leftover and fails the run). Teardown runs
//! whatever phase failed; every failure names its phase. Faults (security-cases §3): prepare
//! first waits, bounded, for podman's storage lock (`storage_lock`); a run that did not pass
//! gets its project file systems' space looked at before teardown (`space`) and an OOM-killed
//! agent named (`limits`), both in the record's `causes`.

use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, anyhow, bail};

use super::boundary::{self, Watched};
use super::ledger::{Entry, Ledger};
use super::phases::{audit, teardown};
use super::record::{Phase, RunRecord, RunResult};
use super::reserve::{reserve_ports, reserve_subnet};
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
    /// How long a run waits for podman's storage lock to be free before it creates anything
    /// (security-cases §3; `cyclix run --storage-lock-wait`).
    pub storage_lock: Duration,
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
            storage_lock: super::storage_lock::DEFAULT_WAIT,
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
    /// This run's work tree: for tier `container` the run's private repository (`.git`
    /// inside; `git::private`), for tier `worktree` a linked worktree of the user's
    /// repository.
    pub worktree: PathBuf,
    /// The tenant's records directory, where the run's uncommitted diff is kept beside its
    /// record (`RUN.uncommitted.diff`); `None`: not kept.
    pub records_dir: Option<PathBuf>,
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
        super::phases::reached(self.progress.as_deref(), &format!("phase.{name}"), name);
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

/// What a run holds while it runs: its ledger (everything it created, on disk as it grows)
/// and what it saw on the way, for the audit and the record.
#[derive(Debug)]
pub(crate) struct RunState {
    /// What the run created ([`Ledger`]); teardown undoes exactly that (plus a by-label sweep).
    pub(crate) ledger: Ledger,
    /// The planted tripwires (and the sentinel's handle), once planted.
    pub(crate) tripwires: Option<Tripwires>,
    /// The repository's refs before the run (for the audit's ref check; host tiers).
    pub(crate) refs_before: Option<Vec<(String, String)>>,
    /// The user's repository before the run (tier `container`: compared after the import).
    pub(crate) repo_before: Option<super::repo_state::RepoState>,
    /// The run branch (in the ledger before it is made) exists: made with the worktree (host
    /// tiers) or by the import (tier `container`).
    pub(crate) branch_made: bool,
    /// Set by teardown: a git operation was half done in the worktree when it was removed.
    pub(crate) in_progress: Option<String>,
    /// Notices for the record found on the way (e.g. a wait for podman's storage lock).
    pub(crate) notices: Vec<String>,
}

impl RunState {
    /// A run that has created nothing yet but its ledger.
    pub(crate) fn new(ledger: Ledger) -> Self {
        RunState {
            ledger,
            tripwires: None,
            refs_before: None,
            repo_before: None,
            branch_made: false,
            in_progress: None,
            notices: Vec::new(),
        }
    }

    /// Whether the run's work tree is its private repository (tier `container`).
    pub(crate) fn private_tree(&self) -> bool {
        self.ledger.worktree().is_some_and(|(_, private)| private)
    }
}

/// Runs the whole lifecycle and returns the record (never an `Err`: failures are recorded
/// with their phase). `ledger` (started by the caller, [`Ledger::create`]) names everything
/// the run creates as it goes. The caller writes the record, then removes the ledger.
pub fn execute(
    inp: &RunInputs,
    ledger: Ledger,
    units: &(dyn UnitManager + Sync),
    host: &dyn RunHost,
) -> RunRecord {
    let mut rec = new_record(inp);
    let mut r = Recorder::new(Some(inp.interrupted.clone()), inp.progress.clone());
    let mut created = RunState::new(ledger);
    let outcome = bring_up_and_run(inp, units, host, &mut r, &mut created, &mut rec);
    rec.notices.append(&mut created.notices);
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
            if e.chain()
                .any(|c| c.downcast_ref::<super::delivery::Refusal>().is_some())
            {
                // The branch is held by another run, or a fixed branch diverged: a finding.
                rec.result = RunResult::DeliveryRefused;
            }
            let note = if e.downcast_ref::<super::storage_lock::WaitError>().is_some() {
                String::new() // it names the holder itself
            } else {
                storage_lock_note(inp, host)
            };
            rec.error = Some(format!("{e:#}{note}"));
        }
    }
    if rec.result != RunResult::Passed {
        // Before teardown frees the space: a full project file system is named as the cause.
        rec.causes
            .extend(project_space_causes(inp, host, &created.ledger));
    }
    let torn = r.phase("teardown", || {
        teardown::teardown(&teardown_of(inp), units, host, &mut created)
    });
    rec.notices.append(&mut created.notices);
    if !created.branch_made {
        rec.branch.clear(); // never made: the record must not name a branch that never was
    }
    let audit = r.phase("audit", || {
        audit::audit(&audit_of(inp), units, host, &created)
    });
    match audit {
        Ok(left) => rec.leftovers = crate::inventory::texts(&left),
        Err(e) => rec.leftovers.push(format!("audit could not run: {e:#}")),
    }
    if let Some(before) = &created.repo_before {
        // What cyclix created is exactly the run branch; anything else was done on the host.
        let mut own: Vec<String> = created
            .ledger
            .branch()
            .filter(|_| created.branch_made)
            .map(|(b, _)| b.to_string())
            .into_iter()
            .collect();
        // A delivery reads the remote tip at prepare and pushes: git updates the
        // remote-tracking ref of the delivered branch both times.
        if let Some(d) = &rec.delivery {
            own.push(format!("refs/remotes/{}/{}", d.remote, d.branch));
        }
        match host.repo_state(Path::new(&inp.spec.repo.path)) {
            Ok(after) => rec.repo_changes = super::repo_state::changes(before, &after, &own),
            Err(e) => rec.notices.push(format!(
                "the repository could not be compared after the run: {e:#}"
            )),
        }
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

/// What teardown needs of the run's inputs.
pub(crate) fn teardown_of(inp: &RunInputs) -> teardown::Teardown<'_> {
    teardown::Teardown {
        run_id: &inp.run_id,
        repo: Path::new(&inp.spec.repo.path),
        stop: inp.deadlines.stop,
        progress: inp.progress.as_deref(),
        converging: false,
    }
}

/// What the audit needs of the run's inputs.
pub(crate) fn audit_of(inp: &RunInputs) -> audit::Audit<'_> {
    audit::Audit {
        run_id: &inp.run_id,
        repo: Path::new(&inp.spec.repo.path),
        direct: inp.spec.tier == Tier::Direct,
        settle: inp.deadlines.settle,
        poll: inp.deadlines.poll,
    }
}

/// The run's record before its first phase (result `error` until a phase decides otherwise).
pub(crate) fn new_record(inp: &RunInputs) -> RunRecord {
    let spec = &inp.spec;
    RunRecord {
        secret_names: inp.secrets.iter().map(|(k, _)| k.clone()).collect(),
        notices: inp.notices.clone(),
        ..RunRecord::new(&spec.tenant, &inp.run_id, spec.tier.to_string())
    }
}

fn bring_up_and_run(
    inp: &RunInputs,
    units: &(dyn UnitManager + Sync),
    host: &dyn RunHost,
    r: &mut Recorder,
    created: &mut RunState,
    rec: &mut RunRecord,
) -> Result<RunResult> {
    let spec = &inp.spec;
    let repo = PathBuf::from(&spec.repo.path);
    let (delivery, (base, _common, octet, service_ports)) = r.phase("prepare", || {
        // Delivery first: the branch lock and the remote tip decide where the run starts.
        let delivery = super::delivery::start(inp, &rec.branch)?;
        let from = delivery.as_ref().and_then(|d| d.base_override.clone());
        Ok((
            delivery,
            prepare(inp, host, created, &rec.branch, from.as_deref())?,
        ))
    })?;
    rec.delivery = delivery.as_ref().map(|d| d.record.clone());
    rec.base_commit.clone_from(&base);
    let run_ctx = run_context(inp, octet, service_ports);
    let rendered = r.phase("render", || {
        Ok(render::render(spec, &run_ctx, inp.backend)?)
    })?;
    rec.units.clone_from(&rendered.units.all);
    rec.services = rendered.units.services.iter().map(Into::into).collect();
    rec.notices.extend(rendered.warnings.iter().cloned());
    r.phase("install", || install(inp, &rendered, &mut created.ledger))?;
    r.phase("reload", || {
        record_units(&mut created.ledger, &rendered.units)?;
        reload_and_confirm(units, &rendered.units)
    })?;
    r.phase("start", || {
        start_units(inp, units, host, &rendered.units, rec)
    })?;
    let mut result = agent_and_gate(inp, units, host, r, created, &rendered.units, rec)?;
    if let Some(tw) = created.tripwires.as_mut() {
        let tripped = r.phase("escape-check", || tripwire::check(tw))?;
        if !tripped.is_empty() {
            rec.refusal.extend(tripped);
            result = RunResult::LeakDetected;
        }
    }
    if created.private_tree()
        && matches!(
            result,
            RunResult::Passed | RunResult::GateFailed | RunResult::AgentFailed
        )
    {
        r.phase("import", || {
            super::import_phase::import(inp, host, created, &base, rec, &mut result)
        })?;
    }
    r.phase("collect", || {
        // `direct` works in the user's own checkout: its commits are on HEAD there; tier
        // `container` has a branch only once the import created it.
        let tip = match spec.tier {
            Tier::Direct => "HEAD".to_string(),
            Tier::Container if !created.branch_made => String::new(),
            _ => rec.branch.clone(),
        };
        collect(units, host, &repo, &base, &rendered.units, rec, &tip)?;
        let secrets: Vec<&[u8]> = inp.secrets.iter().map(|(_, v)| v.as_slice()).collect();
        // The agent's text in the record: a secret value it put in a subject or a request
        // line (squid logs the URL) is never recorded.
        for c in &mut rec.commits {
            c.subject = redact(&c.subject, &secrets);
        }
        for d in &mut rec.egress_decisions {
            let text = redact(&d.to_string(), &secrets);
            *d = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
        }
        rec.agent_log = log_tail(&host.unit_journal(&rendered.units.agent)?, &secrets);
        if rec.gate_exit.is_some() {
            rec.gate_log = log_tail(&host.unit_journal(&rendered.units.gate)?, &secrets);
        }
        Ok(())
    })?;
    match delivery {
        Some(d) if result == RunResult::Passed => {
            r.phase("deliver", || super::delivery::deliver(inp, d, rec))
        }
        _ => Ok(result),
    }
}

/// The run's host facts for the renderer.
pub(crate) fn run_context(inp: &RunInputs, octet: u8, service_ports: Vec<u16>) -> RunContext {
    RunContext {
        run_id: inp.run_id.clone(),
        worktree: inp.paths.worktree.display().to_string(),
        run_dir: inp.paths.run_dir.display().to_string(),
        subnet_octet: octet,
        proxy_image: crate::images::PROXY_IMAGE.to_string(),
        cyclix_bin: inp.cyclix_bin.display().to_string(),
        service_ports,
    }
}

/// The install phase: writes the rendered files (never over an existing one), recording each
/// for teardown.
pub(crate) fn install(
    inp: &RunInputs,
    rendered: &render::Rendered,
    ledger: &mut Ledger,
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
        ledger.record(Entry::File { path: path.clone() })?;
        super::record::atomic_write(&path, f.contents.as_bytes())?;
        // Unit files and the proxy config hold no secret; the proxy reads its config as its
        // own (mapped) user, so it must be world-readable (0600 gave "Permission denied").
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .with_context(|| format!("setting the mode of {}", path.display()))?;
    }
    Ok(())
}

/// Records the run's units in its ledger, before the reload loads them.
pub(crate) fn record_units(ledger: &mut Ledger, names: &render::plan::UnitNames) -> Result<()> {
    for u in &names.all {
        ledger.record(Entry::Unit { name: u.clone() })?;
    }
    Ok(())
}

/// Waits (at most `deadlines.storage_lock`) until no other process holds podman's storage
/// locks; a holder that stays is named in the error (security-cases §3). A wait longer than a
/// second is noted in the record.
fn wait_for_storage_lock(
    inp: &RunInputs,
    host: &dyn RunHost,
    notices: &mut Vec<String>,
) -> Result<()> {
    let waited = super::storage_lock::wait_free(
        || host.storage_lock_holders(),
        inp.deadlines.storage_lock,
        Duration::from_millis(100).min(inp.deadlines.storage_lock),
        || inp.interrupted.load(Ordering::SeqCst),
    )?;
    if waited >= Duration::from_secs(1) {
        notices.push(format!(
            "waited {} ms for podman's storage lock before the run could start",
            waited.as_millis()
        ));
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

/// `; podman's storage lock: …` when a phase failed while someone holds podman's storage lock
/// (a podman call or a unit start that ran into its deadline is then explained), else empty.
fn storage_lock_note(inp: &RunInputs, host: &dyn RunHost) -> String {
    if inp.spec.tier != Tier::Container {
        return String::new();
    }
    match host.storage_lock_holders() {
        Ok(h) if !h.is_empty() => format!(
            " (podman's storage lock is held: {}; podman calls wait for it)",
            super::storage_lock::describe(&h)
        ),
        _ => String::new(),
    }
}

/// The start phase: the proxy (and what it pulls in) and, for tier `container`, the agent
/// unit. The agent unit starts as a job of its own next to the proxy's (systemd runs
/// independent jobs in parallel; the agent's `cyclix agent-wait` holds it until the probes
/// pass): about 200 ms of bring-up on the testbed (bench/run, issue 7). Sets
/// `rec.agent_ready_ms`.
pub(crate) fn start_units(
    inp: &RunInputs,
    units: &(dyn UnitManager + Sync),
    host: &dyn RunHost,
    names: &render::plan::UnitNames,
    rec: &mut RunRecord,
) -> Result<()> {
    let container = inp.spec.tier == Tier::Container;
    std::thread::scope(|s| {
        let agent = container
            .then(|| s.spawn(|| units.start(&names.agent, JobMode::Replace, inp.deadlines.start)));
        let mut infra: Result<()> = Ok(());
        for u in &names.infra {
            let service = names.services.iter().find(|s| &s.unit == u);
            // A service's start job lasts until its health check passed: wait as long as its
            // unit's own TimeoutStartSec= (plus slack), so systemd's verdict comes first.
            let deadline = service.map_or(inp.deadlines.start, |s| {
                inp.deadlines
                    .start
                    .max(Duration::from_secs(s.start_timeout_s + 15))
            });
            if let Err(e) = units.start(u, JobMode::Replace, deadline) {
                infra = Err(match service {
                    Some(svc) => service_failed(inp, svc, host, &e.into()),
                    None => e.into(),
                });
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

/// The error of a service whose start job failed: the service, what it was waiting for, the
/// last lines it printed, and the fix.
fn service_failed(
    inp: &RunInputs,
    svc: &render::plan::ServicePlan,
    host: &dyn RunHost,
    cause: &anyhow::Error,
) -> anyhow::Error {
    use std::fmt::Write as _;
    let health = inp
        .spec
        .services
        .iter()
        .find(|s| s.name == svc.name)
        .and_then(|s| s.health.as_ref());
    let mut msg = match health {
        Some(h) => format!(
            "service `{}` ({}) never became healthy: its health check `{}` did not pass \
             (every {} s, timeout {} s, {} retries, start period {} s: at most {} s)",
            svc.name,
            svc.unit,
            shell_words(svc.health.as_deref().unwrap_or_default()),
            h.interval_s,
            h.timeout_s,
            h.retries,
            h.start_period_s,
            h.budget_s()
        ),
        None => format!("service `{}` ({}) did not start", svc.name, svc.unit),
    };
    let _ = write!(msg, " [{cause:#}]");
    if let Ok(journal) = host.unit_journal(&svc.unit) {
        let secrets: Vec<&[u8]> = inp.secrets.iter().map(|(_, v)| v.as_slice()).collect();
        let tail = log_tail(&journal, &secrets);
        let tail: Vec<&String> = tail.iter().rev().take(5).rev().collect();
        if !tail.is_empty() {
            msg.push_str("; it printed: ");
            msg.push_str(
                &tail
                    .iter()
                    .map(|l| l.as_str())
                    .collect::<Vec<_>>()
                    .join(" | "),
            );
        }
    }
    let _ = write!(
        msg,
        "; fix: see `journalctl --user -u {}`; check `{}.image` and `{}.command`{}",
        svc.unit,
        svc.key,
        svc.key,
        if health.is_some() {
            format!(
                ", that `{k}.health.command` passes once the service is up (it runs inside the service container, with PGPORT/CYCLIX_PORT set), or raise `{k}.health.retries`",
                k = svc.key
            )
        } else {
            String::new()
        }
    );
    anyhow!(msg)
}

/// An argv for people, as a shell would take it: plain words as they are, others in single
/// quotes.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./:=@%+-,".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The probe phase, then (if the boundary is proven) the agent under the leak watch, then
/// (if it succeeded) the gate.
fn agent_and_gate(
    inp: &RunInputs,
    units: &dyn UnitManager,
    host: &dyn RunHost,
    r: &mut Recorder,
    created: &mut RunState,
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
        rec.causes
            .extend(agent_oom(units, &names.agent, &spec.agent.resources));
        return Ok(RunResult::AgentFailed);
    }
    let gate_budget = Duration::from_secs(spec.gate.timeout_s) + inp.deadlines.slack;
    let private = created.private_tree();
    let branch = rec.branch.clone();
    let gate_exit = r.phase("gate", || {
        if private && !gate_checkout(inp, host, &mut created.ledger, &branch)? {
            return Ok(None);
        }
        run_to_end(
            units,
            &names.gate,
            inp.deadlines,
            gate_budget,
            &inp.interrupted,
        )
        .map(Some)
    })?;
    let Some(gate_exit) = gate_exit else {
        rec.causes.push(format!(
            "the agent deleted or renamed its branch {branch} in its repository: nothing to gate or import"
        ));
        return Ok(RunResult::AgentFailed);
    };
    rec.gate_exit = Some(gate_exit);
    Ok(if gate_exit == 0 {
        RunResult::Passed
    } else {
        RunResult::GateFailed
    })
}

/// Makes the gate's tree: an empty directory beside the private repository, filled by an
/// export container with the run branch's tip ([`crate::render::plan::gate_tree`]), so the
/// gate judges exactly the commits that are imported. `false`: the branch is gone.
/// The tree is in `ledger` before it exists (for teardown).
pub(crate) fn gate_checkout(
    inp: &RunInputs,
    host: &dyn RunHost,
    ledger: &mut Ledger,
    branch: &str,
) -> Result<bool> {
    let tree = crate::layout::gate_tree(&inp.paths.worktree);
    ledger.record(Entry::GateTree { path: tree.clone() })?;
    std::fs::create_dir(&tree).with_context(|| format!("creating {}", tree.display()))?;
    let req = super::import::ExportRequest {
        run_id: inp.run_id.clone(),
        tenant: inp.spec.tenant.clone(),
        repo: inp.paths.worktree.clone(),
        branch: branch.to_string(),
        base: String::new(),
        out: inp.paths.run_dir.join("gate-tree.out"),
    };
    let _ = std::fs::remove_file(&req.out);
    host.export_gate_tree(&req)
}

/// `project filesystem full (…)` for the run's worktree and the repository's git dir when one
/// of them is (nearly) full; nothing when they have room or cannot be looked at.
fn project_space_causes(inp: &RunInputs, host: &dyn RunHost, ledger: &Ledger) -> Vec<String> {
    let repo = PathBuf::from(&inp.spec.repo.path);
    let git = host.common_dir(&repo).unwrap_or_else(|_| repo.join(".git"));
    let mut looked = Vec::new();
    if ledger.worktree().is_some() && inp.paths.worktree.exists() {
        looked.push(("the run's worktree", inp.paths.worktree.clone()));
    } else if let Some(parent) = inp.paths.worktree.parent() {
        looked.push(("the worktrees directory", parent.to_path_buf()));
    }
    looked.push(("the repository's git dir", git));
    let spaces: Vec<(&str, &Path, super::space::FsSpace)> = looked
        .iter()
        .filter_map(|(what, p)| Some((*what, p.as_path(), host.fs_space(p).ok()?)))
        .collect();
    super::space::full_causes(&spaces)
}

/// "agent killed for memory (oom)" when the agent unit ended with `Result=oom-kill`.
fn agent_oom(units: &dyn UnitManager, unit: &str, r: &crate::spec::Resources) -> Option<String> {
    let st = units.unit_status(unit).ok()?;
    super::limits::oom_cause(st.result.as_deref(), r)
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
    // An empty tip: nothing was imported (tier `container`), so there are no commits to list.
    if !tip.is_empty() {
        rec.commits = host.commits(repo, base, tip)?;
    }
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

/// Base commit (`base_override`, else `repo.base`), git common dir and subnet; run dir with
/// the task; worktree on the run branch; the run's secrets. Each is in the ledger before it
/// is created.
pub(crate) fn prepare(
    inp: &RunInputs,
    host: &dyn RunHost,
    created: &mut RunState,
    branch: &str,
    base_override: Option<&str>,
) -> Result<(String, PathBuf, u8, Vec<u16>)> {
    let spec = &inp.spec;
    host.check_mounts(spec)?; // before anything exists: `host::mount_scan` (issue 11)
    let repo = PathBuf::from(&spec.repo.path);
    if spec.tier == Tier::Container {
        // Before anything exists: a stuck holder fails the run here, with nothing to undo.
        wait_for_storage_lock(inp, host, &mut created.notices)?;
    }
    // A delivery to a fixed branch starts from its remote tip (`run::delivery::start`).
    let base = host.rev_parse(&repo, base_override.unwrap_or(&spec.repo.base))?;
    let common = host.common_dir(&repo)?;
    let ledger = &mut created.ledger;
    ledger.record(Entry::RunDir {
        path: inp.paths.run_dir.clone(),
    })?;
    std::fs::create_dir_all(&inp.paths.run_dir)
        .with_context(|| format!("creating run dir {}", inp.paths.run_dir.display()))?;
    let used = host.used_subnets()?;
    let runs_root = inp
        .paths
        .run_dir
        .parent()
        .context("invariant: the run dir has a parent")?;
    let reservations = |kind| Entry::Reservations {
        dir: crate::layout::reservations_beside(runs_root, kind),
    };
    ledger.record(reservations(crate::layout::SUBNETS_DIR))?;
    let (octet, _) = reserve_subnet(runs_root, &inp.run_id, &used)?;
    let ports = if spec.tier == Tier::Container {
        if !spec.services.is_empty() {
            ledger.record(reservations(crate::layout::PORTS_DIR))?;
        }
        reserve_ports(runs_root, &inp.run_id, &spec.services, &mut Vec::new())?
    } else {
        // The host tiers run no services (their agent runs on the host, not in a pod).
        Vec::new()
    };
    std::fs::write(inp.paths.run_dir.join(TASK_FILE), &inp.task)
        .context("writing the task file")?;
    let ctl = inp.paths.run_dir.join(render::plan::CTL_DIR);
    std::fs::create_dir_all(&ctl).with_context(|| format!("creating {}", ctl.display()))?;
    // The host tiers have no boundary to prove (their records say so): no tripwires, no probes.
    if spec.tier == Tier::Container {
        let tw = plant_and_describe(inp, &mut created.ledger, &common, octet, &ctl)?;
        created.tripwires = Some(tw);
    }
    if let Some(parent) = inp.paths.worktree.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    if spec.tier == Tier::Container {
        // A private repository: nothing of the user's is mounted into any container, and the
        // run branch appears in the user's repository only when the import creates it.
        created.repo_before = Some(host.repo_state(&repo)?);
        created.ledger.record(Entry::Worktree {
            path: inp.paths.worktree.clone(),
            private: true,
        })?;
        host.private_repo(&repo, &inp.paths.worktree, branch, &base)?;
    } else {
        created.refs_before = Some(host.refs(&repo)?);
        created.ledger.record(Entry::Worktree {
            path: inp.paths.worktree.clone(),
            private: false,
        })?;
        created.ledger.record(Entry::Branch {
            refname: format!("refs/heads/{branch}"),
            base: base.clone(),
        })?;
        host.worktree_add(&repo, &inp.paths.worktree, branch, &base)?;
        created.branch_made = true;
    }
    if spec.tier != Tier::Container {
        write_host_env(inp)?;
        return Ok((base, common, octet, ports));
    }
    created.ledger.record(Entry::Podman)?;
    let names = crate::naming::RunNames::new(&inp.run_id);
    for (var, value) in &inp.secrets {
        let name = names.secret(var);
        let labels = vec![
            (
                crate::naming::label::TENANT.to_string(),
                spec.tenant.clone(),
            ),
            (crate::naming::label::RUN.to_string(), inp.run_id.clone()),
        ];
        created
            .ledger
            .record(Entry::Secret { name: name.clone() })?;
        host.secret_create(&name, value, &labels)?;
    }
    Ok((base, common, octet, ports))
}

/// Plants the run's tripwires (each in the ledger first) and writes the probes' context
/// (what they must find, where the tripwires are) to the control directory `ctl`.
fn plant_and_describe(
    inp: &RunInputs,
    ledger: &mut Ledger,
    common: &Path,
    octet: u8,
    ctl: &Path,
) -> Result<Tripwires> {
    for path in tripwire::paths(&inp.tripwire_dir, &inp.run_id) {
        ledger.record(Entry::Tripwire { path })?;
    }
    ledger.record(Entry::Sentinel {
        name: tripwire::sentinel_name(&inp.run_id),
    })?;
    let tw = tripwire::plant(&inp.tripwire_dir, common, &inp.run_id)?;
    let mut ctx = inp.probe_context.clone();
    let escape = crate::probe::Escape {
        key: tw.key.display().to_string(),
        outside: tw.outside.display().to_string(),
        sentinel_pid: i32::try_from(tw.sentinel_pid()).unwrap_or(i32::MAX),
        sockets: inp.probe_sockets.clone(),
    };
    boundary::complete_context(&mut ctx, &inp.run_id, octet, common, escape);
    std::fs::write(
        ctl.join(render::plan::PROBE_CONTEXT_FILE),
        serde_json::to_vec_pretty(&ctx).context("serialising the probe context")?,
    )
    .context("writing the probe context")?;
    Ok(tw)
}

/// No container: the secret values go to the host unit through an env file (mode 0600) in
/// the run directory, removed with it; the unit file only names the file.
fn write_host_env(inp: &RunInputs) -> Result<()> {
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
    Ok(())
}

/// How many lines of the agent's and the gate's output the record keeps.
pub const LOG_TAIL_LINES: usize = 40;

/// The last [`LOG_TAIL_LINES`] lines a container printed, from its unit's journal: podman's own
/// event lines, container ids and conmon's warnings left out, every secret value replaced by
/// `***`.
pub(crate) fn log_tail(journal: &[String], secrets: &[&[u8]]) -> Vec<String> {
    let mut lines: Vec<String> = journal
        .iter()
        .filter(|l| !l.contains(" UTC m=+") && !l.starts_with("conmon ") && !l.is_empty())
        // `podman run -d` prints the new container's id (plain units, Quadlet's too).
        .filter(|l| !(l.len() == 64 && l.bytes().all(|b| b.is_ascii_hexdigit())))
        .map(|l| {
            // The agent's bytes: no terminal escape or bidi control reaches a terminal.
            crate::text::printable(&redact(l, secrets))
        })
        .collect();
    let skip = lines.len().saturating_sub(LOG_TAIL_LINES);
    lines.drain(..skip);
    lines
}

/// `text` with every secret value of at least 4 bytes (as text) replaced by `***`.
fn redact(text: &str, secrets: &[&[u8]]) -> String {
    let mut t = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        t = t.replace(&*String::from_utf8_lossy(s), "***");
    }
    t
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
            let (mut findings, incomplete) = watch_round(inp, host, container);
            next_watch = Instant::now() + d.watch;
            // The agent may have ended during the round: that is not a finding. A round that
            // only failed to run (the container was exiting: `podman exec` 137, `top` on a
            // stopped container) gets a moment for the unit to show its end.
            let grace = if findings.is_empty() && !incomplete.is_empty() {
                WATCH_EXIT_GRACE
            } else {
                Duration::ZERO
            };
            if let Some(code) = ended_within(units, unit, grace, d.poll)? {
                return Ok(AgentEnd::Exit(code));
            }
            findings.extend(incomplete);
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

/// How long a watch round that could not run waits for the agent unit to show that it ended
/// (its container exiting during the round) before the round counts as a finding.
const WATCH_EXIT_GRACE: Duration = Duration::from_secs(5);

/// One leak-watch round: (findings, reasons the round could not complete). A round that
/// cannot run is itself a finding (fail closed) unless the agent turns out to have ended.
fn watch_round(inp: &RunInputs, host: &dyn RunHost, container: &str) -> (Vec<String>, Vec<String>) {
    let mut incomplete = Vec::new();
    let mut findings = match host.probe(container, boundary::WATCH_PROBES, inp.deadlines.probe) {
        Ok((exit, out)) => {
            let (_, ok, why) = boundary::judge(exit, &out);
            if !ok && why.is_empty() {
                incomplete.push(format!(
                    "the watch probes exited {exit} without a complete report"
                ));
            }
            why
        }
        Err(e) => {
            incomplete.push(format!("the watch probes could not run: {e:#}"));
            Vec::new()
        }
    };
    match host.sandbox_environ(container) {
        Ok(procs) => findings.extend(boundary::leaks(&procs, &inp.watched)),
        Err(e) => incomplete.push(format!("the sandbox environment could not be read: {e:#}")),
    }
    (findings, incomplete)
}

/// [`ended`], looking again every `poll` for up to `grace`.
fn ended_within(
    units: &dyn UnitManager,
    unit: &str,
    grace: Duration,
    poll: Duration,
) -> Result<Option<i32>> {
    let t0 = Instant::now();
    loop {
        if let Some(code) = ended(units, unit)? {
            return Ok(Some(code));
        }
        if t0.elapsed() >= grace {
            return Ok(None);
        }
        std::thread::sleep(poll);
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::record;
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
                records_dir: Some(dir.path().join("records")),
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
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
        let names: Vec<&str> = rec.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, crate::failpoint::PHASES);
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
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
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
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
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
            "repo_state",
            "private_repo",
            "import_bundle",
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
            let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
            fails_in(
                match op {
                    "commits" => "collect",
                    "import_bundle" => "import",
                    _ => "prepare",
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
            let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
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
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
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
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        assert_eq!(rec.result, RunResult::Error);
        assert!(
            rec.leftovers.iter().any(|l| l == "network cyclix-r1"),
            "{:?}",
            rec.leftovers
        );
    }

    #[test]
    fn changes_on_the_host_are_reported_not_failed_and_processes_are_leftovers() {
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
            ]),
            // Made on the host while the run was on (the sandbox cannot write there).
            refs_later: vec![("refs/heads/stray".into(), "a".repeat(40))],
            ..Default::default()
        };
        let rec = execute(&inp, Ledger::in_memory(), &units, &host);
        assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
        assert_eq!(
            rec.repo_changes,
            vec![format!(
                "ref refs/heads/stray created at {}",
                "a".repeat(12)
            )]
        );
        // The imported run branch is what cyclix created: never reported.
        assert!(
            !rec.repo_changes
                .iter()
                .any(|c| c.contains("cyclix/acme/r1"))
        );
        assert!(record::summary(&rec).contains("CHANGED ON THE HOST"));
        let host = FakeRunHost {
            processes: vec!["process 77 (conmon): /usr/bin/conmon -n cyclix-r1-agent".into()],
            ..Default::default()
        };
        let rec = execute(&inp, Ledger::in_memory(), &units, &host);
        assert_eq!(rec.failed_phase.as_deref(), Some("audit"));
        assert!(rec.leftovers.join("\n").contains("process 77 (conmon)"));
    }

    #[test]
    fn secret_values_the_agent_put_in_requests_or_logs_are_never_recorded() {
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 0);
        units.exit_after_start("cyclix-r1-gate.service", 0);
        let host = FakeRunHost {
            journal: vec![
                r#"{"status":"403","host":"s3cret.evil.example","url":"http://x/?k=s3cret"}"#
                    .into(),
                "leaking s3cret here".into(),
            ],
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        let text = serde_json::to_string(&rec).expect("json");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(
            rec.egress_decisions[0]["url"] == "http://x/?k=***",
            "{rec:?}"
        );
    }

    #[test]
    fn a_refused_bundle_or_no_commits_imports_nothing() {
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 0);
        units.exit_after_start("cyclix-r1-gate.service", 0);
        let host = FakeRunHost {
            refuse_bundle: Some("the bundle must hold exactly one ref".into()),
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        assert_eq!(rec.result, RunResult::AgentFailed, "{rec:?}");
        assert_eq!(rec.result.exit_code(), 1);
        let imp = rec.import.as_ref().expect("import");
        assert_eq!(imp.outcome, "refused");
        assert!(
            rec.causes[0].contains("exactly one ref"),
            "{:?}",
            rec.causes
        );
        assert!(rec.commits.is_empty() && rec.branch.is_empty(), "{rec:?}");
        assert!(!host.calls().iter().any(|c| c.starts_with("commits")));
        nothing_left(&w, &rec, &host);
        let host = FakeRunHost {
            no_commits: true,
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
        assert_eq!(
            rec.import.as_ref().map(|i| i.outcome.as_str()),
            Some("no-commits")
        );
        assert!(!host.calls().iter().any(|c| c.starts_with("import_bundle")));
        assert!(record::summary(&rec).contains("branch: none (nothing imported"));
        // The import runs after the escape check, and no host git ever runs in the private
        // repository: it is removed as plain files.
        let calls = host.calls();
        assert!(
            calls.iter().any(|c| c.starts_with("remove_tree")),
            "{calls:?}"
        );
        assert!(
            !calls.iter().any(|c| c.starts_with("worktree")),
            "{calls:?}"
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
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
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
            audit::ref_changes(
                &[("refs/heads/main".into(), base.clone())],
                &[("refs/heads/main".into(), "e".repeat(40))],
                "refs/heads/cyclix/acme/r1",
                false
            )
            .len(),
            1
        );
        assert!(
            audit::ref_changes(
                &[("refs/heads/main".into(), base.clone())],
                &[("refs/heads/main".into(), "e".repeat(40))],
                "refs/heads/cyclix/acme/r1",
                true
            )
            .is_empty()
        );
        let gone = audit::ref_changes(&[("refs/tags/v1".into(), base)], &[], "x", true);
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
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
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
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
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
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
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
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
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
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
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
    fn health_commands_are_shown_as_a_shell_would_take_them() {
        let argv: Vec<String> = ["sh", "-c", "pg_isready -p \"$P\" && echo it's", "", "-q"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            shell_words(&argv),
            r#"sh -c 'pg_isready -p "$P" && echo it'\''s' '' -q"#
        );
    }

    #[test]
    fn log_tails_drop_podman_noise_and_redact_secrets() {
        let journal = vec![
            "2026-11-30 12:33:25.88 +0000 UTC m=+0.04 container exec 945e".to_string(),
            "conmon 945e <nwarn>: Failed to add inotify watch".to_string(),
            "463a3bd9920cf424661b39c2432ae8251fd3af09d9083d8bbc3804dffdc957f9".to_string(),
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
        let escapes = vec!["\u{1b}]52;c;aGk=\u{7}done \u{1b}[2J".to_string()];
        assert_eq!(
            log_tail(&escapes, &[]),
            vec!["\u{fffd}]52;c;aGk=\u{fffd}done \u{fffd}[2J".to_string()]
        );
        let long: Vec<String> = (0..100).map(|i| i.to_string()).collect();
        assert_eq!(log_tail(&long, &[]).len(), LOG_TAIL_LINES);
        assert_eq!(log_tail(&long, &[]).last().map(String::as_str), Some("99"));
    }

    #[test]
    fn a_service_that_never_gets_healthy_fails_the_start_naming_it_and_tears_everything_down() {
        let mut w = world();
        let spec = crate::spec::parse(
            &format!(
                "tenant: acme\nrepo: {{path: {}, base: main}}\ntask: {{text: x}}\n\
                 agent: {{image: localhost/a, unpinned_local_image: true, command: [agent], env: [API_KEY]}}\n\
                 gate: {{image: localhost/a, unpinned_local_image: true, command: [check]}}\n\
                 services: [{{name: db, image: localhost/pg, unpinned_local_image: true, data: /data, \
                 health: {{command: [pg_isready, -q], retries: 3}}}}]\n",
                w.inp.spec.repo.path
            ),
            &SpecContext {
                file: "t.yaml".into(),
                home: "/home/t".into(),
                runtime_dir: "/run/user/1000".into(),
            },
        )
        .expect("spec");
        w.inp.spec = spec;
        let units = FakeUnitManager::new();
        units.fail_next(
            Op::Start,
            Some("cyclix-r1-svc-db.service"),
            crate::systemd::Error::JobFailed {
                unit: "cyclix-r1-svc-db.service".into(),
                op: Op::Start,
                result: crate::systemd::JobResult::Failed,
                state: "failed/failed".into(),
            },
        );
        let host = FakeRunHost {
            journal: vec!["FATAL: could not open port".into(), "s3cret".into()],
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        fails_in("start", &rec);
        let e = rec.error.as_deref().unwrap_or_default();
        for want in [
            "service `db` (cyclix-r1-svc-db.service) never became healthy",
            "`pg_isready -q`",
            "3 retries",
            "it printed: FATAL: could not open port | ***",
            "`services[0].health.retries`",
        ] {
            assert!(e.contains(want), "`{want}` not in: {e}");
        }
        assert!(!e.contains("s3cret"), "a secret reached the error: {e}");
        assert_eq!(rec.services.len(), 1);
        assert_eq!(
            rec.services[0].volume.as_deref(),
            Some("cyclix-r1-svc-db-data")
        );
        assert!(
            (crate::render::plan::PICKED_PORTS.0..=crate::render::plan::PICKED_PORTS.1)
                .contains(&rec.services[0].port)
        );
        assert!(
            rec.units
                .iter()
                .any(|u| u == "cyclix-r1-svc-db-data-volume.service"),
            "{:?}",
            rec.units
        );
        nothing_left(&w, &rec, &host);
        let ports = w
            .inp
            .paths
            .run_dir
            .parent()
            .expect("runs")
            .parent()
            .expect("root")
            .join(crate::layout::PORTS_DIR);
        assert_eq!(
            std::fs::read_dir(&ports).map_or(0, Iterator::count),
            0,
            "a port reservation is left"
        );
        // The service's start job got at least the unit's own start budget.
        let waited = units.calls().iter().find_map(|c| match c {
            Call::Start { unit, timeout, .. } if unit == "cyclix-r1-svc-db.service" => {
                Some(*timeout)
            }
            _ => None,
        });
        assert!(
            waited.is_some_and(
                |t| t >= Duration::from_secs(crate::render::plan::START_TIMEOUT_LOCAL_S + 18)
            ),
            "{waited:?}"
        );
    }

    #[test]
    fn an_agent_killed_for_memory_is_an_agent_failure_whose_record_says_oom() {
        let mut w = world();
        w.inp.spec.agent.resources.memory_bytes = Some(64 << 20);
        let units = FakeUnitManager::new();
        units.end_after_start("cyclix-r1-agent.service", 137, "oom-kill");
        let host = FakeRunHost::default();
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        assert_eq!(
            (rec.result, rec.agent_exit),
            (RunResult::AgentFailed, Some(137)),
            "{rec:?}"
        );
        assert_eq!(
            rec.causes,
            ["agent killed for memory (oom): agent.resources.memory = 64 MiB"]
        );
        assert!(record::summary(&rec).contains("CAUSE: agent killed for memory (oom)"));
        assert!(!started(&units).contains(&"cyclix-r1-gate.service".to_string()));
        nothing_left(&w, &rec, &host);
        // An agent that merely exits 137 (its own kill -9) is not called an OOM kill.
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 137);
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &FakeRunHost::default());
        assert_eq!(rec.result, RunResult::AgentFailed);
        assert!(rec.causes.is_empty(), "{:?}", rec.causes);
    }

    #[test]
    fn a_watch_round_that_races_the_agents_exit_is_not_a_leak() {
        let mut w = world();
        w.inp.deadlines.watch = Duration::from_millis(1);
        let units = FakeUnitManager::new();
        // Running at the round and right after it; ended at the next look (the unit was
        // still deactivating while its container was already gone).
        units.exit_after_polls("cyclix-r1-agent.service", 0, 4);
        units.exit_after_start("cyclix-r1-gate.service", 0);
        let host = FakeRunHost {
            watch_report: Some((137, String::new())),
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
        assert!(rec.refusal.is_empty(), "{:?}", rec.refusal);
        nothing_left(&w, &rec, &host);
        // A round that cannot run while the agent keeps running is still a finding.
        let mut w = world();
        w.inp.deadlines.watch = Duration::from_millis(1);
        w.inp.deadlines.poll = Duration::from_millis(100);
        let units = FakeUnitManager::new();
        let host = FakeRunHost {
            watch_report: Some((137, String::new())),
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        assert_eq!(rec.result, RunResult::LeakDetected, "{rec:?}");
        assert!(
            rec.refusal[0].contains("exited 137 without a complete report"),
            "{:?}",
            rec.refusal
        );
    }

    #[test]
    fn a_full_project_file_system_is_named_as_the_cause_and_teardown_still_completes() {
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 1);
        let host = FakeRunHost {
            fs_avail: Some(0),
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        assert_eq!(rec.result, RunResult::AgentFailed, "{rec:?}");
        assert_eq!(
            rec.causes.len(),
            1,
            "one file system, one cause: {:?}",
            rec.causes
        );
        let cause = &rec.causes[0];
        assert!(
            cause.starts_with("project filesystem full (avail 0 B of 8 MiB) at ")
                && cause.contains(&w.inp.paths.worktree.display().to_string())
                && cause.contains("also holds the repository's git dir"),
            "{cause}"
        );
        // Looked at before teardown removed the worktree (the space it frees would hide it).
        let calls = host.calls();
        let looked = calls
            .iter()
            .position(|c| c.starts_with("fs_space"))
            .expect("looked");
        let removed = calls
            .iter()
            .position(|c| c.starts_with("remove_tree"))
            .expect("removed");
        assert!(looked < removed, "{calls:?}");
        nothing_left(&w, &rec, &host);
        // A prepare that failed (git could not write the worktree) names the directory.
        let w = world();
        let host = FakeRunHost {
            fs_avail: Some(0),
            fail: vec!["private_repo".into()],
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &FakeUnitManager::new(), &host);
        fails_in("prepare", &rec);
        assert!(
            rec.causes
                .iter()
                .any(|c| c.contains("(the worktrees directory)")),
            "{:?}",
            rec.causes
        );
        // A run that passed is not looked at; one with room gets no cause.
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 0);
        units.exit_after_start("cyclix-r1-gate.service", 0);
        let host = FakeRunHost {
            fs_avail: Some(0),
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        assert_eq!(rec.result, RunResult::Passed);
        assert!(!host.calls().iter().any(|c| c.starts_with("fs_space")));
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 1);
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &FakeRunHost::default());
        assert!(rec.causes.is_empty(), "{:?}", rec.causes);
    }

    #[test]
    fn a_stuck_storage_lock_fails_the_run_naming_the_holder_with_nothing_created() {
        let mut w = world();
        w.inp.deadlines.storage_lock = Duration::from_millis(200);
        let units = FakeUnitManager::new();
        let host = FakeRunHost {
            lock_held_looks: usize::MAX,
            ..Default::default()
        };
        let t0 = Instant::now();
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        assert!(t0.elapsed() < Duration::from_secs(5), "the wait is bounded");
        fails_in("prepare", &rec);
        let err = rec.error.as_deref().unwrap_or_default();
        for want in [
            "storage.lock",
            "pid 4711",
            "`podman build .`",
            "for more than 0 s",
        ] {
            assert!(err.contains(want), "`{want}` missing: {err}");
        }
        // Nothing was asked of git, podman or systemd: no worktree, no secret, no unit, and
        // no podman sweep or inventory that would hang on the same lock.
        let calls = host.calls();
        for op in [
            "rev_parse",
            "private_repo",
            "secret_create",
            "used_subnets",
            "remove_run_objects",
            "inventory",
        ] {
            assert!(
                !calls.iter().any(|c| c.starts_with(op)),
                "{op} called: {calls:?}"
            );
        }
        assert!(started(&units).is_empty());
        assert!(
            rec.probes.is_empty() && rec.agent_exit.is_none(),
            "the agent never ran"
        );
        nothing_left(&w, &rec, &host);
    }

    #[test]
    fn a_storage_lock_held_briefly_is_waited_out_and_noted() {
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 0);
        units.exit_after_start("cyclix-r1-gate.service", 0);
        let host = FakeRunHost {
            lock_held_looks: 12, // about 1.2 s at one look per 100 ms
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
        assert!(
            rec.notices
                .iter()
                .any(|n| n.contains("for podman's storage lock")),
            "{:?}",
            rec.notices
        );
        nothing_left(&w, &rec, &host);
    }

    #[test]
    fn a_phase_failing_while_the_storage_lock_is_held_names_the_holder() {
        let w = world();
        let units = FakeUnitManager::new();
        // Free at the start, then held (a podman call timed out behind it).
        let host = FakeRunHost {
            lock_held_looks: 0,
            fail: vec!["secret_create".into()],
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        fails_in("prepare", &rec);
        assert!(
            !rec.error
                .as_deref()
                .unwrap_or_default()
                .contains("storage lock is held")
        );
        let w = world();
        // Held from the second look on: the first (the wait) passes, the explanation sees it.
        let held_later = FakeRunHost {
            lock_held_looks: 0,
            lock_held_from: Some(1),
            fail: vec!["secret_create".into()],
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &held_later);
        let err = rec.error.as_deref().unwrap_or_default();
        assert!(
            err.contains("storage lock is held") && err.contains("pid 4711"),
            "{err}"
        );
    }
}
