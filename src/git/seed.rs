//! The repository bundle a Kubernetes run starts from (`cyclix kube-run`, issue 17): the
//! base commit of the user's repository as the run branch `refs/heads/cyclix/TENANT/RUN`, in
//! one `git bundle` (gitformat-bundle(5)) that the runner puts into the run's ConfigMap and
//! the agent Pod's init step clones.
//!
//! The bundle is written by git itself from a throwaway bare repository beside the output
//! whose object store borrows the user's (an `alternates` file) and whose one ref is the run
//! branch at the base: `git bundle create` walks only what that ref reaches, so the user's
//! other branches, tags, stashes and unreachable objects never enter the bundle, and nothing
//! is written into the user's repository.

use std::path::Path;

use super::private::run_to;
use super::{GitError, Result};

/// Writes the bundle of `base` (a full object name) as `refs/heads/BRANCH` to `out` (which
/// must not exist), using `scratch` (an empty directory the caller removes) for the
/// throwaway repository. `common_dir` is the user's common git dir.
///
/// # Errors
/// [`GitError::Io`] writing the scratch repository, [`GitError::Command`] when git fails.
pub fn run_bundle(
    common_dir: &Path,
    base: &str,
    branch: &str,
    scratch: &Path,
    out: &Path,
) -> Result<()> {
    let scratch_repo = scratch.join("seed.git");
    let at = |what: &str| {
        format!(
            "{what} (the run's repository bundle, in {})",
            scratch_repo.display()
        )
    };
    let scratch_repo_path = scratch_repo.to_string_lossy().into_owned();
    run_to(
        None,
        &["init", "--quiet", "--bare", &scratch_repo_path],
        None,
        None,
        &at("creating a scratch repository"),
    )?;
    let alternates = scratch_repo.join("objects/info/alternates");
    let objects = common_dir.join("objects");
    std::fs::write(&alternates, format!("{}\n", objects.display())).map_err(|source| {
        GitError::Io {
            action: format!("writing {}", alternates.display()),
            source,
        }
    })?;
    let dest = format!("refs/heads/{branch}");
    run_to(
        Some(&scratch_repo),
        &["update-ref", "--end-of-options", &dest, base],
        None,
        None,
        &at("setting the run branch"),
    )?;
    let out_s = out.to_string_lossy().into_owned();
    run_to(
        Some(&scratch_repo),
        &["bundle", "create", "--quiet", &out_s, &dest],
        None,
        None,
        &at("writing"),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_holds_the_base_as_the_run_branch_and_nothing_else() {
        let tmp = tempfile::tempdir().expect("tmp");
        let user = tmp.path().join("u");
        let g = crate::git::Git::init_repo(&user, &[("a", "a\n")], "first").expect("repo");
        let base = g.rev_parse_commit("main").expect("base");
        // Another branch the bundle must not carry.
        std::fs::write(user.join("b"), "b\n").expect("write");
        let scratch = tmp.path().join("s");
        std::fs::create_dir(&scratch).expect("scratch");
        let out = tmp.path().join("repo.bundle");
        run_bundle(
            &g.common_dir().expect("common"),
            &base,
            "cyclix/t/r",
            &scratch,
            &out,
        )
        .expect("bundle");
        let bytes = std::fs::read(&out).expect("read");
        let h = crate::git::bundle::parse_header(&bytes).expect("header");
        assert_eq!(
            h.refs,
            vec![(base.clone(), "refs/heads/cyclix/t/r".to_string())]
        );
        assert!(h.prerequisites.is_empty(), "{h:?}");
        // The user's repository got no ref.
        let refs = g.refs().expect("refs");
        assert!(refs.iter().all(|(r, _)| !r.contains("cyclix")), "{refs:?}");
    }
}
