//! The backend-neutral plan of one run: which networks, which pod, which containers with which
//! hardening, mounts, environment and secrets. `quadlet` and `plain` only translate it.
//! Pure.
//!
//! By part: [`topology`] (networks, containers, volumes, the proxy and the gate), [`services`],
//! [`agent`] (what the agent sees and is told), [`supervision`] (units and their order),
//! [`budgets`] (pull policy, start and stop budgets) and [`host_tiers`] (the tiers without a
//! container). The parts depend on one another one way only: `budgets` ← `topology` ←
//! `services` ← `agent`; `supervision` uses `topology` and `services`; `host_tiers` uses
//! `agent` and `supervision`.

pub mod agent;
pub mod budgets;
pub mod fresh;
pub mod host_tiers;
pub mod services;
pub mod supervision;
pub mod topology;

use serde::Serialize;

pub use agent::{
    AGENT_WAIT_S, CLAIM_FILE, CONTEXT_FILE, CONTEXT_PATH, CTL_DIR, CTL_PATH, CYCLIX_BIN_PATH,
    GO_FILE, HANDOVER_FILE, PROBE_CONTEXT_FILE, REFUSED_FILE, REPORT_DIR_PATH, REPORT_FILE,
    TASK_FILE, TASK_PATH, context_json, report_fifo,
};
pub use budgets::{
    START_TIMEOUT_LOCAL_S, START_TIMEOUT_PULL_S, STOP_TIMEOUT_S, UNIT_STOP_TIMEOUT_S,
};
pub use host_tiers::{HOST_ENV_FILE, HostServicePlan};
pub use services::{PICKED_PORTS, SERVICE_HOST, ServicePlan, database_name, preview_ports};
pub use supervision::UnitNames;
pub use topology::{
    AGENT_OUTPUT_FILE, Attach, Bind, CREDENTIALS_SECRET_VAR, ContainerPlan, GATE_BASE_OUTPUT_FILE,
    GATE_OUTPUT_FILE, Net, NetworkPlan, PROXY_CONF_FILE, PROXY_CONF_PATH, PROXY_CREDENTIALS_FILE,
    PROXY_PORT, RAW_LOG_MAX, RESULTS_DIR_PATH, RESULTS_ENV, RESULTS_FILE, VolumeMount, VolumePlan,
    WORKDIR, gate_tree,
};

use super::{RenderError, RunContext};
use crate::naming::{self, RunNames};
use crate::spec::{Image, Spec};
use crate::tier::Tier;

/// Everything both backends need.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunPlan {
    /// Tenant name.
    pub tenant: String,
    /// Run id.
    pub run_id: String,
    /// The tier the units provide.
    pub tier: Tier,
    /// The run's internal subnet (`10.213.N.0/24`).
    pub subnet: String,
    /// The proxy's address on it (`10.213.N.2`).
    pub proxy_ip: String,
    /// The pod's address on it (`10.213.N.3`): fixed, because the proxy and the agent start
    /// as parallel jobs and the pod would otherwise take whichever address is free first,
    /// possibly the proxy's (`IPAM error: requested ip address ... is already allocated`,
    /// seen on podman 5.4 with bench/run).
    pub pod_ip: String,
    /// Networks (internal first, egress second) — empty for non-container tiers.
    pub networks: Vec<NetworkPlan>,
    /// The pod's stem (`cyclix-R`) — `None` for non-container tiers.
    pub pod: Option<String>,
    /// Containers in start order: proxy, services, agent, gate.
    pub containers: Vec<ContainerPlan>,
    /// Per-run volumes (services' `data`).
    pub volumes: Vec<VolumePlan>,
    /// Host units for non-container tiers: agent, gate.
    pub host_services: Vec<HostServicePlan>,
    /// Loud notices.
    pub warnings: Vec<String>,
    /// Unit names by role.
    pub units: UnitNames,
    /// The credential placeholders the agent holds (one per `agent.credentials` entry; not
    /// secret: the proxy refuses them anywhere but the credential's own port).
    pub placeholders: Vec<String>,
    /// The proxy access log's key ([`RunContext::log_key`]).
    pub log_key: String,
    /// The pod's user namespace (`UserNS=`, `--userns=`): `keep-id:uid=U,gid=U` when the agent
    /// runs as uid U (`agent.run_as`, a preset), so the host user, who owns the work tree,
    /// is U inside; `None`: podman's default (the host user is root inside).
    pub pod_userns: Option<String>,
}

fn err(key: &str, message: impl Into<String>) -> RenderError {
    RenderError {
        key: key.to_string(),
        message: message.into(),
    }
}

/// A host path that goes into `Mount=type=bind,source=…`: absolute, and free of the
/// characters that would inject mount options (security-cases §4 "podman -v option injection").
fn mount_path(key: &str, p: &str) -> Result<(), RenderError> {
    if !p.starts_with('/') {
        return Err(err(key, format!("`{p}` is not an absolute path")));
    }
    if let Some(c) = p
        .chars()
        .find(|c| matches!(c, ':' | ',' | '=') || c.is_control())
    {
        return Err(err(
            key,
            format!(
                "`{}` contains {c:?}, which would inject mount options; use a path without `:`, `,`, `=` or control characters",
                p.escape_debug()
            ),
        ));
    }
    if p.split('/').any(|c| c == ".." || c == ".") {
        return Err(err(
            key,
            format!("`{p}` is not normalised (`.` or `..` component)"),
        ));
    }
    Ok(())
}

fn labels(spec: &Spec, run: &RunContext, role: &str) -> Vec<(String, String)> {
    naming::run_labels(&spec.tenant, &run.run_id, role)
}

fn tmpfs_tmp() -> String {
    "/tmp:rw,nosuid,nodev,mode=1777,size=1g".to_string()
}

/// Secret names are per run: `cyclix-<run>-<VAR>` (removed at teardown); a thin forwarder
/// to [`RunNames::secret`] for callers outside render.
#[must_use]
pub fn secret_name(run_id: &str, var: &str) -> String {
    RunNames::new(run_id).secret(var)
}

fn check_service_ports(spec: &Spec, run: &RunContext) -> Result<(), RenderError> {
    if run.service_ports.len() == spec.services.len() {
        return Ok(());
    }
    Err(err(
        "run.service_ports",
        format!(
            "{} port(s) for {} service(s)",
            run.service_ports.len(),
            spec.services.len()
        ),
    ))
}

/// The run's credential placeholders ([`RunContext::placeholders`]): one per
/// `agent.credentials` entry, each of the `credentials::placeholder` shape.
fn placeholders<'a>(spec: &Spec, run: &'a RunContext) -> Result<&'a [String], RenderError> {
    let n = spec.agent.credentials.len();
    if run.placeholders.len() != n {
        return Err(err(
            "run.placeholders",
            format!(
                "{} placeholder(s) for {n} credential(s)",
                run.placeholders.len()
            ),
        ));
    }
    for (c, p) in spec.agent.credentials.iter().zip(&run.placeholders) {
        let hex = p
            .strip_prefix(&c.placeholder_prefix)
            .and_then(|rest| rest.strip_prefix("cyclix-placeholder-"));
        if !hex.is_some_and(|h| {
            h.len() == 32
                && h.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        }) {
            return Err(err(
                "run.placeholders",
                format!(
                    "the placeholder for `{}` is not of the form PREFIX + cyclix-placeholder- + 32 hex",
                    c.env
                ),
            ));
        }
    }
    Ok(&run.placeholders)
}

/// Placeholders for a plan that is only shown (`cyclix render`, goldens): `0` × 32 as the
/// hex part. A run uses random ones (`app::tenant::run_inputs`).
#[must_use]
pub fn preview_placeholders(spec: &Spec) -> Vec<String> {
    spec.agent
        .credentials
        .iter()
        .map(|c| {
            crate::render::proxy::credentials::placeholder(&c.placeholder_prefix, &"0".repeat(32))
        })
        .collect()
}

/// The access-log key of a plan that is only shown (`cyclix render`, goldens): `0` × 32. A run
/// uses a random one (`app::tenant::run_inputs`).
pub const PREVIEW_LOG_KEY: &str = "00000000000000000000000000000000";

/// A log key is 32 lowercase hex digits: nothing else reaches squid.conf's `logformat` line.
fn check_log_key(key: &str) -> Result<(), RenderError> {
    if key.len() == 32
        && key
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        Ok(())
    } else {
        Err(err("run.log_key", "must be 32 lowercase hex digits"))
    }
}

fn check_run_id(id: &str) -> Result<(), RenderError> {
    crate::spec::validate::run_id(id).map_err(|m| err("run.run_id", m))
}

/// Builds the plan.
///
/// # Errors
/// [`RenderError`] for an invalid run id, an unusable context path or subnet octet.
pub fn plan(spec: &Spec, run: &RunContext) -> Result<RunPlan, RenderError> {
    check_run_id(&run.run_id)?;
    check_log_key(&run.log_key)?;
    mount_path("run.worktree", &run.worktree)?;
    mount_path("run.run_dir", &run.run_dir)?;
    mount_path("run.cyclix_bin", &run.cyclix_bin)?;
    if !(1..=254).contains(&run.subnet_octet) {
        return Err(err("run.subnet_octet", "must be 1–254"));
    }

    let r = &run.run_id;
    let names = RunNames::new(r);
    let task_env = vec![
        ("CYCLIX_TASK".to_string(), TASK_PATH.to_string()),
        ("CYCLIX_TENANT".to_string(), spec.tenant.clone()),
        ("CYCLIX_RUN".to_string(), r.clone()),
    ];
    let mut plan = RunPlan {
        tenant: spec.tenant.clone(),
        run_id: r.clone(),
        // The tier the units provide is the configured one raised by the legacy worktree flag
        // (`tier::floor`), exactly as `cyclix run` grants it.
        tier: crate::tier::floor(spec.tier, spec.legacy_worktree_isolation),
        subnet: format!("10.213.{}.0/24", run.subnet_octet),
        proxy_ip: format!("10.213.{}.2", run.subnet_octet),
        pod_ip: format!("10.213.{}.3", run.subnet_octet),
        networks: Vec::new(),
        pod: None,
        containers: Vec::new(),
        volumes: Vec::new(),
        host_services: Vec::new(),
        warnings: warnings(spec),
        units: UnitNames::default(),
        placeholders: Vec::new(),
        log_key: run.log_key.clone(),
        pod_userns: spec
            .agent
            .run_as
            .map(|u| format!("keep-id:uid={u},gid={u}")),
    };
    if !plan.tier.is_sandboxed() {
        host_tiers::fill(&mut plan, spec, run, &task_env);
        return Ok(plan);
    }

    check_service_ports(spec, run)?;
    if plan.tier == Tier::Gvisor && run.gvisor.is_none() {
        return Err(RenderError {
            key: "run.gvisor".into(),
            message:
                "tier `gvisor` renders the agent and the gate on gVisor's runsc, and no runsc \
                      was given (`host::facts::gvisor::look`); nothing falls back to the default runtime"
                    .into(),
        });
    }
    let networks = topology::networks(&names, &plan.subnet, run.subnet_octet);
    let services = services::service_plans(spec, run);
    let placeholders = placeholders(spec, run)?;
    let credentials: Vec<(&crate::spec::Credential, &str)> = spec
        .agent
        .credentials
        .iter()
        .zip(placeholders.iter().map(String::as_str))
        .collect();
    let mut agent_env = agent::agent_env(&plan.proxy_ip, task_env, &services, &credentials);
    agent_env.extend(spec.agent.fixed_env.iter().cloned());
    plan.placeholders = placeholders.to_vec();
    let agent_binds = agent::agent_binds(spec, run)?;
    let mut containers = vec![topology::proxy_container(spec, run, &plan.proxy_ip)];
    let (service_containers, volumes) = services::service_containers(spec, run, &services);
    containers.extend(service_containers);
    containers.push(agent::agent_container(spec, run, agent_binds, agent_env));
    containers.push(topology::gate_container(spec, run));
    containers.extend(topology::gate_base_container(spec, run));
    plan.units = supervision::container_units(&names, spec, &volumes, &networks, services);
    plan.networks = networks;
    plan.pod = Some(names.base());
    plan.containers = containers;
    plan.volumes = volumes;
    Ok(plan)
}

fn warnings(spec: &Spec) -> Vec<String> {
    let mut warnings = Vec::new();
    for (key, image) in std::iter::once(("agent.image", &spec.agent.image))
        .chain(std::iter::once(("gate.image", &spec.gate.image)))
        .chain(spec.services.iter().map(|s| ("services[].image", &s.image)))
    {
        let preset_image =
            spec.agent.preset.as_ref().filter(|p| {
                key == "agent.image" && !p.overridden.iter().any(|o| o == "agent.image")
            });
        if let (Some(p), Image::UnpinnedLocal { reference }) = (preset_image, image) {
            warnings.push(format!(
                "{key}: `{reference}` is preset {}'s local build of {} (`cyclix images build --preset {}`): the package is pinned by hash, the image only by its local tag",
                p.name, p.package, p.name
            ));
        } else if let Image::Build { reference, build } = image {
            warnings.push(format!(
                "{key}: `{reference}` is built from {} (context `{}`) at the base commit; its tag is the digest of its inputs",
                build.containerfile, build.context
            ));
        } else if let Image::UnpinnedLocal { reference } = image {
            warnings.push(format!(
                "{key}: `{reference}` is NOT pinned by digest (unpinned_local_image: true); its content can change between runs"
            ));
        }
    }
    if spec.egress.report_only {
        warnings.push(
            "egress.report_only: true — the proxy LOGS requests it would deny but lets them through (private and metadata ranges stay denied)".into(),
        );
    }

    if let Some(rc) = &spec.agent.runtime_class {
        warnings.push(format!(
            "{RUNTIME_CLASS_NOTICE} `{rc}` is used only by `cyclix export kube` (the agent Pod's runtimeClassName); the Podman backends ignore it and run the agent under podman's own OCI runtime"
        ));
    }
    warnings.extend(crate::spec::env_key_warnings(spec));
    warnings
}

/// How the plan's notice about `agent.runtime_class` begins: the Podman backends print it,
/// `cyclix export kube` (which honours the key) leaves it out.
pub const RUNTIME_CLASS_NOTICE: &str = "agent.runtime_class:";

#[cfg(test)]
mod tests;
