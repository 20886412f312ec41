//! The squid configuration's tests.

use super::*;
use crate::render::proxy::{Decision, parse_decision};
use crate::spec::Egress;

const DENIED: &str = r#"{"ts":1796036903.006,"client":"10.90.0.10","method":"CONNECT","host":"allowed.example","port":"443","url":"allowed.example:443","status":"403","squid":"TCP_DENIED","server":"-","reason":"resolves_to_private_ip","ms":"0","bytes":"3402"}"#;

fn egress(allow: &[HostPattern], ports: &[u16], report_only: bool) -> Egress {
    Egress {
        allow: allow.to_vec(),
        ports: ports.to_vec(),
        http_ports: ports.iter().copied().filter(|p| *p == 80).collect(),
        report_only,
        ca_certs: Vec::new(),
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
        credentials: &[],
        placeholders: &[],
        ca_files: 0,
        log_key: crate::render::plan::PREVIEW_LOG_KEY,
    })
}

/// The `http_access` lines without the `CONNECT` copies of the deny lines (those are
/// `tunnel::answer_refused_connects_at_once`'s, tested there), after checking that each deny
/// line that can match has its copy right before it.
fn access_lines(conf: &str) -> Vec<&str> {
    let all: Vec<&str> = conf
        .lines()
        .filter(|l| l.starts_with("http_access "))
        .collect();
    for (i, l) in all.iter().enumerate() {
        if let Some(conds) = l.strip_prefix("http_access deny ")
            && !conds.starts_with("connect_m ")
            && !conds.ends_with(" !all")
            && conf.contains(" ssl-bump ")
        {
            assert_eq!(
                i.checked_sub(1).map(|j| all[j]),
                Some(format!("http_access deny connect_m {conds} r_connect_407").as_str()),
                "{l} has no CONNECT copy"
            );
        }
    }
    all.into_iter()
        .filter(|l| !l.starts_with("http_access deny connect_m "))
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
        "http_port 3128 ssl-bump tls-cert=/tmp/cyclix-ca/ca.pem generate-host-certificates=on dynamic_cert_mem_cache_size=4MB",
        "sslcrtd_program /usr/lib/squid/security_file_certgen -s /tmp/cyclix-ca/certs -M 4MB",
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
        "acl http_ports port 80",
        "acl connect_m method CONNECT",
        &format!(
            r#"logformat jsonl {{"key":"{}"{LOGFORMAT_REST}"#,
            crate::render::plan::PREVIEW_LOG_KEY
        ),
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
            "http_access deny !connect_m !http_ports r_port_not_http",
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
        credentials: &[],
        placeholders: &[],
        ca_files: 0,
        log_key: crate::render::plan::PREVIEW_LOG_KEY,
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
        "acl rw_port_not_http annotate_transaction reason=would_deny:port_not_http",
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
            "http_access deny !connect_m !noted rw_port_not_http !all",
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
        credentials: &[],
        placeholders: &[],
        ca_files: 0,
        log_key: crate::render::plan::PREVIEW_LOG_KEY,
    };
    assert_eq!(squid_conf(&plan), squid_conf(&plan));
    let conf = squid_conf(&plan);
    assert!(has_line(
        &conf,
        "http_port 8888 ssl-bump tls-cert=/tmp/cyclix-ca/ca.pem generate-host-certificates=on dynamic_cert_mem_cache_size=4MB"
    ));
    assert!(has_line(&conf, "acl agents src fd00:1::/64"));
    assert!(has_line(
        &conf,
        "acl allowed_dom dstdomain -n a.example b.example"
    ));
    assert!(has_line(&conf, "acl allowed_ports port 443 80"));
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
    // Every reason, allowlisted, four would_deny of the access rules.
    assert_eq!(seen, DenyReason::ALL.len() + 1 + 4);
}

/// Issue 31: plain HTTP only to `egress.http_ports`; none listed, no plain HTTP at all. A
/// `CONNECT` is never refused by it (its copy answered 407 cannot match).
#[test]
fn plain_http_goes_only_to_the_http_ports() {
    let mut e = egress(&[exact("a.example")], &[443, 8080], false);
    e.http_ports = vec![8080];
    let conf = render(&e);
    assert!(has_line(&conf, "acl http_ports port 8080"), "{conf}");
    assert!(has_line(
        &conf,
        "http_access deny !connect_m !http_ports r_port_not_http"
    ));
    e.http_ports.clear();
    let conf = render(&e);
    assert!(!conf.contains("acl http_ports "), "{conf}");
    assert!(has_line(
        &conf,
        "http_access deny !connect_m r_port_not_http"
    ));
    // After the port check, before the DNS-costing private check.
    let lines = access_lines(&conf);
    let at = |needle: &str| lines.iter().position(|l| l.contains(needle));
    assert!(at("r_port_not_http") > at(" r_port") && at("r_port_not_http") < at("r_private"));
}
