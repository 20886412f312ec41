//! `setup:` the project's setup files (issue 15, item 2): paths or globs, relative to the
//! repository, that no run may change. They are bound read-only in the agent's work tree
//! (a plain write gets EROFS) and a run whose commits change one is held at delivery unless
//! `delivery.allow_setup_changes: true`. `.cyclix/` is always a setup path.
//!
//! A pattern is matched by git itself: it becomes the pathspec `:(glob)PATTERN`
//! (gitglossary(7), "pathspec", magic `glob`: `*` and `?` stay within one path component,
//! `**/` matches any number of directories, `[...]` a character class), and like every
//! pathspec it also matches everything below a directory it names.

use crate::spec::Diagnostic;
use crate::spec::keys::{Key, Kind};
use crate::spec::located::Located;

/// The setup paths every spec has, whatever `setup:` says.
pub const ALWAYS: &[&str] = &[".cyclix/"];

/// The top-level key.
pub(crate) const KEY: Key = Key::optional(
    "setup",
    Kind::StrList,
    "setup files the agent may not change: paths or globs in the repository (`.cyclix/` always)",
);

/// Validates `setup:`; absent is empty.
pub(crate) fn validate(
    raw: Option<&Located<Vec<Located<String>>>>,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let Some(raw) = raw else {
        return Some(Vec::new());
    };
    let before = out.len();
    let mut list: Vec<String> = Vec::new();
    for p in &raw.value {
        match pattern(&p.value) {
            Ok(()) if !list.contains(&p.value) => list.push(p.value.clone()),
            Ok(()) => {}
            Err(e) => out.push(p.diag(e).hint(
                "write a path or glob relative to the repository, e.g. `Containerfile`, `ci/`, `**/package.json`",
            )),
        }
    }
    (out.len() == before).then_some(list)
}

/// One setup pattern: relative, `/`-separated, no `.`/`..`/empty components, nothing under
/// `.git`, no pathspec magic of its own (a leading `:`), no backslash, no control character.
pub(crate) fn pattern(s: &str) -> Result<(), String> {
    let body = s.strip_suffix('/').unwrap_or(s);
    if body.is_empty() {
        return Err(format!("`{s}` names no path"));
    }
    if s.starts_with('/') {
        return Err(format!("`{s}` is absolute"));
    }
    if s.starts_with(':') {
        return Err(format!(
            "`{s}` starts with `:` (git pathspec magic): cyclix adds its own"
        ));
    }
    if let Some(c) = s.chars().find(|c| *c == '\\' || c.is_control()) {
        return Err(format!("`{}` contains {c:?}", s.escape_debug()));
    }
    for comp in body.split('/') {
        if comp.is_empty() || comp == "." || comp == ".." {
            return Err(format!("`{s}` has an empty, `.` or `..` component"));
        }
        if comp.eq_ignore_ascii_case(".git") {
            return Err(format!(
                "`{s}` is inside `.git`, which is not part of a commit's tree"
            ));
        }
    }
    Ok(())
}

/// The git pathspecs of `patterns` (plus [`ALWAYS`]), for `git diff-tree -- PATHSPEC...`:
/// `:(glob)PATTERN`, a trailing `/` dropped (a pathspec naming a directory matches what is
/// below it). `icase` adds the `icase` magic (the delivery's check: a `.CYCLIX/` takes effect
/// on a case-insensitive checkout).
#[must_use]
pub fn pathspecs(patterns: &[String], icase: bool) -> Vec<String> {
    let magic = if icase { ":(glob,icase)" } else { ":(glob)" };
    ALWAYS
        .iter()
        .copied()
        .chain(patterns.iter().map(String::as_str))
        .map(|p| format!("{magic}{}", p.strip_suffix('/').unwrap_or(p)))
        .collect()
}

/// The git pathspec of one pattern (as [`pathspecs`] writes it, without [`ALWAYS`]).
#[must_use]
pub fn pathspec_of(pattern: &str) -> Vec<String> {
    vec![format!(
        ":(glob){}",
        pattern.strip_suffix('/').unwrap_or(pattern)
    )]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_relative_plain_and_outside_git() {
        for ok in [
            "Containerfile",
            "ci/",
            "**/package.json",
            "a/*.toml",
            "x[ab]",
        ] {
            assert_eq!(pattern(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "/",
            "/etc/passwd",
            "a//b",
            "./a",
            "a/../b",
            ":(top)x",
            ".git/hooks",
            "a/.GIT",
            "a\\b",
            "a\nb",
        ] {
            assert!(pattern(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pathspecs_carry_the_glob_magic_and_always_cyclix() {
        assert_eq!(
            pathspecs(&["ci/".into(), "**/*.lock".into()], false),
            [":(glob).cyclix", ":(glob)ci", ":(glob)**/*.lock"]
        );
        assert_eq!(pathspecs(&[], true), [":(glob,icase).cyclix"]);
    }
}
