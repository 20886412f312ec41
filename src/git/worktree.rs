//! Work trees: adding one on a new branch, listing, removing, and naming an operation left
//! in progress in one.

use std::path::{Path, PathBuf};

use super::{
    GIT_QUERY_DEADLINE, GIT_WORKTREE_DEADLINE, Git, GitError, IN_PROGRESS, Result, check_branch,
    git, parse_worktrees, same_path,
};

impl Git {
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
}
