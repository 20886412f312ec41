//! The host tiers (`direct`, `worktree`): the agent and the gate as plain host commands,
//! with the run's paths on the host and NO isolation. Pure.

use serde::Serialize;

use super::agent::{CONTEXT_FILE, TASK_FILE};
use super::supervision::host_units;
use super::{RunContext, RunPlan};
use crate::naming::RunNames;
use crate::spec::Spec;
use crate::tier::Tier;

/// A unit that runs a command directly on the host (tiers `direct` and `worktree`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostServicePlan {
    /// Unit stem (`cyclix-R-agent`).
    pub stem: String,
    /// `Description=`.
    pub description: String,
    /// `WorkingDirectory=`.
    pub workdir: String,
    /// argv.
    pub exec: Vec<String>,
    /// Spec key of `exec`.
    pub exec_key: String,
    /// `Environment=` entries.
    pub env: Vec<(String, String)>,
    /// `EnvironmentFile=-PATH`: the spec's env values, written by cyclix (mode 0600) in the run
    /// directory, so no value is in the unit file.
    pub env_file: Option<String>,
    /// `RuntimeMaxSec=` in seconds.
    pub runtime_max_s: u64,
    /// `MemoryMax=` in bytes (the agent's `agent.resources.memory`).
    pub memory_bytes: Option<u64>,
    /// `CPUQuota=` in thousandths of a CPU (`agent.resources.cpus`).
    pub cpu_millis: Option<u32>,
    /// `TasksMax=` (`agent.resources.pids`).
    pub pids: Option<u32>,
    /// `StandardOutput=append:PATH` and `StandardError=` the same (systemd.exec(5)): the
    /// command's output goes to this file, which cyclix reads, redacts and passes on
    /// (`run::output`), never straight to the journal.
    pub log_file: String,
}

/// The host tiers' env file in the run directory (`agent.env`, mode 0600).
pub const HOST_ENV_FILE: &str = "agent.env";

/// Fills `plan` (tier, addresses and warnings set, no topology) with the host tier's agent
/// and gate units.
pub(super) fn fill(
    plan: &mut RunPlan,
    spec: &Spec,
    run: &RunContext,
    task_env: &[(String, String)],
) {
    let (r, tier) = (&run.run_id, plan.tier);
    let names = RunNames::new(r);
    plan.warnings
        .push(format!("tier `{}`: {}", tier, tier.facts().summary));
    let workdir = match tier {
        Tier::Direct => spec.repo.path.clone(),
        _ => run.worktree.clone(),
    };
    let mut env = task_env.to_vec();
    if let Some(e) = env.first_mut() {
        e.1 = format!("{}/{TASK_FILE}", run.run_dir);
    }
    env.push((
        "CYCLIX_CONTEXT".into(),
        format!("{}/{CONTEXT_FILE}", run.run_dir),
    ));
    plan.host_services = vec![
        HostServicePlan {
            stem: names.agent(),
            description: format!(
                "cyclix run {r} (tenant {}): agent, NO isolation (tier {})",
                spec.tenant, tier
            ),
            workdir: workdir.clone(),
            exec: spec.agent.command.clone(),
            exec_key: "agent.command".into(),
            env: env.clone(),
            env_file: Some(format!("{}/{HOST_ENV_FILE}", run.run_dir)),
            runtime_max_s: spec.agent.timeout_s,
            memory_bytes: spec.agent.resources.memory_bytes,
            cpu_millis: spec.agent.resources.cpu_millis,
            pids: spec.agent.resources.pids,
            log_file: format!("{}/{}", run.run_dir, super::topology::AGENT_OUTPUT_FILE),
        },
        HostServicePlan {
            stem: names.gate(),
            description: format!(
                "cyclix run {r} (tenant {}): gate, NO isolation (tier {})",
                spec.tenant, tier
            ),
            workdir,
            exec: spec.gate.command.clone(),
            exec_key: "gate.command".into(),
            env,
            env_file: None,
            runtime_max_s: spec.gate.timeout_s,
            memory_bytes: None,
            cpu_millis: None,
            pids: None,
            log_file: format!("{}/{}", run.run_dir, super::topology::GATE_OUTPUT_FILE),
        },
    ];
    plan.units = host_units(&names);
}
