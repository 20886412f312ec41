//! Pure parsers of git's output: `worktree list --porcelain -z`, `log`, `branch --list`,
//! `for-each-ref`.

use std::path::PathBuf;

use super::{Commit, GitError, Result};

/// Parses `git worktree list --porcelain -z`: records of NUL-terminated `key value` lines,
/// records separated by an empty field. The first record is the main worktree and is skipped;
/// the result holds the linked worktrees, in git's order.
#[must_use]
pub fn parse_worktrees(porcelain_z: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut first = true;
    for field in porcelain_z.split('\0') {
        if let Some(path) = field.strip_prefix("worktree ") {
            if first {
                first = false;
            } else {
                out.push(PathBuf::from(path));
            }
        }
    }
    out
}

/// Parses `git log --format=%H%x1f%s` output (one commit per line, sha and subject split by
/// the unit separator U+001F).
///
/// # Errors
/// A line without the separator or with a sha that is not hex ([`GitError::Output`]).
pub fn parse_log(out: &str, action: &str) -> Result<Vec<Commit>> {
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (sha, subject) = line.split_once('\u{1f}').ok_or_else(|| GitError::Output {
                action: action.to_string(),
                detail: format!("no separator in log line {line:?}"),
            })?;
            if sha.len() < 40 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(GitError::Output {
                    action: action.to_string(),
                    detail: format!("not an object name: {sha:?}"),
                });
            }
            Ok(Commit {
                sha: sha.to_string(),
                subject: subject.to_string(),
            })
        })
        .collect()
}

/// Strips `refs/heads/` from each line of `for-each-ref --format=%(refname)` and keeps the
/// names starting with `prefix`.
#[must_use]
pub fn parse_branches(out: &str, prefix: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.strip_prefix("refs/heads/"))
        .filter(|b| b.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// Parses `for-each-ref --format=%(refname) %(objectname)` lines into `(refname, sha)`.
#[must_use]
pub fn parse_refs(out: &str) -> Vec<(String, String)> {
    out.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(r, s)| (r.to_string(), s.trim().to_string()))
        .collect()
}

/// Parses `git diff-tree -r -z` raw output (`:OLDMODE NEWMODE OLDSHA NEWSHA STATUS\0PATH\0`
/// per entry, git-diff-tree(1) "RAW OUTPUT FORMAT", no renames): each path with its new mode
/// (octal; 0 for a deleted path). `None` when the output does not have that shape.
#[must_use]
pub fn raw_diff_new_modes(raw_z: &str) -> Option<Vec<(u32, String)>> {
    let mut out = Vec::new();
    let mut fields = raw_z.split('\0');
    while let Some(head) = fields.next() {
        if head.is_empty() {
            continue;
        }
        let meta = head.strip_prefix(':')?;
        let new_mode = meta.split(' ').nth(1)?;
        let mode = u32::from_str_radix(new_mode, 8).ok()?;
        let path = fields.next().filter(|p| !p.is_empty())?;
        out.push((mode, path.to_string()));
    }
    Some(out)
}

#[cfg(test)]
mod raw_tests {
    use super::raw_diff_new_modes;

    #[test]
    fn raw_diff_gives_each_path_its_new_mode() {
        let z = ":000000 100644 0000 4bcf A\0.cyclix/d\0:000000 120000 0000 cbef A\0link\0";
        assert_eq!(
            raw_diff_new_modes(z),
            Some(vec![
                (0o100_644, ".cyclix/d".into()),
                (0o120_000, "link".into())
            ])
        );
        assert_eq!(raw_diff_new_modes(""), Some(vec![]));
        assert_eq!(raw_diff_new_modes("garbage\0x\0"), None);
        assert_eq!(raw_diff_new_modes(":000000 100644 0 1 A\0"), None);
    }
}
