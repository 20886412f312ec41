//! The egress proxy (N5, N8–N14, N16): replies, denies and their positive controls,
//! report-only runs, the proxy environment.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Attempt, Judged, judged};
use crate::probe::Context;

/// The reply to one request through the proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// A status line arrived.
    Status {
        /// The HTTP status code.
        code: u16,
        /// The proxy's error header (`X-Squid-Error`), if any.
        error_header: Option<String>,
        /// The `Location` header, if any.
        location: Option<String>,
        /// The first bytes of the body (at most 256).
        body: String,
    },
    /// No status line: the connection failed, timed out or closed.
    Failed(Attempt),
}

impl Reply {
    fn code(&self) -> Option<u16> {
        match self {
            Reply::Status { code, .. } => Some(*code),
            Reply::Failed(_) => None,
        }
    }

    /// Short text: `403 (ERR_ACCESS_DENIED 0)`, `200`, `timeout`.
    #[must_use]
    pub fn text(&self) -> String {
        match self {
            Reply::Status {
                code, error_header, ..
            } => match error_header {
                Some(h) => format!("{code} ({h})"),
                None => code.to_string(),
            },
            Reply::Failed(a) => a.text(),
        }
    }

    /// A deny: 403 or 407 with the proxy's error header.
    #[must_use]
    pub fn is_deny(&self) -> bool {
        matches!(
            self,
            Reply::Status {
                code: 403 | 407,
                error_header: Some(_),
                ..
            }
        )
    }
}

/// [`proxy_denies`] for a deny-all run (empty allowlist): the positive control is the proxy's
/// own immediate deny (403/407 with `X-Squid-Error`) of a request for the denied host.
#[must_use]
pub fn proxy_denies_all(items: &[(String, Reply)], control: &Reply) -> Judged {
    let mut j = proxy_denies(
        items,
        &Reply::Status {
            code: 200,
            error_header: None,
            location: None,
            body: String::new(),
        },
    );
    j.expect =
        "403/407 with X-Squid-Error for each; control: the proxy's own 403 (deny-all run)".into();
    j.got = format!(
        "{} control={}",
        j.got
            .rsplit_once(" control=")
            .map_or(j.got.as_str(), |(a, _)| a),
        control.text()
    );
    if !control.is_deny() {
        j.pass = false;
        j.detail = format!(
            "positive control failed: the proxy did not answer with its own deny: {}; {}",
            control.text(),
            j.detail
        )
        .trim_end_matches("; ")
        .to_string();
    }
    j
}

/// N8 for a deny-all run: GET and CONNECT are answered at once with the proxy's own deny.
#[must_use]
pub fn n8_deny_all(get: &Reply, connect: &Reply) -> Judged {
    judged(
        "deny-all run: GET 403 and CONNECT 403 from the proxy (X-Squid-Error)",
        format!("GET {} CONNECT {}", get.text(), connect.text()),
        get.is_deny() && connect.is_deny(),
        "policy: with an empty allowlist the proxy answering its deny at once is the positive control",
    )
}

/// Proxy deny probes (N5, N9, N10, N11, N12 denies): every request denied (403/407 with the
/// proxy's error header), and the positive control (`GET http://ALLOWED/`) answered 200.
#[must_use]
pub fn proxy_denies(items: &[(String, Reply)], control: &Reply) -> Judged {
    let got = format!(
        "{} control={}",
        items
            .iter()
            .map(|(l, r)| format!("{l}={}", r.text()))
            .collect::<Vec<_>>()
            .join(" "),
        control.text()
    );
    let mut why = Vec::new();
    if control.code() != Some(200) {
        why.push(format!(
            "positive control failed: the allowed host gave {}",
            control.text()
        ));
    }
    let bad: Vec<&str> = items
        .iter()
        .filter(|(_, r)| !r.is_deny())
        .map(|(l, _)| l.as_str())
        .collect();
    if !bad.is_empty() {
        let timeout = items
            .iter()
            .any(|(_, r)| *r == Reply::Failed(Attempt::Timeout));
        why.push(format!(
            "{}not denied: {}",
            if timeout {
                "dropped, not rejected; "
            } else {
                ""
            },
            bad.join(", ")
        ));
    }
    if items.is_empty() {
        why.push("nothing attempted".into());
    }
    judged(
        "403/407 with X-Squid-Error for each; control 200",
        got,
        why.is_empty(),
        why.join("; "),
    )
}

/// N8: the positive controls through the proxy: `GET http://ALLOWED:PORT/` → 200 and
/// `CONNECT ALLOWED:PORT` → 200, `target` being `ALLOWED:PORT` (named in what was expected:
/// an unreachable allowlisted host fails this control, `run::boundary::unanswered_allowed`).
///
/// Policy: the TLS handshake of §2 N8 needs a TLS server on an allowed host; the testbed has
/// none, so the check is the `200 Connection established` of the tunnel.
#[must_use]
pub fn n8(get: &Reply, connect: &Reply, target: &str) -> Judged {
    judged(
        format!("GET 200, CONNECT 200 from the allowlisted {target}"),
        format!("GET {} CONNECT {}", get.text(), connect.text()),
        get.code() == Some(200) && connect.code() == Some(200),
        "policy: no TLS server on the allowed host, so the tunnel's 200 is the check",
    )
}

/// N13: a plain request for the allowed URI with a smuggled `Host:` is decided on the URI: 200
/// with the allowed host's page (squid rewrites Host from the URI), or a deny; `target` as in
/// [`n8`], empty in a deny-all run (no host is allowlisted).
#[must_use]
pub fn n13(reply: &Reply, allowed_marker: &str, target: &str) -> Judged {
    if target.is_empty() {
        return judged(
            "403 from the proxy (deny-all run)",
            reply.text(),
            reply.is_deny(),
            "policy: with an empty allowlist the request for the denied host must be refused",
        );
    }
    let pass = match reply {
        Reply::Status {
            code: 200, body, ..
        } => body.contains(allowed_marker) || allowed_marker.is_empty(),
        r => r.is_deny(),
    };
    judged(
        format!("200 from the allowlisted {target} (decided on the URI) or 403"),
        reply.text(),
        pass,
        "policy: the SNI inside an allowed CONNECT is N17's; an HTTP Host inside an honest TLS tunnel stays unseen",
    )
}

/// N14: a redirect from an allowed URL reaches the client as a 3xx (the proxy does not follow
/// it), and the follow-up request to the target is denied on its own.
#[must_use]
pub fn n14(redirect: Option<&Reply>, follow_up: &Reply) -> Judged {
    let mut why = Vec::new();
    if let Some(r) = redirect
        && !matches!(
            r,
            Reply::Status {
                code: 300..=399,
                location: Some(_),
                ..
            }
        )
    {
        why.push(format!("the redirect endpoint answered {}", r.text()));
    }
    if !follow_up.is_deny() {
        why.push(format!(
            "follow-up request not denied: {}",
            follow_up.text()
        ));
    }
    judged(
        "3xx passed through; follow-up 403",
        format!(
            "redirect {}; follow-up {}",
            redirect.map_or("not configured".into(), Reply::text),
            follow_up.text()
        ),
        why.is_empty(),
        if why.is_empty() && redirect.is_none() {
            "policy: no redirect endpoint in the context; only the follow-up request is checked"
                .into()
        } else {
            why.join("; ")
        },
    )
}

/// N16: all four proxy variables point at the proxy; `NO_PROXY`/`no_proxy` list only the
/// allowed local entries (no `*`, no domain suffix).
#[must_use]
pub fn n16(env: &BTreeMap<String, String>, ctx: &Context) -> Judged {
    let mut why = Vec::new();
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        if env.get(k) != Some(&ctx.proxy_url) {
            why.push(format!("{k}={:?}", env.get(k)));
        }
    }
    for k in ["NO_PROXY", "no_proxy"] {
        if let Some(v) = env.get(k) {
            let bad: Vec<&str> = v
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty() && !ctx.no_proxy_allowed.iter().any(|a| a == e))
                .collect();
            if !bad.is_empty() {
                why.push(format!("{k} has {bad:?}"));
            }
        }
    }
    judged(
        format!(
            "HTTP(S)_PROXY, http(s)_proxy = {}; NO_PROXY ⊆ {:?}",
            ctx.proxy_url, ctx.no_proxy_allowed
        ),
        env.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        why.is_empty(),
        why.join("; "),
    )
}

/// The report-only form of the proxy deny probes (N9, N10, N12, N13): the spec switched
/// enforcement of names, ports and IP literals off (the record says so), so any status line
/// from the proxy passes; a request the proxy did not answer (refused, dropped, timed out)
/// fails, because tools then hang instead of failing fast.
#[must_use]
pub fn report_only_answers(items: &[(String, Reply)]) -> Judged {
    let unanswered: Vec<&str> = items
        .iter()
        .filter(|(_, r)| !matches!(r, Reply::Status { .. }))
        .map(|(l, _)| l.as_str())
        .collect();
    judged(
        "report-only run: every request answered by the proxy (would-be denials are logged, not enforced)",
        list_replies(items),
        !items.is_empty() && unanswered.is_empty(),
        if unanswered.is_empty() {
            String::new()
        } else {
            format!("not answered: {}", unanswered.join(", "))
        },
    )
}

fn list_replies(items: &[(String, Reply)]) -> String {
    items
        .iter()
        .map(|(l, r)| format!("{l}={}", r.text()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// N5/N11 in a report-only run: every request answered by the proxy itself (a squid error
/// page, `X-Squid-Error`: 403 after resolution to a private address, or 503 for a name that
/// does not resolve), never forwarded to the target.
#[must_use]
pub fn proxy_not_forwarded(items: &[(String, Reply)]) -> Judged {
    let bad: Vec<&str> = items
        .iter()
        .filter(|(_, r)| {
            !matches!(
                r,
                Reply::Status {
                    error_header: Some(_),
                    ..
                }
            )
        })
        .map(|(l, _)| l.as_str())
        .collect();
    judged(
        "report-only run: each request answered by the proxy itself (X-Squid-Error), not forwarded",
        list_replies(items),
        !items.is_empty() && bad.is_empty(),
        if bad.is_empty() {
            String::new()
        } else {
            format!("forwarded or unanswered: {}", bad.join(", "))
        },
    )
}

/// What one tunnel through the proxy did with its first bytes (N17).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tunnel {
    /// The `CONNECT` was not answered `200` (its reply: a deny, a failure).
    NotEstablished(Reply),
    /// The tunnel was established, and after the first bytes it was closed (EOF or reset)
    /// without a single byte coming back, `ms` after they were sent.
    Cut {
        /// Milliseconds from sending the first bytes to the close.
        ms: u64,
    },
    /// Bytes came back through the tunnel (the first at most 64): someone behind the proxy
    /// answered what was sent.
    Answered {
        /// The first bytes received.
        first: Vec<u8>,
    },
    /// Established, but neither a byte nor a close within the deadline: not cut.
    Timeout,
}

impl Tunnel {
    /// Short text: `cut after 0 ms`, `answered "SSH-2.0-…"`, `timeout`, `CONNECT 403 (…)`.
    #[must_use]
    pub fn text(&self) -> String {
        match self {
            Tunnel::NotEstablished(r) => format!("CONNECT {}", r.text()),
            Tunnel::Cut { ms } => format!("cut after {ms} ms"),
            Tunnel::Answered { first } => {
                let shown: String = first
                    .iter()
                    .map(|b| {
                        if b.is_ascii_graphic() || *b == b' ' {
                            char::from(*b).to_string()
                        } else {
                            format!("\\x{b:02x}")
                        }
                    })
                    .collect();
                format!(
                    "answered \"{}\"",
                    shown.chars().take(80).collect::<String>()
                )
            }
            Tunnel::Timeout => "timeout (not cut)".into(),
        }
    }

    /// A TLS record came back (handshake 0x16 or alert 0x15): a TLS server got the hello.
    fn tls_answer(&self) -> bool {
        matches!(self, Tunnel::Answered { first } if matches!(first.first(), Some(0x15 | 0x16)))
    }
}

/// N17 (issue 13, field report B31): a tunnel is what it says. Through an allowed `CONNECT`,
/// an SSH banner (`ssh`) and a TLS `ClientHello` naming another host (`other_sni`) must each be
/// cut by the proxy with no byte back; a timeout is a FAIL (not cut). `control` is the same
/// tunnel with a `ClientHello` naming the CONNECT host, attempted when the tunnel's port is 443:
/// a TLS record must come back (the proxy splices honest TLS, so the cuts are about the
/// content). `None`: the port is not 443 and nothing says a TLS server listens there; the
/// `200` of each CONNECT is then the positive control.
///
/// A report-only run (`egress.report_only`) logs `would_deny:not_tls` / `would_deny:sni_mismatch`
/// and passes the bytes on: each tunnel must then be established, nothing more (a server that
/// waits on the bytes is not a proxy that drops them).
#[must_use]
pub fn n17(
    ssh: &Tunnel,
    other_sni: &Tunnel,
    control: Option<&Tunnel>,
    report_only: bool,
) -> Judged {
    let got = format!(
        "ssh-banner: {}; other-sni: {}; control: {}",
        ssh.text(),
        other_sni.text(),
        control.map_or_else(|| "not attempted (port is not 443)".into(), Tunnel::text)
    );
    let mut why = Vec::new();
    for (what, t) in [
        ("SSH banner", ssh),
        ("ClientHello with another SNI", other_sni),
    ] {
        match t {
            Tunnel::NotEstablished(r) => {
                why.push(format!(
                    "{what}: the CONNECT itself was not established: {}",
                    r.text()
                ));
            }
            // Report-only passes the bytes on: what the server does with them (answer, close,
            // wait) is its business; the proxy's 200 was the answer the probe needed.
            _ if report_only => {}
            Tunnel::Cut { .. } => {}
            Tunnel::Timeout => why.push(format!(
                "{what}: neither answered nor cut within the deadline"
            )),
            other @ Tunnel::Answered { .. } => {
                why.push(format!("{what}: not cut, {}", other.text()));
            }
        }
    }
    if let Some(c) = control
        && !report_only
        && !c.tls_answer()
    {
        why.push(format!(
            "positive control failed: a ClientHello naming the CONNECT host got {}",
            c.text()
        ));
    }
    let expect = if report_only {
        "report-only run: each tunnel established (would_deny:not_tls / would_deny:sni_mismatch logged, not enforced)"
    } else {
        "SSH banner and another SNI: cut with no byte back; control (port 443): a TLS record back"
    };
    judged(expect, got, why.is_empty(), why.join("; "))
}

/// N17 in a deny-all run (empty allowlist): no tunnel may be established at all.
#[must_use]
pub fn n17_deny_all(connect: &Reply) -> Judged {
    judged(
        "deny-all run: CONNECT 403 from the proxy (X-Squid-Error)",
        format!("CONNECT {}", connect.text()),
        connect.is_deny(),
        "policy: with an empty allowlist no tunnel exists whose content could be checked",
    )
}
