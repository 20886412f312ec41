use super::*;
use crate::spec::{Egress, HostPattern};

fn cred(env: &str, host: &str, header: &str, scheme: CredentialScheme) -> Credential {
    Credential {
        env: env.into(),
        host: host.into(),
        header: header.into(),
        scheme,
        paths: vec!["/v1/messages".into(), "/v1/models/*".into()],
        methods: vec!["POST".into(), "GET".into()],
        port: 443,
        placeholder_prefix: "sk-ant-api03-".into(),
        base_url_env: "ANTHROPIC_BASE_URL".into(),
        base_url_path: String::new(),
        budget: None,
        line: 1,
    }
}

fn conf(creds: &[Credential], placeholders: &[String], ca_files: usize) -> String {
    let e = Egress {
        allow: vec![HostPattern::Exact("allowed.example".into())],
        ports: vec![80, 443],
        http_ports: vec![80],
        report_only: false,
        ca_certs: Vec::new(),
    };
    super::super::squid_conf(&ProxyPlan {
        egress: &e,
        agent_subnet: "10.213.7.0/24",
        listen_port: 3128,
        credentials: creds,
        placeholders,
        ca_files,
        log_key: crate::render::plan::PREVIEW_LOG_KEY,
    })
}

const HEX: &str = "0123456789abcdef0123456789abcdef";

#[test]
fn a_credential_gets_its_own_reverse_proxy_port_and_peer() {
    let c = vec![cred(
        "ANTHROPIC_API_KEY",
        "api.example",
        "x-api-key",
        CredentialScheme::Raw,
    )];
    let p = vec![placeholder("sk-ant-api03-", HEX)];
    let text = conf(&c, &p, 2);
    for line in [
        "http_port 3129 accel defaultsite=api.example no-vhost name=cred0",
        "cache_peer api.example parent 443 0 no-query no-digest no-netdb-exchange originserver tls tls-default-ca=on tls-cafile=/etc/cyclix/ca/0.pem tls-cafile=/etc/cyclix/ca/1.pem name=cred0_peer",
        "acl cred0_port myportname cred0",
        "acl cred0_method method POST GET",
        "acl cred0_path urlpath_regex ^/v1/messages(\\?.*)?$ ^/v1/models/[A-Za-z0-9/_.~:@+-]*(\\?.*)?$",
        "cache_peer_access cred0_peer allow cred0_port",
        "cache_peer_access cred0_peer deny all",
        "never_direct allow cred0_port",
        "request_header_access Authorization deny cred0_port",
        "request_header_access Proxy-Authorization deny cred0_port",
        "request_header_access x-api-key deny cred0_port",
        "request_header_access x-goog-api-key deny cred0_port",
        "request_header_access Surrogate-Capability deny cred0_port",
        "acl placeholder0_h0 req_header Authorization -i cyclix-placeholder-0123456789abcdef0123456789abcdef",
        "acl placeholder0_h2 req_header x-api-key -i cyclix-placeholder-0123456789abcdef0123456789abcdef",
        "acl placeholder0 any-of placeholder0_h0 placeholder0_h1 placeholder0_h2 placeholder0_h3 placeholder0_url",
        "acl placeholder0_url url_regex -i cyclix-placeholder-0123456789abcdef0123456789abcdef",
        "include /etc/cyclix/credentials.conf",
        "http_access deny cred0_port !cred0_method r_cred_method",
        "http_access deny cred0_port !cred0_path r_cred_path",
        "http_access allow cred0_port r_cred",
        "http_access deny placeholder0 r_placeholder",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing `{line}` in:\n{text}"
        );
    }
    // The credential rules come right after the client check, before the forward rules.
    let at = |needle: &str| text.find(needle).expect(needle);
    assert!(at("http_access deny !agents") < at("http_access allow cred0_port"));
    assert!(at("http_access deny placeholder0 ") < at("http_access deny ip_literal"));
    // The include comes after every ACL it names.
    assert!(at("acl cred0_port") < at("include /etc/cyclix/credentials.conf"));
}

#[test]
fn without_credentials_nothing_changes() {
    let text = conf(&[], &[], 0);
    assert!(!text.contains("cred"), "{text}");
    assert!(!text.contains("include"), "{text}");
}

#[test]
fn a_bad_placeholder_renders_no_credential_port() {
    let c = vec![cred(
        "ANTHROPIC_API_KEY",
        "api.example",
        "x-api-key",
        CredentialScheme::Raw,
    )];
    for p in [
        vec![],
        vec!["no-token-here".to_string()],
        vec!["cyclix-placeholder-X Y".to_string()],
    ] {
        let text = conf(&c, &p, 0);
        assert!(!text.contains("accel"), "{text}");
        assert!(!text.contains("http_access allow cred0_port"), "{text}");
    }
}

#[test]
fn the_include_file_carries_the_value_in_its_scheme() {
    let c = vec![
        cred("A_KEY", "a.example", "x-api-key", CredentialScheme::Raw),
        cred(
            "B_TOKEN",
            "b.example",
            "authorization",
            CredentialScheme::Bearer,
        ),
    ];
    let text = include_file(&c, &[b"sk-1%2", b"tok"]).expect("include");
    assert!(
        text.contains("request_header_add x-api-key \"sk-1%%2\" cred0_port\n"),
        "{text}"
    );
    assert!(
        text.contains("request_header_add authorization \"Bearer tok\" cred1_port\n"),
        "{text}"
    );
    for bad in [&b"a b"[..], b"a\"b", b"a\\b", b"a\nb", b"", "é".as_bytes()] {
        let e = include_file(&c[..1], &[bad]).expect_err("refused");
        assert_eq!(e.env, "A_KEY");
        assert!(!e.to_string().contains("a b"), "the value is never named");
    }
}

#[test]
fn a_declared_header_outside_the_known_ones_is_stripped_and_watched() {
    let c = vec![cred(
        "X_KEY",
        "x.example",
        "x-custom-auth",
        CredentialScheme::Raw,
    )];
    let text = conf(&c, &[placeholder("", HEX)], 0);
    assert!(
        text.contains("request_header_access x-custom-auth deny cred0_port\n"),
        "{text}"
    );
    assert!(
        text.contains("acl placeholder0_h4 req_header x-custom-auth -i cyclix-placeholder-"),
        "{text}"
    );
}

#[test]
fn path_patterns_are_anchored_and_escaped() {
    assert_eq!(path_regex("/v1/messages"), "^/v1/messages(\\?.*)?$");
    assert_eq!(path_regex("/a.b+c"), "^/a\\.b\\+c(\\?.*)?$");
    assert_eq!(path_regex("/v1/*"), "^/v1/[A-Za-z0-9/_.~:@+-]*(\\?.*)?$");
}

fn spec_with_credential() -> crate::spec::Spec {
    let yaml = "tenant: shop\nrepo: {path: /home/u/shop, base: main}\ntask: {text: x}\n\
         agent:\n  image: localhost/a\n  unpinned_local_image: true\n  command: [agent]\n  credentials:\n    - {env: ANTHROPIC_API_KEY, host: api.anthropic.com, header: x-api-key, paths: [/v1/messages]}\n\
         gate: {image: localhost/a, unpinned_local_image: true, command: [check]}\n\
         egress: {ca_certs: [/etc/corp-ca.pem]}\n";
    let ctx = crate::spec::SpecContext {
        file: "t.yaml".into(),
        home: "/home/u".into(),
        runtime_dir: "/run/user/1000".into(),
    };
    crate::spec::parse(yaml, &ctx).expect("spec")
}

fn run_ctx(placeholders: Vec<String>) -> crate::render::RunContext {
    crate::render::RunContext {
        gvisor: None,
        run_id: "20261130t140126-a979".into(),
        worktree: "/w".into(),
        run_dir: "/run/user/1000/cyclix/runs/r".into(),
        subnet_octet: 9,
        proxy_image: "localhost/p".into(),
        cyclix_bin: "/usr/bin/cyclix".into(),
        service_ports: Vec::new(),
        placeholders,
        setup_binds: Vec::new(),
        log_key: crate::render::plan::PREVIEW_LOG_KEY.to_string(),
        credentials_file: false,
        claim_wait_s: None,
    }
}

#[test]
fn the_agent_gets_the_placeholder_and_the_base_url_and_only_the_proxy_the_secret() {
    let spec = spec_with_credential();
    let ph = placeholder("sk-ant-api03-", HEX);
    let plan = crate::render::plan::plan(&spec, &run_ctx(vec![ph.clone()])).expect("plan");
    let agent = plan
        .containers
        .iter()
        .find(|c| c.stem.ends_with("-agent"))
        .expect("agent");
    let env = |k: &str| {
        agent
            .env
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(env("ANTHROPIC_API_KEY"), Some(ph.as_str()));
    assert_eq!(env("ANTHROPIC_BASE_URL"), Some("http://10.213.9.2:3129"));
    assert_eq!(env("NO_PROXY"), Some("localhost,127.0.0.1,::1,10.213.9.2"));
    assert!(
        agent.secrets.is_empty() && agent.secret_files.is_empty(),
        "{agent:?}"
    );
    let proxy = plan
        .containers
        .iter()
        .find(|c| c.stem.ends_with("-proxy"))
        .expect("proxy");
    assert_eq!(
        proxy.secret_files,
        [(
            "cyclix-20261130t140126-a979-CYCLIX_PROXY_CREDENTIALS".to_string(),
            CREDENTIALS_INCLUDE_PATH.to_string()
        )]
    );
    assert!(
        proxy
            .binds
            .iter()
            .any(|b| b.source == "/etc/corp-ca.pem" && b.target == ca_path(0) && b.read_only)
    );
    for c in &plan.containers {
        if !c.stem.ends_with("-proxy") {
            assert!(
                c.secret_files.is_empty()
                    && !c.binds.iter().any(|b| b.source == "/etc/corp-ca.pem"),
                "{}",
                c.stem
            );
        }
    }
}

#[test]
fn a_run_without_a_proper_placeholder_per_credential_is_not_rendered() {
    let spec = spec_with_credential();
    for bad in [
        vec![],
        vec![placeholder("sk-ant-api03-", "short")],
        vec![placeholder("wrong-", HEX)],
        vec![
            placeholder("sk-ant-api03-", HEX),
            placeholder("sk-ant-api03-", HEX),
        ],
    ] {
        let e = crate::render::plan::plan(&spec, &run_ctx(bad)).expect_err("refused");
        assert_eq!(e.key, "run.placeholders");
    }
}

#[test]
fn the_leak_watch_looks_for_a_credential_by_value_not_by_name() {
    use crate::run::boundary::{ProcessEnv, credential_watch, leaks};
    let values = [(
        "ANTHROPIC_API_KEY".to_string(),
        b"sk-real-0123456789".to_vec(),
    )];
    let watched = credential_watch(values.iter());
    let holder = ProcessEnv {
        pid: 7,
        comm: "agent".into(),
        vars: vec![(
            "ANTHROPIC_API_KEY".into(),
            b"sk-ant-api03-cyclix-placeholder-00".to_vec(),
        )],
        unreadable: None,
    };
    assert!(
        leaks(std::slice::from_ref(&holder), &watched).is_empty(),
        "the placeholder is allowed"
    );
    let leaked = ProcessEnv {
        vars: vec![("X".into(), b"pre sk-real-0123456789".to_vec())],
        ..holder
    };
    assert_eq!(
        leaks(&[leaked], &watched),
        ["pid 7 (agent): the value of host variable ANTHROPIC_API_KEY (credential value) is in X"]
    );
}

/// Issue 31: a budgeted credential's requests go out only when the budget helper counted them;
/// anything else on that port is refused with 429 and the budget page (fail closed). A
/// credential without a budget has no helper line.
#[test]
fn a_budgeted_credential_is_allowed_only_when_its_helper_counts_the_request() {
    let mut c = vec![
        cred(
            "ANTHROPIC_API_KEY",
            "api.example",
            "x-api-key",
            CredentialScheme::Raw,
        ),
        cred(
            "OPENAI_API_KEY",
            "api2.example",
            "authorization",
            CredentialScheme::Bearer,
        ),
    ];
    let p = vec![
        placeholder("sk-ant-api03-", HEX),
        placeholder("sk-proj-", &HEX.replace('0', "1")),
    ];
    let plain = conf(&c, &p, 0);
    assert!(!plain.contains("external cred_budget"), "{plain}");
    c[0].budget = Some(crate::spec::CredentialBudget {
        requests: Some(3),
        request_bytes: None,
    });
    let text = conf(&c, &p, 0);
    let lines: Vec<&str> = text.lines().collect();
    for line in [
        "external_acl_type cred_budget ttl=0 negative_ttl=0 cache=0 queue-size=128 children-max=1 children-startup=0 %{Content-Length}>h /usr/local/libexec/cyclix-budget",
        "deny_info 429:ERR_CYCLIX_BUDGET r_cred_budget",
        "acl cred0_budget external cred_budget cred0 3 -",
        "acl r_cred_budget annotate_transaction reason=credential_over_budget",
        "http_access allow cred0_port cred0_budget r_cred",
        "http_access deny cred0_port r_cred_budget",
        "http_access allow cred1_port r_cred",
    ] {
        assert!(lines.contains(&line), "missing `{line}` in:\n{text}");
    }
    let at = |l: &str| lines.iter().position(|x| *x == l);
    assert!(
        at("http_access deny cred0_port !cred0_path r_cred_path")
            < at("http_access allow cred0_port cred0_budget r_cred"),
        "the budget is counted only for a request every other check let through"
    );
    assert!(!text.contains("acl cred1_budget"), "{text}");
    // The image ships the helper and the page the configuration names.
    let containerfile = include_str!("../../../../images/proxy/Containerfile");
    assert!(containerfile.contains(&format!("COPY cyclix-budget {BUDGET_HELPER}\n")));
    assert!(containerfile.contains(&format!(
        "COPY {BUDGET_PAGE} /usr/share/squid/errors/templates/{BUDGET_PAGE}\n"
    )));
}
