//! The backend-neutral plan of one run: which networks, which pod, which containers with which
//! hardening, mounts, environment and secrets. `quadlet` and `plain` only translate it.
//! Pure.

use serde::Serialize;

use super::{RenderError, RunContext};
use crate::naming::{self, RunNames};
use crate::spec::{Image, Spec};
use crate::tier::Tier;

/// Port the egress proxy listens on inside the run's internal network.
pub const PROXY_PORT: u16 = 3128;
/// The proxy configuration's file name in the run directory.
pub const PROXY_CONF_FILE: &str = "squid.conf";
/// The task's file name in the run directory.
pub const TASK_FILE: &str = "task.md";
/// The agent's context file's name in the run directory (JSON, see [`context_json`]).
pub const CONTEXT_FILE: &str = "context.json";
/// Where the context file appears in the agent container (read-only); also in
/// `$CYCLIX_CONTEXT`.
pub const CONTEXT_PATH: &str = "/cyclix/context.json";
/// The address services listen on inside the pod (the pod's loopback, shared by its
/// containers): the agent reaches a service at `127.0.0.1:PORT`.
pub const SERVICE_HOST: &str = "127.0.0.1";
/// The ports cyclix picks from for a service without a fixed `port` (inclusive), below the
/// kernel's ephemeral range (32768–60999) so no outgoing connection in the pod can hold one.
pub const PICKED_PORTS: (u16, u16) = (20_000, 29_999);
/// Where the task appears in the agent container (read-only); also in `$CYCLIX_TASK`.
pub const TASK_PATH: &str = "/cyclix/task.md";
/// Where the host's cyclix binary appears in the agent container (read-only): it runs the
/// boundary probes (`cyclix probe`) and holds the agent back until they pass
/// (`cyclix agent-wait`).
pub const CYCLIX_BIN_PATH: &str = "/cyclix/bin/cyclix";
/// The control directory's name in the run directory; mounted read-only at [`CTL_PATH`].
pub const CTL_DIR: &str = "ctl";
/// Where the control directory appears in the agent container.
pub const CTL_PATH: &str = "/cyclix/ctl";
/// The file cyclix creates in the control directory once every probe passed.
pub const GO_FILE: &str = "go";
/// The file cyclix creates in the control directory when the boundary was refused.
pub const REFUSED_FILE: &str = "refused";
/// The probe context's file name in the control directory.
pub const PROBE_CONTEXT_FILE: &str = "probe.json";
/// How long the agent container waits for the go file before it gives up, in seconds.
pub const AGENT_WAIT_S: u64 = 300;
/// Where the project worktree appears in the agent and gate containers.
pub const WORKDIR: &str = "/work";
/// Where the proxy image reads its configuration (read-only bind mount).
pub const PROXY_CONF_PATH: &str = "/etc/cyclix/squid.conf";
/// Seconds podman waits after SIGTERM before SIGKILL (`StopTimeout=`, `podman stop --time`).
pub const STOP_TIMEOUT_S: u64 = 10;
/// systemd's stop budget, strictly above [`STOP_TIMEOUT_S`] (field report B06).
pub const UNIT_STOP_TIMEOUT_S: u64 = 30;
/// Start budget when the image must already be local (`Pull=never`).
pub const START_TIMEOUT_LOCAL_S: u64 = 60;
/// Start budget when a pinned image may have to be pulled first (`Pull=missing`, B06).
pub const START_TIMEOUT_PULL_S: u64 = 600;

/// The units a run creates, by role. Names are systemd unit names (`*.service`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct UnitNames {
    /// Infrastructure started before the agent, in order (proxy pulls in both networks; the
    /// pod and services come up with the agent). Empty for non-container tiers.
    pub infra: Vec<String>,
    /// The agent's unit.
    pub agent: String,
    /// The gate's unit.
    pub gate: String,
    /// Every unit of the run, in stop order (agent and gate first, networks last), including
    /// the generated `-network`/`-pod`/`-volume` oneshots that must be stopped too (testbed
    /// NOTES).
    pub all: Vec<String>,
    /// The run's services, in spec order (empty for non-container tiers).
    pub services: Vec<ServicePlan>,
}

/// One service of the run as the orchestrator, the record and the agent see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServicePlan {
    /// The spec's name (`db`).
    pub name: String,
    /// Its spec key (`services[0]`), for error messages.
    pub key: String,
    /// Its unit (`cyclix-R-svc-db.service`).
    pub unit: String,
    /// Where the agent reaches it: `127.0.0.1`.
    pub host: String,
    /// The port it listens on in the pod.
    pub port: u16,
    /// The run's database name for it ([`database_name`]).
    pub database: String,
    /// The podman volume holding its data, when the spec gives `data`.
    pub volume: Option<String>,
    /// The health check's argv, when the spec gives one.
    pub health: Option<Vec<String>>,
    /// The unit's start budget in seconds (`TimeoutStartSec=`): the image's start budget plus
    /// the health check's ([`crate::spec::Health::budget_s`]).
    pub start_timeout_s: u64,
    /// The agent's environment variable holding `HOST:PORT` (`CYCLIX_SERVICE_DB`).
    pub env_var: String,
}

/// A per-run podman volume (a service's `data`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VolumePlan {
    /// Quadlet file stem (`cyclix-R-svc-db-data` → `.volume`, unit
    /// `cyclix-R-svc-db-data-volume.service`); also the podman volume name (`VolumeName=`).
    pub stem: String,
}

/// A volume mounted into a container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VolumeMount {
    /// Index into [`RunPlan::volumes`].
    pub volume: usize,
    /// Container path.
    pub target: String,
}

impl VolumeMount {
    /// The options every per-run volume is mounted with: no setuid files, no device nodes.
    pub const OPTIONS: &'static str = "nosuid,nodev";
}

/// A podman network of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetworkPlan {
    /// Quadlet file stem (`cyclix-R` → `cyclix-R.network`, unit `cyclix-R-network.service`).
    pub stem: String,
    /// The podman network name (`NetworkName=`).
    pub name: String,
    /// No route out (`Internal=true`, `--internal`).
    pub internal: bool,
    /// Fixed subnet, if any (`Subnet=`).
    pub subnet: Option<String>,
    /// The range podman hands out dynamic addresses from (`IPRange=`, `--ip-range`): the
    /// upper half of the internal subnet, so nothing that joins it without a fixed address
    /// can take the proxy's `.2` or the pod's `.3` (the proxy and the agent start as parallel
    /// jobs; seen as `IPAM error: requested ip address ... is already allocated`).
    pub ip_range: Option<String>,
}

/// A network attachment of a container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attach {
    /// Index into [`RunPlan::networks`].
    pub network: usize,
    /// Fixed address on that network.
    pub ip: Option<String>,
}

/// How a container is networked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Net {
    /// Joins the run's pod (and so the pod's internal network).
    Pod,
    /// Attached to these networks.
    Networks(Vec<Attach>),
    /// `Network=none`: only loopback.
    None,
}

/// A bind mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bind {
    /// Host path.
    pub source: String,
    /// Container path.
    pub target: String,
    /// Read-only.
    pub read_only: bool,
}

impl Bind {
    /// The `--mount`/`Mount=` value: a bind mount, read-only when asked, always `nosuid` and
    /// `nodev`, so a setuid file or a device node planted in the project is inert on the host
    /// too (probe P16).
    #[must_use]
    pub fn mount_spec(&self) -> String {
        let ro = if self.read_only { ",readonly=true" } else { "" };
        format!(
            "type=bind,source={},destination={}{ro},nosuid,nodev",
            self.source, self.target
        )
    }
}

/// One container of the run with its stated hardening.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerPlan {
    /// Quadlet file stem and container name (`cyclix-R-agent`); the unit is `STEM.service`.
    pub stem: String,
    /// `Description=` of the unit.
    pub description: String,
    /// Image reference.
    pub image: String,
    /// `Pull=never` for local images, `Pull=missing` for pinned ones.
    pub pull_never: bool,
    /// Networking.
    pub net: Net,
    /// Bind mounts (sources validated).
    pub binds: Vec<Bind>,
    /// tmpfs mounts as `PATH:OPTIONS`.
    pub tmpfs: Vec<String>,
    /// Environment (names and values are cyclix's own, never tenant secrets).
    pub env: Vec<(String, String)>,
    /// Per-run podman secrets handed over as environment variables: (secret name, variable).
    pub secrets: Vec<(String, String)>,
    /// argv (empty: the image's default command) and the spec key it came from.
    pub exec: Vec<String>,
    /// The spec key of `exec` for error messages.
    pub exec_key: String,
    /// How many leading words of `exec` are cyclix's own (the agent's `agent-wait` wrapper);
    /// error messages index the spec's argv after them.
    pub exec_key_offset: usize,
    /// Working directory.
    pub workdir: Option<String>,
    /// Labels (`io.cyclix.tenant`, `io.cyclix.run`, `io.cyclix.role`).
    pub labels: Vec<(String, String)>,
    /// Memory limit in bytes.
    pub memory_bytes: Option<u64>,
    /// CPU limit in thousandths of a CPU.
    pub cpu_millis: Option<u32>,
    /// Process limit.
    pub pids: Option<u32>,
    /// systemd stops the unit after this many seconds of running (`RuntimeMaxSec=`).
    pub runtime_max_s: Option<u64>,
    /// `TimeoutStartSec=` in seconds.
    pub start_timeout_s: u64,
    /// The stop signal, when not podman's default `SIGTERM` (`StopSignal=`, `--stop-signal`).
    pub stop_signal: Option<&'static str>,
    /// Per-run volumes mounted read-write (a service's `data`).
    pub volumes: Vec<VolumeMount>,
    /// The readiness check: the unit's start job completes only once it passes.
    pub health: Option<crate::spec::Health>,
}

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
}

/// The host tiers' env file in the run directory (`agent.env`, mode 0600).
pub const HOST_ENV_FILE: &str = "agent.env";

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

fn is_local(image: &Image) -> bool {
    matches!(image, Image::UnpinnedLocal { .. })
}

fn start_timeout(image: &Image) -> u64 {
    if is_local(image) {
        START_TIMEOUT_LOCAL_S
    } else {
        START_TIMEOUT_PULL_S
    }
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

fn check_run_id(id: &str) -> Result<(), RenderError> {
    crate::spec::validate::run_id(id).map_err(|m| err("run.run_id", m))
}

/// Builds the plan.
///
/// # Errors
/// [`RenderError`] for an invalid run id, an unusable context path or subnet octet.
pub fn plan(spec: &Spec, run: &RunContext) -> Result<RunPlan, RenderError> {
    check_run_id(&run.run_id)?;
    mount_path("run.worktree", &run.worktree)?;
    mount_path("run.run_dir", &run.run_dir)?;
    mount_path("run.cyclix_bin", &run.cyclix_bin)?;
    if !(1..=254).contains(&run.subnet_octet) {
        return Err(err("run.subnet_octet", "must be 1–254"));
    }

    let r = &run.run_id;
    let names = RunNames::new(r);
    let base = names.base();
    let subnet = format!("10.213.{}.0/24", run.subnet_octet);
    let proxy_ip = format!("10.213.{}.2", run.subnet_octet);
    let pod_ip = format!("10.213.{}.3", run.subnet_octet);
    let warnings = warnings(spec);
    let task_env = vec![
        ("CYCLIX_TASK".to_string(), TASK_PATH.to_string()),
        ("CYCLIX_TENANT".to_string(), spec.tenant.clone()),
        ("CYCLIX_RUN".to_string(), r.clone()),
    ];

    // The tier the units provide is the configured one raised by the legacy worktree flag
    // (`tier::floor`), exactly as `cyclix run` grants it.
    let tier = crate::tier::floor(spec.tier, spec.legacy_worktree_isolation);
    if tier != Tier::Container {
        return Ok(host_plan(
            spec, tier, run, warnings, subnet, proxy_ip, &task_env,
        ));
    }

    check_service_ports(spec, run)?;
    let networks = vec![
        NetworkPlan {
            stem: base.clone(),
            name: base.clone(),
            internal: true,
            subnet: Some(subnet.clone()),
            ip_range: Some(format!("10.213.{}.128/25", run.subnet_octet)),
        },
        NetworkPlan {
            stem: names.egress(),
            name: names.egress(),
            internal: false,
            subnet: None,
            ip_range: None,
        },
    ];
    let services = service_plans(spec, run);
    let agent_env = agent_env(&proxy_ip, task_env, &services);
    let agent_binds = agent_binds(spec, run)?;
    let mut containers = vec![proxy_container(spec, run, &proxy_ip)];
    let (service_containers, volumes) = service_containers(spec, run, &services);
    containers.extend(service_containers);
    containers.push(agent_container(spec, run, agent_binds, agent_env));
    containers.push(gate_container(spec, run));

    let svc = naming::container_unit;
    let service_units = spec.services.iter().map(|s| svc(&names.service(&s.name)));
    let mut infra = vec![svc(&names.proxy())];
    infra.extend(service_units.clone());
    let mut all = vec![svc(&names.agent()), svc(&names.gate())];
    all.extend(service_units);
    all.push(svc(&names.proxy()));
    all.push(naming::pod_unit(&base));
    all.extend(volumes.iter().map(|v| naming::volume_unit(&v.stem)));
    all.extend(networks.iter().map(|n| naming::network_unit(&n.stem)));
    Ok(RunPlan {
        tenant: spec.tenant.clone(),
        run_id: r.clone(),
        tier: Tier::Container,
        subnet,
        proxy_ip,
        pod_ip,
        networks,
        pod: Some(base.clone()),
        containers,
        volumes,
        host_services: Vec::new(),
        warnings,
        units: UnitNames {
            infra,
            agent: svc(&names.agent()),
            gate: svc(&names.gate()),
            all,
            services,
        },
    })
}

/// The run's database name ([`naming::database`]).
pub use crate::naming::database as database_name;

/// The ports `cyclix render` shows for `spec`'s services (nothing is reserved): each
/// service's fixed `port`, else the next free one from [`PICKED_PORTS`] in spec order.
#[must_use]
pub fn preview_ports(spec: &Spec) -> Vec<u16> {
    let fixed: Vec<u16> = spec.services.iter().filter_map(|s| s.port).collect();
    let mut next = PICKED_PORTS.0;
    spec.services
        .iter()
        .map(|s| {
            s.port.unwrap_or_else(|| {
                while fixed.contains(&next) {
                    next += 1;
                }
                next += 1;
                next - 1
            })
        })
        .collect()
}

/// The services' containers and the per-run volumes they mount.
fn service_containers(
    spec: &Spec,
    run: &RunContext,
    services: &[ServicePlan],
) -> (Vec<ContainerPlan>, Vec<VolumePlan>) {
    let mut containers = Vec::new();
    let mut volumes = Vec::new();
    for (i, (s, p)) in spec.services.iter().zip(services).enumerate() {
        let mut c = service_container(spec, run, i, s, p);
        if let (Some(target), Some(stem)) = (&s.data, &p.volume) {
            c.volumes.push(VolumeMount {
                volume: volumes.len(),
                target: target.clone(),
            });
            volumes.push(VolumePlan { stem: stem.clone() });
        }
        containers.push(c);
    }
    (containers, volumes)
}

fn service_plans(spec: &Spec, run: &RunContext) -> Vec<ServicePlan> {
    let database = database_name(&spec.tenant, &run.run_id);
    spec.services
        .iter()
        .zip(&run.service_ports)
        .enumerate()
        .map(|(i, (s, port))| {
            let stem = RunNames::new(&run.run_id).service(&s.name);
            ServicePlan {
                name: s.name.clone(),
                key: format!("services[{i}]"),
                unit: naming::container_unit(&stem),
                host: SERVICE_HOST.into(),
                port: *port,
                database: database.clone(),
                volume: s.data.as_ref().map(|_| naming::data_volume(&stem)),
                health: s.health.as_ref().map(|h| h.command.clone()),
                start_timeout_s: start_timeout(&s.image)
                    + s.health.as_ref().map_or(0, crate::spec::Health::budget_s),
                env_var: format!(
                    "CYCLIX_SERVICE_{}",
                    s.name.to_ascii_uppercase().replace('-', "_")
                ),
            }
        })
        .collect()
}

/// The agent's context file (`/cyclix/context.json`, `$CYCLIX_CONTEXT`): what the run gives
/// the agent, as JSON (schema `cyclix-context/1`):
///
/// ```text
/// {"schema": "cyclix-context/1", "tenant": T, "run": R, "task": PATH, "workdir": PATH,
///  "proxy": URL or null, "services": [{"name", "host", "port", "address": "HOST:PORT",
///  "database", "env"}]}
/// ```
///
/// Fields only ever get added.
#[must_use]
pub fn context_json(plan: &RunPlan) -> String {
    let container = plan.tier == Tier::Container;
    let services: Vec<serde_json::Value> = plan
        .units
        .services
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.name,
                "host": s.host,
                "port": s.port,
                "address": format!("{}:{}", s.host, s.port),
                "database": s.database,
                "env": s.env_var,
            })
        })
        .collect();
    // The host tiers' agent runs on the host: the paths are the host's.
    let host = plan.host_services.first();
    let task = host
        .and_then(|h| h.env.iter().find(|(k, _)| k == "CYCLIX_TASK"))
        .map_or(TASK_PATH, |(_, v)| v.as_str());
    let workdir = host.map_or(WORKDIR, |h| h.workdir.as_str());
    let v = serde_json::json!({
        "schema": "cyclix-context/1",
        "tenant": plan.tenant,
        "run": plan.run_id,
        "task": task,
        "workdir": workdir,
        "proxy": container.then(|| format!("http://{}:{PROXY_PORT}", plan.proxy_ip)),
        "services": services,
    });
    let mut text = serde_json::to_string_pretty(&v).unwrap_or_default();
    text.push('\n');
    text
}

fn host_plan(
    spec: &Spec,
    tier: Tier,
    run: &RunContext,
    mut warnings: Vec<String>,
    subnet: String,
    proxy_ip: String,
    task_env: &[(String, String)],
) -> RunPlan {
    let r = &run.run_id;
    let pod_ip = format!("10.213.{}.3", run.subnet_octet);
    let names = RunNames::new(r);
    let (agent_stem, gate_stem) = (names.agent(), names.gate());
    warnings.push(format!("tier `{}`: {}", tier, tier.facts().summary));
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
    let host_services = vec![
        HostServicePlan {
            stem: agent_stem.clone(),
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
        },
        HostServicePlan {
            stem: gate_stem.clone(),
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
        },
    ];
    let units = UnitNames {
        infra: Vec::new(),
        agent: naming::container_unit(&agent_stem),
        gate: naming::container_unit(&gate_stem),
        all: vec![
            naming::container_unit(&agent_stem),
            naming::container_unit(&gate_stem),
        ],
        services: Vec::new(),
    };
    RunPlan {
        tenant: spec.tenant.clone(),
        run_id: r.clone(),
        tier,
        subnet,
        proxy_ip,
        pod_ip,
        networks: Vec::new(),
        pod: None,
        containers: Vec::new(),
        volumes: Vec::new(),
        host_services,
        warnings,
        units,
    }
}

fn proxy_container(spec: &Spec, run: &RunContext, proxy_ip: &str) -> ContainerPlan {
    let r = &run.run_id;
    let proxy_ip = proxy_ip.to_string();
    ContainerPlan {
        stem: RunNames::new(r).proxy(),
        description: format!("cyclix run {r} (tenant {}): egress proxy", spec.tenant),
        image: run.proxy_image.clone(),
        pull_never: true,
        net: Net::Networks(vec![
            Attach {
                network: 0,
                ip: Some(proxy_ip.clone()),
            },
            Attach {
                network: 1,
                ip: None,
            },
        ]),
        binds: vec![Bind {
            source: format!("{}/{PROXY_CONF_FILE}", run.run_dir),
            target: PROXY_CONF_PATH.into(),
            read_only: true,
        }],
        tmpfs: Vec::new(),
        env: Vec::new(),
        secrets: Vec::new(),
        exec: Vec::new(),
        exec_key: "proxy".into(),
        exec_key_offset: 0,
        workdir: None,
        labels: labels(spec, run, "proxy"),
        memory_bytes: None,
        cpu_millis: None,
        pids: None,
        runtime_max_s: None,
        start_timeout_s: START_TIMEOUT_LOCAL_S,
        // The proxy keeps no state (no cache; its log goes to the journal as it is written):
        // SIGKILL stops it at once instead of squid's graceful shutdown (2–3 s, proxy-facts.md).
        stop_signal: Some("SIGKILL"),
        volumes: Vec::new(),
        health: None,
    }
}

fn service_container(
    spec: &Spec,
    run: &RunContext,
    i: usize,
    s: &crate::spec::Service,
    p: &ServicePlan,
) -> ContainerPlan {
    let r = &run.run_id;
    ContainerPlan {
        stem: RunNames::new(r).service(&s.name),
        description: format!(
            "cyclix run {r} (tenant {}): service {}",
            spec.tenant, s.name
        ),
        image: s.image.reference().to_string(),
        pull_never: is_local(&s.image),
        net: Net::Pod,
        binds: Vec::new(),
        tmpfs: vec![tmpfs_tmp()],
        env: service_env(s, p),
        secrets: s
            .env
            .iter()
            .map(|v| (RunNames::new(r).secret(v), v.clone()))
            .collect(),
        exec: s.command.clone(),
        exec_key: format!("services[{i}].command"),
        exec_key_offset: 0,
        workdir: None,
        labels: labels(spec, run, &format!("service-{}", s.name)),
        memory_bytes: None,
        cpu_millis: None,
        pids: None,
        runtime_max_s: None,
        start_timeout_s: p.start_timeout_s,
        stop_signal: None,
        volumes: Vec::new(),
        health: s.health.clone(),
    }
}

/// What a service is told about its run (documented in the README, "Services"): cyclix's own
/// names, and the `PostgreSQL` conventional ones so a stock `PostgreSQL` image and its tools
/// (`postgres`, `pg_isready`, `psql`) use the run's port, database and data directory.
fn service_env(s: &crate::spec::Service, p: &ServicePlan) -> Vec<(String, String)> {
    let mut env = vec![
        ("HOME".to_string(), "/tmp".to_string()),
        ("CYCLIX_SERVICE".into(), s.name.clone()),
        ("CYCLIX_HOST".into(), p.host.clone()),
        ("CYCLIX_PORT".into(), p.port.to_string()),
        ("CYCLIX_DATABASE".into(), p.database.clone()),
    ];
    if let Some(d) = &s.data {
        env.push(("CYCLIX_DATA".into(), d.clone()));
    }
    env.extend([
        ("PGHOST".to_string(), p.host.clone()),
        ("PGPORT".into(), p.port.to_string()),
        ("PGDATABASE".into(), p.database.clone()),
        ("POSTGRES_DB".into(), p.database.clone()),
    ]);
    if let Some(d) = &s.data {
        env.push(("PGDATA".into(), d.clone()));
    }
    env
}

fn agent_container(
    spec: &Spec,
    run: &RunContext,
    agent_binds: Vec<Bind>,
    agent_env: Vec<(String, String)>,
) -> ContainerPlan {
    let r = &run.run_id;
    ContainerPlan {
        stem: RunNames::new(r).agent(),
        description: format!("cyclix run {r} (tenant {}): agent", spec.tenant),
        image: spec.agent.image.reference().to_string(),
        pull_never: is_local(&spec.agent.image),
        net: Net::Pod,
        binds: agent_binds,
        tmpfs: vec![tmpfs_tmp()],
        env: agent_env,
        secrets: spec
            .agent
            .env
            .iter()
            .map(|v| (RunNames::new(r).secret(v), v.clone()))
            .collect(),
        exec: agent_exec(spec),
        exec_key: "agent.command".into(),
        exec_key_offset: AGENT_WRAPPER_WORDS,
        workdir: Some(WORKDIR.into()),
        labels: labels(spec, run, "agent"),
        memory_bytes: spec.agent.resources.memory_bytes,
        cpu_millis: spec.agent.resources.cpu_millis,
        pids: spec.agent.resources.pids,
        runtime_max_s: Some(spec.agent.timeout_s),
        start_timeout_s: start_timeout(&spec.agent.image),
        stop_signal: None,
        volumes: Vec::new(),
        health: None,
    }
}

fn gate_container(spec: &Spec, run: &RunContext) -> ContainerPlan {
    let r = &run.run_id;
    ContainerPlan {
        stem: RunNames::new(r).gate(),
        description: format!("cyclix run {r} (tenant {}): gate (no network)", spec.tenant),
        image: spec.gate.image.reference().to_string(),
        pull_never: is_local(&spec.gate.image),
        net: Net::None,
        binds: vec![Bind {
            source: gate_tree(&run.worktree),
            target: WORKDIR.into(),
            read_only: true,
        }],
        tmpfs: vec![tmpfs_tmp()],
        env: vec![
            ("HOME".into(), "/tmp".into()),
            ("CYCLIX_TENANT".into(), spec.tenant.clone()),
            ("CYCLIX_RUN".into(), r.clone()),
        ],
        secrets: Vec::new(),
        exec: spec.gate.command.clone(),
        exec_key: "gate.command".into(),
        exec_key_offset: 0,
        workdir: Some(WORKDIR.into()),
        labels: labels(spec, run, "gate"),
        memory_bytes: None,
        cpu_millis: None,
        pids: None,
        runtime_max_s: Some(spec.gate.timeout_s),
        start_timeout_s: start_timeout(&spec.gate.image),
        stop_signal: None,
        volumes: Vec::new(),
        health: None,
    }
}

/// The gate's tree beside the run's work tree (`WORKTREE.gate`): a clean checkout of the run
/// branch's tip, made by an export container after the agent ended (`run::import`), so the
/// gate judges exactly the commits that are imported and delivered — never uncommitted edits
/// or another branch the agent left checked out. It holds no `.git`.
#[must_use]
pub fn gate_tree(worktree: &str) -> String {
    crate::layout::gate_tree(std::path::Path::new(worktree))
        .to_string_lossy()
        .into_owned()
}

fn warnings(spec: &Spec) -> Vec<String> {
    let mut warnings = Vec::new();
    for (key, image) in std::iter::once(("agent.image", &spec.agent.image))
        .chain(std::iter::once(("gate.image", &spec.gate.image)))
        .chain(spec.services.iter().map(|s| ("services[].image", &s.image)))
    {
        if let Image::UnpinnedLocal { reference } = image {
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

    warnings
}

fn agent_env(
    proxy_ip: &str,
    task_env: Vec<(String, String)>,
    services: &[ServicePlan],
) -> Vec<(String, String)> {
    let proxy_url = format!("http://{proxy_ip}:{PROXY_PORT}");
    let mut agent_env: Vec<(String, String)> = Vec::new();
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        agent_env.push((k.into(), proxy_url.clone()));
    }
    for k in ["NO_PROXY", "no_proxy"] {
        agent_env.push((k.into(), "localhost,127.0.0.1,::1".into()));
    }
    agent_env.push(("HOME".into(), "/tmp".into()));
    agent_env.extend(task_env);
    agent_env.push(("CYCLIX_CONTEXT".into(), CONTEXT_PATH.into()));
    for s in services {
        agent_env.push((s.env_var.clone(), format!("{}:{}", s.host, s.port)));
        agent_env.push((format!("{}_PORT", s.env_var), s.port.to_string()));
        agent_env.push((format!("{}_DATABASE", s.env_var), s.database.clone()));
    }

    agent_env
}

/// Number of words `agent_exec` puts before the spec's argv.
const AGENT_WRAPPER_WORDS: usize = 7;

/// The agent's argv behind the wrapper that holds it back until the boundary is proven:
/// `cyclix agent-wait --go /cyclix/ctl/go --timeout-s N -- ARGV...`.
fn agent_exec(spec: &Spec) -> Vec<String> {
    let mut v = vec![
        CYCLIX_BIN_PATH.to_string(),
        "agent-wait".into(),
        "--go".into(),
        format!("{CTL_PATH}/{GO_FILE}"),
        "--timeout-s".into(),
        AGENT_WAIT_S.to_string(),
        "--".into(),
    ];
    debug_assert_eq!(v.len(), AGENT_WRAPPER_WORDS);
    v.extend(spec.agent.command.iter().cloned());
    v
}

fn agent_binds(spec: &Spec, run: &RunContext) -> Result<Vec<Bind>, RenderError> {
    // The work tree is the run's private repository (its `.git` inside): nothing of the
    // user's repository is mounted (issue 11; `git::private`).
    let mut agent_binds = vec![Bind {
        source: run.worktree.clone(),
        target: WORKDIR.into(),
        read_only: false,
    }];
    agent_binds.push(Bind {
        source: run.cyclix_bin.clone(),
        target: CYCLIX_BIN_PATH.into(),
        read_only: true,
    });
    agent_binds.push(Bind {
        source: format!("{}/{CTL_DIR}", run.run_dir),
        target: CTL_PATH.into(),
        read_only: true,
    });
    agent_binds.push(Bind {
        source: format!("{}/{TASK_FILE}", run.run_dir),
        target: TASK_PATH.into(),
        read_only: true,
    });
    agent_binds.push(Bind {
        source: format!("{}/{CONTEXT_FILE}", run.run_dir),
        target: CONTEXT_PATH.into(),
        read_only: true,
    });
    for (i, m) in spec.mounts.iter().enumerate() {
        mount_path(&format!("mounts[{i}].source"), &m.source)?;
        mount_path(&format!("mounts[{i}].target"), &m.target)?;
        agent_binds.push(Bind {
            source: m.source.clone(),
            target: m.target.clone(),
            read_only: m.read_only,
        });
    }

    Ok(agent_binds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::SpecContext;

    fn spec(services: &str) -> Spec {
        let yaml = format!(
            "tenant: shop\nrepo: {{path: /home/u/shop, base: main}}\ntask: {{text: x}}\n\
             agent: {{image: localhost/a, unpinned_local_image: true, command: [agent]}}\n\
             gate: {{image: localhost/a, unpinned_local_image: true, command: [check]}}\n{services}"
        );
        let ctx = SpecContext {
            file: "t.yaml".into(),
            home: "/home/u".into(),
            runtime_dir: "/run/user/1000".into(),
        };
        crate::spec::parse(&yaml, &ctx).expect("spec")
    }

    fn run(spec: &Spec, ports: Vec<u16>) -> RunContext {
        RunContext {
            run_id: "20261130t140126-a979".into(),
            worktree: "/w".into(),
            run_dir: "/run/user/1000/cyclix/runs/r".into(),
            subnet_octet: 9,
            proxy_image: "localhost/p".into(),
            cyclix_bin: "/usr/bin/cyclix".into(),
            service_ports: if ports.is_empty() {
                preview_ports(spec)
            } else {
                ports
            },
        }
    }

    #[test]
    fn preview_ports_keep_fixed_ones_and_never_hand_out_a_fixed_one_twice() {
        let s = spec(
            "services:\n  - {name: a, image: localhost/x, unpinned_local_image: true}\n  - {name: b, image: localhost/x, unpinned_local_image: true, port: 20001}\n  - {name: c, image: localhost/x, unpinned_local_image: true}\n",
        );
        assert_eq!(preview_ports(&s), [20_000, 20_001, 20_002]);
    }

    #[test]
    fn a_service_gets_its_volume_health_env_and_a_place_in_the_context_file() {
        let s = spec(
            "services:\n  - {name: my-db, image: localhost/pg, unpinned_local_image: true, data: /var/lib/pg, health: {command: [pg_isready], retries: 2, interval: 1s, timeout: 1s}}\n",
        );
        let p = plan(&s, &run(&s, vec![23_456])).expect("plan");
        let db = "cyclix_shop_20261130t140126_a979";
        let stem = "cyclix-20261130t140126-a979-svc-my-db";
        assert_eq!(
            p.volumes,
            [VolumePlan {
                stem: format!("{stem}-data")
            }]
        );
        let svc = p
            .containers
            .iter()
            .find(|c| c.stem == stem)
            .expect("service");
        assert_eq!(
            svc.volumes,
            [VolumeMount {
                volume: 0,
                target: "/var/lib/pg".into()
            }]
        );
        assert_eq!(svc.start_timeout_s, START_TIMEOUT_LOCAL_S + 4);
        let env = |c: &ContainerPlan, k: &str| {
            c.env
                .iter()
                .find(|(n, _)| n == k)
                .map_or_else(|| panic!("{k} not set"), |(_, v)| v.clone())
        };
        for (k, v) in [
            ("CYCLIX_PORT", "23456"),
            ("PGPORT", "23456"),
            ("CYCLIX_DATABASE", db),
            ("PGDATABASE", db),
            ("POSTGRES_DB", db),
            ("PGDATA", "/var/lib/pg"),
            ("CYCLIX_DATA", "/var/lib/pg"),
        ] {
            assert_eq!(env(svc, k), v, "{k}");
        }
        let agent = p
            .containers
            .iter()
            .find(|c| c.stem.ends_with("-agent"))
            .expect("agent");
        assert_eq!(env(agent, "CYCLIX_SERVICE_MY_DB"), "127.0.0.1:23456");
        assert_eq!(env(agent, "CYCLIX_SERVICE_MY_DB_PORT"), "23456");
        assert_eq!(env(agent, "CYCLIX_SERVICE_MY_DB_DATABASE"), db);
        assert_eq!(env(agent, "CYCLIX_CONTEXT"), CONTEXT_PATH);
        assert!(
            agent
                .binds
                .iter()
                .any(|b| b.target == CONTEXT_PATH && b.read_only)
        );
        // The volume's unit is stopped with the run, after the pod and before the networks.
        let all = &p.units.all;
        let pos = |u: &str| {
            all.iter()
                .position(|x| x == u)
                .unwrap_or_else(|| panic!("{u}"))
        };
        let vol = format!("{stem}-data-volume.service");
        assert!(pos("cyclix-20261130t140126-a979-pod.service") < pos(&vol));
        assert!(pos(&vol) < pos("cyclix-20261130t140126-a979-network.service"));
        let ctx: serde_json::Value = serde_json::from_str(&context_json(&p)).expect("json");
        assert_eq!(
            ctx["services"][0],
            serde_json::json!({"name": "my-db", "host": "127.0.0.1", "port": 23456,
                "address": "127.0.0.1:23456", "database": db, "env": "CYCLIX_SERVICE_MY_DB"})
        );
        assert_eq!(ctx["task"], TASK_PATH);
        // The ports must match the services.
        let e = plan(&s, &run(&s, vec![1, 2])).expect_err("two ports for one service");
        assert_eq!(e.key, "run.service_ports");
    }

    #[test]
    fn host_tiers_get_a_context_file_with_host_paths_and_no_services() {
        let mut s = spec("tier: worktree\n");
        s.tier = Tier::Worktree;
        let p = plan(&s, &run(&s, Vec::new())).expect("plan");
        let ctx: serde_json::Value = serde_json::from_str(&context_json(&p)).expect("json");
        assert_eq!(ctx["task"], "/run/user/1000/cyclix/runs/r/task.md");
        assert_eq!(ctx["workdir"], "/w");
        assert_eq!(ctx["services"], serde_json::json!([]));
        assert_eq!(ctx["proxy"], serde_json::Value::Null);
    }
}
