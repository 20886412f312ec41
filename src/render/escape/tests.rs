//! `escape`'s unit tests.

use super::*;

fn hostile() -> Vec<String> {
    [
        "plain",
        "two words",
        "50%",
        "%h/.ssh",
        "%U",
        "$HOME",
        "${SSH_AUTH_SOCK}",
        "$$",
        ";",
        "a;b",
        "\\;",
        "q\"uote",
        "'single'",
        "back\\slash",
        "trailing\\",
        "\\x41",
        "tab\tx",
        "new\nline",
        "cr\rx",
        "bell\u{7}",
        "del\u{7f}",
        "c1\u{85}",
        "é ünï",
        "-dash",
        "+plus",
        "!bang",
        "@at",
        "|pipe",
        "",
        " ",
        "  lead",
        "&&",
        "`id`",
        "$(id)",
    ]
    .iter()
    .map(ToString::to_string)
    .collect()
}

#[test]
fn argv_round_trips_through_systemd_grammar() {
    let argv = hostile();
    let line = exec_line(&argv);
    assert!(
        !line.contains('\n'),
        "a newline would start a new directive"
    );
    assert_eq!(split_exec(&line).expect("parses"), argv);
}

#[test]
fn every_word_is_quoted_so_no_exec_prefix_applies() {
    for w in ["+x", "-x", "!x", "@x", "|x", ":x"] {
        assert!(exec_word(w).starts_with('"'), "{w}");
    }
    assert_eq!(exec_word(";"), "\\;");
    assert_eq!(exec_word(""), "\"\"");
}

#[test]
fn specifiers_and_variables_are_neutralised() {
    assert_eq!(exec_word("%h"), "\"%%h\"");
    assert_eq!(exec_word("$HOME"), "\"$$HOME\"");
    assert!(
        split_exec("\"%h\"").is_err(),
        "a live specifier must not parse as literal"
    );
    assert!(split_exec("$HOME").is_err());
    assert!(split_exec(";").is_err());
}

#[test]
fn quadlet_refuses_what_quadlet_mangles() {
    assert_eq!(quadlet_exec_word(""), Err(EscapeError::EmptyArgForQuadlet));
    assert_eq!(
        quadlet_exec_word(";"),
        Err(EscapeError::SemicolonForQuadlet)
    );
    assert_eq!(quadlet_exec_word("a;b").as_deref(), Ok("\"a;b\""));
}

#[test]
fn values_refuse_control_characters_and_escape_specifiers() {
    assert_eq!(value("50% done").as_deref(), Ok("50%% done"));
    assert_eq!(
        value("a\nExecStartPre=/bin/sh"),
        Err(EscapeError::ControlChar(10))
    );
    assert_eq!(value("x\u{85}"), Err(EscapeError::ControlChar(0x85)));
    assert_eq!(
        quoted_value("K=a \"b\" 5%").as_deref(),
        Ok("\"K=a \\\"b\\\" 5%%\"")
    );
}
