//! The proxy's `squid.conf`: the settings, the ACLs and the access rules in their measured
//! order (see the module `proxy` for the rules that must hold). Pure.

use std::fmt::Write as _;

use super::lines::{access, annotate_acls};
use super::{DenyReason, PRIVATE_RANGES, ProxyPlan, REASON_ALLOWLISTED, WOULD_DENY_PREFIX};
use crate::spec::HostPattern;

/// The JSON-lines access log format: one object per request, `%"` quotes and escapes each
/// value so URLs with `"` or `\` still give valid JSON (measured). `%{reason}note` is the
/// annotation set by the `annotate_transaction` ACL on the `http_access` (or `ssl_bump`,
/// `on_unsupported_protocol`) line that decided; `%ssl::>sni` is the SNI a tunnel's `ClientHello`
/// carried and `%err_code` squid's error (`ERR_PROTOCOL_UNKNOWN` for non-TLS bytes in a tunnel);
/// `%>lp` the proxy's port the request came in on (a credential's port tells the credential)
/// and `%{Content-Length}>h` the request's declared body size (the credentials' counts).
/// The run's key ([`ProxyPlan::log_key`]) goes first: `logformat jsonl {"key":"KEY","ts":…`.
const LOGFORMAT_REST: &str = r#","ts":%ts.%03tu,"client":"%>a","method":"%"rm","host":"%">rd","port":"%>rP","url":"%"ru","status":"%>Hs","squid":"%Ss","server":"%<a","reason":"%{reason}note","ms":"%tr","bytes":"%<st","sni":"%"ssl::>sni","err":"%err_code","lport":"%>lp","clen":"%"{Content-Length}>h"}"#;

/// Hosts whose text could be pasted into squid.conf as one token: `[a-z0-9.-]`, labels
/// non-empty, at most 253 bytes. The spec validator guarantees this already; a host that fails
/// it is left out of the allowlist (fail closed: it is then denied).
fn is_config_safe_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && host.split('.').all(|label| !label.is_empty())
}

fn is_config_safe_cidr(cidr: &str) -> bool {
    !cidr.is_empty()
        && cidr.contains('/')
        && cidr
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'.' || b == b':' || b == b'/')
}

/// `host` is strictly below `domain` (`a.example.com` is below `example.com`; `example.com`
/// and `badexample.com` are not).
fn is_strictly_below(host: &str, domain: &str) -> bool {
    host.strip_suffix(domain)
        .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('.'))
}

/// The allowlist as squid `dstdomain` entries.
#[derive(Debug, Default, PartialEq, Eq)]
struct DomainAcls {
    /// `acl allowed_dom dstdomain -n ...`: exact names as `name`, subtrees as `.name`.
    allowed: Vec<String>,
    /// `acl wildcard_apex dstdomain -n ...`: apexes that `.name` would wrongly admit.
    apex_denied: Vec<String>,
}

/// Maps the allowlist onto squid's `dstdomain` semantics.
///
/// Squid's `.example.com` matches `example.com` itself as well as every name below it; our
/// `*.example.com` means strictly below. So each subtree is rendered as `.example.com` and, unless
/// `example.com` is allowed on its own (an exact entry, or below another `*.` entry), the apex is
/// listed in `wildcard_apex`, which is denied first. Squid 6.13 refuses to start when an entry is
/// covered by a `.name` listed before it ("FATAL: Bungled ... 'a.example.com' is a subdomain of
/// '.example.com'") and warns when listed after, so covered entries are dropped here.
fn domain_acls(allow: &[HostPattern]) -> DomainAcls {
    let subtrees: Vec<&str> = allow
        .iter()
        .filter_map(|p| match p {
            HostPattern::Subdomains(d) if is_config_safe_host(d) => Some(d.as_str()),
            _ => None,
        })
        .collect();
    let exacts: Vec<&str> = allow
        .iter()
        .filter_map(|p| match p {
            HostPattern::Exact(h) if is_config_safe_host(h) => Some(h.as_str()),
            _ => None,
        })
        .collect();
    let below_any_subtree = |h: &str| subtrees.iter().any(|d| is_strictly_below(h, d));

    let mut acls = DomainAcls::default();
    for d in &subtrees {
        if below_any_subtree(d) {
            continue; // covered by an enclosing subtree (and so is its apex)
        }
        acls.allowed.push(format!(".{d}"));
        if !exacts.contains(d) {
            acls.apex_denied.push((*d).to_owned());
        }
    }
    for h in &exacts {
        if below_any_subtree(h) || subtrees.contains(h) {
            continue; // `.h` or an enclosing `.d` already admits it
        }
        acls.allowed.push((*h).to_owned());
    }
    acls.allowed.sort();
    acls.allowed.dedup();
    acls.apex_denied.sort();
    acls.apex_denied.dedup();
    acls
}

/// Renders the complete `squid.conf` for one run.
///
/// Decision order (the first matching `http_access` line decides):
/// 1. client not in the agent subnet → 403 `client_not_allowed` (every mode);
/// 2. IP-literal host (`10.0.0.1`, `[::1]`, `127.1`, `0x7f000001`, `2130706433`, `0177.0.0.1`)
///    → 403 `ip_literal`;
/// 3. host not on the allowlist, or the bare apex of a `*.` entry → 403
///    `domain_not_allowlisted`; an empty allowlist denies every request here and the
///    configuration then contains no `http_access allow` line at all;
/// 4. port not in `egress.ports` → 403 `port_not_allowed` (one `port` ACL covers plain
///    requests and CONNECT, so CONNECT goes only to allowed ports);
/// 5. a plain (not `CONNECT`) request to a port `egress.http_ports` does not list → 403
///    `port_not_http`, before a byte leaves (issue 31: every other port is CONNECT + TLS only);
/// 6. a resolved (or literal) address in [`PRIVATE_RANGES`] → 403 `resolves_to_private_ip`
///    (every mode);
/// 7. allowed → `allowlisted`.
///
/// In an enforcing configuration a refused `CONNECT` is answered 407 instead of 403 (each deny
/// line gets a `CONNECT` copy: `tunnel::answer_refused_connects_at_once`), and an allowed one
/// must carry TLS naming its host (module `tunnel`).
///
/// With `report_only`, steps 2–5 only annotate: the request goes on and is logged with
/// `would_deny:<reason>` (the reason the enforcing configuration would have logged first).
/// Steps 1 and 6 stay enforced: report-only mode must never open the cloud metadata endpoint,
/// the host's loopback or the LAN to the agent, nor serve clients outside the run.
#[must_use]
pub fn squid_conf(plan: &ProxyPlan) -> String {
    let egress = plan.egress;
    let domains = domain_acls(&egress.allow);
    let client_ok = is_config_safe_cidr(plan.agent_subnet);
    let mut out = String::new();
    render_settings(&mut out, plan);
    render_acls(&mut out, plan, &domains, client_ok);
    super::tunnel::render_tunnel_acls(&mut out, egress.report_only);
    super::tunnel::render_tunnel_rules(&mut out, egress.report_only);

    out.push_str("\n# Access rules: the first line that matches decides.\n");
    if !client_ok {
        out.push_str("# agent subnet unusable: every client is refused\n");
        access(
            &mut out,
            "deny",
            &["all", DenyReason::ClientNotAllowed.acl()],
        );
        return super::tunnel::answer_refused_connects_at_once(&out);
    }
    access(
        &mut out,
        "deny",
        &["!agents", DenyReason::ClientNotAllowed.acl()],
    );
    super::credentials::render_rules(&mut out, plan);
    let no_ports = egress.ports.is_empty();
    let http_ports = !egress.http_ports.is_empty();
    let finished = if egress.report_only {
        render_report_only_rules(&mut out, &domains, no_ports, http_ports);
        false
    } else {
        render_enforcing_rules(&mut out, &domains, no_ports, http_ports)
    };
    if !finished {
        access(&mut out, "deny", &["all", DenyReason::NoRuleMatched.acl()]);
    }
    if egress.report_only {
        return out; // a plain forward port: denials are answered at once as they are
    }
    super::tunnel::answer_refused_connects_at_once(&out)
}

/// The header and the global settings: read-only-root operation, DNS, headers, the log.
fn render_settings(out: &mut String, plan: &ProxyPlan) {
    out.push_str(
        "# cyclix egress proxy (squid 6.13): rendered per run, do not edit.\n\
         # Mode: ",
    );
    out.push_str(if plan.egress.report_only {
        "REPORT-ONLY (name, port and IP-literal violations are logged as would_deny:*, not denied;\n\
         # private destinations and foreign clients are still denied)\n"
    } else {
        "enforcing\n"
    });
    out.push_str("\n# Container-friendly operation (read-only root, no daemons).\n");
    super::tunnel::render_tunnel_port(out, plan.listen_port, plan.egress.report_only);
    super::credentials::render_ports(out, plan);
    // Unresolvable names and unreachable servers fail fast instead of squid's 30 s/1 min
    // defaults. A report-only run forwards what an enforcing run would deny, so there the
    // budget is 1 s: a tool still gets an answer (503/504 from the proxy) at once.
    let (dns_s, connect_s, tries) = if plan.egress.report_only {
        (1, 1, 1)
    } else {
        (5, 10, 5)
    };
    let _ = writeln!(
        out,
        "dns_timeout {dns_s} seconds\ndns_retransmit_interval {dns_s} seconds\nconnect_timeout {connect_s} seconds\nforward_max_tries {tries}"
    );
    out.push_str(
        "visible_hostname cyclix-egress\n\
         cache deny all\n\
         pid_filename none\n\
         pinger_enable off\n\
         shutdown_lifetime 1 seconds\n\
         cache_log stdio:/dev/stderr\n\
         \n\
         # Header hygiene: no Via (container id + version), no X-Forwarded-For (agent IP),\n\
         # no version string in error pages. (`via off` makes squid -k parse warn\n\
         # \"HTTP requires the use of Via\": expected.)\n\
         via off\n\
         forwarded_for delete\n\
         httpd_suppress_version_string on\n\
         \n\
         # Decision log: one JSON object per request on stdout.\n",
    );
    let _ = write!(out, r#"logformat jsonl {{"key":"{}""#, plan.log_key);
    out.push_str(LOGFORMAT_REST);
    out.push_str("\naccess_log stdio:/dev/stdout jsonl\n");
}

/// Every ACL the rules use; ACLs with no values are left out (squid rejects empty lists).
fn render_acls(out: &mut String, plan: &ProxyPlan, domains: &DomainAcls, client_ok: bool) {
    out.push_str("\n# ACLs.\n");
    if client_ok {
        let _ = writeln!(out, "acl agents src {}", plan.agent_subnet);
    }
    out.push_str(
        "# IP literals in any notation inet_aton accepts (dotted, short, octal, hex, one integer)\n\
         # and IPv6 (the only hosts with ':'). `dstdomain -n` below never matches an IP literal\n\
         # anyway; this rule makes the refusal explicit in the log.\n\
         acl ip_literal dstdom_regex -n -i ^(0x[0-9a-f]*|[0-9]+)(\\.(0x[0-9a-f]*|[0-9]+))*\\.?$ : ^\\[\n",
    );
    if !domains.allowed.is_empty() {
        out.push_str(
            "# Allowlist: `name` matches exactly that name; `.name` matches name and all below it.\n",
        );
        let _ = writeln!(
            out,
            "acl allowed_dom dstdomain -n {}",
            domains.allowed.join(" ")
        );
    }
    if !domains.apex_denied.is_empty() {
        out.push_str(
            "# `*.name` must not admit `name` itself, but squid's `.name` does: deny the apex first.\n",
        );
        let _ = writeln!(
            out,
            "acl wildcard_apex dstdomain -n {}",
            domains.apex_denied.join(" ")
        );
    }
    let ports: Vec<String> = plan.egress.ports.iter().map(u16::to_string).collect();
    if !ports.is_empty() {
        let _ = writeln!(out, "acl allowed_ports port {}", ports.join(" "));
    }
    let http_ports: Vec<String> = plan.egress.http_ports.iter().map(u16::to_string).collect();
    if !http_ports.is_empty() {
        out.push_str("# The ports plain HTTP may use (egress.http_ports); the rest are CONNECT + TLS only.\n");
        let _ = writeln!(out, "acl http_ports port {}", http_ports.join(" "));
    }
    out.push_str("acl connect_m method CONNECT\n");
    let _ = writeln!(out, "acl to_private dst {}", PRIVATE_RANGES.join(" "));
    annotate_acls(out, &DenyReason::ALL, "r_ok", REASON_ALLOWLISTED);
    if plan.egress.report_only {
        for reason in [
            DenyReason::IpLiteral,
            DenyReason::DomainNotAllowlisted,
            DenyReason::PortNotAllowed,
            DenyReason::PortNotHttp,
        ] {
            let _ = writeln!(
                out,
                "acl {} annotate_transaction reason={WOULD_DENY_PREFIX}{}",
                reason.would_acl(),
                reason.as_str()
            );
        }
        out.push_str("# Matches once any reason annotation is set.\nacl noted note reason\n");
    }
    super::credentials::render_acls(out, plan);
}

/// Enforcing rules after the client check. Returns true when the rules already end in an
/// unconditional deny (empty allowlist or no ports), so no final `deny all` is needed.
fn render_enforcing_rules(
    out: &mut String,
    domains: &DomainAcls,
    no_ports: bool,
    http_ports: bool,
) -> bool {
    let r_domain = DenyReason::DomainNotAllowlisted.acl();
    access(out, "deny", &["ip_literal", DenyReason::IpLiteral.acl()]);
    if !domains.apex_denied.is_empty() {
        access(out, "deny", &["wildcard_apex", r_domain]);
    }
    if domains.allowed.is_empty() {
        out.push_str("# Empty allowlist: deny all.\n");
        access(out, "deny", &["all", r_domain]);
        return true;
    }
    access(out, "deny", &["!allowed_dom", r_domain]);
    if no_ports {
        access(out, "deny", &["all", DenyReason::PortNotAllowed.acl()]);
        return true;
    }
    access(
        out,
        "deny",
        &["!allowed_ports", DenyReason::PortNotAllowed.acl()],
    );
    access(
        out,
        "deny",
        &plain_to_other_port(http_ports, &[DenyReason::PortNotHttp.acl()]),
    );
    out.push_str("# After the name checks, so a denied name never waits for DNS.\n");
    access(
        out,
        "deny",
        &["to_private", DenyReason::ResolvesToPrivateIp.acl()],
    );
    access(out, "allow", &["allowed_dom", "r_ok"]);
    false
}

/// The conditions of the line that refuses plain HTTP to a port `egress.http_ports` does not
/// list (all of them when it lists none), then `tail`.
fn plain_to_other_port<'a>(http_ports: bool, tail: &[&'a str]) -> Vec<&'a str> {
    let mut conds = vec!["!connect_m"];
    if http_ports {
        conds.push("!http_ports");
    }
    conds.extend_from_slice(tail);
    conds
}

/// Report-only rules: each would-deny line annotates and then fails on `!all`, so it never
/// decides; `!noted` keeps the first would-deny reason, as the enforcing order would log it.
fn render_report_only_rules(
    out: &mut String,
    domains: &DomainAcls,
    no_ports: bool,
    http_ports: bool,
) {
    out.push_str("# REPORT-ONLY: these lines annotate `would_deny:*` and never match (`!all`).\n");
    access(
        out,
        "deny",
        &["ip_literal", DenyReason::IpLiteral.would_acl(), "!all"],
    );
    let rw_domain = DenyReason::DomainNotAllowlisted.would_acl();
    if !domains.apex_denied.is_empty() {
        access(out, "deny", &["wildcard_apex", "!noted", rw_domain, "!all"]);
    }
    if domains.allowed.is_empty() {
        access(out, "deny", &["!noted", rw_domain, "!all"]);
    } else {
        access(out, "deny", &["!allowed_dom", "!noted", rw_domain, "!all"]);
    }
    let rw_port = DenyReason::PortNotAllowed.would_acl();
    if no_ports {
        access(out, "deny", &["!noted", rw_port, "!all"]);
    } else {
        access(out, "deny", &["!allowed_ports", "!noted", rw_port, "!all"]);
    }
    access(
        out,
        "deny",
        &plain_to_other_port(
            http_ports,
            &["!noted", DenyReason::PortNotHttp.would_acl(), "!all"],
        ),
    );
    out.push_str("# Enforced even in report-only mode.\n");
    access(
        out,
        "deny",
        &["to_private", DenyReason::ResolvesToPrivateIp.acl()],
    );
    out.push_str("# Allowed; a would_deny:* reason set above is kept.\n");
    access(out, "allow", &["noted"]);
    access(out, "allow", &["all", "r_ok"]);
}

#[cfg(test)]
mod tests;
