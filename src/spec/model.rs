//! The validated spec model: what every other module consumes. Built only by the section
//! validators (`sections/*.rs`) from the decoded raw form; fields document the unit key or
//! podman flag they become.

use serde::Serialize;

use crate::tier::Tier;

/// A validated tenant spec.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spec {
    /// The spec file it was read from, as the user gave it ([`crate::spec::SpecContext::file`]):
    /// run-time errors about a key name it (`FILE:LINE: KEY: …`).
    #[serde(skip)]
    pub file: String,
    /// Tenant name: `^[a-z][a-z0-9-]{0,30}$`, no trailing `-`. Becomes the instance of
    /// `cyclix-run@TENANT.service` and the `io.cyclix.tenant` label.
    pub tenant: String,
    /// The project: a git repository on the host and the commit a run starts from.
    pub repo: Repo,
    /// The configured isolation tier (see `tier`).
    pub tier: Tier,
    /// Legacy flag `worktree_isolation: true`: raises the tier floor to `worktree`, never lowers it.
    pub legacy_worktree_isolation: bool,
    /// What the agent is asked to do; written to a fixed path in the sandbox.
    pub task: Task,
    /// The agent container.
    pub agent: Agent,
    /// The gate container: the tenant's checks, run with `Network=none` after the agent exits.
    pub gate: Gate,
    /// The egress allowlist enforced by the run's proxy.
    pub egress: Egress,
    /// Extra bind mounts into the agent container (validated by `sections::mounts`).
    pub mounts: Vec<Mount>,
    /// Services started in the agent's pod (e.g. a database), reachable on `127.0.0.1:PORT`.
    pub services: Vec<Service>,
    /// When the tenant runs by itself (`cyclix-run@TENANT.timer`); `None` means on demand only.
    pub schedule: Option<Schedule>,
    /// Where a passed run's commits go (`delivery:`); `None`: they stay on the local run
    /// branch only.
    pub delivery: Option<Delivery>,
    /// `setup:`: the project's setup paths as written (paths or globs, relative to the
    /// repository; `.cyclix/` is added by `spec::sections::setup::pathspecs`). Bound
    /// read-only in the work tree; a run changing one is held at delivery.
    pub setup: Vec<String>,
    /// `baseline:`: a basic test run in the agent's container before the agent; `None`: none.
    pub baseline: Option<Baseline>,
    /// Who is told when a run needs a person (`notify:`); `None`: nobody.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<Notify>,
    /// A warm pool of environments kept ready (`pool:`, issue 16); `None`: every run is cold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<Pool>,
}

/// `baseline:`: run with `podman exec` in the agent's container once the boundary is proven
/// and before the agent is let go; a non-zero exit (or the timeout) ends the run
/// `setup_broken` and the agent never starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Baseline {
    /// The argv, never passed through a shell by cyclix.
    pub command: Vec<String>,
    /// Wall-clock budget, in seconds (1 s to 1 h, default 5 min).
    pub timeout_s: u64,
}

/// `delivery:`: pushing a passed run's branch to a remote of the user's repository, with a
/// lease, one writer per branch, and a hold on CI/automation paths and secrets (`run::phases::deliver`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delivery {
    /// A remote name of the user's repository (`origin`): the push uses its URL and the
    /// user's own credentials and ssh settings.
    pub remote: String,
    /// The branch on the remote; `None`: the run branch `cyclix/TENANT/RUN`. A fixed name
    /// (`cyclix/acme/nightly`) is reused by fast-forward only.
    pub branch: Option<String>,
    /// Whether to push at all (`false`: everything is decided and recorded, nothing is sent).
    pub push: bool,
    /// Paths a delivery may touch although they are held by default (CI, automation): a
    /// directory `dir/`, a file `path`, or `**/name` for a file name at any depth.
    pub allow_paths: Vec<String>,
    /// Extra held paths (same forms as `allow_paths`) on top of the built-in list.
    pub hold_paths: Vec<String>,
    /// `allow_setup_changes`: deliver a run whose commits change a setup path (`setup:`,
    /// `.cyclix/`); default false: such a run is held.
    pub allow_setup_changes: bool,
    /// How long a run waits for another run's hold on the same remote branch, in seconds
    /// (`lock_wait`, 0 to 6h, default 10m); 0 refuses at once, naming the holder.
    pub lock_wait_s: u64,
}

/// The tenant's git repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Repo {
    /// Absolute, normalised host path of the repository's work tree (`~/` expanded).
    pub path: String,
    /// The ref or commit the run's worktree starts from (e.g. `main`); validated with the rules
    /// of `git check-ref-format` plus a plain 7–64 hex commit id.
    pub base: String,
    /// Line of `repo.path` in the spec file (1-based), for run-time errors.
    #[serde(skip)]
    pub path_line: usize,
    /// Line of `repo.base` in the spec file (1-based), for run-time errors.
    #[serde(skip)]
    pub base_line: usize,
}

impl Spec {
    /// Where key `key` written at `line` (1-based; 0: unknown) is, for a run-time error:
    /// `FILE:LINE: KEY` (`FILE: KEY` without a line; `KEY` alone for a spec read from no file).
    #[must_use]
    pub fn at(&self, line: usize, key: &str) -> String {
        match (self.file.is_empty(), line) {
            (true, _) => key.to_string(),
            (false, 0) => format!("{}: {key}", self.file),
            (false, l) => format!("{}:{l}: {key}", self.file),
        }
    }
}

/// The task prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// Inline text (`task: {text: ...}`).
    Text(String),
    /// A host file (`task: {file: ...}`), absolute and normalised; read when the run is prepared.
    File(String),
}

/// An OCI image reference.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Image {
    /// `name@sha256:<64 hex>`: the only form accepted by default.
    Pinned {
        /// The full reference as written (`registry/repo[:tag]@sha256:...`).
        reference: String,
    },
    /// A locally built image used without a digest (`localhost/...`), accepted only with the
    /// explicit opt-out `unpinned_local_image: true`; reported loudly by `render` and in records.
    UnpinnedLocal {
        /// The reference as written, always under `localhost/`.
        reference: String,
    },
    /// Built from the project's setup files (`build:`, issue 15): `reference` is
    /// `localhost/cyclix-build-TENANT-ROLE` in the spec and gets `:DIGEST` (the digest of
    /// every input, `images::build`) once the run has built it. Never pulled.
    Build {
        /// The tag (without the digest until built).
        reference: String,
        /// What it is built from.
        build: Box<Build>,
    },
}

/// `build:` of `agent`, `gate` or a service: the image built from the repository's files at
/// the run's base commit (never a work tree).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Build {
    /// `agent`, `gate` or `service-NAME`: the tag's last part and the name in progress lines.
    pub role: String,
    /// The Containerfile, relative to the repository (`/`-separated, no `..`); empty with
    /// `devcontainer` (its `build.dockerfile`, or its `image`, decides).
    pub containerfile: String,
    /// `devcontainer`: a `devcontainer.json`, relative to the repository, read at the base
    /// commit (`images::build::devcontainer`); `context` and `args` then come from it.
    pub devcontainer: Option<String>,
    /// The context directory, relative to the repository (`.`: the top).
    pub context: String,
    /// `--build-arg NAME=VALUE`, sorted by name (public values: they are in the image's
    /// history and in argv).
    pub args: Vec<(String, String)>,
    /// The hosts the build's proxy lets through (ports 80 and 443); empty: none.
    pub egress: Vec<HostPattern>,
    /// How long the build may run before it is killed (`build.timeout`), in s; default 1800.
    pub timeout_s: u64,
    /// 1-based line of the `build:` mapping in the spec file.
    #[serde(skip)]
    pub line: usize,
}

impl Image {
    /// The build, when the image is built from the repository.
    #[must_use]
    pub fn build(&self) -> Option<&Build> {
        match self {
            Image::Build { build, .. } => Some(build),
            _ => None,
        }
    }

    /// The reference string handed to podman (`Image=`).
    #[must_use]
    pub fn reference(&self) -> &str {
        match self {
            Image::Pinned { reference }
            | Image::UnpinnedLocal { reference }
            | Image::Build { reference, .. } => reference,
        }
    }
}

/// Resource limits for the agent. `None` means the host's default.
/// On a host that does not delegate the controller to the user manager they cannot be enforced
/// (`cyclix check` warns); they are rendered all the same.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Resources {
    /// Memory limit in bytes (`Memory=`), from `512M`, `2G` (powers of 1024). Range 16 MiB–1 TiB.
    pub memory_bytes: Option<u64>,
    /// CPU limit in thousandths of a CPU (`PodmanArgs=--cpus=`), from `0.5`, `2`. Range 0.01–256.
    pub cpu_millis: Option<u32>,
    /// Maximum number of processes (`PidsLimit=`), 16–65536.
    pub pids: Option<u32>,
}

/// The agent container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Agent {
    /// The image, pinned by digest.
    pub image: Image,
    /// The argv run in the container (`Exec=`); never passed through a shell by cyclix.
    pub command: Vec<String>,
    /// Names of variables whose values cyclix takes from its own environment at run time and
    /// hands over as per-run podman secrets (`Secret=NAME,type=env`). Values never appear in
    /// the spec, units or records.
    pub env: Vec<String>,
    /// Wall-clock budget for the agent, in seconds.
    pub timeout_s: u64,
    /// Resource limits.
    pub resources: Resources,
    /// `agent.credentials`: API keys the egress proxy adds for one host each; the agent's
    /// variable holds a per-run placeholder and never the value (issue 13). A preset's own
    /// credential comes first.
    pub credentials: Vec<Credential>,
    /// `agent.preset` when it is a CLI (issue 14); `None` for `script`.
    pub preset: Option<PresetUse>,
    /// The uid and gid the agent runs as in its container (`User=U:U`); the pod then maps the
    /// host user to it (`UserNS=keep-id:uid=U,gid=U`), so the work tree is its own. `None`:
    /// container root, which is the host user (rootless).
    pub run_as: Option<u32>,
    /// Fixed variables the agent gets (`Environment=`; never secrets): a preset's config and
    /// cache dirs under `/tmp`, its telemetry and update switches.
    pub fixed_env: Vec<(String, String)>,
    /// Whether the task arrives on the agent's standard input (`agent-wait --stdin`).
    pub task_on_stdin: bool,
    /// `agent.runtime_class`: the agent Pod's `runtimeClassName` in `cyclix export kube`
    /// (gVisor, Kata); `None`: the cluster's default runtime. The Podman backends ignore it
    /// and say so in the plan's warnings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_class: Option<String>,
}

/// A CLI preset as a run uses it (`agent.preset`, `agent.model`, `agent.max_turns`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PresetUse {
    /// The preset's name (`claude-code`).
    pub name: String,
    /// The package its image installs, `REGISTRY NAME@VERSION`.
    pub package: String,
    /// The model passed to the CLI (`cheapest` resolved); `None`: the CLI's default.
    pub model: Option<String>,
    /// `agent.max_turns`, passed to the CLI's own turn flag.
    pub max_turns: Option<u32>,
    /// Whether the CLI has a turn flag (without one, `max_turns` is recorded, not enforced).
    pub max_turns_enforced: bool,
    /// What the spec overrode of the preset (`agent.image`, `agent.command`).
    pub overridden: Vec<String>,
    /// The parser of its output stream.
    pub stream: crate::agents::StreamKind,
}

/// How a credential's value is written into its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialScheme {
    /// The header is the value (`x-api-key: KEY`).
    Raw,
    /// `Authorization: Bearer KEY`.
    Bearer,
}

/// One `agent.credentials` entry: the proxy adds the value of `env` (from cyclix's
/// environment or the tenant's 0600 env file) as `header` to requests for `host`, on a
/// reverse-proxy port of its own that the agent reaches at `$base_url_env`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Credential {
    /// The variable holding the key on the host; in the sandbox it holds the placeholder.
    pub env: String,
    /// The API host (exact, lowercase punycode), reached over TLS on `port`.
    pub host: String,
    /// The header carrying the key, lowercase (`x-api-key`, `authorization`).
    pub header: String,
    /// How the value is written into the header.
    pub scheme: CredentialScheme,
    /// Allowed request paths: exact (an optional query string allowed), or `/dir/*` for
    /// everything below `/dir/`.
    pub paths: Vec<String>,
    /// Allowed request methods (uppercase), default `[POST]`.
    pub methods: Vec<String>,
    /// The host's TLS port (default 443).
    pub port: u16,
    /// What the placeholder starts with (a vendor's key prefix, so the CLI's own key check
    /// accepts it): `sk-ant-api03-` for `ANTHROPIC_API_KEY`, `sk-proj-` for `OPENAI_API_KEY`.
    pub placeholder_prefix: String,
    /// The variable the agent's CLI reads its base URL from (`ANTHROPIC_BASE_URL`).
    pub base_url_env: String,
    /// What follows `http://PROXY:PORT` in that base URL (`/v1` for `OpenAI`'s SDKs; empty
    /// by default).
    pub base_url_path: String,
    /// `budget:`: the run's spend cap on this credential's port (issue 31); `None`: no cap
    /// (the record still counts).
    pub budget: Option<CredentialBudget>,
    /// 1-based line of the entry in the spec file (for the run's "not set" error).
    #[serde(skip)]
    pub line: usize,
}

/// `agent.credentials[].budget`: what one run may send through a credential's port. Past
/// either cap the port answers 429 with a page that says the run's budget is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CredentialBudget {
    /// The most requests the proxy forwards with the key; `None`: no cap.
    pub requests: Option<u64>,
    /// The most request body bytes (by `Content-Length`) it forwards, in bytes; `None`: no cap.
    /// Under this cap a request without `Content-Length` is refused (it cannot be counted).
    pub request_bytes: Option<u64>,
}

/// The gate container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gate {
    /// The image, pinned by digest.
    pub image: Image,
    /// The argv of the checks; exit status 0 means the gate passed.
    pub command: Vec<String>,
    /// `gate.quick`: the argv of the quick suite `cyclix twin` runs in each environment (and
    /// in the reference); `None` means `command`. Validated like `command`. The suite may
    /// write `JUnit` XML to the path in `$CYCLIX_RESULTS` for per-test results (docs/twin.md).
    pub quick: Option<Vec<String>>,
    /// Wall-clock budget for the gate, in seconds.
    pub timeout_s: u64,
    /// `gate.protected`: path patterns (as `setup:` takes them: git pathspecs `:(glob)P`)
    /// the gate takes from the base commit whatever the run's commits did to them, decided in
    /// the user's repository (docs/gate.md). Non-empty: the gate also runs on the base tree
    /// and the two per-test inventories are compared. Empty: the gate runs the agent's tree
    /// as it is.
    pub protected: Vec<String>,
}

impl Gate {
    /// The quick suite's argv: `gate.quick`, or `gate.command` when the spec has none.
    #[must_use]
    pub fn quick_argv(&self) -> &[String] {
        self.quick.as_deref().unwrap_or(&self.command)
    }
}

/// One allowlist entry, lowercased and in punycode (IDN converted).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "host")]
pub enum HostPattern {
    /// Exactly this host name.
    Exact(String),
    /// Any name strictly below this domain (`*.example.com` matches `a.example.com`, not
    /// `example.com`); stored without the `*.`.
    Subdomains(String),
}

/// The egress policy of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Egress {
    /// Allowed hosts, sorted and de-duplicated. Empty means deny all.
    pub allow: Vec<HostPattern>,
    /// Allowed destination ports, sorted; default `[443]`. A `CONNECT` to any of them must
    /// carry TLS from both ends; plain HTTP only to those of [`Egress::http_ports`].
    pub ports: Vec<u16>,
    /// `egress.http_ports`: the ports of [`Egress::ports`] the proxy relays plain (not
    /// `CONNECT`) HTTP requests to, sorted; default `[80]` when `ports` has 80, else none
    /// (issue 31). Each must be in `ports` (validation says so).
    pub http_ports: Vec<u16>,
    /// Log what would be denied without denying. Stated loudly wherever a run is reported.
    pub report_only: bool,
    /// `egress.ca_certs`: PEM files of extra CAs the proxy trusts when it originates TLS to a
    /// credential's host (besides the system CAs), e.g. a corporate gateway's. Mounted
    /// read-only into the proxy container only.
    pub ca_certs: Vec<CaCert>,
}

/// One `egress.ca_certs` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CaCert {
    /// Absolute, normalised host path of the PEM file (`~/` expanded).
    pub path: String,
    /// 1-based line of the entry in the spec file (the file is read after validation).
    #[serde(skip)]
    pub line: usize,
    /// 1-based column of the entry.
    #[serde(skip)]
    pub column: usize,
}

/// An extra bind mount into the agent container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mount {
    /// Absolute, normalised host path (`~/` expanded).
    pub source: String,
    /// Absolute, normalised path in the container, under `/mnt/`.
    pub target: String,
    /// Read-only unless `read_only: false`. No source may be, contain or lie inside a
    /// protected path (`mount_guard`), so in effect every extra mount is read-only data.
    pub read_only: bool,
    /// 1-based line of `source` in the spec file (for the checks that run after validation:
    /// `cyclix check` and the run's preflight name it as validation does).
    #[serde(skip)]
    pub source_line: usize,
    /// 1-based column of `source` in the spec file.
    #[serde(skip)]
    pub source_column: usize,
}

/// A service container in the agent's pod (e.g. a database for the project's tests).
///
/// Per run, cyclix gives it a port (the spec's `port`, or a free one it picks and reserves so
/// no two concurrent runs share it), a database name (`render::plan::database_name`), a data
/// volume (when `data` is set) and waits for its health check before the agent is let go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Service {
    /// Service name, same alphabet as tenant names; part of the container name.
    pub name: String,
    /// The image, pinned by digest.
    pub image: Image,
    /// The argv, or empty for the image's default command.
    pub command: Vec<String>,
    /// Env names handed over as secrets, as for the agent. Never one of
    /// `validate::SERVICE_RESERVED_ENV` (cyclix sets those).
    pub env: Vec<String>,
    /// The TCP port the service listens on inside the pod (1024–65535), when the spec fixes
    /// it; `None`: cyclix picks a free one per run. The agent finds it at `127.0.0.1:PORT`,
    /// announced as `CYCLIX_SERVICE_<NAME>=127.0.0.1:PORT` and in the context file.
    pub port: Option<u16>,
    /// Absolute path in the service container where a per-run podman volume is mounted
    /// (Quadlet `Volume=`), e.g. `/var/lib/postgresql/data`; removed at teardown.
    pub data: Option<String>,
    /// The readiness check: the service's unit is started only once it passes
    /// (Quadlet `HealthCmd=` + `Notify=healthy`).
    pub health: Option<Health>,
    /// `worktree: read_only`: the run's work tree is bound read-only at `/work` (the working
    /// directory), so the service runs the project itself — its web app, say (issue 15).
    /// Such a service runs code the agent writes, so it takes no secrets (`env` is refused).
    pub worktree: bool,
}

/// A service's health check (podman `--health-*`). It runs inside the service container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    /// The argv of the check (`HealthCmd=`, exec form); exit 0 means healthy.
    pub command: Vec<String>,
    /// Seconds between checks (`HealthInterval=`), 1–300, default 1.
    pub interval_s: u64,
    /// Seconds one check may take (`HealthTimeout=`), 1–300, default 5.
    pub timeout_s: u64,
    /// Failed checks in a row after which the service is unhealthy and the run fails
    /// (`HealthRetries=`), 1–1000, default 30.
    pub retries: u32,
    /// Seconds after start during which failures do not count (`HealthStartPeriod=`), 0–600.
    pub start_period_s: u64,
}

impl Health {
    /// The longest a service may take to become healthy, in seconds: the start period plus
    /// `retries` checks of at most `interval + timeout` each.
    #[must_use]
    pub fn budget_s(&self) -> u64 {
        self.start_period_s + u64::from(self.retries) * (self.interval_s + self.timeout_s)
    }
}

/// `notify:`: the argv `cyclix-notify@TENANT.service` runs on the host with the run summary as
/// JSON on stdin, through the run unit's `OnFailure=` (and `OnSuccess=` with `on_success`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notify {
    /// The argv (not a shell line).
    pub command: Vec<String>,
    /// Whether a passed run is told too.
    pub on_success: bool,
}

/// `pool:`: environments (networks, proxy with the allowlist, pod; no secret, credential,
/// canary, work tree or run data) kept ready by `cyclix-pool@TENANT.service`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pool {
    /// Environments kept ready (0–8).
    pub size: u32,
    /// An environment idle this long is destroyed, in seconds (60 s–24 h, default 2 h).
    pub max_idle_s: u64,
    /// With a `schedule:`, fill only this long before the timer's next elapse, in seconds
    /// (0–24 h, default 10 min).
    pub warm_before_s: u64,
}

/// The tenant's schedule, rendered as a drop-in for `cyclix-run@TENANT.timer`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Schedule {
    /// A systemd calendar expression (`OnCalendar=`, systemd.time(7)); validated by a pure
    /// subset parser here and by `systemd-analyze calendar` on the testbed.
    pub on_calendar: String,
    /// `Persistent=`: catch up a run missed while the machine was off. Default true.
    pub persistent: bool,
    /// `RandomizedDelaySec=` in seconds, always paired with `FixedRandomDelay=true` (field
    /// report B24). Default 0 (none).
    pub randomized_delay_s: u64,
}
