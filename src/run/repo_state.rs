//! The user's repository is unchanged except for what cyclix delivered, and the record proves
//! it (issue 11, item 3).
//!
//! Before the run and after the import cyclix takes a [`RepoState`] of the user's repository:
//! every ref with its value (`git for-each-ref`: loose and packed alike), `HEAD` (the
//! symbolic ref it names, or a detached commit), the content hash of `config`, `packed-refs`
//! and every file under `hooks/` and `info/`, and the linked worktree list. [`changes`]
//! compares two: what cyclix created (the run branch, and the remote-tracking ref a push
//! updates) is expected; anything else is reported as a change made on the host while the
//! run was on. Since no container can write there any more, a change is never a reason to
//! fail the run (a commit the user makes to `main` mid-run is theirs).
//!
//! In tiers `direct` and `worktree` the agent runs as the user on the host, so this cannot
//! hold (`cyclix tier describe` says so).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

/// One snapshot of a repository.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RepoState {
    /// `(refname, object name)` of every ref, sorted.
    pub refs: Vec<(String, String)>,
    /// What `HEAD` holds: `ref: refs/heads/main` or a commit's object name.
    pub head: String,
    /// `(path relative to the git dir, sha256 hex)` of `config`, `packed-refs`, `hooks/**`,
    /// `info/**`, sorted; a missing file is absent.
    pub files: Vec<(String, String)>,
    /// The linked worktrees' paths, sorted.
    pub worktrees: Vec<PathBuf>,
}

/// Most files hashed under `hooks/` and `info/` together (a bound on a hostile or huge tree).
const MAX_FILES: usize = 2000;

fn hash_file(p: &Path) -> Option<String> {
    let bytes = std::fs::read(p).ok()?;
    Some(format!("{:x}", sha2::Sha256::digest(&bytes)))
}

/// The content hashes of `config`, `packed-refs`, `hooks/**` and `info/**` in `git_dir`
/// (symlinks are not followed: a link is hashed as its target path).
#[must_use]
pub fn hash_files(git_dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for f in ["config", "packed-refs"] {
        if let Some(h) = hash_file(&git_dir.join(f)) {
            out.push((f.to_string(), h));
        }
    }
    let mut stack: Vec<PathBuf> = vec![git_dir.join("hooks"), git_dir.join("info")];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.filter_map(Result::ok) {
            if out.len() >= MAX_FILES {
                break;
            }
            let p = e.path();
            let rel = p
                .strip_prefix(git_dir)
                .map_or_else(|_| p.display().to_string(), |r| r.display().to_string());
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_symlink() => {
                    let target = std::fs::read_link(&p).unwrap_or_default();
                    out.push((rel, format!("symlink:{}", target.display())));
                }
                Ok(_) => out.push((rel, hash_file(&p).unwrap_or_else(|| "unreadable".into()))),
                Err(_) => {}
            }
        }
    }
    out.sort();
    out
}

/// What changed between `before` and `after`, other than the refs in `expected` (created or
/// moved by cyclix itself: the run branch, a pushed remote-tracking ref), each as one line
/// for the record.
#[must_use]
pub fn changes(before: &RepoState, after: &RepoState, expected: &[String]) -> Vec<String> {
    let short = |s: &str| s.get(..12).unwrap_or(s).to_string();
    let find =
        |v: &[(String, String)], k: &str| v.iter().find(|(n, _)| n == k).map(|(_, s)| s.clone());
    let mut out = Vec::new();
    for (r, sha) in &after.refs {
        if expected.contains(r) {
            continue;
        }
        match find(&before.refs, r) {
            None => out.push(format!("ref {r} created at {}", short(sha))),
            Some(old) if &old != sha => {
                out.push(format!(
                    "ref {r} moved from {} to {}",
                    short(&old),
                    short(sha)
                ));
            }
            Some(_) => {}
        }
    }
    for (r, sha) in &before.refs {
        if !expected.contains(r) && find(&after.refs, r).is_none() {
            out.push(format!("ref {r} deleted (was {})", short(sha)));
        }
    }
    if before.head != after.head {
        out.push(format!(
            "HEAD changed from `{}` to `{}`",
            before.head, after.head
        ));
    }
    for (f, h) in &after.files {
        match find(&before.files, f) {
            None => out.push(format!("{f} created")),
            Some(old) if &old != h => out.push(format!("{f} changed")),
            Some(_) => {}
        }
    }
    for (f, _) in &before.files {
        if find(&after.files, f).is_none() {
            out.push(format!("{f} removed"));
        }
    }
    for w in &after.worktrees {
        if !before.worktrees.contains(w) {
            out.push(format!("worktree {} added", w.display()));
        }
    }
    for w in &before.worktrees {
        if !after.worktrees.contains(w) {
            out.push(format!("worktree {} removed", w.display()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(refs: &[(&str, &str)], head: &str, files: &[(&str, &str)]) -> RepoState {
        RepoState {
            refs: refs
                .iter()
                .map(|(a, b)| ((*a).into(), (*b).into()))
                .collect(),
            head: head.into(),
            files: files
                .iter()
                .map(|(a, b)| ((*a).into(), (*b).into()))
                .collect(),
            worktrees: Vec::new(),
        }
    }

    #[test]
    fn only_what_cyclix_created_is_expected_and_every_other_change_is_named() {
        let before = st(
            &[("refs/heads/main", "aaa"), ("refs/heads/old", "bbb")],
            "ref: refs/heads/main",
            &[("config", "1"), ("hooks/pre-commit", "2")],
        );
        let mut after = before.clone();
        after
            .refs
            .push(("refs/heads/cyclix/t/r".into(), "ccc".into()));
        let own = vec!["refs/heads/cyclix/t/r".to_string()];
        assert_eq!(changes(&before, &after, &own), Vec::<String>::new());
        after.refs[0].1 = "ddd".into();
        after.refs.remove(1);
        after.head = "ref: refs/heads/other".into();
        after.files[0].1 = "9".into();
        after.files.push(("info/attributes".into(), "3".into()));
        after.worktrees.push("/tmp/w".into());
        let c = changes(&before, &after, &own);
        assert_eq!(c.len(), 6, "{c:?}");
        assert!(
            c.iter().any(|l| l.contains("refs/heads/main moved")),
            "{c:?}"
        );
        assert!(
            c.iter().any(|l| l.contains("refs/heads/old deleted")),
            "{c:?}"
        );
        assert!(c.iter().any(|l| l.starts_with("HEAD changed")), "{c:?}");
        assert!(c.iter().any(|l| l == "config changed"), "{c:?}");
        assert!(c.iter().any(|l| l == "info/attributes created"), "{c:?}");
        assert!(
            c.iter().any(|l| l.starts_with("worktree /tmp/w added")),
            "{c:?}"
        );
    }

    #[test]
    fn files_are_hashed_recursively_and_symlinks_not_followed() {
        let tmp = tempfile::tempdir().expect("tmp");
        let g = tmp.path();
        std::fs::create_dir_all(g.join("hooks/sub")).expect("dirs");
        std::fs::write(g.join("config"), "[core]\n").expect("config");
        std::fs::write(g.join("hooks/sub/x"), "x").expect("x");
        std::os::unix::fs::symlink("/etc/passwd", g.join("hooks/l")).expect("link");
        let h = hash_files(g);
        let names: Vec<&str> = h.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["config", "hooks/l", "hooks/sub/x"]);
        assert_eq!(h[1].1, "symlink:/etc/passwd");
    }
}
