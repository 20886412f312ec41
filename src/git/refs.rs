//! Branches, refs and the commits on a branch.

use super::{
    Commit, GIT_QUERY_DEADLINE, Git, GitError, Result, check_branch, git, git_status,
    parse_branches, parse_log, parse_refs,
};
use crate::process::ProcessError;

impl Git {
    /// The branch `HEAD` is on (`git symbolic-ref --quiet --short HEAD`); `None` for a
    /// detached `HEAD`.
    ///
    /// # Errors
    /// [`GitError::Command`] when git fails (not a repository).
    pub fn current_branch(&self) -> Result<Option<String>> {
        let action = || format!("reading the branch of HEAD in {}", self.repo.display());
        let out = git_status(
            &self.repo,
            &["symbolic-ref", "--quiet", "--short", "HEAD"],
            GIT_QUERY_DEADLINE,
            action,
        )?;
        match out.status.code() {
            Some(0) => Ok(Some(out.stdout.trim().to_owned())),
            Some(1) => Ok(None),
            _ => Err(GitError::Command {
                action: action(),
                source: ProcessError::Failed {
                    argv: "git symbolic-ref --quiet --short HEAD".to_owned(),
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
}
