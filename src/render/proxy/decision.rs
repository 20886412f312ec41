//! The proxy's decisions: why it refused a request (the `reason` tokens its configuration
//! logs) and one access-log line decoded back ([`parse_decision`]). Pure.

use serde::Deserialize;

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
    /// The host resolves to (or is) an address in [`super::PRIVATE_RANGES`]. Enforced in every mode.
    ResolvesToPrivateIp,
    /// An allowed `CONNECT` tunnel's first bytes were not a TLS `ClientHello` (e.g. an SSH
    /// banner): squid's `on_unsupported_protocol` closed it (issue 13, field report B31).
    NotTls,
    /// An allowed `CONNECT` tunnel's `ClientHello` named another host than the CONNECT (or no
    /// host): squid's `ssl_bump terminate` closed it; the SNI seen is logged (`sni`).
    SniMismatch,
    /// A plain-HTTP request's answer was not HTTP (squid turned it into HTTP/0.9: the service
    /// behind the allowed `host:port` speaks another protocol, e.g. an SSH banner); the answer
    /// is withheld (`http_reply_access`; attack review of issue 13).
    NotHttp,
    /// No rule allowed the request (the final `deny all`).
    NoRuleMatched,
    /// A credential's port got a method its `methods` do not list (`agent.credentials`).
    CredentialMethod,
    /// A credential's port got a path its `paths` do not match (or one with a `.`/`..`
    /// segment).
    CredentialPath,
    /// A request on the forward port carried a run's credential placeholder (in an auth
    /// header or the URL): it is worthless anywhere but the credential's own port.
    Placeholder,
}

impl DenyReason {
    /// Every reason, in rule order.
    pub const ALL: [DenyReason; 9] = [
        DenyReason::ClientNotAllowed,
        DenyReason::IpLiteral,
        DenyReason::DomainNotAllowlisted,
        DenyReason::PortNotAllowed,
        DenyReason::ResolvesToPrivateIp,
        DenyReason::NotTls,
        DenyReason::SniMismatch,
        DenyReason::NotHttp,
        DenyReason::NoRuleMatched,
    ];

    /// The credential reasons, rendered only when the spec has `agent.credentials`
    /// (`credentials.rs`).
    pub const CREDENTIAL: [DenyReason; 3] = [
        DenyReason::CredentialMethod,
        DenyReason::CredentialPath,
        DenyReason::Placeholder,
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
            DenyReason::NotTls => "not_tls",
            DenyReason::SniMismatch => "sni_mismatch",
            DenyReason::NotHttp => "not_http",
            DenyReason::NoRuleMatched => "no_rule_matched",
            DenyReason::CredentialMethod => "credential_method_not_allowed",
            DenyReason::CredentialPath => "credential_path_not_allowed",
            DenyReason::Placeholder => "placeholder_refused",
        }
    }

    /// The reason for a logged token, if it is one of ours.
    #[must_use]
    pub fn from_token(token: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .chain(Self::CREDENTIAL)
            .find(|r| r.as_str() == token)
    }

    /// The squid ACL name that annotates this reason (`r_` + a short name).
    pub(super) const fn acl(self) -> &'static str {
        match self {
            DenyReason::ClientNotAllowed => "r_client",
            DenyReason::IpLiteral => "r_ip_literal",
            DenyReason::DomainNotAllowlisted => "r_domain",
            DenyReason::PortNotAllowed => "r_port",
            DenyReason::ResolvesToPrivateIp => "r_private",
            DenyReason::NotTls => "r_not_tls",
            DenyReason::SniMismatch => "r_sni",
            DenyReason::NotHttp => "r_not_http",
            DenyReason::NoRuleMatched => "r_no_rule",
            DenyReason::CredentialMethod => "r_cred_method",
            DenyReason::CredentialPath => "r_cred_path",
            DenyReason::Placeholder => "r_placeholder",
        }
    }

    /// The squid ACL name that annotates "would have been denied for this reason".
    pub(super) const fn would_acl(self) -> &'static str {
        match self {
            DenyReason::ClientNotAllowed => "rw_client",
            DenyReason::IpLiteral => "rw_ip_literal",
            DenyReason::DomainNotAllowlisted => "rw_domain",
            DenyReason::PortNotAllowed => "rw_port",
            DenyReason::ResolvesToPrivateIp => "rw_private",
            DenyReason::NotTls => "rw_not_tls",
            DenyReason::SniMismatch => "rw_sni",
            DenyReason::NotHttp => "rw_not_http",
            DenyReason::NoRuleMatched => "rw_no_rule",
            DenyReason::CredentialMethod => "rw_cred_method",
            DenyReason::CredentialPath => "rw_cred_path",
            DenyReason::Placeholder => "rw_placeholder",
        }
    }
}

/// Reason token logged for an allowed request.
pub const REASON_ALLOWLISTED: &str = "allowlisted";

/// Reason token logged for a request on a credential's port that the proxy forwarded with
/// the real key added (`agent.credentials`).
pub const REASON_CREDENTIAL: &str = "credential_added";

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
        if token == REASON_ALLOWLISTED || token == REASON_CREDENTIAL {
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
    /// The SNI of a tunnel's TLS `ClientHello` (`%ssl::>sni`); `None` when squid logged `-` (no
    /// tunnel, not TLS, no SNI) or the line predates the field.
    pub sni: Option<String>,
    /// Squid's error code (`%err_code`, e.g. `ERR_PROTOCOL_UNKNOWN`); `None` for `-`.
    pub error: Option<String>,
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
    #[serde(default)]
    sni: String,
    #[serde(default)]
    err: String,
}

/// Decodes one line of the proxy's access log (the `jsonl` format [`super::squid_conf`] renders).
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
        server: text_or_none(raw.server),
        decision: Decision::from_token(&raw.reason),
        duration_ms: dash_or(&raw.ms),
        bytes: dash_or(&raw.bytes),
        sni: text_or_none(raw.sni),
        error: text_or_none(raw.err),
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

/// A text log field, or `None` for squid's `-` or an empty field.
fn text_or_none(field: String) -> Option<String> {
    (field != "-" && !field.is_empty()).then_some(field)
}

/// A numeric log field, or `None` for squid's `-` (or anything not a number).
fn dash_or<T: std::str::FromStr>(field: &str) -> Option<T> {
    field.parse().ok()
}

#[cfg(test)]
mod tests;
