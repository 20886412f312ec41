//! The gate's tree, decided in the user's repository (docs/gate.md): the run's imported tip
//! with every protected path (`gate.protected`) as the base commit has it — changed files put
//! back, deleted ones restored, added ones removed — written as a tree object in a throwaway
//! index, and the objects the gate's checkout needs packed for the container that writes it
//! out ([`crate::run::import`]).
//!
//! Every call runs hardened git ([`super::hardened`]) in the user's repository on objects
//! the import already checked with fsck; none reads a work tree (`read-tree` without `-u`,
//! `update-index --index-info`, `write-tree`, `diff-tree`, `pack-objects`), so no filter,
//! attribute or hook of the agent's applies. Paths travel as bytes (`-z`, a file for
//! git's output, stdin for its input): a name that is not UTF-8 is matched and restored
//! exactly as git has it.

use std::path::{Path, PathBuf};

use super::{GIT_WORKTREE_DEADLINE, Git, GitError, HINT, Result, hardened};
use crate::process::{self, ProcessError};

/// The largest `diff-tree` listing of protected changes read: 64 MiB (bytes).
const LISTING_CAP: u64 = 64 << 20;

/// How a protected path differs on the run's tip from the base commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    /// The tip has it, the base does not: removed from the gate's tree.
    Added,
    /// Both have it with other contents: the base's put back.
    Modified,
    /// The base has it, the tip does not: restored.
    Deleted,
    /// Both have it as another kind of entry (a file became a symlink, …): the base's put back.
    TypeChanged,
}

impl Change {
    /// `added`, `modified`, `deleted`, `type-changed`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Modified => "modified",
            Change::Deleted => "deleted",
            Change::TypeChanged => "type-changed",
        }
    }
}

/// One protected path the run's commits changed, as git names it (bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathChange {
    /// The path in the repository.
    pub path: Vec<u8>,
    /// What happened to it.
    pub change: Change,
}

/// The gate's tree of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Composed {
    /// The tree the gate runs on.
    pub tree: String,
    /// The base commit's tree (what the gate runs on at base).
    pub base_tree: String,
    /// The protected paths the tip changed (empty: `tree` is the tip's own tree).
    pub changes: Vec<PathChange>,
}

/// One record of `git diff-tree -r -z` raw output.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RawChange {
    old_mode: String,
    old_id: String,
    status: u8,
    path: Vec<u8>,
}

/// Parses `git diff-tree -r -z` raw output (`:OLDMODE NEWMODE OLDID NEWID STATUS\0PATH\0` per
/// entry, git-diff-tree(1) "RAW OUTPUT FORMAT", no renames). `None` when it has another shape.
fn parse_raw(raw: &[u8]) -> Option<Vec<RawChange>> {
    let mut out = Vec::new();
    let mut fields = raw.split(|b| *b == 0);
    while let Some(head) = fields.next() {
        if head.is_empty() {
            continue;
        }
        let meta = std::str::from_utf8(head.strip_prefix(b":")?).ok()?;
        let parts: Vec<&str> = meta.split(' ').collect();
        let [old_mode, _new_mode, old_id, _new_id, status] = parts.as_slice() else {
            return None;
        };
        let status = *status.as_bytes().first()?;
        let path = fields.next().filter(|p| !p.is_empty())?;
        out.push(RawChange {
            old_mode: (*old_mode).to_string(),
            old_id: (*old_id).to_string(),
            status,
            path: path.to_vec(),
        });
    }
    Some(out)
}

/// The `update-index -z --index-info` input that turns the tip's index into the gate's:
/// every added path removed first (mode 0), then every other changed path set to the base's
/// entry (a directory/file clash is resolved by git in favour of the entry written last).
fn index_info(changes: &[RawChange], zero: &str) -> Vec<u8> {
    let mut input = Vec::new();
    for c in changes.iter().filter(|c| c.status == b'A') {
        input.extend_from_slice(format!("0 {zero}\t").as_bytes());
        input.extend_from_slice(&c.path);
        input.push(0);
    }
    for c in changes.iter().filter(|c| c.status != b'A') {
        input.extend_from_slice(format!("{} {}\t", c.old_mode, c.old_id).as_bytes());
        input.extend_from_slice(&c.path);
        input.push(0);
    }
    input
}

fn change_of(status: u8) -> Change {
    match status {
        b'A' => Change::Added,
        b'D' => Change::Deleted,
        b'T' => Change::TypeChanged,
        _ => Change::Modified,
    }
}

impl Git {
    /// Runs hardened git in this repository with `index` as `GIT_INDEX_FILE` (when given),
    /// `stdin`, and stdout to `stdout_file` (when given); a non-zero exit is an error naming
    /// `action`.
    fn hardened_call(
        &self,
        args: &[&str],
        index: Option<&Path>,
        stdin: Option<&[u8]>,
        stdout_file: Option<(&Path, u64)>,
        action: &str,
    ) -> Result<process::Output> {
        let dir = self.repo.to_string_lossy();
        let index_s = index.map(|p| p.to_string_lossy().into_owned());
        let mut env: Vec<(&str, Option<&str>)> = hardened::ENV.to_vec();
        if let Some(i) = index_s.as_deref() {
            env.push(("GIT_INDEX_FILE", Some(i)));
        }
        let opts = process::Opts {
            stdin,
            deadline: GIT_WORKTREE_DEADLINE,
            hint: HINT,
            env: &env,
            env_remove_prefixes: &hardened::REMOVE_PREFIXES,
            stdout_file,
        };
        let out =
            process::run_with("git", &hardened::argv(&dir, args), &opts).map_err(|source| {
                GitError::Command {
                    action: action.to_string(),
                    source,
                }
            })?;
        if !out.status.success() {
            return Err(GitError::Command {
                action: action.to_string(),
                source: ProcessError::Failed {
                    argv: format!("git {}", args.join(" ")),
                    status: out.status,
                    stderr: out.stderr.trim().to_string(),
                    stdout: String::new(),
                },
            });
        }
        Ok(out)
    }

    /// The tree `rev` names (`REV^{tree}`), as a full object name.
    fn tree_of(&self, rev: &str) -> Result<String> {
        let spec = format!("{rev}^{{tree}}");
        let action = format!("finding the tree of {rev}");
        let out = self.hardened_call(
            &["rev-parse", "--verify", "--end-of-options", &spec],
            None,
            None,
            None,
            &action,
        )?;
        Ok(out.stdout.trim().to_string())
    }

    /// The gate's tree of a run whose imported tip is `tip` (`base` when it made no
    /// commits): `tip`'s tree with every path among `pathspecs` as `base` has it (see the
    /// module doc). `scratch` is an empty directory of cyclix's for the throwaway index and
    /// git's listing; what it holds is removed before this returns.
    ///
    /// # Errors
    /// [`GitError`] when git fails or its listing has an unexpected shape.
    pub fn compose_protected(
        &self,
        base: &str,
        tip: &str,
        pathspecs: &[String],
        scratch: &Path,
    ) -> Result<Composed> {
        let base_tree = self.tree_of(base)?;
        let tip_tree = self.tree_of(tip)?;
        let listing = scratch.join("protected.raw");
        let index = scratch.join("gate.index");
        let r = self.compose_in(&base_tree, &tip_tree, pathspecs, &listing, &index);
        let _ = std::fs::remove_file(&listing);
        let _ = std::fs::remove_file(&index);
        let (tree, changes) = r?;
        Ok(Composed {
            tree,
            base_tree,
            changes,
        })
    }

    fn compose_in(
        &self,
        base_tree: &str,
        tip_tree: &str,
        pathspecs: &[String],
        listing: &Path,
        index: &Path,
    ) -> Result<(String, Vec<PathChange>)> {
        if pathspecs.is_empty() || base_tree == tip_tree {
            return Ok((tip_tree.to_string(), Vec::new()));
        }
        let action = format!("listing the protected paths {base_tree}..{tip_tree} changes");
        let mut args = vec![
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--ignore-submodules=none",
            base_tree,
            tip_tree,
            "--",
        ];
        args.extend(pathspecs.iter().map(String::as_str));
        let _ = std::fs::remove_file(listing);
        self.hardened_call(&args, None, None, Some((listing, LISTING_CAP)), &action)?;
        let raw = std::fs::read(listing).map_err(|e| GitError::Io {
            action: format!("reading {}", listing.display()),
            source: e,
        })?;
        let changes = parse_raw(&raw).ok_or_else(|| GitError::Output {
            action: action.clone(),
            detail: String::from_utf8_lossy(&raw[..raw.len().min(200)]).into_owned(),
        })?;
        if changes.is_empty() {
            return Ok((tip_tree.to_string(), Vec::new()));
        }
        let zero = "0".repeat(base_tree.len());
        let read = format!("reading tree {tip_tree} into the gate's index");
        self.hardened_call(&["read-tree", tip_tree], Some(index), None, None, &read)?;
        let input = index_info(&changes, &zero);
        let put = "putting the protected paths back as the base has them".to_string();
        self.hardened_call(
            &["update-index", "-z", "--index-info"],
            Some(index),
            Some(&input),
            None,
            &put,
        )?;
        let write = "writing the gate's tree".to_string();
        let out = self.hardened_call(&["write-tree"], Some(index), None, None, &write)?;
        let tree = out.stdout.trim().to_string();
        if tree.len() != base_tree.len() || !tree.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(GitError::Output {
                action: write,
                detail: out.stdout.chars().take(200).collect(),
            });
        }
        let mut list: Vec<PathChange> = changes
            .into_iter()
            .map(|c| PathChange {
                change: change_of(c.status),
                path: c.path,
            })
            .collect();
        list.sort_by(|a, b| a.path.cmp(&b.path));
        Ok((tree, list))
    }

    /// Packs every object `trees` reach into `objects/pack/` under `dir` (created), the
    /// object directory the gate's checkout container reads as an alternate; returns that
    /// `objects` directory. No delta search (`--window=0`): the pack is read once.
    ///
    /// # Errors
    /// [`GitError`] when the directory cannot be made or git fails.
    pub fn pack_trees(&self, trees: &[&str], dir: &Path) -> Result<PathBuf> {
        let objects = dir.join("objects");
        let pack = objects.join("pack");
        std::fs::create_dir_all(&pack).map_err(|e| GitError::Io {
            action: format!("creating {}", pack.display()),
            source: e,
        })?;
        let prefix = pack.join("gate").to_string_lossy().into_owned();
        let mut input = String::new();
        for t in trees {
            input.push_str(t);
            input.push('\n');
        }
        let action = format!(
            "packing the objects of the gate's trees {}",
            trees.join(", ")
        );
        self.hardened_call(
            &["pack-objects", "--revs", "--window=0", "-q", &prefix],
            None,
            Some(input.as_bytes()),
            None,
            &action,
        )?;
        Ok(objects)
    }
}

/// `path` as text for a record or a summary: lossy UTF-8, control characters escaped.
#[must_use]
pub fn display_path(path: &[u8]) -> String {
    crate::text::printable(&String::from_utf8_lossy(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_records_keep_the_base_side_and_the_path_as_bytes() {
        let raw = b":100644 000000 aaaa 0000 D\0tests/test_a.py\0:000000 100644 0000 bbbb A\0tests/\xff.py\0:100644 120000 cccc dddd T\0pytest.ini\0";
        let got = parse_raw(raw).expect("parsed");
        assert_eq!(got.len(), 3);
        assert_eq!(got[1].path, b"tests/\xff.py");
        assert_eq!((got[2].old_mode.as_str(), got[2].status), ("100644", b'T'));
        assert_eq!(parse_raw(b""), Some(vec![]));
        assert_eq!(parse_raw(b"garbage\0x\0"), None);
        assert_eq!(parse_raw(b":100644 0 a b M\0"), None);
    }

    #[test]
    fn added_paths_are_removed_before_the_base_entries_are_put_back() {
        let raw =
            b":100644 000000 aaaa 0000 D\0tests/test_a.py\0:000000 120000 0000 bbbb A\0tests\0";
        let got = index_info(&parse_raw(raw).expect("parsed"), "0000");
        assert_eq!(
            got,
            b"0 0000\ttests\x00100644 aaaa\ttests/test_a.py\x00".to_vec()
        );
    }

    /// `git -C repo ARGS` in a test, stdout.
    fn git(repo: &Path, args: &[&str]) -> String {
        let d = repo.to_string_lossy();
        let full = [
            &["-C", &*d, "-c", "user.name=t", "-c", "user.email=t@t"][..],
            args,
        ]
        .concat();
        let out =
            process::run("git", &full, None, super::super::GIT_QUERY_DEADLINE, "").expect("git");
        out.stdout
    }

    /// Every path of tree `tree` with its blob's text (symlinks as `-> TARGET`).
    fn files(repo: &Path, tree: &str) -> Vec<String> {
        git(repo, &["ls-tree", "-r", "--name-only", tree])
            .lines()
            .map(|p| {
                let text = git(repo, &["cat-file", "-p", &format!("{tree}:{p}")]);
                format!("{p}={}", text.trim())
            })
            .collect()
    }

    #[test]
    fn the_gate_tree_has_the_base_protected_paths_whatever_the_tip_did() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo = tmp.path().join("r");
        let g = Git::init_repo(
            &repo,
            &[
                ("calc.py", "broken"),
                ("tests/test_calc.py", "real test"),
                ("pytest.ini", "[pytest]"),
                ("docs/x.md", "doc"),
            ],
            "base",
        )
        .expect("init");
        let base = g.rev_parse_commit("main").expect("base");
        // The tip: the code fixed (kept), the test deleted, a conftest and a test added,
        // pytest.ini changed, `tests` replaced by a symlink next to a file under it.
        git(&repo, &["rm", "-q", "tests/test_calc.py", "pytest.ini"]);
        std::fs::write(repo.join("calc.py"), "fixed").expect("w");
        std::fs::write(repo.join("conftest.py"), "hook").expect("w");
        std::fs::write(repo.join("PYTEST.INI"), "[pytest]").expect("w");
        std::fs::write(repo.join("pytest.ini"), "[pytest]\naddopts = -k nothing").expect("w");
        std::fs::create_dir_all(repo.join("t2")).expect("d");
        std::fs::write(repo.join("t2/test_new.py"), "new").expect("w");
        std::os::unix::fs::symlink("t2", repo.join("tests")).expect("ln");
        git(&repo, &["add", "--all"]);
        git(&repo, &["commit", "-qm", "tip"]);
        let tip = g.rev_parse_commit("main").expect("tip");
        let specs: Vec<String> = ["tests", "**/conftest.py", "pytest.ini", "**/test_*.py"]
            .iter()
            .map(|p| format!(":(glob,icase){p}"))
            .collect();
        let scratch = tmp.path().join("scratch");
        std::fs::create_dir(&scratch).expect("scratch");
        let c = g
            .compose_protected(&base, &tip, &specs, &scratch)
            .expect("composed");
        assert_eq!(
            files(&repo, &c.tree),
            [
                "calc.py=fixed",
                "docs/x.md=doc",
                "pytest.ini=[pytest]",
                "tests/test_calc.py=real test"
            ]
        );
        let changes: Vec<(String, &str)> = c
            .changes
            .iter()
            .map(|p| (display_path(&p.path), p.change.as_str()))
            .collect();
        assert_eq!(
            changes,
            [
                ("PYTEST.INI".to_string(), "added"),
                ("conftest.py".to_string(), "added"),
                ("pytest.ini".to_string(), "modified"),
                ("t2/test_new.py".to_string(), "added"),
                ("tests".to_string(), "added"),
                ("tests/test_calc.py".to_string(), "deleted"),
            ]
        );
        assert_eq!(std::fs::read_dir(&scratch).expect("ls").count(), 0);
        // Control: nothing protected, the tip's own tree; no commits, the base's.
        let same = g
            .compose_protected(&base, &tip, &[], &scratch)
            .expect("tip");
        assert_eq!(same.tree, git(&repo, &["rev-parse", "HEAD^{tree}"]).trim());
        let none = g
            .compose_protected(&base, &base, &specs, &scratch)
            .expect("base");
        assert_eq!(
            (none.tree.as_str(), none.changes.len()),
            (c.base_tree.as_str(), 0)
        );
        // The pack holds both trees' objects.
        let objects = g
            .pack_trees(&[&c.tree, &c.base_tree], &tmp.path().join("pack"))
            .expect("packed");
        let packs: Vec<String> = std::fs::read_dir(objects.join("pack"))
            .expect("ls")
            .map(|e| e.expect("e").file_name().to_string_lossy().into_owned())
            .filter(|n| {
                Path::new(n)
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("idx"))
            })
            .collect();
        assert_eq!(packs.len(), 1, "{packs:?}");
    }
}
