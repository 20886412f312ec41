//! What each phase needs of a run's inputs: one narrow view per phase, made from
//! [`RunInputs`] (and, for the gate, the spec as the run renders it), so a phase never sees
//! more of the run than it uses.

use std::path::Path;

use super::super::phases::{
    agent, audit, bring_up, collect::Outputs, gate, prepare, probe, teardown,
};
use super::RunInputs;
use crate::tier::Tier;

/// Where the run's agent and gate output is read from and kept.
pub(crate) fn outputs_of(inp: &RunInputs) -> Outputs<'_> {
    Outputs {
        run_id: &inp.run_id,
        tenant: &inp.spec.tenant,
        run_dir: &inp.paths.run_dir,
        records_dir: inp.paths.records_dir.as_deref(),
        tier: inp.spec.tier,
        secrets: &inp.secrets,
    }
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

/// What the prepare phase needs of the run's inputs.
pub(crate) fn prepare_of(inp: &RunInputs) -> prepare::Prepare<'_> {
    prepare::Prepare {
        spec: &inp.spec,
        run_id: &inp.run_id,
        run_dir: &inp.paths.run_dir,
        worktree: &inp.paths.worktree,
        task: &inp.task,
        secrets: &inp.secrets,
        storage_lock: inp.deadlines.storage_lock,
        interrupted: &inp.interrupted,
        octet: inp.environment.as_ref().and_then(|e| e.octet),
        tripwires: prepare::Plant {
            run_id: &inp.run_id,
            tripwire_dir: &inp.tripwire_dir,
            probe_context: &inp.probe_context,
            probe_sockets: &inp.probe_sockets,
        },
    }
}

/// What bring-up (render facts, install, start) needs of the run's inputs.
pub(crate) fn bring_up_of(inp: &RunInputs) -> bring_up::BringUp<'_> {
    bring_up::BringUp {
        run_id: &inp.run_id,
        paths: &inp.paths,
        cyclix_bin: &inp.cyclix_bin,
        tier: inp.spec.tier,
        services: &inp.spec.services,
        start: inp.deadlines.start,
        secrets: &inp.secrets,
        placeholders: &inp.placeholders,
        log_key: &inp.log_key,
        gvisor: inp.gvisor.as_ref(),
        pooled: inp.environment.as_ref().is_some_and(|e| e.record.pooled),
        claim_wait_s: claim_wait_s(inp),
    }
}

/// `Some(the pool's max_idle)` when the run claimed a warm environment: its agent container
/// was made by the fill and waits for the claim (`render::RunContext::claim_wait_s`).
pub(crate) fn claim_wait_s(inp: &RunInputs) -> Option<u64> {
    let pooled = inp.environment.as_ref().is_some_and(|e| e.record.pooled);
    (pooled && crate::run::warm::holds_agent(&inp.spec))
        .then(|| inp.spec.pool.as_ref().map(|p| p.max_idle_s))
        .flatten()
}

/// What the probes and the leak watch need of the run's inputs.
pub(crate) fn probe_of(inp: &RunInputs) -> probe::Probe<'_> {
    probe::Probe {
        run_id: &inp.run_id,
        run_dir: &inp.paths.run_dir,
        deadline: inp.deadlines.probe,
        watched: &inp.watched,
        agent_env: &inp.spec.agent.env,
        secrets: &inp.secrets,
        tier: inp.spec.tier,
        gvisor: inp.gvisor.as_ref(),
        worktree: &inp.paths.worktree,
    }
}

/// The run's private repository (tier `container`), for the gate's checkout and the import.
fn private_tree_of(inp: &RunInputs) -> super::super::phases::import::PrivateTree<'_> {
    super::super::phases::import::PrivateTree {
        run_id: &inp.run_id,
        tenant: &inp.spec.tenant,
        worktree: &inp.paths.worktree,
        run_dir: &inp.paths.run_dir,
    }
}

/// What the agent phase (probe, agent, gate) needs of the run's inputs.
pub(crate) fn agent_of(inp: &RunInputs) -> agent::AgentInputs<'_> {
    agent::AgentInputs {
        tier: inp.spec.tier,
        agent: &inp.spec.agent,
        gate_timeout_s: inp.spec.gate.timeout_s,
        deadlines: inp.deadlines,
        interrupted: &inp.interrupted,
        probe: probe_of(inp),
        run_dir: &inp.paths.run_dir,
        baseline: inp.spec.baseline.as_ref(),
        secrets: &inp.secrets,
        held: claim_wait_s(inp).is_some(),
    }
}

/// What the gate phases (tier `container`) need of the run's inputs, with `spec` as the run
/// renders it (a built gate image's reference).
pub(crate) fn gate_of<'a>(inp: &'a RunInputs, spec: &'a crate::spec::Spec) -> gate::GateInputs<'a> {
    gate::GateInputs {
        run_id: &inp.run_id,
        tenant: &inp.spec.tenant,
        repo: Path::new(&inp.spec.repo.path),
        worktree: &inp.paths.worktree,
        run_dir: &inp.paths.run_dir,
        records_dir: inp.paths.records_dir.as_deref(),
        gate: &spec.gate,
        deadlines: inp.deadlines,
        interrupted: &inp.interrupted,
    }
}

/// What the import phase (tier `container`) needs of the run's inputs.
pub(crate) fn import_of(inp: &RunInputs) -> super::super::phases::import::ImportInputs<'_> {
    super::super::phases::import::ImportInputs {
        tree: private_tree_of(inp),
        repo: Path::new(&inp.spec.repo.path),
        records_dir: inp.paths.records_dir.as_deref(),
        branch: crate::naming::branch(&inp.spec.tenant, &inp.run_id),
    }
}
