//! Reading one commit's files without a work tree (issue 15: images built from the base
//! commit): an object's id and type, a blob's bytes, a tree as a tar archive. Every call has
//! a deadline and runs with `SAFE_CONFIG`.

use std::path::Path;
use std::time::Duration;

use super::{GIT_QUERY_DEADLINE, Git, GitError, HINT, Result, SAFE_CONFIG};
use crate::process::{self, ProcessError};

/// Deadline of writing one tree as an archive.
pub const GIT_ARCHIVE_DEADLINE: Duration = Duration::from_secs(300);

impl Git {
    fn plain(
        &self,
        args: &[&str],
        opts: &process::Opts<'_>,
        action: &str,
    ) -> Result<process::Output> {
        let dir = self.repo.to_string_lossy();
        let full = [&["--no-pager", "-C", &*dir], &SAFE_CONFIG[..], args].concat();
        let out = process::run_with("git", &full, opts).map_err(|source| GitError::Command {
            action: action.to_string(),
            source,
        })?;
        Ok(out)
    }

    /// The id and type (`blob`, `tree`, `commit` for a gitlink) of `path` in `commit`
    /// (`.` the commit's tree); `None` when the commit has no such path.
    ///
    /// # Errors
    /// [`GitError::Command`] when git fails otherwise.
    pub fn object_at(&self, commit: &str, path: &str) -> Result<Option<(String, String)>> {
        let spec = if path == "." {
            format!("{commit}^{{tree}}")
        } else {
            format!("{commit}:{path}")
        };
        let action = format!("looking up `{path}` in commit {commit}");
        let opts = process::Opts {
            deadline: GIT_QUERY_DEADLINE,
            hint: HINT,
            ..process::Opts::default()
        };
        let out = self.plain(
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &spec,
            ],
            &opts,
            &action,
        )?;
        let id = out.stdout.trim().to_string();
        if !out.status.success() || id.is_empty() {
            return Ok(None);
        }
        let out = self.plain(&["cat-file", "-t", &id], &opts, &action)?;
        if !out.status.success() {
            return Err(failed(action, &out));
        }
        Ok(Some((out.stdout.trim().to_string(), id)))
    }

    /// The bytes of blob `id`, at most `cap` of them (lossy UTF-8).
    ///
    /// # Errors
    /// [`GitError::Command`] (git failed, or the blob is larger than `cap`).
    pub fn blob_text(&self, id: &str, cap: u64, dir: &Path) -> Result<String> {
        let file = dir.join("blob");
        let action = format!("reading blob {id}");
        let opts = process::Opts {
            deadline: GIT_QUERY_DEADLINE,
            hint: HINT,
            stdout_file: Some((&file, cap)),
            ..process::Opts::default()
        };
        let out = self.plain(&["cat-file", "blob", id], &opts, &action)?;
        if !out.status.success() {
            return Err(failed(action, &out));
        }
        let bytes = std::fs::read(&file).map_err(|e| GitError::Io {
            action: format!("reading {}", file.display()),
            source: e,
        })?;
        let _ = std::fs::remove_file(&file);
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Writes tree `id` as a tar archive to `out` (created new, mode 0600), at most `cap`
    /// bytes (`git archive --format=tar`).
    ///
    /// # Errors
    /// [`GitError::Command`] (git failed, or the archive is larger than `cap`).
    pub fn archive_tree(&self, id: &str, out: &Path, cap: u64) -> Result<()> {
        let action = format!("archiving tree {id}");
        let opts = process::Opts {
            deadline: GIT_ARCHIVE_DEADLINE,
            hint: HINT,
            stdout_file: Some((out, cap)),
            ..process::Opts::default()
        };
        let o = self.plain(&["archive", "--format=tar", id], &opts, &action)?;
        if !o.status.success() {
            return Err(failed(action, &o));
        }
        Ok(())
    }
}

fn failed(action: String, out: &process::Output) -> GitError {
    GitError::Command {
        action,
        source: ProcessError::Failed {
            argv: "git".into(),
            status: out.status,
            stderr: out.stderr.trim().to_string(),
            stdout: String::new(),
        },
    }
}
