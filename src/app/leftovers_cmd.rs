//! `cyclix leftovers [--json]`: everything of cyclix's that exists on this host right now, each
//! tied to its run: a run in progress (in use), a run whose cyclix died (the next run of its
//! tenant converges it), or no known run (for a person to look at; cyclix never deletes it).
//! Exit 0 when nothing is left outside running runs, 1 otherwise.
//!
//! JSON schema `cyclix-leftovers/1`: `{"schema", "leftovers": [{"kind", "name", "run",
//! "status", "fix"}]}` with `kind` one of container, pod, network, volume, secret, unit-file, subnet-reservation, port-reservation,
//! worktree, run-dir, tripwire, marker, process (conmon or the escape sentinel, B11); `status` one of `running`, `dead-run`, `untied`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::podman::Podman;
use crate::run::converge::{self, Marker};

/// How long `cyclix leftovers` waits for podman's storage lock before it names the holder
/// (below podman's own 30 s listing deadline).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// One thing left on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Leftover {
    /// What it is.
    pub kind: &'static str,
    /// Its name or path.
    pub name: String,
    /// The run id it belongs to, when it can be told.
    pub run: Option<String>,
    /// `running`, `dead-run` or `untied`.
    pub status: &'static str,
    /// What to do about it.
    pub fix: String,
}

/// The run id in a per-run unit file name (`cyclix-RUN-agent.container`,
/// `cyclix-RUN-egress-network.service`, `cyclix-RUN.pod`, ...). Pure.
#[must_use]
pub fn run_of_unit_file(file: &str) -> Option<String> {
    let mut stem = file
        .strip_prefix("cyclix-")?
        .rsplit_once('.')?
        .0
        .to_string();
    if let Some(i) = stem.find("-svc-") {
        stem.truncate(i);
    }
    for suffix in [
        "-network",
        "-pod",
        "-volume",
        "-egress",
        "-agent",
        "-gate",
        "-proxy",
        "-sentinel",
    ] {
        if let Some(s) = stem.strip_suffix(suffix) {
            stem = s.to_string();
        }
    }
    (!stem.is_empty()).then_some(stem)
}

/// Classifies `run` against the markers: in use, left by a dead cyclix, or unknown. Pure
/// given `alive` (whether a pid still runs).
fn status_of(
    run: Option<&str>,
    markers: &BTreeMap<String, Marker>,
    alive: &dyn Fn(u32) -> bool,
) -> (&'static str, String) {
    match run.and_then(|r| markers.get(r)) {
        Some(m) if alive(m.pid) => ("running", format!("in use by run {} of tenant {} (pid {})", m.run_id, m.tenant, m.pid)),
        Some(m) => (
            "dead-run",
            format!("left by run {} whose cyclix died: `cyclix run {}` finishes its teardown first", m.run_id, m.tenant),
        ),
        None => (
            "untied",
            "not tied to a known run: check it and remove it by hand (cyclix never deletes what it cannot tie to a run)".into(),
        ),
    }
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Lists the leftovers.
///
/// # Errors
/// podman or I/O failures.
pub fn run(json: bool) -> Result<Outcome> {
    let env = HostEnv::from_env()?;
    let runtime = env.runtime_dir()?.clone();
    let runs_dir = env.state_home.join("cyclix/runs");
    let mut markers = BTreeMap::new();
    if let Ok(rd) = std::fs::read_dir(&runs_dir) {
        for t in rd.filter_map(Result::ok) {
            for m in converge::orphans(&t.path()) {
                markers.insert(m.run_id.clone(), m);
            }
        }
    }
    // Every podman listing waits behind a held storage lock (security-cases §3): name the
    // holder at once instead of timing out 30 s later without it.
    let graphroot = crate::run::storage_lock::graphroot(
        &env.home,
        &env.config_home,
        &env.data_home,
        crate::host::namespaces::host_uid(),
    );
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
    let mut found = podman_objects()?;
    found.extend(files(&env, &runtime, &runs_dir, &markers));
    found.extend(processes());
    let list: Vec<Leftover> = found
        .into_iter()
        .map(|(kind, name, run)| {
            let (status, fix) = status_of(run.as_deref(), &markers, &pid_alive);
            Leftover {
                kind,
                name,
                run,
                status,
                fix,
            }
        })
        .collect();
    let bad = list.iter().filter(|l| l.status != "running").count();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"schema": "cyclix-leftovers/1", "leftovers": list})
            )?
        );
    } else if list.is_empty() {
        println!("no leftovers");
    } else {
        for l in &list {
            println!(
                "{:<9} {:<9} {} ({})\n          {}",
                l.kind,
                l.status,
                l.name,
                l.run.as_deref().unwrap_or("-"),
                l.fix
            );
        }
    }
    Ok(if bad == 0 {
        Outcome::Ok
    } else {
        Outcome::Findings
    })
}

/// Found things: (kind, name or path, run id if known).
type Found = Vec<(&'static str, String, Option<String>)>;

/// Everything labelled `io.cyclix.run` in podman, and the `cyclix-*` secrets.
fn podman_objects() -> Result<Found> {
    let mut found: Found = Vec::new();
    let podman = Podman::new();
    let label = "io.cyclix.run";
    let run_label = |l: &crate::podman::Labels| l.get(label).cloned();
    for c in podman.containers(label)? {
        found.push(("container", c.names.join(","), run_label(&c.labels)));
    }
    for p in podman.pods(label)? {
        found.push(("pod", p.name, run_label(&p.labels)));
    }
    for n in podman.networks(label)? {
        found.push(("network", n.name, run_label(&n.labels)));
    }
    for v in podman.volumes(label)? {
        found.push(("volume", v.name, run_label(&v.labels)));
    }
    for s in podman.secrets("cyclix-")? {
        let run = s
            .strip_prefix("cyclix-")
            .and_then(|r| r.rsplit_once('-'))
            .map(|(r, _)| r.to_string());
        found.push(("secret", s, run));
    }
    Ok(found)
}

/// Processes named after a run (field report B11): conmon (`-n cyclix-RUN-agent`) and the
/// escape sentinel (`argv[0]` `cyclix-RUN-sentinel`), tied to the run their name carries.
fn processes() -> Found {
    crate::run::procs::processes_naming(Path::new("/proc"), "cyclix-", std::process::id())
        .into_iter()
        .filter(|p| p.comm == "conmon" || p.argv0.ends_with("-sentinel"))
        .filter_map(|p| {
            let token = p
                .cmdline
                .split(' ')
                .find(|t| t.starts_with("cyclix-"))?
                .to_string();
            let run = run_of_unit_file(&format!("{token}.x"));
            Some((
                "process",
                format!("{} ({}): {}", p.pid, p.comm, p.cmdline),
                run,
            ))
        })
        .collect()
}

/// Per-run files: unit files, worktrees, run dirs, tripwires, markers.
fn files(
    env: &HostEnv,
    runtime: &Path,
    runs_dir: &Path,
    markers: &BTreeMap<String, Marker>,
) -> Found {
    let mut found: Found = Vec::new();
    for dir in [
        runtime.join("containers/systemd"),
        runtime.join("systemd/user"),
    ] {
        for f in names_in(&dir)
            .into_iter()
            .filter(|f| f.starts_with("cyclix-"))
        {
            let run = run_of_unit_file(&f);
            found.push(("unit-file", dir.join(&f).display().to_string(), run));
        }
    }
    let wt = env.data_home.join("cyclix/worktrees");
    for tenant in names_in(&wt) {
        for name in names_in(&wt.join(&tenant)) {
            // `RUN` is a run's private repository, `RUN.gate` its gate's tree.
            let run = name.strip_suffix(".gate").unwrap_or(&name).to_string();
            found.push((
                "worktree",
                wt.join(&tenant).join(&name).display().to_string(),
                Some(run),
            ));
        }
    }
    for (kind, dir) in [
        ("subnet-reservation", crate::run::lifecycle::SUBNETS_DIR),
        ("port-reservation", crate::run::lifecycle::PORTS_DIR),
    ] {
        let dir = runtime.join("cyclix").join(dir);
        for n in names_in(&dir) {
            let run = std::fs::read_to_string(dir.join(&n))
                .ok()
                .map(|r| r.trim().to_string());
            found.push((kind, dir.join(&n).display().to_string(), run));
        }
    }
    for run in names_in(&runtime.join("cyclix/runs")) {
        found.push((
            "run-dir",
            runtime.join("cyclix/runs").join(&run).display().to_string(),
            Some(run),
        ));
    }
    for f in names_in(&env.home) {
        if let Some(run) = f
            .strip_prefix(".cyclix-canary-key-")
            .or_else(|| f.strip_prefix(".cyclix-escape-"))
        {
            found.push((
                "tripwire",
                env.home.join(&f).display().to_string(),
                Some(run.to_string()),
            ));
        }
    }
    for m in markers.values() {
        found.push((
            "marker",
            converge::marker_path(&runs_dir.join(&m.tenant), &m.run_id)
                .display()
                .to_string(),
            Some(m.run_id.clone()),
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
    fn run_ids_come_back_from_unit_file_names() {
        for (f, run) in [
            ("cyclix-20261130t1-ab12-agent.container", "20261130t1-ab12"),
            ("cyclix-r1.pod", "r1"),
            ("cyclix-r1-egress.network", "r1"),
            ("cyclix-r1-egress-network.service", "r1"),
            ("cyclix-r1-svc-db.container", "r1"),
            ("cyclix-r1-pod.service", "r1"),
        ] {
            assert_eq!(run_of_unit_file(f).as_deref(), Some(run), "{f}");
        }
        assert_eq!(run_of_unit_file("other.container"), None);
        assert_eq!(
            run_of_unit_file("cyclix-20261130t124702-4efb-sentinel.x").as_deref(),
            Some("20261130t124702-4efb")
        );
    }

    #[test]
    fn leftovers_are_tied_to_running_dead_or_no_runs() {
        let m = |pid| Marker {
            tenant: "acme".into(),
            run_id: "r1".into(),
            pid,
            started_ms: 0,
            repo: "/r".into(),
            worktree: "/w".into(),
            run_dir: "/d".into(),
            quadlet_dir: "/q".into(),
            units_dir: "/u".into(),
            extra_files: vec![],
            base: String::new(),
            private_repo: true,
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
        assert_eq!(status_of(None, &markers, &|_| true).0, "untied");
    }
}
