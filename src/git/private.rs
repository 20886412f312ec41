//! The run's private repository: the agent commits into a repository that belongs to the run
//! alone (issue 11). Nothing of the user's repository — work tree, git dir, worktree admin
//! dirs — is mounted into any container.
//!
//! **How the objects get there: a copy of what the base commit reaches.** Before any container
//! exists, host git packs exactly the objects reachable from the base
//! (`git pack-objects --revs`, fed `BASE`) straight into the new repository's
//! `objects/pack/`. Costs and consequences:
//! - other branches, tags, stashes, reflogs and unreachable objects of the user's repository
//!   never become readable in the sandbox (alternates would expose all of them);
//! - a `git gc --prune=now` by the user mid-run cannot break the run (nothing is borrowed);
//! - prepare pays one pack of the base's history: `pack-objects` reuses the existing deltas, so
//!   it is mostly a copy (measured on the testbed on a repository of 100,000 objects: see
//!   `bench/prepare-repo`), and the disk holds a second copy of that history for the run's
//!   length;
//! - a shallow user repository gives a shallow private one (its `shallow` file is copied).
//!
//! The work tree is then checked out by host git in the new repository (nothing in it was
//! written by anyone but cyclix yet). From the moment the agent's container starts, no host
//! git process ever runs in it again: its commits come back as a bundle (`super::bundle`),
//! and it is removed as plain files.

use std::path::Path;

use super::{GIT_WORKTREE_DEADLINE, GitError, HINT, Result, SAFE_CONFIG};
use crate::process;

fn run(dir: Option<&Path>, args: &[&str], stdin: Option<&[u8]>, action: &str) -> Result<String> {
    let dir_s = dir.map(|d| d.to_string_lossy().into_owned());
    let mut full: Vec<&str> = Vec::new();
    if let Some(d) = &dir_s {
        full.extend(["-C", d.as_str()]);
    }
    full.extend(SAFE_CONFIG);
    full.extend(args);
    process::run_with(
        "git",
        &full,
        &process::Opts {
            stdin,
            deadline: GIT_WORKTREE_DEADLINE,
            hint: HINT,
            env_remove_prefixes: &["GIT_"],
            ..process::Opts::default()
        },
    )
    .and_then(|o| {
        if o.status.success() {
            Ok(o)
        } else {
            Err(process::ProcessError::Failed {
                argv: format!("git {}", args.join(" ")),
                status: o.status,
                stderr: o.stderr.trim().chars().take(2000).collect(),
                stdout: String::new(),
            })
        }
    })
    .map(|o| o.stdout)
    .map_err(|source| GitError::Command {
        action: action.to_string(),
        source,
    })
}

/// Creates the private repository of a run at `path` (which must not exist): a new repository
/// with the user repository's object format, holding the objects `base` reaches, on branch
/// `branch` at `base`, its work tree checked out. Hooks templates are not copied
/// (`--template=`).
///
/// # Errors
/// [`GitError::PathExists`], [`GitError::BadBranchName`], [`GitError::Command`] (e.g. `base`
/// is not a commit of `user_repo`), [`GitError::Io`].
pub fn create(user_repo: &Path, path: &Path, branch: &str, base: &str) -> Result<()> {
    super::check_branch(branch)?;
    if path.exists() {
        return Err(GitError::PathExists {
            path: path.to_path_buf(),
        });
    }
    let at = |what: &str| format!("{what} for the run's private repository {}", path.display());
    let format = run(
        Some(user_repo),
        &["rev-parse", "--show-object-format"],
        None,
        &at("reading the object format of the user's repository"),
    )?;
    let path_s = path.to_string_lossy();
    let fmt = format!("--object-format={}", format.trim());
    let initial = format!("--initial-branch={branch}");
    run(
        None,
        &[
            "init",
            "--quiet",
            "--template=",
            &fmt,
            &initial,
            "--",
            &path_s,
        ],
        None,
        &at("creating"),
    )?;
    let git_dir = path.join(".git");
    let pack_dir = git_dir.join("objects/pack");
    std::fs::create_dir_all(&pack_dir).map_err(|source| GitError::Io {
        action: format!("creating {}", pack_dir.display()),
        source,
    })?;
    let base_line = format!("{base}\n");
    let pack_base = pack_dir.join("pack");
    run(
        Some(user_repo),
        &[
            "pack-objects",
            "--revs",
            "--quiet",
            "--delta-base-offset",
            &pack_base.to_string_lossy(),
        ],
        Some(base_line.as_bytes()),
        &at("copying the objects the base reaches"),
    )?;
    let shallow = run(
        Some(user_repo),
        &["rev-parse", "--is-shallow-repository"],
        None,
        &at("asking whether the user's repository is shallow"),
    )?;
    if shallow.trim() == "true" {
        let common = run(
            Some(user_repo),
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
            None,
            &at("finding the user's git dir"),
        )?;
        let from = Path::new(common.trim()).join("shallow");
        std::fs::copy(&from, git_dir.join("shallow")).map_err(|source| GitError::Io {
            action: format!("copying {}", from.display()),
            source,
        })?;
    }
    let full = format!("refs/heads/{branch}");
    run(
        Some(path),
        &["update-ref", &full, base],
        None,
        &at("setting the run branch"),
    )?;
    run(
        Some(path),
        &["reset", "--quiet", "--hard", "HEAD"],
        None,
        &at("checking out the base"),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::Git;

    fn git_in(dir: &Path, args: &[&str]) -> String {
        let d = dir.to_string_lossy();
        let full = [&["-C", &*d], args].concat();
        process::run("git", &full, None, GIT_WORKTREE_DEADLINE, "")
            .expect("git")
            .stdout
    }

    #[test]
    fn the_private_repository_holds_only_what_the_base_reaches() {
        let tmp = tempfile::tempdir().expect("tmp");
        let user = tmp.path().join("user");
        let g = Git::init_repo(&user, &[("a.txt", "a\n")], "first").expect("repo");
        let base = g.rev_parse_commit("main").expect("base");
        // Another branch and a stash-like unreachable commit: neither may be copied.
        std::fs::write(user.join("secret.txt"), "other branch only\n").expect("write");
        git_in(&user, &["checkout", "-q", "-b", "other"]);
        git_in(&user, &["add", "secret.txt"]);
        git_in(
            &user,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "-m",
                "other",
            ],
        );
        let other = g.rev_parse_commit("other").expect("other");
        let private = tmp.path().join("run/work");
        std::fs::create_dir_all(tmp.path().join("run")).expect("dir");
        create(&user, &private, "cyclix/t/r", &base).expect("create");
        assert_eq!(
            std::fs::read_to_string(private.join("a.txt")).expect("checked out"),
            "a\n"
        );
        assert!(!private.join("secret.txt").exists());
        let head = git_in(&private, &["symbolic-ref", "HEAD"]);
        assert_eq!(head.trim(), "refs/heads/cyclix/t/r");
        assert_eq!(git_in(&private, &["rev-parse", "HEAD"]).trim(), base);
        let missing = process::run_status(
            "git",
            &["-C", &private.to_string_lossy(), "cat-file", "-e", &other],
            None,
            GIT_WORKTREE_DEADLINE,
            "",
        )
        .expect("runs");
        assert!(
            !missing.status.success(),
            "the other branch's commit was copied"
        );
        assert!(!private.join(".git/hooks").exists(), "no hook templates");
        assert!(!private.join(".git/objects/info/alternates").exists());
        // An existing path is never reused.
        assert!(matches!(
            create(&user, &private, "cyclix/t/r", &base),
            Err(GitError::PathExists { .. })
        ));
    }
}
