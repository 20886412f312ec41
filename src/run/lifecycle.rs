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

use std::path::Path;

use anyhow::{Result, bail};

pub use super::inputs::{Deadlines, RunInputs, RunPaths};
use super::ledger::Ledger;
use super::phases::{
    agent::{AgentReport, agent_phases, host_gate},
    audit,
    bring_up::{self, install, run_context, start_units},
    collect::{follow_outputs, project_space_causes},
    gate,
    prepare::prepare,
    teardown,
};
use super::record::{RunRecord, RunResult};
use super::seam::RunHost;
pub(crate) use super::state::{Recorder, RunState, now_ms};
use super::tripwire;
use crate::render::{self};
use crate::systemd::UnitManager;
use crate::tier::Tier;

/// Runs the whole lifecycle and returns the record (never an `Err`: failures are recorded
/// with their phase). `ledger` (started by the caller, [`Ledger::create`]) names everything
/// the run creates as it goes. The caller writes the record, then removes the ledger.
pub fn execute(
    inp: &RunInputs,
    ledger: Ledger,
    units: &(dyn UnitManager + Sync),
    host: &dyn RunHost,
) -> RunRecord {
    // Journal fields CYCLIX_TENANT and CYCLIX_RUN on every line of the run (issue 18, item 4).
    let _span = tracing::info_span!(
        "run",
        cyclix_tenant = inp.spec.tenant.as_str(),
        cyclix_run = inp.run_id.as_str()
    )
    .entered();
    let mut rec = new_record(inp);
    let mut r = Recorder::new(Some(inp.interrupted.clone()), inp.progress.clone());
    // The queue and the claim ran before the run's ledger (`cyclix run`): the record's first
    // phases, in the order they ran.
    r.phases.extend(inp.queued.iter().map(|q| q.phase.clone()));
    r.phases
        .extend(inp.environment.iter().flat_map(|e| e.claim.iter().cloned()));
    let mut created = RunState::new(ledger);
    let outcome = bring_up_and_run(inp, units, host, &mut r, &mut created, &mut rec);
    // A run that ended before collect read its output: the readers end here.
    host.end_outputs();
    rec.notices.append(&mut created.notices);
    match outcome {
        Ok(result) => rec.result = result,
        Err(e) => {
            // A person's stop is not cyclix failing: `interrupted`, unless teardown or the
            // audit fail below (then it is an error after all).
            rec.result = if inp.interrupted.load(std::sync::atomic::Ordering::SeqCst) {
                RunResult::Interrupted
            } else {
                RunResult::Error
            };
            rec.failed_phase = r
                .phases
                .iter()
                .rev()
                .find(|p| p.outcome != "ok")
                .map(|p| p.name.clone());
            if rec.failed_phase.as_deref() == Some("build") && rec.result == RunResult::Error {
                rec.result = RunResult::SetupBroken; // the project's setup, not cyclix's
            }
            if e.chain().any(|c| {
                c.downcast_ref::<super::phases::deliver::Refusal>()
                    .is_some()
            }) {
                // The branch is held by another run, or a fixed branch diverged: a finding.
                rec.result = RunResult::DeliveryRefused;
            }
            let note = storage_lock_note(inp, host, &e);
            rec.error = Some(format!("{e:#}{note}"));
        }
    }
    if rec.result != RunResult::Passed {
        space_causes(inp, host, &created.ledger, &mut rec);
    }
    let torn = r.phase("teardown", || {
        teardown::teardown(&teardown_of(inp), units, host, &mut created)
    });
    rec.notices.append(&mut created.notices);
    if !created.branch_made || inp.spec.tier == Tier::Direct {
        // Never made, or (tier direct) not where the agent worked: the record must not name
        // a branch that never was or that holds none of its commits (issue 32 item 3).
        rec.branch.clear();
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
        // (an interrupted run with leftovers is an error too)
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
        secret_names: inp.secrets.iter().map(|(k, _)| k.clone()).collect(),
        notices: inp
            .notices
            .iter()
            .cloned()
            .chain(
                inp.gvisor
                    .is_some()
                    .then(|| super::boundary::GVISOR_NO_HOST_SCAN.to_string()),
            )
            .collect(),
        preset: spec.agent.preset.clone(),
        drill: inp.overridden.drill.clone(),
        model: inp.overridden.model.clone(),
        environment: Some(inp.environment.as_ref().map_or_else(
            || {
                super::pool::cold(
                    &inp.run_id,
                    super::pool::why_cold(spec, inp.backend).unwrap_or(super::pool::NONE_READY),
                )
            },
            |e| e.record.clone(),
        )),
        oci_runtime: inp.gvisor.clone(),
        ..RunRecord::new(&spec.tenant, &inp.run_id, spec.tier.to_string())
    }
}

/// The `queue` phase: the host-wide limit first. A run over `max_runs` waits here, holding
/// nothing but its tenant lock, and keeps its slot until after the audit (`RunState::slot`).
fn queue(
    inp: &RunInputs,
    r: &mut Recorder,
    created: &mut RunState,
    rec: &mut RunRecord,
) -> Result<()> {
    if let Some(q) = &inp.queued {
        // Queued by the caller before its claim: the phase is in the record already.
        if q.phase.outcome != "ok" {
            bail!("{}", q.phase.outcome);
        }
        if let Some((queue, notice)) = &q.taken {
            rec.queue = Some(queue.clone());
            rec.notices.extend(notice.clone());
        }
        return Ok(());
    }
    let Some(req) = &inp.capacity else {
        return Ok(());
    };
    let me = occupant(&inp.spec.tenant, &inp.run_id);
    let taken = r.phase("queue", || {
        Ok(super::capacity::acquire(req, &me, &inp.interrupted)?)
    })?;
    let (queue, notice) = queue_facts(req, &taken);
    rec.queue = Some(queue);
    rec.notices.extend(notice);
    created.slot = Some(taken.slot);
    Ok(())
}

/// This process as the occupant of a run slot for `run_id` of `tenant`, from now.
fn occupant(tenant: &str, run_id: &str) -> super::capacity::Occupant {
    super::capacity::Occupant {
        tenant: tenant.to_owned(),
        run_id: run_id.to_owned(),
        pid: std::process::id(),
        since_ms: u64::try_from(now_ms()).unwrap_or(u64::MAX),
    }
}

/// The record's `queue` object for a slot taken, and the notice of a wait of 1 s or more.
fn queue_facts(
    req: &super::capacity::Request,
    taken: &super::capacity::Taken,
) -> (super::record::QueueRecord, Option<String>) {
    let notice = (taken.waited_ms >= 1000).then(|| {
        format!(
            "queued {}.{} s for a run slot ({} run(s) at once on this host: max_runs)",
            taken.waited_ms / 1000,
            taken.waited_ms % 1000 / 100,
            req.max_runs
        )
    });
    let queue = super::record::QueueRecord {
        max_runs: req.max_runs,
        slot: taken.slot.index,
        waited_ms: taken.waited_ms,
        busy_at_start: taken.busy_at_start,
        ahead_at_start: taken.ahead_at_start,
    };
    (queue, notice)
}

/// The `queue` phase of `cyclix run`, taken before its claim (a warm run must not hold a
/// claimed environment, let alone a credential in its proxy, while it waits): waits for a slot
/// under `req` as the lifecycle's own phase would (oldest first, `interrupted` looked at) and
/// returns the phase as it went and the slot. `run_id` is the id the run has now; after a claim
/// the caller names the adopted id ([`super::capacity::Slot::set_occupant`]). `progress` is the
/// run's phase note (`RUN.phase`), which says `queue` while it waits. A wait that ends
/// without a slot is a failed phase: the lifecycle then ends the run in `queue`.
#[must_use]
pub fn queue_ahead(
    req: &super::capacity::Request,
    tenant: &str,
    run_id: &str,
    progress: &Path,
    interrupted: &std::sync::atomic::AtomicBool,
) -> (super::capacity::Queued, Option<super::capacity::Slot>) {
    let me = occupant(tenant, run_id);
    let start_ms = now_ms();
    tracing::info!("phase queue started");
    super::state::reached(Some(progress), "phase.queue", "queue");
    let got = super::capacity::acquire(req, &me, interrupted);
    let phase = |outcome: String| super::record::Phase {
        name: "queue".into(),
        start_ms,
        end_ms: now_ms(),
        outcome,
    };
    match got {
        Ok(taken) => {
            tracing::info!("phase queue: ok");
            let facts = queue_facts(req, &taken);
            let queued = super::capacity::Queued {
                phase: phase("ok".into()),
                taken: Some(facts),
                slot: None,
            };
            (queued, Some(taken.slot))
        }
        Err(e) => {
            tracing::info!("phase queue: {e}");
            let queued = super::capacity::Queued {
                phase: phase(e.to_string()),
                taken: None,
                slot: None,
            };
            (queued, None)
        }
    }
}

/// Before teardown frees the space: a full project file system is named as a cause, and a full
/// runtime dir, which fails whatever ran last (conmon's exit file, an export container exiting
/// 125), as the first cause, however the failure looked.
fn space_causes(inp: &RunInputs, host: &dyn RunHost, ledger: &Ledger, rec: &mut RunRecord) {
    rec.causes.extend(project_space_causes(
        Path::new(&inp.spec.repo.path),
        &inp.paths.worktree,
        host,
        ledger,
    ));
    if !rec.causes.iter().any(|c| c.starts_with("runtime dir full"))
        && let Some(cause) = super::phases::agent::runtime_dir_full(host, &inp.paths.run_dir)
    {
        rec.causes.insert(0, cause);
    }
}

/// Where the collect phase finds the run's commits: `direct` works in the user's own checkout
/// (its commits are on HEAD there); tier `container` has a branch only once the import made
/// it; the other tiers' branch is the run branch.
fn collect_tip(tier: Tier, branch_made: bool, branch: &str) -> String {
    match tier {
        Tier::Direct => "HEAD".to_string(),
        Tier::Container | Tier::Gvisor if !branch_made => String::new(),
        _ => branch.to_string(),
    }
}

/// A host tier's notice that its gate runs `gate.command` on the host and `gate.image` is
/// not used (issue 32 item 3: ignored without a word); `None` for tier `container`.
fn host_gate_notice(spec: &crate::spec::Spec) -> Option<String> {
    (!spec.tier.is_sandboxed()).then(|| {
        format!(
            "tier {}: the gate runs `gate.command` on the host as you; `gate.image` ({}) is not \
             used (a host tier has no containers)",
            spec.tier.as_str(),
            spec.gate.image.reference()
        )
    })
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
    queue(inp, r, created, rec)?;
    let (delivery, (base, _common, octet, service_ports, setup_binds)) =
        r.phase("prepare", || {
            // Delivery first: the branch lock and the remote tip decide where the run starts.
            let delivery = super::phases::deliver::start(inp, &rec.branch)?;
            let from = delivery.as_ref().and_then(|d| d.base_override.clone());
            let prepared = prepare(
                &prepare_of(inp),
                host,
                created,
                &rec.branch,
                from.as_deref(),
            )?;
            Ok((delivery, prepared))
        })?;
    rec.delivery = delivery.as_ref().map(|d| d.record.clone());
    rec.base_commit.clone_from(&base);
    // Images built from the project's files at the base commit: the rest of the run renders
    // the spec that names them by their digest tags.
    let mut images = super::phases::build::Built::default();
    let built = super::phases::build::phase(r, inp, host, &base, &mut images);
    rec.images = images.images;
    rec.build_log = images.build_log;
    let built = built?;
    let spec = built.as_ref().unwrap_or(spec);
    let up = bring_up_of(inp);
    let mut run_ctx = run_context(&up, octet, service_ports);
    run_ctx.setup_binds = setup_binds;
    let rendered = r.phase("render", || {
        Ok(render::render(spec, &run_ctx, inp.backend)?)
    })?;
    rec.units.clone_from(&rendered.units.all);
    rec.services = rendered.units.services.iter().map(Into::into).collect();
    rec.notices.extend(rendered.warnings.iter().cloned());
    rec.notices.extend(host_gate_notice(spec));
    let written = r.phase("install", || install(&up, &rendered, &mut created.ledger))?;
    r.phase("load", || {
        bring_up::load(&up, units, host, &mut created.ledger, &rendered, &written).map(drop)
    })?;
    r.phase("start", || {
        follow_outputs(&outputs_of(inp), host, &rendered.units)?;
        rec.agent_ready_ms = start_units(&up, units, host, &rendered.units)?;
        Ok(())
    })?;
    let mut agent = AgentReport::default();
    let ran = agent_phases(
        &agent_of(inp),
        units,
        host,
        r,
        created,
        &rendered.units,
        &mut agent,
    );
    fold::agent(agent, rec);
    let mut result = ran?;
    if result == RunResult::ProbeRefused {
        rec.causes.splice(
            0..0,
            super::boundary::unanswered_allowed(&inp.probe_context, &rec.probes),
        );
    }
    escape_check(r, "escape-check", created, rec, &mut result)?;
    let result = import_and_gate(
        inp,
        spec,
        units,
        host,
        r,
        created,
        &rendered.units,
        &base,
        rec,
        result,
    )?;
    r.phase("collect", || {
        let tip = collect_tip(spec.tier, created.branch_made, &rec.branch);
        fold::collect_into(
            &fold::CollectFrom {
                inp,
                spec,
                units,
                host,
                names: &rendered.units,
                base: &base,
                tip: &tip,
            },
            rec,
        )
    })?;
    match delivery {
        Some(d) if result == RunResult::Passed => {
            let facts = rec.delivery_facts();
            r.phase("deliver", || {
                super::phases::deliver::deliver(inp, d, &facts, &mut rec.delivery)
            })
        }
        _ => Ok(result),
    }
}

/// After an agent that exited 0 (`result` still `Passed`): the import of its commits (tier
/// `container`, also after a failed agent, to keep its work), then the gate on them and the
/// escape check once more; the run's result.
#[allow(clippy::too_many_arguments)]
fn import_and_gate(
    inp: &RunInputs,
    spec: &crate::spec::Spec,
    units: &(dyn UnitManager + Sync),
    host: &dyn RunHost,
    r: &mut Recorder,
    created: &mut RunState,
    names: &render::plan::UnitNames,
    base: &str,
    rec: &mut RunRecord,
    mut result: RunResult,
) -> Result<RunResult> {
    if created.private_tree()
        && matches!(
            result,
            RunResult::Passed | RunResult::AgentFailed | RunResult::AgentTimeout
        )
    {
        r.phase("import", || {
            let mut found = super::phases::import::Imported::default();
            let done = super::phases::import::import(
                &import_of(inp),
                host,
                created,
                base,
                &mut found,
                &mut result,
            );
            rec.import = found.import;
            rec.causes.extend(found.causes);
            rec.notices.extend(found.notices);
            done
        })?;
    }
    if result != RunResult::Passed {
        return Ok(result);
    }
    result = if created.private_tree() {
        // The gate judges the commits as imported, decided in the user's repository.
        let tip = match &rec.import {
            Some(i) if created.branch_made => i.tip.clone(),
            _ => base.to_string(),
        };
        let g = gate::run(
            &gate_of(inp, spec),
            units,
            host,
            r,
            &mut created.ledger,
            names,
            base,
            &tip,
        )?;
        fold::gate(g, rec)
    } else {
        let exit = host_gate(&agent_of(inp), units, r, names)?;
        rec.gate_exit = Some(exit);
        if exit == 0 {
            RunResult::Passed
        } else {
            RunResult::GateFailed
        }
    };
    // The gate ran the agent's code too: whatever it tripped is an escape.
    escape_check(r, "gate-escape-check", created, rec, &mut result)?;
    Ok(result)
}

/// The escape check (tier `container`) as phase `name`: a tripped tripwire turns the result
/// into `LeakDetected`. Run after the agent (`escape-check`) and again after the gate
/// (`gate-escape-check`), which runs the agent's code.
fn escape_check(
    r: &mut Recorder,
    name: &str,
    created: &mut RunState,
    rec: &mut RunRecord,
    result: &mut RunResult,
) -> Result<()> {
    if let Some(tw) = created.tripwires.as_mut() {
        let tripped = r.phase(name, || Ok(tripwire::check(tw)))?;
        for t in tripped {
            if !rec.refusal.contains(&t) {
                rec.refusal.push(t);
            }
            *result = RunResult::LeakDetected;
        }
    }
    Ok(())
}

/// `; podman's storage lock: …` when a phase failed while someone holds podman's storage lock
/// (a podman call or a unit start that ran into its deadline is then explained), else empty.
fn storage_lock_note(inp: &RunInputs, host: &dyn RunHost, e: &anyhow::Error) -> String {
    // Named only where the lock can be the cause: a command that ran past its deadline (podman
    // waits for the lock). A storage-lock wait names the holder itself.
    let relevant = e.chain().any(|c| {
        matches!(
            c.downcast_ref::<crate::process::ProcessError>(),
            Some(crate::process::ProcessError::Deadline { .. })
        ) || matches!(
            c.downcast_ref::<crate::systemd::Error>(),
            Some(crate::systemd::Error::Deadline { .. })
        )
    });
    if !inp.spec.tier.is_sandboxed()
        || !relevant
        || e.downcast_ref::<super::storage_lock::WaitError>().is_some()
    {
        return String::new();
    }
    match host.storage_lock_holders(Some(&inp.run_id)) {
        Ok(h) if !h.is_empty() => format!(
            " (podman's storage lock is held: {}; podman calls wait for it)",
            super::storage_lock::describe(&h)
        ),
        _ => String::new(),
    }
}

mod fold;
mod views;
pub(crate) use views::{
    agent_of, audit_of, bring_up_of, gate_of, import_of, outputs_of, prepare_of, probe_of,
    teardown_of,
};

#[cfg(test)]
mod tests;
