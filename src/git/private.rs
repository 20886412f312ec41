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
    run_to(dir, args, stdin, None, action)
}

/// [`run`] with stdout into a new file instead of captured.
pub(super) fn run_to(
    dir: Option<&Path>,
    args: &[&str],
    stdin: Option<&[u8]>,
    stdout_file: Option<&Path>,
    action: &str,
) -> Result<String> {
    let dir_s = dir.map(|d| d.to_string_lossy().into_owned());
    let mut full: Vec<&str> = Vec::new();
    if let Some(d) = &dir_s {
        full.extend(["-C", d.as_str()]);
    }
    full.extend(SAFE_CONFIG);
    full.extend(args);
    process::run_with_ok(
        "git",
        &full,
        &process::Opts {
            stdin,
            deadline: GIT_WORKTREE_DEADLINE,
            hint: HINT,
            env_remove_prefixes: &["GIT_"],
            stdout_file: stdout_file.map(|f| (f, u64::MAX)),
            ..process::Opts::default()
        },
    )
    .map(|o| o.stdout)
    .map_err(|source| GitError::Command {
        action: action.to_string(),
        source,
    })
}

/// Packs what `base` reaches in `user_repo` into `path`'s `pack_dir` (see the module doc).
fn copy_objects(user_repo: &Path, path: &Path, pack_dir: &Path, base: &str) -> Result<()> {
    let at = |what: &str| format!("{what} for the run's private repository {}", path.display());
    // `--stdout` into a file of the new repository, then `index-pack` there: nothing is
    // written into the user's repository (a pack-objects with a base name would stage its
    // temporary file in the user's objects dir, and fail across file systems).
    let base_line = format!("{base}\n");
    let incoming = pack_dir.join("incoming.pack");
    run_to(
        Some(user_repo),
        &[
            "pack-objects",
            "--revs",
            "--quiet",
            "--delta-base-offset",
            "--stdout",
        ],
        Some(base_line.as_bytes()),
        Some(&incoming),
        &at("copying the objects the base reaches"),
    )?;
    let hash = run(
        Some(path),
        &["index-pack", &incoming.to_string_lossy()],
        None,
        &at("indexing the objects"),
    )?;
    let hash = hash.trim().trim_start_matches("pack\t");
    if !hash.bytes().all(|b| b.is_ascii_hexdigit()) || hash.is_empty() {
        return Err(GitError::Output {
            action: at("indexing the objects"),
            detail: format!("index-pack printed {hash:?}"),
        });
    }
    // The pack, its index and whatever else index-pack wrote beside them (git >= 2.41 writes a
    // reverse index `.rev` by default): each renamed with the pack, or git in the sandbox warns
    // "no corresponding .idx or .pack" about a stray `incoming.rev` (issue 31).
    for ext in ["pack", "idx", "rev", "bitmap", "mtimes", "promisor"] {
        let from = pack_dir.join(format!("incoming.{ext}"));
        if !matches!(ext, "pack" | "idx") && !from.exists() {
            continue;
        }
        let to = pack_dir.join(format!("pack-{hash}.{ext}"));
        std::fs::rename(&from, &to).map_err(|source| GitError::Io {
            action: format!("renaming {} to {}", from.display(), to.display()),
            source,
        })?;
    }
    Ok(())
}

/// Creates the private repository of a run at `path` (which must not exist, or be an empty
/// directory, not a symlink: a pooled environment's work tree, bound into its held agent
/// container, is filled in place, `run::pool::held`): a new repository
/// with the user repository's object format, holding the objects `base` reaches, on branch
/// `branch` at `base`, its work tree checked out. Hooks templates are not copied
/// (`--template=`).
///
/// # Errors
/// [`GitError::PathExists`], [`GitError::BadBranchName`], [`GitError::Command`] (e.g. `base`
/// is not a commit of `user_repo`), [`GitError::Io`].
pub fn create(user_repo: &Path, path: &Path, branch: &str, base: &str) -> Result<()> {
    super::check_branch(branch)?;
    let empty_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
        && std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none());
    if path.symlink_metadata().is_ok() && !empty_dir {
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
    copy_objects(user_repo, path, &pack_dir, base)?;
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

    fn walk(d: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(d)
            .expect("dir")
            .filter_map(std::result::Result::ok)
        {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p.display().to_string());
            }
        }
        out
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
        let listing = |d: &Path| {
            let mut v: Vec<String> = walk(d);
            v.sort();
            v
        };
        let objects_before = listing(&user.join(".git/objects"));
        create(&user, &private, "cyclix/t/r", &base).expect("create");
        // Nothing was written into the user's repository (not even a temporary pack).
        assert_eq!(listing(&user.join(".git/objects")), objects_before);
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
        // Every file of the pack is renamed with it: no stray `incoming.*` that git warns
        // about, and the repository is whole.
        let packs = listing(&private.join(".git/objects/pack"));
        assert!(
            packs.iter().all(|f| f.contains("pack-")),
            "a pack file kept its temporary name: {packs:?}"
        );
        assert!(
            packs
                .iter()
                .any(|f| Path::new(f).extension().is_some_and(|e| e == "pack")),
            "{packs:?}"
        );
        let fsck = process::run_status(
            "git",
            &[
                "-C",
                &private.to_string_lossy(),
                "fsck",
                "--strict",
                "--no-dangling",
            ],
            None,
            GIT_WORKTREE_DEADLINE,
            "",
        )
        .expect("runs");
        assert!(fsck.status.success(), "{fsck:?}");
        let garbage = git_in(&private, &["count-objects", "-v"]);
        assert!(garbage.contains("\ngarbage: 0\n"), "{garbage}");
        assert!(!private.join(".git/objects/info/alternates").exists());
        // An existing path is never reused.
        assert!(matches!(
            create(&user, &private, "cyclix/t/r", &base),
            Err(GitError::PathExists { .. })
        ));
    }
}
