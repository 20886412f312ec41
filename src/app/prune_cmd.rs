//! `cyclix prune [TENANT] (--keep N | --older-than D) [--force | --keep-branches N]
//! [--dry-run]` (issue 19, item 10): removes old runs — their record, logs and run branch —
//! from `$XDG_STATE_HOME/cyclix/runs/TENANT/` and the tenant's repository.
//!
//! What is never removed: the newest run of a tenant (what `cyclix status` shows), a run with
//! a `RUN.running` marker (in progress, or dead and waiting for convergence), and a run branch
//! that is neither in the history of `repo.base` nor of any remote-tracking ref
//! (`refs/remotes/*`: pushed) — the only copy of an agent's work — unless the user said so:
//! `--force` (every such branch of the chosen runs) or `--keep-branches N` (such branches
//! older than the newest N runs that made a branch: nightly runs' branches, issue 32 item 3).

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::git::Git;
use crate::run::record::{self, RunRecord};

/// Which runs a prune takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Keep the newest N runs (N >= 1).
    Keep(usize),
    /// Remove runs that started more than this many seconds ago.
    OlderThanS(u64),
}

/// What a prune does with a run branch that is the only copy of its work (neither in
/// `repo.base` nor pushed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmerged {
    /// Keep it, and its run (the default).
    Keep,
    /// Keep those of the newest N runs whose branch is still the only copy (N >= 1); older
    /// ones go when the branch is as the run left it.
    KeepNewest(usize),
    /// Delete it with its run (`--force`).
    Delete,
}

impl Unmerged {
    /// The policy `--force` and `--keep-branches N` name (clap refuses both at once).
    ///
    /// # Errors
    /// `--keep-branches 0` (say `--force` for that).
    pub fn from_flags(force: bool, keep_branches: Option<usize>) -> Result<Self> {
        match (force, keep_branches) {
            (true, _) => Ok(Self::Delete),
            (false, Some(0)) => Err(crate::exit::input(
                "--keep-branches 0 would delete every unmerged, unpushed run branch of the chosen runs; say --force for that, or --keep-branches 1 or more",
            )),
            (false, Some(n)) => Ok(Self::KeepNewest(n)),
            (false, None) => Ok(Self::Keep),
        }
    }
}

/// One run of a tenant as its files show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFiles {
    /// The run id.
    pub run_id: String,
    /// When it started (its record's first phase), ms since the Unix epoch; `None` without a
    /// readable record.
    pub started_ms: Option<u128>,
    /// The run branch its record names (it made commits), if any.
    pub branch: Option<String>,
    /// The run's last commit (where it left its branch), if it made any.
    pub tip: Option<String>,
    /// Its files in the tenant's records directory (record, logs, diff, phase note).
    pub files: Vec<PathBuf>,
    /// It has a `RUN.running` marker: never pruned.
    pub marker: bool,
}

/// Parses `--older-than`: a number of days (`30d`) or a duration (`12h`, `90m`, `1h30m`).
///
/// # Errors
/// Another shape, with the forms that work.
pub fn older_than_s(text: &str) -> Result<u64> {
    if let Some(days) = text.strip_suffix('d')
        && let Ok(n) = days.parse::<u64>()
    {
        return Ok(n.saturating_mul(86_400));
    }
    crate::spec::duration_s(text)
        .map_err(|e| crate::exit::input(format!("--older-than: {e}, or days like `30d`")))
}

/// `runs` newest first: by start time, then run id (ids start with their UTC time).
fn newest_first(runs: &[RunFiles]) -> Vec<&RunFiles> {
    let mut order: Vec<&RunFiles> = runs.iter().collect();
    order.sort_by(|a, b| {
        b.started_ms
            .cmp(&a.started_ms)
            .then_with(|| b.run_id.cmp(&a.run_id))
    });
    order
}

/// The runs whose branch `--keep-branches n` keeps: the newest `n` runs whose branch is still
/// the only copy of its work (`only_copy`: it exists, neither merged nor pushed; a merged or
/// deleted branch does not take a place). Pure but for `only_copy`.
///
/// # Errors
/// What `only_copy` returns (git failing).
pub fn branch_keepers(
    runs: &[RunFiles],
    n: usize,
    mut only_copy: impl FnMut(&str) -> Result<bool>,
) -> Result<Vec<String>> {
    let mut keep = Vec::new();
    for r in newest_first(runs) {
        if keep.len() == n {
            break;
        }
        if let Some(b) = &r.branch
            && only_copy(b)?
        {
            keep.push(r.run_id.clone());
        }
    }
    Ok(keep)
}

/// The runs `rule` takes from `runs` at `now_ms`: never the newest, never one with a marker.
/// Newest is by start time, then run id (ids start with their UTC time). Pure.
#[must_use]
pub fn chosen(runs: &[RunFiles], rule: Rule, now_ms: u128) -> Vec<String> {
    newest_first(runs)
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(i, r)| {
            !r.marker
                && match rule {
                    Rule::Keep(n) => *i >= n,
                    Rule::OlderThanS(s) => r
                        .started_ms
                        .is_some_and(|t| now_ms.saturating_sub(t) > u128::from(s) * 1000),
                }
        })
        .map(|(_, r)| r.run_id.clone())
        .collect()
}

/// The runs whose files are in `dir` (a tenant's records directory).
#[must_use]
pub fn runs_in(dir: &Path) -> Vec<RunFiles> {
    let mut runs = std::collections::BTreeMap::<String, RunFiles>::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((run, ext)) = crate::layout::parse_run_file(&name) else {
            continue;
        };
        let r = runs.entry(run.to_owned()).or_insert_with(|| RunFiles {
            run_id: run.to_owned(),
            started_ms: None,
            branch: None,
            tip: None,
            files: Vec::new(),
            marker: false,
        });
        if ext == "running" {
            r.marker = true;
            continue;
        }
        if ext == "json"
            && let Some(rec) = std::fs::read(e.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<RunRecord>(&b).ok())
        {
            r.started_ms = rec.phases.first().map(|p| p.start_ms);
            r.branch = (!rec.branch.is_empty() && !rec.commits.is_empty()).then_some(rec.branch);
            r.tip = rec.commits.last().map(|c| c.sha.clone());
        }
        r.files.push(e.path());
    }
    runs.into_values().collect()
}

/// Whether `branch` no longer ends at the run's last commit (a user committed on it, or reset
/// it): `--keep-branches` then keeps it, the only copy of that work (attack review). A run
/// with no recorded commit counts as moved.
fn moved(git: &Git, branch: &str, r: &RunFiles) -> Result<bool> {
    let Some(tip) = &r.tip else {
        return Ok(true);
    };
    Ok(git.rev_parse_commit(&format!("refs/heads/{branch}"))? != *tip)
}

/// Adds run `r`'s record (when it has a readable one) to `tenant`'s tally of pruned runs
/// before its files go, so the metrics' counters keep it (docs/metrics.md).
fn tally(env: &HostEnv, tenant: &str, r: &RunFiles) -> Result<()> {
    let recs: Vec<RunRecord> = r
        .files
        .iter()
        .filter(|f| {
            f.file_name()
                .and_then(|n| {
                    crate::layout::parse_run_file(&n.to_string_lossy()).map(|x| x.1 == "json")
                })
                .unwrap_or(false)
        })
        .filter_map(|f| std::fs::read(f).ok())
        .filter_map(|b| serde_json::from_slice::<RunRecord>(&b).ok())
        .collect();
    super::metrics::tally_pruned(&env.state_home, tenant, &recs)
}

/// Why a run branch may go without `--force`: it is in the history of `base` or of a
/// remote-tracking ref. `None`: it is the only copy.
fn safe_because(git: &Git, branch: &str, base: &str) -> Result<Option<String>> {
    if git.is_ancestor(branch, base)? {
        return Ok(Some(format!("in the history of {base}")));
    }
    for (r, _) in git.refs()? {
        if let Some(remote) = r.strip_prefix("refs/remotes/")
            && git.is_ancestor(branch, &r)?
        {
            return Ok(Some(format!("pushed, in {remote}")));
        }
    }
    Ok(None)
}

/// Whether run `r`'s existing, chosen `branch` goes: `Ok(why)`, or `Err(the line that keeps
/// it)` — merged or pushed, else as `unmerged` says (`keepers`: the newest N of
/// `--keep-branches`).
fn branch_verdict(
    git: &Git,
    spec: &crate::spec::Spec,
    r: &RunFiles,
    branch: &str,
    unmerged: Unmerged,
    keepers: &[String],
) -> Result<std::result::Result<String, String>> {
    Ok(
        match (safe_because(git, branch, &spec.repo.base)?, unmerged) {
            (Some(why), _) => Ok(why),
            (None, Unmerged::Delete) => Ok("not merged and not pushed: --force".to_owned()),
            (None, Unmerged::KeepNewest(n))
                if !keepers.contains(&r.run_id) && !moved(git, branch, r)? =>
            {
                Ok(format!(
                    "not merged and not pushed: older than the newest {n} such run branch{} (--keep-branches {n})",
                    if n == 1 { "" } else { "es" }
                ))
            }
            (None, Unmerged::KeepNewest(n)) if !keepers.contains(&r.run_id) => Err(format!(
                "kept run {}: branch {branch} moved since the run (its tip is not the run's last commit: someone committed on it); --keep-branches {n} deletes only a branch as the run left it: merge or push it, or prune with --force",
                r.run_id
            )),
            (None, Unmerged::KeepNewest(n)) => Err(format!(
                "kept run {}: branch {branch} is not in the history of {} and not pushed, and is among the newest {n} run branches (--keep-branches {n})",
                r.run_id, spec.repo.base
            )),
            (None, Unmerged::Keep) => Err(format!(
                "kept run {}: branch {branch} is not in the history of {} and not pushed (the only copy of the run's work); merge or push it, or prune with --keep-branches N (keeps the newest N) or --force",
                r.run_id, spec.repo.base
            )),
        },
    )
}

/// What a prune does with one tenant; the lines it prints.
fn prune_tenant(
    env: &HostEnv,
    tenant: &str,
    rule: Rule,
    unmerged: Unmerged,
    dry_run: bool,
    now_ms: u128,
) -> Result<(Vec<String>, bool)> {
    let dir = record::tenant_dir(&env.state_home, tenant);
    let runs = runs_in(&dir);
    let take = chosen(&runs, rule, now_ms);
    let spec = super::spec_file::load_spec(&super::tenant::tenant_spec_path(env, tenant), env)
        .ok()
        .and_then(Result::ok);
    let keepers = match (unmerged, &spec) {
        (Unmerged::KeepNewest(n), Some(spec)) => {
            let git = Git::new(&spec.repo.path);
            branch_keepers(&runs, n, |b| {
                Ok(git.branch_exists(b)? && safe_because(&git, b, &spec.repo.base)?.is_none())
            })?
        }
        _ => Vec::new(),
    };
    let mut lines = Vec::new();
    let mut ok = true;
    let verb = if dry_run { "would prune" } else { "pruned" };
    // What was (or would be) pruned, counted as it happens: a run kept for its branch is not
    // (issue 32 item 3: the dry run said every chosen run would go).
    let mut gone = 0_usize;
    for r in runs.iter().filter(|r| take.contains(&r.run_id)) {
        let mut what = String::from("record and logs");
        if let Some(branch) = &r.branch {
            let Some(spec) = &spec else {
                lines.push(format!(
                    "kept run {}: its branch {branch} is in a repository cyclix cannot name (the spec of {tenant} does not load); delete the branch with git, then prune again",
                    r.run_id
                ));
                continue;
            };
            let git = Git::new(&spec.repo.path);
            if git.branch_exists(branch)? {
                let why = match branch_verdict(&git, spec, r, branch, unmerged, &keepers)? {
                    Ok(why) => why,
                    Err(kept) => {
                        lines.push(kept);
                        continue;
                    }
                };
                if !dry_run && let Err(e) = git.delete_branch(branch, true) {
                    lines.push(format!("kept run {}: {e:#}", r.run_id));
                    ok = false;
                    continue;
                }
                what = format!("{what}, branch {branch} ({why})");
            }
        }
        // After the branch (a run kept for a failed tally has lost only what was to go: the
        // next prune takes the rest and counts it).
        if !dry_run && let Err(e) = tally(env, tenant, r) {
            lines.push(format!(
                "kept run {}: its record cannot be added to the metrics' tally of pruned runs: {e:#}",
                r.run_id
            ));
            ok = false;
            continue;
        }
        if !dry_run {
            for f in &r.files {
                if let Err(e) = std::fs::remove_file(f)
                    && e.kind() != std::io::ErrorKind::NotFound
                {
                    lines.push(format!("run {}: removing {}: {e}", r.run_id, f.display()));
                    ok = false;
                }
            }
        }
        lines.push(format!("{verb} run {} of {tenant}: {what}", r.run_id));
        gone += 1;
    }
    let kept = take.len() - gone;
    lines.push(format!(
        "{tenant}: {gone} of {} runs {}{}",
        runs.len(),
        if dry_run { "would go" } else { "pruned" },
        if kept > 0 {
            format!("; {kept} chosen but kept (see above)")
        } else {
            String::new()
        }
    ));
    Ok((lines, ok))
}

/// `cyclix prune` from its command line.
///
/// # Errors
/// As [`run`]; `--keep-branches 0`; called for another verb (an invariant).
pub fn dispatch(env: &HostEnv, cmd: &crate::cli::Command) -> Result<Outcome> {
    let crate::cli::Command::Prune {
        tenant,
        keep,
        older_than,
        force,
        keep_branches,
        dry_run,
    } = cmd
    else {
        anyhow::bail!("invariant: prune_cmd::dispatch is called for `cyclix prune` only");
    };
    run(
        env,
        tenant.as_deref(),
        *keep,
        older_than.as_deref(),
        Unmerged::from_flags(*force, *keep_branches)?,
        *dry_run,
    )
}

/// `cyclix prune`.
///
/// # Errors
/// A bad tenant name or `--older-than`, `--keep 0`, git failing.
pub fn run(
    env: &HostEnv,
    tenant: Option<&str>,
    keep: Option<usize>,
    older_than: Option<&str>,
    unmerged: Unmerged,
    dry_run: bool,
) -> Result<Outcome> {
    let rule = match (keep, older_than) {
        (Some(0), _) => {
            return Err(crate::exit::input(
                "--keep 0: the newest run is always kept (it is what `cyclix status` shows); use --keep 1 or more",
            ));
        }
        (Some(n), None) => Rule::Keep(n),
        (None, Some(d)) => Rule::OlderThanS(older_than_s(d)?),
        _ => {
            return Err(crate::exit::input(
                "say what to prune: --keep N (the newest N runs stay) or --older-than D (e.g. 30d)",
            ));
        }
    };
    let tenants: Vec<String> = match tenant {
        Some(t) => {
            super::tenant::check_name(t)?;
            vec![t.to_owned()]
        }
        None => std::fs::read_dir(env.layout().records_root())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
    };
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut all_ok = true;
    let mut text = String::new();
    for t in &tenants {
        let (lines, ok) = prune_tenant(env, t, rule, unmerged, dry_run, now_ms)?;
        all_ok &= ok;
        for l in lines {
            text.push_str(&l);
            text.push('\n');
        }
    }
    super::print_out(&text)?;
    Ok(if all_ok {
        Outcome::Ok
    } else {
        Outcome::Findings
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, started_ms: Option<u128>, marker: bool) -> RunFiles {
        RunFiles {
            run_id: id.into(),
            started_ms,
            branch: None,
            tip: None,
            files: Vec::new(),
            marker,
        }
    }

    #[test]
    fn the_newest_and_marked_runs_stay_and_the_rule_picks_the_rest() {
        let day = 86_400_000;
        let now = 100 * day;
        let runs = [
            run("r1", Some(now - 40 * day), false),
            run("r2", Some(now - 35 * day), true),
            run("r3", Some(now - 31 * day), false),
            run("r4", Some(now - 2 * day), false),
            run("r5", Some(now - day), false),
        ];
        assert_eq!(
            chosen(&runs, Rule::Keep(2), now),
            ["r3", "r1"],
            "r2 has a marker"
        );
        assert_eq!(chosen(&runs, Rule::Keep(10), now), Vec::<String>::new());
        assert_eq!(
            chosen(&runs, Rule::OlderThanS(30 * 86_400), now),
            ["r3", "r1"]
        );
        let old = [run("a", Some(0), false), run("b", Some(1), false)];
        assert_eq!(
            chosen(&old, Rule::OlderThanS(1), now),
            ["a"],
            "the newest stays however old"
        );
    }

    #[test]
    fn keep_branches_keeps_the_newest_runs_that_made_a_branch() {
        let with = |id: &str, t: u128, b: bool| RunFiles {
            branch: b.then(|| format!("cyclix/t/{id}")),
            ..run(id, Some(t), false)
        };
        // r4 made no branch (a failed run): it does not count among the newest N.
        let runs = [
            with("r1", 1, true),
            with("r2", 2, true),
            with("r3", 3, true),
            with("r4", 4, false),
            with("r5", 5, true),
        ];
        let all = |_: &str| Ok(true);
        assert_eq!(branch_keepers(&runs, 2, all).expect("n"), ["r5", "r3"]);
        assert_eq!(
            branch_keepers(&runs, 9, all).expect("n"),
            ["r5", "r3", "r2", "r1"]
        );
        // A merged (or deleted) branch takes no place among the newest N.
        let r3_merged = |b: &str| Ok(b != "cyclix/t/r3");
        assert_eq!(
            branch_keepers(&runs, 2, r3_merged).expect("n"),
            ["r5", "r2"]
        );
        assert_eq!(
            Unmerged::from_flags(false, Some(3)).expect("n"),
            Unmerged::KeepNewest(3)
        );
        assert_eq!(
            Unmerged::from_flags(true, None).expect("force"),
            Unmerged::Delete
        );
        assert_eq!(
            Unmerged::from_flags(false, None).expect("no"),
            Unmerged::Keep
        );
        let e = Unmerged::from_flags(false, Some(0)).expect_err("0");
        assert!(format!("{e:#}").contains("say --force for that"), "{e:#}");
    }

    /// A host below `d` whose tenant `acme` has two recorded runs: r1 `gate_failed`, then r2
    /// `passed`.
    pub(super) fn two_runs(d: &Path) -> (HostEnv, Vec<RunRecord>) {
        let env = HostEnv {
            home: d.to_path_buf(),
            runtime_dir: Some(d.join("run")),
            config_home: d.join("config"),
            data_home: d.join("data"),
            state_home: d.join("state"),
            config_file: None,
        };
        let dir = record::tenant_dir(&env.state_home, "acme");
        let mut recs = Vec::new();
        for (id, at, result) in [
            ("r1", 1_000, record::RunResult::GateFailed),
            ("r2", 2_000, record::RunResult::Passed),
        ] {
            let mut r = RunRecord::new("acme", id, "container".into());
            r.result = result;
            r.phases.push(record::Phase {
                name: "prepare".into(),
                start_ms: at,
                end_ms: at + 10,
                outcome: "ok".into(),
            });
            record::write(&dir, &r).expect("record");
            recs.push(r);
        }
        (env, recs)
    }

    #[test]
    fn a_pruned_run_stays_in_the_metrics_counters_through_the_tally() {
        let d = tempfile::tempdir().expect("tmp");
        let (env, _) = two_runs(d.path());
        let dir = record::tenant_dir(&env.state_home, "acme");
        let before = super::super::metrics::gather(&env).render(0);
        let (lines, ok) = prune_tenant(&env, "acme", Rule::Keep(1), Unmerged::Keep, false, 10_000)
            .expect("prune");
        assert!(ok, "{lines:?}");
        assert!(!dir.join("r1.json").exists(), "{lines:?}");
        assert_eq!(super::super::metrics::gather(&env).render(0), before);
        assert!(
            before.contains("cyclix_runs_total{tenant=\"acme\",result=\"gate_failed\"} 1\n"),
            "{before}"
        );
    }

    #[test]
    fn older_than_takes_days_and_durations() {
        assert_eq!(older_than_s("30d").expect("days"), 30 * 86_400);
        assert_eq!(older_than_s("1h30m").expect("duration"), 5400);
        let e = older_than_s("soon").expect_err("bad");
        assert!(format!("{e:#}").contains("or days like `30d`"), "{e:#}");
    }

    #[test]
    fn a_tenants_files_group_by_run_and_a_marker_is_seen() {
        let d = tempfile::tempdir().expect("tmp");
        for f in [
            "r1.json",
            "r1.agent.log",
            "r2.running",
            "r2.phase",
            "latest.json",
            "x.txt",
        ] {
            std::fs::write(d.path().join(f), b"{}").expect("write");
        }
        let runs = runs_in(d.path());
        let ids: Vec<(&str, usize, bool)> = runs
            .iter()
            .map(|r| (r.run_id.as_str(), r.files.len(), r.marker))
            .collect();
        assert_eq!(ids, [("r1", 2, false), ("r2", 1, true)]);
    }
}

/// Attack review: a prune killed (or failing to remove the record) after the tally and
/// before the record is gone left the run both in the records and in the tally, and the next
/// prune added it to the tally again.
#[cfg(test)]
mod tally_once {
    use super::*;

    #[test]
    fn a_prune_interrupted_after_its_tally_does_not_count_the_run_twice() {
        let d = tempfile::tempdir().expect("tmp");
        let (env, recs) = super::tests::two_runs(d.path());
        let before = super::super::metrics::gather(&env).render(0);
        // The first prune got as far as its tally of r1 (then it was killed, or r1.json could
        // not be removed): the state it leaves behind.
        super::super::metrics::tally_pruned(&env.state_home, "acme", &recs[..1]).expect("tally");
        let (lines, ok) = prune_tenant(&env, "acme", Rule::Keep(1), Unmerged::Keep, false, 10_000)
            .expect("prune");
        assert!(ok, "{lines:?}");
        let after = super::super::metrics::gather(&env).render(0);
        assert!(
            after.contains("cyclix_runs_total{tenant=\"acme\",result=\"gate_failed\"} 1\n"),
            "one gate_failed run, counted: {}\nbefore:\n{before}",
            after
                .lines()
                .filter(|l| l.starts_with("cyclix_runs_total"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
