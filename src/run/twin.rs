//! `cyclix twin TENANT`, the orchestration: two environments of one tenant built from one
//! commit and up at the same time, each the real per-run topology (networks, pod, proxy,
//! services, worktree, secrets) brought up by the lifecycle's own phases and proven by the
//! same probe run that precedes an agent; no agent runs. Each runs the gate's quick suite in
//! its `Network=none` gate container; the reference runs it once in the same hardened gate
//! container (`podman run`, `Network=none`) over a third clean worktree at that commit. Then
//! both environments and the reference are torn down and audited with the lifecycle's
//! teardown and audit; the temporary branches `cyclix/TENANT/RUN` go last, once every side is
//! down (`git branch -D` rewrites `.git/config`, which would drop a running environment's
//! read-only bind of it). The verdict is [`crate::twin::judge`]'s.
//!
//! Timeline: A and B each run in a thread; a barrier holds each after its probes (so both are
//! up before either runs its suite) and again after its suite (so neither is torn down while
//! the other's suite runs). A side that failed still meets both barriers.

use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};

use super::host::RealRunHost;
use super::ledger::Ledger;
use super::lifecycle::{self, Recorder, RunInputs, RunState};
use super::phases::{agent, audit, bring_up, collect, gate, prepare, probe, teardown};
use super::seam::RunHost;
use crate::render::{self, plan::RunPlan};
use crate::systemd::{JobMode, UnitManager};
use crate::twin::{self, Results, Side, SuiteRun};

/// What the twin needs beyond a run's [`RunHost`]: temporary branches and a foreground
/// container for the reference.
pub trait TwinHost: RunHost {
    /// Deletes `branch` in `repo` (force; idempotent).
    ///
    /// # Errors
    /// git failed.
    fn branch_delete(&self, repo: &Path, branch: &str) -> Result<()>;
    /// Whether `branch` exists in `repo`.
    ///
    /// # Errors
    /// git failed.
    fn branch_exists(&self, repo: &Path, branch: &str) -> Result<bool>;
    /// `podman run --rm FLAGS -- IMAGE ARGV` in the foreground: its exit status and output
    /// lines (stdout, then stderr).
    ///
    /// # Errors
    /// podman could not be started or ran past `deadline`.
    fn run_container(
        &self,
        flags: &[String],
        image: &str,
        argv: &[String],
        deadline: Duration,
    ) -> Result<(i32, Vec<String>)>;
}

impl TwinHost for RealRunHost {
    fn branch_delete(&self, repo: &Path, branch: &str) -> Result<()> {
        crate::git::Git::new(repo).delete_branch(branch, true)?;
        Ok(())
    }
    fn branch_exists(&self, repo: &Path, branch: &str) -> Result<bool> {
        Ok(crate::git::Git::new(repo).branch_exists(branch)?)
    }
    fn run_container(
        &self,
        flags: &[String],
        image: &str,
        argv: &[String],
        deadline: Duration,
    ) -> Result<(i32, Vec<String>)> {
        let f: Vec<&str> = flags.iter().map(String::as_str).collect();
        let a: Vec<&str> = argv.iter().map(String::as_str).collect();
        let out = crate::podman::Podman::new().run_rm(&[], &f, image, &a, deadline)?;
        let lines = out
            .stdout
            .lines()
            .chain(out.stderr.lines())
            .map(str::to_string)
            .collect();
        Ok((out.status.code().unwrap_or(-1), lines))
    }
}

/// The inputs of a twin: the three sides' run inputs (same spec, its `repo.base` the resolved
/// commit) and the quick suite's argv.
#[derive(Debug)]
pub struct TwinInputs {
    /// Environment A.
    pub a: RunInputs,
    /// Environment B.
    pub b: RunInputs,
    /// The reference (only its paths, run id and deadlines are used).
    pub reference: RunInputs,
    /// The quick suite's argv (`gate.quick` or `gate.command`).
    pub quick: Vec<String>,
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Runs the twin and returns the report (never an `Err`: every failure is in the report).
pub fn execute(
    t: &TwinInputs,
    units: &(dyn UnitManager + Sync),
    host: &(dyn TwinHost + Sync),
) -> twin::Report {
    let barrier = Barrier::new(2);
    let (a, b, reference) = std::thread::scope(|s| {
        let ha = s.spawn(|| environment("A", &t.a, &t.quick, units, host, &barrier));
        let hb = s.spawn(|| environment("B", &t.b, &t.quick, units, host, &barrier));
        let reference = reference(&t.reference, &t.quick, host);
        let join = |h: std::thread::ScopedJoinHandle<'_, (Side, Option<RunPlan>)>, label: &str| {
            h.join().unwrap_or_else(|_| {
                (
                    Side {
                        label: label.into(),
                        error: Some("the environment's thread panicked".into()),
                        ..Side::default()
                    },
                    None,
                )
            })
        };
        (join(ha, "A"), join(hb, "B"), reference)
    });
    let mut sides = [a.0, b.0, reference];
    remove_branches(
        host,
        Path::new(&t.a.spec.repo.path),
        &t.a.spec.tenant,
        &mut sides,
    );
    // Each side works in a private repository of its own (issue 11): nothing is shared by
    // design any more.
    let by_design: [String; 0] = [];
    let names = match (&a.1, &b.1) {
        (Some(pa), Some(pb)) => match (serde_json::to_value(pa), serde_json::to_value(pb)) {
            (Ok(ja), Ok(jb)) => twin::shared_names(&ja, &jb, &by_design),
            _ => (0, Vec::new()),
        },
        _ => (0, Vec::new()),
    };
    twin::Report::new(
        t.a.spec.tenant.clone(),
        t.a.spec.repo.base.clone(),
        t.quick.clone(),
        sides,
        names,
    )
}

/// The results directory of a side (`RUN_DIR/results`, [`gate::results_dir`]).
fn results_dir(inp: &RunInputs) -> Result<PathBuf> {
    gate::results_dir(&inp.paths.run_dir, false)
}

/// The plan of a side with its gate running the quick suite and writing to `results`.
fn quick_plan(
    inp: &RunInputs,
    quick: &[String],
    (octet, service_ports): (u8, Vec<u16>),
    results: &Path,
) -> Result<RunPlan> {
    let run = bring_up::run_context(&lifecycle::bring_up_of(inp), octet, service_ports);
    let mut plan = render::plan::plan(&inp.spec, &run)?;
    twin::quick_gate(&mut plan, quick, &results.display().to_string())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(plan)
}

/// One environment: bring-up (the lifecycle's phases), probes, barrier, quick suite, barrier,
/// teardown, audit. Returns its side and its plan (when rendered).
fn environment(
    label: &str,
    inp: &RunInputs,
    quick: &[String],
    units: &(dyn UnitManager + Sync),
    host: &(dyn TwinHost + Sync),
    barrier: &Barrier,
) -> (Side, Option<RunPlan>) {
    let mut side = Side {
        label: label.into(),
        run_id: inp.run_id.clone(),
        ..Side::default()
    };
    let mut rec = lifecycle::new_record(inp);
    let mut r = Recorder::new(Some(inp.interrupted.clone()), None);
    let mut created = RunState::new(Ledger::in_memory());
    let mut plan = None;
    let up = bring_up(
        inp,
        quick,
        units,
        host,
        &mut r,
        &mut created,
        &mut rec,
        &mut plan,
    );
    if let Some(p) = &plan {
        side.networks = p.networks.iter().map(|n| n.name.clone()).collect();
        side.subnet = Some(p.subnet.clone());
        side.pod.clone_from(&p.pod);
    }
    side.probes_passed = rec
        .probes
        .iter()
        .filter(|p| p.get("verdict").and_then(|v| v.as_str()) == Some("PASS"))
        .count();
    side.probe_failures.clone_from(&rec.refusal);
    let names = match up {
        Ok(Some(names)) => {
            side.up_ms = Some(now_ms());
            Some(names)
        }
        Ok(None) => None, // a failed probe: in probe_failures
        Err(e) => {
            side.error = Some(format!("{e:#}"));
            None
        }
    };
    barrier.wait(); // both environments are up (or have failed)
    if let Some(names) = names {
        match r.phase("quick", || quick_suite(inp, units, host, &names.gate)) {
            Ok(suite) => side.suite = Some(suite),
            Err(e) => side.error = Some(format!("{e:#}")),
        }
    }
    barrier.wait(); // both suites are done: now either may go down
    if let Some(p) = &plan {
        // This environment's output readers end (the other's run on in its thread).
        for unit in [&p.units.agent, &p.units.gate] {
            if let Err(e) = host.output(unit) {
                crate::stderrln!("warning: the output of {unit}: {e:#}");
            }
        }
    }
    side.down_ms = Some(now_ms());
    // The temporary branch goes later, once every side is down (see `remove_branches`).
    let torn = r.phase("teardown", || {
        teardown::teardown(&lifecycle::teardown_of(inp), units, host, &mut created)
    });
    if let Err(e) = torn {
        side.error.get_or_insert_with(|| format!("{e:#}"));
    }
    match r.phase("audit", || {
        audit::audit(&lifecycle::audit_of(inp), units, host, &created)
    }) {
        Ok(left) => side.leftovers = crate::inventory::texts(&left),
        Err(e) => side.leftovers.push(format!("audit could not run: {e:#}")),
    }
    (side, plan)
}

/// prepare → render (quick gate) → install → reload → start → probe → hold the agent.
/// `Ok(Some(units))` when the environment is up and proven, `Ok(None)` when a probe failed.
#[allow(clippy::too_many_arguments)]
fn bring_up(
    inp: &RunInputs,
    quick: &[String],
    units: &(dyn UnitManager + Sync),
    host: &dyn RunHost,
    r: &mut Recorder,
    created: &mut RunState,
    rec: &mut crate::run::record::RunRecord,
    plan_out: &mut Option<RunPlan>,
) -> Result<Option<render::plan::UnitNames>> {
    let branch = rec.branch.clone();
    let (_, _common, octet, ports, _setup) = r.phase("prepare", || {
        let p = prepare::prepare(&lifecycle::prepare_of(inp), host, created, &branch, None)?;
        // The gate mounts a clean checkout of the base (no agent runs in a twin).
        gate::checkout_base(
            &lifecycle::gate_of(inp, &inp.spec),
            host,
            &mut created.ledger,
            &p.0,
        )?;
        Ok(p)
    })?;
    let rendered = r.phase("render", || {
        let results = results_dir(inp)?;
        let plan = quick_plan(inp, quick, (octet, ports.clone()), &results)?;
        let rendered = render::render_plan(&inp.spec, &plan, inp.backend)?;
        *plan_out = Some(plan);
        Ok(rendered)
    })?;
    let up = lifecycle::bring_up_of(inp);
    let written = r.phase("install", || {
        bring_up::install(&up, &rendered, &mut created.ledger)
    })?;
    r.phase("load", || {
        bring_up::load(&up, units, host, &mut created.ledger, &rendered, &written).map(drop)
    })?;
    r.phase("start", || {
        // The gate's output is read from its file (nothing kept beside a record: a twin has
        // none), as a run reads it.
        let mut out = lifecycle::outputs_of(inp);
        out.records_dir = None;
        crate::run::phases::collect::follow_outputs(&out, host, &rendered.units)?;
        rec.agent_ready_ms =
            bring_up::start_units(&lifecycle::bring_up_of(inp), units, host, &rendered.units)?;
        Ok(())
    })?;
    let agent = rendered
        .units
        .agent
        .trim_end_matches(".service")
        .to_string();
    let proven = r.phase("probe", || {
        rec.refusal = probe::boundary_proven(
            &lifecycle::probe_of(inp),
            host,
            &agent,
            created.tripwires.as_mut(),
            &mut rec.probes,
        )?;
        Ok(rec.refusal.is_empty())
    })?;
    // No agent runs in a twin: its unit (held back in `agent-wait`) is stopped either way.
    r.phase("hold-agent", || {
        units.stop(&rendered.units.agent, JobMode::Replace, inp.deadlines.stop)?;
        Ok(())
    })?;
    Ok(proven.then(|| rendered.units.clone()))
}

/// Runs the quick suite in the environment's gate unit and reads what it left.
fn quick_suite(
    inp: &RunInputs,
    units: &dyn UnitManager,
    host: &dyn RunHost,
    gate: &str,
) -> Result<SuiteRun> {
    let budget = Duration::from_secs(inp.spec.gate.timeout_s) + inp.deadlines.slack;
    let exit = agent::run_to_end(units, gate, inp.deadlines, budget, &inp.interrupted)?;
    // podman's own words (a command that cannot start) are in the unit's journal, the suite's
    // output in its file.
    let journal = host.unit_journal(gate)?;
    let output = host.output(gate)?.lines;
    if twin::cannot_start(exit, &output).is_none() && twin::cannot_start(exit, &journal).is_some() {
        return suite_result(inp, exit, &journal);
    }
    suite_result(inp, exit, &output)
}

/// The suite's exit status and results: the `JUnit` file if the suite wrote one, else the
/// normalised output digest. A suite that could not start ([`twin::cannot_start`]) is an
/// error naming the argv's key.
fn suite_result(inp: &RunInputs, exit: i32, output: &[String]) -> Result<SuiteRun> {
    if let Some(why) = twin::cannot_start(exit, output) {
        // The suite's own last words, not systemd's lines about the unit.
        let tail = collect::log_tail(output, &[]);
        let own: Vec<&String> = tail.iter().filter(|l| !l.contains(&inp.run_id)).collect();
        let last = &own[own.len().saturating_sub(3)..];
        bail!(
            "the quick suite could not start (exit {exit}: {why}); check `gate.quick` (or \
             `gate.command`) and the gate image; last output: {last:?}"
        );
    }
    let file = inp
        .paths
        .run_dir
        .join(twin::RESULTS_DIR)
        .join(twin::RESULTS_FILE);
    let results = match gate::read_results(&file) {
        Ok(None) => Results::Digest {
            sha256: twin::output_digest(output, &[inp.run_id.as_str()]),
            lines: twin::normalise(output, &[inp.run_id.as_str()])
                .into_iter()
                .take(twin::diff::MAX_LINES)
                .collect(),
        },
        Ok(Some(text)) => match twin::junit::parse(&text) {
            Ok(tests) => Results::Junit { tests },
            Err(reason) => Results::Unreadable {
                reason: format!("{}: {reason}", file.display()),
            },
        },
        Err(e) => Results::Unreadable {
            reason: format!("{e:#}"),
        },
    };
    Ok(SuiteRun { exit, results })
}

/// The reference: a clean worktree at the commit, the same hardened gate container
/// (`Network=none`, read-only root and worktree) run in the foreground with the quick suite,
/// then its teardown and audit.
fn reference(inp: &RunInputs, quick: &[String], host: &(dyn TwinHost + Sync)) -> Side {
    let mut side = Side {
        label: "reference".into(),
        run_id: inp.run_id.clone(),
        networks: vec!["none".into()],
        ..Side::default()
    };
    let repo = PathBuf::from(&inp.spec.repo.path);
    let branch = crate::naming::branch(&inp.spec.tenant, &inp.run_id);
    let mut made_worktree = false;
    let mut made = Ledger::in_memory();
    let run = (|| -> Result<SuiteRun> {
        let base = host.rev_parse(&repo, &inp.spec.repo.base)?;
        let results = results_dir(inp)?;
        if let Some(parent) = inp.paths.worktree.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        host.private_repo(&repo, &inp.paths.worktree, &branch, &base)?;
        made_worktree = true;
        gate::checkout_base(&lifecycle::gate_of(inp, &inp.spec), host, &mut made, &base)?;
        // The reference runs only the gate container: no network, no services. Its plan is
        // the source of that container; the subnet and service ports in it are never used.
        let unused_ports = vec![0; inp.spec.services.len()];
        let plan = quick_plan(
            inp,
            quick,
            (
                super::reserve::default_subnet_octet(&inp.run_id),
                unused_ports,
            ),
            &results,
        )?;
        let gate_stem = plan.units.gate.trim_end_matches(".service");
        let gate = plan
            .containers
            .iter()
            .find(|c| c.stem == gate_stem)
            .context("invariant: a container plan has a gate")?;
        let (flags, image, argv) = render::plain::foreground_args(&plan, gate);
        let deadline = Duration::from_secs(inp.spec.gate.timeout_s) + inp.deadlines.slack;
        let (exit, output) = host.run_container(&flags, &image, &argv, deadline)?;
        suite_result(inp, exit, &output)
    })();
    match run {
        Ok(s) => side.suite = Some(s),
        Err(e) => side.error = Some(format!("{e:#}")),
    }
    side.down_ms = Some(now_ms());
    let mut errors = Vec::new();
    if let Err(e) = host.remove_run_objects(&inp.run_id) {
        errors.push(format!("removing its container: {e:#}"));
    }
    for tree in made.gate_trees() {
        if let Err(e) = host.remove_tree(tree) {
            errors.push(format!("removing its gate tree: {e:#}"));
        }
    }
    for e in made.entries() {
        if let crate::run::ledger::Entry::ImportDir { path } = e {
            let _ = std::fs::remove_dir_all(path);
        }
    }
    if made_worktree && let Err(e) = host.remove_tree(&inp.paths.worktree) {
        errors.push(format!("removing its worktree: {e:#}"));
    }
    if inp.paths.run_dir.exists()
        && let Err(e) = std::fs::remove_dir_all(&inp.paths.run_dir)
    {
        errors.push(format!("removing {}: {e}", inp.paths.run_dir.display()));
    }
    if !errors.is_empty() && side.error.is_none() {
        side.error = Some(format!("teardown: {}", errors.join("; ")));
    }
    match host.inventory(&inp.run_id) {
        Ok(left) => side.leftovers.extend(crate::inventory::texts(&left)),
        Err(e) => side.leftovers.push(format!("audit could not run: {e:#}")),
    }
    for p in [&inp.paths.worktree, &inp.paths.run_dir] {
        if p.exists() {
            side.leftovers.push(format!("path {}", p.display()));
        }
    }
    side
}

/// Deletes each side's temporary branch `cyclix/TENANT/RUN` and audits that it is gone. Only
/// once every side is down: `git branch -D` rewrites `.git/config` (a new inode), and Linux
/// drops a bind mount whose file is replaced from another mount namespace, so a running
/// environment would lose its read-only `.git/config` (probe P17 saw it writable).
fn remove_branches(host: &dyn TwinHost, repo: &Path, tenant: &str, sides: &mut [Side]) {
    for side in sides.iter_mut().filter(|s| !s.run_id.is_empty()) {
        let branch = crate::naming::branch(tenant, &side.run_id);
        if let Err(e) = host.branch_delete(repo, &branch) {
            side.error
                .get_or_insert_with(|| format!("phase teardown: deleting branch {branch}: {e:#}"));
        }
        match host.branch_exists(repo, &branch) {
            Ok(true) => side.leftovers.push(format!("branch {branch}")),
            Ok(false) => {}
            Err(e) => side
                .leftovers
                .push(format!("branch {branch} could not be checked: {e:#}")),
        }
    }
}

#[cfg(test)]
mod tests;
