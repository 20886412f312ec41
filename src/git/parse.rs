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
