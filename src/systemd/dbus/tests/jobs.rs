//! The cases: job waits, races, deadlines, the reload gate, timers.

use std::fs::File;

use super::*;

const T: Duration = Duration::from_secs(5);

fn log(h: &Harness) -> Vec<String> {
    lock(&h.world).log.clone()
}

#[test]
fn manager_version_reads_the_version_property() {
    let h = harness(&[]);
    assert_eq!(
        h.manager.manager_version().expect("version"),
        "257.13-1~deb13u1"
    );
}

#[test]
fn done_and_active_is_a_successful_start_in_race_free_order() {
    let h = harness(&[("a.service", Script::done(RUNNING))]);
    let outcome = h
        .manager
        .start("a.service", JobMode::Replace, T)
        .expect("start");
    assert_eq!(outcome.settled, Settled::Active);
    assert_eq!(outcome.job_result, Some(JobResult::Done));
    assert_eq!(outcome.status.active_state, ActiveState::Active);
    assert_eq!(
        log(&h),
        [
            "Subscribe",
            "LoadUnit a.service",
            "Ref a.service",
            "StartUnit a.service replace",
            "JobRemoved 1 done",
            "Unref a.service",
        ],
        "subscribe and reference before the job is queued"
    );
    assert_eq!(lock(&h.world).refs, 0, "the reference is released");
}

#[test]
fn job_removed_before_the_reply_is_not_missed() {
    let mut script = Script::done(RUNNING);
    script.before_reply = true;
    let h = harness(&[("a.service", script)]);
    let outcome = h
        .manager
        .start("a.service", JobMode::Replace, T)
        .expect("start");
    assert_eq!(outcome.settled, Settled::Active);
    assert_eq!(outcome.job_result, Some(JobResult::Done));
}

#[test]
fn done_but_inactive_with_failed_condition_is_start_skipped() {
    let h = harness(&[(
        "c.service",
        Script::done(After {
            active: "inactive",
            sub: "dead",
            condition_result: false,
            ..RUNNING
        }),
    )]);
    let err = h
        .manager
        .start("c.service", JobMode::Replace, T)
        .expect_err("condition failed");
    assert!(
        matches!(err, Error::StartSkipped { ref unit } if unit == "c.service"),
        "{err}"
    );
}

#[test]
fn oneshot_that_ran_is_exited() {
    let mut script = Script::done(After {
        active: "inactive",
        sub: "dead",
        main_code: 1,
        ..RUNNING
    });
    script.service_type = "oneshot";
    let h = harness(&[("o.service", script)]);
    let outcome = h
        .manager
        .start("o.service", JobMode::Replace, T)
        .expect("start");
    assert_eq!(outcome.settled, Settled::Exited);
    assert!(outcome.settled.is_oneshot_completion(&outcome.status));
    assert_eq!(outcome.status.exec_main_status, Some(0));
}

#[test]
fn failed_job_is_job_failed_with_the_exit_status() {
    let mut script = Script::done(After {
        active: "failed",
        sub: "failed",
        result: "exit-code",
        main_code: 1,
        main_status: 1,
        ..RUNNING
    });
    script.result = Some("failed");
    let h = harness(&[("f.service", script)]);
    let err = h
        .manager
        .start("f.service", JobMode::Replace, T)
        .expect_err("job failed");
    match &err {
        Error::JobFailed {
            unit,
            op,
            result,
            state,
        } => {
            assert_eq!(unit, "f.service");
            assert_eq!(*op, Op::Start);
            assert_eq!(*result, JobResult::Failed);
            assert!(state.contains("main process exited, status 1"), "{state}");
        }
        other => panic!("expected JobFailed, got {other}"),
    }
    assert_eq!(lock(&h.world).refs, 0, "released on failure too");
}

#[test]
fn job_removed_that_never_comes_is_a_deadline_error_in_time() {
    let mut script = Script::done(RUNNING);
    script.result = None;
    let h = harness(&[("s.service", script)]);
    // Generous enough that the setup calls (lock, subscribe, load, ref, queue) finish in time
    // on a loaded 2-core machine (2 s was seen to run out in "reading the unit's job" with
    // four builds at once); the job itself never ends.
    let timeout = Duration::from_secs(4);
    let started = Instant::now();
    let err = h
        .manager
        .start("s.service", JobMode::Replace, timeout)
        .expect_err("no JobRemoved");
    let took = started.elapsed();
    // Never early; how late is the machine's load (the error's own marks say where it was).
    assert!(took >= timeout, "returned before the deadline: {took:?}");
    let queued = lock(&h.world)
        .log
        .iter()
        .any(|l| l.starts_with("JobNew") || l.starts_with("StartUnit"));
    match &err {
        Error::Deadline {
            unit,
            op,
            phase,
            after_ms,
            state,
        } => {
            assert_eq!(unit, "s.service");
            assert_eq!(*op, Op::Start);
            assert_eq!(*after_ms, 4000);
            // On a machine loaded enough, the deadline runs out before the wait begins (the
            // job not yet read back): then it names that step, never the wait.
            if *phase == "waiting for the job to finish" {
                assert!(queued, "a wait without a queued job");
                assert!(state.contains("activating/start"), "{state}");
                assert!(state.contains("job still queued"), "{state}");
            } else {
                // Every step the start takes names itself; the last two are the wait's own
                // look at whether the job is still queued (the CI of stop 37 ran out there).
                assert!(
                    [
                        "subscribing to manager signals",
                        "subscribing to JobRemoved",
                        "loading the unit",
                        "referencing the unit",
                        "queueing the job",
                        "looking up the unit",
                        "reading the unit's job",
                    ]
                    .contains(phase),
                    "{phase}"
                );
            }
        }
        other => panic!("expected Deadline, got {other}"),
    }
    assert_eq!(lock(&h.world).refs, 0);
}

#[test]
fn job_removed_of_another_job_is_ignored() {
    let mut script = Script::done(RUNNING);
    script.decoy_first = true;
    let h = harness(&[("a.service", script)]);
    let outcome = h
        .manager
        .start("a.service", JobMode::Replace, T)
        .expect("start");
    assert_eq!(
        outcome.job_result,
        Some(JobResult::Done),
        "not the decoy's failed"
    );
    assert!(log(&h).contains(&"JobRemoved 1001 failed".to_owned()));
}

#[test]
fn job_that_vanishes_without_a_signal_is_settled_from_state() {
    let mut script = Script::done(RUNNING);
    script.result = None;
    script.vanish = true;
    let h = harness(&[("a.service", script)]);
    let outcome = h
        .manager
        .start("a.service", JobMode::Replace, T)
        .expect("settled from state");
    assert_eq!(outcome.job_result, None);
    assert_eq!(outcome.settled, Settled::Active);
    assert!(outcome.elapsed_ms < 2_000, "{}", outcome.elapsed_ms);
}

#[test]
fn stop_ends_stopped_and_subscribe_happens_once() {
    let h = harness(&[
        ("a.service", Script::done(RUNNING)),
        (
            "b.service",
            Script::done(After {
                active: "inactive",
                sub: "dead",
                ..RUNNING
            }),
        ),
    ]);
    h.manager
        .start("a.service", JobMode::Fail, T)
        .expect("start");
    let outcome = h
        .manager
        .stop("b.service", JobMode::Replace, T)
        .expect("stop");
    assert_eq!(outcome.settled, Settled::Stopped);
    let subscribes = log(&h).iter().filter(|l| *l == "Subscribe").count();
    assert_eq!(subscribes, 1);
}

#[test]
fn unknown_unit_is_no_such_unit() {
    let h = harness(&[]);
    let err = h
        .manager
        .start("nope.service", JobMode::Replace, T)
        .expect_err("unknown");
    assert!(
        matches!(err, Error::NoSuchUnit { ref unit } if unit == "nope.service"),
        "{err}"
    );
}

#[test]
fn reload_does_not_wait_for_a_running_job() {
    // A long job (a `cyclix start` waiting for its run) must not block the reloads of
    // that run or of any other: the lock covers queueing only.
    let mut script = Script::done(RUNNING);
    script.delay = Duration::from_millis(300);
    let h = harness(&[("slow.service", script)]);
    std::thread::scope(|scope| {
        let job = scope.spawn(|| h.manager.start("slow.service", JobMode::Replace, T));
        while !log(&h).contains(&"StartUnit slow.service replace".to_owned()) {
            std::thread::sleep(Duration::from_millis(5));
        }
        h.manager.reload().expect("reload");
        job.join().expect("no panic").expect("start");
    });
    let log = log(&h);
    let removed = log.iter().position(|l| l == "JobRemoved 1 done");
    let reload = log.iter().position(|l| l == "Reload");
    assert!(reload < removed, "the reload waited for the job: {log:?}");
}

#[test]
fn lock_held_elsewhere_gives_a_deadline_naming_the_lock() {
    let h = harness(&[]);
    let manager = ZbusUnitManager {
        call_timeout: Duration::from_millis(200),
        ..h.manager
    };
    let path = manager.lock_path().to_owned();
    std::fs::create_dir_all(path.parent().expect("has parent")).expect("mkdir");
    // Another open file description: as another cyclix process would hold it.
    let other = File::create(&path).expect("lock file");
    other.lock_shared().expect("shared lock");
    let err = manager.reload().expect_err("lock busy");
    assert!(
        matches!(err, Error::Deadline { phase, .. } if phase.contains("cyclix systemd lock")),
        "{err}"
    );
    drop(other);
    manager.reload().expect("free again");
}

#[test]
fn timer_next_elapse_maps_infinity_to_none() {
    let h = harness(&[("n.timer", Script::done(RUNNING))]);
    let next = h.manager.timer_next_elapse("n.timer").expect("timer");
    assert_eq!(next.realtime_us, Some(1_800_000_000_000_000));
    assert_eq!(next.monotonic_us, None);
}
