//! `egress:` the hosts and ports the sandbox may reach through the proxy.

use std::collections::BTreeSet;

use crate::spec::keys::{Key, Kind};
use crate::spec::located::Located;
use crate::spec::rules::hosts::host_pattern;
use crate::spec::rules::paths::mount_path;
use crate::spec::rules::sizes::decimal_int;
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{CaCert, Diagnostic, Egress, SpecContext};

/// `egress:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawEgress {
    /// `egress.allow`.
    pub(crate) allow: Option<Located<Vec<Located<String>>>>,
    /// `egress.ports`, each as written (plain decimal integers).
    pub(crate) ports: Option<Located<Vec<Located<String>>>>,
    /// `egress.http_ports`, each as written.
    pub(crate) http_ports: Option<Located<Vec<Located<String>>>>,
    /// `egress.report_only`.
    pub(crate) report_only: Option<Located<bool>>,
    /// `egress.ca_certs`.
    pub(crate) ca_certs: Option<Located<Vec<Located<String>>>>,
}

/// The keys of `egress:`.
pub(crate) const KEYS: &[Key] = &[
    Key::optional(
        "allow",
        Kind::StrList,
        "hosts the sandbox may reach: `pypi.org`, `*.pythonhosted.org`",
    ),
    Key::optional(
        "ports",
        Kind::IntList,
        "ports allowed on those hosts (default [443])",
    ),
    Key::optional(
        "http_ports",
        Kind::IntList,
        "ports of `ports` that take plain HTTP (default [80]); the others take CONNECT + TLS only",
    ),
    Key::optional(
        "report_only",
        Kind::Bool,
        "log refused requests instead of blocking them",
    ),
    Key::optional(
        "ca_certs",
        Kind::StrList,
        "PEM files of extra CAs the proxy trusts for credential hosts (besides the system CAs)",
    ),
];

/// Reads `egress:` at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawEgress> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawEgress {
        allow: d.strings(&f, "allow"),
        ports: d.numbers(&f, "ports"),
        http_ports: d.numbers(&f, "http_ports"),
        report_only: d.boolean(&f, "report_only"),
        ca_certs: d.strings(&f, "ca_certs"),
    })
}

/// Validates `egress:`: the allowlist (normalised, sorted, deduplicated) and the ports.
pub(crate) fn validate(
    e: &RawEgress,
    ctx: &SpecContext,
    out: &mut Vec<Diagnostic>,
) -> Option<Egress> {
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
            ports.extend(port_numbers(&list.value, out));
        }
    }
    let http_ports = match &e.http_ports {
        // The default: port 80, when the spec allows it at all.
        None => ports.iter().copied().filter(|p| *p == 80).collect(),
        Some(list) => {
            let listed: BTreeSet<u16> = port_numbers(&list.value, out).into_iter().collect();
            for p in &list.value {
                if let Some(n) = port_number(&p.value)
                    && !ports.contains(&n)
                {
                    out.push(
                        p.diag(format!("port {n} takes plain HTTP but is not in `ports`"))
                            .hint(format!(
                                "add {n} to egress.ports, or remove it from egress.http_ports"
                            )),
                    );
                }
            }
            listed
        }
    };
    let ca_certs = ca_certs(e.ca_certs.as_ref(), ctx, out);
    if out.len() != before {
        return None;
    }
    Some(Egress {
        allow: allow.into_iter().collect(),
        ports: ports.into_iter().collect(),
        http_ports: http_ports.into_iter().collect(),
        report_only: e.report_only.as_ref().is_some_and(|b| b.value),
        ca_certs,
    })
}

/// A port as written: a plain decimal from 1 to 65535.
fn port_number(text: &str) -> Option<u16> {
    decimal_int(text)
        .and_then(|n| u16::try_from(n).ok())
        .filter(|n| *n >= 1)
}

/// The ports of a list, each out-of-range entry reported.
fn port_numbers(list: &[Located<String>], out: &mut Vec<Diagnostic>) -> Vec<u16> {
    let mut found = Vec::new();
    for p in list {
        match port_number(&p.value) {
            Some(n) => found.push(n),
            None => out.push(
                p.diag(format!("port `{}` is out of range", p.value))
                    .hint("use a port number from 1 to 65535"),
            ),
        }
    }
    found
}

/// `egress.ca_certs`: absolute (or `~/`) paths, normalised, free of podman mount-option
/// characters, each once. The files themselves are read after validation
/// (`host::ca_certs::check`): a missing, unreadable or non-PEM file is reported there.
fn ca_certs(
    list: Option<&Located<Vec<Located<String>>>>,
    ctx: &SpecContext,
    out: &mut Vec<Diagnostic>,
) -> Vec<CaCert> {
    let mut result: Vec<CaCert> = Vec::new();
    for p in list.map(|l| l.value.as_slice()).unwrap_or_default() {
        let Some(path) = mount_path(p, Some(&ctx.home), out) else {
            continue;
        };
        if result.iter().any(|c| c.path == path) {
            out.push(
                p.diag(format!("`{path}` is listed twice"))
                    .hint("list each CA file once"),
            );
            continue;
        }
        result.push(CaCert {
            path,
            line: p.line,
            column: p.column,
        });
    }
    result
}

/// The allowlist entries of `raw` that normalisation changed (case, trailing dot, IDN, Unicode
/// compatibility forms such as `ⓔ` or `。`), each as ``LINE:COL: egress.allow[i]: `WRITTEN`
/// is read as `NORMALISED` ``, for `spec validate` to show (issue 18, item 8).
pub(crate) fn host_changes(raw: &super::RawSpec) -> Vec<String> {
    let Some(list) = raw.egress.as_ref().and_then(|e| e.allow.as_ref()) else {
        return Vec::new();
    };
    list.value
        .iter()
        .filter_map(|entry| {
            let shown = match host_pattern(&entry.value).ok()? {
                crate::spec::HostPattern::Exact(h) => h,
                crate::spec::HostPattern::Subdomains(h) => format!("*.{h}"),
            };
            (shown != entry.value).then(|| {
                format!(
                    "{}:{}: {}: `{}` is read as `{shown}`",
                    entry.line,
                    entry.column,
                    entry.path,
                    entry.value.escape_debug()
                )
            })
        })
        .collect()
}
