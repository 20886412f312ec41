//! What one run needs, resolved by the caller (`cyclix run`, the twin): the spec, the run
//! id, where its files go, its secrets and deadlines.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::boundary::Watched;
use crate::render::Backend;
use crate::spec::Spec;

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
    /// The run's Quadlet files (`$XDG_RUNTIME_DIR/cyclix/runs/RUN/quadlet`): a directory no
    /// generator scans; cyclix generates the run's units from it itself
    /// (`phases::bring_up::load`), so a run needs no daemon-reload.
    pub quadlet_dir: PathBuf,
    /// The directories Podman's Quadlet generator scans whole for this user, in its order
    /// (podman-systemd.unit(5)): searched after [`RunPaths::quadlet_dir`] when cyclix
    /// generates the run's units, so drop-ins placed there merge as they would on a reload.
    pub quadlet_user_dirs: Vec<PathBuf>,
    /// The admin's directory for every user (`/etc/containers/systemd/users`), searched last:
    /// the generator skips its subdirectories named by a uid (other users') in user mode, but
    /// not in a directory it is given, so cyclix gives it a copy without them.
    pub quadlet_admin_dir: Option<PathBuf>,
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
    /// Secret values by variable name (read from cyclix's own environment by the caller):
    /// `agent.env`, the services' `env` and the `agent.credentials` values (these go only
    /// into the proxy's include file, never to a container as a variable).
    pub secrets: Vec<(String, Vec<u8>)>,
    /// The run's placeholder of each `agent.credentials` entry, in spec order (random per
    /// run; `render::proxy::credentials::placeholder`).
    pub placeholders: Vec<String>,
    /// The proxy access log's key: 32 random hex digits, in squid.conf only (the agent never
    /// sees it); the collect phase keeps only decision lines that carry it
    /// (`render::RunContext::log_key`).
    pub log_key: String,
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
    /// What the caller replaced for this run ([`Override`]): the record says so.
    pub overridden: Override,
    /// The host-wide limit on runs at once (`max_runs`): the run's `queue` phase takes a slot
    /// before anything else ([`super::capacity`]). `None`: no limit (tests, `cyclix twin`).
    pub capacity: Option<super::capacity::Request>,
    /// The slot the caller already took (`cyclix run` queues before it claims a warm
    /// environment or hands a credential over, so nothing of a run waits in the queue): its
    /// `queue` phase as it went, and the slot, held until the inputs are dropped. When set,
    /// [`Self::capacity`] is not asked again.
    pub queued: Option<super::capacity::Queued>,
    /// The environment the run uses (`run::pool`): cold (`None`: the record says why from the
    /// spec) or a claimed warm one, whose reserved subnet octet the run keeps.
    pub environment: Option<Environment>,
    /// gVisor's runsc as this host runs it (`host::facts::gvisor::look`), for tier `gvisor`; `None`
    /// for the other tiers.
    pub gvisor: Option<crate::tier::runsc::OciRuntime>,
}

/// The environment of a run as its caller decided it (`cyclix run`'s claim).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    /// What the record says.
    pub record: super::record::EnvironmentRecord,
    /// A claimed environment's subnet octet (its reservation holds the run id); `None` cold.
    pub octet: Option<u8>,
    /// The claim's phases, the record's first ones, when the run tried one: `claim` (the
    /// pool's rename and the check against the fill, or finding none ready), then for a warm
    /// environment of a tenant with credentials `credentials` (the header lines written and
    /// squid reloaded, `run::pool::credfile`).
    pub claim: Vec<super::record::Phase>,
}

/// What a caller replaces for one run (`cyclix drill`): the task text, the escape it asks
/// for, the model. The default replaces nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Override {
    /// The task text instead of the spec's `task`.
    pub task: Option<String>,
    /// The drill's escape id, recorded as the record's `drill`.
    pub drill: Option<String>,
    /// The model the run is asked to use, recorded as the record's `model` (the spec's
    /// `agent.model` is set from it where the spec has that key).
    pub model: Option<String>,
}

/// The one `RunInputs` of the unit tests (lifecycle, twin): tenant `acme` with its repository
/// at `dir/repo` (an empty `.git`), the image `localhost/a`, the agent's and the gate's keys
/// as given (YAML flow-map entries after `image`), paths under `dir` (`runs/RUN`, `wt/RUN`,
/// `quadlet`, `units`, records in `records`), no secrets, polls of 1 ms and a log key drawn
/// from the run id as `app::tenant::run_inputs` draws one per run. A test changes the fields
/// it is about.
#[cfg(test)]
pub(crate) fn fixture(dir: &std::path::Path, run_id: &str, agent: &str, gate: &str) -> RunInputs {
    use std::fmt::Write as _;
    let repo = dir.join("repo");
    std::fs::create_dir_all(repo.join(".git")).expect("repo");
    let yaml = format!(
        "tenant: acme\nrepo: {{path: {}, base: main}}\ntask: {{text: fix it}}\n\
         agent: {{image: localhost/a, unpinned_local_image: true, {agent}}}\n\
         gate: {{image: localhost/a, unpinned_local_image: true, {gate}}}\n",
        repo.display()
    );
    let ctx = crate::spec::SpecContext {
        file: "t.yaml".into(),
        home: "/home/t".into(),
        runtime_dir: "/run/user/1000".into(),
    };
    let hex = run_id.bytes().fold(String::new(), |mut h, b| {
        let _ = write!(h, "{b:02x}");
        h
    });
    RunInputs {
        spec: crate::spec::parse(&yaml, &ctx).expect("spec"),
        run_id: run_id.into(),
        backend: Backend::Quadlet,
        paths: RunPaths {
            quadlet_dir: dir.join("runs").join(run_id).join("quadlet"),
            quadlet_user_dirs: vec![dir.join("user-quadlet")],
            quadlet_admin_dir: None,
            units_dir: dir.join("units"),
            run_dir: dir.join("runs").join(run_id),
            worktree: dir.join("wt").join(run_id),
            records_dir: Some(dir.join("records")),
        },
        task: "fix it".into(),
        secrets: Vec::new(),
        placeholders: Vec::new(),
        log_key: format!("{hex:0>32}")[..32].to_string(),
        deadlines: Deadlines {
            poll: Duration::from_millis(1),
            ..Deadlines::default()
        },
        notices: Vec::new(),
        cyclix_bin: PathBuf::from("/usr/local/bin/cyclix"),
        interrupted: Arc::new(AtomicBool::new(false)),
        probe_context: serde_json::from_value(serde_json::json!({
            "proxy_url": "", "proxy_name": "", "subnet": "", "gateway_ip": "",
            "denied_host": "denied.example", "host_namespaces": {}, "host_uid": 1000
        }))
        .expect("context"),
        probe_sockets: Vec::new(),
        tripwire_dir: dir.to_path_buf(),
        watched: Vec::new(),
        progress: None,
        overridden: Override::default(),
        capacity: None,
        queued: None,
        environment: None,
        gvisor: None,
    }
}
