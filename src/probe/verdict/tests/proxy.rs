//! The proxy verdicts (N5, N8–N14, N16 and report-only runs): passing and failing fixtures.

use std::collections::BTreeMap;

use super::*;
use crate::probe::verdict::proxy::*;

#[test]
fn proxy_probes() {
    assert!(proxy_denies(&[("CONNECT 169.254.169.254:80".into(), deny())], &ok200("")).pass);
    let bare403 = Reply::Status {
        code: 403,
        error_header: None,
        location: None,
        body: String::new(),
    };
    assert!(
        !proxy_denies(&[("x".into(), bare403)], &ok200("")).pass,
        "403 without the proxy's header may come from the origin"
    );
    assert!(!proxy_denies(&[("x".into(), ok200(""))], &ok200("")).pass);
    assert!(!proxy_denies(&[], &ok200("")).pass);

    let t = "allowed.example:80";
    assert!(n8(&ok200(""), &ok200(""), t).pass);
    assert!(!n8(&ok200(""), &deny(), t).pass);
    assert!(n13(&ok200("hello from allowed"), "hello", t).pass);
    assert!(!n13(&ok200("private page"), "hello", t).pass);
    assert!(n8(&ok200(""), &deny(), t).expect.contains(t));
    assert!(
        n13(&deny(), "hello", "").pass,
        "a deny-all run's N13 wants the deny"
    );
    let redirect = Reply::Status {
        code: 302,
        error_header: None,
        location: Some("http://denied.example/".into()),
        body: String::new(),
    };
    assert!(n14(Some(&redirect), &deny()).pass);
    assert!(n14(None, &deny()).pass);
    assert!(
        !n14(Some(&ok200("followed")), &deny()).pass,
        "the proxy followed the redirect"
    );
    assert!(!n14(None, &ok200("")).pass);
}

#[test]
fn n16_proxy_env() {
    let c = ctx();
    let mut env: BTreeMap<String, String> =
        ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
            .iter()
            .map(|k| ((*k).to_string(), c.proxy_url.clone()))
            .collect();
    env.insert("NO_PROXY".into(), "localhost,127.0.0.1,::1".into());
    assert!(n16(&env, &c).pass);
    let mut star = env.clone();
    star.insert("no_proxy".into(), "*".into());
    assert!(!n16(&star, &c).pass);
    let mut suffix = env.clone();
    suffix.insert("NO_PROXY".into(), "localhost,.example.com".into());
    assert!(!n16(&suffix, &c).pass);
    env.remove("https_proxy");
    assert!(!n16(&env, &c).pass);
}

#[test]
fn report_only_requires_an_answer_not_a_deny() {
    let ok = Reply::Status {
        code: 200,
        error_header: None,
        location: None,
        body: String::new(),
    };
    let denied = Reply::Status {
        code: 403,
        error_header: Some("ERR_ACCESS_DENIED 0".into()),
        location: None,
        body: String::new(),
    };
    assert!(
        report_only_answers(&[
            ("GET http://d/".into(), ok),
            ("CONNECT d:22".into(), denied)
        ])
        .pass
    );
    assert!(
        !report_only_answers(&[("GET http://d/".into(), Reply::Failed(Attempt::Timeout))]).pass,
        "a drop fails"
    );
    assert!(!report_only_answers(&[]).pass, "nothing attempted fails");
}

#[test]
fn report_only_keeps_private_targets_unforwarded() {
    let squid503 = Reply::Status {
        code: 503,
        error_header: Some("ERR_DNS_FAIL 0".into()),
        location: None,
        body: String::new(),
    };
    let origin200 = Reply::Status {
        code: 200,
        error_header: None,
        location: None,
        body: String::new(),
    };
    assert!(proxy_not_forwarded(&[("CONNECT metadata:80".into(), squid503)]).pass);
    assert!(
        !proxy_not_forwarded(&[("CONNECT 169.254.169.254:80".into(), origin200)]).pass,
        "forwarded"
    );
}

#[test]
fn n17_a_tunnel_is_what_it_says() {
    let cut = Tunnel::Cut { ms: 0 };
    let banner = Tunnel::Answered {
        first: b"SSH-2.0-testbed-outside\r\n".to_vec(),
    };
    let tls = Tunnel::Answered {
        first: vec![0x16, 0x03, 0x03, 0x00, 0x7a],
    };
    assert!(n17(&cut, &cut, Some(&tls), false).pass);
    assert!(
        n17(&cut, &cut, None, false).pass,
        "no TLS port: CONNECT 200 is the control"
    );
    let j = n17(&banner, &cut, Some(&tls), false);
    assert!(
        !j.pass && j.got.contains("SSH-2.0-testbed-outside"),
        "{j:?}"
    );
    assert!(
        !n17(&cut, &tls, Some(&tls), false).pass,
        "another SNI got TLS back"
    );
    let t = n17(&Tunnel::Timeout, &cut, Some(&tls), false);
    assert!(
        !t.pass && t.detail.contains("deadline"),
        "a timeout FAILS: {t:?}"
    );
    assert!(
        !n17(&cut, &cut, Some(&cut), false).pass,
        "positive control: a proxy that cuts every tunnel"
    );
    assert!(!n17(&cut, &cut, Some(&banner), false).pass);
    let denied = Tunnel::NotEstablished(deny());
    assert!(
        !n17(&denied, &cut, Some(&tls), false).pass,
        "nothing was tested"
    );
    // Report-only: established is enough (the server may wait); a refused CONNECT fails.
    assert!(n17(&banner, &tls, Some(&tls), true).pass);
    assert!(n17(&Tunnel::Timeout, &tls, None, true).pass);
    assert!(!n17(&denied, &tls, None, true).pass);
    assert!(n17_deny_all(&deny()).pass);
    assert!(!n17_deny_all(&ok200("")).pass);
}

#[test]
fn deny_probes_derive_the_denied_ports_from_the_spec() {
    let mut c = ctx();
    c.allowed_ports = vec![80, 8080];
    assert_eq!(c.denied_ports(2), [22, 25]);
    c.allowed_ports = vec![22, 8080, 25, 3306, 5432, 6379, 8443, 1, 2];
    assert_eq!(c.denied_ports(3), [3, 4, 5]);
    c.allowed_ports = vec![];
    c.allowed_port = 22;
    assert_eq!(c.allowed_ports(), [22]);
    assert_eq!(c.denied_ports(2), [8080, 25]);
}
