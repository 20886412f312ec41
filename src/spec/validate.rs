//! Semantic validation of a decoded spec: names, env names, the egress allowlist, images,
//! argv, mounts, schedule, resources and durations.
//!
//! Owns: the decoded-but-unchecked model ([`RawSpec`] and friends, every value with its line,
//! column and key path), the rules that turn it into a [`Spec`], and the small pure helpers
//! other modules reuse (`tenant_name`, `run_id`, `env_name`, `host_pattern`, `duration_s`).
//! Pure: no file system, no environment, no processes. Checks that need the file system (the
//! symlink walk over mount sources) live in `host::paths`.
//!
//! Every rule reports into a shared list, so one pass shows every problem in the file.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::mount_guard;
use super::{
    Agent, Delivery, Diagnostic, Egress, Gate, Health, HostPattern, Image, Mount, Repo, Resources,
    Schedule, Service, Spec, SpecContext, Task,
};
use crate::tier::Tier;

/// A value read from the spec file, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located<T> {
    /// The decoded value.
    pub value: T,
    /// 1-based line of the node.
    pub line: usize,
    /// 1-based column (characters) of the node.
    pub column: usize,
    /// Key path of the node (`agent.env[1]`).
    pub path: String,
}

impl<T> Located<T> {
    /// A diagnostic pointing at this value.
    #[must_use]
    pub fn diag(&self, message: impl Into<String>) -> Diagnostic {
        Diagnostic::at(self.line, self.column, &self.path, message)
    }
}

/// Where a mapping was written (for "missing key" style diagnostics).
pub type Pos = Located<()>;

/// The spec as decoded from YAML: closed schema and YAML types checked, nothing else.
/// `None` means the key was absent (or had the wrong YAML type, already reported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSpec {
    /// The document root.
    pub at: Pos,
    /// `tenant`.
    pub tenant: Option<Located<String>>,
    /// `repo`.
    pub repo: Option<RawRepo>,
    /// `tier`.
    pub tier: Option<Located<String>>,
    /// `worktree_isolation`.
    pub worktree_isolation: Option<Located<bool>>,
    /// `task`.
    pub task: Option<RawTask>,
    /// `agent`.
    pub agent: Option<RawAgent>,
    /// `gate`.
    pub gate: Option<RawGate>,
    /// `egress`.
    pub egress: Option<RawEgress>,
    /// `mounts` (absent = empty).
    pub mounts: Vec<RawMount>,
    /// `services` (absent = empty).
    pub services: Vec<RawService>,
    /// `schedule`.
    pub schedule: Option<RawSchedule>,
    /// `delivery`.
    pub delivery: Option<RawDelivery>,
}

/// `repo:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawRepo {
    /// The mapping.
    pub at: Pos,
    /// `repo.path`.
    pub path: Option<Located<String>>,
    /// `repo.base`.
    pub base: Option<Located<String>>,
}

/// `task:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawTask {
    /// The mapping.
    pub at: Pos,
    /// `task.text` (may contain newlines).
    pub text: Option<Located<String>>,
    /// `task.file`.
    pub file: Option<Located<String>>,
}

/// An image reference and its opt-out flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawImage {
    /// `image`.
    pub image: Option<Located<String>>,
    /// `unpinned_local_image`.
    pub unpinned_local_image: Option<Located<bool>>,
}

/// `agent:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawAgent {
    /// The mapping.
    pub at: Pos,
    /// `agent.image` + `agent.unpinned_local_image`.
    pub image: RawImage,
    /// `agent.command`: the list node and its items.
    pub command: Option<Located<Vec<Located<String>>>>,
    /// `agent.env`.
    pub env: Option<Located<Vec<Located<String>>>>,
    /// `agent.timeout`.
    pub timeout: Option<Located<String>>,
    /// `agent.resources`.
    pub resources: Option<RawResources>,
}

/// `agent.resources:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResources {
    /// `memory`, e.g. `2G`.
    pub memory: Option<Located<String>>,
    /// `cpus` as written (a plain decimal number such as `1.5`).
    pub cpus: Option<Located<String>>,
    /// `pids` as written (a plain decimal integer).
    pub pids: Option<Located<String>>,
}

/// `gate:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawGate {
    /// The mapping.
    pub at: Pos,
    /// `gate.image` + `gate.unpinned_local_image`.
    pub image: RawImage,
    /// `gate.command`.
    pub command: Option<Located<Vec<Located<String>>>>,
    /// `gate.quick` (optional).
    pub quick: Option<Located<Vec<Located<String>>>>,
    /// `gate.timeout`.
    pub timeout: Option<Located<String>>,
}

/// `egress:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEgress {
    /// `egress.allow`.
    pub allow: Option<Located<Vec<Located<String>>>>,
    /// `egress.ports`, each as written (plain decimal integers).
    pub ports: Option<Located<Vec<Located<String>>>>,
    /// `egress.report_only`.
    pub report_only: Option<Located<bool>>,
}

/// One entry of `mounts:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawMount {
    /// The entry.
    pub at: Pos,
    /// `source`.
    pub source: Option<Located<String>>,
    /// `target`.
    pub target: Option<Located<String>>,
    /// `read_only`.
    pub read_only: Option<Located<bool>>,
}

/// One entry of `services:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawService {
    /// The entry.
    pub at: Pos,
    /// `name`.
    pub name: Option<Located<String>>,
    /// `image` + `unpinned_local_image`.
    pub image: RawImage,
    /// `command`.
    pub command: Option<Located<Vec<Located<String>>>>,
    /// `env`.
    pub env: Option<Located<Vec<Located<String>>>>,
    /// `port` as written (absent: cyclix picks a free one per run).
    pub port: Option<Located<String>>,
    /// `data`: the container path of the per-run data volume.
    pub data: Option<Located<String>>,
    /// `health`.
    pub health: Option<RawHealth>,
}

/// `services[i].health:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawHealth {
    /// The mapping.
    pub at: Pos,
    /// `command`: the argv of the check.
    pub command: Option<Located<Vec<Located<String>>>>,
    /// `interval`, e.g. `1s`.
    pub interval: Option<Located<String>>,
    /// `timeout`, e.g. `5s`.
    pub timeout: Option<Located<String>>,
    /// `retries` as written (a plain decimal integer).
    pub retries: Option<Located<String>>,
    /// `start_period`, e.g. `10s`.
    pub start_period: Option<Located<String>>,
}

/// `schedule:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSchedule {
    /// The mapping.
    pub at: Pos,
    /// `on_calendar`.
    pub on_calendar: Option<Located<String>>,
    /// `persistent`.
    pub persistent: Option<Located<bool>>,
    /// `randomized_delay`.
    pub randomized_delay: Option<Located<String>>,
}

/// `delivery:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawDelivery {
    /// The mapping.
    pub at: Pos,
    /// `remote`.
    pub remote: Option<Located<String>>,
    /// `branch`.
    pub branch: Option<Located<String>>,
    /// `push`.
    pub push: Option<Located<bool>>,
    /// `allow_paths`.
    pub allow_paths: Option<Located<Vec<Located<String>>>>,
    /// `hold_paths`.
    pub hold_paths: Option<Located<Vec<Located<String>>>>,
    /// `lock_wait`, e.g. `10m`.
    pub lock_wait: Option<Located<String>>,
}

// ---------------------------------------------------------------------------------------------
// Reusable pure helpers
// ---------------------------------------------------------------------------------------------

/// Checks a tenant or service name: `^[a-z][a-z0-9-]{0,30}$` and no trailing `-`. The name
/// becomes a systemd unit instance and part of container names, so it is stricter than
/// systemd's own rules (`src/basic/unit-name.c`) and never escaped.
///
/// # Errors
/// A lowercase message saying which rule the name breaks.
pub fn tenant_name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("name is empty".into());
    }
    if s.len() > 31 {
        return Err(format!(
            "name `{s}` is {} characters long; the limit is 31",
            s.len()
        ));
    }
    let Some(first) = s.chars().next() else {
        return Err("name is empty".into());
    };
    if !first.is_ascii_lowercase() {
        return Err(format!("name `{s}` must start with a lowercase letter a-z"));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "name `{s}` contains `{c}`; only a-z, 0-9 and `-` are allowed"
        ));
    }
    if s.ends_with('-') {
        return Err(format!("name `{s}` must not end with `-`"));
    }
    Ok(())
}

/// Checks a run id: `^[a-z0-9][a-z0-9-]{0,47}$`, no trailing `-`, no `--`.
///
/// # Errors
/// A lowercase message saying which rule the id breaks.
pub fn run_id(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("run id is empty".into());
    }
    if s.len() > 48 {
        return Err(format!(
            "run id `{s}` is {} characters long; the limit is 48",
            s.len()
        ));
    }
    if s.starts_with('-') {
        return Err(format!("run id `{s}` must start with a-z or 0-9"));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "run id `{s}` contains `{c}`; only a-z, 0-9 and `-` are allowed"
        ));
    }
    if s.ends_with('-') {
        return Err(format!("run id `{s}` must not end with `-`"));
    }
    if s.contains("--") {
        return Err(format!("run id `{s}` must not contain `--`"));
    }
    Ok(())
}

/// Proxy variables the agent must never override (any letter case): cyclix sets them to the
/// run's egress proxy (security-cases §2 N16, §4 "Env vars").
const PROXY_VARS: [&str; 5] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "FTP_PROXY",
];

/// Checks an environment variable name handed to a container: `[A-Z_][A-Z0-9_]*`, and not one
/// of the denied names: `LD_*` (dynamic loader), the proxy variables in any case
/// (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`, `ALL_PROXY`, `FTP_PROXY`), `PATH`, `HOME`, and
/// `CYCLIX_*` (cyclix's own).
///
/// # Errors
/// A lowercase message naming the rule.
pub fn env_name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("variable name is empty".into());
    }
    let upper = s.to_ascii_uppercase();
    if PROXY_VARS.contains(&upper.as_str()) {
        return Err(format!(
            "`{s}` is not allowed: cyclix sets the proxy variables to the run's egress proxy"
        ));
    }
    let first_ok = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_');
    if !first_ok
        || !s
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    {
        return Err(format!(
            "`{s}` is not a valid variable name; use [A-Z_][A-Z0-9_]* (uppercase letters, digits, `_`)"
        ));
    }
    if s.starts_with("LD_") {
        return Err(format!(
            "`{s}` is not allowed: LD_* variables control the dynamic loader"
        ));
    }
    if s == "PATH" || s == "HOME" {
        return Err(format!("`{s}` is not allowed: the image defines it"));
    }
    if s.starts_with("CYCLIX_") {
        return Err(format!(
            "`{s}` is not allowed: CYCLIX_* variables are set by cyclix"
        ));
    }
    Ok(())
}

/// Parses one egress allowlist entry: an exact host (`pypi.org`) or a leading wildcard
/// (`*.pythonhosted.org`, any name strictly below it).
///
/// Normalises: lowercase, one trailing dot stripped, IDN converted to punycode (UTS 46 via the
/// `idna` crate, STD3 rules). Rejects: empty entries, schemes, paths, userinfo, ports (they go
/// in `egress.ports`), IP literals in any encoding (`1.2.3.4`, `[::1]`, `127.1`, `0x7f000001`,
/// `2130706433`, `0177.0.0.1`: any name whose last label is numeric, as the WHATWG URL
/// parser reads it), a bare `*`, `*` anywhere but a leading `*.` (`*x.com`, `a.*.com`),
/// single-label names (`localhost`, `*.com`), whitespace and labels outside `[a-z0-9-]`.
///
/// # Errors
/// A lowercase message saying what is wrong with the entry.
pub fn host_pattern(s: &str) -> Result<HostPattern, String> {
    if s.is_empty() {
        return Err("empty host".into());
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("`{s}` contains whitespace or a control character"));
    }
    if s.contains("://") {
        return Err(format!("`{s}` has a scheme; write the host name only"));
    }
    if s.contains('/') {
        return Err(format!("`{s}` has a path; write the host name only"));
    }
    if s.contains('@') {
        return Err(format!("`{s}` has a user part; write the host name only"));
    }
    if s.starts_with('[') || s.matches(':').count() > 1 {
        return Err(format!(
            "`{s}` is an IP address; only host names are allowed"
        ));
    }
    if s.contains(':') {
        return Err(format!(
            "`{s}` has a port; write the host name only and list ports in `egress.ports`"
        ));
    }
    if s == "*" || s == "*." {
        return Err("a bare `*` would allow every host".into());
    }
    let (wildcard, rest) = match s.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    if rest.contains('*') {
        return Err(format!(
            "`{s}`: `*` is allowed only as a leading `*.` (as in `*.example.com`)"
        ));
    }
    let rest = rest.strip_suffix('.').unwrap_or(rest);
    if rest.is_empty() {
        return Err(format!("`{s}` has no host name"));
    }
    let ascii = idna::domain_to_ascii_strict(rest)
        .map_err(|_| format!("`{s}` is not a valid host name"))?;
    let labels: Vec<&str> = ascii.split('.').collect();
    for label in &labels {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!(
                "`{s}` is not a valid host name (label `{label}`): use a-z, 0-9 and `-`"
            ));
        }
    }
    if labels.last().is_some_and(|l| is_numeric_label(l)) {
        return Err(format!(
            "`{s}` is an IP address; only host names are allowed"
        ));
    }
    if labels.len() < 2 {
        return Err(if wildcard {
            format!("`{s}` is too broad: it covers a whole top-level domain")
        } else {
            format!("`{s}` is a single-label name; write a fully qualified host name")
        });
    }
    Ok(if wildcard {
        HostPattern::Subdomains(ascii)
    } else {
        HostPattern::Exact(ascii)
    })
}

/// Whether a label is a number the way URL parsers read IPv4 parts: decimal, octal (leading 0)
/// or hex (`0x`, possibly empty).
fn is_numeric_label(label: &str) -> bool {
    if let Some(hex) = label.strip_prefix("0x") {
        return hex.chars().all(|c| c.is_ascii_hexdigit());
    }
    !label.is_empty() && label.chars().all(|c| c.is_ascii_digit())
}

/// Parses a duration string `^(\d+h)?(\d+m)?(\d+s)?$` (non-empty, parts in that order) into
/// seconds: `90s`, `30m`, `2h`, `1h30m`. Ranges are the caller's rule.
///
/// # Errors
/// A lowercase message when the string has another shape or overflows.
pub fn duration_s(s: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "`{s}` is not a duration; write hours, minutes and seconds like `90s`, `30m`, `1h30m`"
        )
    };
    if s.is_empty() {
        return Err(bad());
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    let mut last_unit = 0; // 0 = none yet, 1 = h, 2 = m, 3 = s: units must ascend
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let (rank, factor) = match c {
            'h' => (1, 3600),
            'm' => (2, 60),
            's' => (3, 1),
            _ => return Err(bad()),
        };
        if digits.is_empty() || rank <= last_unit {
            return Err(bad());
        }
        let n: u64 = digits.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(factor)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("`{s}` is too long a duration"))?;
        digits.clear();
        last_unit = rank;
    }
    if !digits.is_empty() {
        return Err(format!(
            "`{s}` has no unit; add one: `{digits}s`, `{digits}m` or `{digits}h`"
        ));
    }
    Ok(total)
}

// ---------------------------------------------------------------------------------------------
// Validation of the whole spec
// ---------------------------------------------------------------------------------------------

/// Agent timeout bounds and default, in seconds (10s–24h, default 30m).
const AGENT_TIMEOUT: (u64, u64, u64) = (10, 24 * 3600, 30 * 60);
/// Gate timeout bounds and default, in seconds (10s–6h, default 10m).
const GATE_TIMEOUT: (u64, u64, u64) = (10, 6 * 3600, 10 * 60);
/// Randomized delay bounds and default, in seconds (0–24h, default 0).
const RANDOM_DELAY: (u64, u64, u64) = (0, 24 * 3600, 0);
/// Memory limit bounds, in bytes (16 MiB–1 TiB).
const MEMORY_RANGE: (u64, u64) = (16 << 20, 1 << 40);
/// CPU limit bounds, in thousandths of a CPU (0.01–256).
const CPU_MILLI_RANGE: (u32, u32) = (10, 256_000);
/// Process limit bounds (16–65536).
const PIDS_RANGE: (u32, u32) = (16, 65_536);
/// Service port bounds (1024–65535): unprivileged ports inside the pod.
const SERVICE_PORT_RANGE: (u16, u16) = (1024, 65_535);
/// Health check interval bounds and default, in seconds (1s–5m, default 1s).
const HEALTH_INTERVAL: (u64, u64, u64) = (1, 300, 1);
/// Health check timeout bounds and default, in seconds (1s–5m, default 5s).
const HEALTH_TIMEOUT: (u64, u64, u64) = (1, 300, 5);
/// Health check start period bounds and default, in seconds (0–10m, default 0).
const HEALTH_START_PERIOD: (u64, u64, u64) = (0, 600, 0);
/// Health check retries bounds and default (1–1000, default 30).
const HEALTH_RETRIES: (u32, u32, u32) = (1, 1000, 30);
/// `delivery.lock_wait`: (min, max, default) in seconds.
const LOCK_WAIT: (u64, u64, u64) = (0, 6 * 3600, 10 * 60);
/// The variables cyclix sets in every service container (see `render::plan`); a service's
/// `env` may not name them, or a secret would silently replace the run's value.
pub const SERVICE_RESERVED_ENV: &[&str] =
    &["PGHOST", "PGPORT", "PGDATABASE", "PGDATA", "POSTGRES_DB"];

/// Validates a decoded spec against the semantic rules, appending one diagnostic per problem
/// to `out`. Returns the validated spec when every required part was present and valid.
///
/// `ctx.home` expands `~/`; `ctx.runtime_dir` is never mountable.
#[must_use]
pub fn spec(raw: &RawSpec, ctx: &SpecContext, out: &mut Vec<Diagnostic>) -> Option<Spec> {
    let before = out.len();
    let tenant = raw.tenant.as_ref().and_then(|t| {
        tenant_name(&t.value)
            .map_err(|e| {
                out.push(
                    t.diag(format!("invalid tenant: {e}"))
                        .hint("use 1-31 characters: a-z first, then a-z, 0-9 or `-`"),
                );
            })
            .ok()
            .map(|()| t.value.clone())
    });
    let repo = raw.repo.as_ref().and_then(|r| repo(r, ctx, out));
    let tier = match &raw.tier {
        None => Some(Tier::Container),
        Some(t) => Tier::parse(&t.value).or_else(|| {
            let names = ["direct", "worktree", "container"];
            let mut d = t.diag(format!("unknown tier `{}`", t.value));
            d = d.hint(match nearest(&t.value, &names) {
                Some(n) => format!("did you mean `{n}`? tiers: direct, worktree, container"),
                None => "tiers: direct, worktree, container".into(),
            });
            out.push(d);
            None
        }),
    };
    let legacy = raw.worktree_isolation.as_ref().is_some_and(|b| b.value);
    let task = raw.task.as_ref().and_then(|t| task(t, ctx, out));
    let agent = raw.agent.as_ref().and_then(|a| agent(a, out));
    let gate = raw.gate.as_ref().and_then(|g| gate(g, out));
    let egress = match &raw.egress {
        None => Some(Egress {
            allow: Vec::new(),
            ports: vec![443],
            report_only: false,
        }),
        Some(e) => egress(e, out),
    };
    let mounts = mounts(&raw.mounts, repo.as_ref(), ctx, out);
    let services = services(&raw.services, out);
    let schedule = match &raw.schedule {
        None => Some(None),
        Some(s) => schedule(s, out).map(Some),
    };
    let delivery = match &raw.delivery {
        None => Some(None),
        Some(d) => delivery(d, tier, out).map(Some),
    };
    if out.len() != before {
        return None;
    }
    Some(Spec {
        tenant: tenant?,
        repo: repo?,
        tier: tier?,
        legacy_worktree_isolation: legacy,
        task: task?,
        agent: agent?,
        gate: gate?,
        egress: egress?,
        mounts: mounts?,
        services: services?,
        schedule: schedule?,
        delivery: delivery?,
    })
}

fn repo(r: &RawRepo, ctx: &SpecContext, out: &mut Vec<Diagnostic>) -> Option<Repo> {
    // The project is bind-mounted read-write into the sandbox: same path rules as a mount.
    let path = r.path.as_ref().and_then(|p| {
        let norm = mount_path(p, Some(&ctx.home), out)?;
        if let Some(reason) = exposes_host(&norm, ctx) {
            out.push(
                p.diag(format!("project path `{norm}` {reason}"))
                    .hint("point `repo.path` at the project's git work tree"),
            );
            return None;
        }
        Some(norm)
    });
    let base = r.base.as_ref().and_then(|b| {
        git_ref(&b.value)
            .map_err(|e| {
                out.push(b.diag(format!("invalid base: {e}")).hint(
                    "give a branch or tag name (`main`, `release/1.2`) or a 7-64 digit hex commit id",
                ));
            })
            .ok()
            .map(|()| b.value.clone())
    });
    Some(Repo {
        path: path?,
        base: base?,
    })
}

fn task(t: &RawTask, ctx: &SpecContext, out: &mut Vec<Diagnostic>) -> Option<Task> {
    match (&t.text, &t.file) {
        (Some(_), Some(file)) => {
            out.push(
                file.diag("`task` has both `text` and `file`")
                    .hint("keep exactly one of `task.text` and `task.file`"),
            );
            None
        }
        (None, None) => {
            out.push(
                t.at.diag("`task` needs `text` or `file`")
                    .hint("add `text: |` with the prompt, or `file: ~/tasks/NAME.md`"),
            );
            None
        }
        (Some(text), None) => {
            if text.value.trim().is_empty() {
                out.push(
                    text.diag("task text is empty")
                        .hint("write the prompt for the agent"),
                );
                None
            } else {
                Some(Task::Text(text.value.clone()))
            }
        }
        (None, Some(file)) => {
            let norm = host_path(file, ctx, out)?;
            if let Some(denied) = denied_root(&norm, ctx) {
                out.push(
                    file.diag(format!("task file `{norm}` is under {denied}"))
                        .hint("keep task files in an ordinary directory, e.g. ~/tasks/"),
                );
                return None;
            }
            Some(Task::File(norm))
        }
    }
}

fn agent(a: &RawAgent, out: &mut Vec<Diagnostic>) -> Option<Agent> {
    let image = image(&a.image, out);
    let command = argv(a.command.as_ref(), true, out);
    let env = env_list(a.env.as_ref(), out);
    let timeout_s = bounded_duration(a.timeout.as_ref(), AGENT_TIMEOUT, out);
    let resources = match &a.resources {
        None => Some(Resources::default()),
        Some(r) => resources(r, out),
    };
    Some(Agent {
        image: image?,
        command: command?,
        env: env?,
        timeout_s: timeout_s?,
        resources: resources?,
    })
}

fn gate(g: &RawGate, out: &mut Vec<Diagnostic>) -> Option<Gate> {
    let image = image(&g.image, out);
    let command = argv(g.command.as_ref(), true, out);
    let quick = match g.quick.as_ref() {
        None => Some(None),
        Some(list) if list.value.is_empty() => {
            out.push(
                list.diag("`quick` is empty")
                    .hint("give the quick suite's argv, e.g. [python3, -m, pytest, -q, -x], or remove the key to use `gate.command`"),
            );
            None
        }
        Some(list) => argv(Some(list), true, out).map(Some),
    };
    let timeout_s = bounded_duration(g.timeout.as_ref(), GATE_TIMEOUT, out);
    Some(Gate {
        image: image?,
        command: command?,
        quick: quick?,
        timeout_s: timeout_s?,
    })
}

fn egress(e: &RawEgress, out: &mut Vec<Diagnostic>) -> Option<Egress> {
    let before = out.len();
    let mut allow = BTreeSet::new();
    if let Some(list) = &e.allow {
        for entry in &list.value {
            match host_pattern(&entry.value) {
                Ok(p) => {
                    allow.insert(p);
                }
                Err(msg) => out.push(entry.diag(format!("invalid allowlist entry: {msg}")).hint(
                    "write an exact host (`pypi.org`) or a leading wildcard (`*.pythonhosted.org`)",
                )),
            }
        }
    }
    let mut ports = BTreeSet::new();
    match &e.ports {
        None => {
            ports.insert(443);
        }
        Some(list) => {
            if list.value.is_empty() {
                out.push(
                    list.diag("`ports` is empty")
                        .hint("list at least one port, or remove the key for the default [443]"),
                );
            }
            for p in &list.value {
                match decimal_int(&p.value).and_then(|n| u16::try_from(n).ok()) {
                    Some(n) if n >= 1 => {
                        ports.insert(n);
                    }
                    _ => out.push(
                        p.diag(format!("port `{}` is out of range", p.value))
                            .hint("use a port number from 1 to 65535"),
                    ),
                }
            }
        }
    }
    if out.len() != before {
        return None;
    }
    Some(Egress {
        allow: allow.into_iter().collect(),
        ports: ports.into_iter().collect(),
        report_only: e.report_only.as_ref().is_some_and(|b| b.value),
    })
}

fn mounts(
    raw: &[RawMount],
    repo: Option<&Repo>,
    ctx: &SpecContext,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<Mount>> {
    let before = out.len();
    let mut result = Vec::new();
    let mut targets: Vec<(String, &Located<String>)> = Vec::new();
    for m in raw {
        let read_only = m.read_only.as_ref().is_none_or(|b| b.value);
        let source = m.source.as_ref().and_then(|s| {
            let norm = mount_path(s, Some(&ctx.home), out)?;
            mount_source_rules(s, &norm, read_only, m.read_only.as_ref(), repo, ctx, out)
                .then_some(norm)
        });
        let target = m.target.as_ref().and_then(|t| {
            let norm = mount_path(t, None, out)?;
            let comps = components(&norm);
            if comps.first() != Some(&"mnt") || comps.len() < 2 {
                out.push(
                    t.diag(format!("mount target `{norm}` is not under /mnt/"))
                        .hint("mount extra data at a path such as /mnt/data"),
                );
                return None;
            }
            for (other, at) in &targets {
                if is_within(&norm, other) || is_within(other, &norm) {
                    out.push(
                        t.diag(format!(
                            "mount target `{norm}` overlaps `{other}` (line {})",
                            at.line
                        ))
                        .hint("give every mount its own directory under /mnt/"),
                    );
                    return None;
                }
            }
            targets.push((norm.clone(), t));
            Some(norm)
        });
        if let (Some(source), Some(target), Some(at)) = (source, target, m.source.as_ref()) {
            result.push(Mount {
                source,
                target,
                read_only,
                source_line: at.line,
                source_column: at.column,
            });
        }
    }
    (out.len() == before).then_some(result)
}

/// Roots never mounted into a sandbox or read for a task: kernel and device interfaces and
/// runtime directories holding sockets (the podman and D-Bus sockets among them).
fn denied_root<'a>(norm: &str, ctx: &'a SpecContext) -> Option<&'a str> {
    [
        "/proc",
        "/sys",
        "/dev",
        "/run",
        "/var/run",
        ctx.runtime_dir.as_str(),
    ]
    .into_iter()
    .find(|denied| !denied.is_empty() && is_within(norm, denied))
}

/// Directories in the home directory that hold credentials or state no sandbox may see, even
/// read-only: keys, tokens, the tenants' env files (`~/.config`), podman's storage (with its
/// secrets), cyclix's worktrees and records. The rule for `repo.path` (bound at `/work`);
/// `mounts:` sources follow the wider [`mount_guard`] set.
const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".config",
    ".local/share/containers",
    ".local/share/cyclix/worktrees",
    ".local/state/cyclix",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".password-store",
];

/// Why bind-mounting `norm` would hand the sandbox part of the host, if it would: `/`, the home
/// directory or one of its ancestors, or a [`denied_root`].
fn exposes_host(norm: &str, ctx: &SpecContext) -> Option<String> {
    if norm == "/" || is_within(&ctx.home, norm) {
        return Some("would expose your whole home directory (~/.ssh included)".into());
    }
    if let Some(dir) = HOME_SECRETS
        .iter()
        .find(|d| is_within(norm, &format!("{}/{d}", ctx.home)))
    {
        return Some(format!(
            "is under ~/{dir}, which holds credentials or cyclix's own state (other tenants' secrets, records, podman storage)"
        ));
    }
    denied_root(norm, ctx)
        .map(|denied| format!("is under {denied}, which is never mounted into a sandbox"))
}

/// The protected paths validation can name alone (see [`super::mount_guard`]): the home
/// directory and what it holds, the project and its `.git`, cyclix's runtime directory. The
/// XDG directories as set, podman's real storage and git dirs on disk are added by
/// `host::mount_scan`.
fn protected(repo: Option<&Repo>, ctx: &SpecContext) -> Vec<mount_guard::Protected> {
    let mut v = mount_guard::home_paths(&ctx.home);
    if let Some(repo) = repo {
        v.extend(mount_guard::repo_paths(&repo.path));
    }
    let home = ctx.home.trim_end_matches('/');
    v.extend(mount_guard::cyclix_paths(
        &format!("{home}/.config"),
        &format!("{home}/.local/share"),
        &format!("{home}/.local/state"),
        (!ctx.runtime_dir.is_empty()).then_some(ctx.runtime_dir.as_str()),
    ));
    v
}

/// Source rules for a mount; reports and returns false when one is broken.
fn mount_source_rules(
    s: &Located<String>,
    norm: &str,
    read_only: bool,
    ro_flag: Option<&Located<bool>>,
    repo: Option<&Repo>,
    ctx: &SpecContext,
    out: &mut Vec<Diagnostic>,
) -> bool {
    if let Some(denied) = denied_root(norm, ctx) {
        out.push(
            s.diag(format!(
                "mount source `{norm}` is under {denied}, which is never mounted into a sandbox"
            ))
            .hint("mount a directory with only the data the agent needs"),
        );
        return false;
    }
    let protected = protected(repo, ctx);
    if let Some(c) = mount_guard::conflict(norm, &protected) {
        let (message, fix) = mount_guard::explain(norm, &c);
        out.push(s.diag(message).hint(fix));
        return false;
    }
    let comps = components(norm);
    if let Some(i) = comps.iter().position(|c| *c == ".git") {
        let found = format!("/{}", comps.get(..=i).unwrap_or_default().join("/"));
        let how = if i + 1 == comps.len() {
            "is"
        } else {
            "lies inside"
        };
        let (message, fix) = mount_guard::explain_git(norm, how, &found);
        out.push(s.diag(message).hint(fix));
        return false;
    }
    let file_name = norm.rsplit('/').next().unwrap_or_default();
    if file_name.to_ascii_lowercase().ends_with(".sock") {
        out.push(
            s.diag(format!(
                "mount source `{norm}` looks like a container-engine socket; mounting it hands over the host, even read-only"
            ))
            .hint("remove this mount"),
        );
        return false;
    }
    if !read_only
        && let Some(repo) = repo
        && !is_within(norm, &repo.path)
    {
        let message = format!(
            "writable mount `{norm}` is outside the project `{}`",
            repo.path
        );
        out.push(
            ro_flag
                .map_or_else(|| s.diag(message.clone()), |f| f.diag(message.clone()))
                .hint("set `read_only: true`: the agent writes only to its checkout at /work"),
        );
        return false;
    }
    true
}

fn services(raw: &[RawService], out: &mut Vec<Diagnostic>) -> Option<Vec<Service>> {
    let before = out.len();
    let mut result = Vec::new();
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut ports: BTreeMap<u16, usize> = BTreeMap::new();
    for s in raw {
        let name = s.name.as_ref().and_then(|n| {
            if let Err(e) = tenant_name(&n.value) {
                out.push(
                    n.diag(format!("invalid service name: {e}"))
                        .hint("use 1-31 characters: a-z first, then a-z, 0-9 or `-`"),
                );
                return None;
            }
            if let Some(line) = names.get(&n.value) {
                out.push(
                    n.diag(format!(
                        "service `{}` is defined twice (first at line {line})",
                        n.value
                    ))
                    .hint("give every service its own name"),
                );
                return None;
            }
            names.insert(n.value.clone(), n.line);
            Some(n.value.clone())
        });
        let image = image(&s.image, out);
        let command = argv(s.command.as_ref(), false, out);
        let env = env_list(s.env.as_ref(), out).filter(|_| not_reserved(s.env.as_ref(), out));
        let port = match s.port.as_ref() {
            None => Some(None),
            Some(p) => fixed_port(p, &mut ports, out).map(Some),
        };
        let data = match s.data.as_ref() {
            None => Some(None),
            Some(d) => data_path(d, out).map(Some),
        };
        let health = match s.health.as_ref() {
            None => Some(None),
            Some(h) => health(h, out).map(Some),
        };
        if let (
            Some(name),
            Some(image),
            Some(command),
            Some(env),
            Some(port),
            Some(data),
            Some(health),
        ) = (name, image, command, env, port, data, health)
        {
            result.push(Service {
                name,
                image,
                command,
                env,
                port,
                data,
                health,
            });
        }
    }
    (out.len() == before).then_some(result)
}

/// Whether a service's `env` leaves alone the variables cyclix sets
/// ([`SERVICE_RESERVED_ENV`]); reports each one it names.
fn not_reserved(list: Option<&Located<Vec<Located<String>>>>, out: &mut Vec<Diagnostic>) -> bool {
    let mut ok = true;
    for at in list.map_or(&[][..], |l| l.value.as_slice()) {
        if SERVICE_RESERVED_ENV.contains(&at.value.as_str()) {
            out.push(
                at.diag(format!("`{}` is set by cyclix for every service", at.value))
                    .hint(format!(
                        "remove it: cyclix sets {} to the run's own values",
                        SERVICE_RESERVED_ENV.join(", ")
                    )),
            );
            ok = false;
        }
    }
    ok
}

/// `services[i].port`: in range and not another service's.
fn fixed_port(
    p: &Located<String>,
    ports: &mut BTreeMap<u16, usize>,
    out: &mut Vec<Diagnostic>,
) -> Option<u16> {
    let (lo, hi) = SERVICE_PORT_RANGE;
    let Some(n) = decimal_int(&p.value)
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| (lo..=hi).contains(n))
    else {
        out.push(
            p.diag(format!("service port `{}` is out of range", p.value))
                .hint(format!(
                    "use a port from {lo} to {hi}, or remove `port` and cyclix picks a free one per run"
                )),
        );
        return None;
    };
    if let Some(line) = ports.get(&n) {
        out.push(
            p.diag(format!(
                "port {n} is already used by another service (line {line})"
            ))
            .hint("give every service its own port, or remove `port` and cyclix picks one"),
        );
        return None;
    }
    ports.insert(n, p.line);
    Some(n)
}

/// `services[i].data`: an absolute, normalised container path for the per-run data volume;
/// not `/`, and not under the kernel's or cyclix's own paths.
fn data_path(d: &Located<String>, out: &mut Vec<Diagnostic>) -> Option<String> {
    if !d.value.starts_with('/') {
        out.push(
            d.diag(format!("data path `{}` is not absolute", d.value))
                .hint("write the path inside the service container, e.g. /var/lib/postgresql/data"),
        );
        return None;
    }
    let norm = mount_path(d, None, out)?;
    let first = components(&norm).first().copied();
    match first {
        None => {
            out.push(d.diag("data path `/` would hide the whole image").hint(
                "write the directory the service keeps its data in, e.g. /var/lib/postgresql/data",
            ));
            None
        }
        Some(top @ ("proc" | "sys" | "dev" | "run" | "tmp" | "cyclix" | "work")) => {
            out.push(
                d.diag(format!("data path `{norm}` is under /{top}, which the container runtime or cyclix owns"))
                    .hint("write the directory the service keeps its data in, e.g. /var/lib/postgresql/data"),
            );
            None
        }
        Some(_) => Some(norm),
    }
}

/// `services[i].health`: the check's argv and its timing, with the defaults applied.
fn health(h: &RawHealth, out: &mut Vec<Diagnostic>) -> Option<Health> {
    let command = argv(h.command.as_ref(), true, out);
    let interval_s = bounded_duration(h.interval.as_ref(), HEALTH_INTERVAL, out);
    let timeout_s = bounded_duration(h.timeout.as_ref(), HEALTH_TIMEOUT, out);
    let start_period_s = bounded_duration(h.start_period.as_ref(), HEALTH_START_PERIOD, out);
    let (lo, hi, default) = HEALTH_RETRIES;
    let retries = match &h.retries {
        None => Some(default),
        Some(r) => {
            let n = decimal_int(&r.value)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| (lo..=hi).contains(n));
            if n.is_none() {
                out.push(
                    r.diag(format!("retries `{}` is out of range", r.value))
                        .hint(format!("use a number of retries from {lo} to {hi}")),
                );
            }
            n
        }
    };
    Some(Health {
        command: command?,
        interval_s: interval_s?,
        timeout_s: timeout_s?,
        retries: retries?,
        start_period_s: start_period_s?,
    })
}

fn schedule(s: &RawSchedule, out: &mut Vec<Diagnostic>) -> Option<Schedule> {
    let on_calendar = s.on_calendar.as_ref().and_then(|c| {
        calendar(&c.value)
            .map_err(|e| {
                out.push(c.diag(e).hint(
                    "use e.g. `daily`, `hourly`, `*-*-* 02:00:00` or `Mon..Fri 03:00` (systemd.time(7)); runs at most every 5 minutes",
                ));
            })
            .ok()
            .map(|()| c.value.clone())
    });
    let randomized_delay_s = bounded_duration(s.randomized_delay.as_ref(), RANDOM_DELAY, out);
    Some(Schedule {
        on_calendar: on_calendar?,
        persistent: s.persistent.as_ref().is_none_or(|b| b.value),
        randomized_delay_s: randomized_delay_s?,
    })
}

fn delivery(d: &RawDelivery, tier: Option<Tier>, out: &mut Vec<Diagnostic>) -> Option<Delivery> {
    if tier == Some(Tier::Direct) {
        out.push(
            d.at.diag(
                "tier `direct` has no run branch to deliver: its agent commits on your checkout",
            )
            .hint("remove `delivery:` or use tier `worktree` or `container`"),
        );
        return None;
    }
    let remote = d.remote.as_ref().and_then(|r| {
        remote_name(&r.value)
            .map_err(|e| {
                out.push(r.diag(format!("invalid remote: {e}")).hint(
                    "name a remote of the repository (`git remote` lists them), e.g. `origin`",
                ));
            })
            .ok()
            .map(|()| r.value.clone())
    });
    let branch = match &d.branch {
        None => Some(None),
        Some(b) => branch_name(&b.value)
            .map_err(|e| {
                out.push(b.diag(format!("invalid branch: {e}")).hint(
                    "give a branch name without `refs/heads/`, e.g. `cyclix/acme/nightly`; leave it out for `cyclix/TENANT/RUN`",
                ));
            })
            .ok()
            .map(|()| Some(b.value.clone())),
    };
    let allow_paths = path_patterns(d.allow_paths.as_ref(), out);
    let hold_paths = path_patterns(d.hold_paths.as_ref(), out);
    let lock_wait_s = bounded_duration(d.lock_wait.as_ref(), LOCK_WAIT, out);
    Some(Delivery {
        remote: remote?,
        branch: branch?,
        push: d.push.as_ref().is_none_or(|b| b.value),
        allow_paths: allow_paths?,
        hold_paths: hold_paths?,
        lock_wait_s: lock_wait_s?,
    })
}

/// A remote name as `git remote add` takes it, restricted to `[A-Za-z0-9._-]` (no URL: the
/// remote's URL, credentials and ssh settings come from the user's repository).
fn remote_name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("the name is empty".into());
    }
    if s.starts_with(['-', '.']) {
        let first = s.chars().next().unwrap_or('-');
        return Err(format!("`{s}` starts with `{first}`"));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "`{s}` contains `{}`: give the remote's name, not a URL or path",
            c.escape_default()
        ));
    }
    git_ref(s)
}

/// A branch name on the remote: a valid ref name (`git check-ref-format --branch`), not
/// `HEAD`, not spelled as a full ref.
fn branch_name(s: &str) -> Result<(), String> {
    git_ref(s)?;
    if s == "HEAD" || s.starts_with("refs/") {
        return Err(format!("`{s}` is not a plain branch name"));
    }
    Ok(())
}

/// `delivery.allow_paths` / `hold_paths`: each a relative path in the repository: `dir/` (a
/// directory and everything below), `path` (one file) or `**/name` (a file or directory name
/// at any depth). No `..`, `.` components, absolute paths, empty components or glob
/// characters other than the leading `**/`.
fn path_patterns(
    raw: Option<&Located<Vec<Located<String>>>>,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let Some(raw) = raw else {
        return Some(Vec::new());
    };
    let before = out.len();
    let mut list = Vec::new();
    for p in &raw.value {
        match path_pattern(&p.value) {
            Ok(()) => list.push(p.value.clone()),
            Err(e) => out.push(p.diag(e).hint(
                "write a path relative to the repository: `dir/`, `file` or `**/name`, e.g. `.github/workflows/`",
            )),
        }
    }
    (out.len() == before).then_some(list)
}

fn path_pattern(s: &str) -> Result<(), String> {
    let body = s.strip_prefix("**/").unwrap_or(s);
    let body = body.strip_suffix('/').unwrap_or(body);
    if body.is_empty() {
        return Err(format!("`{s}` names no path"));
    }
    if s.starts_with('/') {
        return Err(format!("`{s}` is absolute"));
    }
    if let Some(c) = body.chars().find(|c| matches!(c, '*' | '?' | '[' | '\\')) {
        return Err(format!(
            "`{s}` contains `{c}`: only a leading `**/` is a pattern"
        ));
    }
    for comp in body.split('/') {
        if comp.is_empty() || comp == "." || comp == ".." {
            return Err(format!("`{s}` has an empty, `.` or `..` component"));
        }
    }
    Ok(())
}

fn resources(r: &RawResources, out: &mut Vec<Diagnostic>) -> Option<Resources> {
    let before = out.len();
    let memory_bytes = r.memory.as_ref().and_then(|m| {
        memory(&m.value)
            .map_err(|e| {
                out.push(
                    m.diag(e)
                        .hint("write a size from 16M to 1T, e.g. `512M` or `2G`"),
                );
            })
            .ok()
    });
    let cpu_millis = r.cpus.as_ref().and_then(|c| {
        cpu_millis(&c.value)
            .map_err(|e| {
                out.push(
                    c.diag(e)
                        .hint("write a number of CPUs from 0.01 to 256, e.g. `1.5`"),
                );
            })
            .ok()
    });
    let pids = r.pids.as_ref().and_then(|p| {
        let (lo, hi) = PIDS_RANGE;
        let n = decimal_int(&p.value)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| (lo..=hi).contains(n));
        if n.is_none() {
            out.push(
                p.diag(format!("pids `{}` is out of range", p.value))
                    .hint(format!("use a process limit from {lo} to {hi}")),
            );
        }
        n
    });
    (out.len() == before).then_some(Resources {
        memory_bytes,
        cpu_millis,
        pids,
    })
}

// ---------------------------------------------------------------------------------------------
// Field rules
// ---------------------------------------------------------------------------------------------

/// Validates an image reference and its opt-out flag.
fn image(raw: &RawImage, out: &mut Vec<Diagnostic>) -> Option<Image> {
    let Some(img) = &raw.image else {
        // Missing `image` was reported by the decoder.
        return None;
    };
    let flag = raw.unpinned_local_image.as_ref();
    let unpinned_ok = flag.is_some_and(|f| f.value);
    let reference = img.value.as_str();
    let (name, digest) = match reference.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (reference, None),
    };
    if let Err(e) = image_name(name) {
        out.push(
            img.diag(format!("invalid image reference `{reference}`: {e}"))
                .hint("write REGISTRY/NAME@sha256:<64 hex>, e.g. ghcr.io/acme/agent@sha256:…"),
        );
        return None;
    }
    match digest {
        Some(d) => {
            let hex = d.strip_prefix("sha256:");
            let ok = hex.is_some_and(|h| {
                h.len() == 64
                    && h.chars()
                        .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
            });
            if !ok {
                out.push(
                    img.diag(format!(
                        "image digest `{d}` is not `sha256:` and 64 lowercase hex digits"
                    ))
                    .hint(
                        "copy the digest from `podman image inspect --format '{{.Digest}}' IMAGE`",
                    ),
                );
                return None;
            }
            if let Some(f) = flag.filter(|f| f.value) {
                out.push(
                    f.diag("`unpinned_local_image: true` is set but the image is pinned by digest")
                        .hint("remove `unpinned_local_image`, so the flag never claims an unpinned image"),
                );
                return None;
            }
            Some(Image::Pinned {
                reference: reference.to_owned(),
            })
        }
        None if unpinned_ok => {
            if name.starts_with("localhost/") {
                Some(Image::UnpinnedLocal {
                    reference: reference.to_owned(),
                })
            } else {
                let message = format!(
                    "`unpinned_local_image: true` is only allowed for `localhost/` images, not `{reference}`"
                );
                out.push(
                    flag.map_or_else(|| img.diag(message.clone()), |f| f.diag(message.clone()))
                        .hint("pin the image by digest: NAME@sha256:<64 hex>"),
                );
                None
            }
        }
        None => {
            out.push(
                img.diag(format!("image `{reference}` is not pinned by digest"))
                    .hint(if name.starts_with("localhost/") {
                        "pin it (NAME@sha256:<64 hex>) or, for a local build, set `unpinned_local_image: true`"
                    } else {
                        "pin it: NAME@sha256:<64 hex> (`podman image inspect --format '{{.Digest}}' IMAGE`)"
                    }),
            );
            None
        }
    }
}

/// Checks the name part (`registry/path[:tag]`) of an image reference.
fn image_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':')))
    {
        return Err(format!("`{c}` is not allowed in an image name"));
    }
    let parts: Vec<&str> = name.split('/').collect();
    let last = parts.len() - 1;
    for (i, part) in parts.iter().enumerate() {
        let is_domain = i == 0
            && last > 0
            && (part.contains('.') || part.contains(':') || *part == "localhost");
        let part = if i == last {
            match part.split_once(':') {
                Some((p, tag)) => {
                    let tag_ok = !tag.is_empty()
                        && tag.len() <= 128
                        && !tag.starts_with(['.', '-'])
                        && tag
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
                    if !tag_ok {
                        return Err(format!("invalid tag `{tag}`"));
                    }
                    p
                }
                None => part,
            }
        } else {
            part
        };
        let ok = if is_domain {
            !part.is_empty() && !part.starts_with(['.', '-', ':'])
        } else {
            !part.is_empty()
                && !part.contains(':')
                && part.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
                })
                && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                && part.ends_with(|c: char| c.is_ascii_alphanumeric())
        };
        if !ok {
            return Err(format!("invalid path component `{part}`"));
        }
    }
    Ok(())
}

/// Validates an argv list. `required`: the list must be present and non-empty.
fn argv(
    list: Option<&Located<Vec<Located<String>>>>,
    required: bool,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let Some(list) = list else {
        // A missing required `command` is reported by the decoder.
        return if required { None } else { Some(Vec::new()) };
    };
    if list.value.is_empty() {
        if required {
            out.push(
                list.diag("`command` is empty")
                    .hint("give the argv to run, e.g. [python3, -m, pytest, -q]"),
            );
            return None;
        }
        return Some(Vec::new());
    }
    let first = &list.value[0];
    let word = first.value.as_str();
    if word.is_empty() {
        out.push(first.diag("the program name (first word) is empty"));
        return None;
    }
    if word.starts_with(['+', '!', '-', '@', '|', ';', '&']) {
        out.push(
            first
                .diag(format!(
                    "the program name `{word}` starts with `{}`",
                    &word[..1]
                ))
                .hint(
                    "the first word must be the program to run, e.g. `python3` or `/usr/bin/make`",
                ),
        );
        return None;
    }
    if word.chars().any(char::is_whitespace) {
        out.push(
            first
                .diag(format!("the program name `{word}` contains whitespace"))
                .hint("`command` is an argv list, not a shell string: write [python3, -m, pytest] instead of [\"python3 -m pytest\"]"),
        );
        return None;
    }
    Some(list.value.iter().map(|a| a.value.clone()).collect())
}

/// Validates a list of env names: each valid, none twice.
fn env_list(
    list: Option<&Located<Vec<Located<String>>>>,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let Some(list) = list else {
        return Some(Vec::new());
    };
    let before = out.len();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for name in &list.value {
        if let Err(e) = env_name(&name.value) {
            out.push(name.diag(e).hint(
                "list only the NAMES of variables the agent needs (e.g. ANTHROPIC_API_KEY); cyclix passes their values as secrets",
            ));
        } else if let Some(line) = seen.get(name.value.as_str()) {
            out.push(
                name.diag(format!(
                    "`{}` is listed twice (first at line {line})",
                    name.value
                ))
                .hint("list each variable once"),
            );
        } else {
            seen.insert(&name.value, name.line);
        }
    }
    (out.len() == before).then(|| list.value.iter().map(|n| n.value.clone()).collect())
}

/// A duration within `(min, max, default)` seconds.
fn bounded_duration(
    raw: Option<&Located<String>>,
    (min, max, default): (u64, u64, u64),
    out: &mut Vec<Diagnostic>,
) -> Option<u64> {
    let Some(raw) = raw else {
        return Some(default);
    };
    let range = format!("{} to {}", show_duration(min), show_duration(max));
    match duration_s(&raw.value) {
        Ok(s) if (min..=max).contains(&s) => Some(s),
        Ok(_) => {
            out.push(
                raw.diag(format!("duration `{}` is out of range", raw.value))
                    .hint(format!("use a duration from {range}")),
            );
            None
        }
        Err(e) => {
            out.push(
                raw.diag(e)
                    .hint(format!("use a duration from {range}, e.g. `30m`")),
            );
            None
        }
    }
}

/// Seconds as the shortest duration string (`90s` → `1m30s`, `0` → `0s`).
fn show_duration(s: u64) -> String {
    if s == 0 {
        return "0s".into();
    }
    let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60);
    let mut out = String::new();
    for (n, unit) in [(h, 'h'), (m, 'm'), (sec, 's')] {
        if n > 0 {
            let _ = write!(out, "{n}{unit}");
        }
    }
    out
}

/// A plain decimal integer as written (`-1`, `443`); `None` for anything else.
fn decimal_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Memory size `<N>[K|M|G|T]` (powers of 1024) in bytes, within [`MEMORY_RANGE`].
fn memory(s: &str) -> Result<u64, String> {
    let bad = || format!("memory `{s}` is not a size like `512M` or `2G`");
    let Some(unit) = s.chars().last() else {
        return Err(bad());
    };
    let num = &s[..s.len() - unit.len_utf8()];
    let shift = match unit {
        'K' => 10,
        'M' => 20,
        'G' => 30,
        'T' => 40,
        _ => return Err(bad()),
    };
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let (lo, hi) = MEMORY_RANGE;
    let n: u64 = num.parse().map_err(|_| bad())?;
    let bytes = n
        .checked_mul(1 << shift)
        .filter(|b| (lo..=hi).contains(b))
        .ok_or_else(|| format!("memory `{s}` is out of range: must be between 16M and 1T"))?;
    Ok(bytes)
}

/// CPUs as a plain decimal (`0.5`, `2`) in thousandths, within [`CPU_MILLI_RANGE`].
fn cpu_millis(s: &str) -> Result<u32, String> {
    let out_of_range = || format!("cpus `{s}` is out of range: must be between 0.01 and 256");
    if s.starts_with('-') {
        return Err(out_of_range());
    }
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits_ok = |d: &str| d.chars().all(|c| c.is_ascii_digit());
    if int.is_empty() || !digits_ok(int) || !digits_ok(frac) || (s.contains('.') && frac.is_empty())
    {
        return Err(format!("cpus `{s}` is not a decimal number like `1.5`"));
    }
    let frac_trimmed = frac.trim_end_matches('0');
    if frac_trimmed.len() > 3 {
        return Err(format!("cpus `{s}` has more than 3 decimal places"));
    }
    let whole: u64 = int.parse().map_err(|_| out_of_range())?;
    let mut frac_milli: u64 = 0;
    for (i, c) in frac_trimmed.chars().enumerate() {
        let d = u64::from(c.to_digit(10).unwrap_or(0));
        frac_milli += d * [100, 10, 1][i];
    }
    let millis = whole
        .checked_mul(1000)
        .and_then(|w| w.checked_add(frac_milli))
        .and_then(|m| u32::try_from(m).ok())
        .ok_or_else(out_of_range)?;
    let (lo, hi) = CPU_MILLI_RANGE;
    if !(lo..=hi).contains(&millis) {
        return Err(out_of_range());
    }
    Ok(millis)
}

/// Checks a git ref name by the rules of git-check-ref-format(1), or a 7–64 digit hex commit
/// (which those rules accept as well). Stricter than git in one way: a leading `-` is refused
/// so the value can never be read as an option.
fn git_ref(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("the ref is empty".into());
    }
    if s.starts_with('-') {
        return Err(format!("`{s}` starts with `-`"));
    }
    if s == "@" {
        return Err("`@` alone is not a ref name".into());
    }
    if let Some(c) = s.chars().find(|c| {
        c.is_control()
            || matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\')
            || *c == '\u{7f}'
    }) {
        return Err(format!(
            "`{s}` contains `{}`, which git does not allow in a ref",
            c.escape_default()
        ));
    }
    if s.contains("..") {
        return Err(format!("`{s}` contains `..`"));
    }
    if s.contains("@{") {
        return Err(format!("`{s}` contains `@{{`"));
    }
    if s.ends_with('/') || s.starts_with('/') || s.contains("//") {
        return Err(format!("`{s}` has an empty path component"));
    }
    if s.ends_with('.') {
        return Err(format!("`{s}` ends with `.`"));
    }
    for comp in s.split('/') {
        if comp.starts_with('.') {
            return Err(format!("component `{comp}` of `{s}` starts with `.`"));
        }
        if comp.rsplit_once('.').is_some_and(|(_, ext)| ext == "lock") {
            return Err(format!("component `{comp}` of `{s}` ends with `.lock`"));
        }
    }
    Ok(())
}

/// A pure subset check of a systemd calendar expression (systemd.time(7)). Accepts the
/// shorthands (except `minutely`) and `[WEEKDAYS] [DATE] [TIME] [TIMEZONE]` with `*`, numbers,
/// `a..b`, lists and `/step`; refuses anything that fires more often than every 5 minutes.
/// `systemd-analyze calendar` verifies the expression again on the testbed.
fn calendar(s: &str) -> Result<(), String> {
    let unsupported = || format!("calendar expression `{s}` is not supported");
    if s.trim().is_empty() {
        return Err("the calendar expression is empty".into());
    }
    if s.len() > 256 {
        return Err("the calendar expression is longer than 256 characters".into());
    }
    if s.chars().any(|c| c.is_control() || !c.is_ascii()) {
        return Err(format!(
            "calendar expression `{}` contains a control or non-ASCII character",
            s.escape_default()
        ));
    }
    let lower = s.to_ascii_lowercase();
    match lower.as_str() {
        "minutely" => {
            return Err(format!(
                "`{s}` runs every minute; the shortest interval is 5 minutes"
            ));
        }
        "hourly" | "daily" | "weekly" | "monthly" | "yearly" | "annually" | "quarterly"
        | "semiannually" => return Ok(()),
        _ => {}
    }
    let mut tokens: Vec<&str> = s.split_whitespace().collect();
    if tokens.is_empty() {
        return Err(unsupported());
    }
    if is_weekday_spec(tokens[0]) {
        tokens.remove(0);
    }
    if let Some(last) = tokens.last()
        && (*last == "UTC" || (last.contains('/') && !last.contains([':', '-', '*'])))
    {
        tokens.pop();
    }
    let mut date = None;
    let mut time = None;
    for t in tokens {
        if t.contains(':') && time.is_none() {
            time = Some(t);
        } else if t.contains('-') && date.is_none() && time.is_none() {
            date = Some(t);
        } else {
            return Err(unsupported());
        }
    }
    if let Some(d) = date {
        let parts: Vec<&str> = d.split('-').collect();
        let ranges: &[(u32, u32)] = match parts.len() {
            3 => &[(1970, 2199), (1, 12), (1, 31)],
            2 => &[(1, 12), (1, 31)],
            _ => return Err(unsupported()),
        };
        for (p, (lo, hi)) in parts.iter().zip(ranges) {
            calendar_field(p, *lo, *hi).ok_or_else(unsupported)?;
        }
    }
    let Some(time) = time else {
        // A date or weekday without a time fires once a day at 00:00.
        return Ok(());
    };
    let parts: Vec<&str> = time.split(':').collect();
    let (hour, minute, second) = match parts.as_slice() {
        [h, m] => (*h, *m, "0"),
        [h, m, sec] => (*h, *m, *sec),
        _ => return Err(unsupported()),
    };
    calendar_field(hour, 0, 23).ok_or_else(unsupported)?;
    let minutes = calendar_field(minute, 0, 59).ok_or_else(unsupported)?;
    let seconds = calendar_field(second, 0, 59).ok_or_else(unsupported)?;
    let too_often = || format!("`{s}` runs more often than every 5 minutes");
    if seconds.len() > 1 {
        return Err(too_often());
    }
    // The smallest gap between firing minutes, across the hour boundary too.
    if minutes.len() > 1 {
        let mut gaps: Vec<u32> = minutes.windows(2).map(|w| w[1] - w[0]).collect();
        if let (Some(first), Some(last)) = (minutes.first(), minutes.last()) {
            gaps.push(60 - last + first);
        }
        if gaps.iter().any(|g| *g < 5) {
            return Err(too_often());
        }
    }
    Ok(())
}

/// Expands one calendar field (`*`, `5`, `1..5`, `0/15`, `*/10`, lists of those) into the sorted
/// values it matches within `lo..=hi`; `None` when the syntax is outside the subset.
fn calendar_field(f: &str, lo: u32, hi: u32) -> Option<Vec<u32>> {
    let mut values = BTreeSet::new();
    for item in f.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, st)) => (r, Some(st.parse::<u32>().ok().filter(|n| *n > 0)?)),
            None => (item, None),
        };
        let num = |x: &str| -> Option<u32> {
            (!x.is_empty() && x.len() <= 4 && x.chars().all(|c| c.is_ascii_digit()))
                .then(|| x.parse().ok())
                .flatten()
                .filter(|n| (lo..=hi).contains(n))
        };
        let (start, end) = if range == "*" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once("..") {
            (num(a)?, num(b)?)
        } else {
            let a = num(range)?;
            (a, if step.is_some() { hi } else { a })
        };
        if start > end {
            return None;
        }
        let step = step.unwrap_or(1) as usize;
        values.extend((start..=end).step_by(step));
    }
    Some(values.into_iter().collect())
}

/// `Mon`, `Mon..Fri`, `Sat,Sun` (English names, short or long, any case).
fn is_weekday_spec(t: &str) -> bool {
    const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
    const LONG: [&str; 7] = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    let day = |d: &str| {
        let d = d.to_ascii_lowercase();
        DAYS.contains(&d.as_str()) || LONG.contains(&d.as_str())
    };
    t.split(',').all(|item| match item.split_once("..") {
        Some((a, b)) => day(a) && day(b),
        None => day(item),
    })
}

/// Normalises a host path (`task.file`): see [`normalize_path`].
fn host_path(p: &Located<String>, ctx: &SpecContext, out: &mut Vec<Diagnostic>) -> Option<String> {
    match normalize_path(&p.value, Some(&ctx.home)) {
        Ok(n) => Some(n),
        Err((msg, hint)) => {
            out.push(p.diag(msg).hint(hint));
            None
        }
    }
}

/// Normalises a mount path and refuses the characters that would inject podman mount
/// options (`:`, `,`, `=`; security-cases §4 "podman -v option injection").
fn mount_path(
    p: &Located<String>,
    home: Option<&str>,
    out: &mut Vec<Diagnostic>,
) -> Option<String> {
    if let Some(c) = p.value.chars().find(|c| matches!(c, ':' | ',' | '=')) {
        out.push(
            p.diag(format!("mount path `{}` contains `{c}`", p.value))
                .hint("`:`, `,` and `=` would change podman's mount options; rename the directory or mount its parent"),
        );
        return None;
    }
    match normalize_path(&p.value, home) {
        Ok(n) => Some(n),
        Err((msg, hint)) => {
            out.push(p.diag(msg).hint(hint));
            None
        }
    }
}

/// Normalises an absolute path component-wise: `~/` expands to `home` (when given), `//` and
/// `.` components collapse, a trailing `/` goes. Refuses relative paths, `~user`, and `..`
/// components (never resolved, so `proj/../other` cannot escape a check).
///
/// Returns `Err((message, fix))`.
fn normalize_path(p: &str, home: Option<&str>) -> Result<String, (String, String)> {
    let expanded;
    let path = if p == "~" || p.starts_with("~/") {
        let Some(home) = home else {
            return Err((
                format!("`{p}`: `~` is not allowed here"),
                "write an absolute path".into(),
            ));
        };
        expanded = format!("{home}/{}", p.trim_start_matches('~'));
        expanded.as_str()
    } else if p.starts_with('~') {
        return Err((
            format!("`{p}`: `~user` paths are not supported"),
            "write an absolute path or one starting with `~/`".into(),
        ));
    } else {
        p
    };
    if !path.starts_with('/') {
        return Err((
            format!("`{p}` is a relative path"),
            format!("write an absolute path or one under your home, e.g. `~/{p}`"),
        ));
    }
    let mut comps = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                return Err((
                    format!("`{p}` contains a `..` component"),
                    "write the path without `..`".into(),
                ));
            }
            c => comps.push(c),
        }
    }
    Ok(format!("/{}", comps.join("/")))
}

/// The components of a normalised absolute path.
fn components(p: &str) -> Vec<&str> {
    p.split('/').filter(|c| !c.is_empty()).collect()
}

/// Whether normalised `path` is `root` or below it, compared component-wise
/// (`/p/proj-evil` is not within `/p/proj`).
fn is_within(path: &str, root: &str) -> bool {
    let p = components(path);
    let r = components(root);
    p.len() >= r.len() && p.iter().zip(&r).all(|(a, b)| a == b)
}

/// The candidate closest to `word` by optimal-string-alignment distance, if close enough to
/// be a likely typo (distance ≤ 2, or ≤ a third of the word for long words).
#[must_use]
pub fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(2);
    candidates
        .iter()
        .map(|c| (osa_distance(word, c), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions), case-folded.
fn osa_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_name_table() {
        for ok in ["a", "acme", "a1", "a-b", "a-1-b", &"a".repeat(31)] {
            assert_eq!(tenant_name(ok), Ok(()), "{ok}");
        }
        for (bad, msg) in [
            ("", "name is empty"),
            ("1a", "name `1a` must start with a lowercase letter a-z"),
            ("a-", "name `a-` must not end with `-`"),
            ("A", "name `A` must start with a lowercase letter a-z"),
            (
                "aB",
                "name `aB` contains `B`; only a-z, 0-9 and `-` are allowed",
            ),
            (
                "a_b",
                "name `a_b` contains `_`; only a-z, 0-9 and `-` are allowed",
            ),
            (
                "a\nb",
                "name `a\nb` contains `\n`; only a-z, 0-9 and `-` are allowed",
            ),
        ] {
            assert_eq!(tenant_name(bad), Err(msg.to_owned()), "{bad}");
        }
        assert_eq!(
            tenant_name(&"a".repeat(32)),
            Err(format!(
                "name `{}` is 32 characters long; the limit is 31",
                "a".repeat(32)
            ))
        );
    }

    #[test]
    fn run_id_table() {
        for ok in ["0", "a", "20260101-0200-abcd", &"9".repeat(48)] {
            assert_eq!(run_id(ok), Ok(()), "{ok}");
        }
        for (bad, msg) in [
            ("", "run id is empty"),
            ("-a", "run id `-a` must start with a-z or 0-9"),
            ("a-", "run id `a-` must not end with `-`"),
            ("a--b", "run id `a--b` must not contain `--`"),
            (
                "a.b",
                "run id `a.b` contains `.`; only a-z, 0-9 and `-` are allowed",
            ),
            (
                "A",
                "run id `A` contains `A`; only a-z, 0-9 and `-` are allowed",
            ),
        ] {
            assert_eq!(run_id(bad), Err(msg.to_owned()), "{bad}");
        }
        assert!(run_id(&"a".repeat(49)).is_err());
    }

    #[test]
    fn env_name_table() {
        for ok in [
            "A",
            "_",
            "ANTHROPIC_API_KEY",
            "A1",
            "PATHS",
            "HOMEDIR",
            "LD",
            "CYCLIX",
        ] {
            assert_eq!(env_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "1A",
            "a",
            "A-B",
            "A B",
            "A=B",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "PATH",
            "HOME",
            "CYCLIX_X",
            "HTTP_PROXY",
            "http_proxy",
            "Https_Proxy",
            "NO_PROXY",
            "ALL_PROXY",
            "ftp_proxy",
            "É",
        ] {
            assert!(env_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn host_pattern_table() {
        use HostPattern::{Exact, Subdomains};
        for (input, want) in [
            ("pypi.org", Exact("pypi.org".into())),
            ("PyPI.Org.", Exact("pypi.org".into())),
            ("*.pythonhosted.org", Subdomains("pythonhosted.org".into())),
            ("*.A.Example.COM.", Subdomains("a.example.com".into())),
            ("тест.com", Exact("xn--e1aybc.com".into())),
            ("bücher.example", Exact("xn--bcher-kva.example".into())),
            ("a-b.c0.io", Exact("a-b.c0.io".into())),
            ("1.2.3.example.com", Exact("1.2.3.example.com".into())),
        ] {
            assert_eq!(host_pattern(input), Ok(want), "{input}");
        }
        for bad in [
            "",
            "*",
            "*.",
            "http://x.com",
            "x.com/",
            "u@x.com",
            "x.com:443",
            "[::1]",
            "::1",
            "*x.com",
            "a.*.com",
            "x.*",
            "1.2.3.4",
            "127.1",
            "0x7f000001",
            "2130706433",
            "0177.0.0.1",
            "1.2.3.0x4",
            "localhost",
            "*.com",
            "x..com",
            ".x.com",
            "x.com..",
            "-x.com",
            "x-.com",
            "a_b.com",
            "a b.com",
            "x.com\n",
            &format!("{}.com", "a".repeat(64)),
        ] {
            assert!(
                host_pattern(bad).is_err(),
                "{bad:?} accepted as {:?}",
                host_pattern(bad)
            );
        }
    }

    #[test]
    fn duration_table() {
        for (input, secs) in [
            ("90s", 90),
            ("30m", 1800),
            ("2h", 7200),
            ("1h30m", 5400),
            ("1h30m15s", 5415),
            ("1h15s", 3615),
            ("0s", 0),
            ("90m", 5400),
        ] {
            assert_eq!(duration_s(input), Ok(secs), "{input}");
        }
        for bad in [
            "", "90", "1m1h", "1h1h", "s", "1d", "1.5h", "-1s", " 1s", "1s ", "1H", "1h 30m",
        ] {
            assert!(duration_s(bad).is_err(), "{bad}");
        }
        assert_eq!(
            duration_s("90"),
            Err("`90` has no unit; add one: `90s`, `90m` or `90h`".to_owned())
        );
        assert!(duration_s("99999999999999999999h").is_err());
        assert_eq!(show_duration(90), "1m30s");
        assert_eq!(show_duration(86_400), "24h");
    }

    #[test]
    fn memory_and_cpu_tables() {
        for (input, bytes) in [
            ("16M", 16 << 20),
            ("512M", 512 << 20),
            ("2G", 2 << 30),
            ("1T", 1 << 40),
            ("16384K", 16 << 20),
        ] {
            assert_eq!(memory(input), Ok(bytes), "{input}");
        }
        for bad in [
            "15M",
            "2T",
            "0G",
            "-1G",
            "1.5G",
            "2g",
            "2GB",
            "G",
            "2",
            "",
            "99999999999999999999T",
        ] {
            assert!(memory(bad).is_err(), "{bad}");
        }
        for (input, millis) in [
            ("0.01", 10),
            ("0.5", 500),
            ("1.5", 1500),
            ("2", 2000),
            ("256", 256_000),
            ("1.250", 1250),
            ("0.010", 10),
        ] {
            assert_eq!(cpu_millis(input), Ok(millis), "{input}");
        }
        for bad in [
            "0",
            "0.009",
            "0.0001",
            "256.001",
            "-1",
            "1e9",
            "1.",
            ".5",
            "",
            "1.2345",
            "4294967296",
        ] {
            assert!(cpu_millis(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn git_ref_table() {
        for ok in [
            "main",
            "release/1.2",
            "feature/x-y",
            "v1.0",
            "abc1234",
            &"f".repeat(64),
            "a@b",
        ] {
            assert_eq!(git_ref(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "-main",
            "@",
            "a..b",
            "a@{1}",
            "a/",
            "/a",
            "a//b",
            "a.",
            ".a",
            "a/.b",
            "a.lock",
            "a/b.lock/c",
            "a b",
            "a~1",
            "a^",
            "a:b",
            "a?",
            "a*",
            "a[",
            "a\\b",
            "a\u{7f}",
        ] {
            assert!(git_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn calendar_table() {
        for ok in [
            "daily",
            "Daily",
            "hourly",
            "weekly",
            "monthly",
            "*-*-* 02:00:00",
            "*-*-* 02:00",
            "Mon..Fri 03:00",
            "mon,wed,fri 12:00",
            "Saturday 08:00",
            "*-*-01 04:00 UTC",
            "*-*-* *:0/5",
            "*-*-* *:00,05,10",
            "*:0/15",
            "2030-01-01",
            "Mon",
            "*-*-* 02:00 Europe/Berlin",
        ] {
            assert_eq!(calendar(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            " ",
            "minutely",
            "*:*:*",
            "*-*-* *:*:*/1",
            "*:*",
            "*:0/4",
            "*:00,04",
            "*:00,56",
            "*-*-* 02:00:*",
            "*-*-* 02:00:00,30",
            "*-*-* 02:00..03",
            "*-*-* 24:00",
            "*-*-* 02:60",
            "*-13-* 02:00",
            "Funday 02:00",
            "02:00 02:00",
            "*-*-* 02:00:00.5",
            "every day",
            "now",
            "*-*-*\n02:00",
            "*-*-* 02:00/0",
            "10..5:00",
        ] {
            assert!(calendar(bad).is_err(), "{bad:?}");
        }
        assert_eq!(calendar_field("*/20", 0, 59), Some(vec![0, 20, 40]));
        assert_eq!(calendar_field("5/20", 0, 59), Some(vec![5, 25, 45]));
        assert_eq!(calendar_field("1..3,10", 0, 59), Some(vec![1, 2, 3, 10]));
        assert_eq!(calendar_field("60", 0, 59), None);
    }

    #[test]
    fn paths_normalise_component_wise() {
        for (input, want) in [
            ("/a/b", "/a/b"),
            ("/a//b/./c/", "/a/b/c"),
            ("/", "/"),
            ("~", "/home/u"),
            ("~/x", "/home/u/x"),
            ("~//x/.", "/home/u/x"),
        ] {
            assert_eq!(
                normalize_path(input, Some("/home/u")),
                Ok(want.to_owned()),
                "{input}"
            );
        }
        for bad in ["a", "./a", "../a", "/a/../b", "/a/..", "~u/x", ""] {
            assert!(normalize_path(bad, Some("/home/u")).is_err(), "{bad}");
        }
        assert!(normalize_path("~/x", None).is_err());
        assert!(is_within("/p/proj", "/p/proj"));
        assert!(is_within("/p/proj/x", "/p/proj"));
        assert!(!is_within("/p/proj-evil", "/p/proj"));
        assert!(!is_within("/project-secrets", "/project"));
        assert!(!is_within("/p", "/p/proj"));
        assert!(is_within("/anything", "/"));
    }

    #[test]
    fn nearest_key_suggestions() {
        let keys = [
            "tenant",
            "repo",
            "egress",
            "network",
            "on_calendar",
            "command",
        ];
        assert_eq!(nearest("netwrok", &keys), Some("network"));
        assert_eq!(nearest("egres", &keys), Some("egress"));
        assert_eq!(nearest("Tenant", &keys), Some("tenant"));
        assert_eq!(nearest("oncalendar", &keys), Some("on_calendar"));
        assert_eq!(nearest("cap_add", &keys), None);
        assert_eq!(osa_distance("ab", "ba"), 1);
        assert_eq!(osa_distance("", "abc"), 3);
    }

    #[test]
    fn image_name_table() {
        for ok in [
            "ghcr.io/acme/agent",
            "localhost/x",
            "localhost:5000/a/b:tag",
            "alpine",
            "docker.io/library/postgres:16",
            "a_b/c.d-e",
        ] {
            assert_eq!(image_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "Ghcr.io",
            "ghcr.io/Acme/x",
            "x:",
            "x:-tag",
            "a//b",
            "a/b/",
            "/a",
            "a b",
            "a/b:c:d",
            "a/-b",
            "a\n",
        ] {
            assert!(image_name(bad).is_err(), "{bad:?}");
        }
    }
}
