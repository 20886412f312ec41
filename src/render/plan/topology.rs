//! The plan's topology: the run's networks, the containers on them with their hardening,
//! mounts and volumes, and the two containers of cyclix's own (the egress proxy, the gate).
//! A backend translates these types one to one. Pure.

use serde::Serialize;

use super::budgets::{START_TIMEOUT_LOCAL_S, is_local, start_timeout};
use super::{RunContext, labels, tmpfs_tmp};
use crate::naming::RunNames;
use crate::render::proxy::credentials;
use crate::spec::Spec;
use crate::tier::Tier;

/// Where the project worktree appears in the agent and gate containers.
pub const WORKDIR: &str = crate::probe::WORKDIR;

/// Port the egress proxy listens on inside the run's internal network.
pub const PROXY_PORT: u16 = 3128;

/// The proxy configuration's file name in the run directory.
pub const PROXY_CONF_FILE: &str = "squid.conf";

/// The proxy's credential header lines in a warm environment's run dir
/// ([`crate::render::RunContext::credentials_file`]): empty from the fill, written by the run
/// that claims it, mounted read-only at [`credentials::CREDENTIALS_INCLUDE_PATH`].
pub const PROXY_CREDENTIALS_FILE: &str = "proxy-credentials.conf";

/// Where the proxy image reads its configuration (read-only bind mount).
pub const PROXY_CONF_PATH: &str = "/etc/cyclix/squid.conf";

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
    /// Index into [`super::RunPlan::volumes`].
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
    /// The gateway address, if fixed (`10.213.N.1` for the internal network): the plain
    /// backend passes it as `--gateway` because netavark gives an internal network created
    /// `--disable-dns` no gateway otherwise (measured, netavark 1.4), and probe N6 needs one
    /// that refuses fast. Quadlet's network gets it from podman's default (`.1`).
    pub gateway: Option<String>,
}

/// A network attachment of a container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attach {
    /// Index into [`super::RunPlan::networks`].
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
    /// Variables handed to the container's `cyclix agent-wait` at the go through the control
    /// directory's FIFO (`run::handover`), never fixed when the container is created: the
    /// agent's `agent.env`. Quadlet and the plain backend render nothing for them; Kubernetes,
    /// whose Pod gates itself, gives them from the run's Secret.
    pub handed_over: Vec<String>,
    /// Per-run podman secrets mounted as files (`type=mount`), readable by
    /// [`crate::render::proxy::credentials::PROXY_UID`] only (mode 0400): (secret name,
    /// container path). Only the proxy has one (the credential header lines).
    pub secret_files: Vec<(String, String)>,
    /// argv (empty: the image's default command) and the spec key it came from.
    pub exec: Vec<String>,
    /// The spec key of `exec` for error messages.
    pub exec_key: String,
    /// How many leading words of `exec` are cyclix's own (the agent's `agent-wait` wrapper);
    /// error messages index the spec's argv after them.
    pub exec_key_offset: usize,
    /// `exec` is the whole command: its first word replaces the image's `ENTRYPOINT`
    /// (Quadlet `Entrypoint=`, podman-run(1) `--entrypoint`), so nothing of the image runs
    /// before it. Set for the agent (whose first word is cyclix's `agent-wait`: an image's
    /// entrypoint would otherwise run before the boundary is proven) and the gate (whose
    /// argv is the tenant's checks, exactly); not for services, whose `command` is the
    /// arguments of their image's own entrypoint (attack review 17).
    pub replaces_entrypoint: bool,
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
    /// `User=UID:GID` (`--user`): the agent of a preset runs as its CLI's non-root uid;
    /// `None` keeps the image's user.
    pub user: Option<String>,
    /// The host file podman's `k8s-file` log driver writes the container's output to
    /// (`LogDriver=k8s-file`, `LogOpt=path=…`, `LogOpt=max-size=`[`RAW_LOG_MAX`];
    /// podman-systemd.unit(5), podman-run(1) `--log-driver`, `--log-opt`): the agent's and the
    /// gate's, which cyclix reads, redacts and passes on (`run::output`). `None`: podman's
    /// default driver (journald), for cyclix's own containers.
    pub log_file: Option<String>,
    /// The OCI runtime this container runs on when not podman's default (podman(1)
    /// `--runtime`, `--runtime-flag`): gVisor's `runsc` for the agent and the gate under tier
    /// `gvisor`; `None` for the proxy, the services and every container of tier `container`.
    pub oci_runtime: Option<crate::tier::runsc::OciRuntime>,
}

/// The agent's raw output in the run directory (podman's `k8s-file` log; removed with it).
pub const AGENT_OUTPUT_FILE: &str = "agent.out";

/// The gate's raw output in the run directory.
pub const GATE_OUTPUT_FILE: &str = "gate.out";

/// The raw output of the gate's run on the base tree, in the run directory.
pub const GATE_BASE_OUTPUT_FILE: &str = "gate-base.out";

/// The environment variable naming a gate's results file (`JUnit` XML) in its container.
pub const RESULTS_ENV: &str = "CYCLIX_RESULTS";

/// Where a gate's results directory appears in its container (read-write).
pub const RESULTS_DIR_PATH: &str = "/cyclix/results";

/// The results file's name in that directory.
pub const RESULTS_FILE: &str = "junit.xml";

/// podman's `max-size` of a raw output file: past it podman starts the file anew (conmon
/// renames a fresh file over it), which the reader notes as `rotated`. It bounds what a
/// flooding agent puts in `$XDG_RUNTIME_DIR` (a tmpfs).
pub const RAW_LOG_MAX: &str = "16mb";

/// The run's networks: the internal one (`cyclix-R`, subnet `10.213.N.0/24`, dynamic
/// addresses from its upper half) first, the egress one (`cyclix-R-egress`) second.
pub(super) fn networks(names: &RunNames, subnet: &str, octet: u8) -> Vec<NetworkPlan> {
    let base = names.base();
    vec![
        NetworkPlan {
            stem: base.clone(),
            name: base,
            internal: true,
            subnet: Some(subnet.to_string()),
            ip_range: Some(format!("10.213.{octet}.128/25")),
            gateway: Some(format!("10.213.{octet}.1")),
        },
        NetworkPlan {
            stem: names.egress(),
            name: names.egress(),
            internal: false,
            subnet: None,
            ip_range: None,
            gateway: None,
        },
    ]
}

/// The suffix of the proxy's credential secret (`cyclix-RUN-CYCLIX_PROXY_CREDENTIALS`): the
/// squid include file with the real header lines ([`credentials::include_file`]).
pub const CREDENTIALS_SECRET_VAR: &str = "CYCLIX_PROXY_CREDENTIALS";

/// The proxy's bind mounts: its configuration, and each `egress.ca_certs` file read-only at
/// [`credentials::ca_path`].
fn proxy_binds(spec: &Spec, run: &RunContext) -> Vec<Bind> {
    let mut binds = vec![Bind {
        source: format!("{}/{PROXY_CONF_FILE}", run.run_dir),
        target: PROXY_CONF_PATH.into(),
        read_only: true,
    }];
    if !spec.agent.credentials.is_empty() {
        if run.credentials_file {
            binds.push(Bind {
                source: format!("{}/{PROXY_CREDENTIALS_FILE}", run.run_dir),
                target: credentials::CREDENTIALS_INCLUDE_PATH.into(),
                read_only: true,
            });
        }
        for (i, c) in spec.egress.ca_certs.iter().enumerate() {
            binds.push(Bind {
                source: c.path.clone(),
                target: credentials::ca_path(i),
                read_only: true,
            });
        }
    }
    binds
}

impl ContainerPlan {
    /// The image's `ENTRYPOINT` replacement and the arguments after it: with
    /// [`ContainerPlan::replaces_entrypoint`] and an argv, `(Some(["ARGV0"] as JSON), ARGV[1..])`
    /// (the JSON array form, so podman takes the word as one program whatever it holds);
    /// otherwise `(None, ARGV)`.
    #[must_use]
    pub fn entrypoint_and_args(&self) -> (Option<String>, &[String]) {
        match self.exec.split_first() {
            Some((first, rest)) if self.replaces_entrypoint => {
                (Some(serde_json::json!([first]).to_string()), rest)
            }
            _ => (None, &self.exec),
        }
    }
}

pub(super) fn proxy_container(spec: &Spec, run: &RunContext, proxy_ip: &str) -> ContainerPlan {
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
        binds: proxy_binds(spec, run),
        tmpfs: Vec::new(),
        env: Vec::new(),
        secrets: Vec::new(),
        handed_over: Vec::new(),
        secret_files: if spec.agent.credentials.is_empty() || run.credentials_file {
            Vec::new()
        } else {
            vec![(
                RunNames::new(r).secret(CREDENTIALS_SECRET_VAR),
                credentials::CREDENTIALS_INCLUDE_PATH.to_string(),
            )]
        },
        exec: Vec::new(),
        exec_key: "proxy".into(),
        exec_key_offset: 0,
        replaces_entrypoint: false,
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
        user: None,
        log_file: None,
        oci_runtime: None,
    }
}

pub(super) fn gate_container(spec: &Spec, run: &RunContext) -> ContainerPlan {
    let r = &run.run_id;
    let mut gate = ContainerPlan {
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
        env: super::fresh::fresh_env()
            .into_iter()
            .chain([
                ("CYCLIX_TENANT".into(), spec.tenant.clone()),
                ("CYCLIX_RUN".into(), r.clone()),
            ])
            .collect(),
        secrets: Vec::new(),
        handed_over: Vec::new(),
        secret_files: Vec::new(),
        exec: spec.gate.command.clone(),
        exec_key: "gate.command".into(),
        exec_key_offset: 0,
        replaces_entrypoint: true,
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
        user: None,
        log_file: Some(format!("{}/{GATE_OUTPUT_FILE}", run.run_dir)),
        // The gate runs the agent's code too: under tier `gvisor` on runsc as the agent does.
        oci_runtime: run.gvisor.clone().filter(|_| spec.tier == Tier::Gvisor),
    };
    // Every gate may write its per-test results (JUnit XML) to `$CYCLIX_RESULTS`; with
    // `gate.protected` they are counted (docs/gate.md).
    with_results(&mut gate, &run.run_dir, false);
    gate
}

/// The gate's run on the base tree (`gate.protected`, docs/gate.md): the gate exactly as
/// [`gate_container`] makes it — the same image, argv, environment and hardening, Network=none
/// — but on the base commit's tree (`WORKTREE.gate-base`), with its own results directory
/// and output file. `None` without `gate.protected`.
pub(super) fn gate_base_container(spec: &Spec, run: &RunContext) -> Option<ContainerPlan> {
    if spec.gate.protected.is_empty() {
        return None;
    }
    let r = &run.run_id;
    let mut c = gate_container(spec, run);
    c.stem = RunNames::new(r).gate_base();
    c.description = format!(
        "cyclix run {r} (tenant {}): gate on the base tree (no network)",
        spec.tenant
    );
    c.binds = vec![Bind {
        source: crate::layout::gate_base_tree(std::path::Path::new(&run.worktree))
            .to_string_lossy()
            .into_owned(),
        target: WORKDIR.into(),
        read_only: true,
    }];
    c.env.retain(|(k, _)| k != RESULTS_ENV);
    with_results(&mut c, &run.run_dir, true);
    c.labels = labels(spec, run, "gate-base");
    c.log_file = Some(format!("{}/{GATE_BASE_OUTPUT_FILE}", run.run_dir));
    Some(c)
}

/// Mounts the gate's results directory ([`crate::layout::gate_results_dir`]) read-write at
/// [`RESULTS_DIR_PATH`] and names its file in `$CYCLIX_RESULTS`.
fn with_results(c: &mut ContainerPlan, run_dir: &str, base: bool) {
    let dir = crate::layout::gate_results_dir(std::path::Path::new(run_dir), base);
    c.binds.push(Bind {
        source: dir.to_string_lossy().into_owned(),
        target: RESULTS_DIR_PATH.into(),
        read_only: false,
    });
    c.env.push((
        RESULTS_ENV.into(),
        format!("{RESULTS_DIR_PATH}/{RESULTS_FILE}"),
    ));
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
