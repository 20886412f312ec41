//! `agent.credentials:` API keys that stay outside the sandbox. The egress proxy adds the real
//! value to requests for one host (a reverse-proxy port per credential); the agent's variable
//! holds a per-run placeholder (issue 13, item 1; `render::proxy::credentials`).

use std::collections::BTreeMap;

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::env::env_name;
use crate::spec::rules::hosts::host_pattern;
use crate::spec::rules::sizes::{byte_count, decimal_int};
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Credential, CredentialBudget, CredentialScheme, Diagnostic, HostPattern};

/// Placeholder prefixes of known variables, so a CLI's own key-shape check accepts the
/// placeholder (Anthropic keys start `sk-ant-api03-`, `OpenAI` project keys `sk-proj-`).
pub const KNOWN_PREFIXES: &[(&str, &str)] = &[
    ("ANTHROPIC_API_KEY", "sk-ant-api03-"),
    ("OPENAI_API_KEY", "sk-proj-"),
];

/// Methods a credential may list (`methods`); CONNECT never (the port is a reverse proxy).
const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// One entry of `agent.credentials:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawCredential {
    /// The entry.
    pub(crate) at: Pos,
    /// `env`.
    pub(crate) env: Option<Located<String>>,
    /// `host`.
    pub(crate) host: Option<Located<String>>,
    /// `header`.
    pub(crate) header: Option<Located<String>>,
    /// `scheme`.
    pub(crate) scheme: Option<Located<String>>,
    /// `paths`.
    pub(crate) paths: Option<Located<Vec<Located<String>>>>,
    /// `methods`.
    pub(crate) methods: Option<Located<Vec<Located<String>>>>,
    /// `port` as written.
    pub(crate) port: Option<Located<String>>,
    /// `placeholder_prefix`.
    pub(crate) placeholder_prefix: Option<Located<String>>,
    /// `base_url_env`.
    pub(crate) base_url_env: Option<Located<String>>,
    /// `base_url_path`.
    pub(crate) base_url_path: Option<Located<String>>,
    /// `budget`.
    pub(crate) budget: Option<RawBudget>,
}

/// `agent.credentials[i].budget:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawBudget {
    /// The mapping.
    pub(crate) at: Pos,
    /// `requests` as written.
    pub(crate) requests: Option<Located<String>>,
    /// `request_bytes` as written.
    pub(crate) request_bytes: Option<Located<String>>,
}

/// The keys of `agent.credentials[i].budget:`.
pub(crate) const BUDGET_KEYS: &[Key] = &[
    Key::optional(
        "requests",
        Kind::Integer,
        "the most requests one run may send with the key",
    ),
    Key::optional(
        "request_bytes",
        Kind::Str(StrKind::Line),
        "the most request body bytes one run may send with the key (`4096`, `512K`, `10M`)",
    ),
];

/// The keys of one `agent.credentials:` entry.
pub(crate) const KEYS: &[Key] = &[
    Key::required(
        "env",
        Kind::Str(StrKind::Line),
        "the variable holding the key in cyclix's environment (the agent gets a placeholder)",
        Some("`env: ANTHROPIC_API_KEY`"),
    ),
    Key::required(
        "host",
        Kind::Str(StrKind::Line),
        "the API host the proxy adds the key for (exact name)",
        Some("`host: api.anthropic.com`"),
    ),
    Key::required(
        "header",
        Kind::Str(StrKind::Line),
        "the request header that carries the key, e.g. `x-api-key` or `Authorization`",
        Some("`header: x-api-key`"),
    ),
    Key::optional(
        "scheme",
        Kind::Str(StrKind::Line),
        "`raw` (the header is the key) or `bearer` (`Bearer KEY`); default raw",
    ),
    Key::required(
        "paths",
        Kind::StrList,
        "request paths allowed (exact, optional query string; `/dir/*` for below /dir/)",
        Some("`paths: [/v1/messages]`"),
    ),
    Key::optional(
        "methods",
        Kind::StrList,
        "request methods allowed (default [POST])",
    ),
    Key::optional("port", Kind::Integer, "the host's TLS port (default 443)"),
    Key::optional(
        "placeholder_prefix",
        Kind::Str(StrKind::Line),
        "what the placeholder starts with (default: the vendor's key prefix for known names)",
    ),
    Key::optional(
        "base_url_env",
        Kind::Str(StrKind::Line),
        "the variable the agent's CLI reads its base URL from (default: ENV with _API_KEY/_KEY/_TOKEN replaced by _BASE_URL)",
    ),
    Key::optional(
        "base_url_path",
        Kind::Str(StrKind::Line),
        "what follows http://PROXY:PORT in the base URL, e.g. `/v1` for OpenAI SDKs (default empty)",
    ),
    Key::optional(
        "budget",
        Kind::Map(BUDGET_KEYS),
        "the run's spend cap on this credential: `{ requests: N, request_bytes: SIZE }` (default: none)",
    ),
];

/// Reads one `agent.credentials:` entry at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawCredential> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawCredential {
        at: f.pos(),
        env: d.string(&f, "env"),
        host: d.string(&f, "host"),
        header: d.string(&f, "header"),
        scheme: d.string(&f, "scheme"),
        paths: d.strings(&f, "paths"),
        methods: d.strings(&f, "methods"),
        port: d.number(&f, "port"),
        placeholder_prefix: d.string(&f, "placeholder_prefix"),
        base_url_env: d.string(&f, "base_url_env"),
        base_url_path: d.string(&f, "base_url_path"),
        budget: d.section(&f, "budget", decode_budget),
    })
}

/// Reads `agent.credentials[i].budget:` at `path`.
fn decode_budget(d: &mut Decoder, node: &Node, path: &str) -> Option<RawBudget> {
    let f = d.mapping(node, path, BUDGET_KEYS)?;
    Some(RawBudget {
        at: f.pos(),
        requests: d.number(&f, "requests"),
        request_bytes: d.string(&f, "request_bytes"),
    })
}

/// `budget:`: at least one cap, each at least 1. `Err(())` after a diagnostic; `Ok(None)`
/// when the entry has no budget.
fn budget_of(
    b: Option<&RawBudget>,
    out: &mut Vec<Diagnostic>,
) -> Result<Option<CredentialBudget>, ()> {
    let Some(b) = b else {
        return Ok(None);
    };
    let before = out.len();
    let requests = b.requests.as_ref().and_then(|r| {
        let n = decimal_int(&r.value)
            .and_then(|n| u64::try_from(n).ok())
            .filter(|n| *n >= 1);
        if n.is_none() {
            out.push(
                r.diag(format!("`{}` is not a number of requests", r.value))
                    .hint("write a whole number of requests, at least 1"),
            );
        }
        n
    });
    let request_bytes = b
        .request_bytes
        .as_ref()
        .and_then(|r| match byte_count(&r.value) {
            Ok(n) => Some(n),
            Err(e) => {
                out.push(
                    r.diag(e)
                        .hint("write a size such as `4096`, `512K` or `10M`"),
                );
                None
            }
        });
    if b.requests.is_none() && b.request_bytes.is_none() {
        out.push(
            b.at.diag("`budget` sets no cap")
                .hint("set `requests: N`, `request_bytes: SIZE` or both, or remove `budget`"),
        );
    }
    if out.len() == before {
        Ok(Some(CredentialBudget {
            requests,
            request_bytes,
        }))
    } else {
        Err(())
    }
}

/// The default `base_url_env` of `env`: its `_API_KEY`, `_KEY` or `_TOKEN` suffix replaced
/// by `_BASE_URL` (`ANTHROPIC_API_KEY` → `ANTHROPIC_BASE_URL`), else `ENV_BASE_URL`.
#[must_use]
pub fn default_base_url_env(env: &str) -> String {
    for suffix in ["_API_KEY", "_KEY", "_TOKEN"] {
        if let Some(stem) = env.strip_suffix(suffix).filter(|s| !s.is_empty()) {
            return format!("{stem}_BASE_URL");
        }
    }
    format!("{env}_BASE_URL")
}

/// An HTTP header name: a token of `[A-Za-z0-9-]`, 1–64 characters (RFC 9110 allows more;
/// every API key header is of this shape and it pastes safely into squid.conf).
fn header_name(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 64 {
        return Err(format!("header `{s}` must be 1-64 characters"));
    }
    if !s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(format!(
            "header `{s}` is not a header name: use letters, digits and `-`"
        ));
    }
    Ok(())
}

/// A request path pattern: `/`-rooted, of `[A-Za-z0-9/_.~:@+-]`, no `.`/`..` segment, no
/// `//`; `*` only as a final `/*` (everything below that directory).
pub(crate) fn path_pattern(s: &str) -> Result<(), String> {
    if !s.starts_with('/') {
        return Err(format!("path `{s}` does not start with `/`"));
    }
    let body = s.strip_suffix("/*").unwrap_or(s);
    if let Some(c) = body.chars().find(|c| {
        !(c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '.' | '~' | ':' | '@' | '+' | '-'))
    }) {
        return Err(format!(
            "path `{s}` contains {c:?}: write a plain path (letters, digits, `/_.~:@+-`), `*` only as a final `/*`, no query string"
        ));
    }
    if body.contains("//") || body.split('/').any(|seg| seg == "." || seg == "..") {
        return Err(format!("path `{s}` has an empty, `.` or `..` segment"));
    }
    Ok(())
}

/// Validates `agent.credentials:`: each entry's env (a valid name, not in `agent.env`, not
/// twice), host (exact, as the allowlist validates it; not twice), header, scheme, paths,
/// methods, port, placeholder prefix and base-URL variable.
pub(crate) fn validate(
    raw: &[RawCredential],
    agent_env: Option<&Located<Vec<Located<String>>>>,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<Credential>> {
    let before = out.len();
    let mut envs: BTreeMap<String, usize> = BTreeMap::new();
    let mut hosts: BTreeMap<String, usize> = BTreeMap::new();
    let mut result = Vec::new();
    for c in raw {
        let env = c
            .env
            .as_ref()
            .and_then(|e| env_of(e, agent_env, &mut envs, out));
        let host = c.host.as_ref().and_then(|h| host_of(h, &mut hosts, out));
        let header = c.header.as_ref().and_then(|h| match header_name(&h.value) {
            Ok(()) => Some(h.value.to_ascii_lowercase()),
            Err(e) => {
                out.push(
                    h.diag(e)
                        .hint("name the header the API reads its key from, e.g. `x-api-key`"),
                );
                None
            }
        });
        let scheme = scheme_of(c.scheme.as_ref(), out);
        let paths = paths_of(c.paths.as_ref(), out);
        let methods = methods_of(c.methods.as_ref(), out);
        let port = port_of(c.port.as_ref(), out);
        let prefix = prefix_of(c.placeholder_prefix.as_ref(), env.as_deref(), out);
        let base_url_env = base_url_of(c.base_url_env.as_ref(), env.as_deref(), out);
        let budget = budget_of(c.budget.as_ref(), out).ok();
        let base_url_path = c.base_url_path.as_ref().map_or(Some(String::new()), |b| {
            match path_pattern(&b.value) {
                Ok(()) if !b.value.ends_with("/*") && b.value != "/" => Some(b.value.clone()),
                _ => {
                    out.push(
                        b.diag(format!("`{}` is not a base URL path", b.value))
                            .hint("write a plain path such as `/v1` (no trailing `/`, no `*`)"),
                    );
                    None
                }
            }
        });
        if let (
            Some(env),
            Some(host),
            Some(header),
            Some(scheme),
            Some(paths),
            Some(methods),
            Some(port),
            Some(placeholder_prefix),
            Some(base_url_env),
            Some(base_url_path),
            Some(budget),
        ) = (
            env,
            host,
            header,
            scheme,
            paths,
            methods,
            port,
            prefix,
            base_url_env,
            base_url_path,
            budget,
        ) {
            result.push(Credential {
                env,
                host,
                header,
                scheme,
                paths,
                methods,
                port,
                placeholder_prefix,
                base_url_env,
                base_url_path,
                budget,
                line: c.at.line,
            });
        }
    }
    base_urls_distinct(raw, &result, agent_env, out);
    (out.len() == before).then_some(result)
}

/// A credential's base-URL variable names no other variable the agent gets: not one of
/// `agent.env`, nor another credential's variable or base URL (the container would get the
/// name twice, one value silently winning).
fn base_urls_distinct(
    raw: &[RawCredential],
    result: &[Credential],
    agent_env: Option<&Located<Vec<Located<String>>>>,
    out: &mut Vec<Diagnostic>,
) {
    if result.len() != raw.len() {
        return; // an entry already has a problem; its names are not known
    }
    let in_env = |n: &str| agent_env.is_some_and(|l| l.value.iter().any(|e| e.value == n));
    for (i, (r, c)) in raw.iter().zip(result).enumerate() {
        let clash = in_env(&c.base_url_env)
            || result.iter().enumerate().any(|(j, o)| {
                o.env == c.base_url_env || (j != i && o.base_url_env == c.base_url_env)
            });
        if clash {
            let at = r
                .base_url_env
                .as_ref()
                .map_or_else(|| r.at.diag(""), |b| b.diag(""));
            out.push(
                Diagnostic {
                    message: format!(
                        "the base-URL variable `{}` is also another variable the agent gets",
                        c.base_url_env
                    ),
                    ..at
                }
                .hint("set `base_url_env` to a name of its own, e.g. ANTHROPIC_BASE_URL"),
            );
        }
    }
}

fn scheme_of(s: Option<&Located<String>>, out: &mut Vec<Diagnostic>) -> Option<CredentialScheme> {
    let Some(s) = s else {
        return Some(CredentialScheme::Raw);
    };
    match s.value.as_str() {
        "raw" => Some(CredentialScheme::Raw),
        "bearer" => Some(CredentialScheme::Bearer),
        other => {
            out.push(
                s.diag(format!("unknown scheme `{other}`"))
                    .hint("write `raw` (the header holds the key) or `bearer` (`Bearer KEY`)"),
            );
            None
        }
    }
}

fn port_of(p: Option<&Located<String>>, out: &mut Vec<Diagnostic>) -> Option<u16> {
    let Some(p) = p else {
        return Some(443);
    };
    match decimal_int(&p.value).and_then(|n| u16::try_from(n).ok()) {
        Some(n) if n >= 1 => Some(n),
        _ => {
            out.push(
                p.diag(format!("port `{}` is out of range", p.value))
                    .hint("use the API host's TLS port, 1 to 65535 (default 443)"),
            );
            None
        }
    }
}

fn base_url_of(
    b: Option<&Located<String>>,
    env: Option<&str>,
    out: &mut Vec<Diagnostic>,
) -> Option<String> {
    let hint = "name the variable the CLI reads its base URL from, e.g. ANTHROPIC_BASE_URL";
    let Some(b) = b else {
        return env.map(default_base_url_env);
    };
    if let Err(e) = env_name(&b.value) {
        out.push(b.diag(e).hint(hint));
        return None;
    }
    if env == Some(b.value.as_str()) {
        out.push(
            b.diag(format!("`{}` is the credential's own variable", b.value))
                .hint(hint),
        );
        return None;
    }
    Some(b.value.clone())
}

fn env_of(
    e: &Located<String>,
    agent_env: Option<&Located<Vec<Located<String>>>>,
    seen: &mut BTreeMap<String, usize>,
    out: &mut Vec<Diagnostic>,
) -> Option<String> {
    if let Err(msg) = env_name(&e.value) {
        out.push(e.diag(msg).hint(
            "name the variable that holds the key in cyclix's environment, e.g. ANTHROPIC_API_KEY",
        ));
        return None;
    }
    if let Some(line) = seen.get(&e.value) {
        out.push(
            e.diag(format!(
                "`{}` is a credential twice (first at line {line})",
                e.value
            ))
            .hint("list each credential once"),
        );
        return None;
    }
    seen.insert(e.value.clone(), e.line);
    if let Some(dup) = agent_env.and_then(|l| l.value.iter().find(|n| n.value == e.value)) {
        out.push(
            e.diag(format!(
                "`{}` is also in agent.env (line {}), which would hand the real value to the agent",
                e.value, dup.line
            ))
            .hint(format!(
                "remove `{}` from agent.env: as a credential it stays outside the sandbox",
                e.value
            )),
        );
        return None;
    }
    Some(e.value.clone())
}

fn host_of(
    h: &Located<String>,
    seen: &mut BTreeMap<String, usize>,
    out: &mut Vec<Diagnostic>,
) -> Option<String> {
    let host = match host_pattern(&h.value) {
        Ok(HostPattern::Exact(host)) => host,
        Ok(HostPattern::Subdomains(_)) => {
            out.push(
                h.diag(format!(
                    "`{}` is a wildcard; a credential is for one host",
                    h.value
                ))
                .hint("write the API's exact host name, e.g. api.anthropic.com"),
            );
            return None;
        }
        Err(msg) => {
            out.push(
                h.diag(format!("invalid credential host: {msg}"))
                    .hint("write the API's exact host name, e.g. api.anthropic.com"),
            );
            return None;
        }
    };
    if let Some(line) = seen.get(&host) {
        out.push(
            h.diag(format!(
                "`{host}` has a credential twice (first at line {line})"
            ))
            .hint("give each host one credential"),
        );
        return None;
    }
    seen.insert(host.clone(), h.line);
    Some(host)
}

fn paths_of(
    list: Option<&Located<Vec<Located<String>>>>,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let list = list?;
    let before = out.len();
    if list.value.is_empty() {
        out.push(
            list.diag("`paths` is empty: no request could use the credential")
                .hint("list the API paths the agent needs, e.g. [/v1/messages]"),
        );
    }
    for p in &list.value {
        if let Err(e) = path_pattern(&p.value) {
            out.push(p.diag(e).hint("e.g. `/v1/messages` or `/v1/models/*`"));
        }
    }
    (out.len() == before).then(|| list.value.iter().map(|p| p.value.clone()).collect())
}

fn methods_of(
    list: Option<&Located<Vec<Located<String>>>>,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let Some(list) = list else {
        return Some(vec!["POST".into()]);
    };
    let before = out.len();
    if list.value.is_empty() {
        out.push(
            list.diag("`methods` is empty")
                .hint("list the methods, or remove the key for the default [POST]"),
        );
    }
    let mut methods: Vec<String> = Vec::new();
    for m in &list.value {
        if METHODS.contains(&m.value.as_str()) {
            if !methods.contains(&m.value) {
                methods.push(m.value.clone());
            }
        } else {
            out.push(
                m.diag(format!(
                    "`{}` is not a method a credential may use",
                    m.value
                ))
                .hint(format!("use one of {}", METHODS.join(", "))),
            );
        }
    }
    (out.len() == before).then_some(methods)
}

fn prefix_of(
    p: Option<&Located<String>>,
    env: Option<&str>,
    out: &mut Vec<Diagnostic>,
) -> Option<String> {
    let Some(p) = p else {
        return Some(
            KNOWN_PREFIXES
                .iter()
                .find(|(n, _)| Some(*n) == env)
                .map_or("", |(_, pre)| pre)
                .to_string(),
        );
    };
    if p.value.len() > 32
        || !p
            .value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        out.push(
            p.diag(format!(
                "placeholder prefix `{}` is not a short token",
                p.value
            ))
            .hint("use at most 32 letters, digits, `-`, `_` or `.`, e.g. `sk-ant-api03-`"),
        );
        return None;
    }
    Some(p.value.clone())
}

/// Variables known to carry an API key, and the host that reads it (research/agents.md).
pub const KNOWN_KEY_HOSTS: &[(&str, &str)] = &[
    ("ANTHROPIC_API_KEY", "api.anthropic.com"),
    ("ANTHROPIC_AUTH_TOKEN", "api.anthropic.com"),
    ("OPENAI_API_KEY", "api.openai.com"),
    ("CODEX_API_KEY", "api.openai.com"),
    ("GEMINI_API_KEY", "generativelanguage.googleapis.com"),
    ("GOOGLE_API_KEY", "generativelanguage.googleapis.com"),
];

/// Whether `host` is allowed by `allow` (an exact entry, or strictly below a `*.` entry).
fn allowlisted(allow: &[HostPattern], host: &str) -> bool {
    allow.iter().any(|p| match p {
        HostPattern::Exact(h) => h == host,
        HostPattern::Subdomains(d) => host
            .strip_suffix(d.as_str())
            .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.')),
    })
}

/// Warnings for a spec that still hands an API key to the agent through `agent.env`: a
/// known key variable whose API host is allowlisted or credentialed, or any
/// credential-looking name (`KEY`, `TOKEN`, `SECRET`) while the spec has credentials. Each
/// names the fix (`agent.credentials`).
#[must_use]
pub fn env_key_warnings(spec: &crate::spec::Spec) -> Vec<String> {
    let credentialed = |h: &str| spec.agent.credentials.iter().any(|c| c.host == h);
    let mut out = Vec::new();
    for name in &spec.agent.env {
        let known = KNOWN_KEY_HOSTS
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, h)| *h)
            .filter(|h| allowlisted(&spec.egress.allow, h) || credentialed(h));
        let looks = ["KEY", "TOKEN", "SECRET"].iter().any(|m| name.contains(m));
        let why = match known {
            Some(h) => format!("the agent can send it to {h} and to any other allowlisted host"),
            None if looks && !spec.agent.credentials.is_empty() => {
                "the agent holds it and can send it to any allowlisted host".to_string()
            }
            None => continue,
        };
        out.push(format!(
            "agent.env: `{name}` hands an API key to the agent ({why}); fix: move it to `agent.credentials` (env: {name}, host, header, paths) so the proxy adds it and the agent holds a placeholder"
        ));
    }
    out
}
