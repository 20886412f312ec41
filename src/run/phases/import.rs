//! The import phase of a tier-`container` run: the private repository's commits come back as
//! a bundle (see [`super::super::import`]), checked and fetched into the user's repository as the run
//! branch; the uncommitted work is kept as a diff beside the record.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use super::super::import::{Export, ExportRequest};
use super::super::ledger::Entry;
use super::super::record::{ImportRecord, RunResult};
use super::super::state::RunState;
use crate::run::seam::{RunHost, RunPodman};

/// The run's private repository as the export containers see it (tier `container`): what
/// the gate's checkout and the import need of the run's inputs.
pub(crate) struct PrivateTree<'a> {
    /// The run id.
    pub(crate) run_id: &'a str,
    /// The tenant.
    pub(crate) tenant: &'a str,
    /// The run's private repository.
    pub(crate) worktree: &'a Path,
    /// The run's state directory.
    pub(crate) run_dir: &'a Path,
}

impl PrivateTree<'_> {
    /// An export of `branch` (since `base`; empty: its whole tree) to `out`.
    pub(crate) fn request(&self, branch: &str, base: &str, out: PathBuf) -> ExportRequest {
        ExportRequest {
            run_id: self.run_id.to_string(),
            tenant: self.tenant.to_string(),
            repo: self.worktree.to_path_buf(),
            branch: branch.to_string(),
            base: base.to_string(),
            out,
        }
    }
}

/// What the import phase needs of the run's inputs.
pub(crate) struct ImportInputs<'a> {
    /// The run's private repository.
    pub(crate) tree: PrivateTree<'a>,
    /// The user's repository (the run branch is fetched into it).
    pub(crate) repo: &'a Path,
    /// The tenant's records directory (the import directory and the kept diff go beside the
    /// record); `None`: a twin side.
    pub(crate) records_dir: Option<&'a Path>,
    /// The run branch (`cyclix/TENANT/RUN`), in the private repository and, imported, in the
    /// user's.
    pub(crate) branch: String,
}

/// What the import phase found, for the record.
#[derive(Debug, Default)]
pub(crate) struct Imported {
    /// How the commits came back.
    pub(crate) import: Option<ImportRecord>,
    /// Why they did not (the agent's work was not usable).
    pub(crate) causes: Vec<String>,
    /// Notices (the uncommitted work that could not be kept).
    pub(crate) notices: Vec<String>,
}

/// Runs the export containers and the import; a refused or failed export turns a passing (or
/// gate-failed) run into `AgentFailed` with the reason as a cause: the agent's output was not
/// usable. Only host failures (I/O on cyclix's own files, git not running) are errors.
///
/// # Errors
/// I/O on the import directory, git could not run.
pub(crate) fn import(
    inp: &ImportInputs<'_>,
    host: &dyn RunHost,
    created: &mut RunState,
    base: &str,
    found: &mut Imported,
    result: &mut RunResult,
) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    // On disk beside the record (the run dir is on the runtime tmpfs, which a bundle near the
    // cap could fill); a twin side has no records dir and no import.
    let dir = match inp.records_dir {
        Some(records) => crate::layout::RunFiles::new(records, inp.tree.run_id).import_dir(),
        None => inp.tree.run_dir.join("import"),
    };
    created
        .ledger
        .record(Entry::ImportDir { path: dir.clone() })?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let req = inp.tree.request(&inp.branch, base, dir.join("run.bundle"));
    let mut out = ImportRecord::default();
    match host.export_bundle(&req) {
        Ok(Export::NoCommits) => "no-commits".clone_into(&mut out.outcome),
        Ok(Export::BranchGone) => {
            "branch-gone".clone_into(&mut out.outcome);
            out.reason = format!(
                "the agent deleted or renamed its branch {} in its repository: nothing to import",
                inp.branch
            );
        }
        Ok(Export::Bundle) => {
            let dest = format!("refs/heads/{}", inp.branch);
            let repo = inp.repo;
            created.ledger.record(Entry::Branch {
                refname: dest.clone(),
                base: base.to_string(),
            })?;
            match host.import_bundle(repo, &req.out, &dest, base, &dest)? {
                Ok(tip) => {
                    "imported".clone_into(&mut out.outcome);
                    out.tip.clone_from(&tip);
                    created.branch_made = true;
                }
                Err(why) => {
                    "refused".clone_into(&mut out.outcome);
                    out.reason = why;
                }
            }
        }
        Err(e) => {
            "export-failed".clone_into(&mut out.outcome);
            out.reason = format!("{e:#}");
        }
    }
    let _ = std::fs::remove_file(&req.out);
    // The agent's work did not come back: never a pass that looks as if it had.
    if matches!(
        out.outcome.as_str(),
        "refused" | "export-failed" | "branch-gone"
    ) {
        found.causes.push(format!(
            "the run's commits were not imported ({}): {}",
            out.outcome, out.reason
        ));
        if matches!(*result, RunResult::Passed | RunResult::GateFailed) {
            *result = RunResult::AgentFailed;
        }
    }
    uncommitted(inp, host, &req, &mut out, &mut found.notices);
    found.import = Some(out);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Exports the uncommitted diff and keeps it beside the record when it touches any file.
fn uncommitted(
    inp: &ImportInputs<'_>,
    host: &dyn RunPodman,
    req: &ExportRequest,
    out: &mut ImportRecord,
    notices: &mut Vec<String>,
) {
    let diff_req = ExportRequest {
        out: req.out.with_file_name("uncommitted.diff"),
        ..req.clone()
    };
    match host.export_diff(&diff_req) {
        Ok(0) => {}
        Ok(n) => {
            out.uncommitted_files = n;
            if let Some(dir) = inp.records_dir {
                let kept = crate::layout::RunFiles::new(dir, inp.tree.run_id).uncommitted_diff();
                match std::fs::create_dir_all(dir).and_then(|()| std::fs::rename(&diff_req.out, &kept))
                {
                    Ok(()) => out.uncommitted_diff = Some(kept),
                    Err(e) => notices.push(format!(
                        "the agent left {n} file(s) uncommitted; keeping their diff at {} failed: {e}",
                        kept.display()
                    )),
                }
            }
        }
        Err(e) => notices.push(format!(
            "the agent's uncommitted work could not be read: {e:#}"
        )),
    }
    let _ = std::fs::remove_file(&diff_req.out);
}
