//! `agent.credentials` in the proxy: one reverse-proxy (accelerator) port per credential that
//! forwards only to its host over TLS, strips every auth header the agent sent, adds the real
//! one from an include file only the proxy container mounts, and allows only the listed
//! methods and paths; on the forward port a request carrying a run's placeholder is refused.
//! Pure.
//!
//! Measured with squid-openssl 6.13 on the testbed (lead, issue 13; `helpers/RULES13.md`):
//! `http_port P accel defaultsite=HOST no-vhost` + `cache_peer HOST parent 443 0 originserver
//! tls` + `cache_peer_access` + `never_direct`; `request_header_access H deny` then
//! `request_header_add H "V"` (it does not replace a field, so the agent's is removed first);
//! an absolute URL sent to the accel port still goes to the peer with Host rewritten; squid
//! adds `Surrogate-Capability` to accel requests (removed here).
//!
//! The placeholder inside a TLS tunnel (CONNECT) is invisible to the proxy; there it is
//! worthless, since no host but the credential's port ever turns it into the key.

use std::fmt::Write as _;

use super::{DenyReason, ProxyPlan};
use crate::spec::{Credential, CredentialScheme};

/// The first credential port: credential `i` listens on `CREDENTIAL_PORT_BASE + i`.
pub const CREDENTIAL_PORT_BASE: u16 = 3129;

/// Where the proxy container finds the include file with the real header lines (a podman
/// secret mounted there, readable by squid's user only).
pub const CREDENTIALS_INCLUDE_PATH: &str = "/etc/cyclix/credentials.conf";

/// Where the proxy container finds `egress.ca_certs[i]` (read-only bind mount).
#[must_use]
pub fn ca_path(i: usize) -> String {
    format!("/etc/cyclix/ca/{i}.pem")
}

/// The external ACL helper shipped in the proxy image (`images/proxy/cyclix-budget`) that
/// counts a credential's requests against the run's budget.
pub const BUDGET_HELPER: &str = "/usr/local/libexec/cyclix-budget";

/// The error page (in the image's squid templates) of a request refused over the budget.
pub const BUDGET_PAGE: &str = "ERR_CYCLIX_BUDGET";

/// Squid's uid and gid in the proxy image (Debian's static `proxy` user, base-passwd): the
/// owner of the mounted include file (mode 0400).
pub const PROXY_UID: u32 = 13;

/// The header names an agent could carry a key in: each is removed on a credential's port
/// (besides the credential's own header), and on the forward port one carrying a placeholder
/// is refused.
pub const AUTH_HEADERS: &[&str] = &[
    "Authorization",
    "Proxy-Authorization",
    "x-api-key",
    "x-goog-api-key",
];

/// The listen port of credential `i`.
#[must_use]
pub fn port_of(i: usize) -> u16 {
    CREDENTIAL_PORT_BASE.saturating_add(u16::try_from(i).unwrap_or(u16::MAX))
}

/// The per-run placeholder the agent's variable holds: `prefix` + `cyclix-placeholder-` +
/// 32 lowercase hex digits (`hex`, from 16 random bytes).
#[must_use]
pub fn placeholder(prefix: &str, hex: &str) -> String {
    format!("{prefix}cyclix-placeholder-{hex}")
}

/// The placeholder part the proxy matches on the forward port: everything after the prefix
/// (`cyclix-placeholder-HEX`), which is `[a-z0-9-]` and so safe in a regex. `None` for a
/// placeholder not of the [`placeholder`] shape (it is then not rendered: fail closed, the
/// port is refused below).
fn placeholder_token(p: &str) -> Option<&str> {
    let at = p.find("cyclix-placeholder-")?;
    let tok = &p[at..];
    tok.bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        .then_some(tok)
}

/// A path pattern as a `urlpath_regex` (`^/v1/messages(\?.*)?$`; `/dir/*` →
/// `^/dir/[A-Za-z0-9/_.~:@+-]*(\?.*)?$`). The spec validator allows only `[A-Za-z0-9/_.~:@+-]`
/// and a final `/*`, so escaping `.` and `+` suffices.
fn path_regex(p: &str) -> String {
    let (body, below) = match p.strip_suffix("/*") {
        Some(b) => (b, true),
        None => (p, false),
    };
    let mut re = String::from("^");
    for c in body.chars() {
        if matches!(c, '.' | '+') {
            re.push('\\');
        }
        re.push(c);
    }
    if below {
        re.push_str("/[A-Za-z0-9/_.~:@+-]*");
    }
    re.push_str("(\\?.*)?$");
    re
}

/// Whether the plan's credentials can be rendered: one placeholder of the right shape each.
fn usable(plan: &ProxyPlan) -> bool {
    plan.credentials.len() == plan.placeholders.len()
        && plan
            .placeholders
            .iter()
            .all(|p| placeholder_token(p).is_some())
}

/// The `http_port` lines of the credential ports (after the forward port's).
pub(super) fn render_ports(out: &mut String, plan: &ProxyPlan) {
    if plan.credentials.is_empty() || !usable(plan) {
        return;
    }
    out.push_str("# Credential ports (agent.credentials): reverse proxies, one per API host.\n");
    for (i, c) in plan.credentials.iter().enumerate() {
        let _ = writeln!(
            out,
            "http_port {} accel defaultsite={} no-vhost name=cred{i}",
            port_of(i),
            c.host
        );
    }
}

/// The credentials' peers, ACLs and header rules, and the `include` of the real header lines.
/// Goes after the other ACLs (it uses `to_private`).
pub(super) fn render_acls(out: &mut String, plan: &ProxyPlan) {
    if plan.credentials.is_empty() {
        return;
    }
    out.push_str("\n# Credentials: the proxy adds the key; the agent holds a placeholder.\n");
    if !usable(plan) {
        out.push_str("# placeholders unusable: no credential port is rendered\n");
        return;
    }
    let cafiles = (0..plan.ca_files).fold(String::new(), |mut s, i| {
        let _ = write!(s, " tls-cafile={}", ca_path(i));
        s
    });
    super::lines::annotate_acls(
        out,
        &DenyReason::CREDENTIAL,
        "r_cred",
        super::decision::REASON_CREDENTIAL,
    );
    out.push_str(
        "# `.`/`..` segments (and their %-encodings) never reach a credential's host.\n\
         acl cred_dot_segment urlpath_regex -i /(\\.|%2e){1,2}(/|\\?|$) %2f %5c\n",
    );
    if plan.credentials.iter().any(|c| c.budget.is_some()) {
        let _ = writeln!(
            out,
            "# The run's budgets: one helper counts every request a budgeted port would forward\n\
             # (ttl=0 and cache=0: asked for every request, concurrent ones of one size too; one\n\
             # child, so the counts are one sequence; started at the first budgeted request).\n\
             external_acl_type cred_budget ttl=0 negative_ttl=0 cache=0 queue-size=128 children-max=1 children-startup=0 %{{Content-Length}}>h {BUDGET_HELPER}\n\
             deny_info 429:{BUDGET_PAGE} {}",
            DenyReason::CredentialBudget.acl()
        );
    }
    for (i, c) in plan.credentials.iter().enumerate() {
        let n = format!("cred{i}");
        let _ = writeln!(out, "# {n}: ${} for {}:{}", c.env, c.host, c.port);
        let _ = writeln!(
            out,
            "cache_peer {} parent {} 0 no-query no-digest no-netdb-exchange originserver tls tls-default-ca=on{cafiles} name={n}_peer",
            c.host, c.port
        );
        let _ = writeln!(out, "acl {n}_port myportname {n}");
        if let Some(b) = c.budget {
            let cap = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |n| n.to_string());
            let _ = writeln!(
                out,
                "acl {n}_budget external cred_budget {n} {} {}",
                cap(b.requests),
                cap(b.request_bytes)
            );
        }
        let _ = writeln!(out, "acl {n}_method method {}", c.methods.join(" "));
        let paths: Vec<String> = c.paths.iter().map(|p| path_regex(p)).collect();
        let _ = writeln!(out, "acl {n}_path urlpath_regex {}", paths.join(" "));
        let _ = writeln!(out, "cache_peer_access {n}_peer allow {n}_port");
        let _ = writeln!(out, "cache_peer_access {n}_peer deny all");
        let _ = writeln!(out, "never_direct allow {n}_port");
        let mut strip: Vec<&str> = AUTH_HEADERS.to_vec();
        if !strip.iter().any(|h| h.eq_ignore_ascii_case(&c.header)) {
            strip.push(&c.header);
        }
        strip.push("Surrogate-Capability");
        for h in strip {
            let _ = writeln!(out, "request_header_access {h} deny {n}_port");
        }
    }
    out.push_str("# On the forward port, a run's placeholder is refused wherever it shows.\n");
    for (i, (c, p)) in plan.credentials.iter().zip(plan.placeholders).enumerate() {
        let Some(tok) = placeholder_token(p) else {
            continue;
        };
        let mut headers: Vec<&str> = AUTH_HEADERS.to_vec();
        if !headers.iter().any(|h| h.eq_ignore_ascii_case(&c.header)) {
            headers.push(&c.header);
        }
        // One `req_header` ACL per header name (squid refuses a second name under one ACL),
        // grouped with the URL check by `any-of`.
        let mut parts = Vec::new();
        for (j, h) in headers.iter().enumerate() {
            let _ = writeln!(out, "acl placeholder{i}_h{j} req_header {h} -i {tok}");
            parts.push(format!("placeholder{i}_h{j}"));
        }
        let _ = writeln!(out, "acl placeholder{i}_url url_regex -i {tok}");
        parts.push(format!("placeholder{i}_url"));
        let _ = writeln!(out, "acl placeholder{i} any-of {}", parts.join(" "));
    }
    out.push_str("# The real header lines (a podman secret only this container mounts).\n");
    let _ = writeln!(out, "include {CREDENTIALS_INCLUDE_PATH}");
}

/// The access rules of the credential ports and the placeholder refusal; right after the
/// client check, in every mode (report-only never relaxes them). Every request on a
/// credential port is decided here.
pub(super) fn render_rules(out: &mut String, plan: &ProxyPlan) {
    if plan.credentials.is_empty() {
        return;
    }
    let access = |out: &mut String, action: &str, conds: &[&str]| {
        let _ = writeln!(out, "http_access {action} {}", conds.join(" "));
    };
    if !usable(plan) {
        return;
    }
    out.push_str("# Credential ports: listed methods and paths only, never a private address.\n");
    for (i, c) in plan.credentials.iter().enumerate() {
        let n = format!("cred{i}");
        let port = format!("{n}_port");
        let method = format!("!{n}_method");
        let path = format!("!{n}_path");
        access(
            out,
            "deny",
            &[&port, &method, DenyReason::CredentialMethod.acl()],
        );
        access(
            out,
            "deny",
            &[&port, "cred_dot_segment", DenyReason::CredentialPath.acl()],
        );
        access(
            out,
            "deny",
            &[&port, &path, DenyReason::CredentialPath.acl()],
        );
        access(
            out,
            "deny",
            &[&port, "to_private", DenyReason::ResolvesToPrivateIp.acl()],
        );
        if c.budget.is_some() {
            // Allowed only when the helper counted it; anything else (over the budget, a
            // helper that failed) is refused: fail closed.
            let budget = format!("{n}_budget");
            access(out, "allow", &[&port, &budget, "r_cred"]);
            access(out, "deny", &[&port, DenyReason::CredentialBudget.acl()]);
        } else {
            access(out, "allow", &[&port, "r_cred"]);
        }
    }
    out.push_str("# A placeholder anywhere else is worthless: refused.\n");
    for i in 0..plan.credentials.len() {
        let any = format!("placeholder{i}");
        access(out, "deny", &[&any, DenyReason::Placeholder.acl()]);
    }
}

/// Why a credential value cannot go into the include file (the value itself is never named).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the value of `{env}` holds a character squid cannot carry in a header (a space, quote, backslash, control or non-ASCII byte); fix: set it to the key alone"
)]
pub struct ValueError {
    /// The credential's variable.
    pub env: String,
}

/// The include file's text: one `request_header_add HEADER "VALUE" credN_port` line per
/// credential, `values[i]` being the value of `credentials[i].env` (`Bearer VALUE` for the
/// `bearer` scheme). `%` is doubled (the value is a logformat string).
///
/// # Errors
/// [`ValueError`] for a value with a byte outside printable ASCII, a space, `"` or `\`.
pub fn include_file(credentials: &[Credential], values: &[&[u8]]) -> Result<String, ValueError> {
    let mut out = String::from("# cyclix: credential header lines (secret; never on disk)\n");
    for (i, (c, v)) in credentials.iter().zip(values).enumerate() {
        let ok = !v.is_empty()
            && v.iter()
                .all(|b| b.is_ascii_graphic() && *b != b'"' && *b != b'\\');
        let text = std::str::from_utf8(v)
            .ok()
            .filter(|_| ok)
            .ok_or_else(|| ValueError { env: c.env.clone() })?;
        let text = text.replace('%', "%%");
        let value = match c.scheme {
            CredentialScheme::Raw => text,
            CredentialScheme::Bearer => format!("Bearer {text}"),
        };
        let _ = writeln!(
            out,
            "request_header_add {} \"{value}\" cred{i}_port",
            c.header
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
