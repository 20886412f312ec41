use super::*;

const T: Duration = Duration::from_secs(5);

#[test]
fn records_calls_in_order_and_models_state() {
    let fake = FakeUnitManager::new();
    fake.reload().expect("reload");
    assert_eq!(
        fake.load_unit("a.service").expect("load"),
        LoadState::Loaded
    );
    let outcome = fake.start("a.service", JobMode::Fail, T).expect("start");
    assert_eq!(outcome.status.active_state, ActiveState::Active);
    let stopped = fake.stop("a.service", JobMode::Replace, T).expect("stop");
    assert_eq!(stopped.settled, super::super::Settled::Stopped);
    assert_eq!(
        fake.calls(),
        vec![
            Call::Reload,
            Call::LoadUnit("a.service".to_owned()),
            Call::Start {
                unit: "a.service".to_owned(),
                mode: JobMode::Fail,
                timeout: T
            },
            Call::Stop {
                unit: "a.service".to_owned(),
                mode: JobMode::Replace,
                timeout: T
            },
        ]
    );
}

#[test]
fn scripted_errors_hit_the_matching_call_once() {
    let fake = FakeUnitManager::new();
    fake.skip_next_start("c.service");
    fake.start("other.service", JobMode::Replace, T)
        .expect("another unit is unaffected");
    let err = fake
        .start("c.service", JobMode::Replace, T)
        .expect_err("scripted");
    assert!(matches!(err, Error::StartSkipped { ref unit } if unit == "c.service"));
    fake.start("c.service", JobMode::Replace, T)
        .expect("only the next start fails");
    assert_eq!(fake.calls().len(), 3, "failed calls are recorded too");
}

#[test]
fn missing_units_fail_jobs_and_report_not_found() {
    let fake = FakeUnitManager::new();
    fake.set_missing("gone.service");
    assert_eq!(
        fake.load_unit("gone.service").expect("load"),
        LoadState::NotFound
    );
    let err = fake
        .start("gone.service", JobMode::Replace, T)
        .expect_err("missing");
    assert!(matches!(err, Error::NoSuchUnit { .. }), "{err}");
}

#[test]
fn host_fact_reads_are_scriptable() {
    let fake = FakeUnitManager::new();
    assert!(!fake.user_linger(1000).expect("linger"));
    fake.set_linger(1000);
    assert!(fake.user_linger(1000).expect("linger"));
    assert_eq!(
        fake.system_unit_active_state("network-online.target")
            .expect("state"),
        ActiveState::Inactive
    );
    fake.set_system_unit_state("network-online.target", ActiveState::Active);
    assert_eq!(
        fake.system_unit_active_state("network-online.target")
            .expect("state"),
        ActiveState::Active
    );
    fake.fail_next(
        Op::Version,
        None,
        Error::BusUnavailable {
            address: "test".to_owned(),
            message: "down".to_owned(),
        },
    );
    assert!(fake.manager_version().is_err());
    assert_eq!(fake.manager_version().expect("version"), "257");
}

#[test]
fn reset_failed_clears_failed_state() {
    let fake = FakeUnitManager::new();
    let mut failed = loaded_inactive();
    failed.active_state = ActiveState::Failed;
    fake.set_status("f.service", failed);
    fake.reset_failed("f.service").expect("reset");
    assert_eq!(
        fake.unit_status("f.service").expect("status").active_state,
        ActiveState::Inactive
    );
}
