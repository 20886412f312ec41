//! `agent:` the agent's container: image, argv, secrets by name, timeout, resource limits and
//! the credentials that stay outside (`credentials.rs`).

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::argv::argv;
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
    /// `agent.preset`, `agent.model`, `agent.max_turns`, `agent.api_host`.
    pub(crate) preset: super::agent_preset::RawPreset,
    /// `agent.build`.
    pub(crate) build: Option<super::build::RawBuild>,
    /// `agent.runtime_class`.
    pub(crate) runtime_class: Option<Located<String>>,
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
    Key::optional(
        "image",
        Kind::Str(StrKind::Line),
        "container image, pinned by digest: REGISTRY/NAME@sha256:<64 hex> (default: the preset's)",
    ),
    images::UNPINNED_LOCAL_IMAGE,
    super::build::BUILD,
    Key::optional(
        "command",
        Kind::StrList,
        "the program to run and its arguments, a list (default: the preset's headless argv)",
    ),
    Key::optional(
        "preset",
        Kind::Str(StrKind::Line),
        "the agent CLI: claude-code, codex, aider, gemini-cli or script (default: script, the spec's own image and command)",
    ),
    Key::optional(
        "model",
        Kind::Str(StrKind::Line),
        "the model the preset's CLI uses; `cheapest` names the preset's cheapest (default: the CLI's own)",
    ),
    Key::optional(
        "max_turns",
        Kind::Integer,
        "turn cap passed to the preset CLI's own flag (1-10000)",
    ),
    Key::optional(
        "api_host",
        Kind::Str(StrKind::Line),
        "the API host of the preset's credential (default: the vendor's, e.g. api.anthropic.com)",
    ),
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
    Key::optional(
        "runtime_class",
        Kind::Str(StrKind::Line),
        "Kubernetes only (`cyclix export kube`): the agent Pod's runtimeClassName, e.g. `gvisor`; the Podman backends ignore it",
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
        preset: super::agent_preset::RawPreset::decode(d, &f),
        build: super::build::decode_in(d, &f),
        runtime_class: d.string(&f, "runtime_class"),
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

/// Validates `agent:`: the preset (which supplies image, argv, variables and a credential
/// unless the spec overrides them), image, argv, env names, timeout (default 30m), resources
/// and credentials.
pub(crate) fn validate(a: &RawAgent, out: &mut Vec<Diagnostic>) -> Option<Agent> {
    let preset = super::agent_preset::validate(a, out);
    let image = match (&a.image.image, &preset) {
        _ if a.build.is_some() => {
            super::build::image_or_build(&a.image, a.build.as_ref(), "agent", |_| None, out)
        }
        (None, Ok(Some(p))) => Some(crate::spec::Image::UnpinnedLocal {
            reference: p.row.image.to_string(),
        }),
        (None, Ok(None)) => {
            push_missing(out, missing(a, "image", "`image: NAME@sha256:<64 hex>`"));
            None
        }
        _ => image(&a.image, out),
    };
    let command = match (&a.command, &preset) {
        (None, Ok(Some(p))) => Some(p.argv.clone()),
        (None, Ok(None)) => {
            push_missing(out, missing(a, "command", "`command: [PROGRAM, ARG, ...]`"));
            None
        }
        _ => argv(a.command.as_ref(), true, out),
    };
    let env = env_list(a.env.as_ref(), out);
    let timeout_s = bounded_duration(a.timeout.as_ref(), AGENT_TIMEOUT, out);
    let resources = match &a.resources {
        None => Some(Resources::default()),
        Some(r) => resources(r, out),
    };
    let runtime_class = runtime_class(a.runtime_class.as_ref(), out);
    let mut credentials = super::credentials::validate(&a.credentials, a.env.as_ref(), out);
    let preset = preset.ok()?;
    if let (Some(p), Some(list)) = (&preset, credentials.as_mut())
        && let Some(c) = &p.credential
    {
        if !list.iter().any(|o| o.env == c.env || o.host == c.host) {
            list.insert(0, c.clone());
        } else if let Some(h) = &a.preset.api_host {
            // The spec's own entry for the same variable or host replaces the preset's, so
            // `api_host` would change nothing.
            out.push(
                h.diag(format!(
                    "`api_host` has no effect: agent.credentials has its own entry for {} or {}",
                    c.env, c.host
                ))
                .hint("set the host in that credential entry and remove `api_host`"),
            );
            return None;
        }
    }
    Some(Agent {
        image: image?,
        command: command?,
        env: env?,
        timeout_s: timeout_s?,
        resources: resources?,
        credentials: credentials?,
        run_as: preset.as_ref().map(|p| p.row.uid),
        fixed_env: preset.as_ref().map_or_else(Vec::new, |p| {
            p.row
                .env
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect()
        }),
        task_on_stdin: preset
            .as_ref()
            .is_some_and(|p| p.row.task_input == crate::agents::TaskInput::Stdin),
        preset: preset.map(|p| p.used),
        runtime_class: runtime_class.ok()?,
    })
}

/// Validates `agent.runtime_class`: a Kubernetes object name (RFC 1123 subdomain: at most 253
/// characters of a-z, 0-9, `-` and `.`, alphanumeric at both ends), as `RuntimeClass` names are.
fn runtime_class(
    v: Option<&Located<String>>,
    out: &mut Vec<Diagnostic>,
) -> Result<Option<String>, ()> {
    let Some(v) = v else { return Ok(None) };
    let s = v.value.as_str();
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        return Ok(Some(s.to_string()));
    }
    out.push(
        v.diag(format!("invalid runtime_class `{}`", s.escape_debug()))
            .hint("a RuntimeClass name: a-z, 0-9, `-` and `.`, alphanumeric first and last, e.g. `gvisor`"),
    );
    Err(())
}

/// Adds `missing` unless a diagnostic already names its key: a key that is present but of the
/// wrong type (`command: "a string"`) decodes to nothing and has its own diagnostic, so it is
/// not also "missing" (newcomer trial 7, item 9).
fn push_missing(out: &mut Vec<Diagnostic>, missing: Diagnostic) {
    if !out.iter().any(|d| d.path == missing.path) {
        out.push(missing);
    }
}

/// The decoder's own "missing required key" diagnostic, for a key only a preset makes optional.
fn missing(a: &RawAgent, key: &str, example: &str) -> Diagnostic {
    Diagnostic {
        path: format!("{}.{key}", a.at.path),
        ..a.at.diag(format!("missing required key `{key}`"))
    }
    .hint(format!(
        "add {example}, or set `preset:` (e.g. `preset: claude-code`)"
    ))
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
