//! The gate phases of a tier-`container` run (docs/gate.md), after the import: the gate's
//! trees are decided in the user's repository and written out by a git container
//! ([`super::super::import::run_fill`]), never taken from a tree the agent could write; with
//! `gate.protected`, every protected path is the base's, the gate also runs on the base tree
//! (phase `gate-base`, or its kept inventory: [`super::super::gate_cache`]) and the two
//! per-test inventories are compared ([`crate::gate::judge`]). The phases return a
//! [`GateReport`]; the lifecycle folds it into the record.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context as _, Result};

use super::super::gate_cache;
use super::super::import::FillRequest;
use super::super::inputs::Deadlines;
use super::super::ledger::{Entry, Ledger};
use super::super::record::{BaseInventory, GateInventory, ProtectedChange, RunResult};
use super::super::state::Recorder;
use super::agent::run_to_end;
use crate::gate::{Results, Verdict};
use crate::run::seam::{RunHost, RunPodman};
use crate::systemd::UnitManager;
use crate::twin::{Counts, TestCase};

/// The largest results file read: 64 MiB (bytes).
pub const MAX_RESULTS_BYTES: u64 = 64 << 20;

/// What the gate phases need of the run's inputs.
pub(crate) struct GateInputs<'a> {
    /// The run id.
    pub(crate) run_id: &'a str,
    /// The tenant.
    pub(crate) tenant: &'a str,
    /// The user's repository (the trees are decided there).
    pub(crate) repo: &'a Path,
    /// The run's private repository (the gate's trees go beside it).
    pub(crate) worktree: &'a Path,
    /// The run's state directory (the results directories).
    pub(crate) run_dir: &'a Path,
    /// The tenant's records directory (the packed objects, the kept base inventories);
    /// `None`: the run directory, nothing kept.
    pub(crate) records_dir: Option<&'a Path>,
    /// The gate as the run renders it (a built image's reference included).
    pub(crate) gate: &'a crate::spec::Gate,
    /// Deadlines.
    pub(crate) deadlines: Deadlines,
    /// Set by SIGTERM/SIGINT.
    pub(crate) interrupted: &'a AtomicBool,
}

/// What the gate phases found, for the record.
#[derive(Debug, Default)]
pub(crate) struct GateReport {
    /// `Passed`, `GateFailed`, `GateWeakened`, or `SetupBroken` (the base tree's run left no
    /// per-test results to count).
    pub(crate) result: Option<RunResult>,
    /// The gate's exit status on the agent's tree, when it ran.
    pub(crate) exit: Option<i32>,
    /// The protected paths the run's commits changed.
    pub(crate) protected_changes: Vec<ProtectedChange>,
    /// The inventories compared.
    pub(crate) inventory: Option<GateInventory>,
    /// Causes for the record.
    pub(crate) causes: Vec<String>,
    /// Notices for the record.
    pub(crate) notices: Vec<String>,
}

/// The two trees the gate's containers read, written out from the user's repository.
struct Trees {
    /// The agent's tree as the gate runs it.
    tree: String,
    /// The base commit's tree.
    base_tree: String,
    /// Where their objects are packed.
    objects: PathBuf,
}

/// The gate's pathspecs of `protected` (`:(glob,icase)P`: as `setup:` matches at delivery,
/// case-insensitively, so a `CONFTEST.py` that takes effect on a case-insensitive checkout is
/// removed and held like a `conftest.py`).
fn pathspecs(protected: &[String]) -> Vec<String> {
    protected
        .iter()
        .map(|p| format!(":(glob,icase){}", p.strip_suffix('/').unwrap_or(p)))
        .collect()
}

/// The gate phases of a tier-`container` run whose commits are imported as `tip` (`base`
/// when it made none): phase `gate-base` (with `gate.protected`), then phase `gate`.
///
/// # Errors
/// git, podman or the unit manager failed, or a unit ran past its budget.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    inp: &GateInputs<'_>,
    units: &dyn UnitManager,
    host: &dyn RunHost,
    r: &mut Recorder,
    ledger: &mut Ledger,
    names: &crate::render::plan::UnitNames,
    base: &str,
    tip: &str,
) -> Result<GateReport> {
    let mut report = GateReport::default();
    let budget = Duration::from_secs(inp.gate.timeout_s) + inp.deadlines.slack;
    let protected = !inp.gate.protected.is_empty();
    let mut trees: Option<Trees> = None;
    let mut base_tests: Vec<TestCase> = Vec::new();
    if let Some(unit) = names.gate_base.as_deref().filter(|_| protected) {
        let inventory = r.phase("gate-base", || {
            let t = write_trees(inp, host, ledger, base, tip, &mut report)?;
            let inv = base_inventory(inp, units, host, ledger, unit, &t, budget)?;
            trees = Some(t);
            Ok(inv)
        })?;
        match inventory {
            Ok((b, tests)) => {
                base_tests = tests;
                report.inventory = Some(GateInventory {
                    base: b,
                    results: String::new(),
                    counts: None,
                    verdict: Verdict::Failed,
                    weakened: Vec::new(),
                    weakened_total: 0,
                    new_tests: Vec::new(),
                    new_total: 0,
                    contradiction: None,
                });
            }
            Err(why) => {
                report.causes.push(why);
                report.result = Some(RunResult::SetupBroken);
                return Ok(report);
            }
        }
    }
    let exit = r.phase("gate", || {
        if trees.is_none() {
            trees = Some(write_trees(inp, host, ledger, base, tip, &mut report)?);
        }
        results_dir(inp.run_dir, false)?;
        match run_to_end(units, &names.gate, inp.deadlines, budget, inp.interrupted) {
            Ok(exit) => Ok(Some(exit)),
            Err(e) if super::agent::ran_out_of_time(&e) => Ok(None),
            Err(e) => Err(e),
        }
    })?;
    if let Some(t) = &trees {
        let _ = std::fs::remove_dir_all(t.objects.parent().unwrap_or(&t.objects));
    }
    // A gate that ran out of its time did not pass: the gate's verdict, not cyclix's failure.
    let Some(exit) = exit else {
        report.causes.push(format!(
            "the gate ran past `gate.timeout` ({} s) and was stopped: the agent's work did not \
             pass in time; raise `gate.timeout` in the tenant's spec if the suite needs longer",
            inp.gate.timeout_s
        ));
        report.result = Some(RunResult::GateFailed);
        return Ok(report);
    };
    report.exit = Some(exit);
    report.result = Some(if exit == 0 {
        RunResult::Passed
    } else {
        RunResult::GateFailed
    });
    if let Some(inv) = report.inventory.as_mut() {
        let results = results_of(&results_file(inp.run_dir, false));
        let j = crate::gate::judge(&base_tests, exit, &results);
        inv.results = match &results {
            Results::Tests(_) => "junit".into(),
            Results::Missing => "missing".into(),
            Results::Unreadable(why) => format!("unreadable: {why}"),
        };
        inv.counts = j.counts;
        inv.verdict = j.verdict;
        inv.weakened_total = j.weakened.len();
        inv.weakened = j
            .weakened
            .into_iter()
            .take(crate::gate::MAX_LISTED)
            .collect();
        inv.new_total = j.new_tests.len();
        inv.new_tests = j
            .new_tests
            .into_iter()
            .take(crate::gate::MAX_LISTED)
            .collect();
        inv.contradiction = j.contradiction;
        if j.verdict == Verdict::Weakened {
            report.result = Some(RunResult::GateWeakened);
        }
    }
    Ok(report)
}

/// Writes the gate's tree of a twin side (no agent ran: the base commit's tree) as a run's
/// gate phases do, from the user's repository.
///
/// # Errors
/// git or podman failed.
pub(crate) fn checkout_base(
    inp: &GateInputs<'_>,
    host: &dyn RunHost,
    ledger: &mut Ledger,
    base: &str,
) -> Result<()> {
    let mut report = GateReport::default();
    let t = write_trees(inp, host, ledger, base, base, &mut report)?;
    let _ = std::fs::remove_dir_all(t.objects.parent().unwrap_or(&t.objects));
    Ok(())
}

/// Decides the gate's trees in the user's repository, packs their objects and writes the
/// agent's (and, with `gate.protected`, the base's) tree out beside the private repository.
/// The protected changes go into `report`.
fn write_trees(
    inp: &GateInputs<'_>,
    host: &dyn RunHost,
    ledger: &mut Ledger,
    base: &str,
    tip: &str,
    report: &mut GateReport,
) -> Result<Trees> {
    let scratch = match inp.records_dir {
        Some(d) => crate::layout::RunFiles::new(d, inp.run_id).gate_objects(),
        None => inp.run_dir.join("gate-objects"),
    };
    ledger.record(Entry::ImportDir {
        path: scratch.clone(),
    })?;
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let specs = pathspecs(&inp.gate.protected);
    let composed = host.gate_tree(inp.repo, base, tip, &specs, &scratch)?;
    report.protected_changes = composed
        .changes
        .iter()
        .map(|c| ProtectedChange {
            path: crate::git::gate_tree::display_path(&c.path),
            change: c.change.as_str().to_string(),
        })
        .collect();
    let protected = !inp.gate.protected.is_empty();
    let mut wanted = vec![composed.tree.as_str()];
    if protected && composed.base_tree != composed.tree {
        wanted.push(composed.base_tree.as_str());
    }
    let objects = host.pack_trees(inp.repo, &wanted, &scratch)?;
    let trees = Trees {
        tree: composed.tree.clone(),
        base_tree: composed.base_tree.clone(),
        objects,
    };
    fill(
        inp,
        host,
        ledger,
        &trees,
        &trees.tree,
        &crate::layout::gate_tree(inp.worktree),
        "fill-gate",
    )?;
    Ok(trees)
}

/// Writes `tree` into the new directory `dest` (in the ledger before it exists).
fn fill(
    inp: &GateInputs<'_>,
    host: &dyn RunPodman,
    ledger: &mut Ledger,
    trees: &Trees,
    tree: &str,
    dest: &Path,
    role: &str,
) -> Result<()> {
    ledger.record(Entry::GateTree {
        path: dest.to_path_buf(),
    })?;
    std::fs::create_dir(dest).with_context(|| format!("creating {}", dest.display()))?;
    host.fill_tree(&FillRequest {
        run_id: inp.run_id.to_string(),
        tenant: inp.tenant.to_string(),
        role: role.to_string(),
        objects: trees.objects.clone(),
        tree: tree.to_string(),
        attr_tree: trees.base_tree.clone(),
        out: dest.to_path_buf(),
        log: inp.run_dir.join(format!("{role}.out")),
    })
}

/// The base's inventory: kept from an earlier run with the same inputs, or made now by the
/// gate's run on the base tree (`unit`), then kept. `Ok(Err(why))` when that run left no
/// per-test results to count.
fn base_inventory(
    inp: &GateInputs<'_>,
    units: &dyn UnitManager,
    host: &dyn RunHost,
    ledger: &mut Ledger,
    unit: &str,
    trees: &Trees,
    budget: Duration,
) -> Result<std::result::Result<(BaseInventory, Vec<TestCase>), String>> {
    let image = gate_image_id(host, inp.gate)?;
    let inputs = gate_cache::Inputs {
        tree: trees.base_tree.clone(),
        image,
        argv: inp.gate.command.clone(),
    };
    let cache_dir = inp
        .records_dir
        .map(|d| crate::layout::RunFiles::new(d, inp.run_id).gate_base_cache());
    if let Some(c) = cache_dir
        .as_deref()
        .and_then(|d| gate_cache::load(d, &inputs))
    {
        return Ok(Ok((
            BaseInventory {
                tree: trees.base_tree.clone(),
                source: "cached".into(),
                run_id: c.run_id,
                exit: c.exit,
                counts: Counts::of(&c.tests),
            },
            c.tests,
        )));
    }
    fill(
        inp,
        host,
        ledger,
        trees,
        &trees.base_tree,
        &crate::layout::gate_base_tree(inp.worktree),
        "fill-gate-base",
    )?;
    results_dir(inp.run_dir, true)?;
    let exit = match run_to_end(units, unit, inp.deadlines, budget, inp.interrupted) {
        Ok(exit) => exit,
        // The base's own tests ran past `gate.timeout`: the project's setup, not cyclix.
        Err(e) if super::agent::ran_out_of_time(&e) => {
            return Ok(Err(format!(
                "the gate did not finish on the base tree within gate.timeout ({} s): the \
                 base's own tests ran too long, so they cannot be counted; raise \
                 `gate.timeout` or make the suite faster",
                inp.gate.timeout_s
            )));
        }
        Err(e) => return Err(e),
    };
    let results = results_of(&results_file(inp.run_dir, true));
    if let Some(why) = crate::gate::base_unusable(&results) {
        let last = host
            .output(unit)
            .map(|c| super::collect::tail(&c))
            .unwrap_or_default();
        let last: Vec<&String> = last.iter().rev().take(5).rev().collect();
        return Ok(Err(format!(
            "{why} (the gate exited {exit} on the base tree; its last lines: {last:?})"
        )));
    }
    let Results::Tests(tests) = results else {
        return Ok(Err("invariant: usable base results are tests".into()));
    };
    if let Some(dir) = cache_dir.as_deref() {
        let kept = gate_cache::Cached {
            version: 1,
            inputs,
            run_id: inp.run_id.to_string(),
            exit,
            tests: tests.clone(),
        };
        if let Err(e) = gate_cache::store(dir, &kept) {
            tracing::warn!("keeping the gate's base inventory: {e:#}");
        }
    }
    Ok(Ok((
        BaseInventory {
            tree: trees.base_tree.clone(),
            source: "ran".into(),
            run_id: inp.run_id.to_string(),
            exit,
            counts: Counts::of(&tests),
        },
        tests,
    )))
}

/// The gate image's identity for the cache key: its digest when the spec pins one, else the
/// local image's id.
fn gate_image_id(host: &dyn RunPodman, gate: &crate::spec::Gate) -> Result<String> {
    let reference = gate.image.reference();
    match reference.split_once("@sha256:") {
        Some(_) => Ok(reference.to_string()),
        None => host.image_id(reference),
    }
}

/// Creates the (empty) results directory of the gate's run on the agent's tree (`base`:
/// the base tree), writable for the gate's (possibly non-root, mapped) user; the run dir
/// around it keeps others out.
///
/// # Errors
/// I/O on the run directory.
pub(crate) fn results_dir(run_dir: &Path, base: bool) -> Result<PathBuf> {
    let dir = crate::layout::gate_results_dir(run_dir, base);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .with_context(|| format!("setting the mode of {}", dir.display()))?;
    Ok(dir)
}

fn results_file(run_dir: &Path, base: bool) -> PathBuf {
    crate::layout::gate_results_dir(run_dir, base).join(crate::twin::RESULTS_FILE)
}

/// What the gate left at `path`: its `JUnit` test cases, none, or why they cannot be read.
#[must_use]
pub(crate) fn results_of(path: &Path) -> Results {
    match read_results(path) {
        Ok(None) => Results::Missing,
        Ok(Some(text)) => match crate::twin::junit::parse(&text) {
            Ok(tests) => Results::Tests(tests),
            Err(why) => Results::Unreadable(why),
        },
        Err(e) => Results::Unreadable(format!("{e:#}")),
    }
}

/// Reads the results file a gate wrote: `None` if there is none. It is never followed as a
/// symlink (the sandbox wrote it), must be a regular file of at most [`MAX_RESULTS_BYTES`]
/// and UTF-8.
///
/// # Errors
/// The file is a symlink, not a regular file, too large, not UTF-8, or unreadable.
pub(crate) fn read_results(path: &Path) -> Result<Option<String>> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = match std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "opening {} (a symlink is refused: the sandbox wrote it)",
                    path.display()
                )
            });
        }
    };
    let meta = f
        .metadata()
        .with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        anyhow::bail!("{} is not a regular file", path.display());
    }
    if meta.len() > MAX_RESULTS_BYTES {
        anyhow::bail!(
            "{} is {} bytes, more than {MAX_RESULTS_BYTES}",
            path.display(),
            meta.len()
        );
    }
    let mut text = String::new();
    f.take(MAX_RESULTS_BYTES)
        .read_to_string(&mut text)
        .with_context(|| format!("reading {} as UTF-8", path.display()))?;
    Ok(Some(text))
}
