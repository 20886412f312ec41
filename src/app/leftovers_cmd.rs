//! `cyclix leftovers [--json]`: everything of cyclix's that exists on this host right now, each
//! tied to its run: a run in progress (in use), a run whose cyclix died (the next run of its
//! tenant converges it), or no known run (for a person to look at; cyclix never deletes it).
//! Exit 0 when nothing is left outside running runs, 1 otherwise.
//!
//! JSON schema `cyclix-leftovers/1`: `{"schema", "leftovers": [{"kind", "name", "run",
//! "status", "fix"}]}` with `kind` one of container, pod, network, volume, secret, unit-file, subnet-reservation, port-reservation,
//! worktree, run-dir, tripwire, marker, process (conmon or the escape sentinel, B11); `status` one of `running`, `pooled`, `dead-run`, `untied`.
//! A drill's objects (`cyclix drill`: its keys, outside paths, sockets, sentinels and ledgers) are
//! tied to `drill-NONCE` through the drill's ledger, like a run's are through its marker.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::inventory::{Kind, Leftover};
use crate::layout::{Layout, RunFiles, Runtime};
use crate::podman::Podman;
use crate::run::ledger::{self, Owner};

/// How long `cyclix leftovers` waits for podman's storage lock before it names the holder
/// (below podman's own 30 s listing deadline).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// One thing left on the host, with what it is to its run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listed {
    /// What it is and whose.
    #[serde(flatten)]
    pub leftover: Leftover,
    /// `running`, `pooled` (a warm pool's environment), `dead-run` or `untied`.
    pub status: &'static str,
    /// What to do about it.
    pub fix: String,
}

/// Classifies `run` against the ledgers: in use, left by a dead cyclix, or unknown. Pure
/// given `alive` (whether a pid still runs).
fn status_of(
    run: Option<&str>,
    markers: &BTreeMap<String, Owner>,
    alive: &dyn Fn(u32) -> bool,
) -> (&'static str, String) {
    let drill = run.and_then(|r| r.strip_prefix("drill-"));
    match (run.and_then(|r| markers.get(r)), drill) {
        (Some(m), Some(nonce)) if alive(m.pid) => (
            "running",
            format!("in use by drill {nonce} of tenant {} (pid {})", m.tenant, m.pid),
        ),
        (Some(m), Some(nonce)) => (
            "dead-run",
            format!(
                "left by drill {nonce} whose cyclix died: `cyclix drill {}` removes it first",
                m.tenant
            ),
        ),
        (Some(m), None) if alive(m.pid) => ("running", format!("in use by run {} of tenant {} (pid {})", m.run_id, m.tenant, m.pid)),
        (Some(m), None) => (
            "dead-run",
            format!("left by run {} whose cyclix died: `cyclix run {}` finishes its teardown first", m.run_id, m.tenant),
        ),
        (None, _) => (
            "untied",
            "not tied to a known run: check it and remove it by hand (cyclix never deletes what it cannot tie to a run)".into(),
        ),
    }
}

/// The environments the warm pools hold (issue 16), by id: (tenant, state); an environment
/// being filled is its filler's, tied through the pool's ledger of it (added to `markers`)
/// like a run through its marker.
fn pool_ties(
    runtime: &Runtime,
    markers: &mut BTreeMap<String, Owner>,
) -> Result<BTreeMap<String, (String, &'static str)>> {
    let mut pooled = BTreeMap::new();
    let pools = runtime.cyclix_dir().join("pool");
    for tenant in names_in(&pools) {
        let state = crate::run::pool::PoolState::new(pools.join(&tenant));
        for (id, held) in state.held()? {
            pooled.insert(id, (tenant.clone(), held));
        }
        for (id, _, _) in state.filling()? {
            if let Some((owner, _)) = ledger::read(&state.ledger_path(&id)) {
                markers.insert(id, owner);
            }
        }
    }
    Ok(pooled)
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Lists the leftovers.
///
/// # Errors
/// podman or I/O failures.
pub fn run(env: &HostEnv, json: bool) -> Result<Outcome> {
    let runtime = env.runtime()?;
    let layout = env.layout();
    let mut markers = BTreeMap::new();
    for tenant in names_in(&layout.records_root()) {
        for (owner, _) in ledger::all(&layout.records_dir(&tenant)) {
            markers.insert(owner.run_id.clone(), owner);
        }
    }
    // Every podman listing waits behind a held storage lock (security-cases §3): name the
    // holder at once instead of timing out 30 s later without it.
    let graphroot = crate::host::storage_conf::of(env);
    // A lock held for a moment (another podman command) is waited out; past LOCK_WAIT it is
    // named.
    let t0 = std::time::Instant::now();
    let mut holders = crate::run::storage_lock::holders(&graphroot)?;
    while !holders.is_empty() && t0.elapsed() < LOCK_WAIT {
        std::thread::sleep(std::time::Duration::from_millis(100));
        holders = crate::run::storage_lock::holders(&graphroot)?;
    }
    if !holders.is_empty() {
        anyhow::bail!(
            "podman's storage lock is held, so podman cannot list anything now: {}; wait for \
             that process to finish (cyclix never signals it), then run `cyclix leftovers` again",
            crate::run::storage_lock::describe(&holders)
        );
    }
    // The drill's ledgers tie its objects to it (`drill-NONCE`), like a run's marker.
    let drill_ledgers = super::plant::ledgers(&super::plant::ledgers_dir(&runtime));
    for (_, l) in &drill_ledgers {
        let id = crate::drill::tag(&l.nonce);
        markers.insert(
            id.clone(),
            Owner {
                tenant: l.tenant.clone(),
                run_id: id,
                pid: l.pid,
                started_ms: 0,
                repo: std::path::PathBuf::new(),
            },
        );
    }
    let pooled = pool_ties(&Runtime(runtime.0.clone()), &mut markers)?;
    let mut found = crate::run::host::podman_leftovers(&Podman::new(), None)?;
    found.extend(drill_files(&env.home, &runtime, &drill_ledgers));
    found.extend(files(&layout, &env.home, &runtime, &markers));
    found.extend(processes());
    let list: Vec<Listed> = found
        .into_iter()
        .map(|leftover| {
            let pool = leftover
                .run
                .as_deref()
                .filter(|r| !markers.contains_key(*r))
                .and_then(|r| pooled.get(r));
            let (status, fix) = match pool {
                Some((t, "claimed"))
                    if crate::run::storage_lock::file_lock_holders(&runtime.tenant_lock(t))
                        .is_ok_and(|h| h.is_empty()) =>
                (
                    "dead-claim",
                    format!("claimed by a run of tenant {t} whose cyclix died before taking it over (its proxy may hold the credentials): the pool's keeper destroys it within seconds, or `cyclix pool expire {t}` now"),
                ),
                Some((t, held)) => (
                    "pooled",
                    format!("kept {held} by the pool of tenant {t}: `cyclix pool expire {t}` destroys idle ones"),
                ),
                None => status_of(leftover.run.as_deref(), &markers, &pid_alive),
            };
            Listed {
                leftover,
                status,
                fix,
            }
        })
        .collect();
    let bad = list
        .iter()
        .filter(|l| !matches!(l.status, "running" | "pooled"))
        .count();
    if json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"schema": "cyclix-leftovers/1", "leftovers": list})
            )?
        );
    } else if list.is_empty() {
        crate::outln!("no leftovers");
    } else {
        for line in human_lines(&list) {
            crate::outln!("{line}");
        }
    }
    Ok(if bad == 0 {
        Outcome::Ok
    } else {
        Outcome::Findings
    })
}

/// The human listing: each leftover in two lines (kind, status, name and run; the fix), except
/// a warm pool's environments, which are not leftovers but kept objects: one line each with
/// what it holds (newcomer trial 8: five lines per pooled object drowned the real ones).
/// `--json` lists every object.
fn human_lines(list: &[Listed]) -> Vec<String> {
    let mut out = Vec::new();
    let mut pooled: BTreeMap<&str, (Vec<String>, &str)> = BTreeMap::new();
    for l in list {
        if l.status == "pooled" {
            let (kinds, _) = pooled
                .entry(l.leftover.run.as_deref().unwrap_or("-"))
                .or_insert_with(|| (Vec::new(), l.fix.as_str()));
            kinds.push(l.leftover.kind.to_string());
            continue;
        }
        out.push(format!(
            "{:<9} {:<9} {} ({})\n          {}",
            l.leftover.kind,
            l.status,
            l.leftover.name,
            l.leftover.run.as_deref().unwrap_or("-"),
            l.fix
        ));
    }
    for (env, (mut kinds, fix)) in pooled {
        kinds.sort();
        let mut counted: Vec<String> = Vec::new();
        for k in kinds.chunk_by(|a, b| a == b) {
            counted.push(if k.len() == 1 {
                k[0].clone()
            } else {
                format!("{} ×{}", k[0], k.len())
            });
        }
        out.push(format!(
            "{:<9} {:<9} environment {env}: {}\n          {fix}",
            "pool",
            "pooled",
            counted.join(", ")
        ));
    }
    out
}

/// Processes named after a run (field report B11): conmon (`-n cyclix-RUN-agent`) and the
/// escape sentinel (`argv[0]` `cyclix-RUN-sentinel`), tied to the run their name carries.
fn processes() -> Vec<Leftover> {
    let prefix = crate::naming::PREFIX;
    crate::run::procs::processes_naming(Path::new("/proc"), prefix, std::process::id())
        .into_iter()
        .filter(|p| p.comm == "conmon" || p.argv0.ends_with("-sentinel"))
        .filter_map(|p| {
            let token = p.cmdline.split(' ').find(|t| t.starts_with(prefix))?;
            let run = crate::naming::run_of(&format!("{token}.x"));
            Some(Leftover::new(
                Kind::Process,
                format!("{} ({}): {}", p.pid, p.comm, p.cmdline),
                run.as_deref(),
            ))
        })
        .collect()
}

/// Per-run files: unit files, worktrees, reservations, run dirs, tripwires (in `home`),
/// ledgers.
fn files(
    layout: &Layout,
    home: &Path,
    runtime: &Runtime,
    markers: &BTreeMap<String, Owner>,
) -> Vec<Leftover> {
    let mut found = Vec::new();
    let path = |p: &Path| p.display().to_string();
    for dir in [runtime.quadlet_dir(), runtime.units_dir()] {
        for f in names_in(&dir)
            .into_iter()
            .filter(|f| f.starts_with(crate::naming::PREFIX))
        {
            let run = crate::naming::run_of(&f);
            found.push(Leftover::new(
                Kind::UnitFile,
                path(&dir.join(&f)),
                run.as_deref(),
            ));
        }
    }
    let wt = layout.worktrees_root();
    for tenant in names_in(&wt) {
        for name in names_in(&wt.join(&tenant)) {
            // `RUN` is a run's private repository, `RUN.gate` and `RUN.gate-base` its gates'
            // trees.
            let run = name
                .strip_suffix(".gate")
                .or_else(|| name.strip_suffix(".gate-base"))
                .unwrap_or(&name);
            found.push(Leftover::new(
                Kind::Worktree,
                path(&wt.join(&tenant).join(&name)),
                Some(run),
            ));
        }
    }
    for (kind, dir) in [
        (Kind::SubnetReservation, crate::layout::SUBNETS_DIR),
        (Kind::PortReservation, crate::layout::PORTS_DIR),
    ] {
        let dir = runtime.reservations(dir);
        for n in names_in(&dir) {
            let run = std::fs::read_to_string(dir.join(&n))
                .ok()
                .map(|r| r.trim().to_string());
            found.push(Leftover::new(kind, path(&dir.join(&n)), run.as_deref()));
        }
    }
    for run in names_in(&runtime.runs_root()) {
        found.push(Leftover::new(
            Kind::RunDir,
            path(&runtime.run_dir(&run)),
            Some(&run),
        ));
    }
    for f in names_in(home) {
        if let Some(run) = crate::run::tripwire::run_of_file(&f) {
            found.push(Leftover::new(
                Kind::Tripwire,
                path(&home.join(&f)),
                Some(run),
            ));
        }
    }
    for m in markers.values().filter(|m| !m.run_id.starts_with("drill-")) {
        let file = RunFiles::new(&layout.records_dir(&m.tenant), &m.run_id).marker();
        found.push(Leftover::new(Kind::Marker, path(&file), Some(&m.run_id)));
    }
    found
}

/// The drill's objects (`cyclix drill`): its fake keys in `~/.ssh`, outside paths in the home,
/// listening sockets in the runtime directory (`cyclix-drill-NONCE…`), and its ledgers.
fn drill_files(
    home: &Path,
    runtime: &Runtime,
    ledgers: &[(std::path::PathBuf, super::plant::DrillLedger)],
) -> Vec<Leftover> {
    let mut found = Vec::new();
    for dir in [home.join(".ssh"), home.to_path_buf(), runtime.0.clone()] {
        for f in names_in(&dir) {
            if let Some(nonce) = crate::drill::nonce_of_file(&f) {
                found.push(Leftover::new(
                    Kind::Tripwire,
                    dir.join(&f).display().to_string(),
                    Some(&crate::drill::tag(nonce)),
                ));
            }
        }
    }
    for (path, l) in ledgers {
        found.push(Leftover::new(
            Kind::Marker,
            path.display().to_string(),
            Some(&crate::drill::tag(&l.nonce)),
        ));
    }
    found
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_are_tied_to_running_dead_or_no_runs() {
        let m = |pid| Owner {
            tenant: "acme".into(),
            run_id: "r1".into(),
            pid,
            started_ms: 0,
            repo: "/r".into(),
        };
        let markers = BTreeMap::from([("r1".to_string(), m(42))]);
        assert_eq!(status_of(Some("r1"), &markers, &|_| true).0, "running");
        assert_eq!(status_of(Some("r1"), &markers, &|_| false).0, "dead-run");
        assert!(
            status_of(Some("r1"), &markers, &|_| false)
                .1
                .contains("cyclix run acme")
        );
        assert_eq!(status_of(Some("r2"), &markers, &|_| true).0, "untied");
        let d = BTreeMap::from([("drill-00aa00aa".to_string(), m(43))]);
        assert_eq!(
            status_of(Some("drill-00aa00aa"), &d, &|_| true).0,
            "running"
        );
        let (st, fix) = status_of(Some("drill-00aa00aa"), &d, &|_| false);
        assert_eq!(st, "dead-run");
        assert!(fix.contains("`cyclix drill acme` removes it"), "{fix}");
        assert_eq!(status_of(None, &markers, &|_| true).0, "untied");
    }

    #[test]
    fn a_pooled_environment_is_one_line_with_what_it_holds_and_real_leftovers_stay_two() {
        let listed = |kind, name: &str, run: &str, status| Listed {
            leftover: Leftover::new(kind, name, Some(run)),
            status,
            fix: format!("fix of {run}"),
        };
        let list = vec![
            listed(Kind::Network, "cyclix-e1-int", "e1", "pooled"),
            listed(Kind::Container, "cyclix-e1-proxy", "e1", "pooled"),
            listed(Kind::Network, "cyclix-e1-ext", "e1", "pooled"),
            listed(Kind::Pod, "cyclix-e1", "e1", "pooled"),
            listed(Kind::Container, "cyclix-r9-agent", "r9", "dead-run"),
        ];
        let lines = human_lines(&list);
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert_eq!(
            lines[0],
            "container dead-run  cyclix-r9-agent (r9)\n          fix of r9"
        );
        assert_eq!(
            lines[1],
            "pool      pooled    environment e1: container, network ×2, pod\n          fix of e1"
        );
    }
}
