//! The backend-neutral plan of one run: which networks, which pod, which containers with which
//! hardening, mounts, environment and secrets. `quadlet` and `plain` only translate it.
//! Pure.

use serde::Serialize;

use super::{RenderError, RunContext};
use crate::spec::{Image, Spec};
use crate::tier::Tier;

/// Port the egress proxy listens on inside the run's internal network.
pub const PROXY_PORT: u16 = 3128;
/// The proxy configuration's file name in the run directory.
pub const PROXY_CONF_FILE: &str = "squid.conf";
/// The task's file name in the run directory.
pub const TASK_FILE: &str = "task.md";
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
    /// the generated `-network`/`-pod` oneshots that must be stopped too (testbed NOTES).
    pub all: Vec<String>,
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
    vec![
        ("io.cyclix.tenant".into(), spec.tenant.clone()),
        ("io.cyclix.run".into(), run.run_id.clone()),
        ("io.cyclix.role".into(), role.into()),
    ]
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

/// Secret names are per run: `cyclix-<run>-<VAR>` (removed at teardown).
#[must_use]
pub fn secret_name(run_id: &str, var: &str) -> String {
    format!("cyclix-{run_id}-{var}")
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
    mount_path("run.git_common_dir", &run.git_common_dir)?;
    mount_path("run.run_dir", &run.run_dir)?;
    mount_path("run.cyclix_bin", &run.cyclix_bin)?;
    if !(1..=254).contains(&run.subnet_octet) {
        return Err(err("run.subnet_octet", "must be 1–254"));
    }
    let r = &run.run_id;
    let base = format!("cyclix-{r}");
    let subnet = format!("10.213.{}.0/24", run.subnet_octet);
    let proxy_ip = format!("10.213.{}.2", run.subnet_octet);
    let pod_ip = format!("10.213.{}.3", run.subnet_octet);
    let warnings = warnings(spec);
    let agent_stem = format!("{base}-agent");
    let gate_stem = format!("{base}-gate");
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

    let networks = vec![
        NetworkPlan {
            stem: base.clone(),
            name: base.clone(),
            internal: true,
            subnet: Some(subnet.clone()),
            ip_range: Some(format!("10.213.{}.128/25", run.subnet_octet)),
        },
        NetworkPlan {
            stem: format!("{base}-egress"),
            name: format!("{base}-egress"),
            internal: false,
            subnet: None,
            ip_range: None,
        },
    ];
    let agent_env = agent_env(spec, &proxy_ip, task_env);
    let agent_binds = agent_binds(spec, run)?;
    let mut containers = vec![proxy_container(spec, run, &proxy_ip)];
    for (i, s) in spec.services.iter().enumerate() {
        containers.push(service_container(spec, run, i, s));
    }
    containers.push(agent_container(spec, run, agent_binds, agent_env));
    containers.push(gate_container(spec, run));

    let svc = |stem: &str| format!("{stem}.service");
    let mut infra = vec![svc(&format!("{base}-proxy"))];
    infra.extend(
        spec.services
            .iter()
            .map(|s| svc(&format!("{base}-svc-{}", s.name))),
    );
    let mut all = vec![svc(&agent_stem), svc(&gate_stem)];
    all.extend(
        spec.services
            .iter()
            .map(|s| svc(&format!("{base}-svc-{}", s.name))),
    );
    all.push(svc(&format!("{base}-proxy")));
    all.push(format!("{base}-pod.service"));
    all.extend(
        networks
            .iter()
            .map(|n| format!("{}-network.service", n.stem)),
    );
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
        host_services: Vec::new(),
        warnings,
        units: UnitNames {
            infra,
            agent: svc(&agent_stem),
            gate: svc(&gate_stem),
            all,
        },
    })
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
    let agent_stem = format!("cyclix-{r}-agent");
    let gate_stem = format!("cyclix-{r}-gate");
    warnings.push(format!("tier `{}`: {}", tier, tier.facts().summary));
    let workdir = match tier {
        Tier::Direct => spec.repo.path.clone(),
        _ => run.worktree.clone(),
    };
    let mut env = task_env.to_vec();
    if let Some(e) = env.first_mut() {
        e.1 = format!("{}/{TASK_FILE}", run.run_dir);
    }
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
        agent: format!("{agent_stem}.service"),
        gate: format!("{gate_stem}.service"),
        all: vec![
            format!("{agent_stem}.service"),
            format!("{gate_stem}.service"),
        ],
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
        host_services,
        warnings,
        units,
    }
}

fn proxy_container(spec: &Spec, run: &RunContext, proxy_ip: &str) -> ContainerPlan {
    let (r, base) = (&run.run_id, format!("cyclix-{}", run.run_id));
    let proxy_ip = proxy_ip.to_string();
    ContainerPlan {
        stem: format!("{base}-proxy"),
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
    }
}

fn service_container(
    spec: &Spec,
    run: &RunContext,
    i: usize,
    s: &crate::spec::Service,
) -> ContainerPlan {
    let (r, base) = (&run.run_id, format!("cyclix-{}", run.run_id));
    ContainerPlan {
        stem: format!("{base}-svc-{}", s.name),
        description: format!(
            "cyclix run {r} (tenant {}): service {}",
            spec.tenant, s.name
        ),
        image: s.image.reference().to_string(),
        pull_never: is_local(&s.image),
        net: Net::Pod,
        binds: Vec::new(),
        tmpfs: vec![tmpfs_tmp()],
        env: vec![("HOME".into(), "/tmp".into())],
        secrets: s
            .env
            .iter()
            .map(|v| (secret_name(r, v), v.clone()))
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
        start_timeout_s: start_timeout(&s.image),
        stop_signal: None,
    }
}

fn agent_container(
    spec: &Spec,
    run: &RunContext,
    agent_binds: Vec<Bind>,
    agent_env: Vec<(String, String)>,
) -> ContainerPlan {
    let r = &run.run_id;
    let agent_stem = format!("cyclix-{r}-agent");
    ContainerPlan {
        stem: agent_stem.clone(),
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
            .map(|v| (secret_name(r, v), v.clone()))
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
    }
}

fn gate_container(spec: &Spec, run: &RunContext) -> ContainerPlan {
    let r = &run.run_id;
    let gate_stem = format!("cyclix-{r}-gate");
    let common = &run.git_common_dir;
    ContainerPlan {
        stem: gate_stem.clone(),
        description: format!("cyclix run {r} (tenant {}): gate (no network)", spec.tenant),
        image: spec.gate.image.reference().to_string(),
        pull_never: is_local(&spec.gate.image),
        net: Net::None,
        binds: vec![
            Bind {
                source: run.worktree.clone(),
                target: WORKDIR.into(),
                read_only: true,
            },
            Bind {
                source: common.clone(),
                target: common.clone(),
                read_only: true,
            },
        ],
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
    }
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
    spec: &Spec,
    proxy_ip: &str,
    task_env: Vec<(String, String)>,
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
    for s in &spec.services {
        agent_env.push((
            format!(
                "CYCLIX_SERVICE_{}",
                s.name.to_ascii_uppercase().replace('-', "_")
            ),
            format!("127.0.0.1:{}", s.port),
        ));
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
    let common = &run.git_common_dir;
    let mut agent_binds = vec![
        Bind {
            source: run.worktree.clone(),
            target: WORKDIR.into(),
            read_only: false,
        },
        Bind {
            source: common.clone(),
            target: common.clone(),
            read_only: false,
        },
    ];
    for sub in ["config", "hooks", "info"] {
        let p = format!("{common}/{sub}");
        agent_binds.push(Bind {
            source: p.clone(),
            target: p,
            read_only: true,
        });
    }
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
