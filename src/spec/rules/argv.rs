//! Command lines (`command`, `quick`, `health.command`): argv lists, never shell strings.

use crate::spec::Diagnostic;
use crate::spec::keys::{Key, Kind};
use crate::spec::located::Located;

/// `command` of a container that must run something (`agent`, `gate`).
pub(crate) const COMMAND: Key = Key::required(
    "command",
    Kind::StrList,
    "the program to run and its arguments (a list, never a shell string)",
    Some("`command: [PROGRAM, ARG, ...]`"),
);

/// Validates an argv list. `required`: the list must be present and non-empty.
pub(crate) fn argv(
    list: Option<&Located<Vec<Located<String>>>>,
    required: bool,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let Some(list) = list else {
        // A missing required `command` is reported by the decoder.
        return if required { None } else { Some(Vec::new()) };
    };
    if list.value.is_empty() {
        if required {
            out.push(
                list.diag("`command` is empty")
                    .hint("give the argv to run, e.g. [python3, -m, pytest, -q]"),
            );
            return None;
        }
        return Some(Vec::new());
    }
    let first = &list.value[0];
    let word = first.value.as_str();
    if word.is_empty() {
        out.push(first.diag("the program name (first word) is empty"));
        return None;
    }
    if word.starts_with(['+', '!', '-', '@', '|', ';', '&']) {
        out.push(
            first
                .diag(format!(
                    "the program name `{word}` starts with `{}`",
                    &word[..1]
                ))
                .hint(
                    "the first word must be the program to run, e.g. `python3` or `/usr/bin/make`",
                ),
        );
        return None;
    }
    if word.chars().any(char::is_whitespace) {
        out.push(
            first
                .diag(format!("the program name `{word}` contains whitespace"))
                .hint("`command` is an argv list, not a shell string: write [python3, -m, pytest] instead of [\"python3 -m pytest\"]"),
        );
        return None;
    }
    Some(list.value.iter().map(|a| a.value.clone()).collect())
}
