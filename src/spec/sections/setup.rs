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

/// Validates `setup:` by the one path rule ([`super::paths`], git `:(glob)` patterns);
/// absent is empty.
pub(crate) fn validate(
    raw: Option<&Located<Vec<Located<String>>>>,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    super::paths::list(
        raw,
        super::paths::Globs::Pathspec,
        "write a path or glob relative to the repository, e.g. `Containerfile`, `ci/`, `**/package.json`",
        out,
    )
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
    fn pathspecs_carry_the_glob_magic_and_always_cyclix() {
        assert_eq!(
            pathspecs(&["ci/".into(), "**/*.lock".into()], false),
            [":(glob).cyclix", ":(glob)ci", ":(glob)**/*.lock"]
        );
        assert_eq!(pathspecs(&[], true), [":(glob,icase).cyclix"]);
    }
}
