//! Strict YAML types: control characters in values, YAML 1.1 readings of plain scalars,
//! booleans and numbers.

use super::*;

// --- §4 "Newline in any value" ---

#[test]
fn control_characters_in_values_are_rejected() {
    let cases = [
        (
            with(
                "tenant: acme",
                r#"tenant: "t1\nExecStartPre=/bin/sh -c evil""#,
            ),
            d(
                1,
                9,
                "tenant",
                "the value contains U+000A (line feed) at character 3",
            ),
        ),
        (
            with("[agent, --run]", r#"[agent, "a\tb"]"#),
            d(
                9,
                19,
                "agent.command[1]",
                "the value contains U+0009 (tab) at character 2",
            ),
        ),
        (
            with("[agent, --run]", r#"[agent, "a\0b"]"#),
            d(
                9,
                19,
                "agent.command[1]",
                "the value contains U+0000 (null) at character 2",
            ),
        ),
        (
            with("[agent, --run]", r#"[agent, "a\rb"]"#),
            d(
                9,
                19,
                "agent.command[1]",
                "the value contains U+000D (carriage return) at character 2",
            ),
        ),
        (
            with("[agent, --run]", r#"[agent, "a\u0085b"]"#),
            d(
                9,
                19,
                "agent.command[1]",
                "the value contains U+0085 at character 2",
            ),
        ),
        (
            with("[agent, --run]", r#"[agent, "a\u202Eb"]"#),
            d(
                9,
                19,
                "agent.command[1]",
                "the value contains U+202E (right-to-left override) at character 2",
            ),
        ),
        (
            with("  base: main", "  base: |\n    main"),
            d(
                5,
                5,
                "repo.base",
                "the value contains U+000A (line feed) at character 5",
            ),
        ),
    ];
    for (text, want) in cases {
        let got = one(&text);
        assert_eq!(got.0, want.0, "{text}");
        assert_eq!((&got.2, &got.3), (&want.2, &want.3), "{text}");
    }
    // Multi-line task text is the one place a newline belongs.
    let s = ok(&with(
        "  text: do it",
        "  text: |\n    line one\n    line two",
    ));
    assert_eq!(
        s.task,
        crate::spec::Task::Text("line one\nline two\n".into())
    );
}

// --- §4 "YAML 1.1 typing" ---

#[test]
#[allow(clippy::too_many_lines)] // one table
fn implicit_yaml_types_in_string_fields_are_rejected() {
    let cases = [
        (
            with("tenant: acme", "tenant: no"),
            d(
                1,
                9,
                "tenant",
                "expected a string, found boolean `no` (YAML 1.1 would read it as false)",
            ),
            "quote it: \"no\"",
        ),
        (
            with("tenant: acme", "tenant: yes"),
            d(
                1,
                9,
                "tenant",
                "expected a string, found boolean `yes` (YAML 1.1 would read it as true)",
            ),
            "quote it: \"yes\"",
        ),
        (
            with("tenant: acme", "tenant: y"),
            d(
                1,
                9,
                "tenant",
                "expected a string, found boolean `y` (YAML 1.1 would read it as true)",
            ),
            "quote it: \"y\"",
        ),
        (
            with("tenant: acme", "tenant: off"),
            d(
                1,
                9,
                "tenant",
                "expected a string, found boolean `off` (YAML 1.1 would read it as false)",
            ),
            "quote it: \"off\"",
        ),
        (
            with("tenant: acme", "tenant: true"),
            d(
                1,
                9,
                "tenant",
                "expected a string, found boolean `true` (YAML would read it as true)",
            ),
            "quote it: \"true\"",
        ),
        (
            with("tenant: acme", "tenant: ~"),
            d(
                1,
                9,
                "tenant",
                "expected a string, found null `~` (YAML would read it as null (no value))",
            ),
            "quote it: \"~\"",
        ),
        (
            with("tenant: acme", "tenant: null"),
            d(
                1,
                9,
                "tenant",
                "expected a string, found null `null` (YAML would read it as null (no value))",
            ),
            "quote it: \"null\"",
        ),
        (
            with("tenant: acme", "tenant:"),
            d(1, 7, "tenant", "expected a string, found an empty value"),
            "write a value, or remove the key",
        ),
        (
            with("tenant: acme", "tenant: 1e3"),
            d(
                1,
                9,
                "tenant",
                "expected a string, found float `1e3` (YAML would read it as 1000)",
            ),
            "quote it: \"1e3\"",
        ),
        (
            with("tenant: acme", "tenant: .inf"),
            d(
                1,
                9,
                "tenant",
                "expected a string, found float `.inf` (YAML would read it as infinity)",
            ),
            "quote it: \".inf\"",
        ),
        (
            with("tenant: acme", "tenant: 0x1F"),
            d(
                1,
                9,
                "tenant",
                "expected a string, found integer `0x1F` (YAML would read it as 31)",
            ),
            "quote it: \"0x1F\"",
        ),
        (
            with("tenant: acme", "tenant: 1_000"),
            d(
                1,
                9,
                "tenant",
                "expected a string, found integer `1_000` (YAML 1.1 would read it as 1000)",
            ),
            "quote it: \"1_000\"",
        ),
        (
            with("tenant: acme", "tenant: 1:20"),
            d(
                1,
                9,
                "tenant",
                "expected a string, found integer `1:20` (YAML 1.1 would read it as a base-60 number)",
            ),
            "quote it: \"1:20\"",
        ),
        (
            with("  base: main", "  base: 0755"),
            d(
                4,
                9,
                "repo.base",
                "expected a string, found integer `0755` (YAML 1.1 would read it as octal 493)",
            ),
            "quote it: \"0755\"",
        ),
        (
            with("  base: main", "  base: 1234567"),
            d(
                4,
                9,
                "repo.base",
                "expected a string, found integer `1234567` (YAML would read it as 1234567)",
            ),
            "quote it: \"1234567\"",
        ),
        (
            plus("schedule:\n  on_calendar: 2024-01-01\n"),
            d(
                14,
                16,
                "schedule.on_calendar",
                "expected a string, found date `2024-01-01` (YAML 1.1 would read it as a timestamp)",
            ),
            "quote it: \"2024-01-01\"",
        ),
        (
            with("[agent, --run]", "[agent, 1]"),
            d(
                9,
                20,
                "agent.command[1]",
                "expected a string, found integer `1` (YAML would read it as 1)",
            ),
            "quote it: \"1\"",
        ),
        (
            plus("egress:\n  allow: [127.1]\n"),
            d(
                14,
                11,
                "egress.allow[0]",
                "expected a string, found float `127.1` (YAML would read it as 127.1)",
            ),
            "quote it: \"127.1\"",
        ),
        (
            with(
                "  command: [agent, --run]",
                "  command: [agent]\n  timeout: 90",
            ),
            d(
                10,
                12,
                "agent.timeout",
                "expected a string, found integer `90` (YAML would read it as 90)",
            ),
            "write a duration with a unit, e.g. `90s`, `30m` or `1h30m`",
        ),
        (
            with(
                "  command: [agent, --run]",
                "  command: [agent]\n  resources: {memory: 512}",
            ),
            d(
                10,
                23,
                "agent.resources.memory",
                "expected a string, found integer `512` (YAML would read it as 512)",
            ),
            "write a size with a unit, e.g. `512M` or `2G`",
        ),
    ];
    for (text, want, hint) in cases {
        let e = err(&text);
        assert_eq!(e.diagnostics.len(), 1, "{e}");
        let got = &e.diagnostics[0];
        assert_eq!(
            (
                got.line.unwrap_or(0),
                got.column.unwrap_or(0),
                got.path.clone(),
                got.message.clone()
            ),
            want,
            "{text}"
        );
        assert_eq!(got.hint.as_deref(), Some(hint));
    }
    // Quoted forms are plain strings.
    let s = ok(&with("  base: main", "  base: \"0755\""));
    assert_eq!(s.repo.base, "0755");
    ok(&with("tenant: acme", "tenant: 'no'"));
    ok(&plus("schedule:\n  on_calendar: \"2024-01-01\"\n"));
}

#[test]
fn booleans_are_only_true_and_false() {
    for (value, message) in [
        ("yes", "expected `true` or `false`, found `yes`"),
        ("on", "expected `true` or `false`, found `on`"),
        ("True", "expected `true` or `false`, found `True`"),
        (
            "\"true\"",
            "expected `true` or `false`, found string \"true\"",
        ),
        ("1", "expected `true` or `false`, found integer `1`"),
    ] {
        assert_eq!(
            one(&plus(&format!("worktree_isolation: {value}\n"))),
            d(13, 21, "worktree_isolation", message),
            "{value}"
        );
    }
    assert!(ok(&plus("worktree_isolation: true\n")).legacy_worktree_isolation);
    assert!(!ok(&plus("worktree_isolation: false\n")).legacy_worktree_isolation);
}

#[test]
fn numbers_are_plain_decimals() {
    for (value, message) in [
        ("\"443\"", "expected an integer, found string \"443\""),
        ("0x1BB", "`0x1BB` is not written as a plain decimal number"),
        ("0443", "`0443` is not written as a plain decimal number"),
        ("4_43", "`4_43` is not written as a plain decimal number"),
        (
            "4.43e2",
            "`4.43e2` is not written as a plain decimal number",
        ),
    ] {
        assert_eq!(
            one(&plus(&format!("egress:\n  ports: [{value}]\n"))),
            d(14, 11, "egress.ports[0]", message),
            "{value}"
        );
    }
}

// --- newcomer trial 7, item 9: a key of the wrong type is not also "missing" ---

#[test]
fn a_string_command_is_one_diagnostic_not_also_missing() {
    let diags = all(&with("command: [agent, --run]", "command: \"agent --run\""));
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0].2, "agent.command", "{diags:?}");
    assert!(!diags[0].3.contains("missing"), "{diags:?}");
    // The positive control: an absent command is still reported as missing.
    let b = base();
    let absent = b.replacen("  command: [agent, --run]\n", "", 1);
    let diags = all(&absent);
    assert!(
        diags
            .iter()
            .any(|d| d.2 == "agent.command" && d.3.contains("missing required key")),
        "{diags:?}"
    );
}
