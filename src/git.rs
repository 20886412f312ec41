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

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::process::{self, ProcessError};

pub mod bundle;
pub mod hardened;
pub mod private;

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

    /// Whether branch `name` exists (`git show-ref --verify --quiet refs/heads/NAME`).
    ///
    /// # Errors
    /// [`GitError::BadBranchName`]; [`GitError::Command`] when git fails (not a repository).
    pub fn branch_exists(&self, name: &str) -> Result<bool> {
        check_branch(name)?;
        let full = format!("refs/heads/{name}");
        let action = || format!("looking up branch `{name}` in {}", self.repo.display());
        let out = git_status(
            &self.repo,
            &["show-ref", "--verify", "--quiet", &full],
            GIT_QUERY_DEADLINE,
            action,
        )?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(GitError::Command {
                action: action(),
                source: ProcessError::Failed {
                    argv: format!("git show-ref --verify --quiet {full}"),
                    status: out.status,
                    stderr: out.stderr.trim().to_string(),
                    stdout: out.stdout,
                },
            }),
        }
    }

    /// Creates a linked worktree at `path` on a new branch `branch` starting at `commit`
    /// (`git worktree add --no-track -b BRANCH PATH COMMIT`). No hook runs (module doc).
    ///
    /// # Errors
    /// [`GitError::BranchExists`] (never overwrites a branch), [`GitError::PathExists`],
    /// [`GitError::BadBranchName`], [`GitError::Command`] (e.g. an unknown commit).
    pub fn worktree_add(&self, path: &Path, branch: &str, commit: &str) -> Result<()> {
        check_branch(branch)?;
        if self.branch_exists(branch)? {
            return Err(GitError::BranchExists {
                repo: self.repo.clone(),
                branch: branch.to_string(),
            });
        }
        if path.exists() {
            return Err(GitError::PathExists {
                path: path.to_path_buf(),
            });
        }
        let path_s = path.to_string_lossy();
        git(
            &self.repo,
            &[
                "worktree",
                "add",
                "--no-track",
                "-b",
                branch,
                &path_s,
                commit,
            ],
            GIT_WORKTREE_DEADLINE,
            || {
                format!(
                    "creating worktree {} on branch `{branch}` from {commit} in {}",
                    path.display(),
                    self.repo.display()
                )
            },
        )?;
        Ok(())
    }

    /// The linked worktrees of the repository, main worktree excluded
    /// (`git worktree list --porcelain -z`). Paths are as git recorded them (absolute).
    ///
    /// # Errors
    /// [`GitError::Command`].
    pub fn worktrees(&self) -> Result<Vec<PathBuf>> {
        let out = git(
            &self.repo,
            &["worktree", "list", "--porcelain", "-z"],
            GIT_QUERY_DEADLINE,
            || format!("listing worktrees of {}", self.repo.display()),
        )?;
        Ok(parse_worktrees(&out.stdout))
    }

    /// Removes the linked worktree at `path` even with local changes or a lock
    /// (`git worktree remove --force --force PATH`), then `git worktree prune`. Idempotent: a
    /// worktree that is not registered, or whose directory is already gone, is fine. The branch
    /// stays (see [`Git::delete_branch`]).
    ///
    /// # Errors
    /// [`GitError::Command`] when git cannot remove a registered worktree that still exists.
    pub fn worktree_remove(&self, path: &Path) -> Result<()> {
        let registered = self.worktrees()?.iter().any(|w| same_path(w, path));
        if registered && path.exists() {
            let path_s = path.to_string_lossy();
            git(
                &self.repo,
                &["worktree", "remove", "--force", "--force", &path_s],
                GIT_WORKTREE_DEADLINE,
                || {
                    format!(
                        "removing worktree {} of {}",
                        path.display(),
                        self.repo.display()
                    )
                },
            )?;
        }
        git(
            &self.repo,
            &["worktree", "prune"],
            GIT_QUERY_DEADLINE,
            || format!("pruning worktrees of {}", self.repo.display()),
        )?;
        Ok(())
    }

    /// The commits on `branch` that are not on `base`, oldest first
    /// (`git log --reverse --format=%H%x1f%s base..branch`).
    ///
    /// # Errors
    /// [`GitError::Command`] (e.g. an unknown ref), [`GitError::Output`].
    pub fn commits(&self, base: &str, branch: &str) -> Result<Vec<Commit>> {
        let range = format!("{base}..{branch}");
        let action = format!("listing commits {range} in {}", self.repo.display());
        let out = git(
            &self.repo,
            &[
                "log",
                "--reverse",
                "--no-color",
                "--format=%H%x1f%s",
                "--end-of-options",
                &range,
                "--",
            ],
            GIT_QUERY_DEADLINE,
            || action.clone(),
        )?;
        parse_log(&out.stdout, &action)
    }

    /// Deletes branch `name` (`git branch -d`, or `-D` with `force`). Returns `false` when the
    /// branch did not exist (idempotent).
    ///
    /// # Errors
    /// [`GitError::Command`]: an unmerged branch without `force`, or a branch checked out in a
    /// worktree (remove the worktree first).
    pub fn delete_branch(&self, name: &str, force: bool) -> Result<bool> {
        if !self.branch_exists(name)? {
            return Ok(false);
        }
        git(
            &self.repo,
            &["branch", if force { "-D" } else { "-d" }, "--", name],
            GIT_QUERY_DEADLINE,
            || {
                format!(
                    "deleting branch `{name}` in {} (remove its worktree first; `force` deletes \
                     an unmerged branch)",
                    self.repo.display()
                )
            },
        )?;
        Ok(true)
    }

    /// The local branches whose name starts with `prefix` (without `refs/heads/`), in git's
    /// order (`git for-each-ref --format=%(refname) refs/heads/`, filtered here so that `*`
    /// and `/` in the prefix need no quoting).
    ///
    /// # Errors
    /// [`GitError::Command`].
    pub fn list_branches(&self, prefix: &str) -> Result<Vec<String>> {
        let out = git(
            &self.repo,
            &["for-each-ref", "--format=%(refname)", "refs/heads/"],
            GIT_QUERY_DEADLINE,
            || format!("listing branches `{prefix}*` in {}", self.repo.display()),
        )?;
        Ok(parse_branches(&out.stdout, prefix))
    }

    /// Every ref of the repository with the object it points at, as `(refname, sha)` in
    /// git's order (`git for-each-ref --format=%(refname) %(objectname)`): branches, tags,
    /// remote-tracking refs, notes, stash. `HEAD` and per-worktree refs are not listed.
    ///
    /// # Errors
    /// [`GitError::Command`].
    pub fn refs(&self) -> Result<Vec<(String, String)>> {
        let out = git(
            &self.repo,
            &["for-each-ref", "--format=%(refname) %(objectname)"],
            GIT_QUERY_DEADLINE,
            || format!("listing the refs of {}", self.repo.display()),
        )?;
        Ok(parse_refs(&out.stdout))
    }

    /// Deletes `refname` only if it still points at `sha` (`git update-ref -d REF SHA`: git
    /// compares and deletes under the ref's lock, so a ref that moved meanwhile is kept).
    /// Returns whether it was deleted; a ref that is absent or points elsewhere is kept
    /// (`Ok(false)`).
    ///
    /// # Errors
    /// [`GitError::Command`] when git fails for another reason.
    pub fn delete_ref_at(&self, refname: &str, sha: &str) -> Result<bool> {
        if !self.refs()?.iter().any(|(r, s)| r == refname && s == sha) {
            return Ok(false);
        }
        let out = git_status(
            &self.repo,
            &["update-ref", "-d", refname, sha],
            GIT_QUERY_DEADLINE,
            || format!("deleting {refname} in {}", self.repo.display()),
        )?;
        Ok(out.status.success())
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

    /// Which operation, if any, is half done in `worktree` (`"a merge (MERGE_HEAD)"`, …),
    /// read from the worktree's own git dir (`git rev-parse --path-format=absolute --git-dir`):
    /// `MERGE_HEAD`, `rebase-merge`, `rebase-apply`, `CHERRY_PICK_HEAD`, `REVERT_HEAD`.
    ///
    /// # Errors
    /// [`GitError::Command`] (not a worktree).
    pub fn merge_or_rebase_in_progress(&self, worktree: &Path) -> Result<Option<String>> {
        let out = git(
            worktree,
            &["rev-parse", "--path-format=absolute", "--git-dir"],
            GIT_QUERY_DEADLINE,
            || format!("finding the git dir of worktree {}", worktree.display()),
        )?;
        let dir = PathBuf::from(out.stdout.trim_end_matches('\n'));
        let dir = if dir.is_absolute() {
            dir
        } else {
            worktree.join(dir)
        };
        Ok(IN_PROGRESS
            .iter()
            .find(|(f, _)| dir.join(f).exists())
            .map(|(f, what)| format!("{what} ({f})")))
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

// ---------------------------------------------------------------------------------------------
// Delivery: the remote side of a run's branch (`run::delivery`). Every call here has a
// deadline, runs with SAFE_CONFIG (no hooks, no fsmonitor) and, for the ones that talk to a
// remote, with the environment the caller gives (`GIT_TERMINAL_PROMPT=0`, ssh `BatchMode`).
// Reading the agent's commits never touches a work tree: tree-to-tree diffs and `log -p`
// with external diff drivers and textconv off, no pager, no colour.
// ---------------------------------------------------------------------------------------------

/// Runs `git -C dir HARDENED args…` with `opts` and the hardened environment (for reading the
/// agent's commits: [`hardened`]); `Ok(output)` whatever the exit status.
fn hgit_with(
    dir: &Path,
    args: &[&str],
    opts: &process::Opts<'_>,
    action: impl Fn() -> String,
) -> Result<process::Output> {
    let dir_s = dir.to_string_lossy();
    let full = hardened::argv(&dir_s, args);
    let opts = process::Opts {
        env: &hardened::ENV,
        env_remove_prefixes: &hardened::REMOVE_PREFIXES,
        ..*opts
    };
    process::run_with("git", &full, &opts).map_err(|source| GitError::Command {
        action: action(),
        source,
    })
}

/// Runs `git -C dir SAFE_CONFIG args…` with `opts`; `Ok(output)` whatever the exit status.
fn git_with(
    dir: &Path,
    args: &[&str],
    opts: &process::Opts<'_>,
    action: impl Fn() -> String,
) -> Result<process::Output> {
    let dir_s = dir.to_string_lossy();
    let full = [&["--no-pager", "-C", &*dir_s], &SAFE_CONFIG[..], args].concat();
    process::run_with("git", &full, opts).map_err(|source| GitError::Command {
        action: action(),
        source,
    })
}

/// A non-zero exit of `git args…` as [`GitError::Command`].
fn failed(action: String, args: &[&str], out: process::Output) -> GitError {
    GitError::Command {
        action,
        source: ProcessError::Failed {
            argv: format!("git {}", args.join(" ")),
            status: out.status,
            stderr: out.stderr.trim().to_string(),
            stdout: out.stdout,
        },
    }
}

/// Options that keep a diff of untrusted commits from running anything or reading a work
/// tree: no external diff, no textconv, every file as text (a secret in a "binary" file is
/// shown), no rename detection (a renamed file shows its whole content), no colour.
const SAFE_DIFF: [&str; 6] = [
    "--no-ext-diff",
    "--no-textconv",
    "--text",
    "--no-renames",
    "--no-color",
    "--unified=0",
];

impl Git {
    /// The URL `git push REMOTE` would use (`git remote get-url --push REMOTE`).
    ///
    /// # Errors
    /// [`GitError::Command`] when the remote does not exist (the fix names `git remote -v`).
    pub fn remote_push_url(&self, remote: &str) -> Result<String> {
        let args = ["remote", "get-url", "--push", remote];
        let action = || {
            format!(
                "reading the URL of remote `{remote}` in {} (is it configured? `git -C {} remote -v` lists them)",
                self.repo.display(),
                self.repo.display()
            )
        };
        let opts = process::Opts {
            deadline: GIT_QUERY_DEADLINE,
            hint: HINT,
            ..process::Opts::default()
        };
        let out = git_with(&self.repo, &args, &opts, action)?;
        if !out.status.success() {
            return Err(failed(action(), &args, out));
        }
        Ok(out.stdout.trim().to_string())
    }

    /// Runs a git query whose exit status is the answer: 0 yes, 1 no, anything else an error.
    fn yes_or_no(&self, args: &[&str], action: impl Fn() -> String) -> Result<bool> {
        let opts = process::Opts {
            deadline: GIT_QUERY_DEADLINE,
            hint: HINT,
            ..process::Opts::default()
        };
        let out = git_with(&self.repo, args, &opts, &action)?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(failed(action(), args, out)),
        }
    }

    /// Whether the repository's configuration (any scope) sets `key` (`git config --get`).
    ///
    /// # Errors
    /// [`GitError::Command`] when git fails otherwise.
    pub fn config_is_set(&self, key: &str) -> Result<bool> {
        self.yes_or_no(&["config", "--get", key], || {
            format!("reading `{key}` in {}", self.repo.display())
        })
    }

    /// The tip of `refs/heads/BRANCH` on `remote` (`git ls-remote --refs`), `None` when the
    /// branch does not exist there. `env` and `deadline` as for a push.
    ///
    /// # Errors
    /// [`GitError::Command`] when the remote cannot be reached in time.
    pub fn remote_tip(
        &self,
        remote: &str,
        branch: &str,
        env: &[(&str, Option<&str>)],
        deadline: Duration,
    ) -> Result<Option<String>> {
        check_branch(branch)?;
        let want = format!("refs/heads/{branch}");
        let args = ["ls-remote", "--refs", remote, want.as_str()];
        let action = || format!("reading `{want}` on remote `{remote}`");
        let opts = process::Opts {
            deadline,
            hint: HINT,
            env,
            ..process::Opts::default()
        };
        let out = git_with(&self.repo, &args, &opts, action)?;
        if !out.status.success() {
            return Err(failed(action(), &args, out));
        }
        // ls-remote matches patterns against the tail of a ref: keep the exact name only.
        Ok(out.stdout.lines().find_map(|l| {
            let (sha, name) = l.split_once('\t')?;
            (name.trim() == want && sha.chars().all(|c| c.is_ascii_hexdigit()))
                .then(|| sha.to_string())
        }))
    }

    /// Fetches `refs/heads/BRANCH` from `remote` into the temporary ref `tmp_ref`, reads the
    /// commit it got and deletes `tmp_ref` again (no `FETCH_HEAD`, no tags, no submodules,
    /// no pruning, no automatic gc). Returns the fetched tip.
    ///
    /// # Errors
    /// [`GitError::Command`] when the fetch fails or runs past `deadline`.
    pub fn fetch_tip(
        &self,
        remote: &str,
        branch: &str,
        tmp_ref: &str,
        env: &[(&str, Option<&str>)],
        deadline: Duration,
    ) -> Result<String> {
        check_branch(branch)?;
        let spec = format!("+refs/heads/{branch}:{tmp_ref}");
        let args = [
            "-c",
            "gc.auto=0",
            "-c",
            "maintenance.auto=false",
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--recurse-submodules=no",
            "--no-prune",
            remote,
            spec.as_str(),
        ];
        let action = || format!("fetching `refs/heads/{branch}` from remote `{remote}`");
        let opts = process::Opts {
            deadline,
            hint: HINT,
            env,
            ..process::Opts::default()
        };
        let out = git_with(&self.repo, &args, &opts, action)?;
        if !out.status.success() {
            return Err(failed(action(), &args, out));
        }
        let tip = self.rev_parse_commit(tmp_ref);
        let del = ["update-ref", "-d", tmp_ref];
        let _ = git_with(&self.repo, &del, &process::Opts::default(), || {
            String::new()
        });
        tip
    }

    /// Whether `ancestor` is an ancestor of (or equal to) `commit` (`merge-base --is-ancestor`).
    ///
    /// # Errors
    /// [`GitError::Command`] when git fails (an unknown commit).
    pub fn is_ancestor(&self, ancestor: &str, commit: &str) -> Result<bool> {
        self.yes_or_no(&["merge-base", "--is-ancestor", ancestor, commit], || {
            format!("checking that {ancestor} is an ancestor of {commit}")
        })
    }

    /// Every path a delivery of `base..tip` touches: the tree-to-tree diff and each commit's
    /// own changes (merges against each parent), so a file added and removed again on the way
    /// counts too. Sorted, without duplicates.
    ///
    /// # Errors
    /// [`GitError::Command`] when git fails.
    pub fn touched_paths(&self, base: &str, tip: &str) -> Result<Vec<String>> {
        let range = format!("{base}..{tip}");
        let diff = ["diff", "--name-only", "-z", "--no-renames", base, tip];
        let log = [
            "log",
            "--no-show-signature",
            "--format=",
            "--name-only",
            "-z",
            "--no-renames",
            "--diff-merges=separate",
            range.as_str(),
        ];
        let mut paths = Vec::new();
        for args in [&diff[..], &log[..]] {
            let action = || format!("listing the paths {range} touches");
            let opts = process::Opts {
                deadline: GIT_QUERY_DEADLINE,
                hint: HINT,
                ..process::Opts::default()
            };
            let out = hgit_with(&self.repo, args, &opts, action)?;
            if !out.status.success() {
                return Err(failed(action(), args, out));
            }
            paths.extend(
                out.stdout
                    .split(['\0', '\n'])
                    .filter(|p| !p.is_empty())
                    .map(str::to_string),
            );
        }
        paths.sort();
        paths.dedup();
        Ok(paths)
    }

    /// Writes what a delivery of `base..tip` carries as text to `dir/diff` and `dir/log`
    /// (each created new, mode 0600, at most `cap` bytes): the tree-to-tree diff, and every
    /// commit's message (after a `\x01cyclix-commit SHA` line) and patch (merges against each
    /// parent). Returns both files' contents.
    ///
    /// # Errors
    /// [`GitError::Command`] when git fails or writes more than `cap` bytes.
    pub fn delivered_text(&self, base: &str, tip: &str, dir: &Path, cap: u64) -> Result<Vec<u8>> {
        let range = format!("{base}..{tip}");
        let mut diff: Vec<&str> = vec!["diff"];
        diff.extend(SAFE_DIFF);
        diff.extend([base, tip]);
        // Raw message bytes (`--encoding=none`: a declared encoding cannot hide a value) and
        // the identities, which are the agent's text too.
        let mut log: Vec<&str> = vec![
            "log",
            "-p",
            "--diff-merges=separate",
            "--no-show-signature",
            "--encoding=none",
        ];
        log.extend(SAFE_DIFF);
        log.extend([
            "--format=%x01cyclix-commit %H%n%an <%ae> %cn <%ce>%n%B",
            range.as_str(),
        ]);
        let mut text = Vec::new();
        for (name, args) in [("diff", diff), ("log", log)] {
            let path = dir.join(name);
            let action = || format!("reading the delivered {name} of {range}");
            let opts = process::Opts {
                deadline: GIT_WORKTREE_DEADLINE,
                hint: HINT,
                stdout_file: Some((&path, cap)),
                ..process::Opts::default()
            };
            let out = hgit_with(&self.repo, &args, &opts, action)?;
            if !out.status.success() {
                return Err(failed(action(), &args, out));
            }
            let bytes = std::fs::read(&path).map_err(|source| GitError::Io {
                action: format!("reading {}", path.display()),
                source,
            })?;
            text.extend_from_slice(&bytes);
            text.push(b'\n');
        }
        Ok(text)
    }

    /// `git push --porcelain --no-verify --force-with-lease=DST:EXPECTED REMOTE SRC:DST`
    /// (`DST` = `refs/heads/BRANCH`; `EXPECTED` empty = the branch must not exist), with
    /// `env` and `deadline`. Returns the output whatever the exit status: the caller reads
    /// the porcelain lines.
    ///
    /// # Errors
    /// [`GitError::Command`] when git cannot be started or runs past `deadline`.
    pub fn push_with_lease(
        &self,
        remote: &str,
        src: &str,
        branch: &str,
        expected: Option<&str>,
        env: &[(&str, Option<&str>)],
        deadline: Duration,
    ) -> Result<process::Output> {
        check_branch(branch)?;
        let dst = format!("refs/heads/{branch}");
        let lease = format!("--force-with-lease={dst}:{}", expected.unwrap_or(""));
        let refspec = format!("{src}:{dst}");
        let args = [
            "push",
            "--porcelain",
            "--no-verify",
            "--no-signed",
            "--no-follow-tags",
            "--recurse-submodules=no",
            lease.as_str(),
            remote,
            refspec.as_str(),
        ];
        let action = || format!("pushing {src} to `{dst}` on remote `{remote}`");
        let opts = process::Opts {
            deadline,
            hint: HINT,
            env,
            ..process::Opts::default()
        };
        git_with(&self.repo, &args, &opts, action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit_in(dir: &Path, file: &str, msg: &str) {
        std::fs::write(dir.join(file), msg).expect("write");
        let d = dir.to_string_lossy();
        for args in [
            vec!["-C", &d, "add", "--all"],
            [
                vec!["-C", &d],
                IDENTITY.to_vec(),
                vec!["commit", "--quiet", "-m", msg],
            ]
            .concat(),
        ] {
            process::run("git", &args, None, GIT_QUERY_DEADLINE, "").expect("git");
        }
    }

    fn demo() -> (tempfile::TempDir, Git) {
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo = Git::init_repo(
            &tmp.path().join("repo"),
            &[
                ("README.md", "demo\n"),
                ("calc/add.py", "def add(a, b):\n    return a + b\n"),
            ],
            "initial",
        )
        .expect("init");
        (tmp, repo)
    }

    #[test]
    fn init_repo_makes_one_commit_on_main_with_fixed_identity() {
        let (_tmp, g) = demo();
        let sha = g.rev_parse_commit("main").expect("main");
        assert_eq!(sha.len(), 40, "{sha}");
        let out = process::run(
            "git",
            &[
                "-C",
                &g.repo().to_string_lossy(),
                "log",
                "--format=%an <%ae>|%s",
                "main",
            ],
            None,
            GIT_QUERY_DEADLINE,
            "",
        )
        .expect("log");
        assert_eq!(out.stdout, "cyclix <cyclix@localhost>|initial\n");
        assert!(g.repo().join("calc/add.py").is_file());
    }

    #[test]
    fn init_repo_refuses_non_empty_dir_and_escaping_paths() {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::write(tmp.path().join("x"), "x").expect("write");
        let e = Git::init_repo(tmp.path(), &[], "m").expect_err("non-empty");
        assert!(e.to_string().contains("not empty"), "{e}");
        let e =
            Git::init_repo(&tmp.path().join("r"), &[("../evil", "x")], "m").expect_err("escape");
        assert!(e.to_string().contains("without `..`"), "{e}");
        assert!(!tmp.path().join("evil").exists());
    }

    #[test]
    fn missing_ref_names_repo_base_fix() {
        let (_tmp, g) = demo();
        let e = g.rev_parse_commit("no-such-branch").expect_err("missing");
        assert!(matches!(e, GitError::NoSuchRef { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("no-such-branch") && msg.contains("repo.base"),
            "{msg}"
        );
        // A ref that looks like an option is still a ref.
        let e = g
            .rev_parse_commit("--output=/tmp/x")
            .expect_err("option-like");
        assert!(matches!(e, GitError::NoSuchRef { .. }), "{e}");
    }

    #[test]
    fn not_a_repository_is_a_command_error_with_stderr() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let e = Git::new(tmp.path()).worktrees().expect_err("not a repo");
        let msg = e.to_string();
        assert!(
            msg.contains("listing worktrees") && msg.contains("not a git repository"),
            "{msg}"
        );
    }

    #[test]
    fn refs_are_listed_and_deleted_only_where_they_still_point() {
        let (tmp, g) = demo();
        let base = g.rev_parse_commit("main").expect("main");
        let wt = tmp.path().join("wt-r");
        g.worktree_add(&wt, "cyclix/acme/r", &base).expect("add");
        let refs = g.refs().expect("refs");
        assert!(
            refs.contains(&("refs/heads/main".to_string(), base.clone())),
            "{refs:?}"
        );
        assert!(refs.contains(&("refs/heads/cyclix/acme/r".to_string(), base.clone())));
        commit_in(&wt, "a.txt", "moved");
        // Moved since: kept.
        assert!(
            !g.delete_ref_at("refs/heads/cyclix/acme/r", &base)
                .expect("kept")
        );
        assert!(g.branch_exists("cyclix/acme/r").expect("exists"));
        g.worktree_remove(&wt).expect("remove");
        let tip = g.rev_parse_commit("cyclix/acme/r").expect("tip");
        assert!(
            g.delete_ref_at("refs/heads/cyclix/acme/r", &tip)
                .expect("deleted")
        );
        assert!(!g.branch_exists("cyclix/acme/r").expect("gone"));
        // Absent: nothing to do.
        assert!(
            !g.delete_ref_at("refs/heads/cyclix/acme/r", &tip)
                .expect("absent")
        );
        assert_eq!(
            parse_refs("refs/heads/a 1111\nrefs/tags/v1 2222\n"),
            vec![
                ("refs/heads/a".to_string(), "1111".to_string()),
                ("refs/tags/v1".to_string(), "2222".to_string())
            ]
        );
    }

    #[test]
    fn worktree_lifecycle_commits_branches_and_idempotent_remove() {
        let (tmp, g) = demo();
        let base = g.rev_parse_commit("main").expect("main");
        let wt = tmp.path().join("wt-run1");
        g.worktree_add(&wt, "cyclix/acme/run1", &base).expect("add");
        assert!(wt.join("README.md").is_file());
        assert_eq!(g.worktrees().expect("list"), vec![wt.clone()]);
        assert!(g.branch_exists("cyclix/acme/run1").expect("exists"));
        assert!(!g.branch_exists("cyclix/acme/run2").expect("exists"));

        commit_in(&wt, "a.txt", "first change");
        commit_in(&wt, "b.txt", "second change");
        let commits = g.commits(&base, "cyclix/acme/run1").expect("commits");
        let subjects: Vec<&str> = commits.iter().map(|c| c.subject.as_str()).collect();
        assert_eq!(subjects, ["first change", "second change"]);
        assert!(g.commits(&base, "main").expect("none").is_empty());

        // The same branch again: refused with the fix, nothing created.
        let e = g
            .worktree_add(&tmp.path().join("wt-again"), "cyclix/acme/run1", &base)
            .expect_err("branch exists");
        assert!(matches!(e, GitError::BranchExists { .. }), "{e}");
        assert!(e.to_string().contains("branch -D"), "{e}");
        assert!(!tmp.path().join("wt-again").exists());

        assert_eq!(g.merge_or_rebase_in_progress(&wt).expect("state"), None);
        assert_eq!(
            g.list_branches("cyclix/acme/").expect("branches"),
            vec!["cyclix/acme/run1".to_string()]
        );
        assert_eq!(
            g.list_branches("other/").expect("branches"),
            Vec::<String>::new()
        );

        // A branch checked out in a worktree cannot be deleted: the error says what to do.
        let e = g
            .delete_branch("cyclix/acme/run1", true)
            .expect_err("in use");
        assert!(e.to_string().contains("remove its worktree first"), "{e}");

        g.worktree_remove(&wt).expect("remove");
        assert!(!wt.exists());
        assert!(g.worktrees().expect("list").is_empty());
        g.worktree_remove(&wt).expect("remove again is fine");
        // The result branch survives the worktree.
        assert_eq!(g.commits(&base, "cyclix/acme/run1").expect("kept").len(), 2);
        let e = g
            .delete_branch("cyclix/acme/run1", false)
            .expect_err("unmerged");
        assert!(matches!(e, GitError::Command { .. }), "{e}");
        assert!(g.delete_branch("cyclix/acme/run1", true).expect("delete"));
        assert!(
            !g.delete_branch("cyclix/acme/run1", true)
                .expect("idempotent")
        );
    }

    #[test]
    fn worktree_remove_handles_a_deleted_directory() {
        let (tmp, g) = demo();
        let wt = tmp.path().join("wt");
        g.worktree_add(&wt, "b1", "main").expect("add");
        std::fs::remove_dir_all(&wt).expect("rm");
        g.worktree_remove(&wt).expect("prunes the stale entry");
        assert!(g.worktrees().expect("list").is_empty());
    }

    #[test]
    fn hooks_never_run() {
        let (tmp, g) = demo();
        let marker = tmp.path().join("HOOK_RAN");
        let hooks = g.common_dir().expect("common dir").join("hooks");
        std::fs::create_dir_all(&hooks).expect("hooks dir");
        for hook in [
            "post-checkout",
            "reference-transaction",
            "pre-commit",
            "post-commit",
        ] {
            let h = hooks.join(hook);
            std::fs::write(
                &h,
                format!("#!/bin/sh\necho {hook} >> '{}'\n", marker.display()),
            )
            .expect("hook");
            let mut perm = std::fs::metadata(&h).expect("meta").permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
            std::fs::set_permissions(&h, perm).expect("chmod");
        }
        // Control: plain git does run the planted hook, so the test can fail.
        let d = g.repo().to_string_lossy().into_owned();
        for args in [
            ["checkout", "--quiet", "-b", "control"],
            ["checkout", "--quiet", "main", "--"],
        ] {
            process::run(
                "git",
                &[&["-C", d.as_str()], &args[..]].concat(),
                None,
                GIT_QUERY_DEADLINE,
                "",
            )
            .expect("control checkout");
        }
        assert!(
            marker.exists(),
            "control: the planted hook should run under plain git"
        );
        std::fs::remove_file(&marker).expect("rm marker");

        let wt = tmp.path().join("wt");
        g.worktree_add(&wt, "cyclix/x", "main").expect("add");
        g.delete_branch("control", true).expect("delete");
        g.worktree_remove(&wt).expect("remove");
        assert!(
            !marker.exists(),
            "a hook ran: {:?}",
            std::fs::read_to_string(&marker)
        );
    }

    #[test]
    fn in_progress_operations_are_named() {
        let (tmp, g) = demo();
        let wt = tmp.path().join("wt");
        g.worktree_add(&wt, "b", "main").expect("add");
        let gitdir = process::run(
            "git",
            &[
                "-C",
                &wt.to_string_lossy(),
                "rev-parse",
                "--path-format=absolute",
                "--git-dir",
            ],
            None,
            GIT_QUERY_DEADLINE,
            "",
        )
        .expect("git-dir")
        .stdout;
        std::fs::write(Path::new(gitdir.trim()).join("MERGE_HEAD"), "x\n").expect("write");
        let state = g.merge_or_rebase_in_progress(&wt).expect("state");
        assert_eq!(state.as_deref(), Some("a merge (MERGE_HEAD)"));
        // The main worktree is unaffected: states are per worktree.
        assert_eq!(g.merge_or_rebase_in_progress(g.repo()).expect("main"), None);
    }

    #[test]
    fn parsers() {
        let z = "worktree /r\0HEAD abc\0branch refs/heads/main\0\0worktree /w/a b\0HEAD def\0detached\0\0";
        assert_eq!(parse_worktrees(z), vec![PathBuf::from("/w/a b")]);
        assert!(parse_worktrees("worktree /r\0bare\0\0").is_empty());
        let sha = "0123456789abcdef0123456789abcdef01234567";
        let log = format!("{sha}\u{1f}fix: a | b\n");
        assert_eq!(
            parse_log(&log, "t").expect("log"),
            vec![Commit {
                sha: sha.into(),
                subject: "fix: a | b".into()
            }]
        );
        assert!(parse_log("nonsense\n", "t").is_err());
        assert!(parse_log("xyz\u{1f}s\n", "t").is_err());
        assert_eq!(
            parse_branches(
                "refs/heads/cyclix/a\nrefs/heads/main\nrefs/heads/cyclix-b\n",
                "cyclix/"
            ),
            vec!["cyclix/a".to_string()]
        );
    }
}
