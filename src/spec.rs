//! The tenant spec: the typed, validated model that every other module consumes.
//!
//! Owns: the model types (this file), YAML decoding (`spec/yaml.rs`, the only YAML user in the
//! crate) and semantic validation (`spec/validate.rs`). Pure: no file system, no environment, no
//! processes. Reading the file (with its size cap) and the symlink walk over mount sources are I/O
//! and live in the adapters (`app`, `host::paths`).
//!
//! A spec that reaches this model has passed every check in `validate`: names are from the safe
//! alphabet, images are pinned (or loudly opted out), the allowlist is normalised, mounts are
//! component-wise inside their allowed roots. Fields document the unit key or podman flag they
//! become.

pub mod validate;
pub mod yaml;

use serde::Serialize;

use crate::tier::Tier;

/// Largest spec file cyclix reads, in bytes (256 KiB, security-cases §4 "Huge or hostile file").
/// The size is checked before parsing.
pub const MAX_SPEC_BYTES: u64 = 256 * 1024;

/// Facts from outside the file that validation needs, injected by the caller (never read from
/// the environment here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecContext {
    /// Label used in error messages: the spec's path as the user gave it.
    pub file: String,
    /// The invoking user's home directory (absolute): `~/` in paths expands to it.
    pub home: String,
    /// The invoking user's `$XDG_RUNTIME_DIR` (absolute, e.g. `/run/user/1000`): never mountable.
    pub runtime_dir: String,
}

/// A validated tenant spec.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spec {
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
    /// Extra bind mounts into the agent container (validated; see `validate::mount`).
    pub mounts: Vec<Mount>,
    /// Services started in the agent's pod (e.g. a database), reachable on `127.0.0.1:PORT`.
    pub services: Vec<Service>,
    /// When the tenant runs by itself (`cyclix-run@TENANT.timer`); `None` means on demand only.
    pub schedule: Option<Schedule>,
}

/// The tenant's git repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Repo {
    /// Absolute, normalised host path of the repository's work tree (`~/` expanded).
    pub path: String,
    /// The ref or commit the run's worktree starts from (e.g. `main`); validated with the rules
    /// of `git check-ref-format` plus a plain 7–64 hex commit id.
    pub base: String,
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
}

impl Image {
    /// The reference string handed to podman (`Image=`).
    #[must_use]
    pub fn reference(&self) -> &str {
        match self {
            Image::Pinned { reference } | Image::UnpinnedLocal { reference } => reference,
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
}

/// The gate container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gate {
    /// The image, pinned by digest.
    pub image: Image,
    /// The argv of the checks; exit status 0 means the gate passed.
    pub command: Vec<String>,
    /// Wall-clock budget for the gate, in seconds.
    pub timeout_s: u64,
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
    /// Allowed destination ports (plain HTTP and CONNECT), sorted; default `[443]`.
    pub ports: Vec<u16>,
    /// Log what would be denied without denying. Stated loudly wherever a run is reported.
    pub report_only: bool,
}

/// An extra bind mount into the agent container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mount {
    /// Absolute, normalised host path (`~/` expanded).
    pub source: String,
    /// Absolute, normalised path in the container, under `/mnt/`.
    pub target: String,
    /// Read-only unless `read_only: false`; writable mounts must lie inside the project.
    pub read_only: bool,
}

/// A service container in the agent's pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Service {
    /// Service name, same alphabet as tenant names; part of the container name.
    pub name: String,
    /// The image, pinned by digest.
    pub image: Image,
    /// The argv, or empty for the image's default command.
    pub command: Vec<String>,
    /// Env names handed over as secrets, as for the agent.
    pub env: Vec<String>,
    /// The TCP port the service listens on inside the pod (1024–65535); the agent finds it at
    /// `127.0.0.1:PORT`, announced as `CYCLIX_SERVICE_<NAME>=127.0.0.1:PORT`.
    pub port: u16,
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
