//! The egress proxy's configuration (`squid.conf` for squid 6.13) and its decision log.
//!
//! Owns: turning a validated [`Egress`] policy plus the run's agent subnet into the complete
//! squid configuration the proxy container runs with (`squid -N -f /etc/cyclix/squid.conf`), the
//! decision reasons written into squid's JSON-lines access log, and parsing one such log line
//! back ([`parse_decision`]). Pure: no file system, no environment, no processes.
//!
//! Every directive and its order comes from the measurements in
//! `shared/research/proxy-facts.md` (squid 6.13-2+deb13u4, Debian trixie) and was re-checked
//! with `squid -k parse` and live requests against squid 6.13. The rules that must hold:
//! - `dstdomain -n`: without `-n` squid reverse-resolves IP-literal URLs and a PTR record can
//!   make `http://203.0.113.10/` match an allowlisted name (measured: 200, "allowlisted").
//! - The name checks come before the `dst` check, so a denied name never costs a DNS lookup
//!   (measured: the wrong order made every denied name wait 30 s for DNS).
//! - `pid_filename none`, `pinger_enable off`, stdio logs: squid runs on a read-only root.
//! - `shutdown_lifetime 1 seconds`: `podman stop` takes about 3 s instead of 10 s + SIGKILL.
//!
//! Squid never follows redirects: a 3xx from an allowed origin is passed to the client, and the
//! client's follow-up request to the `Location` host is a new request, checked on its own
//! (security case N14). Nothing here needs to be configured for that.
//!
//! Other behaviour measured against squid 6.13 with the rendered configuration:
//! - Host smuggling (security case N13): a plain request for `http://allowed.example/` with
//!   `Host: 10.78.0.1` reaches the origin with `Host: allowed.example`; squid decides on the
//!   URI and rewrites Host from it.
//! - An allowlisted name that does not resolve gets 503 after `dns_timeout` (5.0 s), logged
//!   with reason `allowlisted` (the policy allowed it; the status tells the failure).
//! - Squid adds `Cache-Control: max-age=259200` to forwarded plain-HTTP requests.
//!
//! Not covered (accepted, documented risk, security case N13): inside an allowed `CONNECT`
//! tunnel the client may send any TLS SNI (domain fronting); stopping that needs TLS
//! interception, which cyclix does not do.

use std::fmt::Write as _;

use serde::Deserialize;

use crate::spec::{Egress, HostPattern};

/// What the proxy configuration is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct ProxyPlan<'a> {
    /// The run's egress policy (validated: hosts lowercase punycode, ports 1–65535).
    pub egress: &'a Egress,
    /// The run's internal network in CIDR form (e.g. `10.89.7.0/24`); the only clients the proxy
    /// serves (`acl agents src`). Squid listens on every interface, the egress network too, so
    /// this ACL is what keeps other clients out. A value with characters outside
    /// `[0-9a-fA-F.:/]` is not rendered: every client is then refused (fail closed).
    pub agent_subnet: &'a str,
    /// The TCP port squid listens on (`http_port`), normally 3128.
    pub listen_port: u16,
}

/// Destination ranges the proxy never connects to, in any mode (`acl to_private dst`).
///
/// `dst` is checked after name resolution: it matches when *any* address of the name is in a
/// range, and squid then connects with that same resolved address, so an allowlisted name that
/// resolves to a private address is refused (DNS rebinding; security cases N5, N11).
///
/// Each entry was accepted by `squid -k parse` (6.13) without a warning. Squid keeps IPv4
/// addresses as v4-mapped IPv6 internally, so the IPv4 entries also cover `::ffff:a.b.c.d`; the
/// v4-mapped prefix `::ffff:0:0/96` itself must NOT be listed: squid reads it as `0.0.0.0/0`
/// and it would match every IPv4 destination (measured: "(B) '0.0.0.0/8' is a subnetwork of
/// (A) '0.0.0.0/0'").
pub const PRIVATE_RANGES: &[&str] = &[
    // IPv4: "this network", RFC 1918, CGNAT (also Alibaba's metadata 100.100.100.200),
    // loopback, link-local (cloud metadata 169.254.169.254), IETF protocol assignments,
    // benchmarking, multicast, reserved and broadcast.
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
    // IPv6: unspecified, loopback and the deprecated IPv4-compatible block (::a.b.c.d) in one,
    // NAT64 (well-known and local-use), discard, Teredo, 6to4, unique-local (also
    // fd00:ec2::254), site-local, link-local, multicast.
    "::/96",
    "64:ff9b::/96",
    "64:ff9b:1::/48",
    "100::/64",
    "2001::/32",
    "2002::/16",
    "fc00::/7",
    "fec0::/10",
    "fe80::/10",
    "ff00::/8",
];

/// Why the proxy refused (or, in report-only mode, would have refused) a request. The string
/// form is what the `reason` field of the access log carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenyReason {
    /// The client is not in the run's agent subnet.
    ClientNotAllowed,
    /// The request names an IP address (any notation) instead of a host name.
    IpLiteral,
    /// The host is not on the allowlist (or is the apex of a `*.` entry).
    DomainNotAllowlisted,
    /// The destination port is not in `egress.ports` (plain HTTP and CONNECT alike).
    PortNotAllowed,
    /// The host resolves to (or is) an address in [`PRIVATE_RANGES`]. Enforced in every mode.
    ResolvesToPrivateIp,
    /// No rule allowed the request (the final `deny all`).
    NoRuleMatched,
}

impl DenyReason {
    /// Every reason, in rule order.
    pub const ALL: [DenyReason; 6] = [
        DenyReason::ClientNotAllowed,
        DenyReason::IpLiteral,
        DenyReason::DomainNotAllowlisted,
        DenyReason::PortNotAllowed,
        DenyReason::ResolvesToPrivateIp,
        DenyReason::NoRuleMatched,
    ];

    /// The token logged in the `reason` field (e.g. `domain_not_allowlisted`).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            DenyReason::ClientNotAllowed => "client_not_allowed",
            DenyReason::IpLiteral => "ip_literal",
            DenyReason::DomainNotAllowlisted => "domain_not_allowlisted",
            DenyReason::PortNotAllowed => "port_not_allowed",
            DenyReason::ResolvesToPrivateIp => "resolves_to_private_ip",
            DenyReason::NoRuleMatched => "no_rule_matched",
        }
    }

    /// The reason for a logged token, if it is one of ours.
    #[must_use]
    pub fn from_token(token: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == token)
    }

    /// The squid ACL name that annotates this reason (`r_` + a short name).
    const fn acl(self) -> &'static str {
        match self {
            DenyReason::ClientNotAllowed => "r_client",
            DenyReason::IpLiteral => "r_ip_literal",
            DenyReason::DomainNotAllowlisted => "r_domain",
            DenyReason::PortNotAllowed => "r_port",
            DenyReason::ResolvesToPrivateIp => "r_private",
            DenyReason::NoRuleMatched => "r_no_rule",
        }
    }

    /// The squid ACL name that annotates "would have been denied for this reason".
    const fn would_acl(self) -> &'static str {
        match self {
            DenyReason::ClientNotAllowed => "rw_client",
            DenyReason::IpLiteral => "rw_ip_literal",
            DenyReason::DomainNotAllowlisted => "rw_domain",
            DenyReason::PortNotAllowed => "rw_port",
            DenyReason::ResolvesToPrivateIp => "rw_private",
            DenyReason::NoRuleMatched => "rw_no_rule",
        }
    }
}

/// Reason token logged for an allowed request.
pub const REASON_ALLOWLISTED: &str = "allowlisted";
/// Prefix of the reason token logged in report-only mode for a request the enforcing
/// configuration would have denied: `would_deny:<reason>` (e.g. `would_deny:port_not_allowed`).
pub const WOULD_DENY_PREFIX: &str = "would_deny:";

/// The proxy's decision for one request, from the `reason` field of its log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed by the allowlist (`allowlisted`).
    Allowed,
    /// Refused with 403 for this reason.
    Denied(DenyReason),
    /// Report-only mode: allowed, but the enforcing configuration would have refused it.
    WouldDeny(DenyReason),
    /// No reason was recorded (`-`): squid answered before access control ran, e.g. a malformed
    /// request (`TAG_NONE/400`) or a client that disconnected early.
    Unannotated,
    /// A reason token this version of cyclix does not know (kept verbatim).
    Unrecognised(String),
}

impl Decision {
    fn from_token(token: &str) -> Self {
        if token == REASON_ALLOWLISTED {
            return Decision::Allowed;
        }
        if token == "-" || token.is_empty() {
            return Decision::Unannotated;
        }
        if let Some(rest) = token.strip_prefix(WOULD_DENY_PREFIX) {
            return DenyReason::from_token(rest).map_or_else(
                || Decision::Unrecognised(token.to_owned()),
                Decision::WouldDeny,
            );
        }
        DenyReason::from_token(token).map_or_else(
            || Decision::Unrecognised(token.to_owned()),
            Decision::Denied,
        )
    }
}

/// One access-log line of the proxy, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyDecision {
    /// When squid logged the request, in milliseconds since the Unix epoch (`%ts.%03tu`).
    pub ts_ms: u64,
    /// The client address (`%>a`), e.g. `10.89.7.10`.
    pub client: String,
    /// The request method (`GET`, `CONNECT`, ...).
    pub method: String,
    /// The requested host (`%>rd`): a name, or an IP address for IP-literal requests.
    pub host: String,
    /// The requested port (`%>rP`); `None` when squid logged `-`.
    pub port: Option<u16>,
    /// The request URL (`%ru`, query string stripped by squid); `host:port` for CONNECT.
    pub url: String,
    /// The HTTP status sent to the client (`%>Hs`); `None` when squid logged `-`.
    pub status: Option<u16>,
    /// Squid's result code (`%Ss`), e.g. `TCP_TUNNEL`, `TCP_DENIED`, `TCP_MISS`.
    pub squid_code: String,
    /// The address squid connected to (`%<a`); `None` when it connected nowhere (`-`).
    pub server: Option<String>,
    /// The decision and its reason.
    pub decision: Decision,
    /// Time squid spent on the request, in milliseconds (`%tr`); `None` when logged as `-`.
    pub duration_ms: Option<u64>,
    /// Bytes sent to the client (`%<st`); `None` when logged as `-`.
    pub bytes: Option<u64>,
}

/// The JSON object one log line holds; every value but `ts` is a string in squid's output.
#[derive(Deserialize)]
struct RawLine {
    ts: serde_json::Number,
    client: String,
    method: String,
    host: String,
    port: String,
    url: String,
    status: String,
    squid: String,
    server: String,
    reason: String,
    ms: String,
    bytes: String,
}

/// Decodes one line of the proxy's access log (the `jsonl` format [`squid_conf`] renders).
///
/// Returns `None` for anything that is not such a line: squid's own diagnostics (which go to
/// stderr, but a caller may read a merged journal), blank lines, or JSON of another shape.
/// Surrounding whitespace is ignored.
#[must_use]
pub fn parse_decision(line: &str) -> Option<ProxyDecision> {
    let raw: RawLine = serde_json::from_str(line.trim()).ok()?;
    Some(ProxyDecision {
        ts_ms: ts_to_ms(&raw.ts)?,
        client: raw.client,
        method: raw.method,
        host: raw.host,
        port: dash_or(&raw.port),
        url: raw.url,
        status: dash_or(&raw.status),
        squid_code: raw.squid,
        server: (raw.server != "-" && !raw.server.is_empty()).then_some(raw.server),
        decision: Decision::from_token(&raw.reason),
        duration_ms: dash_or(&raw.ms),
        bytes: dash_or(&raw.bytes),
    })
}

/// `%ts.%03tu` (e.g. `1796036893.841`) → milliseconds, exact (no float rounding).
fn ts_to_ms(ts: &serde_json::Number) -> Option<u64> {
    let text = ts.to_string();
    let (secs, frac) = text.split_once('.').unwrap_or((text.as_str(), ""));
    let secs: u64 = secs.parse().ok()?;
    let mut millis = 0_u64;
    let mut digits = 0;
    for c in frac.chars().take(3) {
        millis = millis * 10 + u64::from(c.to_digit(10)?);
        digits += 1;
    }
    for _ in digits..3 {
        millis *= 10;
    }
    secs.checked_mul(1000)?.checked_add(millis)
}

/// A numeric log field, or `None` for squid's `-` (or anything not a number).
fn dash_or<T: std::str::FromStr>(field: &str) -> Option<T> {
    field.parse().ok()
}

/// The JSON-lines access log format: one object per request, `%"` quotes and escapes each
/// value so URLs with `"` or `\` still give valid JSON (measured). `%{reason}note` is the
/// annotation set by the `annotate_transaction` ACL on the `http_access` line that decided.
const LOGFORMAT: &str = r#"logformat jsonl {"ts":%ts.%03tu,"client":"%>a","method":"%"rm","host":"%">rd","port":"%>rP","url":"%"ru","status":"%>Hs","squid":"%Ss","server":"%<a","reason":"%{reason}note","ms":"%tr","bytes":"%<st"}"#;

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

/// One `http_access` rule: `deny`/`allow` plus its ACL conditions, written in order.
fn access(out: &mut String, action: &str, conds: &[&str]) {
    let _ = writeln!(out, "http_access {action} {}", conds.join(" "));
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
/// 5. a resolved (or literal) address in [`PRIVATE_RANGES`] → 403 `resolves_to_private_ip`
///    (every mode);
/// 6. allowed → `allowlisted`.
///
/// With `report_only`, steps 2–4 only annotate: the request goes on and is logged with
/// `would_deny:<reason>` (the reason the enforcing configuration would have logged first).
/// Steps 1 and 5 stay enforced: report-only mode must never open the cloud metadata endpoint,
/// the host's loopback or the LAN to the agent, nor serve clients outside the run.
#[must_use]
pub fn squid_conf(plan: &ProxyPlan) -> String {
    let egress = plan.egress;
    let domains = domain_acls(&egress.allow);
    let client_ok = is_config_safe_cidr(plan.agent_subnet);
    let mut out = String::new();
    render_settings(&mut out, plan);
    render_acls(&mut out, plan, &domains, client_ok);

    out.push_str("\n# Access rules: the first line that matches decides.\n");
    if !client_ok {
        out.push_str("# agent subnet unusable: every client is refused\n");
        access(
            &mut out,
            "deny",
            &["all", DenyReason::ClientNotAllowed.acl()],
        );
        return out;
    }
    access(
        &mut out,
        "deny",
        &["!agents", DenyReason::ClientNotAllowed.acl()],
    );
    let no_ports = egress.ports.is_empty();
    let finished = if egress.report_only {
        render_report_only_rules(&mut out, &domains, no_ports);
        false
    } else {
        render_enforcing_rules(&mut out, &domains, no_ports)
    };
    if !finished {
        access(&mut out, "deny", &["all", DenyReason::NoRuleMatched.acl()]);
    }
    out
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
    let _ = writeln!(out, "http_port {}", plan.listen_port);
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
    out.push_str(LOGFORMAT);
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
    let _ = writeln!(out, "acl to_private dst {}", PRIVATE_RANGES.join(" "));
    for reason in DenyReason::ALL {
        let _ = writeln!(
            out,
            "acl {} annotate_transaction reason={}",
            reason.acl(),
            reason.as_str()
        );
    }
    let _ = writeln!(
        out,
        "acl r_ok annotate_transaction reason={REASON_ALLOWLISTED}"
    );
    if plan.egress.report_only {
        for reason in [
            DenyReason::IpLiteral,
            DenyReason::DomainNotAllowlisted,
            DenyReason::PortNotAllowed,
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
}

/// Enforcing rules after the client check. Returns true when the rules already end in an
/// unconditional deny (empty allowlist or no ports), so no final `deny all` is needed.
fn render_enforcing_rules(out: &mut String, domains: &DomainAcls, no_ports: bool) -> bool {
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
    out.push_str("# After the name checks, so a denied name never waits for DNS.\n");
    access(
        out,
        "deny",
        &["to_private", DenyReason::ResolvesToPrivateIp.acl()],
    );
    access(out, "allow", &["allowed_dom", "r_ok"]);
    false
}

/// Report-only rules: each would-deny line annotates and then fails on `!all`, so it never
/// decides; `!noted` keeps the first would-deny reason, as the enforcing order would log it.
fn render_report_only_rules(out: &mut String, domains: &DomainAcls, no_ports: bool) {
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
mod tests {
    use super::*;

    fn egress(allow: &[HostPattern], ports: &[u16], report_only: bool) -> Egress {
        Egress {
            allow: allow.to_vec(),
            ports: ports.to_vec(),
            report_only,
        }
    }

    fn exact(h: &str) -> HostPattern {
        HostPattern::Exact(h.to_owned())
    }

    fn sub(h: &str) -> HostPattern {
        HostPattern::Subdomains(h.to_owned())
    }

    fn render(e: &Egress) -> String {
        squid_conf(&ProxyPlan {
            egress: e,
            agent_subnet: "10.89.7.0/24",
            listen_port: 3128,
        })
    }

    fn access_lines(conf: &str) -> Vec<&str> {
        conf.lines()
            .filter(|l| l.starts_with("http_access "))
            .collect()
    }

    fn has_line(conf: &str, line: &str) -> bool {
        conf.lines().any(|l| l == line)
    }

    #[test]
    fn normal_config_has_the_measured_directives_in_order() {
        let e = egress(
            &[exact("pypi.org"), sub("pythonhosted.org")],
            &[80, 443],
            false,
        );
        let conf = render(&e);
        for line in [
            "http_port 3128",
            "cache deny all",
            "pid_filename none",
            "pinger_enable off",
            "shutdown_lifetime 1 seconds",
            "cache_log stdio:/dev/stderr",
            "dns_timeout 5 seconds",
            "via off",
            "forwarded_for delete",
            "httpd_suppress_version_string on",
            "access_log stdio:/dev/stdout jsonl",
            "acl agents src 10.89.7.0/24",
            "acl allowed_dom dstdomain -n .pythonhosted.org pypi.org",
            "acl wildcard_apex dstdomain -n pythonhosted.org",
            "acl allowed_ports port 80 443",
            LOGFORMAT,
        ] {
            assert!(has_line(&conf, line), "missing {line:?} in\n{conf}");
        }
        assert_eq!(
            access_lines(&conf),
            [
                "http_access deny !agents r_client",
                "http_access deny ip_literal r_ip_literal",
                "http_access deny wildcard_apex r_domain",
                "http_access deny !allowed_dom r_domain",
                "http_access deny !allowed_ports r_port",
                "http_access deny to_private r_private",
                "http_access allow allowed_dom r_ok",
                "http_access deny all r_no_rule",
            ]
        );
        assert!(!conf.contains("would_deny"));
        assert!(conf.contains("# Mode: enforcing"));
    }

    #[test]
    fn every_private_range_is_in_the_dst_acl_and_the_mapped_prefix_is_not() {
        let conf = render(&egress(&[exact("a.example")], &[443], false));
        let line = conf
            .lines()
            .find(|l| l.starts_with("acl to_private dst "))
            .expect("to_private acl");
        let entries: Vec<&str> = line.split_whitespace().skip(3).collect();
        assert_eq!(entries, PRIVATE_RANGES);
        for must in [
            "169.254.0.0/16",
            "100.64.0.0/10",
            "127.0.0.0/8",
            "10.0.0.0/8",
            "fc00::/7",
            "64:ff9b::/96",
            "2002::/16",
        ] {
            assert!(entries.contains(&must), "{must}");
        }
        // squid reads ::ffff:0:0/96 as 0.0.0.0/0 (every IPv4 destination).
        assert!(!entries.iter().any(|e| e.starts_with("::ffff")));
        // The testbed's "outside" hosts live in documentation ranges: never deny those.
        assert!(!entries.iter().any(|e| e.starts_with("203.0.113")));
    }

    #[test]
    fn empty_allowlist_denies_everything() {
        let conf = render(&egress(&[], &[443], false));
        assert!(!conf.contains("allowed_dom"));
        let rules = access_lines(&conf);
        assert!(
            rules.iter().all(|l| !l.starts_with("http_access allow")),
            "{rules:?}"
        );
        assert_eq!(rules.last(), Some(&"http_access deny all r_domain"));
    }

    #[test]
    fn wildcard_denies_its_apex_unless_the_apex_is_listed() {
        let only_sub = domain_acls(&[sub("example.com")]);
        assert_eq!(only_sub.allowed, [".example.com"]);
        assert_eq!(only_sub.apex_denied, ["example.com"]);

        let both = domain_acls(&[exact("example.com"), sub("example.com")]);
        assert_eq!(both.allowed, [".example.com"]);
        assert!(both.apex_denied.is_empty());
    }

    #[test]
    fn covered_entries_are_dropped_because_squid_refuses_them() {
        let acls = domain_acls(&[
            exact("a.example.com"),
            sub("example.com"),
            sub("b.example.com"),
            exact("b.example.com"),
            exact("other.org"),
            exact("other.org"),
        ]);
        assert_eq!(acls.allowed, [".example.com", "other.org"]);
        assert_eq!(acls.apex_denied, ["example.com"]);

        // The inner subtree's apex is below the outer subtree, so it stays allowed.
        let nested = domain_acls(&[sub("example.com"), sub("a.example.com")]);
        assert_eq!(nested.allowed, [".example.com"]);
        assert_eq!(nested.apex_denied, ["example.com"]);
    }

    #[test]
    fn strictly_below_respects_label_boundaries() {
        assert!(is_strictly_below("a.example.com", "example.com"));
        assert!(!is_strictly_below("example.com", "example.com"));
        assert!(!is_strictly_below("badexample.com", "example.com"));
        assert!(!is_strictly_below(".example.com", "example.com"));
    }

    #[test]
    fn unsafe_hosts_and_subnets_fail_closed() {
        let acls = domain_acls(&[exact("ok.example"), exact("evil\nhttp_access allow all")]);
        assert_eq!(acls.allowed, ["ok.example"]);

        let e = egress(&[exact("ok.example")], &[443], false);
        let conf = squid_conf(&ProxyPlan {
            egress: &e,
            agent_subnet: "10.0.0.0/8\nhttp_access allow all",
            listen_port: 3128,
        });
        assert!(!conf.contains("acl agents"));
        assert_eq!(
            access_lines(&conf),
            ["http_access deny all r_client"],
            "{conf}"
        );
    }

    #[test]
    fn report_only_annotates_and_allows_but_keeps_private_and_client_denies() {
        let e = egress(&[sub("example.com")], &[443], true);
        let conf = render(&e);
        assert!(conf.contains("REPORT-ONLY"));
        for line in [
            "acl rw_ip_literal annotate_transaction reason=would_deny:ip_literal",
            "acl rw_domain annotate_transaction reason=would_deny:domain_not_allowlisted",
            "acl rw_port annotate_transaction reason=would_deny:port_not_allowed",
            "acl noted note reason",
        ] {
            assert!(has_line(&conf, line), "missing {line:?}");
        }
        assert_eq!(
            access_lines(&conf),
            [
                "http_access deny !agents r_client",
                "http_access deny ip_literal rw_ip_literal !all",
                "http_access deny wildcard_apex !noted rw_domain !all",
                "http_access deny !allowed_dom !noted rw_domain !all",
                "http_access deny !allowed_ports !noted rw_port !all",
                "http_access deny to_private r_private",
                "http_access allow noted",
                "http_access allow all r_ok",
                "http_access deny all r_no_rule",
            ]
        );
        // Every would-deny line ends in `!all`, so none of them can decide.
        for l in access_lines(&conf) {
            if l.contains(" rw_") {
                assert!(l.ends_with(" !all"), "{l}");
            }
        }
    }

    #[test]
    fn report_only_with_empty_allowlist_still_logs_domain() {
        let conf = render(&egress(&[], &[443], true));
        assert!(!conf.contains("allowed_dom"));
        assert!(has_line(&conf, "http_access deny !noted rw_domain !all"));
        assert!(has_line(&conf, "http_access deny to_private r_private"));
    }

    #[test]
    fn rendering_is_deterministic_and_port_is_configurable() {
        let e = egress(&[exact("b.example"), exact("a.example")], &[443, 80], false);
        let plan = ProxyPlan {
            egress: &e,
            agent_subnet: "fd00:1::/64",
            listen_port: 8888,
        };
        assert_eq!(squid_conf(&plan), squid_conf(&plan));
        let conf = squid_conf(&plan);
        assert!(has_line(&conf, "http_port 8888"));
        assert!(has_line(&conf, "acl agents src fd00:1::/64"));
        assert!(has_line(
            &conf,
            "acl allowed_dom dstdomain -n a.example b.example"
        ));
        assert!(has_line(&conf, "acl allowed_ports port 443 80"));
    }

    const ALLOWED: &str = r#"{"ts":1796036893.841,"client":"10.90.0.10","method":"GET","host":"allowed.example","port":"80","url":"http://allowed.example/","status":"200","squid":"TCP_MISS","server":"203.0.113.10","reason":"allowlisted","ms":"1","bytes":"318"}"#;
    const DENIED: &str = r#"{"ts":1796036903.006,"client":"10.90.0.10","method":"CONNECT","host":"allowed.example","port":"443","url":"allowed.example:443","status":"403","squid":"TCP_DENIED","server":"-","reason":"resolves_to_private_ip","ms":"0","bytes":"3402"}"#;

    #[test]
    fn parses_real_log_lines() {
        let d = parse_decision(ALLOWED).expect("allowed line");
        assert_eq!(
            d,
            ProxyDecision {
                ts_ms: 1_796_036_893_841,
                client: "10.90.0.10".into(),
                method: "GET".into(),
                host: "allowed.example".into(),
                port: Some(80),
                url: "http://allowed.example/".into(),
                status: Some(200),
                squid_code: "TCP_MISS".into(),
                server: Some("203.0.113.10".into()),
                decision: Decision::Allowed,
                duration_ms: Some(1),
                bytes: Some(318),
            }
        );
        let d = parse_decision(&format!("  {DENIED}\n")).expect("denied line");
        assert_eq!(
            d.decision,
            Decision::Denied(DenyReason::ResolvesToPrivateIp)
        );
        assert_eq!(d.server, None);
        assert_eq!(d.method, "CONNECT");
        assert_eq!(d.status, Some(403));
    }

    #[test]
    fn parses_reasons_and_dashes() {
        let line = DENIED
            .replace("resolves_to_private_ip", "would_deny:port_not_allowed")
            .replace(r#""status":"403""#, r#""status":"-""#)
            .replace("1796036903.006", "1796036903.5");
        let d = parse_decision(&line).expect("line");
        assert_eq!(d.decision, Decision::WouldDeny(DenyReason::PortNotAllowed));
        assert_eq!(d.status, None);
        assert_eq!(d.ts_ms, 1_796_036_903_500);

        let unannotated = DENIED.replace("resolves_to_private_ip", "-");
        assert_eq!(
            parse_decision(&unannotated).expect("line").decision,
            Decision::Unannotated
        );
        let odd = DENIED.replace("resolves_to_private_ip", "would_deny:nonsense");
        assert_eq!(
            parse_decision(&odd).expect("line").decision,
            Decision::Unrecognised("would_deny:nonsense".into())
        );
        for r in DenyReason::ALL {
            assert_eq!(DenyReason::from_token(r.as_str()), Some(r));
        }
    }

    /// Lines logged by squid 6.13 running the rendered configuration (see the module doc).
    const REAL_LINES: [&str; 5] = [
        r#"{"ts":1796038440.761,"client":"10.89.7.1","method":"-","host":"-","port":"-","url":"error:transaction-end-before-headers","status":"0","squid":"NONE_NONE","server":"-","reason":"-","ms":"0","bytes":"0"}"#,
        r#"{"ts":1796038440.957,"client":"10.89.7.10","method":"CONNECT","host":"allowed.example","port":"22","url":"allowed.example:22","status":"403","squid":"TCP_DENIED_ABORTED","server":"-","reason":"port_not_allowed","ms":"0","bytes":"292"}"#,
        r#"{"ts":1796038441.228,"client":"10.89.7.10","method":"GET","host":"[::1]","port":"80","url":"http://[::1]/","status":"403","squid":"TCP_DENIED","server":"-","reason":"ip_literal","ms":"1","bytes":"3334"}"#,
        r#"{"ts":1796038446.574,"client":"10.89.7.10","method":"GET","host":"unresolvable.example","port":"80","url":"http://unresolvable.example/","status":"503","squid":"TCP_MISS_ABORTED","server":"-","reason":"allowlisted","ms":"5001","bytes":"3497"}"#,
        r#"{"ts":1796038455.067,"client":"10.89.7.10","method":"GET","host":"203.0.113.10","port":"80","url":"http://203.0.113.10/","status":"200","squid":"TCP_MISS","server":"203.0.113.10","reason":"would_deny:ip_literal","ms":"2","bytes":"261"}"#,
    ];

    #[test]
    fn parses_lines_squid_wrote() {
        let d: Vec<ProxyDecision> = REAL_LINES
            .iter()
            .map(|l| parse_decision(l).expect("real line"))
            .collect();
        // A connection closed before any request (e.g. a readiness probe).
        assert_eq!(d[0].decision, Decision::Unannotated);
        assert_eq!((d[0].port, d[0].status), (None, Some(0)));
        assert_eq!(d[1].decision, Decision::Denied(DenyReason::PortNotAllowed));
        assert_eq!(d[2].decision, Decision::Denied(DenyReason::IpLiteral));
        assert_eq!(d[2].host, "[::1]");
        // Allowed by policy, then DNS timed out after dns_timeout (5 s): status says 503.
        assert_eq!(d[3].decision, Decision::Allowed);
        assert_eq!((d[3].status, d[3].duration_ms), (Some(503), Some(5001)));
        assert_eq!(d[4].decision, Decision::WouldDeny(DenyReason::IpLiteral));
        assert_eq!(d[4].server.as_deref(), Some("203.0.113.10"));
    }

    #[test]
    fn rejects_non_log_lines() {
        assert_eq!(parse_decision(""), None);
        assert_eq!(
            parse_decision("2026/11/30 11:29:43| Processing Configuration File"),
            None
        );
        assert_eq!(parse_decision(r#"{"ts":1}"#), None);
        assert_eq!(
            parse_decision(&DENIED.replace("1796036903.006", "-1")),
            None
        );
    }

    #[test]
    fn every_reason_the_config_logs_parses_back() {
        let conf = render(&egress(&[sub("example.com")], &[443], true));
        let mut seen = 0;
        for l in conf.lines() {
            if let Some(token) = l
                .strip_prefix("acl ")
                .and_then(|l| l.split_once(" annotate_transaction reason="))
                .map(|(_, t)| t)
            {
                let line = DENIED.replace("resolves_to_private_ip", token);
                let d = parse_decision(&line).expect("line");
                assert!(
                    !matches!(
                        d.decision,
                        Decision::Unrecognised(_) | Decision::Unannotated
                    ),
                    "{token}"
                );
                seen += 1;
            }
        }
        assert_eq!(seen, DenyReason::ALL.len() + 1 + 3);
    }
}
