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
    /// is withheld (`http_reply_access`; attack review of issue 13). The request itself reached
    /// the service: counted as sent with its answer withheld, never as refused ([`Outcome`]).
    NotHttp,
    /// A plain-HTTP (not `CONNECT`) request to a port `egress.http_ports` does not list: refused
    /// before a byte left (issue 31). Every other allowed port is `CONNECT` + TLS only.
    PortNotHttp,
    /// An allowed `CONNECT` tunnel whose server did not answer the `ClientHello` with a TLS
    /// `ServerHello` squid could read (a line service, a plain HTTP server, a server that stays
    /// silent until `connect_timeout`): squid never spliced it, the server got the client's
    /// first flight (the `ClientHello`, TLS records sent with it) and nothing after it, and the
    /// agent nothing of its answer (issue 31). Squid logs no reason of its own for it
    /// (the `http_access` line that allowed the `CONNECT` set `allowlisted`); it is read from
    /// squid's error `ERR_SECURE_CONNECT_FAIL` on a `CONNECT` ([`settled_reason`]).
    ServerNotTls,
    /// No rule allowed the request (the final `deny all`).
    NoRuleMatched,
    /// A credential's port got a method its `methods` do not list (`agent.credentials`).
    CredentialMethod,
    /// A credential's port got a path its `paths` do not match (or one with a `.`/`..`
    /// segment).
    CredentialPath,
    /// A credential's port got a request past the run's budget (`agent.credentials[].budget`),
    /// or one its budget helper could not count: refused with 429 and the budget page.
    CredentialBudget,
    /// A request on the forward port carried a run's credential placeholder (in an auth
    /// header or the URL): it is worthless anywhere but the credential's own port.
    Placeholder,
}

impl DenyReason {
    /// Every reason squid's rules annotate, in rule order.
    pub const ALL: [DenyReason; 10] = [
        DenyReason::ClientNotAllowed,
        DenyReason::IpLiteral,
        DenyReason::DomainNotAllowlisted,
        DenyReason::PortNotAllowed,
        DenyReason::PortNotHttp,
        DenyReason::ResolvesToPrivateIp,
        DenyReason::NotTls,
        DenyReason::SniMismatch,
        DenyReason::NotHttp,
        DenyReason::NoRuleMatched,
    ];

    /// The credential reasons, rendered only when the spec has `agent.credentials`
    /// (`credentials.rs`).
    pub const CREDENTIAL: [DenyReason; 4] = [
        DenyReason::CredentialMethod,
        DenyReason::CredentialPath,
        DenyReason::CredentialBudget,
        DenyReason::Placeholder,
    ];

    /// The reasons read from squid's error instead of an annotation ([`settled_reason`]).
    pub const SETTLED: [DenyReason; 1] = [DenyReason::ServerNotTls];

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
            DenyReason::PortNotHttp => "port_not_http",
            DenyReason::ServerNotTls => "server_not_tls",
            DenyReason::NoRuleMatched => "no_rule_matched",
            DenyReason::CredentialMethod => "credential_method_not_allowed",
            DenyReason::CredentialPath => "credential_path_not_allowed",
            DenyReason::CredentialBudget => "credential_over_budget",
            DenyReason::Placeholder => "placeholder_refused",
        }
    }

    /// The reason for a logged token, if it is one of ours.
    #[must_use]
    pub fn from_token(token: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .chain(Self::CREDENTIAL)
            .chain(Self::SETTLED)
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
            DenyReason::PortNotHttp => "r_port_not_http",
            DenyReason::ServerNotTls => "r_server_not_tls",
            DenyReason::NoRuleMatched => "r_no_rule",
            DenyReason::CredentialMethod => "r_cred_method",
            DenyReason::CredentialPath => "r_cred_path",
            DenyReason::CredentialBudget => "r_cred_budget",
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
            DenyReason::PortNotHttp => "rw_port_not_http",
            DenyReason::ServerNotTls => "rw_server_not_tls",
            DenyReason::NoRuleMatched => "rw_no_rule",
            DenyReason::CredentialMethod => "rw_cred_method",
            DenyReason::CredentialPath => "rw_cred_path",
            DenyReason::CredentialBudget => "rw_cred_budget",
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

/// Squid's error when it could not complete a TLS handshake with a server (`%err_code`).
const ERR_SECURE_CONNECT_FAIL: &str = "ERR_SECURE_CONNECT_FAIL";

/// The reason one access-log line stands for: its `reason` field, except for a `CONNECT` that
/// squid ended with `ERR_SECURE_CONNECT_FAIL` (the server did not answer TLS, so the tunnel
/// was never spliced: [`DenyReason::ServerNotTls`]), whatever the line that allowed it noted.
#[must_use]
pub fn settled_reason<'a>(method: &str, reason: &'a str, err: &str) -> &'a str {
    if method == "CONNECT" && err == ERR_SECURE_CONNECT_FAIL {
        DenyReason::ServerNotTls.as_str()
    } else {
        reason
    }
}

/// Settles the `reason` of one decision as the record keeps it (a JSON object with squid's
/// fields: [`settled_reason`]); the reason squid noted stays in `noted` when it differs.
pub fn settle(decision: &mut serde_json::Value) {
    let field = |k: &str| {
        decision
            .get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (method, reason, err) = (field("method"), field("reason"), field("err"));
    let settled = settled_reason(&method, &reason, &err);
    if settled != reason
        && let Some(obj) = decision.as_object_mut()
    {
        obj.insert("noted".into(), reason.clone().into());
        obj.insert("reason".into(), settled.into());
    }
}

/// What became of one request, as the run's summary counts it (issue 31: a count says what
/// left, never less).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Forwarded (or, in report-only mode, let through) by the proxy: whatever the server
    /// answered (a 403 from the origin is the origin's, and the request left).
    Forwarded,
    /// Refused before a byte of it left the proxy (a 403, a 407, a refused credential request,
    /// squid's own answer inside a tunnel it cut).
    Refused,
    /// A tunnel cut by what the client sent: not TLS, or TLS naming another host. Nothing
    /// reached the server.
    TunnelCut,
    /// Bytes reached the server and its answer was withheld from the agent: a plain request to
    /// a service that does not speak HTTP ([`DenyReason::NotHttp`]), or a tunnel whose server
    /// did not answer TLS ([`DenyReason::ServerNotTls`]: it got the client's first flight).
    SentAnswerWithheld,
}

impl Outcome {
    /// The outcome of a request with this (settled) `reason` token, HTTP `status` and squid
    /// error `err` (`%err_code`).
    #[must_use]
    pub fn of(reason: &str, status: &str, err: &str) -> Self {
        if reason == REASON_ALLOWLISTED
            || reason == REASON_CREDENTIAL
            || reason.starts_with(WOULD_DENY_PREFIX)
        {
            return Outcome::Forwarded;
        }
        match DenyReason::from_token(reason) {
            Some(DenyReason::NotHttp | DenyReason::ServerNotTls) => Outcome::SentAnswerWithheld,
            Some(DenyReason::NotTls | DenyReason::SniMismatch) => Outcome::TunnelCut,
            Some(_) => Outcome::Refused,
            // No reason noted: squid answered before or outside its access rules. Its own
            // refusal, or its error page inside a tunnel it could not splice, left nothing.
            None if status == "403" || status == "407" || err == ERR_SECURE_CONNECT_FAIL => {
                Outcome::Refused
            }
            None => Outcome::Forwarded,
        }
    }
}

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
    /// The proxy's port the request came in on (`%>lp`): the forward port, or a credential's
    /// (`credentials::port_of`); `None` for `-` or a line that predates the field.
    pub listen_port: Option<u16>,
    /// The request's `Content-Length` (`%{Content-Length}>h`), in bytes; `None` when it had
    /// none (or the line predates the field).
    pub content_length: Option<u64>,
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
    #[serde(default)]
    lport: String,
    #[serde(default)]
    clen: String,
}

/// Decodes one line of the proxy's access log (the `jsonl` format [`super::squid_conf`] renders).
///
/// Returns `None` for anything that is not such a line: squid's own diagnostics (which go to
/// stderr, but a caller may read a merged journal), blank lines, or JSON of another shape.
/// Surrounding whitespace is ignored.
#[must_use]
pub fn parse_decision(line: &str) -> Option<ProxyDecision> {
    let raw: RawLine = serde_json::from_str(line.trim()).ok()?;
    let decision = Decision::from_token(settled_reason(&raw.method, &raw.reason, &raw.err));
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
        decision,
        duration_ms: dash_or(&raw.ms),
        bytes: dash_or(&raw.bytes),
        sni: text_or_none(raw.sni),
        error: text_or_none(raw.err),
        listen_port: dash_or(&raw.lport),
        content_length: dash_or(&raw.clen),
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
