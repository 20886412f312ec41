use std::sync::atomic::Ordering;
use std::time::Duration;

use super::*;
use crate::run::boundary::Watched;
use crate::run::record;
use crate::run::seam::FakeRunHost;
use crate::spec::SpecContext;
use crate::systemd::fake::Call;
use crate::systemd::{FakeUnitManager, Op};

mod expect;
mod faults;
mod gate;

use expect::Expect;

type Script = Box<dyn Fn(&FakeUnitManager)>;

struct World {
    dir: tempfile::TempDir,
    inp: RunInputs,
}

fn world() -> World {
    let dir = tempfile::tempdir().expect("tmp");
    let mut inp = crate::run::inputs::fixture(
        dir.path(),
        "r1",
        "command: [agent], env: [API_KEY]",
        "command: [check]",
    );
    inp.secrets = vec![("API_KEY".into(), b"s3cret".to_vec())];
    inp.log_key = crate::render::plan::PREVIEW_LOG_KEY.to_string();
    inp.watched = vec![Watched {
        name: "CYCLIX_CANARY".into(),
        value: b"canary-0123456789".to_vec(),
    }];
    World { dir, inp }
}

fn nothing_left(w: &World, rec: &RunRecord, host: &FakeRunHost) {
    assert!(rec.leftovers.is_empty(), "leftovers: {:?}", rec.leftovers);
    assert!(!w.inp.paths.worktree.exists(), "worktree left");
    for tree in [
        crate::layout::gate_tree(&w.inp.paths.worktree),
        crate::layout::gate_base_tree(&w.inp.paths.worktree),
    ] {
        assert!(!tree.exists(), "{} left", tree.display());
    }
    assert!(!w.inp.paths.run_dir.exists(), "run dir left");
    for d in [&w.inp.paths.quadlet_dir, &w.inp.paths.units_dir] {
        let n = std::fs::read_dir(d).map_or(0, Iterator::count);
        assert_eq!(n, 0, "files left in {}", d.display());
    }
    assert!(
        host.objects.lock().expect("lock").is_empty(),
        "podman objects left"
    );
}

fn started(units: &FakeUnitManager) -> Vec<String> {
    units
        .calls()
        .iter()
        .filter_map(|c| match c {
            Call::Start { unit, .. } => Some(unit.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_passing_run_goes_through_every_phase_and_leaves_nothing() {
    let w = world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 0);
    units.exit_after_start("cyclix-r1-gate.service", 0);
    let host = FakeRunHost {
        journal: vec![
            r#"{"key":"00000000000000000000000000000000","status":"403","host":"x"}"#.into(),
            "squid started".into(),
            // What squid's cache log quotes of a request the agent crafted: no key.
            r#"{"status":"200","host":"forged.example","reason":"allowlisted"}"#.into(),
        ],
        ..Default::default()
    };
    let records = w.dir.path().join("records");
    let owner = crate::run::ledger::Owner {
        tenant: "acme".into(),
        run_id: "r1".into(),
        pid: 1,
        started_ms: 0,
        repo: w.inp.spec.repo.path.clone().into(),
    };
    let at = crate::layout::RunFiles::new(&records, "r1").marker();
    let ledger = Ledger::create(&at, &owner).expect("ledger");
    let rec = execute(&w.inp, ledger, &units, &host);
    assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
    // The ledger on disk names every kind of thing such a run creates: all but a podman
    // secret, since the agent's variable reaches it through the hand-over at the go.
    let (_, entries) = crate::run::ledger::read(&at).expect("the ledger reads back");
    let calls = host.calls();
    assert!(
        calls.iter().any(|c| c == "hand_over API_KEY")
            && !calls.iter().any(|c| c.starts_with("secret_create")),
        "{calls:?}"
    );
    for kind in crate::run::ledger::KINDS[1..]
        .iter()
        .filter(|k| **k != "secret")
    {
        assert!(
            entries.iter().any(|e| e.kind() == *kind),
            "no {kind} in {entries:?}"
        );
    }
    let names: Vec<&str> = rec.phases.iter().map(|p| p.name.as_str()).collect();
    // No host-wide limit here (`capacity: None`): every phase but `queue`.
    assert_eq!(names, &crate::failpoint::PHASES[1..]);
    // The proxy and the agent start as parallel jobs, in either order; the gate after both.
    let mut order = started(&units);
    order[..2].sort();
    assert_eq!(
        order,
        [
            "cyclix-r1-agent.service",
            "cyclix-r1-proxy.service",
            "cyclix-r1-gate.service"
        ]
    );
    assert!(rec.agent_ready_ms.is_some() && rec.go_ms >= rec.agent_ready_ms);
    assert_eq!((rec.agent_exit, rec.gate_exit), (Some(0), Some(0)));
    assert_eq!(rec.branch, "cyclix/acme/r1");
    assert_eq!(rec.commits.len(), 1);
    assert_eq!(
        rec.egress_decisions.len(),
        1,
        "only the access log's JSON lines (with the run's key) are decisions"
    );
    assert_eq!(rec.egress_decisions[0]["host"], "x");
    assert!(rec.egress_decisions[0].get("key").is_none(), "{rec:?}");
    assert!(
        rec.notices
            .iter()
            .any(|n| n.contains("1 JSON line(s) without this run's access-log key")),
        "{:?}",
        rec.notices
    );
    assert_eq!(rec.secret_names, ["API_KEY"]);
    assert!(
        !serde_json::to_string(&rec)
            .expect("json")
            .contains("s3cret"),
        "a secret value reached the record"
    );
    nothing_left(&w, &rec, &host);
    // every unit of the run was stopped, including the generated -network/-pod oneshots
    let stopped: Vec<String> = units
        .calls()
        .iter()
        .filter(|c| c.op() == Op::Stop)
        .flat_map(|c| c.units().into_iter().map(str::to_owned))
        .collect();
    for u in [
        "cyclix-r1-pod.service",
        "cyclix-r1-network.service",
        "cyclix-r1-egress-network.service",
    ] {
        assert!(stopped.iter().any(|s| s == u), "{u} not stopped");
    }
}

#[test]
fn agent_and_gate_failures_are_results_not_errors() {
    let rows = [
        (
            "the agent exits 3",
            Some(3),
            None,
            Expect::result(RunResult::AgentFailed)
                .agent(Some(3))
                .gate(None)
                .gate_ran(false),
        ),
        (
            "the gate exits 1",
            Some(0),
            Some(1),
            Expect::result(RunResult::GateFailed)
                .agent(Some(0))
                .gate(Some(1))
                .gate_ran(true),
        ),
    ];
    for (row, agent, gate, expect) in rows {
        let w = world();
        let units = FakeUnitManager::new();
        if let Some(code) = agent {
            units.exit_after_start("cyclix-r1-agent.service", code);
        }
        if let Some(code) = gate {
            units.exit_after_start("cyclix-r1-gate.service", code);
        }
        let host = FakeRunHost::default();
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        expect.check(row, &w, &rec, &units, &host);
    }
}

fn fails_in(phase: &str, rec: &RunRecord) {
    assert_eq!(rec.result, RunResult::Error, "{rec:?}");
    assert_eq!(rec.failed_phase.as_deref(), Some(phase), "{rec:?}");
    assert!(
        rec.error
            .as_deref()
            .is_some_and(|e| e.contains(&format!("phase {phase}"))),
        "{:?}",
        rec.error
    );
    assert_eq!(rec.result.exit_code(), 2);
}

#[test]
fn a_base_or_repository_git_cannot_read_names_the_specs_file_line_and_key() {
    for (op, key) in [("rev_parse", "repo.base"), ("common_dir", "repo.path")] {
        let w = world();
        let host = FakeRunHost {
            fail: vec![op.into()],
            ..Default::default()
        };
        let units = FakeUnitManager::new();
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        Expect::error_in("prepare")
            .error_has(format!("t.yaml:2: {key}: injected failure in {op}"))
            .check(op, &w, &rec, &units, &host);
    }
}

#[test]
fn every_phase_failure_is_named_and_torn_down() {
    for op in [
        "rev_parse",
        "used_subnets",
        "repo_state",
        "private_repo",
        "import_bundle",
        "hand_over",
        "commits",
        "generate_units",
    ] {
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 0);
        units.exit_after_start("cyclix-r1-gate.service", 0);
        let host = FakeRunHost {
            fail: vec![op.into()],
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        Expect::error_in(match op {
            "commits" => "collect",
            "import_bundle" => "import",
            "generate_units" => "load",
            "hand_over" => "probe",
            _ => "prepare",
        })
        .check(op, &w, &rec, &units, &host);
    }
    let cases: Vec<(&str, Script)> = vec![
        // The load phase's look at a unit fails (it loads the units, no reload).
        (
            "load",
            Box::new(|u: &FakeUnitManager| {
                u.fail_next(
                    Op::Status,
                    Some("cyclix-r1-gate.service"),
                    crate::systemd::Error::Dbus {
                        op: Op::Status,
                        unit: "cyclix-r1-gate.service".into(),
                        message: "boom".into(),
                    },
                );
            }),
        ),
        // A unit the manager cannot load: the reload is tried, then the run fails.
        (
            "load",
            Box::new(|u: &FakeUnitManager| {
                u.set_missing("cyclix-r1-pod.service");
                u.fail_next(
                    Op::Reload,
                    None,
                    crate::systemd::Error::Dbus {
                        op: Op::Reload,
                        unit: "user manager".into(),
                        message: "boom".into(),
                    },
                );
            }),
        ),
        (
            "load",
            Box::new(|u: &FakeUnitManager| u.set_missing("cyclix-r1-pod.service")),
        ),
        (
            "start",
            Box::new(|u: &FakeUnitManager| {
                u.fail_next(
                    Op::Start,
                    Some("cyclix-r1-proxy.service"),
                    crate::systemd::Error::StartSkipped {
                        unit: "cyclix-r1-proxy.service".into(),
                    },
                );
            }),
        ),
        // The agent unit starts next to the proxy, so its failure is the start phase's.
        (
            "start",
            Box::new(|u: &FakeUnitManager| {
                u.fail_next(
                    Op::Start,
                    Some("cyclix-r1-agent.service"),
                    crate::systemd::Error::NoSuchUnit {
                        unit: "cyclix-r1-agent.service".into(),
                    },
                );
            }),
        ),
    ];
    for (phase, script) in cases {
        let w = world();
        let units = FakeUnitManager::new();
        units.exit_after_start("cyclix-r1-agent.service", 0);
        units.exit_after_start("cyclix-r1-gate.service", 0);
        script(&units);
        let host = FakeRunHost::default();
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        Expect::error_in(phase).check(phase, &w, &rec, &units, &host);
    }
}

#[test]
fn an_agent_that_never_ends_is_stopped_at_its_budget() {
    // systemd did not stop it at its RuntimeMaxSec=; cyclix did at its budget (timeout +
    // slack), and it ended: the agent's time ran out (issue 32 item 3).
    let mut w = world();
    w.inp.spec.agent.timeout_s = 0;
    w.inp.deadlines.slack = Duration::from_millis(30);
    let units = FakeUnitManager::new();
    let host = FakeRunHost::default();
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::AgentTimeout, "{rec:?}");
    assert!(
        rec.causes.iter().any(|c| c.contains("`agent.timeout`")),
        "{rec:?}"
    );
    nothing_left(&w, &rec, &host);
    // A stop that fails leaves the agent running: that stays cyclix's error, and nothing of
    // the still-running agent is taken for its work (attack review).
    let units = FakeUnitManager::new();
    units.fail_next(
        crate::systemd::Op::Stop,
        Some("cyclix-r1-agent.service"),
        crate::systemd::Error::Deadline {
            unit: "cyclix-r1-agent.service".into(),
            op: crate::systemd::Op::Stop,
            phase: "waiting for the job to finish",
            after_ms: 1,
            state: "active".into(),
        },
    );
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &FakeRunHost::default());
    fails_in("agent", &rec);
    assert!(
        rec.error
            .as_deref()
            .is_some_and(|e| e.contains("did not finish")),
        "{:?}",
        rec.error
    );
}

#[test]
fn anything_left_after_teardown_fails_the_run() {
    let w = world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 0);
    units.exit_after_start("cyclix-r1-gate.service", 0);
    let host = FakeRunHost::default();
    host.objects
        .lock()
        .expect("lock")
        .push("network cyclix-r1".into());
    // the fake keeps non-secret objects until remove_run_objects; make removal fail
    let host = FakeRunHost {
        fail: vec!["remove_run_objects".into()],
        objects: std::sync::Mutex::new(vec!["network cyclix-r1".into()]),
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::Error);
    assert!(
        rec.leftovers.iter().any(|l| l == "network cyclix-r1"),
        "{:?}",
        rec.leftovers
    );
}

#[test]
fn changes_on_the_host_are_reported_not_failed_and_processes_are_leftovers() {
    let base = "0123456789abcdef0123456789abcdef01234567".to_string();
    let w = world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 0);
    units.exit_after_start("cyclix-r1-gate.service", 0);
    let mut inp = w.inp.clone();
    inp.deadlines.settle = Duration::from_millis(50);
    let host = FakeRunHost {
        refs: std::sync::Mutex::new(vec![
            ("refs/heads/main".into(), base.clone()),
            ("refs/tags/v1".into(), base.clone()),
        ]),
        // Made on the host while the run was on (the sandbox cannot write there).
        refs_later: vec![("refs/heads/stray".into(), "a".repeat(40))],
        ..Default::default()
    };
    let rec = execute(&inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
    assert_eq!(
        rec.repo_changes,
        vec![format!(
            "ref refs/heads/stray created at {}",
            "a".repeat(12)
        )]
    );
    // The imported run branch is what cyclix created: never reported.
    assert!(
        !rec.repo_changes
            .iter()
            .any(|c| c.contains("cyclix/acme/r1"))
    );
    assert!(record::summary(&rec).contains("CHANGED ON THE HOST"));
    let host = FakeRunHost {
        processes: vec!["process 77 (conmon): /usr/bin/conmon -n cyclix-r1-agent".into()],
        ..Default::default()
    };
    let rec = execute(&inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.failed_phase.as_deref(), Some("audit"));
    assert!(rec.leftovers.join("\n").contains("process 77 (conmon)"));
}

#[test]
fn secret_values_the_agent_put_in_requests_or_logs_are_never_recorded() {
    let w = world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 0);
    units.exit_after_start("cyclix-r1-gate.service", 0);
    let host = FakeRunHost {
        journal: vec![
            r#"{"key":"00000000000000000000000000000000","status":"403","host":"s3cret.evil.example","url":"http://x/?k=s3cret"}"#.into(),
            "leaking s3cret here".into(),
        ],
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    let text = serde_json::to_string(&rec).expect("json");
    assert!(!text.contains("s3cret"), "{text}");
    assert!(
        rec.egress_decisions[0]["url"] == "http://x/?k=***",
        "{rec:?}"
    );
}

#[test]
fn a_refused_bundle_or_no_commits_imports_nothing() {
    let w = world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 0);
    units.exit_after_start("cyclix-r1-gate.service", 0);
    let host = FakeRunHost {
        refuse_bundle: Some("the bundle must hold exactly one ref".into()),
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::AgentFailed, "{rec:?}");
    assert_eq!(rec.result.exit_code(), 1);
    let imp = rec.import.as_ref().expect("import");
    assert_eq!(imp.outcome, "refused");
    assert!(
        rec.causes[0].contains("exactly one ref"),
        "{:?}",
        rec.causes
    );
    assert!(rec.commits.is_empty() && rec.branch.is_empty(), "{rec:?}");
    assert!(!host.calls().iter().any(|c| c.starts_with("commits")));
    nothing_left(&w, &rec, &host);
    let host = FakeRunHost {
        no_commits: true,
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
    assert_eq!(
        rec.import.as_ref().map(|i| i.outcome.as_str()),
        Some("no-commits")
    );
    assert!(!host.calls().iter().any(|c| c.starts_with("import_bundle")));
    assert!(record::summary(&rec).contains("branch: none (nothing imported"));
    // The import runs after the escape check, and no host git ever runs in the private
    // repository: it is removed as plain files.
    let calls = host.calls();
    assert!(
        calls.iter().any(|c| c.starts_with("remove_tree")),
        "{calls:?}"
    );
    assert!(
        !calls.iter().any(|c| c.starts_with("worktree")),
        "{calls:?}"
    );
}

#[test]
fn a_run_branch_without_commits_is_deleted_only_while_it_points_at_the_base() {
    let base = "0123456789abcdef0123456789abcdef01234567".to_string();
    let w = world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 3);
    let host = FakeRunHost {
        refs: std::sync::Mutex::new(vec![("refs/heads/main".into(), base.clone())]),
        ..Default::default()
    };
    // The fake worktree_add does not create the branch; the real git does, at the base.
    host.refs
        .lock()
        .expect("lock")
        .push(("refs/heads/cyclix/acme/r1".into(), base.clone()));
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::AgentFailed, "{rec:?}");
    assert!(
        host.calls()
            .contains(&format!("delete_ref_at refs/heads/cyclix/acme/r1 {base}")),
        "{:?}",
        host.calls()
    );
    assert!(
        rec.notices
            .iter()
            .any(|n| n.contains("deleted at teardown")),
        "{:?}",
        rec.notices
    );
    assert!(rec.leftovers.is_empty(), "{:?}", rec.leftovers);
    // A direct-tier style change of an existing branch is a leftover on other tiers.
    assert_eq!(
        audit::ref_changes(
            &[("refs/heads/main".into(), base.clone())],
            &[("refs/heads/main".into(), "e".repeat(40))],
            "refs/heads/cyclix/acme/r1",
            false
        )
        .len(),
        1
    );
    assert!(
        audit::ref_changes(
            &[("refs/heads/main".into(), base.clone())],
            &[("refs/heads/main".into(), "e".repeat(40))],
            "refs/heads/cyclix/acme/r1",
            true
        )
        .is_empty()
    );
    let gone = audit::ref_changes(&[("refs/tags/v1".into(), base)], &[], "x", true);
    assert!(
        gone[0].starts_with("ref refs/tags/v1 deleted during the run"),
        "{gone:?}"
    );
}
