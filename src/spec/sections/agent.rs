//! `agent:` the agent's container: image, argv, secrets by name, timeout, resource limits and
//! the credentials that stay outside (`credentials.rs`).

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::argv::{self, argv};
use crate::spec::rules::durations::bounded_duration;
use crate::spec::rules::env::env_list;
use crate::spec::rules::images::{self, RawImage, image};
use crate::spec::rules::sizes::{cpu_millis, decimal_int, memory};
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Agent, Diagnostic, Resources};

/// Agent timeout bounds and default, in seconds (10s–24h, default 30m).
const AGENT_TIMEOUT: (u64, u64, u64) = (10, 24 * 3600, 30 * 60);
/// Process limit bounds (16–65536).
const PIDS_RANGE: (u32, u32) = (16, 65_536);

/// `agent:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawAgent {
    /// The mapping.
    pub(crate) at: Pos,
    /// `agent.image` + `agent.unpinned_local_image`.
    pub(crate) image: RawImage,
    /// `agent.command`: the list node and its items.
    pub(crate) command: Option<Located<Vec<Located<String>>>>,
    /// `agent.env`.
    pub(crate) env: Option<Located<Vec<Located<String>>>>,
    /// `agent.timeout`.
    pub(crate) timeout: Option<Located<String>>,
    /// `agent.resources`.
    pub(crate) resources: Option<RawResources>,
    /// `agent.credentials` (absent = empty).
    pub(crate) credentials: Vec<super::credentials::RawCredential>,
}

/// `agent.resources:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawResources {
    /// `memory`, e.g. `2G`.
    pub(crate) memory: Option<Located<String>>,
    /// `cpus` as written (a plain decimal number such as `1.5`).
    pub(crate) cpus: Option<Located<String>>,
    /// `pids` as written (a plain decimal integer).
    pub(crate) pids: Option<Located<String>>,
}

/// The keys of `agent:`.
pub(crate) const KEYS: &[Key] = &[
    images::IMAGE,
    images::UNPINNED_LOCAL_IMAGE,
    argv::COMMAND,
    Key::optional(
        "env",
        Kind::StrList,
        "names of the secrets passed to the agent as variables",
    ),
    Key::optional(
        "timeout",
        Kind::Str(StrKind::Duration),
        "longest agent run (10s-24h, default 30m)",
    ),
    Key::optional(
        "resources",
        Kind::Map(RESOURCE_KEYS),
        "memory, CPU and process limits",
    ),
    Key::optional(
        "credentials",
        Kind::MapList(super::credentials::KEYS),
        "API keys the egress proxy adds for one host each (the agent gets a placeholder)",
    ),
];

/// The keys of `agent.resources:`.
pub(crate) const RESOURCE_KEYS: &[Key] = &[
    Key::optional(
        "memory",
        Kind::Str(StrKind::Size),
        "memory limit (16M-1T), e.g. `2G`",
    ),
    Key::optional("cpus", Kind::Number, "CPU limit (0.01-256), e.g. `1.5`"),
    Key::optional("pids", Kind::Integer, "process limit (16-65536)"),
];

/// Reads `agent:` at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawAgent> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawAgent {
        at: f.pos(),
        image: RawImage::decode(d, &f),
        command: d.strings(&f, "command"),
        env: d.strings(&f, "env"),
        timeout: d.string(&f, "timeout"),
        resources: d.section(&f, "resources", decode_resources),
        credentials: d.list(&f, "credentials", super::credentials::decode),
    })
}

/// Reads `agent.resources:` at `path`.
fn decode_resources(d: &mut Decoder, node: &Node, path: &str) -> Option<RawResources> {
    let f = d.mapping(node, path, RESOURCE_KEYS)?;
    Some(RawResources {
        memory: d.string(&f, "memory"),
        cpus: d.number(&f, "cpus"),
        pids: d.number(&f, "pids"),
    })
}

/// Validates `agent:`: image, argv, env names, timeout (default 30m) and resources.
pub(crate) fn validate(a: &RawAgent, out: &mut Vec<Diagnostic>) -> Option<Agent> {
    let image = image(&a.image, out);
    let command = argv(a.command.as_ref(), true, out);
    let env = env_list(a.env.as_ref(), out);
    let timeout_s = bounded_duration(a.timeout.as_ref(), AGENT_TIMEOUT, out);
    let resources = match &a.resources {
        None => Some(Resources::default()),
        Some(r) => resources(r, out),
    };
    let credentials = super::credentials::validate(&a.credentials, a.env.as_ref(), out);
    Some(Agent {
        image: image?,
        command: command?,
        env: env?,
        timeout_s: timeout_s?,
        resources: resources?,
        credentials: credentials?,
    })
}

/// Validates `agent.resources:`; absent limits stay unset.
pub(crate) fn resources(r: &RawResources, out: &mut Vec<Diagnostic>) -> Option<Resources> {
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
