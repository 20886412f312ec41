use std::path::PathBuf;

use super::*;
use crate::run::seam::FakeRunHost;
use crate::systemd::FakeUnitManager;
use crate::systemd::fake::Call;

/// A dead run `r9`'s ledger in `records`, naming a unit file, its unit, a tripwire, the
/// sentinel, podman, a private work tree, its run dir and its reservations beside `runs/`.
fn dead_run(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let q = dir.join("quadlet");
    std::fs::create_dir_all(&q).expect("q");
    std::fs::write(q.join("cyclix-r9-agent.container"), "").expect("unit");
    std::fs::write(q.join("cyclix-other-agent.container"), "").expect("someone else's");
    let key = dir.join(".cyclix-canary-key-r9");
    std::fs::write(&key, "k").expect("key");
    let root = dir.join("root");
    for (kind, n, owner) in [
        ("subnets", "9", "r9"),
        ("ports", "20001", "r9"),
        ("ports", "20002", "r7"),
    ] {
        std::fs::create_dir_all(root.join(kind)).expect("dir");
        std::fs::write(root.join(kind).join(n), owner).expect("reservation");
    }
    std::fs::create_dir_all(root.join("runs/r9")).expect("run dir");
    let records = dir.join("records");
    let owner = Owner {
        tenant: "acme".into(),
        run_id: "r9".into(),
        pid: 1,
        started_ms: 0,
        repo: dir.join("repo"),
    };
    let mut l = Ledger::create(&RunFiles::new(&records, "r9").marker(), &owner).expect("ledger");
    for e in [
        Entry::RunDir {
            path: root.join("runs/r9"),
        },
        Entry::Reservations {
            dir: root.join("subnets"),
        },
        Entry::Reservations {
            dir: root.join("ports"),
        },
        Entry::Tripwire { path: key.clone() },
        Entry::Sentinel {
            name: "cyclix-r9-sentinel".into(),
        },
        Entry::Worktree {
            path: dir.join("wt"),
            private: true,
        },
        Entry::Podman,
        Entry::File {
            path: q.join("cyclix-r9-agent.container"),
        },
        Entry::Unit {
            name: "cyclix-r9-agent.service".into(),
        },
    ] {
        l.record(e).expect("append");
    }
    (q, key, root)
}

#[test]
fn a_dead_runs_ledger_is_found_and_its_run_torn_down() {
    let dir = tempfile::tempdir().expect("tmp");
    let (q, key, root) = dead_run(dir.path());
    let records = dir.path().join("records");
    let units = FakeUnitManager::new();
    let host = FakeRunHost::default();
    let found = ledger::all(&records);
    assert_eq!(found.len(), 1);
    let (owner, entries) = found.into_iter().next().expect("one");
    let rec = converge(
        &owner,
        entries,
        &units,
        &host,
        "r10",
        Some("teardown/podman".into()),
    );
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
    assert!(!root.join("runs/r9").exists());
    assert_eq!(rec.failed_phase.as_deref(), Some("interrupted"));
    assert_eq!(rec.died_in.as_deref(), Some("teardown/podman"));
    assert_eq!(
        rec.error.as_deref(),
        Some(
            "cyclix (pid 1) ended during phase teardown/podman without tearing the run down; \
             run r10 finished the teardown (1 unit files, the labelled podman objects, secrets, \
             worktree, run dir)"
        )
    );
    assert!(host.calls().iter().any(|c| c == "kill_sentinel r9"));
    assert!(rec.leftovers.is_empty(), "{:?}", rec.leftovers);
    ledger::remove(&records, "r9");
    assert!(ledger::all(&records).is_empty());
}

#[test]
fn a_failed_step_of_convergence_is_recorded_not_dropped() {
    let dir = tempfile::tempdir().expect("tmp");
    dead_run(dir.path());
    let records = dir.path().join("records");
    let units = FakeUnitManager::new();
    let host = FakeRunHost {
        fail: vec!["remove_run_objects".into(), "remove_tree".into()],
        ..FakeRunHost::default()
    };
    let notices = converge_tenant(&records, &units, &host, "r10").expect("converge");
    assert_eq!(
        notices,
        ["converged run r9 left by a cyclix that died: 0 leftover(s)"]
    );
    let rec: RunRecord = serde_json::from_slice(
        &std::fs::read(RunFiles::new(&records, "r9").record()).expect("record"),
    )
    .expect("json");
    let err = rec.error.unwrap_or_default();
    assert!(
        err.contains("tried to finish the teardown")
            && err.contains("removing the run's podman objects: injected failure")
            && err.contains("removing the run's private repository: injected failure")
            && !err.contains("finished the teardown"),
        "{err}"
    );
    assert!(ledger::all(&records).is_empty(), "the ledger is removed");
}
