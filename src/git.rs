//! The only place that runs git: worktrees, refs and commits of a tenant's repository, and the
//! one-commit repository of the embedded demo project.
//!
//! Every call goes through [`crate::process::run`] with a deadline ([`GIT_QUERY_DEADLINE`] or
//! [`GIT_WORKTREE_DEADLINE`]) and starts with the same safety options ([`SAFE_CONFIG`]):
//! - `-c core.hooksPath=/dev/null`: git looks for hooks under `/dev/null/`, where nothing can
//!   exist, so no hook runs. An agent that planted `.git/hooks/post-checkout` (field report B27)
//!   must never get code execution through cyclix's own `worktree add`, `commit` or `branch`.
//! - `-c core.fsmonitor=false`: `core.fsmonitor` may name a program that git runs on index
//!   refreshes; the same threat as a hook, so it is off for cyclix's calls.
//!
//! Revisions are passed after `--end-of-options` where git accepts it, so a ref named like an
//! option (`--output=…`) stays a ref. Branch names starting with `-` are refused.
//!
//! This module does not decide anything: it returns facts (commits, worktrees, branches, an
//! operation in progress) and the orchestrator decides.
//!
//! Files: this one ([`Git`], its errors, the runners, the demo repository), `git/parse.rs` (pure
//! parsers), `git/refs.rs` (branches, refs, commits), `git/worktree.rs`, `git/delivery.rs` (the
//! remote side of a run's branch), next to `bundle.rs`, `hardened.rs` and `private.rs`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::process::{self, ProcessError};

pub use parse::{parse_branches, parse_log, parse_refs, parse_worktrees};

pub mod bundle;
mod delivery;
pub mod gate_tree;
pub mod hardened;
mod objects;
mod parse;
pub mod private;
mod refs;
pub mod seed;
mod worktree;

/// Deadline of a git query or a ref update (rev-parse, log, for-each-ref, branch): 30 s.
pub const GIT_QUERY_DEADLINE: Duration = Duration::from_secs(30);

/// Deadline of a call that writes a working tree (worktree add/remove, init + commit): 300 s,
/// enough to check out a large repository on a slow disk.
pub const GIT_WORKTREE_DEADLINE: Duration = Duration::from_secs(300);

/// Options given to every git call cyclix makes (see the module doc).
pub const SAFE_CONFIG: [&str; 4] = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
];

/// The identity of the demo repository's commit, so it does not depend on the user's git config.
const IDENTITY: [&str; 6] = [
    "-c",
    "user.name=cyclix",
    "-c",
    "user.email=cyclix@localhost",
    "-c",
    "commit.gpgsign=false",
];

const HINT: &str = " (is git installed and on $PATH? `cyclix check` tells)";

/// Files in a git dir that mean an operation is half done, with what they mean.
/// Source: git's `wt-status.c` (`wt_status_get_state`).
const IN_PROGRESS: [(&str, &str); 5] = [
    ("MERGE_HEAD", "a merge"),
    ("rebase-merge", "a rebase"),
    ("rebase-apply", "a rebase or `git am`"),
    ("CHERRY_PICK_HEAD", "a cherry-pick"),
    ("REVERT_HEAD", "a revert"),
];

/// Why a git operation failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The revision does not name a commit in the repository.
    #[error(
        "ref `{rev}` does not exist in {repo} (or is not a commit): set `repo.base` in the spec to \
         an existing branch, tag or commit (`git -C {repo} branch --list` shows the branches)",
        repo = .repo.display()
    )]
    NoSuchRef {
        /// The repository.
        repo: PathBuf,
        /// The revision asked for.
        rev: String,
    },
    /// `worktree add -b BRANCH` would clobber an existing branch.
    #[error(
        "creating branch `{branch}` in {repo}: the branch already exists; delete it with \
         `git -C {repo} branch -D {branch}` if it is a leftover, or keep it and use another run id",
        repo = .repo.display()
    )]
    BranchExists {
        /// The repository.
        repo: PathBuf,
        /// The branch.
        branch: String,
    },
    /// The worktree path is already taken.
    #[error(
        "creating worktree {path}: the path already exists; remove it if it is a leftover \
         (`git worktree list` shows registered worktrees)",
        path = .path.display()
    )]
    PathExists {
        /// The path.
        path: PathBuf,
    },
    /// A branch name git would read as an option.
    #[error("branch name `{0}` starts with `-`: use a name that starts with a letter or digit")]
    BadBranchName(String),
    /// git itself failed, timed out or could not be started.
    #[error("{action}: {source}")]
    Command {
        /// What cyclix was doing, naming the object ("creating worktree /x from abc").
        action: String,
        /// The process failure (argv, status, stderr).
        #[source]
        source: ProcessError,
    },
    /// git's output did not have the documented shape.
    #[error("{action}: unexpected output from git: {detail}")]
    Output {
        /// What cyclix was doing.
        action: String,
        /// What was wrong.
        detail: String,
    },
    /// A file operation next to git failed.
    #[error("{action}: {source}")]
    Io {
        /// What cyclix was doing, naming the path.
        action: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Result of this module.
pub type Result<T> = std::result::Result<T, GitError>;

/// One commit of [`Git::commits`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Commit {
    /// Full object name (40 hex digits for SHA-1 repositories, 64 for SHA-256).
    pub sha: String,
    /// First line of the message.
    pub subject: String,
}

/// A git repository (its main working tree, or any path inside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Git {
    repo: PathBuf,
}

fn check_branch(name: &str) -> Result<()> {
    if name.starts_with('-') {
        Err(GitError::BadBranchName(name.to_string()))
    } else {
        Ok(())
    }
}

/// Either of [`process::run_status`] (any exit status is `Ok`) or [`process::run`]
/// (a non-zero exit is an error).
type Runner = fn(
    &str,
    &[&str],
    Option<&[u8]>,
    Duration,
    &str,
) -> std::result::Result<process::Output, process::ProcessError>;

/// Runs `git -C dir SAFE_CONFIG args…` through `runner`, naming `action` in the error.
fn git_via(
    runner: Runner,
    dir: &Path,
    args: &[&str],
    deadline: Duration,
    action: impl Fn() -> String,
) -> Result<process::Output> {
    let dir_s = dir.to_string_lossy();
    let full = [&["-C", &*dir_s], &SAFE_CONFIG[..], args].concat();
    runner("git", &full, None, deadline, HINT).map_err(|source| GitError::Command {
        action: action(),
        source,
    })
}

/// Runs `git -C dir SAFE_CONFIG args…`; `Ok(output)` whatever the exit status.
fn git_status(
    dir: &Path,
    args: &[&str],
    deadline: Duration,
    action: impl Fn() -> String,
) -> Result<process::Output> {
    git_via(process::run_status, dir, args, deadline, action)
}

/// Runs `git -C dir SAFE_CONFIG args…`; a non-zero exit is an error.
fn git(
    dir: &Path,
    args: &[&str],
    deadline: Duration,
    action: impl Fn() -> String,
) -> Result<process::Output> {
    git_via(process::run, dir, args, deadline, action)
}

fn same_path(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    a == b || canon(a) == canon(b)
}

impl Git {
    /// A handle on the repository whose working tree (or any directory inside it) is `repo`.
    /// Nothing is checked until the first call.
    #[must_use]
    pub fn new(repo: impl Into<PathBuf>) -> Self {
        Self { repo: repo.into() }
    }

    /// The path given to [`Git::new`].
    #[must_use]
    pub fn repo(&self) -> &Path {
        &self.repo
    }

    /// The full object name of the commit `rev` names (`git rev-parse --verify rev^{commit}`).
    ///
    /// # Errors
    /// [`GitError::NoSuchRef`] when `rev` names no commit (the fix names `repo.base`);
    /// [`GitError::Command`] when git fails otherwise.
    pub fn rev_parse_commit(&self, rev: &str) -> Result<String> {
        let peeled = format!("{rev}^{{commit}}");
        let action = || format!("resolving `{rev}` in {}", self.repo.display());
        let out = git_status(
            &self.repo,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &peeled,
            ],
            GIT_QUERY_DEADLINE,
            action,
        )?;
        match out.status.code() {
            Some(0) => {
                let sha = out.stdout.trim();
                if sha.is_empty() {
                    Err(GitError::Output {
                        action: action(),
                        detail: "empty object name".into(),
                    })
                } else {
                    Ok(sha.to_string())
                }
            }
            // --verify --quiet: exit 1 and no output for a missing ref.
            Some(1) if out.stderr.trim().is_empty() => Err(GitError::NoSuchRef {
                repo: self.repo.clone(),
                rev: rev.to_string(),
            }),
            _ => Err(GitError::Command {
                action: action(),
                source: ProcessError::Failed {
                    argv: format!("git -C {} rev-parse --verify {peeled}", self.repo.display()),
                    status: out.status,
                    stderr: out.stderr.trim().to_string(),
                    stdout: out.stdout,
                },
            }),
        }
    }

    /// The absolute path of the repository's common git dir, shared by all worktrees
    /// (`git rev-parse --path-format=absolute --git-common-dir`, git ≥ 2.31).
    ///
    /// # Errors
    /// [`GitError::Command`] (not a repository), [`GitError::Output`].
    pub fn common_dir(&self) -> Result<PathBuf> {
        let action = || format!("finding the git dir of {}", self.repo.display());
        let out = git(
            &self.repo,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
            GIT_QUERY_DEADLINE,
            action,
        )?;
        let p = PathBuf::from(out.stdout.trim_end_matches('\n'));
        if p.is_absolute() {
            Ok(p)
        } else {
            Ok(self.repo.join(p))
        }
    }

    /// Creates a new repository at `path` (which must be absent or an empty directory) with
    /// branch `main`, writes `files` (relative path, contents) and makes one commit with
    /// `message` as author and committer `cyclix <cyclix@localhost>`, independent of the user's
    /// git config. Used for the embedded demo project.
    ///
    /// # Errors
    /// [`GitError::Io`] (non-empty target, a file path that is absolute or contains `..`, a
    /// write failure), [`GitError::Command`].
    pub fn init_repo(path: &Path, files: &[(&str, &str)], message: &str) -> Result<Self> {
        let io = |action: String| move |source| GitError::Io { action, source };
        if path.exists() {
            let mut entries =
                std::fs::read_dir(path).map_err(io(format!("reading {}", path.display())))?;
            if entries.next().is_some() {
                return Err(GitError::Io {
                    action: format!(
                        "creating a repository in {}: the directory is not empty; choose a new \
                         path or remove it",
                        path.display()
                    ),
                    source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
                });
            }
        }
        std::fs::create_dir_all(path).map_err(io(format!("creating {}", path.display())))?;
        let path_s = path.to_string_lossy();
        let init_action = || format!("creating a repository in {}", path.display());
        let mut argv: Vec<&str> = SAFE_CONFIG.to_vec();
        argv.extend(["init", "--quiet", "--initial-branch=main", "--", &path_s]);
        process::run("git", &argv, None, GIT_WORKTREE_DEADLINE, HINT).map_err(|source| {
            GitError::Command {
                action: init_action(),
                source,
            }
        })?;
        for (rel, contents) in files {
            let rel_path = Path::new(rel);
            let clean = rel_path
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !clean {
                return Err(GitError::Io {
                    action: format!(
                        "writing {rel} into {}: the path must be relative without `..`",
                        path.display()
                    ),
                    source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
                });
            }
            let target = path.join(rel_path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(io(format!("creating {}", parent.display())))?;
            }
            std::fs::write(&target, contents)
                .map_err(io(format!("writing {}", target.display())))?;
        }
        let repo = Self::new(path);
        git(&repo.repo, &["add", "--all"], GIT_WORKTREE_DEADLINE, || {
            format!("adding the files of {}", path.display())
        })?;
        let mut commit: Vec<&str> = IDENTITY.to_vec();
        commit.extend(["commit", "--quiet", "--no-verify", "-m", message]);
        git(&repo.repo, &commit, GIT_WORKTREE_DEADLINE, || {
            format!("committing in {}", path.display())
        })?;
        Ok(repo)
    }
}

#[cfg(test)]
mod tests;
