//! The document as a whole: the base spec and fixtures, the error format, hostile files
//! (size, aliases, depth, tags, merge keys), encoding, and every problem in one pass.

use super::*;

#[test]
fn base_spec_is_valid_and_defaults_apply() {
    let s = ok(&base());
    assert_eq!(s.tenant, "acme");
    assert_eq!(s.agent.timeout_s, 1800);
    assert_eq!(s.gate.timeout_s, 600);
    assert_eq!(s.egress.ports, vec![443]);
    assert!(s.egress.allow.is_empty());
    assert_eq!(s.tier, crate::tier::Tier::Container);
    assert!(s.schedule.is_none());
    assert!(matches!(s.agent.image, Image::Pinned { .. }));
}

#[test]
fn gate_quick_is_an_optional_argv_validated_like_command() {
    let s = ok(include_str!("../../../tests/fixtures/spec/gate-quick.yaml"));
    assert_eq!(s.gate.command, ["make", "test"]);
    assert_eq!(
        s.gate.quick_argv(),
        [
            "sh",
            "-c",
            "exec python3 -m pytest -q -x --junitxml=\"$CYCLIX_RESULTS\""
        ]
    );
    // Without the key the quick suite is the gate's command.
    let s = ok(&base());
    assert_eq!(
        (s.gate.quick.as_deref(), s.gate.quick_argv()),
        (None, &["make".to_string(), "test".to_string()][..])
    );
    assert_eq!(
        one(&plus("  quick: []\n")),
        d(13, 10, "gate.quick", "`quick` is empty")
    );
    let (line, _, path, msg) = one(&plus("  quick: \"make quick\"\n"));
    assert_eq!((line, path.as_str()), (13, "gate.quick"));
    assert!(msg.starts_with("expected a list"), "{msg}");
    let (_, _, path, msg) = one(&plus("  quick: [-x, tests]\n"));
    assert_eq!(path, "gate.quick[0]");
    assert!(msg.contains("starts with `-`"), "{msg}");
    let (_, _, path, msg) = one(&plus("  quick: [\"pytest -x\"]\n"));
    assert_eq!(path, "gate.quick[0]");
    assert!(msg.contains("whitespace"), "{msg}");
    let e = err(&plus("  quik: [make, quick]\n"));
    assert!(e.to_string().contains("did you mean `quick`?"), "{e}");
    let e = err(&plus("  quick: [make, 7]\n"));
    assert!(e.to_string().contains("gate.quick[1]"), "{e}");
}

#[test]
fn fixtures_match_their_intent() {
    let good = include_str!("../../../tests/fixtures/spec/good.yaml");
    let s = ok(good);
    assert_eq!(s.egress.ports, vec![80, 443]);
    assert_eq!(
        s.egress.allow.len(),
        2,
        "pypi.org listed twice must be deduped"
    );
    let db = &s.services[0];
    assert_eq!(
        (
            db.port,
            db.data.as_deref(),
            db.health.as_ref().map(crate::spec::Health::budget_s)
        ),
        (
            Some(5432),
            Some("/var/lib/postgresql/data"),
            Some(5 + 10 * (2 + 3))
        )
    );
    ok(include_str!("../../../tests/fixtures/spec/minimal.yaml"));
    for bad in [
        include_str!("../../../tests/fixtures/spec/bad-types.yaml"),
        include_str!("../../../tests/fixtures/spec/bad-keys.yaml"),
        include_str!("../../../tests/fixtures/spec/bad-semantics.yaml"),
        include_str!("../../../tests/fixtures/spec/alias-bomb.yaml"),
        include_str!("../../../tests/fixtures/spec/crlf.yaml"),
        include_str!("../../../tests/fixtures/spec/tabs.yaml"),
        include_str!("../../../tests/fixtures/spec/bidi.yaml"),
        include_str!("../../../tests/fixtures/spec/tag.yaml"),
    ] {
        err(bad);
    }
}

#[test]
fn display_format_is_file_line_col_path_message_then_fix() {
    let e = err(&with("tenant: acme", "tenant: no"));
    assert_eq!(
        e.to_string(),
        "t.yaml:1:9: tenant: expected a string, found boolean `no` (YAML 1.1 would read it as false)\n  fix: quote it: \"no\""
    );
    let doc = SpecError {
        file: "f".into(),
        diagnostics: vec![
            Diagnostic {
                line: None,
                column: None,
                path: String::new(),
                message: "m1".into(),
                hint: None,
            },
            Diagnostic::at(2, 3, "a.b", "m2"),
        ],
    };
    assert_eq!(doc.to_string(), "f: m1\nf:2:3: a.b: m2");
}

// --- §4 "Huge or hostile file" ---

#[test]
fn oversized_text_is_rejected_before_parsing() {
    let big = format!(
        "{}# {}\n",
        base(),
        "x".repeat(usize::try_from(MAX_SPEC_BYTES).unwrap_or(0))
    );
    let e = err(&big);
    assert_eq!(e.diagnostics.len(), 1);
    assert_eq!(e.diagnostics[0].line, None);
    assert!(
        e.diagnostics[0].message.starts_with("file is ")
            && e.diagnostics[0]
                .message
                .ends_with("larger than the limit of 262144 bytes"),
        "{e}"
    );
}

#[test]
fn billion_laughs_fails_fast_with_a_clear_error() {
    // Fast by construction: the loader stops at its replay budget (the message names it),
    // whatever the machine's load; no clock is read here.
    let text = include_str!("../../../tests/fixtures/spec/alias-bomb.yaml");
    assert_eq!(
        one(text),
        d(
            5,
            8,
            "e[0]",
            "aliases expand to too many nodes (billion-laughs style input; limit 10000 replayed nodes)"
        )
    );
}

#[test]
fn too_many_aliases_anchors_and_deep_nesting_are_rejected() {
    let aliases = format!("{}x: &a v\ny: [{}]\n", base(), vec!["*a"; 101].join(", "));
    assert_eq!(one(&aliases).3, "more than 100 aliases");
    let anchors = (0..101).fold(String::new(), |mut acc, i| {
        let _ = writeln!(acc, "k{i}: &a{i} v");
        acc
    });
    assert_eq!(one(&anchors).3, "more than 100 anchors");
    let deep = format!("tenant: {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
    let (line, _, path, message) = one(&deep);
    assert_eq!(
        (line, path.as_str(), message.as_str()),
        (1, "tenant", "nesting deeper than 32 levels")
    );
    let two_docs = format!("{}---\ntenant: b\n", base());
    assert_eq!(
        one(&two_docs),
        d(13, 1, "", "more than one YAML document (`---`)")
    );
}

#[test]
fn yaml_tags_are_rejected() {
    assert_eq!(
        one(&with(
            "tenant: acme",
            "tenant: !!python/object:os.system acme"
        )),
        d(
            1,
            9,
            "tenant",
            "YAML tags are not allowed (`!!python/object:os.system`)"
        )
    );
    assert_eq!(
        one(&with("tenant: acme", "tenant: !!str acme")),
        d(1, 9, "tenant", "YAML tags are not allowed (`!!str`)")
    );
    assert_eq!(
        one(&with("  base: main", "  base: !custom main")),
        d(4, 9, "repo.base", "YAML tags are not allowed (`!custom`)")
    );
}

#[test]
fn merge_keys_are_rejected() {
    let text = plus("defaults: &d {timeout: 5m}\nextra:\n  <<: *d\n");
    assert_eq!(
        one(&text),
        d(15, 3, "extra.<<", "merge keys (`<<`) are not allowed")
    );
}

// --- §4 "Encoding" ---

#[test]
fn encoding_problems_are_reported_with_line_and_column() {
    let cases = [
        (
            format!("\u{FEFF}{}", base()),
            d(1, 1, "", "the file starts with a byte-order mark (U+FEFF)"),
        ),
        (
            base().replace('\n', "\r\n"),
            d(
                1,
                13,
                "",
                "carriage return (CRLF line ending) (11 more in the file)",
            ),
        ),
        (
            with("  base: main", "\tbase: main"),
            d(4, 1, "", "tab used for indentation"),
        ),
        (
            with("  base: main", "  base: main\t# tab"),
            d(4, 13, "", "tab character"),
        ),
        (
            with("tenant: acme", "tenant: \"ac\u{202E}me\""),
            d(
                1,
                12,
                "",
                "invisible or bidirectional formatting character U+202E (right-to-left override)",
            ),
        ),
        (
            with("tenant: acme", "tenant: ac\u{200B}me"),
            d(
                1,
                11,
                "",
                "invisible or bidirectional formatting character U+200B (zero-width space)",
            ),
        ),
        (
            with("tenant: acme", "tenant: acme # \u{2066}x"),
            d(
                1,
                16,
                "",
                "invisible or bidirectional formatting character U+2066 (left-to-right isolate)",
            ),
        ),
        (
            with("tenant: acme", "tenant: a\u{1b}cme"),
            d(1, 10, "", "control character U+001B (escape)"),
        ),
        (
            with("tenant: acme", "tenant: a\u{0085}cme"),
            d(1, 10, "", "control character U+0085"),
        ),
        (
            with("tenant: acme", "tenant: a\u{7f}cme"),
            d(1, 10, "", "control character U+007F (delete)"),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(one(&text), want, "{text:?}");
    }
}

#[test]
fn truncated_and_mutated_input_never_panics() {
    let good = include_str!("../../../tests/fixtures/spec/good.yaml");
    let cuts: Vec<usize> = good.char_indices().map(|(i, _)| i).collect();
    for &cut in cuts.iter().step_by(3) {
        let _ = parse(&good[..cut], &ctx());
    }
    let inserts = [
        "", ":", "[", "{", "&a ", "*a", "!", "é", "\"", "- ", "#", "~", "..", "\\",
    ];
    for &at in cuts.iter().step_by(23) {
        for ins in inserts {
            let mut text = good[..at].to_owned();
            text.push_str(ins);
            text.push_str(good[at..].get(1..).unwrap_or_default());
            let _ = parse(&text, &ctx());
        }
    }
}

#[test]
fn all_problems_are_reported_in_one_pass_in_file_order() {
    let text = include_str!("../../../tests/fixtures/spec/bad-semantics.yaml");
    let e = err(text);
    assert!(e.diagnostics.len() >= 30, "{e}");
    let positions: Vec<(usize, usize)> = e
        .diagnostics
        .iter()
        .map(|x| (x.line.unwrap_or(0), x.column.unwrap_or(0)))
        .collect();
    let mut sorted = positions.clone();
    sorted.sort_unstable();
    assert_eq!(positions, sorted);
    let paths: Vec<&str> = e.diagnostics.iter().map(|x| x.path.as_str()).collect();
    for p in [
        "tenant",
        "repo.path",
        "repo.base",
        "agent.image",
        "agent.command[0]",
        "agent.env[0]",
        "egress.allow[12]",
        "egress.ports[1]",
        "mounts[2].target",
        "schedule.on_calendar",
        "schedule.randomized_delay",
    ] {
        assert!(paths.contains(&p), "{p} missing from\n{e}");
    }
}
