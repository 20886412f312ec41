use std::path::PathBuf;
use std::time::Duration;

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
    let (rec, done) = converge(
        &owner,
        entries,
        &ctx(&units, &host),
        Duration::from_millis(10),
        Some("teardown/podman".into()),
    );
    assert!(done);
    assert!(rec.causes.is_empty(), "{:?}", rec.causes);
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

fn ctx<'a>(units: &'a FakeUnitManager, host: &'a FakeRunHost) -> Converging<'a> {
    Converging {
        units,
        host,
        by: "r10",
        lock_wait: Duration::from_millis(20),
        manager_started_ms: None,
        uid: 1000,
    }
}

fn record_of(records: &Path, run: &str) -> RunRecord {
    serde_json::from_slice(&std::fs::read(RunFiles::new(records, run).record()).expect("record"))
        .expect("json")
}

#[test]
fn a_failed_step_of_convergence_is_recorded_and_the_marker_kept() {
    let dir = tempfile::tempdir().expect("tmp");
    dead_run(dir.path());
    let records = dir.path().join("records");
    let units = FakeUnitManager::new();
    let host = FakeRunHost {
        fail: vec!["remove_run_objects".into(), "remove_tree".into()],
        ..FakeRunHost::default()
    };
    let notices = converge_tenant(&records, &ctx(&units, &host)).expect("converge");
    assert_eq!(notices.len(), 1);
    assert!(
        notices[0].starts_with("run r9 left by a cyclix that died is NOT converged")
            && notices[0].contains("is kept and the next run tries again"),
        "{notices:?}"
    );
    let rec = record_of(&records, "r9");
    let err = rec.error.unwrap_or_default();
    assert!(
        err.contains("tried to finish the teardown")
            && err.contains("removing the run's podman objects: injected failure")
            && err.contains("removing the run's private repository: injected failure")
            && err.contains("marker is kept")
            && !err.contains("finished the teardown"),
        "{err}"
    );
    assert_eq!(
        rec.causes,
        ["convergence incomplete: teardown steps failed"]
    );
    assert_eq!(ledger::all(&records).len(), 1, "the marker stays");
    // The next convergence, with the failures gone, finishes it and replaces the record.
    let ok = FakeRunHost::default();
    let notices = converge_tenant(&records, &ctx(&units, &ok)).expect("converge");
    assert_eq!(
        notices,
        ["converged run r9 left by a cyclix that died: 0 leftover(s)"]
    );
    let rec = record_of(&records, "r9");
    assert!(
        rec.error
            .as_deref()
            .is_some_and(|e| e.contains("finished the teardown")),
        "{rec:?}"
    );
    assert!(
        rec.notices
            .iter()
            .any(|n| n.starts_with("an earlier convergence kept the marker")),
        "{:?}",
        rec.notices
    );
    assert!(ledger::all(&records).is_empty(), "the marker is removed");
}

#[test]
fn a_held_storage_lock_blocks_convergence_in_bounded_time_touching_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let (q, _key, root) = dead_run(dir.path());
    let records = dir.path().join("records");
    let units = FakeUnitManager::new();
    let host = FakeRunHost {
        lock_held_looks: usize::MAX,
        ..FakeRunHost::default()
    };
    // Bounded by the lock's deadline: it returns (a hang would never get here), and says so.
    let notices = converge_tenant(&records, &ctx(&units, &host)).expect("converge");
    assert!(notices[0].contains("NOT converged"), "{notices:?}");
    assert!(
        !host
            .calls()
            .iter()
            .any(|c| c.starts_with("remove_run_objects")
                || c.starts_with("secret_remove")
                || c.starts_with("inventory")),
        "podman is not asked while its lock is held: {:?}",
        host.calls()
    );
    assert!(
        !units.calls().iter().any(|c| matches!(c, Call::Stop { .. })),
        "nothing is stopped"
    );
    assert!(q.join("cyclix-r9-agent.container").exists() && root.join("runs/r9").exists());
    let rec = record_of(&records, "r9");
    assert!(
        rec.causes[0].starts_with("convergence blocked: podman's storage lock is held")
            && rec.causes[0].contains("pid 4711 (`podman build .`)"),
        "{:?}",
        rec.causes
    );
    let left = rec.leftovers.join("\n");
    for want in [
        "cyclix-r9-agent.container",
        "runs/r9",
        "not listed, podman waits",
    ] {
        assert!(left.contains(want), "`{want}` missing: {left}");
    }
    assert_eq!(ledger::all(&records).len(), 1, "the marker stays");
}

#[test]
fn a_user_manager_younger_than_the_dead_run_is_named_as_a_cause() {
    let dir = tempfile::tempdir().expect("tmp");
    dead_run(dir.path());
    let records = dir.path().join("records");
    let units = FakeUnitManager::new();
    let host = FakeRunHost::default();
    let mut c = ctx(&units, &host);
    c.manager_started_ms = Some(42_000); // the dead run began at 0
    let notices = converge_tenant(&records, &c).expect("converge");
    assert_eq!(
        notices,
        [
            "converged run r9 left by a cyclix that died (its user manager died mid-run): 0 leftover(s)"
        ]
    );
    let rec = record_of(&records, "r9");
    assert!(
        rec.causes[0].starts_with("the user manager died or restarted during the run")
            && rec.causes[0].contains("started 42 s after the run began")
            && rec.causes[0].contains("systemctl start user@1000.service"),
        "{:?}",
        rec.causes
    );
}

#[test]
fn podmans_call_for_a_migrate_is_a_cause_with_the_fix() {
    let said = "removing the run's podman objects: podman ps: ERRO[0000] invalid internal \
                status, try resetting the pause process with \"podman system migrate\"";
    let fix = podman_fix(said).expect("named");
    assert!(
        fix.contains("run `podman system migrate` as this user"),
        "{fix}"
    );
    assert_eq!(
        podman_fix("removing the run's podman objects: deadline"),
        None
    );
}
