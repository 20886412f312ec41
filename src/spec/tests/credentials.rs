//! `agent.credentials` and `egress.ca_certs`.

use super::{all, base, err, ok, with};
use crate::spec::CredentialScheme;

/// `base()` with `lines` inserted into `agent:` (after `command:`).
fn agent_with(lines: &str) -> String {
    with(
        "  command: [agent, --run]\n",
        &format!("  command: [agent, --run]\n{lines}"),
    )
}

#[test]
fn a_credential_gets_its_defaults() {
    let s = ok(&agent_with(
        "  credentials:\n    - env: ANTHROPIC_API_KEY\n      host: API.Anthropic.com\n      header: X-Api-Key\n      paths: [/v1/messages]\n",
    ));
    let c = &s.agent.credentials[0];
    assert_eq!(c.host, "api.anthropic.com");
    assert_eq!(c.header, "x-api-key");
    assert_eq!(c.scheme, CredentialScheme::Raw);
    assert_eq!(c.methods, ["POST"]);
    assert_eq!(c.port, 443);
    assert_eq!(c.placeholder_prefix, "sk-ant-api03-");
    assert_eq!(c.base_url_env, "ANTHROPIC_BASE_URL");
    let s = ok(&agent_with(
        "  credentials:\n    - {env: MY_TOKEN, host: api.example, header: authorization, scheme: bearer, paths: [/x/*], methods: [GET, POST], port: 8443}\n",
    ));
    let c = &s.agent.credentials[0];
    assert_eq!(
        (c.placeholder_prefix.as_str(), c.base_url_env.as_str()),
        ("", "MY_BASE_URL")
    );
    assert_eq!((c.scheme, c.port), (CredentialScheme::Bearer, 8443));
    assert_eq!(
        crate::spec::default_base_url_env("OPENAI_KEY"),
        "OPENAI_BASE_URL"
    );
    assert_eq!(crate::spec::default_base_url_env("X"), "X_BASE_URL");
}

#[test]
fn bad_credentials_name_the_line_key_and_fix() {
    let text = agent_with(
        "  env: [ANTHROPIC_API_KEY]\n  credentials:\n    - {env: ANTHROPIC_API_KEY, host: api.a.example, header: x-api-key, paths: [/v1]}\n    - {env: B_KEY, host: \"*.b.example\", header: \"x y\", scheme: basic, paths: [v1, /a/../b, /a?x, /a*], methods: [CONNECT], port: 0}\n    - {env: C_KEY, host: api.a.example, header: h, paths: []}\n",
    );
    let got: Vec<(usize, String)> = all(&text).into_iter().map(|(l, _, p, _)| (l, p)).collect();
    let want: Vec<(usize, String)> = [
        (12, "agent.credentials[0].env"),
        (13, "agent.credentials[1].host"),
        (13, "agent.credentials[1].header"),
        (13, "agent.credentials[1].scheme"),
        (13, "agent.credentials[1].paths[0]"),
        (13, "agent.credentials[1].paths[1]"),
        (13, "agent.credentials[1].paths[2]"),
        (13, "agent.credentials[1].paths[3]"),
        (13, "agent.credentials[1].methods[0]"),
        (13, "agent.credentials[1].port"),
        (14, "agent.credentials[2].host"),
        (14, "agent.credentials[2].paths"),
    ]
    .iter()
    .map(|(l, p)| (*l, (*p).to_string()))
    .collect();
    assert_eq!(got, want, "{}", err(&text));
    let e = err(&text).to_string();
    assert!(e.contains("also in agent.env (line 10)"), "{e}");
    assert!(
        e.contains("fix: remove `ANTHROPIC_API_KEY` from agent.env"),
        "{e}"
    );
    assert!(
        e.contains("has a credential twice (first at line 12)"),
        "{e}"
    );
}

/// Issue 31: `budget` caps requests and request bytes; no cap at all, zero or a bad size is
/// refused with its line, key and fix.
#[test]
fn a_budget_caps_requests_and_bytes_and_names_a_bad_value() {
    let s = ok(&agent_with(
        "  credentials:\n    - {env: A_KEY, host: api.example, header: x-api-key, paths: [/v1], budget: {requests: 3, request_bytes: 10M}}\n    - {env: B_KEY, host: api2.example, header: x-api-key, paths: [/v1]}\n",
    ));
    let b = s.agent.credentials[0].budget.expect("a budget");
    assert_eq!((b.requests, b.request_bytes), (Some(3), Some(10 << 20)));
    assert_eq!(s.agent.credentials[1].budget, None);
    let text = agent_with(
        "  credentials:\n    - {env: A_KEY, host: api.example, header: x-api-key, paths: [/v1], budget: {requests: 0, request_bytes: 10X}}\n    - {env: B_KEY, host: api2.example, header: x-api-key, paths: [/v1], budget: {}}\n",
    );
    let got: Vec<(usize, String, String)> = all(&text)
        .into_iter()
        .map(|(l, _, p, m)| (l, p, m))
        .collect();
    assert_eq!(
        got,
        [
            (
                11,
                "agent.credentials[0].budget.requests".to_string(),
                "`0` is not a number of requests".to_string()
            ),
            (
                11,
                "agent.credentials[0].budget.request_bytes".to_string(),
                "`10X` is not a size like `4096`, `512K` or `10M`".to_string()
            ),
            (
                12,
                "agent.credentials[1].budget".to_string(),
                "`budget` sets no cap".to_string()
            ),
        ]
    );
    assert!(err(&text).to_string().contains("fix: set `requests: N`"));
}

#[test]
fn credentials_need_the_container_tier() {
    let text = agent_with(
        "  credentials:\n    - {env: A_KEY, host: api.example, header: x-api-key, paths: [/v1]}\n",
    )
    .replacen("repo:", "tier: worktree\nrepo:", 1);
    let e = err(&text).to_string();
    assert!(e.contains("tier `worktree` has no egress proxy"), "{e}");
    assert!(e.contains("fix: use `tier: container`"), "{e}");
}

#[test]
fn ca_certs_are_normalised_paths() {
    let s = ok(&format!(
        "{}egress:\n  ca_certs: [~/ca/corp.pem, /etc/ssl/x.pem]\n",
        base()
    ));
    let paths: Vec<&str> = s.egress.ca_certs.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["/home/u/ca/corp.pem", "/etc/ssl/x.pem"]);
    assert_eq!(s.egress.ca_certs[0].line, 14);
    let got: Vec<String> = all(&format!(
        "{}egress:\n  ca_certs: [rel.pem, \"/a,b.pem\", /x.pem, /x.pem]\n",
        base()
    ))
    .into_iter()
    .map(|(_, _, p, _)| p)
    .collect();
    assert_eq!(
        got,
        [
            "egress.ca_certs[0]",
            "egress.ca_certs[1]",
            "egress.ca_certs[3]"
        ]
    );
}

#[test]
fn an_api_key_in_agent_env_warns_with_the_fix() {
    let s = ok(&format!(
        "{}egress:\n  allow: [api.anthropic.com]\n",
        agent_with("  env: [ANTHROPIC_API_KEY, PLAIN]\n")
    ));
    let w = crate::spec::env_key_warnings(&s);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("`ANTHROPIC_API_KEY`")
            && w[0].contains("fix: move it to `agent.credentials`"),
        "{w:?}"
    );
    let quiet = ok(&agent_with("  env: [ANTHROPIC_API_KEY]\n"));
    assert!(
        crate::spec::env_key_warnings(&quiet).is_empty(),
        "no API host reachable: no warning"
    );
    let with_cred = ok(&agent_with(
        "  env: [OTHER_TOKEN]\n  credentials:\n    - {env: A_KEY, host: api.example, header: x-api-key, paths: [/v1]}\n",
    ));
    assert_eq!(crate::spec::env_key_warnings(&with_cred).len(), 1);
}

#[test]
fn a_base_url_variable_of_its_own() {
    let e = err(&agent_with(
        "  env: [A_BASE_URL]\n  credentials:\n    - {env: A_KEY, host: a.example, header: x-api-key, paths: [/v1]}\n    - {env: B_KEY, host: b.example, header: x-api-key, paths: [/v1], base_url_env: A_BASE_URL}\n",
    ));
    assert_eq!(e.diagnostics.len(), 2, "{e}");
    assert!(
        e.to_string()
            .contains("the base-URL variable `A_BASE_URL` is also another variable"),
        "{e}"
    );
}
