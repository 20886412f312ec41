//! Spec + run → the files of one run: Quadlet units (or plain systemd units on hosts without
//! Quadlet), the proxy's configuration and the task file; plus the static templates and the
//! per-tenant timer drop-in.
//!
//! Pure: no file system, no environment, no clock, no randomness, no hash-order iteration.
//! Every host fact (paths, the run's subnet, image references) arrives in [`RunContext`].
//! Both backends render from one [`plan::RunPlan`], so they cannot drift apart.

mod common;
pub mod escape;
pub mod host_units;
pub mod ini;
pub mod kube;
pub mod plain;
pub mod plan;
pub mod prompt;
pub mod proxy;
pub mod quadlet;
pub mod units;

use serde::Serialize;

use crate::spec::Spec;

/// Which unit flavour to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// Quadlet files (`.network`, `.pod`, `.container`) for podman ≥ 5.0, turned into units by
    /// Podman's generator, which cyclix runs over the run's own directory (podman-systemd.unit(5);
    /// `run::phases::bring_up::load`).
    Quadlet,
    /// Plain `.service` units running the equivalent podman commands, for hosts without
    /// Quadlet (podman < 5, e.g. Debian 12's 4.3), placed in `$XDG_RUNTIME_DIR/systemd/user/`.
    Plain,
}

/// Where a rendered file goes. The adapter maps each to a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Dest {
    /// The run's Quadlet directory, `$XDG_RUNTIME_DIR/cyclix/runs/RUN/quadlet/` (gone at
    /// reboot; no generator scans it: cyclix generates the units, `RunPaths::quadlet_dir`).
    Quadlet,
    /// `$XDG_RUNTIME_DIR/systemd/user/`: runtime user units (plain backend; gone at reboot).
    RuntimeUnits,
    /// The run's own state directory (`RunContext::run_dir`): proxy config, task file.
    RunDir,
    /// `~/.config/systemd/user/`: the static templates and per-tenant timer drop-ins.
    UserConfig,
}

impl Dest {
    /// The directory name used for this destination in `render --out` and golden tests.
    #[must_use]
    pub fn dir_name(self) -> &'static str {
        match self {
            Dest::Quadlet => "quadlet",
            Dest::RuntimeUnits => "units",
            Dest::RunDir => "run",
            Dest::UserConfig => "user",
        }
    }
}

/// One rendered file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RenderedFile {
    /// Destination directory kind.
    pub dest: Dest,
    /// File name relative to the destination (may contain one `/` for drop-in directories).
    pub name: String,
    /// Full text.
    pub contents: String,
}

/// The rendered run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rendered {
    /// Files sorted by (dest, name).
    pub files: Vec<RenderedFile>,
    /// Loud notices (an unpinned local image, report-only egress, a non-container tier).
    pub warnings: Vec<String>,
    /// Units the orchestrator drives, in start order.
    pub units: plan::UnitNames,
}

/// Host facts about one run, resolved by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunContext {
    /// The run id (validated: `spec::validate::run_id`).
    pub run_id: String,
    /// Absolute host path of the run's work tree (mounted at `/work`): for tier `container`
    /// the run's private repository, `.git` inside; nothing else of the user's repository is
    /// mounted (issue 11).
    pub worktree: String,
    /// Absolute host path of the run's state directory (proxy config, task file).
    pub run_dir: String,
    /// Third octet of the run's internal subnet `10.213.N.0/24` (1–254); the proxy is `.2`.
    pub subnet_octet: u8,
    /// The egress proxy image reference.
    pub proxy_image: String,
    /// Absolute host path of the cyclix binary, mounted read-only into the agent container at
    /// `plan::CYCLIX_BIN_PATH` (it runs the probes and the `agent-wait` wrapper).
    pub cyclix_bin: String,
    /// The port of each spec service, in spec order: the spec's fixed `port`, or the one the
    /// caller picked and reserved for this run (`run::lifecycle::reserve_port`);
    /// [`plan::preview_ports`] gives the ports `cyclix render` shows.
    pub service_ports: Vec<u16>,
    /// The run's placeholder of each `agent.credentials` entry, in spec order: what the
    /// agent's variable holds instead of the key (`proxy::credentials::placeholder`, random
    /// per run); [`plan::preview_placeholders`] gives the ones `cyclix render` shows.
    pub placeholders: Vec<String>,
    /// The setup paths of the base commit bound read-only over the work tree
    /// (`run::phases::setup::bind_targets`: repository-relative files or directories); empty for a
    /// preview, which has no base commit resolved.
    pub setup_binds: Vec<String>,
    /// The proxy access log's key for this run: squid starts every decision line with it
    /// (`"key":"…"`), and the collect phase keeps only the lines that carry it, so a line the
    /// agent got squid to print some other way (its cache log quotes request bytes) is never
    /// read as a decision (attack review 15). 32 lowercase hex digits, random per run
    /// (`app::tenant::run_inputs`); [`plan::PREVIEW_LOG_KEY`] for a preview.
    pub log_key: String,
    /// The proxy reads its credential header lines from [`plan::PROXY_CREDENTIALS_FILE`] in
    /// the run dir (bind-mounted read-only), which the run writes when it claims a warm
    /// environment (issue 16: a pooled proxy is made before any credential exists), instead
    /// of a podman secret made with the container. Only with `agent.credentials`.
    pub credentials_file: bool,
    /// `Some(N)` when the agent container is made before its run, in a pooled environment
    /// (issue 33): it is started at the fill and waits up to N s (the pool's `max_idle`) for
    /// its claim (`cyclix agent-wait --claim`), so its unit's `RuntimeMaxSec=` is N s longer
    /// and the claiming run counts the agent's own time (`run::phases::agent`). `None` for a
    /// run that makes its agent container itself.
    pub claim_wait_s: Option<u64>,
    /// gVisor's `runsc` as this host runs it (`host::facts::gvisor::look`): the agent's and the
    /// gate's runtime under tier `gvisor` (a tier-`gvisor` spec without it does not render);
    /// `None` for the other tiers.
    pub gvisor: Option<crate::tier::runsc::OciRuntime>,
}

/// Why rendering failed. Each names the spec key or context field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct RenderError {
    /// The spec key path (`agent.command[2]`) or context field (`run.worktree`).
    pub key: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// Renders the per-run files of `spec` for `run` with `backend`.
///
/// # Errors
/// [`RenderError`] when a context path is unusable in a mount (not absolute, or holding `:`,
/// `,`, `=` or a control character), the subnet octet is out of range, the service ports do
/// not match the spec's services, or an argv word cannot
/// be carried by the backend (Quadlet: an empty word or a lone `;`).
pub fn render(spec: &Spec, run: &RunContext, backend: Backend) -> Result<Rendered, RenderError> {
    render_plan(spec, &plan::plan(spec, run)?, backend)
}

/// Renders a plan built by [`plan::plan`] (and possibly adjusted by the caller, as `cyclix
/// twin` does for its quick suite's gate) with `backend`.
///
/// # Errors
/// As [`render`], for argv words the backend cannot carry.
pub fn render_plan(
    spec: &Spec,
    plan: &plan::RunPlan,
    backend: Backend,
) -> Result<Rendered, RenderError> {
    // The host tiers' units (none for tier `container`), then the backend's topology (none
    // for the host tiers).
    let mut files = host_units::render(plan)?;
    files.extend(match backend {
        Backend::Quadlet => quadlet::render(plan)?,
        Backend::Plain => plain::render(plan)?,
    });
    files.push(RenderedFile {
        dest: Dest::RunDir,
        name: plan::PROXY_CONF_FILE.to_string(),
        contents: proxy::squid_conf(&proxy::ProxyPlan {
            egress: &spec.egress,
            agent_subnet: &plan.subnet,
            listen_port: plan::PROXY_PORT,
            credentials: &spec.agent.credentials,
            placeholders: &plan.placeholders,
            ca_files: spec.egress.ca_certs.len(),
            log_key: &plan.log_key,
        }),
    });
    files.push(RenderedFile {
        dest: Dest::RunDir,
        name: plan::CONTEXT_FILE.to_string(),
        contents: plan::context_json(plan),
    });
    files.sort_by(|a, b| (a.dest, &a.name).cmp(&(b.dest, &b.name)));
    Ok(Rendered {
        files,
        warnings: plan.warnings.clone(),
        units: plan.units.clone(),
    })
}
