//! The decision log parser's tests.

use super::*;

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
            sni: None,
            error: None,
            listen_port: None,
            content_length: None,
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

/// Tunnel lines squid 6.13 wrote with the rendered configuration (issue 13): an SSH banner cut,
/// another SNI cut (the SNI seen is logged), an honest tunnel.
#[test]
fn parses_tunnel_lines_with_their_sni_and_error() {
    let not_tls = r#"{"ts":1796140065.808,"client":"10.88.0.9","method":"CONNECT","host":"allowed.example","port":"443","url":"allowed.example:443","status":"200","squid":"NONE_NONE","server":"-","reason":"not_tls","ms":"0","bytes":"0","sni":"-","err":"ERR_PROTOCOL_UNKNOWN"}"#;
    let d = parse_decision(not_tls).expect("line");
    assert_eq!(d.decision, Decision::Denied(DenyReason::NotTls));
    assert_eq!(
        (d.sni, d.error.as_deref()),
        (None, Some("ERR_PROTOCOL_UNKNOWN"))
    );
    let sni = not_tls
        .replace(r#""reason":"not_tls""#, r#""reason":"sni_mismatch""#)
        .replace(r#""sni":"-""#, r#""sni":"denied.example""#)
        .replace(r#""err":"ERR_PROTOCOL_UNKNOWN""#, r#""err":"-""#);
    let d = parse_decision(&sni).expect("line");
    assert_eq!(d.decision, Decision::Denied(DenyReason::SniMismatch));
    assert_eq!((d.sni.as_deref(), d.error), (Some("denied.example"), None));
    // A line of an older configuration (no sni/err fields) still parses.
    assert_eq!(parse_decision(ALLOWED).expect("line").sni, None);
}

/// Issue 31: a `CONNECT` squid ended with `ERR_SECURE_CONNECT_FAIL` (the server did not answer
/// TLS: never spliced) is `server_not_tls` whatever the allowing line noted; the record keeps
/// the noted reason beside it. Other methods keep theirs.
#[test]
fn a_tunnel_whose_server_did_not_answer_tls_is_settled_server_not_tls() {
    let line = r#"{"ts":1796535528.569,"client":"10.88.0.9","method":"CONNECT","host":"allowed.example","port":"80","url":"allowed.example:80","status":"200","squid":"NONE_NONE_ABORTED","server":"-","reason":"allowlisted","ms":"701","bytes":"0","sni":"allowed.example","err":"ERR_SECURE_CONNECT_FAIL"}"#;
    let d = parse_decision(line).expect("line");
    assert_eq!(d.decision, Decision::Denied(DenyReason::ServerNotTls));
    let mut v: serde_json::Value = serde_json::from_str(line).expect("json");
    super::settle(&mut v);
    assert_eq!(v["reason"], "server_not_tls");
    assert_eq!(v["noted"], "allowlisted");
    // Control: the same error on a plain request, and a spliced tunnel, keep their reasons.
    let get = line.replace(r#""method":"CONNECT""#, r#""method":"GET""#);
    assert_eq!(
        parse_decision(&get).expect("line").decision,
        Decision::Allowed
    );
    let spliced = line.replace("ERR_SECURE_CONNECT_FAIL", "-");
    let mut v: serde_json::Value = serde_json::from_str(&spliced).expect("json");
    super::settle(&mut v);
    assert_eq!(v["reason"], "allowlisted");
    assert!(v.get("noted").is_none());
}

/// What the summary counts: refused before a byte left, cut by content, sent with the answer
/// withheld, forwarded (a 403 the origin answered is forwarded: attack review of issue 31).
#[test]
fn outcomes_count_what_left() {
    use super::Outcome;
    for (reason, status, err, want) in [
        ("allowlisted", "200", "-", Outcome::Forwarded),
        ("allowlisted", "403", "-", Outcome::Forwarded),
        ("credential_added", "403", "-", Outcome::Forwarded),
        (
            "would_deny:port_not_allowed",
            "403",
            "-",
            Outcome::Forwarded,
        ),
        ("domain_not_allowlisted", "403", "-", Outcome::Refused),
        ("port_not_http", "403", "-", Outcome::Refused),
        ("credential_over_budget", "429", "-", Outcome::Refused),
        ("-", "407", "-", Outcome::Refused),
        ("-", "403", "-", Outcome::Refused),
        ("-", "503", "ERR_SECURE_CONNECT_FAIL", Outcome::Refused),
        ("-", "400", "-", Outcome::Forwarded),
        ("not_tls", "200", "ERR_PROTOCOL_UNKNOWN", Outcome::TunnelCut),
        ("sni_mismatch", "200", "-", Outcome::TunnelCut),
        (
            "server_not_tls",
            "200",
            "ERR_SECURE_CONNECT_FAIL",
            Outcome::SentAnswerWithheld,
        ),
        ("not_http", "403", "-", Outcome::SentAnswerWithheld),
    ] {
        assert_eq!(
            Outcome::of(reason, status, err),
            want,
            "{reason} {status} {err}"
        );
    }
}
