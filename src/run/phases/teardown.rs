//! Teardown over a run's ledger: undoes exactly what the ledger names (plus a by-label sweep
//! of podman), for a live run at its end and for a run whose cyclix died (convergence). Every
//! step runs whatever failed before it; the errors are joined.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

use super::super::ledger::Entry;
use super::super::state::RunState;
use super::super::tripwire;
use crate::run::seam::{RunHost, RunProcs};
use crate::systemd::{Error as UnitError, JobMode, UnitManager};

/// What teardown needs besides the ledger.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Teardown<'a> {
    /// The run id (podman objects by label, reservations by content).
    pub(crate) run_id: &'a str,
    /// The user's repository (linked worktrees, the run branch).
    pub(crate) repo: &'a Path,
    /// How long one unit's stop may take.
    pub(crate) stop: Duration,
    /// Where each step is noted (`RUN.phase`); `None`: not noted.
    pub(crate) progress: Option<&'a Path>,
    /// Finishing the teardown of a run whose cyclix died: no fail points, a unit that is not
    /// loaded has nothing to stop, and the tripwires go by the names the ledger holds.
    pub(crate) converging: bool,
}

/// Teardown, step by step (each a point `teardown.STEP` of [`crate::failpoint::TEARDOWN_STEPS`],
/// noted in the progress file): remove the labelled podman objects, stop units, remove files,
/// reload (only for an older cyclix's files), the secrets, the worktree (after noting a
/// half-done git operation in it), the run branch if it has no commits (a temporary ref), the
/// run dir. Tripwires and reservations go first. Every step runs whatever failed before it;
/// the errors are joined.
///
/// # Errors
/// The failed steps, each as `what: why`, joined with `; `.
pub(crate) fn teardown(
    t: &Teardown<'_>,
    units: &(dyn UnitManager + Sync),
    host: &dyn RunHost,
    st: &mut RunState,
) -> Result<()> {
    let mut errors: Vec<String> = Vec::new();
    let step = |name: &str| {
        if !t.converging {
            super::reached(
                t.progress,
                &format!("teardown.{name}"),
                &format!("teardown/{name}"),
            );
        }
    };
    let mut note = |what: &str, r: Result<()>| {
        if let Err(e) = r {
            errors.push(format!("{what}: {e:#}"));
        }
    };
    tripwires_and_reservations(t, host, st, &mut note);
    let ledger = &st.ledger;
    step("podman");
    // One forced removal of everything labelled with the run before its units stop (issue 33
    // item 4): the stops then find their containers gone and have nothing to wait for (a
    // Quadlet unit's own `ExecStop=podman rm` was most of a teardown: measured).
    if ledger.podman() {
        note(
            "removing the run's podman objects",
            host.remove_run_objects(t.run_id),
        );
    }
    step("stop-units");
    let stops = stop_all(t, units, ledger.units());
    for (u, stopped) in stops {
        note(&format!("stopping {u}"), stopped);
    }
    step("files");
    for f in ledger.files() {
        note(&format!("removing {}", f.display()), remove_file(f));
        if let Some(d) = dropin_dir(f) {
            note(&format!("removing {}", d.display()), remove_dir(d));
        }
    }
    step("reload");
    // The run's units were generated into the runtime unit directory and are gone with their
    // files (a stopped unit without a file is garbage-collected): no reload. Only a run
    // installed by an older cyclix kept its Quadlet files where the generator scans, whose
    // units a reload takes away.
    if ledger.files().any(|f| scanned_by_quadlet(f)) {
        note("reloading", units.reload().map_err(Into::into));
    }
    step("secrets");
    for s in ledger.names(|e| match e {
        Entry::Secret { name } => Some(name),
        _ => None,
    }) {
        note(&format!("removing secret {s}"), host.secret_remove(s));
    }
    step("worktree");
    trees(t, host, st, &mut note);
    let ledger = &st.ledger;
    step("branch");
    if let Some((branch, base)) = ledger.branch() {
        // Compare-and-delete: a branch with the agent's commits has moved and is kept.
        match host.delete_ref_at(t.repo, branch, base) {
            Ok(true) => st.notices.push(format!(
                "run branch {} deleted at teardown: it had no commits",
                branch.trim_start_matches("refs/heads/")
            )),
            Ok(false) => {}
            Err(e) => note("deleting the run branch (no commits)", Err(e)),
        }
    }
    step("run-dir");
    for e in ledger.entries() {
        match e {
            Entry::ImportDir { path } if path.exists() => note(
                "removing the import's staging dir",
                std::fs::remove_dir_all(path)
                    .with_context(|| format!("removing {}", path.display())),
            ),
            Entry::RunDir { path } if path.exists() => note(
                "removing the run dir",
                std::fs::remove_dir_all(path)
                    .with_context(|| format!("removing {}", path.display())),
            ),
            _ => {}
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        bail!("{}", errors.join("; "))
    }
}

/// Every unit's stop job at once (issue 16): systemd orders them by the units' own
/// `After=`/`Requires=` (a network stops after the proxy on it), so nothing stops early; what
/// runs side by side is each call's round trip and the jobs without an order. A failed unit
/// stays loaded until its failure is reset; each is reset so nothing remains. Returns each
/// unit's stop result, in `names` order.
fn stop_all<'u>(
    t: &Teardown<'_>,
    units: &(dyn UnitManager + Sync),
    names: impl Iterator<Item = &'u String>,
) -> Vec<(&'u String, Result<()>)> {
    // A held agent's deadline timer is transient: disarmed after the agent or elapsed, it is
    // gone, which is what a stop wants.
    let deadline = crate::naming::RunNames::new(t.run_id).agent_deadline();
    let deadline = deadline.as_str();
    std::thread::scope(|s| {
        let jobs: Vec<_> = names
            .map(|u| {
                (
                    u,
                    s.spawn(move || {
                        let stopped = match units.stop(u, JobMode::Replace, t.stop) {
                            Err(UnitError::NoSuchUnit { .. }) if t.converging || u == deadline => {
                                Ok(())
                            }
                            r => r.map(|_| ()).map_err(Into::into),
                        };
                        let _ = units.reset_failed(u);
                        stopped
                    }),
                )
            })
            .collect();
        jobs.into_iter()
            .map(|(u, h)| {
                let r = h
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the stop job's thread panicked")));
                (u, r)
            })
            .collect()
    })
}

/// The gate's tree, the run's tree (private repository or linked worktree) and, once empty,
/// the tenant's worktrees dir.
fn trees(
    t: &Teardown<'_>,
    host: &dyn RunHost,
    st: &mut RunState,
    note: &mut impl FnMut(&str, Result<()>),
) {
    let ledger = &st.ledger;
    // Plain files: no git runs in a tree the agent wrote (module `run::import`). The gates'
    // trees and the run's private repository go in one removal (one podman start, not one
    // each: issue 33).
    let mut plain: Vec<&Path> = ledger.gate_trees().collect();
    let what = match (ledger.worktree(), plain.is_empty()) {
        (Some((tree, true)), gates_none) => {
            plain.push(tree);
            if gates_none {
                "removing the run's private repository"
            } else {
                "removing the run's private repository and its gates' trees"
            }
        }
        _ => "removing the gates' trees",
    };
    if !plain.is_empty() {
        note(what, host.remove_trees(&plain));
    }
    match ledger.worktree() {
        Some((_, true)) | None => {}
        Some((tree, false)) => {
            if tree.exists() {
                // Removing the worktree also drops its git dir, where a half-done merge or
                // rebase lives: note it first, the audit reports it.
                st.in_progress = host.in_progress(tree).ok().flatten();
            }
            note("removing the worktree", host.worktree_remove(t.repo, tree));
        }
    }
    // The tenant's worktrees dir (`worktrees/TENANT/`) goes with its last run (issue 19 item
    // 10): only when it is empty, so a tree kept by another run stays. A twin's two
    // environments tear down at once: the one that finds it gone (or filled) has nothing to do;
    // a mount point (a user's own file system for the trees) stays.
    if let Some(dir) = ledger.worktree().and_then(|(tree, _)| tree.parent())
        && std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
    {
        let removed = match std::fs::remove_dir(dir) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound
                        | std::io::ErrorKind::DirectoryNotEmpty
                        | std::io::ErrorKind::ResourceBusy
                ) =>
            {
                Ok(())
            }
            r => r.with_context(|| format!("removing {}", dir.display())),
        };
        note("removing the tenant's empty worktrees dir", removed);
    }
}

/// Removes the tripwires (through their handle in a live run, else by the names in the
/// ledger) and releases the run's reservations.
fn tripwires_and_reservations(
    t: &Teardown<'_>,
    host: &dyn RunProcs,
    st: &mut RunState,
    note: &mut impl FnMut(&str, Result<()>),
) {
    let ledger = &st.ledger;
    if let Some(tw) = st.tripwires.as_mut() {
        tripwire::remove(tw);
    } else {
        // Not planted by this process (or never finished): by the names in the ledger.
        for e in ledger.entries() {
            match e {
                Entry::Tripwire { path } => {
                    note(&format!("removing {}", path.display()), remove_file(path));
                }
                Entry::Sentinel { .. } => note(
                    "killing the escape sentinel",
                    host.kill_sentinel(t.run_id).map(|_| ()),
                ),
                _ => {}
            }
        }
    }
    for e in ledger.entries() {
        if let Entry::Reservations { dir } = e {
            note(
                &format!("releasing the run's reservations in {}", dir.display()),
                release_reservations(dir, t.run_id),
            );
        }
    }
}

/// Removes the reservation files in `dir` that hold `run_id` ([`super::super::reserve`]).
fn release_reservations(dir: &Path, run_id: &str) -> Result<()> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(()); // none was ever made
    };
    for f in rd.filter_map(Result::ok).map(|e| e.path()) {
        if std::fs::read_to_string(&f).is_ok_and(|o| o.trim() == run_id) {
            remove_file(&f)?;
        }
    }
    Ok(())
}

/// The directory of a drop-in file of the run (`…/cyclix-RUN-pod.service.d/NAME.conf`); it
/// goes with its last file.
fn dropin_dir(file: &Path) -> Option<&Path> {
    file.parent().filter(|d| {
        d.extension().is_some_and(|x| x == "d")
            && d.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(crate::naming::PREFIX))
    })
}

/// Whether `file` is a Quadlet file (or drop-in) in a directory Podman's generator scans on
/// a reload (`…/containers/systemd/`, podman-systemd.unit(5)): where runs of cyclix before
/// issue 33 kept theirs.
fn scanned_by_quadlet(file: &Path) -> bool {
    let dir = dropin_dir(file).unwrap_or(file).parent();
    dir.is_some_and(|d| d.ends_with("containers/systemd"))
}

/// Removes the empty directory `d` (gone already: fine).
fn remove_dir(d: &Path) -> Result<()> {
    match std::fs::remove_dir(d) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", d.display()))
        }
        _ => Ok(()),
    }
}

fn remove_file(p: &Path) -> Result<()> {
    match std::fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", p.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::scanned_by_quadlet;
    use std::path::Path;

    #[test]
    fn only_files_where_the_generator_scans_make_teardown_reload() {
        let scanned = [
            "/run/user/1000/containers/systemd/cyclix-r-agent.container",
            "/run/user/1000/containers/systemd/cyclix-r-proxy.container.d/x.conf",
        ];
        for f in scanned {
            assert!(scanned_by_quadlet(Path::new(f)), "{f}");
        }
        let not = [
            "/run/user/1000/cyclix/runs/r/quadlet/cyclix-r-agent.container",
            "/run/user/1000/systemd/user/cyclix-r-agent.service",
            "/run/user/1000/systemd/user/cyclix-r-agent.service.d/x.conf",
        ];
        for f in not {
            assert!(!scanned_by_quadlet(Path::new(f)), "{f}");
        }
    }
}
