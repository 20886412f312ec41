//! `agent.preset`, `agent.model`, `agent.max_turns`, `agent.api_host` (issue 14).

use super::{all, d, ok, one, with};
use crate::spec::{CredentialScheme, Image};

/// `base()` whose agent is only `lines` (no image, no command).
fn preset(lines: &str) -> String {
    with(
        &format!(
            "  image: ghcr.io/acme/agent@sha256:{}\n  command: [agent, --run]\n",
            super::DIGEST
        ),
        lines,
    )
}

#[test]
fn a_preset_supplies_image_argv_uid_variables_and_its_credential() {
    let s = ok(&preset(
        "  preset: claude-code\n  model: cheapest\n  max_turns: 12\n",
    ));
    let a = &s.agent;
    assert_eq!(
        a.image,
        Image::UnpinnedLocal {
            reference: "localhost/cyclix-agent-claude-code:2.1.332".into()
        }
    );
    assert_eq!(a.command[0], "claude");
    assert!(a.command.ends_with(&[
        "--model".into(),
        "claude-haiku-5-5".into(),
        "--max-turns".into(),
        "12".into()
    ]));
    assert_eq!(a.run_as, Some(1000));
    assert!(a.task_on_stdin);
    assert!(
        a.fixed_env
            .iter()
            .any(|(k, v)| k == "CLAUDE_CONFIG_DIR" && v.starts_with("/tmp/"))
    );
    let c = &a.credentials[0];
    assert_eq!(
        (c.env.as_str(), c.host.as_str(), c.header.as_str()),
        ("ANTHROPIC_API_KEY", "api.anthropic.com", "x-api-key")
    );
    assert_eq!(c.scheme, CredentialScheme::Raw);
    let p = a.preset.as_ref().expect("preset");
    assert_eq!(
        (p.name.as_str(), p.max_turns, p.max_turns_enforced),
        ("claude-code", Some(12), true)
    );
    assert!(p.overridden.is_empty());
}

#[test]
fn api_host_moves_the_credential_and_overrides_are_recorded() {
    let s = ok(&preset(&format!(
        "  preset: codex\n  api_host: API.Example\n  image: ghcr.io/acme/codex@sha256:{}\n  command: [my-codex]\n  max_turns: 3\n",
        super::DIGEST
    )));
    let a = &s.agent;
    assert_eq!(a.credentials[0].host, "api.example");
    assert_eq!(a.credentials[0].base_url_path, "/v1");
    assert_eq!(a.credentials[0].scheme, CredentialScheme::Bearer);
    assert_eq!(a.command, ["my-codex"]);
    let p = a.preset.as_ref().expect("preset");
    assert_eq!(p.overridden, ["agent.image", "agent.command"]);
    assert!(
        !p.max_turns_enforced,
        "codex has no turn flag: recorded, not enforced"
    );
    // The preset's variables and parser still apply to an override.
    assert!(a.fixed_env.iter().any(|(k, _)| k == "CODEX_HOME"));
}

#[test]
fn the_specs_own_credential_for_the_same_variable_replaces_the_presets() {
    let s = ok(&preset(
        "  preset: claude-code\n  credentials:\n    - {env: ANTHROPIC_API_KEY, host: gw.example, header: authorization, scheme: bearer, paths: [/v1/messages]}\n",
    ));
    assert_eq!(s.agent.credentials.len(), 1);
    assert_eq!(s.agent.credentials[0].host, "gw.example");
}

#[test]
fn bad_preset_keys_are_named_with_the_fix() {
    assert_eq!(
        one(&preset("  preset: claude\n")),
        d(8, 11, "agent.preset", "unknown agent preset `claude`")
    );
    assert_eq!(
        one(&preset("  preset: codex\n  max_turns: 0\n")).3,
        "max_turns `0` is out of range"
    );
    assert_eq!(
        one(&preset("  preset: codex\n  model: \"gpt 5\"\n")).3,
        "`gpt 5` is not a model name"
    );
    assert_eq!(
        one(&preset("  preset: codex\n  api_host: \"*.openai.com\"\n")).3,
        "`*.openai.com` is not one exact host name"
    );
    // Keys only a CLI reads, on a script agent.
    let got = all(&with(
        "  command: [agent, --run]\n",
        "  command: [agent, --run]\n  model: m\n  max_turns: 3\n",
    ));
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].3.contains("needs an agent preset"), "{got:?}");
    // Without a preset, image and command stay required, with the preset named in the fix.
    let e = super::err(&preset("  timeout: 10m\n"));
    let msgs: Vec<String> = e
        .diagnostics
        .iter()
        .map(|x| format!("{} {}", x.path, x.message))
        .collect();
    assert_eq!(
        msgs,
        [
            "agent.image missing required key `image`",
            "agent.command missing required key `command`"
        ]
    );
    assert!(
        e.diagnostics[0]
            .hint
            .as_deref()
            .is_some_and(|h| h.contains("preset: claude-code"))
    );
}

#[test]
fn a_preset_in_a_host_tier_is_refused_with_the_reason() {
    let text = preset("  preset: claude-code\n").replacen(
        "tenant: acme\n",
        "tenant: acme\ntier: worktree\n",
        1,
    );
    let (_, _, path, msg) = one(&text);
    assert_eq!(path, "agent.preset");
    assert!(
        msg.contains("without confirmations") && msg.contains("tier `worktree`"),
        "{msg}"
    );
}
