//! The audit after teardown: whatever of the run is still there is a leftover and fails the
//! run. It looks at what the run's ledger names (podman by label, units, files, trees, the
//! run dir), then at what only a live run knows (a half-done git operation, the repository's
//! refs, the direct tier's checkout) and at the run's processes (B11).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::super::ledger::{Entry, Ledger};
use super::super::seam::RunHost;
use super::super::state::RunState;
use crate::inventory::{Kind, Leftover};
use crate::systemd::{ActiveState, UnitManager};

/// What the audit needs besides the run's state.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Audit<'a> {
    /// The run id.
    pub(crate) run_id: &'a str,
    /// The user's repository.
    pub(crate) repo: &'a Path,
    /// The run is of tier `direct` (its checkout is the user's own).
    pub(crate) direct: bool,
    /// How long to wait for the run's processes (conmon, B11) to be gone after teardown.
    pub(crate) settle: Duration,
    /// How often to look meanwhile.
    pub(crate) poll: Duration,
}

/// What of the run is left after teardown, in the record's order: podman objects, units
/// still loaded, files, trees, the run dir, a half-done git operation, changed refs, processes.
///
/// # Errors
/// podman, systemd, git or `/proc` could not be asked.
pub(crate) fn audit(
    a: &Audit<'_>,
    units: &(dyn UnitManager + Sync),
    host: &dyn RunHost,
    st: &RunState,
) -> Result<Vec<Leftover>> {
    let mut left = of_ledger(a.run_id, units, host, &st.ledger)?;
    if let Some(op) = &st.in_progress {
        left.push(Leftover::finding(format!(
            "{op} was in progress in the run's worktree when it was removed: the run's commits \
             are not a finished result"
        )));
    }
    if a.direct
        && let Some(op) = host.in_progress(a.repo)?
    {
        left.push(Leftover::finding(format!(
            "{op} in progress in {} (the direct tier's checkout); finish or abort it there",
            a.repo.display()
        )));
    }
    if let Some(before) = &st.refs_before {
        let own = st.ledger.branch().map_or("", |(b, _)| b);
        left.extend(
            ref_changes(before, &host.refs(a.repo)?, own, a.direct)
                .into_iter()
                .map(Leftover::finding),
        );
    }
    // conmon exits right after its container; give it `settle` before counting it (B11).
    let t0 = Instant::now();
    loop {
        let procs = host.run_processes(a.run_id)?;
        if procs.is_empty() || t0.elapsed() >= a.settle {
            left.extend(procs);
            break;
        }
        std::thread::sleep(a.poll);
    }
    Ok(left)
}

/// What of the things `ledger` names is still there: podman objects by label (when the run
/// got to podman), units not inactive, files, the work tree, the gate's tree, the run dir.
///
/// # Errors
/// podman or systemd could not be asked.
pub(crate) fn of_ledger(
    run_id: &str,
    units: &(dyn UnitManager + Sync),
    host: &dyn RunHost,
    ledger: &Ledger,
) -> Result<Vec<Leftover>> {
    let run = Some(run_id);
    // The podman listing and the units' states are independent looks: side by side (issue
    // 16); every one of them is still made and judged.
    let (inventory, states) = std::thread::scope(|s| {
        let inventory = s.spawn(|| {
            if ledger.podman() {
                host.inventory(run_id)
            } else {
                Ok(Vec::new())
            }
        });
        let states: Vec<_> = ledger
            .units()
            .map(|u| (u, s.spawn(move || units.unit_status(u))))
            .collect();
        let panicked = || anyhow::anyhow!("a look of the audit panicked");
        let states: Vec<_> = states
            .into_iter()
            .map(|(u, h)| (u, h.join().map_err(|_| panicked())))
            .collect();
        (inventory.join().map_err(|_| panicked()), states)
    });
    let mut left = inventory??;
    for (u, st) in states {
        // Inactive with its file gone is what systemd garbage-collects; running or failed stays.
        let st = st??;
        if !matches!(st.active_state, ActiveState::Inactive) {
            left.push(Leftover::new(Kind::Unit, u, run).with_detail(st.summary()));
        }
    }
    for f in ledger.files().filter(|f| f.exists()) {
        left.push(Leftover::new(Kind::UnitFile, f.display().to_string(), run));
    }
    let exists = |p: &Path| p.exists().then(|| p.display().to_string());
    if let Some(tree) = ledger.worktree().and_then(|(p, _)| exists(p)) {
        left.push(Leftover::new(Kind::Worktree, tree, run));
    }
    for tree in ledger.gate_trees().filter_map(exists) {
        left.push(Leftover::new(Kind::GateTree, tree, run));
    }
    for e in ledger.entries() {
        if let Entry::RunDir { path } = e
            && let Some(d) = exists(path)
        {
            left.push(Leftover::new(Kind::RunDir, d, run));
        }
    }
    Ok(left)
}

/// What changed in the repository's refs during a run outside its own branch `own`: refs
/// created, deleted or moved (the agent's container can write the shared git dir's refs).
/// Not counted: remote-tracking refs (`refs/remotes/`, moved by fetches), cyclix's run
/// branches (`refs/heads/cyclix/`, written by concurrent runs of the same repository) and, for
/// the direct tier (`heads_move`), branches (its commits land on the checked-out branch).
#[must_use]
pub fn ref_changes(
    before: &[(String, String)],
    after: &[(String, String)],
    own: &str,
    heads_move: bool,
) -> Vec<String> {
    let fix = |r: &str| {
        format!(
            "not the run's branch: the run wrote to the repository's refs; check it (`git log \
             {r}`), then keep, restore or delete it (`git update-ref -d {r}`); if you changed it \
             yourself meanwhile, ignore this"
        )
    };
    let skip = |r: &str| {
        r == own
            || r.starts_with("refs/remotes/")
            || r.starts_with("refs/heads/cyclix/")
            || (heads_move && r.starts_with("refs/heads/"))
    };
    let short = |s: &str| s.get(..12).unwrap_or(s).to_string();
    let find =
        |v: &[(String, String)], r: &str| v.iter().find(|(n, _)| n == r).map(|(_, s)| s.clone());
    let mut out = Vec::new();
    for (r, sha) in after.iter().filter(|(r, _)| !skip(r)) {
        match find(before, r) {
            None => out.push(format!(
                "ref {r} created during the run at {}: {}",
                short(sha),
                fix(r)
            )),
            Some(old) if &old != sha => out.push(format!(
                "ref {r} moved during the run from {} to {}: {}",
                short(&old),
                short(sha),
                fix(r)
            )),
            Some(_) => {}
        }
    }
    for (r, sha) in before.iter().filter(|(r, _)| !skip(r)) {
        if find(after, r).is_none() {
            out.push(format!(
                "ref {r} deleted during the run (was {}): {}",
                short(sha),
                fix(r)
            ));
        }
    }
    out
}
