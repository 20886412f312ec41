//! The agent phase (and the gate after it): the agent runs to its end under the leak watch
//! (tier `container`) or as a plain user unit (host tiers); a unit that outlives its budget or
//! a stop request is stopped.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::super::inputs::Deadlines;
use super::super::state::{Recorder, RunState};
use super::invocations;
use super::probe::{Probe, WATCH_EXIT_GRACE, boundary_proven, release, watch_round};
use crate::render::{self};
use crate::run::record::{BaselineRecord, RunResult};
use crate::run::seam::{RunHost, RunPodman, RunProcs};
use crate::systemd::{ActiveState, Error as UnitError, JobMode, UnitManager};
use crate::tier::Tier;

/// What the agent phase (probe, agent, gate) needs of the run's inputs.
pub(crate) struct AgentInputs<'a> {
    /// The run's tier (tier `container`: probes and the leak watch).
    pub(crate) tier: Tier,
    /// The spec's agent (its timeout and resources).
    pub(crate) agent: &'a crate::spec::Agent,
    /// The spec's gate timeout, in seconds.
    pub(crate) gate_timeout_s: u64,
    /// Deadlines.
    pub(crate) deadlines: Deadlines,
    /// Set by SIGTERM/SIGINT: the agent or gate unit is stopped.
    pub(crate) interrupted: &'a AtomicBool,
    /// What the probes and the leak watch need.
    pub(crate) probe: Probe<'a>,
    /// The run's state directory (the runtime dir's check of a failed agent).
    pub(crate) run_dir: &'a std::path::Path,
    /// The spec's baseline, run before the agent is let go (tier `container`).
    pub(crate) baseline: Option<&'a crate::spec::Baseline>,
    /// Secret values (redacted from the baseline's output).
    pub(crate) secrets: &'a [(String, Vec<u8>)],
    /// The agent container was started by a pool's fill and held for the claim: its unit's
    /// `RuntimeMaxSec=` counts from the fill, so cyclix counts `agent.timeout` itself, from
    /// the agent phase's start (`render::RunContext::claim_wait_s`).
    pub(crate) held: bool,
}

/// What the probe, baseline and agent phases found, for the record (the lifecycle folds it).
/// Written as the phases go: a phase that fails leaves what it found so far.
#[derive(Debug, Default)]
pub(crate) struct AgentReport {
    /// The pre-agent probe report (one JSON object per probe).
    pub(crate) probes: Vec<serde_json::Value>,
    /// Why the boundary was refused or the agent stopped (failing probes, leaks, changed
    /// units).
    pub(crate) refusal: Vec<String>,
    /// When the go (or refused) file was written, in ms since the Unix epoch.
    pub(crate) go_ms: Option<u128>,
    /// The baseline's run, when the spec has one and it ran.
    pub(crate) baseline: Option<BaselineRecord>,
    /// The agent's exit status, when it ran to an end that has one.
    pub(crate) agent_exit: Option<i32>,
    /// How many leak-watch rounds ran.
    pub(crate) watch_rounds: u32,
    /// Variables merely named like a watched one.
    pub(crate) agent_named: Vec<String>,
    /// Causes of a failure the host shows (oom, a signal, a full runtime dir, a part of the
    /// sandbox that stopped).
    pub(crate) causes: Vec<String>,
    /// Notices.
    pub(crate) notices: Vec<String>,
}

/// The probe phase, then (if the boundary is proven) the baseline and the agent under the
/// leak watch; what they find goes into `out`. `Passed` means the agent exited 0 and the
/// gate is next.
pub(crate) fn agent_phases(
    inp: &AgentInputs<'_>,
    units: &dyn UnitManager,
    host: &dyn RunHost,
    r: &mut Recorder,
    created: &mut RunState,
    names: &render::plan::UnitNames,
    out: &mut AgentReport,
) -> Result<RunResult> {
    // systemd stops the agent at its `RuntimeMaxSec=` first; cyclix a slack later. A held
    // agent's unit counts from its fill: cyclix stops it at `agent.timeout` itself.
    let agent_budget = if inp.held {
        Duration::from_secs(inp.agent.timeout_s)
    } else {
        Duration::from_secs(inp.agent.timeout_s) + inp.deadlines.slack
    };
    let end = if inp.tier.is_sandboxed() {
        let deadline = crate::naming::RunNames::new(inp.probe.run_id).agent_deadline();
        let end = container_phases(inp, units, host, r, created, names, out, agent_budget);
        if inp.held {
            // Disarmed: the run's own end and teardown take over.
            let _ = units.stop(&deadline, JobMode::Replace, inp.deadlines.stop);
        }
        match end? {
            Ok(end) => end,
            Err(result) => return Ok(result),
        }
    } else {
        // The host tiers run the agent as a plain user unit: nothing to probe or watch.
        r.phase("agent", || {
            timed_out_is_an_end(
                units,
                &names.agent,
                run_to_end(
                    units,
                    &names.agent,
                    inp.deadlines,
                    agent_budget,
                    inp.interrupted,
                )
                .map(AgentEnd::Exit),
            )
        })?
    };
    let code = match end {
        AgentEnd::Leak => return Ok(RunResult::LeakDetected),
        AgentEnd::TimedOut => {
            out.causes.push(format!(
                "the agent ran past `agent.timeout` ({} s) and was stopped: its work so far is \
                 not judged; raise `agent.timeout` in the tenant's spec if the task needs \
                 longer, or narrow the task",
                inp.agent.timeout_s
            ));
            return Ok(RunResult::AgentTimeout);
        }
        AgentEnd::Exit(code) => code,
    };
    out.agent_exit = Some(code);
    if code != 0 {
        out.causes
            .extend(agent_oom(units, &names.agent, &inp.agent.resources));
        // What cyclix did not read is not an exit code (issue 20 item 6): a signal is named,
        // and with the runtime dir full conmon could not store the container's exit status.
        if let Some(cause) = killed_by(units, &names.agent) {
            out.causes.push(format!("the agent was {cause}"));
            out.agent_exit = None;
        }
        if let Some(cause) = runtime_dir_full(host, inp.run_dir) {
            out.causes.push(cause);
            out.agent_exit = None;
        }
        return Ok(RunResult::AgentFailed);
    }
    // The agent is done and exited 0: the gate decides (`phases::gate`, after the import).
    Ok(RunResult::Passed)
}

/// The probe phase, the baseline and the agent under the leak watch of tier `container`: how
/// the agent ended, or the run's result when it never got to its end (`Err`: the boundary
/// refused, the baseline failed, a leak).
#[allow(clippy::too_many_arguments)]
fn container_phases(
    inp: &AgentInputs<'_>,
    units: &dyn UnitManager,
    host: &dyn RunHost,
    r: &mut Recorder,
    created: &mut RunState,
    names: &render::plan::UnitNames,
    out: &mut AgentReport,
    agent_budget: Duration,
) -> Result<std::result::Result<AgentEnd, RunResult>> {
    let agent = names.agent.trim_end_matches(".service").to_string();
    let mut noted = invocations::Proven::default();
    let proven = r.phase("probe", || {
        // What is up now is what the probes prove: noted first, compared from then on.
        let up: Vec<&str> = names
            .all
            .iter()
            .map(String::as_str)
            .filter(|u| *u != names.gate && Some(*u) != names.gate_base.as_deref())
            .collect();
        noted = invocations::note(units, &up)?;
        let tripwires = created.tripwires.as_mut();
        out.refusal = boundary_proven(&inp.probe, host, &agent, tripwires, &mut out.probes)?;
        let ok = out.refusal.is_empty();
        if !ok || inp.baseline.is_none() {
            out.go_ms = Some(release(
                &inp.probe,
                host,
                ok,
                "the sandbox boundary was refused",
            )?);
        }
        Ok(ok)
    })?;
    if !proven {
        return Ok(Err(RunResult::ProbeRefused));
    }
    if !baseline_passed(inp, host, r, &agent, out)? {
        return Ok(Err(RunResult::SetupBroken));
    }
    let end = r.phase("agent", || {
        if inp.held {
            // A held agent's unit counts its `RuntimeMaxSec=` from its pool's fill: should
            // cyclix be gone before the agent ends, the user manager stops it a slack after its
            // budget, as it would a cold one (armed right after the go, off the time to agent;
            // until then the unit's own clock bounds it).
            let deadline = crate::naming::RunNames::new(inp.probe.run_id).agent_deadline();
            // In the ledger first: a dead run's convergence stops it.
            created.ledger.record(crate::run::ledger::Entry::Unit {
                name: deadline.clone(),
            })?;
            units.stop_later(&names.agent, &deadline, agent_budget + inp.deadlines.slack)?;
            crate::failpoint::kill_point("agent.deadline");
        }
        timed_out_is_an_end(
            units,
            &names.agent,
            watch_to_end(inp, units, host, &names.agent, agent_budget, &noted, out),
        )
    })?;
    // The agent is done: nothing of the proven sandbox may have changed meanwhile.
    let pod = crate::naming::pod_unit(&crate::naming::RunNames::new(inp.probe.run_id).base());
    let ended = [names.agent.as_str(), pod.as_str()];
    let changed = invocations::changes(units, &noted, &ended);
    // An agent that ran into its timeout is judged as one that exited (attack review:
    // a unit restarted in the last watch interval was hidden behind `agent_timeout`).
    if matches!(end, AgentEnd::Exit(_) | AgentEnd::TimedOut) && !changed.is_empty() {
        out.refusal = changed;
        return Ok(Err(RunResult::LeakDetected));
    }
    // An agent stopped from outside (SIGTERM/SIGKILL: 143/137) may have been taken down by
    // a part of its sandbox (the pod's infra container killed stops the pod and, bound to
    // it, the agent): say which. An agent that failed on its own stops its pod too, so
    // its pod is not blamed then.
    if matches!(end, AgentEnd::Exit(143 | 137)) {
        out.causes
            .extend(invocations::changes(units, &noted, &ended[..1]));
    }
    Ok(Ok(end))
}

/// The gate of a host-tier run: its unit, on the agent's own work tree (nothing to check
/// out: the host tiers do not isolate the tree). Its exit status (0: passed).
///
/// # Errors
/// The unit manager failed, or the gate ran past its budget.
pub(crate) fn host_gate(
    inp: &AgentInputs<'_>,
    units: &dyn UnitManager,
    r: &mut Recorder,
    names: &render::plan::UnitNames,
) -> Result<i32> {
    let gate_budget = Duration::from_secs(inp.gate_timeout_s) + inp.deadlines.slack;
    let gate_exit = r.phase("gate", || {
        run_to_end(
            units,
            &names.gate,
            inp.deadlines,
            gate_budget,
            inp.interrupted,
        )
    })?;
    Ok(gate_exit)
}

/// The baseline phase (when the spec has one): the baseline in the agent's own container,
/// still held back (its image, user, environment, work tree and services, before the agent
/// has touched anything), then the agent's go or refusal. Whether the agent may start.
fn baseline_passed(
    inp: &AgentInputs<'_>,
    host: &dyn RunPodman,
    r: &mut Recorder,
    agent: &str,
    out: &mut AgentReport,
) -> Result<bool> {
    let Some(b) = inp.baseline else {
        return Ok(true);
    };
    r.phase("baseline", || {
        let secrets: Vec<&[u8]> = inp.secrets.iter().map(|(_, v)| v.as_slice()).collect();
        // The agent's variables, which its container gets only at the go: the baseline sees
        // the agent's environment.
        let env: Vec<(String, Vec<u8>)> = inp
            .secrets
            .iter()
            .filter(|(k, _)| inp.agent.env.contains(k))
            .cloned()
            .collect();
        let ran = super::baseline::run(b, host, agent, &secrets, &env, inp.probe.gvisor)?;
        let passed = ran.passed;
        out.baseline = Some(ran);
        out.go_ms = Some(release(
            &inp.probe,
            host,
            passed,
            super::baseline::REFUSED_REASON,
        )?);
        Ok(passed)
    })
}

/// How the agent's time ended.
pub(crate) enum AgentEnd {
    /// It exited with this status (0 for success).
    Exit(i32),
    /// The leak watch stopped it (the reasons are in the report's `refusal`).
    Leak,
    /// It ran past `agent.timeout` and was stopped ([`ran_out_of_time`]).
    TimedOut,
}

/// An agent that ran out of its time ended ([`AgentEnd::TimedOut`]): that is its result, not
/// a failure of cyclix — once `unit` has ended. systemd's stop at `RuntimeMaxSec=` has ended
/// it; cyclix's own stop at its budget ([`Overdue`]) is confirmed first, and an agent still
/// running stays an error (attack review: its commits must not be imported while it may
/// still write them).
fn timed_out_is_an_end(
    units: &dyn UnitManager,
    unit: &str,
    end: Result<AgentEnd>,
) -> Result<AgentEnd> {
    match end {
        Err(e) if e.downcast_ref::<RanPastTimeout>().is_some() => Ok(AgentEnd::TimedOut),
        Err(e) if e.downcast_ref::<Overdue>().is_some() => match ended(units, unit) {
            Ok(Some(_)) => Ok(AgentEnd::TimedOut),
            Err(t) if t.downcast_ref::<RanPastTimeout>().is_some() => Ok(AgentEnd::TimedOut),
            _ => Err(e),
        },
        other => other,
    }
}

/// Waits for the (already started) agent to end, re-running the ★ probes and the host-side
/// environment scan every `deadlines.watch`, and comparing the run's units with the
/// invocations `noted` before the probes; stops the agent on the first finding. The agent's
/// container is named as its unit without `.service`.
pub(crate) fn watch_to_end(
    inp: &AgentInputs<'_>,
    units: &dyn UnitManager,
    host: &dyn RunPodman,
    unit: &str,
    budget: Duration,
    noted: &invocations::Proven,
    out: &mut AgentReport,
) -> Result<AgentEnd> {
    let container = unit.trim_end_matches(".service");
    let d = inp.deadlines;
    let interrupted = inp.interrupted;
    let t0 = Instant::now();
    let mut next_watch = Instant::now() + d.watch;
    loop {
        if let Some(code) = ended(units, unit)? {
            return Ok(AgentEnd::Exit(code));
        }
        if Instant::now() >= next_watch {
            let round = watch_round(&inp.probe, host, container, d.watch);
            // Units of the run that changed since the probes (checked once more at the end
            // of the agent, where its pod may stop with it).
            let changed = invocations::changes(units, noted, &[]);
            next_watch = Instant::now() + d.watch;
            for n in round.named {
                if !out.agent_named.contains(&n) {
                    out.agent_named.push(n);
                }
            }
            let (mut findings, incomplete) = (round.findings, round.incomplete);
            // The agent may have ended during the round: that is not a finding. A round that
            // only failed to run (the container was exiting: `podman exec` 137, `top` on a
            // stopped container), or saw only a changed unit (the pod stopping because the
            // agent is exiting), gets a moment for the unit to show its end. A finding of a
            // round that ran is a leak whether or not the agent ended meanwhile (attack
            // review: an agent that broke the boundary and exited, or ran into its timeout,
            // within the round ended `passed` or `agent_timeout`).
            let grace = if incomplete.is_empty() && changed.is_empty() {
                Duration::ZERO
            } else {
                WATCH_EXIT_GRACE
            };
            if findings.is_empty()
                && let Some(code) = ended_within(units, unit, grace, d.poll)?
            {
                // Not a finding (the container was going away), but not hidden either: an
                // agent that killed the watch probe and exited at once shows here.
                out.notices.extend(incomplete.into_iter().map(|i| {
                    format!("the last watch round did not complete as the agent ended: {i}")
                }));
                return Ok(AgentEnd::Exit(code));
            }
            findings.extend(incomplete);
            findings.extend(changed);
            out.watch_rounds += 1;
            if !findings.is_empty() {
                out.refusal = findings;
                units.stop(unit, JobMode::Replace, d.stop)?;
                return Ok(AgentEnd::Leak);
            }
        }
        keep_waiting(units, unit, d, t0.elapsed() > budget, budget, interrupted)?;
        std::thread::sleep(d.poll);
    }
}

/// A unit that systemd stopped at its `RuntimeMaxSec=` (the spec's `agent.timeout` or
/// `gate.timeout`: `Result=timeout`), found by [`ended`]: callers say whose time ran out
/// ([`ran_out_of_time`]).
#[derive(Debug, thiserror::Error)]
#[error("{unit} ran past its timeout and was stopped by systemd (RuntimeMaxSec=)")]
pub(crate) struct RanPastTimeout {
    /// The unit.
    pub(crate) unit: String,
}

/// Whether `e` says a unit ran out of its time: systemd stopped it at its `RuntimeMaxSec=`
/// ([`RanPastTimeout`]) or cyclix did at its budget, the timeout plus slack ([`Overdue`]).
pub(crate) fn ran_out_of_time(e: &anyhow::Error) -> bool {
    e.downcast_ref::<RanPastTimeout>().is_some() || e.downcast_ref::<Overdue>().is_some()
}

/// A unit that ran past its budget and was stopped ([`keep_waiting`]): callers that can say
/// whose time ran out (the base's tests, say) find it in the error's chain.
#[derive(Debug, thiserror::Error)]
#[error("{unit} did not finish within {budget_s} s; stopped it")]
pub(crate) struct Overdue {
    /// The unit.
    pub(crate) unit: String,
    /// Its budget, in seconds.
    pub(crate) budget_s: u64,
}

/// The two reasons to stop waiting for a running `unit`: its budget is spent, or cyclix was
/// asked to stop. Either way the unit is stopped and the error says why.
pub(crate) fn keep_waiting(
    units: &dyn UnitManager,
    unit: &str,
    d: Deadlines,
    overdue: bool,
    budget: Duration,
    interrupted: &AtomicBool,
) -> Result<()> {
    if overdue {
        let _ = units.stop(unit, JobMode::Replace, d.stop);
        return Err(Overdue {
            unit: unit.to_string(),
            budget_s: budget.as_secs(),
        }
        .into());
    }
    if interrupted.load(Ordering::SeqCst) {
        let _ = units.stop(unit, JobMode::Replace, d.stop);
        bail!("interrupted (SIGTERM or SIGINT) while {unit} ran; stopped it, tearing down");
    }
    Ok(())
}

/// [`ended`], looking again every `poll` for up to `grace`.
pub(crate) fn ended_within(
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
pub(crate) fn ended(units: &dyn UnitManager, unit: &str) -> Result<Option<i32>> {
    let st = units.unit_status(unit)?;
    Ok(match st.active_state {
        ActiveState::Inactive | ActiveState::Failed if !st.job_pending => {
            Some(match st.result.as_deref() {
                Some("success") => 0,
                Some("timeout") => {
                    return Err(RanPastTimeout {
                        unit: unit.to_string(),
                    }
                    .into());
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

/// `killed by signal 9 (SIGKILL)` when `unit`'s main process ended by a signal
/// (`ExecMainCode` killed or dumped: `ExecMainStatus` is then the signal, not an exit code).
pub(crate) fn killed_by(units: &dyn UnitManager, unit: &str) -> Option<String> {
    use crate::systemd::ExecMainCode;
    let st = units.unit_status(unit).ok()?;
    let sig = st.exec_main_status?;
    matches!(
        st.exec_main_code,
        Some(ExecMainCode::Killed | ExecMainCode::Dumped)
    )
    .then(|| {
        let name = nix::sys::signal::Signal::try_from(sig).map_or("?", |s| s.as_str());
        format!("killed by signal {sig} ({name})")
    })
}

/// A cause when the run's runtime dir (`$XDG_RUNTIME_DIR`, where `run_dir` lives) is full:
/// conmon then cannot store a container's exit status, so the status systemd saw is conmon's,
/// not the agent's (measured: an agent that exited 0 came out as exit 1), and podman cannot
/// start the next container (measured: the export container exited 125 after an agent that
/// exited 0).
pub(crate) fn runtime_dir_full(host: &dyn RunProcs, run_dir: &std::path::Path) -> Option<String> {
    let s = host.fs_space(run_dir).ok()?;
    (s.avail < crate::run::space::FULL_BELOW).then(|| {
        format!(
            "runtime dir full (avail {} of {}) at {}: conmon and podman could not write their \
             state there (a container's exit status, the next container's start), so a failure \
             here is the host's, not the agent's; free space there (its tmpfs size is \
             RuntimeDirectorySize= in logind.conf(5)) and run again",
            crate::limits::bytes(s.avail),
            crate::limits::bytes(s.total),
            run_dir.ancestors().nth(3).unwrap_or(run_dir).display()
        )
    })
}

/// "agent killed for memory (oom)" when the agent unit ended with `Result=oom-kill`.
pub(crate) fn agent_oom(
    units: &dyn UnitManager,
    unit: &str,
    r: &crate::spec::Resources,
) -> Option<String> {
    let st = units.unit_status(unit).ok()?;
    crate::limits::oom_cause(st.result.as_deref(), r)
}
