//! Delivery: the remote side of a run's branch (`run::phases::deliver`). Every call here has a
//! deadline, runs with `SAFE_CONFIG` (no hooks, no fsmonitor) and, for the ones that talk to a
//! remote, with the environment the caller gives (`GIT_TERMINAL_PROMPT=0`, ssh `BatchMode`).
//! Reading the agent's commits never touches a work tree: tree-to-tree diffs and `log -p`
//! with external diff drivers and textconv off, no pager, no colour.

use std::path::Path;
use std::time::Duration;

use super::{
    GIT_QUERY_DEADLINE, GIT_WORKTREE_DEADLINE, Git, GitError, HINT, Result, SAFE_CONFIG,
    check_branch, hardened,
};
use crate::process::{self, ProcessError};

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

/// Runs `git -C dir SAFE_CONFIG args…` with `env` and `deadline` (for the calls that talk to a
/// remote); a non-zero exit is [`GitError::Command`] via [`failed`].
fn remote_git(
    dir: &Path,
    args: &[&str],
    env: &[(&str, Option<&str>)],
    deadline: Duration,
    action: impl Fn() -> String,
) -> Result<process::Output> {
    let opts = process::Opts {
        deadline,
        hint: HINT,
        env,
        ..process::Opts::default()
    };
    let out = git_with(dir, args, &opts, &action)?;
    if !out.status.success() {
        return Err(failed(action(), args, out));
    }
    Ok(out)
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
        let out = remote_git(&self.repo, &args, env, deadline, action)?;
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
        remote_git(&self.repo, &args, env, deadline, action)?;
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
        self.touched_among(base, tip, &[])
    }

    /// [`Git::touched_paths`] limited to `pathspecs` (gitglossary(7); empty: every path), as
    /// git itself matches them (`-- PATHSPEC...`).
    ///
    /// # Errors
    /// [`GitError::Command`] when git fails.
    pub fn touched_among(
        &self,
        base: &str,
        tip: &str,
        pathspecs: &[String],
    ) -> Result<Vec<String>> {
        let range = format!("{base}..{tip}");
        // `--ignore-submodules=none`: a submodule's `ignore = all` (`.gitmodules`, or the
        // user's `diff.ignoreSubmodules`) would hide a gitlink the commits move (gitmodules(5)).
        let mut diff = vec![
            "diff",
            "--name-only",
            "-z",
            "--no-renames",
            "--ignore-submodules=none",
            base,
            tip,
        ];
        let mut log = vec![
            "log",
            "--no-show-signature",
            "--format=",
            "--name-only",
            "-z",
            "--no-renames",
            "--ignore-submodules=none",
            "--diff-merges=separate",
            range.as_str(),
        ];
        if !pathspecs.is_empty() {
            for args in [&mut diff, &mut log] {
                args.push("--");
                args.extend(pathspecs.iter().map(String::as_str));
            }
        }
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

    /// Every entry of `commit`'s tree among `pathspecs`, recursively, as (mode, path): `git
    /// diff-tree -r -z` from the empty tree (`git ls-tree` takes no pathspec magic). Modes
    /// are octal as git writes them (`0o100644`, `0o120000` a symlink, `0o160000` a gitlink).
    ///
    /// # Errors
    /// [`GitError::Command`] when git fails or its output is not `diff-tree`'s raw format.
    pub fn tree_entries(&self, commit: &str, pathspecs: &[String]) -> Result<Vec<(u32, String)>> {
        let opts = process::Opts {
            deadline: GIT_QUERY_DEADLINE,
            hint: HINT,
            ..process::Opts::default()
        };
        let empty_args = ["hash-object", "-t", "tree", "/dev/null"];
        let action = || "computing the empty tree's id".to_string();
        let out = hgit_with(&self.repo, &empty_args, &opts, action)?;
        if !out.status.success() {
            return Err(failed(action(), &empty_args, out));
        }
        let empty = out.stdout.trim().to_string();
        let mut args = vec!["diff-tree", "-r", "-z", "--no-renames", "--no-commit-id"];
        args.extend([empty.as_str(), commit, "--"]);
        args.extend(pathspecs.iter().map(String::as_str));
        let action = || format!("listing the setup files of {commit}");
        let out = hgit_with(&self.repo, &args, &opts, action)?;
        if !out.status.success() {
            return Err(failed(action(), &args, out));
        }
        super::parse::raw_diff_new_modes(&out.stdout).ok_or_else(|| GitError::Output {
            action: action(),
            detail: out.stdout.chars().take(200).collect(),
        })
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
