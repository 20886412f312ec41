//! The git side of [`RealRunHost`]: every call delegates to [`crate::git`], in the user's
//! repository or the run's private one as each method says.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use super::super::record::CommitInfo;
use super::super::seam::RunGit;
use super::RealRunHost;
use crate::git::Git;

impl RunGit for RealRunHost {
    fn rev_parse(&self, repo: &Path, rev: &str) -> Result<String> {
        Ok(Git::new(repo).rev_parse_commit(rev)?)
    }
    fn common_dir(&self, repo: &Path) -> Result<PathBuf> {
        Ok(Git::new(repo).common_dir()?)
    }
    fn worktree_add(&self, repo: &Path, path: &Path, branch: &str, commit: &str) -> Result<()> {
        Ok(Git::new(repo).worktree_add(path, branch, commit)?)
    }
    fn worktree_remove(&self, repo: &Path, path: &Path) -> Result<()> {
        Ok(Git::new(repo).worktree_remove(path)?)
    }
    fn commits(&self, repo: &Path, base: &str, branch: &str) -> Result<Vec<CommitInfo>> {
        Ok(crate::git::bundle::commits(repo, base, branch)?
            .into_iter()
            .map(|c| CommitInfo {
                sha: c.sha,
                subject: c.subject,
            })
            .collect())
    }
    fn private_repo(&self, repo: &Path, path: &Path, branch: &str, base: &str) -> Result<()> {
        Ok(crate::git::private::create(repo, path, branch, base)?)
    }
    fn import_bundle(
        &self,
        repo: &Path,
        bundle: &Path,
        want: &str,
        base: &str,
        dest: &str,
    ) -> Result<std::result::Result<String, String>> {
        Ok(crate::git::bundle::import(repo, bundle, want, base, dest)?.map_err(|r| r.0))
    }
    fn repo_state(&self, repo: &Path) -> Result<super::super::repo_state::RepoState> {
        let g = Git::new(repo);
        let mut refs = g.refs()?;
        refs.sort();
        let common = g.common_dir()?;
        let head = std::fs::read_to_string(common.join("HEAD"))
            .map(|h| h.trim().to_string())
            .with_context(|| format!("reading {}", common.join("HEAD").display()))?;
        let mut worktrees = g.worktrees()?;
        worktrees.sort();
        Ok(super::super::repo_state::RepoState {
            refs,
            head,
            files: super::super::repo_state::hash_files(&common),
            worktrees,
        })
    }
    fn refs(&self, repo: &Path) -> Result<Vec<(String, String)>> {
        Ok(Git::new(repo).refs()?)
    }
    fn delete_ref_at(&self, repo: &Path, refname: &str, sha: &str) -> Result<bool> {
        Ok(Git::new(repo).delete_ref_at(refname, sha)?)
    }
    fn in_progress(&self, worktree: &Path) -> Result<Option<String>> {
        Ok(Git::new(worktree).merge_or_rebase_in_progress(worktree)?)
    }
    fn tree_entries(
        &self,
        repo: &Path,
        commit: &str,
        pathspecs: &[String],
    ) -> Result<Vec<(u32, String)>> {
        Ok(Git::new(repo).tree_entries(commit, pathspecs)?)
    }
    fn touched_among(
        &self,
        repo: &Path,
        base: &str,
        tip: &str,
        pathspecs: &[String],
    ) -> Result<Vec<String>> {
        Ok(Git::new(repo).touched_among(base, tip, pathspecs)?)
    }
    fn gate_tree(
        &self,
        repo: &Path,
        base: &str,
        tip: &str,
        pathspecs: &[String],
        scratch: &Path,
    ) -> Result<crate::git::gate_tree::Composed> {
        Ok(Git::new(repo).compose_protected(base, tip, pathspecs, scratch)?)
    }
    fn pack_trees(&self, repo: &Path, trees: &[&str], dir: &Path) -> Result<PathBuf> {
        Ok(Git::new(repo).pack_trees(trees, dir)?)
    }
}
