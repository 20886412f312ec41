//! Setup files out of the agent's reach (issue 15, item 2), the run's half: which paths of the
//! base commit are bound read-only into the agent's work tree (resolved at prepare, from the
//! user's repository, never from a tree the agent could write), and which setup paths the
//! run's commits change (after the import, in the user's repository). The delivery holds a
//! run with such changes unless `delivery.allow_setup_changes` (`run::phases::deliver`).
//!
//! The boundary is the delivery: git compares the trees, so a change made with plumbing
//! (`git hash-object -w`, `update-index --cacheinfo`, `commit-tree`) that never touched the
//! work tree is seen like any other. The read-only binds only make a plain write fail at once
//! (EROFS), so the agent learns early.

use std::path::Path;

use anyhow::Result;

use crate::run::seam::RunGit;
use crate::spec::Spec;

/// Most setup paths bound one by one; a glob matching more is refused at prepare (name the
/// directory instead: one bind).
pub const MAX_SETUP_BINDS: usize = 256;

/// git's modes of a regular file (git-fast-import(1), "filemodify").
const REGULAR: [u32; 2] = [0o100_644, 0o100_755];

/// The setup paths of the base commit to bind read-only in the work tree, repository-relative
/// and sorted: per pattern (as `entries_of` lists its tree entries at the base) the path
/// itself when the pattern is literal and names a file or a directory, else each regular file
/// it matches. Symlinks and gitlinks are never bound (their target is resolved on the host);
/// the delivery check covers them. Paths below a bound directory are left out.
///
/// # Errors
/// A pattern matches more than [`MAX_SETUP_BINDS`] files, or a path cannot be carried in a
/// bind mount (`:`, `,`, `=` or a control character in its name); the message names it and
/// the fix.
pub fn bind_targets(
    patterns: &[String],
    mut entries_of: impl FnMut(&str) -> Result<Vec<(u32, String)>>,
) -> Result<Vec<String>> {
    let mut binds: Vec<String> = Vec::new();
    for p in crate::spec::SETUP_ALWAYS
        .iter()
        .map(|s| (*s).to_string())
        .chain(patterns.iter().cloned())
    {
        let body = p.strip_suffix('/').unwrap_or(&p).to_string();
        let entries = entries_of(&p)?;
        let literal = !body.contains(['*', '?', '[']);
        let names_itself = entries.iter().any(|(m, path)| {
            (*path == body && REGULAR.contains(m)) || path.starts_with(&format!("{body}/"))
        });
        if literal && names_itself {
            binds.push(body);
        } else if !literal {
            let files: Vec<String> = entries
                .into_iter()
                .filter(|(m, _)| REGULAR.contains(m))
                .map(|(_, path)| path)
                .collect();
            if files.len() > MAX_SETUP_BINDS {
                anyhow::bail!(
                    "setup: `{p}` matches {} files at the base commit; at most {MAX_SETUP_BINDS} are bound read-only one by one: name their directory instead (`dir/`)",
                    files.len()
                );
            }
            binds.extend(files);
        }
    }
    binds.sort();
    binds.dedup();
    let all = binds.clone();
    binds.retain(|b| {
        !all.iter()
            .any(|d| d != b && b.starts_with(&format!("{d}/")))
    });
    if binds.len() > MAX_SETUP_BINDS {
        anyhow::bail!(
            "setup: {} paths to bind read-only (at most {MAX_SETUP_BINDS}); name directories instead of files",
            binds.len()
        );
    }
    if let Some(bad) = binds.iter().find(|b| {
        b.chars()
            .any(|c| matches!(c, ':' | ',' | '=') || c.is_control())
    }) {
        anyhow::bail!(
            "setup: `{}` cannot be bound read-only: its name holds `:`, `,`, `=` or a control character, which a bind mount cannot carry; rename it or leave it out of `setup:`",
            bad.escape_debug()
        );
    }
    Ok(binds)
}

/// [`bind_targets`] of `spec` at `base` in the user's repository.
///
/// # Errors
/// As [`bind_targets`], or git failed.
pub(crate) fn resolve(spec: &Spec, host: &dyn RunGit, base: &str) -> Result<Vec<String>> {
    let repo = Path::new(&spec.repo.path);
    bind_targets(&spec.setup, |p| {
        host.tree_entries(repo, base, &crate::spec::setup_pathspecs_of(p))
    })
}

/// The setup paths `base..tip` touches in the user's repository (case-insensitively, as a
/// `.CYCLIX/` takes effect on a case-insensitive checkout), sorted.
///
/// # Errors
/// git failed.
pub(crate) fn changes(
    spec: &Spec,
    host: &dyn RunGit,
    base: &str,
    tip: &str,
) -> Result<Vec<String>> {
    let specs = crate::spec::setup_pathspecs(&spec.setup, true);
    host.touched_among(Path::new(&spec.repo.path), base, tip, &specs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> Vec<(u32, String)> {
        vec![
            (0o100_644, ".cyclix/run.yaml".into()),
            (0o100_755, "setup.sh".into()),
            (0o100_644, "ci/a.yml".into()),
            (0o100_644, "ci/sub/b.yml".into()),
            (0o120_000, "link.yml".into()),
            (0o160_000, "vendor/lib".into()),
            (0o100_644, "src/app.py".into()),
        ]
    }

    /// A stand-in for git's matching, enough for the shapes below.
    fn matching(p: &str) -> Vec<(u32, String)> {
        let body = p.trim_end_matches('/');
        let keep = |path: &String| match body.strip_prefix("**/*") {
            Some(ext) => path.ends_with(ext),
            None => path == body || path.starts_with(&format!("{body}/")),
        };
        tree().into_iter().filter(|(_, path)| keep(path)).collect()
    }

    #[test]
    fn literal_paths_bind_themselves_and_globs_their_regular_files() {
        let got = bind_targets(
            &[
                "setup.sh".into(),
                "ci/".into(),
                "**/*.yml".into(),
                "absent".into(),
                "vendor/lib".into(),
            ],
            |p| Ok(matching(p)),
        )
        .expect("binds");
        // `.cyclix` always; `ci` as one directory (its files left out); no symlink, no gitlink.
        assert_eq!(got, [".cyclix", "ci", "setup.sh"]);
    }

    #[test]
    fn a_name_a_bind_cannot_carry_and_too_many_files_are_refused() {
        let odd = |_: &str| Ok(vec![(0o100_644, "a,b.yml".to_string())]);
        let e = bind_targets(&["**/*.yml".into()], odd).expect_err("refused");
        assert!(e.to_string().contains("`a,b.yml` cannot be bound"), "{e}");
        let many = |p: &str| {
            Ok(if p.contains('*') {
                (0..=MAX_SETUP_BINDS)
                    .map(|i| (0o100_644, format!("f{i}.yml")))
                    .collect()
            } else {
                Vec::new()
            })
        };
        let e = bind_targets(&["**/*.yml".into()], many).expect_err("refused");
        assert!(
            e.to_string().contains("name their directory instead"),
            "{e}"
        );
    }
}
