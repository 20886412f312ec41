//! Convergence after a cyclix that died mid-run (SIGKILL, OOM, power loss of the session): each
//! run leaves a marker (`RUN.running` beside its record) naming everything it may create; the
//! next run of the tenant, holding the tenant lock (so the marker's owner is gone), finishes
//! that run's teardown, audits it and records what it found (security-cases §3 "SIGKILL of
//! toolkit mid-teardown").

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use super::record::RunRecord;
use super::seam::RunHost;
use crate::systemd::{JobMode, UnitManager};

/// What a run may have created, written before it creates anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// Tenant.
    pub tenant: String,
    /// Run id.
    pub run_id: String,
    /// The process that ran it.
    pub pid: u32,
    /// Start, in ms since the Unix epoch.
    pub started_ms: u128,
    /// The repository (for the worktree).
    pub repo: PathBuf,
    /// The run's worktree.
    pub worktree: PathBuf,
    /// The run's state directory.
    pub run_dir: PathBuf,
    /// Quadlet's runtime directory.
    pub quadlet_dir: PathBuf,
    /// The runtime unit directory.
    pub units_dir: PathBuf,
    /// Files the run planted outside those (tripwires).
    pub extra_files: Vec<PathBuf>,
    /// The commit the run branch starts at (resolved before the run); convergence deletes
    /// the run branch only while it still points here (no commits). Empty: unknown, kept.
    #[serde(default)]
    pub base: String,
    /// The work tree is the run's private repository (tier `container`): removed as plain
    /// files, never with git.
    #[serde(default)]
    pub private_repo: bool,
}

/// `DIR/RUN.running`.
#[must_use]
pub fn marker_path(tenant_dir: &Path, run_id: &str) -> PathBuf {
    tenant_dir.join(format!("{run_id}.running"))
}

/// Writes the marker (atomically).
///
/// # Errors
/// I/O failures.
pub fn write(tenant_dir: &Path, m: &Marker) -> Result<()> {
    std::fs::create_dir_all(tenant_dir)
        .with_context(|| format!("creating {}", tenant_dir.display()))?;
    super::record::atomic_write(
        &marker_path(tenant_dir, &m.run_id),
        &serde_json::to_vec_pretty(m)?,
    )
}

/// `DIR/RUN.phase`: the phase (or `teardown/STEP`) the run was last in
/// (`lifecycle::RunInputs::progress`).
#[must_use]
pub fn phase_path(tenant_dir: &Path, run_id: &str) -> PathBuf {
    tenant_dir.join(format!("{run_id}.phase"))
}

/// Removes the marker (and the phase note) once the run's own record is written.
pub fn remove(tenant_dir: &Path, run_id: &str) {
    let _ = std::fs::remove_file(phase_path(tenant_dir, run_id));
    let _ = std::fs::remove_file(marker_path(tenant_dir, run_id));
    // The import's bundle and diff staging (`run::import_phase`), if cyclix died during it.
    let _ = std::fs::remove_dir_all(import_dir(tenant_dir, run_id));
}

/// `DIR/RUN.import`: where the import stages the run's bundle and uncommitted diff, on disk
/// beside the record (never on the runtime tmpfs: a 512 MiB bundle could fill it).
#[must_use]
pub fn import_dir(tenant_dir: &Path, run_id: &str) -> PathBuf {
    tenant_dir.join(format!("{run_id}.import"))
}

/// The phase the dead run `m` was in, from its phase note (`None` if it never noted one).
#[must_use]
pub fn last_phase(tenant_dir: &Path, run_id: &str) -> Option<String> {
    std::fs::read_to_string(phase_path(tenant_dir, run_id))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The markers of runs whose process is gone (call while holding the tenant lock).
#[must_use]
pub fn orphans(tenant_dir: &Path) -> Vec<Marker> {
    let Ok(rd) = std::fs::read_dir(tenant_dir) else {
        return Vec::new();
    };
    let mut v: Vec<Marker> = rd
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "running"))
        .filter_map(|p| {
            std::fs::read(&p)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
        })
        .collect();
    v.sort_by(|a: &Marker, b: &Marker| a.run_id.cmp(&b.run_id));
    v
}

/// The unit a Quadlet or plain unit file of the run becomes (`X.container` → `X.service`,
/// `X.pod` → `X-pod.service`, `X.network` → `X-network.service`, `X.service` itself).
#[must_use]
pub fn unit_of(file: &str) -> Option<String> {
    let (stem, ext) = file.rsplit_once('.')?;
    Some(match ext {
        "container" => format!("{stem}.service"),
        "pod" => format!("{stem}-pod.service"),
        "network" => format!("{stem}-network.service"),
        "volume" => format!("{stem}-volume.service"),
        "service" => file.to_string(),
        _ => return None,
    })
}

/// Releases the dead run's subnet and port reservations (`lifecycle::reserve_subnet`,
/// `reserve_ports`): the files in `$XDG_RUNTIME_DIR/cyclix/{subnets,ports}/` that name it.
fn release_reservations(m: &Marker) {
    for kind in [super::lifecycle::SUBNETS_DIR, super::lifecycle::PORTS_DIR] {
        if let Some(dir) = m
            .run_dir
            .parent()
            .and_then(Path::parent)
            .map(|p| p.join(kind))
            && let Ok(rd) = std::fs::read_dir(&dir)
        {
            for f in rd.filter_map(Result::ok).map(|e| e.path()) {
                if std::fs::read_to_string(&f).is_ok_and(|o| o.trim() == m.run_id) {
                    let _ = std::fs::remove_file(&f);
                }
            }
        }
    }
}

/// Finishes the teardown of the dead run `m` and audits it; returns its record (result
/// `error`, phase `interrupted`, what was left after convergence).
pub fn converge(
    m: &Marker,
    units: &dyn UnitManager,
    host: &dyn RunHost,
    by: &str,
    died_in: Option<String>,
) -> RunRecord {
    let prefix = format!("cyclix-{}", m.run_id);
    let mut files = Vec::new();
    for dir in [&m.quadlet_dir, &m.units_dir] {
        if let Ok(rd) = std::fs::read_dir(dir) {
            files.extend(rd.filter_map(Result::ok).map(|e| e.path()).filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
            }));
        }
    }
    // Stop units before their files go: the generated ones disappear with the files.
    for f in &files {
        if let Some(u) = f.file_name().and_then(|n| unit_of(&n.to_string_lossy())) {
            let _ = units.stop(&u, JobMode::Replace, Duration::from_secs(45));
            let _ = units.reset_failed(&u);
        }
    }
    for f in &files {
        let _ = std::fs::remove_file(f);
    }
    let _ = units.reload();
    let _ = host.remove_run_objects(&m.run_id);
    if let Ok(inv) = host.inventory(&m.run_id) {
        for s in inv.iter().filter_map(|l| l.strip_prefix("secret ")) {
            let _ = host.secret_remove(s);
        }
    }
    let _ = host.kill_sentinel(&m.run_id);
    let _ = if m.private_repo {
        let _ = host.remove_tree(&super::lifecycle::gate_tree_of(&m.worktree));
        host.remove_tree(&m.worktree)
    } else {
        host.worktree_remove(&m.repo, &m.worktree)
    };
    let mut branch_note = String::new();
    if !m.base.is_empty() {
        let branch = format!(
            "refs/heads/{}",
            super::lifecycle::branch_name(&m.tenant, &m.run_id)
        );
        if host
            .delete_ref_at(&m.repo, &branch, &m.base)
            .unwrap_or(false)
        {
            branch_note = ", its branch (no commits)".into();
        }
    }
    let _ = std::fs::remove_dir_all(&m.run_dir);
    for f in &m.extra_files {
        let _ = std::fs::remove_file(f);
    }
    release_reservations(m);
    let mut left = host
        .inventory(&m.run_id)
        .unwrap_or_else(|e| vec![format!("inventory failed: {e:#}")]);
    left.extend(
        files
            .iter()
            .filter(|f| f.exists())
            .map(|f| format!("file {}", f.display())),
    );
    left.extend(
        host.run_processes(&m.run_id)
            .unwrap_or_else(|e| vec![format!("process listing failed: {e:#}")]),
    );
    for p in [&m.worktree, &m.run_dir] {
        if p.exists() {
            left.push(format!(
                "{} {}",
                if p == &m.worktree {
                    "worktree"
                } else {
                    "run dir"
                },
                p.display()
            ));
        }
    }
    let mut rec = RunRecord::interrupted(
        &m.tenant,
        &m.run_id,
        format!(
            "cyclix (pid {}) ended during {} without tearing the run down; run {by} finished \
             the teardown ({} unit files, the labelled podman objects, secrets, worktree{branch_note}, \
             run dir)",
            m.pid,
            died_in
                .as_deref()
                .map_or_else(|| "the run".to_string(), |p| format!("phase {p}")),
            files.len()
        ),
        left,
    );
    rec.died_in = died_in;
    rec
}

impl RunRecord {
    /// The record of a run whose cyclix died and that a later run converged.
    #[must_use]
    pub fn interrupted(tenant: &str, run_id: &str, error: String, leftovers: Vec<String>) -> Self {
        RunRecord {
            failed_phase: Some("interrupted".into()),
            error: Some(error),
            leftovers,
            ..RunRecord::new(tenant, run_id, String::new())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::seam::FakeRunHost;
    use crate::systemd::FakeUnitManager;
    use crate::systemd::fake::Call;

    #[test]
    fn unit_names_follow_quadlet() {
        assert_eq!(
            unit_of("cyclix-r1-agent.container").as_deref(),
            Some("cyclix-r1-agent.service")
        );
        assert_eq!(
            unit_of("cyclix-r1.pod").as_deref(),
            Some("cyclix-r1-pod.service")
        );
        assert_eq!(
            unit_of("cyclix-r1-egress.network").as_deref(),
            Some("cyclix-r1-egress-network.service")
        );
        assert_eq!(
            unit_of("cyclix-r1-gate.service").as_deref(),
            Some("cyclix-r1-gate.service")
        );
        assert_eq!(unit_of("squid.conf"), None);
    }

    #[test]
    fn a_dead_runs_marker_is_found_and_its_run_torn_down() {
        let dir = tempfile::tempdir().expect("tmp");
        let q = dir.path().join("quadlet");
        std::fs::create_dir_all(&q).expect("q");
        std::fs::write(q.join("cyclix-r9-agent.container"), "").expect("unit");
        std::fs::write(q.join("cyclix-other-agent.container"), "").expect("someone else's");
        let key = dir.path().join(".cyclix-canary-key-r9");
        std::fs::write(&key, "k").expect("key");
        let m = Marker {
            tenant: "acme".into(),
            run_id: "r9".into(),
            pid: 1,
            started_ms: 0,
            repo: dir.path().join("repo"),
            worktree: dir.path().join("wt"),
            run_dir: dir.path().join("run"),
            quadlet_dir: q.clone(),
            units_dir: dir.path().join("units"),
            extra_files: vec![key.clone()],
            base: String::new(),
            private_repo: true,
        };
        // Its reservations (`reserve_subnet`, `reserve_ports`) beside `runs/`; another run's stay.
        let root = dir.path().join("root");
        let m = Marker {
            run_dir: root.join("runs/r9"),
            ..m
        };
        for (kind, n, owner) in [
            ("subnets", "9", "r9"),
            ("ports", "20001", "r9"),
            ("ports", "20002", "r7"),
        ] {
            std::fs::create_dir_all(root.join(kind)).expect("dir");
            std::fs::write(root.join(kind).join(n), owner).expect("reservation");
        }
        let records = dir.path().join("records");
        write(&records, &m).expect("marker");
        let found = orphans(&records);
        assert_eq!(found, vec![m.clone()]);
        let units = FakeUnitManager::new();
        let host = FakeRunHost::default();
        let rec = converge(&m, &units, &host, "r10", Some("teardown/podman".into()));
        assert!(!q.join("cyclix-r9-agent.container").exists());
        assert!(
            q.join("cyclix-other-agent.container").exists(),
            "another run's file was touched"
        );
        assert!(!key.exists());
        assert!(
            units
                .calls()
                .iter()
                .any(|c| matches!(c, Call::Stop { unit, .. } if unit == "cyclix-r9-agent.service"))
        );
        assert!(host.calls().iter().any(|c| c == "remove_run_objects r9"));
        assert!(!root.join("subnets/9").exists() && !root.join("ports/20001").exists());
        assert!(
            root.join("ports/20002").exists(),
            "another run's port was released"
        );
        assert_eq!(rec.failed_phase.as_deref(), Some("interrupted"));
        assert_eq!(rec.died_in.as_deref(), Some("teardown/podman"));
        assert!(
            rec.error
                .as_deref()
                .is_some_and(|e| e.contains("during phase teardown/podman")),
            "{:?}",
            rec.error
        );
        assert!(host.calls().iter().any(|c| c == "kill_sentinel r9"));
        assert!(rec.leftovers.is_empty(), "{:?}", rec.leftovers);
        remove(&records, "r9");
        assert!(orphans(&records).is_empty());
    }
}
