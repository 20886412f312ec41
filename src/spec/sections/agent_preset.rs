//! `agent.preset`, `agent.model`, `agent.max_turns`, `agent.api_host` (issue 14 item 1): a
//! real agent CLI from the preset table (`crate::agents::presets`), resolved here into the
//! plain agent fields render uses (image, argv, variables, a credential, a uid).

use crate::agents::presets::{self, Preset};
use crate::spec::located::Located;
use crate::spec::rules::hosts::host_pattern;
use crate::spec::rules::sizes::decimal_int;
use crate::spec::suggest::nearest;
use crate::spec::yaml::{Decoder, Fields};
use crate::spec::{Credential, Diagnostic, HostPattern, PresetUse};

use super::agent::RawAgent;

/// `agent.max_turns` bounds.
const MAX_TURNS: (u32, u32) = (1, 10_000);

/// Where the task appears in the agent container; equal to `render::plan::TASK_PATH` (a test
/// there holds them together; the spec does not depend on render).
pub const SANDBOX_TASK_PATH: &str = "/cyclix/task.md";

/// The preset keys of `agent:` as written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RawPreset {
    /// `preset`.
    pub(crate) preset: Option<Located<String>>,
    /// `model`.
    pub(crate) model: Option<Located<String>>,
    /// `max_turns` as written.
    pub(crate) max_turns: Option<Located<String>>,
    /// `api_host`.
    pub(crate) api_host: Option<Located<String>>,
}

impl RawPreset {
    /// Reads the four keys from `agent:`'s mapping.
    pub(crate) fn decode(d: &mut Decoder, f: &Fields<'_>) -> RawPreset {
        RawPreset {
            preset: d.string(f, "preset"),
            model: d.string(f, "model"),
            max_turns: d.number(f, "max_turns"),
            api_host: d.string(f, "api_host"),
        }
    }
}

/// A preset resolved for one spec.
pub(crate) struct Resolved {
    /// The table row.
    pub(crate) row: &'static Preset,
    /// The CLI's argv (the spec's `command` replaces it).
    pub(crate) argv: Vec<String>,
    /// Its credential with `api_host` applied.
    pub(crate) credential: Option<Credential>,
    /// What the record says about it.
    pub(crate) used: PresetUse,
}

/// Validates the preset keys of `a`. `Ok(None)`: `script` (or no preset), and then `model`,
/// `max_turns` and `api_host` are refused (they only mean something to a CLI). `Err(())`: a
/// diagnostic was pushed.
pub(crate) fn validate(a: &RawAgent, out: &mut Vec<Diagnostic>) -> Result<Option<Resolved>, ()> {
    let p = &a.preset;
    let name = p.preset.as_ref().map_or("script", |n| n.value.as_str());
    let Some(row) = presets::find(name) else {
        if name == "script" {
            return script_only(p, out);
        }
        let at = p.preset.as_ref().ok_or(())?;
        let mut d = at.diag(format!("unknown agent preset `{name}`"));
        let list = presets::PRESETS.join(", ");
        d = d.hint(match nearest(name, presets::PRESETS) {
            Some(n) => format!("did you mean `{n}`? presets: {list}"),
            None => format!("presets: {list}"),
        });
        out.push(d);
        return Err(());
    };
    let before = out.len();
    let model = p.model.as_ref().and_then(|m| model_name(m, out));
    let max_turns = p.max_turns.as_ref().and_then(|n| {
        let (lo, hi) = MAX_TURNS;
        let v = decimal_int(&n.value)
            .and_then(|v| u32::try_from(v).ok())
            .filter(|v| (lo..=hi).contains(v));
        if v.is_none() {
            out.push(
                n.diag(format!("max_turns `{}` is out of range", n.value))
                    .hint(format!("use a turn cap from {lo} to {hi}")),
            );
        }
        v
    });
    let host = match &p.api_host {
        None => Some(row.credential.host.to_string()),
        Some(h) => match host_pattern(&h.value) {
            Ok(HostPattern::Exact(host)) => Some(host),
            Ok(HostPattern::Subdomains(_)) | Err(_) => {
                out.push(
                    h.diag(format!("`{}` is not one exact host name", h.value))
                        .hint("write the API host the CLI talks to, e.g. api.anthropic.com"),
                );
                None
            }
        },
    };
    if out.len() != before {
        return Err(());
    }
    let model = row.model(model.as_deref());
    let c = &row.credential;
    let credential = host.map(|host| Credential {
        env: c.env.into(),
        host,
        header: c.header.into(),
        scheme: if c.bearer {
            crate::spec::CredentialScheme::Bearer
        } else {
            crate::spec::CredentialScheme::Raw
        },
        paths: c.paths.iter().map(|s| (*s).to_string()).collect(),
        methods: c.methods.iter().map(|s| (*s).to_string()).collect(),
        port: 443,
        placeholder_prefix: c.placeholder_prefix.into(),
        base_url_env: c.base_url_env.into(),
        base_url_path: c.base_url_path.into(),
        // A preset sets no spend cap: a spec's own credential entry can (issue 31).
        budget: None,
        line: p.preset.as_ref().map_or(a.at.line, |n| n.line),
    });
    let mut overridden = Vec::new();
    if a.image.image.is_some() {
        overridden.push("agent.image".to_string());
    }
    if a.command.is_some() {
        overridden.push("agent.command".to_string());
    }
    Ok(Some(Resolved {
        row,
        argv: row.argv(model.as_deref(), max_turns, SANDBOX_TASK_PATH),
        credential,
        used: PresetUse {
            name: row.name.into(),
            package: row.package.into(),
            model,
            max_turns,
            max_turns_enforced: max_turns.is_some() && row.max_turns_flag.is_some(),
            overridden,
            stream: row.stream,
        },
    }))
}

/// Sets the model of `agent`'s preset CLI to `model` (`cheapest` resolved) for one run (`cyclix
/// drill --model`): the argv is rebuilt from the preset row unless the spec overrode
/// `agent.command`, whose argv is kept (the record's `preset.model` still says what was
/// asked).
///
/// # Errors
/// The agent has no preset (a script takes no model), or `model` is not a model name; the
/// message says which and the fix.
pub fn apply_model(agent: &mut crate::spec::Agent, model: &str) -> Result<(), String> {
    let Some(used) = agent.preset.as_mut() else {
        return Err(format!(
            "--model `{model}` needs an agent preset; this tenant's agent is a script (set `agent.preset`)"
        ));
    };
    let row = presets::find(&used.name).ok_or_else(|| format!("unknown preset {}", used.name))?;
    let ok = !model.is_empty()
        && model.len() <= 128
        && model.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'@' | b'-')
        });
    if !ok {
        return Err(format!(
            "--model `{model}` is not a model name (letters, digits, `._:/@-`, or `cheapest`)"
        ));
    }
    used.model = row.model(Some(model));
    if !used.overridden.iter().any(|o| o == "agent.command") {
        agent.command = row.argv(used.model.as_deref(), used.max_turns, SANDBOX_TASK_PATH);
    }
    Ok(())
}

/// `script`: the keys that only a CLI reads are refused.
fn script_only(p: &RawPreset, out: &mut Vec<Diagnostic>) -> Result<Option<Resolved>, ()> {
    let mut bad = false;
    for (key, v) in [
        ("model", &p.model),
        ("max_turns", &p.max_turns),
        ("api_host", &p.api_host),
    ] {
        if let Some(v) = v {
            out.push(
                v.diag(format!(
                    "`{key}` needs an agent preset; this agent is a script"
                ))
                .hint("set `preset:` (claude-code, codex, aider, gemini-cli), or remove the key"),
            );
            bad = true;
        }
    }
    if bad { Err(()) } else { Ok(None) }
}

/// A model name: 1–128 characters of `[A-Za-z0-9._:/@-]` (every vendor's model ids are).
fn model_name(m: &Located<String>, out: &mut Vec<Diagnostic>) -> Option<String> {
    let ok = !m.value.is_empty()
        && m.value.len() <= 128
        && m.value.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'@' | b'-')
        });
    if ok {
        Some(m.value.clone())
    } else {
        out.push(
            m.diag(format!("`{}` is not a model name", m.value))
                .hint("write the model id (letters, digits, `._:/@-`), or `cheapest`"),
        );
        None
    }
}
