//! One rule for the paths a spec names inside the repository: `setup:`, `gate.protected` and
//! `delivery.allow_paths`/`hold_paths`. Each is relative and `/`-separated, with no `.`, `..`
//! or empty component, nothing under `.git` (in any case: git keeps no `.git` entry in a
//! commit's tree, so such a path would match nothing and say something false), no leading
//! `:` (git's pathspec magic: cyclix adds its own), no backslash and no control character.
//! What differs is the pattern language ([`Globs`]): setup and protected paths are git
//! `:(glob)` pathspecs, the delivery's lists take one leading `**/` only.

use crate::spec::Diagnostic;
use crate::spec::located::Located;

/// Which glob characters a list takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Globs {
    /// git's `:(glob)` pathspec magic: `*`, `?`, `[...]`, `**/` (setup, protected).
    Pathspec,
    /// A plain path, `dir/`, or a leading `**/` for a name at any depth (delivery).
    LeadingOnly,
}

/// Checks one path pattern under `globs`; the error says what is wrong with `s`.
pub(crate) fn check(s: &str, globs: Globs) -> Result<(), String> {
    let body = s.strip_suffix('/').unwrap_or(s);
    let body = match globs {
        Globs::Pathspec => body,
        Globs::LeadingOnly => body.strip_prefix("**/").unwrap_or(body),
    };
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
    if globs == Globs::LeadingOnly {
        if let Some(c) = body.chars().find(|c| matches!(c, '*' | '?' | '[')) {
            return Err(format!(
                "`{s}` contains `{c}`: only a leading `**/` is a pattern"
            ));
        }
        // The delivery matches `**/NAME` against one path component at a time: a `/` after
        // the `**/` would match nothing, and a hold that holds nothing fails open.
        if s.starts_with("**/") && body.contains('/') {
            return Err(format!(
                "`{s}`: after a leading `**/` comes one name (a file or directory at any depth), not a path"
            ));
        }
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

/// Validates a list of path patterns under `globs`, each error located at its entry with
/// `hint`; a repeated entry is kept once. `None` when any entry was refused (the errors are
/// in `out`); an absent list is empty.
pub(crate) fn list(
    raw: Option<&Located<Vec<Located<String>>>>,
    globs: Globs,
    hint: &str,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let Some(raw) = raw else {
        return Some(Vec::new());
    };
    let before = out.len();
    let mut list: Vec<String> = Vec::new();
    for p in &raw.value {
        match check(&p.value, globs) {
            Ok(()) if !list.contains(&p.value) => list.push(p.value.clone()),
            Ok(()) => {}
            Err(e) => out.push(p.diag(e).hint(hint)),
        }
    }
    (out.len() == before).then_some(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_with_the_pattern_language_as_the_only_difference() {
        for ok in [
            "Containerfile",
            "ci/",
            "**/package.json",
            ".github/workflows/",
        ] {
            assert_eq!(check(ok, Globs::Pathspec), Ok(()), "{ok}");
            assert_eq!(check(ok, Globs::LeadingOnly), Ok(()), "{ok}");
        }
        for glob in ["a/*.toml", "x[ab]", "t?st.py", "a/**/b"] {
            assert_eq!(check(glob, Globs::Pathspec), Ok(()), "{glob}");
            assert!(check(glob, Globs::LeadingOnly).is_err(), "{glob}");
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
            "**/.git/config",
            "a\\b",
            "a\nb",
            "a\u{85}b",
        ] {
            assert!(check(bad, Globs::Pathspec).is_err(), "{bad:?}");
            assert!(check(bad, Globs::LeadingOnly).is_err(), "{bad:?}");
        }
        assert!(
            check("**/", Globs::LeadingOnly).is_err(),
            "a leading `**/` names nothing alone"
        );
    }
}
