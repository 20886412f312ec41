//! The lifecycle under faults: failing probes and watches, host secrets in the sandbox,
//! interrupts, unhealthy services, OOM, full file systems, a held storage lock.

use super::*;

const FAILING: &str = "{\"id\":\"P19\",\"expect\":\"no podman socket\",\"got\":\"/run/podman/podman.sock\",\"verdict\":\"FAIL\"}\n{\"summary\":true,\"pass\":0,\"fail\":1}\n";

#[test]
fn a_failed_probe_refuses_the_agent_and_still_tears_down() {
    let w = world();
    let units = FakeUnitManager::new();
    let host = FakeRunHost {
        probe_report: Some((1, FAILING.into())),
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::ProbeRefused, "{rec:?}");
    assert_eq!(rec.result.exit_code(), 1);
    assert_eq!(
        rec.refusal,
        ["P19: expected no podman socket, got /run/podman/podman.sock"]
    );
    assert!(!started(&units).contains(&"cyclix-r1-gate.service".to_string()));
    assert_eq!(rec.agent_exit, None, "the agent never ran");
    nothing_left(&w, &rec, &host);
}

#[test]
fn a_process_left_in_the_held_container_after_the_probes_refuses_the_go_and_no_hand_over() {
    let w = world();
    let units = FakeUnitManager::new();
    let host = FakeRunHost {
        held: Some(
            [
                (10, "catatonit", true),
                (11, "cyclix", false),
                (12, "python3", false),
            ]
            .into_iter()
            .map(|(pid, comm, init)| crate::run::seam::Member {
                pid,
                comm: comm.into(),
                init,
            })
            .collect(),
        ),
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::ProbeRefused, "{rec:?}");
    assert!(
        rec.refusal.iter().any(|r| r.contains("12 (python3)")),
        "{:?}",
        rec.refusal
    );
    let calls = host.calls();
    assert!(
        !calls.iter().any(|c| c.starts_with("hand_over")),
        "the variables were handed over: {calls:?}"
    );
    assert_eq!(rec.agent_exit, None, "the agent never ran");
    nothing_left(&w, &rec, &host);
}

#[test]
fn a_host_secret_in_the_sandbox_refuses_before_the_agent_starts() {
    let w = world();
    let units = FakeUnitManager::new();
    let leak = crate::run::boundary::ProcessEnv {
        pid: 4242,
        comm: "catatonit".into(),
        vars: vec![("CYCLIX_CANARY".into(), b"x".to_vec())],
        unreadable: None,
    };
    let host = FakeRunHost {
        environ: vec![leak],
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::ProbeRefused);
    assert_eq!(
        rec.refusal,
        ["pid 4242 (catatonit): variable CYCLIX_CANARY is set"]
    );
    nothing_left(&w, &rec, &host);
}

#[test]
fn the_leak_watch_stops_a_running_agent_on_a_failing_watch_probe() {
    let mut w = world();
    w.inp.deadlines.watch = Duration::from_millis(5);
    let units = FakeUnitManager::new(); // the agent never ends by itself
    let host = FakeRunHost {
        watch_report: Some((1, FAILING.into())),
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::LeakDetected, "{rec:?}");
    assert_eq!(rec.result.exit_code(), 1);
    assert_eq!(rec.watch_rounds, 1);
    assert!(rec.refusal[0].starts_with("P19"), "{:?}", rec.refusal);
    let watched: Vec<String> = host
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("probe "))
        .collect();
    assert!(
        watched.iter().any(|c| c.contains("P22")),
        "the watch re-runs the starred probes: {watched:?}"
    );
    nothing_left(&w, &rec, &host);
}

#[test]
fn an_interrupted_run_stops_the_agent_and_still_tears_down() {
    let w = world();
    let units = FakeUnitManager::new(); // the agent would run until its budget
    let host = FakeRunHost::default();
    let flag = w.inp.interrupted.clone();
    // The interrupt arrives once the agent was let go (the go file is written at the end of
    // the probe phase: an event, not a time; a loaded machine may still be probing after the
    // agent's unit started). The 120 s are only a way out of a run that never lets it go.
    let go = w
        .inp
        .paths
        .run_dir
        .join(crate::render::plan::CTL_DIR)
        .join(crate::render::plan::GO_FILE);
    let rec = std::thread::scope(|sc| {
        sc.spawn(|| {
            let until = std::time::Instant::now() + Duration::from_secs(120);
            while std::time::Instant::now() < until && !go.exists() {
                std::thread::sleep(Duration::from_millis(5));
            }
            flag.store(true, Ordering::SeqCst);
        });
        execute(&w.inp, Ledger::in_memory(), &units, &host)
    });
    assert_eq!(rec.result, RunResult::Interrupted);
    assert_eq!(rec.failed_phase.as_deref(), Some("agent"), "{rec:?}");
    // The flag lands while the agent runs (its unit is stopped) or just before its phase
    // begins (the phase does not start): both are the agent's phase, stopped by a person.
    assert!(
        rec.error
            .as_deref()
            .is_some_and(|e| e.contains("interrupted")
                || e.contains("stopped by a person (SIGTERM or SIGINT) before this phase began")),
        "{:?}",
        rec.error
    );
    nothing_left(&w, &rec, &host);
}

#[test]
fn a_worktree_tier_run_uses_host_units_and_no_container_machinery() {
    let mut w = world();
    w.inp.spec.tier = Tier::Worktree;
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 0);
    units.exit_after_start("cyclix-r1-gate.service", 0);
    let host = FakeRunHost::default();
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
    assert!(
        rec.notices.iter().any(|n| n.contains("tier `worktree`")),
        "{:?}",
        rec.notices
    );
    assert!(rec.probes.is_empty());
    let calls = host.calls();
    for podman_op in [
        "secret_create",
        "probe",
        "remove_run_objects",
        "inventory",
        "sandbox_environ",
    ] {
        assert!(
            !calls.iter().any(|c| c.starts_with(podman_op)),
            "{podman_op} called: {calls:?}"
        );
    }
    assert_eq!(
        started(&units),
        ["cyclix-r1-agent.service", "cyclix-r1-gate.service"]
    );
    assert!(
        w.inp
            .paths
            .quadlet_dir
            .read_dir()
            .map_or(true, |mut d| d.next().is_none())
    );
    nothing_left(&w, &rec, &host);
}

#[test]
fn health_commands_are_shown_as_a_shell_would_take_them() {
    let argv: Vec<String> = ["sh", "-c", "pg_isready -p \"$P\" && echo it's", "", "-q"]
        .map(String::from)
        .to_vec();
    assert_eq!(
        crate::run::phases::bring_up::shell_words(&argv),
        r#"sh -c 'pg_isready -p "$P" && echo it'\''s' '' -q"#
    );
}

#[test]
fn log_tails_drop_podman_noise_and_redact_secrets() {
    use crate::run::phases::collect::log_tail;
    let journal = vec![
        "2026-11-30 12:33:25.88 +0000 UTC m=+0.04 container exec 945e".to_string(),
        "conmon 945e <nwarn>: Failed to add inotify watch".to_string(),
        "463a3bd9920cf424661b39c2432ae8251fd3af09d9083d8bbc3804dffdc957f9".to_string(),
        "FAILED tests/test_calc.py::test_subtract - assert 4 == 2".to_string(),
        "token is s3cret-value".to_string(),
    ];
    let tail = log_tail(&journal, &[b"s3cret-value".as_slice()]);
    assert_eq!(
        tail,
        [
            "FAILED tests/test_calc.py::test_subtract - assert 4 == 2",
            "token is ***"
        ]
    );
    let escapes = vec!["\u{1b}]52;c;aGk=\u{7}done \u{1b}[2J".to_string()];
    assert_eq!(
        log_tail(&escapes, &[]),
        vec!["\u{fffd}]52;c;aGk=\u{fffd}done \u{fffd}[2J".to_string()]
    );
    let long: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    assert_eq!(
        log_tail(&long, &[]).len(),
        crate::run::phases::collect::LOG_TAIL_LINES
    );
    assert_eq!(log_tail(&long, &[]).last().map(String::as_str), Some("99"));
}

#[test]
fn a_service_that_never_gets_healthy_fails_the_start_naming_it_and_tears_everything_down() {
    let mut w = world();
    let spec = crate::spec::parse(
        &format!(
            "tenant: acme\nrepo: {{path: {}, base: main}}\ntask: {{text: x}}\n\
             agent: {{image: localhost/a, unpinned_local_image: true, command: [agent], env: [API_KEY]}}\n\
             gate: {{image: localhost/a, unpinned_local_image: true, command: [check]}}\n\
             services: [{{name: db, image: localhost/pg, unpinned_local_image: true, data: /data, \
             health: {{command: [pg_isready, -q], retries: 3}}}}]\n",
            w.inp.spec.repo.path
        ),
        &SpecContext {
            file: "t.yaml".into(),
            home: "/home/t".into(),
            runtime_dir: "/run/user/1000".into(),
        },
    )
    .expect("spec");
    w.inp.spec = spec;
    let units = FakeUnitManager::new();
    units.fail_next(
        Op::Start,
        Some("cyclix-r1-svc-db.service"),
        crate::systemd::Error::JobFailed {
            unit: "cyclix-r1-svc-db.service".into(),
            op: Op::Start,
            result: crate::systemd::JobResult::Failed,
            state: "failed/failed".into(),
        },
    );
    let host = FakeRunHost {
        journal: vec!["FATAL: could not open port".into(), "s3cret".into()],
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    fails_in("start", &rec);
    let e = rec.error.as_deref().unwrap_or_default();
    for want in [
        "service `db` (cyclix-r1-svc-db.service) never became healthy",
        "`pg_isready -q`",
        "3 retries",
        "it printed: FATAL: could not open port | ***",
        "`services[0].health.retries`",
    ] {
        assert!(e.contains(want), "`{want}` not in: {e}");
    }
    assert!(!e.contains("s3cret"), "a secret reached the error: {e}");
    assert_eq!(rec.services.len(), 1);
    assert_eq!(
        rec.services[0].volume.as_deref(),
        Some("cyclix-r1-svc-db-data")
    );
    assert!(
        (crate::render::plan::PICKED_PORTS.0..=crate::render::plan::PICKED_PORTS.1)
            .contains(&rec.services[0].port)
    );
    assert!(
        rec.units
            .iter()
            .any(|u| u == "cyclix-r1-svc-db-data-volume.service"),
        "{:?}",
        rec.units
    );
    nothing_left(&w, &rec, &host);
    let ports = w
        .inp
        .paths
        .run_dir
        .parent()
        .expect("runs")
        .parent()
        .expect("root")
        .join(crate::layout::PORTS_DIR);
    assert_eq!(
        std::fs::read_dir(&ports).map_or(0, Iterator::count),
        0,
        "a port reservation is left"
    );
    // The service's start job got at least the unit's own start budget.
    let waited = units.calls().iter().find_map(|c| match c {
        Call::Start { unit, timeout, .. } if unit == "cyclix-r1-svc-db.service" => Some(*timeout),
        _ => None,
    });
    assert!(
        waited.is_some_and(
            |t| t >= Duration::from_secs(crate::render::plan::START_TIMEOUT_LOCAL_S + 18)
        ),
        "{waited:?}"
    );
}

#[test]
fn an_agent_killed_for_memory_is_an_agent_failure_whose_record_says_oom() {
    let mut w = world();
    w.inp.spec.agent.resources.memory_bytes = Some(64 << 20);
    let units = FakeUnitManager::new();
    units.end_after_start("cyclix-r1-agent.service", 137, "oom-kill");
    let host = FakeRunHost::default();
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(
        (rec.result, rec.agent_exit),
        (RunResult::AgentFailed, Some(137)),
        "{rec:?}"
    );
    assert_eq!(
        rec.causes,
        ["agent killed for memory (oom): agent.resources.memory = 64 MiB"]
    );
    assert!(record::summary(&rec).contains("CAUSE: agent killed for memory (oom)"));
    assert!(!started(&units).contains(&"cyclix-r1-gate.service".to_string()));
    nothing_left(&w, &rec, &host);
    // An agent that merely exits 137 (its own kill -9) is not called an OOM kill.
    let w = world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 137);
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &FakeRunHost::default());
    assert_eq!(rec.result, RunResult::AgentFailed);
    assert!(rec.causes.is_empty(), "{:?}", rec.causes);
}

#[test]
fn a_watch_round_that_races_the_agents_exit_is_not_a_leak() {
    let mut w = world();
    w.inp.deadlines.watch = Duration::from_millis(1);
    let units = FakeUnitManager::new();
    // Running at the round and right after it; ended at the next look (the unit was
    // still deactivating while its container was already gone).
    units.exit_after_polls("cyclix-r1-agent.service", 0, 4);
    units.exit_after_start("cyclix-r1-gate.service", 0);
    let host = FakeRunHost {
        watch_report: Some((137, String::new())),
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
    assert!(rec.refusal.is_empty(), "{:?}", rec.refusal);
    assert!(
        rec.notices
            .iter()
            .any(|n| n.contains("the last watch round did not complete as the agent ended")),
        "the lost round is recorded: {:?}",
        rec.notices
    );
    nothing_left(&w, &rec, &host);
    // A round that cannot run while the agent keeps running is still a finding.
    let mut w = world();
    w.inp.deadlines.watch = Duration::from_millis(1);
    w.inp.deadlines.poll = Duration::from_millis(100);
    let units = FakeUnitManager::new();
    let host = FakeRunHost {
        watch_report: Some((137, String::new())),
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::LeakDetected, "{rec:?}");
    assert!(
        rec.refusal[0].contains("the watch probe was killed by signal 9 (podman exec exited 137)"),
        "{:?}",
        rec.refusal
    );
}

#[test]
fn a_full_project_file_system_is_named_as_the_cause_and_teardown_still_completes() {
    let w = world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 1);
    let host = FakeRunHost {
        fs_avail: Some(0),
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::AgentFailed, "{rec:?}");
    assert_eq!(
        rec.causes.len(),
        1,
        "one file system, one cause: {:?}",
        rec.causes
    );
    let cause = &rec.causes[0];
    assert!(
        cause.starts_with("project filesystem full (avail 0 B of 8 MiB) at ")
            && cause.contains(&w.inp.paths.worktree.display().to_string())
            && cause.contains("also holds the repository's git dir"),
        "{cause}"
    );
    // Looked at before teardown removed the worktree (the space it frees would hide it).
    let calls = host.calls();
    let looked = calls
        .iter()
        .position(|c| c.starts_with("fs_space"))
        .expect("looked");
    let removed = calls
        .iter()
        .position(|c| c.starts_with("remove_tree"))
        .expect("removed");
    assert!(looked < removed, "{calls:?}");
    nothing_left(&w, &rec, &host);
    // A prepare that failed (git could not write the worktree) names the directory.
    let w = world();
    let host = FakeRunHost {
        fs_avail: Some(0),
        fail: vec!["private_repo".into()],
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &FakeUnitManager::new(), &host);
    fails_in("prepare", &rec);
    assert!(
        rec.causes
            .iter()
            .any(|c| c.contains("(the worktrees directory)")),
        "{:?}",
        rec.causes
    );
    // A run that passed is not looked at; one with room gets no cause.
    let w = world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 0);
    units.exit_after_start("cyclix-r1-gate.service", 0);
    let host = FakeRunHost {
        fs_avail: Some(0),
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::Passed);
    assert!(!host.calls().iter().any(|c| c.starts_with("fs_space")));
    let w = world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 1);
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &FakeRunHost::default());
    assert!(rec.causes.is_empty(), "{:?}", rec.causes);
}

#[test]
fn a_stuck_storage_lock_fails_the_run_naming_the_holder_with_nothing_created() {
    let mut w = world();
    w.inp.deadlines.storage_lock = Duration::from_millis(200);
    let units = FakeUnitManager::new();
    let host = FakeRunHost {
        lock_held_looks: usize::MAX,
        ..Default::default()
    };
    // The wait is bounded by `storage_lock` (200 ms): it returns, and the error says so.
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    fails_in("prepare", &rec);
    let err = rec.error.as_deref().unwrap_or_default();
    for want in [
        "storage.lock",
        "pid 4711",
        "`podman build .`",
        "for more than 0 s",
    ] {
        assert!(err.contains(want), "`{want}` missing: {err}");
    }
    // Nothing was asked of git, podman or systemd: no worktree, no secret, no unit, and
    // no podman sweep or inventory that would hang on the same lock.
    let calls = host.calls();
    for op in [
        "rev_parse",
        "private_repo",
        "secret_create",
        "used_subnets",
        "remove_run_objects",
        "inventory",
    ] {
        assert!(
            !calls.iter().any(|c| c.starts_with(op)),
            "{op} called: {calls:?}"
        );
    }
    assert!(started(&units).is_empty());
    assert!(
        rec.probes.is_empty() && rec.agent_exit.is_none(),
        "the agent never ran"
    );
    nothing_left(&w, &rec, &host);
}

#[test]
fn a_storage_lock_held_briefly_is_waited_out_and_noted() {
    let w = world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 0);
    units.exit_after_start("cyclix-r1-gate.service", 0);
    let host = FakeRunHost {
        lock_held_looks: 12, // about 1.2 s at one look per 100 ms
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
    assert!(
        rec.notices
            .iter()
            .any(|n| n.contains("for podman's storage lock")),
        "{:?}",
        rec.notices
    );
    nothing_left(&w, &rec, &host);
}

#[test]
fn a_phase_failing_while_the_storage_lock_is_held_names_the_holder() {
    let w = world();
    let units = FakeUnitManager::new();
    // Free at the start, then held (a podman call timed out behind it).
    let host = FakeRunHost {
        lock_held_looks: 0,
        fail: vec!["used_subnets".into()],
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    fails_in("prepare", &rec);
    assert!(
        !rec.error
            .as_deref()
            .unwrap_or_default()
            .contains("storage lock is held")
    );
    let w = world();
    // Held from the second look on: the first (the wait) passes, the explanation sees it, for
    // a podman call that ran past its deadline (it waited for the lock) ...
    let held_later = FakeRunHost {
        lock_held_looks: 0,
        lock_held_from: Some(1),
        fail: vec!["deadline:used_subnets".into()],
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &held_later);
    let err = rec.error.as_deref().unwrap_or_default();
    assert!(
        err.contains("storage lock is held") && err.contains("pid 4711"),
        "{err}"
    );
    // ... and not for a failure the lock cannot have caused (it would name an unrelated
    // holder: issue 36).
    let w = world();
    let unrelated = FakeRunHost {
        lock_held_looks: 0,
        lock_held_from: Some(1),
        fail: vec!["used_subnets".into()],
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &unrelated);
    let err = rec.error.as_deref().unwrap_or_default();
    assert!(!err.contains("storage lock is held"), "{err}");
}

#[test]
fn a_full_runtime_dir_is_the_first_cause_of_any_failure_and_named_once() {
    // The agent exited 0 and conmon stored it, then the next container (the gate here, the
    // export container on the real stack) failed for want of space: the cause is the host's.
    let w = world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 0);
    units.exit_after_start("cyclix-r1-gate.service", 125);
    let host = FakeRunHost {
        runtime_avail: Some(0),
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::GateFailed, "{rec:?}");
    assert_eq!(rec.agent_exit, Some(0), "the exit code that was read stays");
    assert!(
        rec.causes[0].starts_with("runtime dir full (avail 0 B of 8 MiB)"),
        "{:?}",
        rec.causes
    );
    // The agent phase already named it (conmon's status is not the agent's): once only.
    let w = world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 1);
    let host = FakeRunHost {
        runtime_avail: Some(0),
        ..Default::default()
    };
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::AgentFailed, "{rec:?}");
    assert_eq!(rec.agent_exit, None);
    assert_eq!(
        rec.causes
            .iter()
            .filter(|c| c.starts_with("runtime dir full"))
            .count(),
        1,
        "{:?}",
        rec.causes
    );
}

#[test]
fn an_agent_past_its_timeout_is_its_own_result_naming_the_key_and_the_gate_never_runs() {
    let mut w = world();
    w.inp.spec.agent.timeout_s = 600;
    let units = FakeUnitManager::new();
    // systemd stopped the agent at its unit's RuntimeMaxSec= (`Result=timeout`).
    units.end_after_start("cyclix-r1-agent.service", 143, "timeout");
    let host = FakeRunHost::default();
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::AgentTimeout, "{rec:?}");
    assert_eq!(rec.result.exit_code(), crate::exit::FINDINGS);
    assert_eq!(rec.error, None, "not a failure of cyclix: {rec:?}");
    assert!(
        rec.causes
            .iter()
            .any(|c| c.contains("`agent.timeout` (600 s)")),
        "{:?}",
        rec.causes
    );
    let s = record::summary(&rec);
    assert!(
        s.contains("agent_timeout") && !s.contains("RuntimeMaxSec"),
        "{s}"
    );
    assert!(!started(&units).contains(&"cyclix-r1-gate.service".to_string()));
    nothing_left(&w, &rec, &host);
}

#[test]
fn a_gate_past_its_timeout_fails_the_gate_naming_the_key() {
    let mut w = world();
    w.inp.spec.gate.timeout_s = 120;
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 0);
    units.end_after_start("cyclix-r1-gate.service", 143, "timeout");
    let host = FakeRunHost::default();
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
    assert_eq!(rec.result, RunResult::GateFailed, "{rec:?}");
    assert_eq!(rec.error, None, "{rec:?}");
    assert!(
        rec.causes
            .iter()
            .any(|c| c.contains("`gate.timeout` (120 s)")),
        "{:?}",
        rec.causes
    );
    nothing_left(&w, &rec, &host);
}

/// A proven unit (the proxy) restarted while the agent runs, then the agent ends by
/// `end` (`None`: exit 0; `Some("timeout")`: systemd stops it at `RuntimeMaxSec=`).
fn proxy_restarted_while_the_agent_runs(end: Option<&str>) -> RunRecord {
    let mut w = world();
    w.inp.spec.agent.timeout_s = 600;
    // No watch round in between: only the end's comparison can see the restart.
    w.inp.deadlines.watch = Duration::from_secs(3600);
    w.inp.deadlines.poll = Duration::from_millis(10);
    let units = FakeUnitManager::new();
    match end {
        Some(result) => {
            units.end_after_start("cyclix-r1-agent.service", 143, result);
            units.exit_after_polls("cyclix-r1-agent.service", 143, 60);
        }
        None => units.exit_after_polls("cyclix-r1-agent.service", 0, 60),
    }
    units.exit_after_start("cyclix-r1-gate.service", 0);
    let host = FakeRunHost::default();
    std::thread::scope(|s| {
        let u = &units;
        // The restart comes once the agent's end is being watched (an event, not a clock): a
        // look at the agent unit after its start (the load phase looks at it before).
        s.spawn(move || {
            use crate::systemd::fake::Call;
            let agent = "cyclix-r1-agent.service";
            while !u
                .calls()
                .iter()
                .skip_while(|c| !matches!(c, Call::Start { unit, .. } if unit == agent))
                .any(|c| matches!(c, Call::UnitStatus(n) if n == agent))
            {
                std::thread::yield_now();
            }
            let _ = crate::systemd::UnitManager::restart(
                u,
                "cyclix-r1-proxy.service",
                crate::systemd::JobMode::Replace,
                Duration::from_secs(1),
            );
        });
        execute(&w.inp, Ledger::in_memory(), &units, &host)
    })
}

#[test]
fn a_unit_restarted_before_the_agent_runs_into_its_timeout_is_a_leak_not_a_timeout() {
    // Attack review: the end's comparison ran only for an agent that exited.
    let timed_out = proxy_restarted_while_the_agent_runs(Some("timeout"));
    assert_eq!(timed_out.result, RunResult::LeakDetected, "{timed_out:?}");
    assert!(!timed_out.refusal.is_empty(), "{timed_out:?}");
    // The positive control: the same restart before an exit was already a leak.
    let exited = proxy_restarted_while_the_agent_runs(None);
    assert_eq!(exited.result, RunResult::LeakDetected, "{exited:?}");
}

#[test]
fn a_watch_finding_in_the_round_the_agent_ends_is_a_leak_whether_it_exits_or_times_out() {
    // Attack review: the round's findings were dropped when the agent had ended by then.
    for end in [None, Some("timeout")] {
        let mut w = world();
        w.inp.deadlines.watch = Duration::ZERO;
        w.inp.deadlines.poll = Duration::from_millis(1);
        let units = FakeUnitManager::new();
        match end {
            Some(result) => {
                units.end_after_start("cyclix-r1-agent.service", 143, result);
                units.exit_after_polls("cyclix-r1-agent.service", 143, 2);
            }
            None => units.exit_after_polls("cyclix-r1-agent.service", 0, 2),
        }
        units.exit_after_start("cyclix-r1-gate.service", 0);
        let host = FakeRunHost {
            watch_report: Some((1, FAILING.into())),
            ..Default::default()
        };
        let rec = execute(&w.inp, Ledger::in_memory(), &units, &host);
        assert_eq!(rec.result, RunResult::LeakDetected, "{end:?}: {rec:?}");
        assert!(
            rec.refusal.iter().any(|r| r.contains("P19")),
            "{end:?}: {rec:?}"
        );
    }
    // The positive control: the same agent with a clean watch passes.
    let mut w = world();
    w.inp.deadlines.watch = Duration::ZERO;
    w.inp.deadlines.poll = Duration::from_millis(1);
    let units = FakeUnitManager::new();
    units.exit_after_polls("cyclix-r1-agent.service", 0, 2);
    units.exit_after_start("cyclix-r1-gate.service", 0);
    let rec = execute(&w.inp, Ledger::in_memory(), &units, &FakeRunHost::default());
    assert_eq!(rec.result, RunResult::Passed, "{rec:?}");
}
