//! The run record: one JSON document per run, written atomically (temp file, fsync, rename)
//! to `$XDG_STATE_HOME/cyclix/runs/TENANT/RUN.json`. It never holds secret values: only the
//! names of the variables handed over.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

mod baseline;
mod credentials;
mod delivery;
mod environment;
mod gate;
mod summary;
pub use baseline::{BaselineRecord, summary_lines as baseline_summary_lines};
pub use credentials::{CredentialUse, usage as credential_usage};
pub use delivery::{DeliveryFacts, DeliveryRecord, Outcome, SecretHit};
pub use environment::{EnvironmentRecord, NO_POOL, NONE_READY};
pub use gate::{BaseInventory, GateInventory, ProtectedChange};
pub use summary::{EgressCounts, egress_counts, summary};

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunResult {
    /// The agent exited 0 and the gate passed.
    Passed,
    /// The gate ran and failed.
    GateFailed,
    /// The gate's exit status said it passed, but a test that ran on the base tree did not
    /// run on the agent's (missing, skipped, deselected), or its results hold a failure
    /// (`gate.protected`: docs/gate.md). The agent weakened the gate instead of passing it.
    GateWeakened,
    /// The agent exited non-zero; the gate did not run.
    AgentFailed,
    /// The agent ran past `agent.timeout` and was stopped (by systemd at its unit's
    /// `RuntimeMaxSec=`, or by cyclix a slack later); the gate did not run. Its own result,
    /// not `error`: the agent's time ran out, cyclix did not fail (issue 32 item 3).
    AgentTimeout,
    /// The boundary probe refused the sandbox; the agent never started.
    ProbeRefused,
    /// The leak watch saw a host secret or a failing probe while the agent ran; it was stopped.
    LeakDetected,
    /// The run passed, but its delivery was held (CI/automation paths, a secret in the
    /// diff) or refused (the remote branch moved: the lease); the commits stay on the local
    /// run branch and the record's `delivery` says why.
    DeliveryRefused,
    /// The baseline (`baseline:`) failed in the fresh environment before the agent, or an
    /// image the spec builds from the project's files (`build:`) could not be built (phase
    /// `build`): the project's setup is broken, not the agent's work; the agent never
    /// started (issue 15).
    SetupBroken,
    /// A person stopped the run (SIGTERM or SIGINT: `cyclix stop`, `systemctl --user stop`,
    /// Ctrl-C) and its teardown and audit found nothing left (issue 19, item 6).
    Interrupted,
    /// cyclix itself failed in `phase`.
    Error,
}

impl RunResult {
    /// Every result, in the order the metrics, the picture's legend and the tests list them.
    pub const ALL: [RunResult; 11] = [
        RunResult::Passed,
        RunResult::GateFailed,
        RunResult::GateWeakened,
        RunResult::AgentFailed,
        RunResult::AgentTimeout,
        RunResult::ProbeRefused,
        RunResult::LeakDetected,
        RunResult::DeliveryRefused,
        RunResult::SetupBroken,
        RunResult::Interrupted,
        RunResult::Error,
    ];

    /// The result's one name, as the record spells it (`passed`, `gate_failed`, ...): what the
    /// summary, `status` and `runs` print, so a person reads one word for one result.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            RunResult::Passed => "passed",
            RunResult::GateFailed => "gate_failed",
            RunResult::GateWeakened => "gate_weakened",
            RunResult::AgentFailed => "agent_failed",
            RunResult::AgentTimeout => "agent_timeout",
            RunResult::ProbeRefused => "probe_refused",
            RunResult::LeakDetected => "leak_detected",
            RunResult::DeliveryRefused => "delivery_refused",
            RunResult::SetupBroken => "setup_broken",
            RunResult::Interrupted => "interrupted",
            RunResult::Error => "error",
        }
    }

    /// Exit status of `cyclix run` for this result (see `exit`).
    #[must_use]
    pub fn exit_code(self) -> u8 {
        match self {
            RunResult::Passed => crate::exit::OK,
            RunResult::GateFailed
            | RunResult::GateWeakened
            | RunResult::AgentFailed
            | RunResult::AgentTimeout
            | RunResult::ProbeRefused
            | RunResult::LeakDetected
            | RunResult::DeliveryRefused
            | RunResult::SetupBroken => crate::exit::FINDINGS,
            RunResult::Interrupted => crate::exit::INTERRUPTED,
            RunResult::Error => crate::exit::TOOL_FAILED,
        }
    }
}

/// One phase's timing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phase {
    /// Phase name (`prepare`, `render`, `install`, `reload`, `start`, `agent`, `gate`,
    /// `collect`, `teardown`, `audit`).
    pub name: String,
    /// Start, in ms since the Unix epoch.
    pub start_ms: u128,
    /// End, in ms since the Unix epoch.
    pub end_ms: u128,
    /// `ok` or the error that ended the phase.
    pub outcome: String,
}

/// A commit the agent made on the run branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitInfo {
    /// Full sha.
    pub sha: String,
    /// Subject line.
    pub subject: String,
}

/// The record of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Record format version.
    pub version: u32,
    /// Tenant.
    pub tenant: String,
    /// Run id.
    pub run_id: String,
    /// The tier the run had; `direct` records say "no isolation" in `notices`.
    pub tier: String,
    /// The result.
    pub result: RunResult,
    /// The phase that failed, if any.
    pub failed_phase: Option<String>,
    /// The error, if any.
    pub error: Option<String>,
    /// Phases in order.
    pub phases: Vec<Phase>,
    /// The agent's exit status, if it ran to an end.
    pub agent_exit: Option<i32>,
    /// The gate's exit status, if it ran.
    pub gate_exit: Option<i32>,
    /// The run branch (kept as the result when it has commits; deleted at teardown, with a
    /// notice, when it has none); empty when the run ended before it made the branch.
    pub branch: String,
    /// The commit the run started from.
    pub base_commit: String,
    /// Commits on the run branch, oldest first.
    pub commits: Vec<CommitInfo>,
    /// The pre-agent probe report (one JSON object per probe: id, expect, got, verdict).
    pub probes: Vec<serde_json::Value>,
    /// Why the boundary was refused or the run stopped: failing probes and leaks.
    pub refusal: Vec<String>,
    /// How many times the leak watch ran while the agent worked.
    pub watch_rounds: u32,
    /// Variables merely named like a watched one (e.g. `CYCLIX_CANARY`) that the sandbox set
    /// with another value while the agent ran: the agent's doing, recorded, not a leak (issue
    /// 13 item 3). `pid P (comm): …` from the host-side scan, `P22: …` from the watch probe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_named: Vec<String>,
    /// The last [`crate::run::phases::collect::LOG_TAIL_LINES`] lines the agent printed (from its
    /// output file, secret values replaced by `***`, escapes by U+FFFD; `run::output`);
    /// `agent_output` says how many there were.
    pub agent_log: Vec<String>,
    /// The agent CLI preset the run used (issue 14): name, package, model, turn cap and what
    /// the spec overrode; absent for a `script` agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<crate::spec::PresetUse>,
    /// What the preset's CLI reported in its output stream (final message, turns, tool calls,
    /// token usage), read as untrusted data (`agents::stream`); absent for a `script` agent
    /// or a run that ended before the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_report: Option<crate::agents::AgentReport>,
    /// The last lines the gate printed (as `agent_log`).
    pub gate_log: Vec<String>,
    /// How much the agent printed and what of it was kept (`RUN.agent.log`), sent to the
    /// journal, or cut (issue 19 item 7); absent for a run that did not get to collect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_output: Option<crate::text::output::OutputSummary>,
    /// The same for the gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_output: Option<crate::text::output::OutputSummary>,
    /// Proxy decisions (one JSON object per request, squid's fields and cyclix's `by`:
    /// `probe` or `agent`, from when the request started: `collect::egress_source`).
    pub egress_decisions: Vec<serde_json::Value>,
    /// Names of variables handed over as secrets (values never recorded).
    pub secret_names: Vec<String>,
    /// Loud notices (unpinned images, report-only egress, no isolation).
    pub notices: Vec<String>,
    /// Leftovers found by the audit after teardown; non-empty means the run failed.
    pub leftovers: Vec<String>,
    /// Unit names the run used.
    pub units: Vec<String>,
    /// When the agent unit's start job finished (the container is up, `cyclix agent-wait`
    /// holds the agent back), in ms since the Unix epoch; `None` for host tiers or when the
    /// run ended before. The probe run starts here (`bench/run` uses it).
    #[serde(default)]
    pub agent_ready_ms: Option<u128>,
    /// When the go (or refused) file was written, i.e. the probe run ended, in ms since the
    /// Unix epoch; `None` if the run never got there.
    #[serde(default)]
    pub go_ms: Option<u128>,
    /// For a run whose cyclix died (SIGKILL, crash) and that a later run converged: the phase,
    /// or `teardown/STEP`, it was in (from its `RUN.phase` note); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub died_in: Option<String>,
    /// The run's services as the agent saw them (address, database, data volume).
    #[serde(default)]
    pub services: Vec<ServiceRecord>,
    /// What the host says caused a failure, found by cyclix after it: the agent killed for
    /// memory (`agent killed for memory (oom): …`, the agent unit's `Result=oom-kill`), the
    /// project's file system full (`project filesystem full (avail 0 B …)`, statvfs of the
    /// worktree and the git dir).
    #[serde(default)]
    pub causes: Vec<String>,
    /// The delivery of the run branch to a remote (`delivery:` in the spec), `None` when the
    /// spec has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<DeliveryRecord>,
    /// How the run's commits came back from its private repository (tier `container`);
    /// `None`: no import ran (host tiers, or the agent never ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportRecord>,
    /// Changes to the user's repository made on the host while the run was on (refs, HEAD,
    /// config, hooks, info, worktrees), other than the run branch cyclix created: reported,
    /// never a failure (no container can write there; `run::repo_state`).
    #[serde(default)]
    pub repo_changes: Vec<String>,
    /// The escape a drill run was asked to try (`cyclix drill`: `ssh-key`, `write-outside`,
    /// …); `None` for a normal run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drill: Option<String>,
    /// The model the run was asked to use (`cyclix drill --model`), as given; `None` when none
    /// was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The baseline's run (`baseline:` in the spec), `None` when it has none or the run
    /// ended before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineRecord>,
    /// Setup paths (`setup:`, `.cyclix/`) the run's commits change, as git matched them: the
    /// delivery is held for them unless `delivery.allow_setup_changes` (issue 15, item 2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup_changes: Vec<String>,
    /// Protected paths (`gate.protected`) the run's commits changed, as git matched them in
    /// the user's repository: the gate ran the base's versions; the delivery is held for them
    /// unless `delivery.allow_paths` names them (docs/gate.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected_changes: Vec<ProtectedChange>,
    /// The base's tests counted on the base tree and on the agent's tree (`gate.protected`);
    /// `None` without it, or when the gate did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_inventory: Option<GateInventory>,
    /// The images the run built from the project's files (`build:`; issue 15), or found
    /// built from the same inputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<BuiltImageRecord>,
    /// A failed build's last lines of podman output (phase `build`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub build_log: Vec<String>,
    /// The environment (networks, proxy, pod) the run used: its id, whether it was a warm one
    /// from the tenant's pool, and why not (`run::pool::cold`); `None` in records written
    /// before issue 16 and in those convergence writes for a run whose cyclix died.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<EnvironmentRecord>,
    /// The run's turn under the host's `max_runs` (phase `queue`; issue 16, item 4); `None`
    /// when no limit applied (`cyclix twin`) or the run ended before it got a slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueRecord>,
    /// What each `agent.credentials` entry carried (issue 31): requests forwarded with the
    /// key, their body bytes, requests refused over the run's budget; read in collect.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<CredentialUse>,
    /// The OCI runtime the agent and the gate ran on when not podman's default: tier
    /// `gvisor`'s runsc, its path, version and runtime flags (`tier::runsc::OciRuntime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci_runtime: Option<crate::tier::runsc::OciRuntime>,
}

/// A run's turn under the host's `max_runs` (`run::capacity`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct QueueRecord {
    /// The limit in force.
    pub max_runs: u32,
    /// The slot taken, `0..max_runs`.
    pub slot: u32,
    /// How long the run waited for it, ms (0: a slot was free at once).
    pub waited_ms: u64,
    /// Runs holding a slot when this one first looked.
    pub busy_at_start: usize,
    /// Runs waiting before this one when it first looked.
    pub ahead_at_start: usize,
}

/// One image of a run's `build` phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct BuiltImageRecord {
    /// `agent`, `gate` or `service-NAME`.
    pub role: String,
    /// `localhost/cyclix-build-TENANT-ROLE:DIGEST`.
    pub reference: String,
    /// Whether it was built in this run (`false`: an image of the same inputs was there).
    pub built: bool,
}

/// The import of a run's commits (`run::import`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ImportRecord {
    /// `imported`, `no-commits`, `branch-gone`, `refused` or `export-failed`.
    pub outcome: String,
    /// Why the bundle was refused or could not be made; empty otherwise.
    #[serde(default)]
    pub reason: String,
    /// The imported tip; empty unless `imported`.
    #[serde(default)]
    pub tip: String,
    /// How many files the agent left changed but uncommitted (untracked included).
    #[serde(default)]
    pub uncommitted_files: usize,
    /// Where their diff is kept (beside the record), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncommitted_diff: Option<PathBuf>,
}

impl RunRecord {
    /// What a delivery of this run needs to know of it.
    #[must_use]
    pub fn delivery_facts(&self) -> DeliveryFacts {
        DeliveryFacts {
            branch: self.branch.clone(),
            base: self.base_commit.clone(),
            has_commits: !self.commits.is_empty(),
            setup_changes: self.setup_changes.clone(),
            protected_changes: self
                .protected_changes
                .iter()
                .map(|c| c.path.clone())
                .collect(),
        }
    }

    /// A record of run `run_id` of `tenant` with `tier` and nothing happened yet: result
    /// `error` until the lifecycle says otherwise, the run branch `cyclix/TENANT/RUN`, every
    /// list empty.
    #[must_use]
    pub fn new(tenant: &str, run_id: &str, tier: String) -> Self {
        RunRecord {
            version: 1,
            tenant: tenant.to_string(),
            run_id: run_id.to_string(),
            tier,
            result: RunResult::Error,
            failed_phase: None,
            error: None,
            phases: Vec::new(),
            agent_exit: None,
            gate_exit: None,
            branch: crate::naming::branch(tenant, run_id),
            base_commit: String::new(),
            commits: Vec::new(),
            probes: Vec::new(),
            agent_log: Vec::new(),
            preset: None,
            agent_report: None,
            gate_log: Vec::new(),
            agent_output: None,
            gate_output: None,
            refusal: Vec::new(),
            watch_rounds: 0,
            agent_named: Vec::new(),
            egress_decisions: Vec::new(),
            secret_names: Vec::new(),
            notices: Vec::new(),
            leftovers: Vec::new(),
            units: Vec::new(),
            agent_ready_ms: None,
            go_ms: None,
            died_in: None,
            services: Vec::new(),
            causes: Vec::new(),
            import: None,
            repo_changes: Vec::new(),
            delivery: None,
            drill: None,
            model: None,
            baseline: None,
            images: Vec::new(),
            build_log: Vec::new(),
            setup_changes: Vec::new(),
            protected_changes: Vec::new(),
            gate_inventory: None,
            queue: None,
            credentials: Vec::new(),
            environment: None,
            oci_runtime: None,
        }
    }
}

/// One service of a run, as written into the agent's context file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceRecord {
    /// The spec's name.
    pub name: String,
    /// Its unit.
    pub unit: String,
    /// `HOST:PORT` in the pod.
    pub address: String,
    /// The port (reserved for this run among concurrent runs).
    pub port: u16,
    /// The run's database name.
    pub database: String,
    /// The per-run data volume, if any.
    pub volume: Option<String>,
    /// It ran the project from the work tree, read-only (`services[i].worktree`); absent in
    /// records of services that did not (and of runs before issue 15).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub worktree: bool,
}

impl From<&crate::render::plan::ServicePlan> for ServiceRecord {
    fn from(s: &crate::render::plan::ServicePlan) -> Self {
        ServiceRecord {
            name: s.name.clone(),
            unit: s.unit.clone(),
            address: format!("{}:{}", s.host, s.port),
            port: s.port,
            database: s.database.clone(),
            volume: s.volume.clone(),
            worktree: s.worktree,
        }
    }
}

/// `$XDG_STATE_HOME/cyclix/runs/TENANT/`.
#[must_use]
pub fn tenant_dir(state_home: &Path, tenant: &str) -> PathBuf {
    crate::layout::records_root(state_home).join(tenant)
}

/// Writes `record` atomically to `dir/RUN.json` only (not `latest.json`): for a converged,
/// older run.
///
/// # Errors
/// I/O failures, naming the file.
pub fn write_only(dir: &Path, record: &RunRecord) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = crate::layout::RunFiles::new(dir, &record.run_id).record();
    crate::atomic::write(
        &path,
        &serde_json::to_vec_pretty(record).context("serialising the run record")?,
    )?;
    Ok(path)
}

/// Writes `record` atomically to `dir/RUN.json` and points `dir/latest.json` at it.
///
/// # Errors
/// I/O failures, naming the file.
pub fn write(dir: &Path, record: &RunRecord) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = crate::layout::RunFiles::new(dir, &record.run_id).record();
    let json = serde_json::to_vec_pretty(record).context("serialising the run record")?;
    crate::atomic::write(&path, &json)?;
    let latest = dir.join("latest.json");
    crate::atomic::write(&latest, &json)?;
    Ok(path)
}

/// Reads the latest record of `tenant`, if any.
///
/// # Errors
/// I/O or parse failures other than "no record yet".
pub fn latest(state_home: &Path, tenant: &str) -> Result<Option<RunRecord>> {
    let p = tenant_dir(state_home, tenant).join("latest.json");
    match std::fs::read(&p) {
        Ok(b) => Ok(Some(
            serde_json::from_slice(&b).with_context(|| format!("parsing {}", p.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", p.display())),
    }
}
