//! Unit tests of the systemd seam's pure parts: the settle table, messages, and the string types.

use super::*;

fn status(active: &str, sub: &str, result: Option<&str>, condition: bool) -> UnitStatus {
    UnitStatus {
        load_state: LoadState::Loaded,
        active_state: ActiveState::parse(active),
        sub_state: sub.to_owned(),
        result: result.map(str::to_owned),
        exec_main_status: None,
        exec_main_code: None,
        need_daemon_reload: false,
        condition_failed: !condition,
        service_type: Some("simple".to_owned()),
        job_pending: false,
    }
}

/// What `settle` returned, reduced to a comparable label.
fn label(result: &Result<Settled, Error>) -> String {
    match result {
        Ok(settled) => format!("{settled:?}"),
        Err(Error::StartSkipped { .. }) => "StartSkipped".to_owned(),
        Err(Error::JobFailed { result, .. }) => format!("JobFailed({result})"),
        Err(other) => format!("unexpected: {other}"),
    }
}

#[test]
#[allow(clippy::too_many_lines)] // one row per case of the table in `settle`'s docs
fn settle_decision_table() {
    let done = Some(JobResult::Done);
    let cases: Vec<(Op, Option<JobResult>, UnitStatus, &str)> = vec![
        // B22: done + active = started.
        (
            Op::Start,
            done.clone(),
            status("active", "running", Some("success"), true),
            "Active",
        ),
        (
            Op::Restart,
            done.clone(),
            status("reloading", "reload", Some("success"), true),
            "Active",
        ),
        // B22: done + inactive + condition failed = skipped (the classic StartUnit case).
        (
            Op::Start,
            done.clone(),
            status("inactive", "dead", Some("success"), false),
            "StartSkipped",
        ),
        (
            Op::Restart,
            done.clone(),
            status("inactive", "dead", Some("success"), false),
            "StartSkipped",
        ),
        // StartUnitWithFlags reports skipped directly.
        (
            Op::Start,
            Some(JobResult::Skipped),
            status("inactive", "dead", None, false),
            "StartSkipped",
        ),
        // A oneshot that ran: inactive, Result=success, condition met.
        (
            Op::Start,
            done.clone(),
            status("inactive", "dead", Some("success"), true),
            "Exited",
        ),
        // done, but the main process failed right after (Type=simple/exec).
        (
            Op::Start,
            done.clone(),
            status("failed", "failed", Some("exit-code"), true),
            "JobFailed(done)",
        ),
        // done, but it is waiting to be restarted after a failure.
        (
            Op::Start,
            done.clone(),
            status("activating", "auto-restart", Some("exit-code"), true),
            "JobFailed(done)",
        ),
        // inactive without success (e.g. Result=exit-code after reset) is not a success.
        (
            Op::Start,
            done.clone(),
            status("inactive", "dead", Some("exit-code"), true),
            "JobFailed(done)",
        ),
        // Job results other than done.
        (
            Op::Start,
            Some(JobResult::Failed),
            status("failed", "failed", Some("exit-code"), true),
            "JobFailed(failed)",
        ),
        (
            Op::Start,
            Some(JobResult::Dependency),
            status("inactive", "dead", Some("success"), true),
            "JobFailed(dependency)",
        ),
        (
            Op::Start,
            Some(JobResult::Timeout),
            status("failed", "failed", Some("timeout"), true),
            "JobFailed(timeout)",
        ),
        (
            Op::Start,
            Some(JobResult::Canceled),
            status("active", "running", Some("success"), true),
            "JobFailed(canceled)",
        ),
        (
            Op::Start,
            Some(JobResult::parse("brand-new")),
            status("active", "running", None, true),
            "JobFailed(brand-new)",
        ),
        // Signal lost (B21 reload race): decide from state alone.
        (
            Op::Start,
            None,
            status("active", "running", Some("success"), true),
            "Active",
        ),
        (
            Op::Start,
            None,
            status("failed", "failed", Some("exit-code"), true),
            "JobFailed(done)",
        ),
        // Stops.
        (
            Op::Stop,
            done.clone(),
            status("inactive", "dead", Some("success"), true),
            "Stopped",
        ),
        (
            Op::Stop,
            done.clone(),
            status("failed", "failed", Some("exit-code"), true),
            "Stopped",
        ),
        (
            Op::Stop,
            done.clone(),
            status("active", "running", Some("success"), true),
            "JobFailed(done)",
        ),
        (
            Op::Stop,
            Some(JobResult::Canceled),
            status("active", "running", None, true),
            "JobFailed(canceled)",
        ),
        // A stop job reported skipped is a failure, not a skipped start.
        (
            Op::Stop,
            Some(JobResult::Skipped),
            status("inactive", "dead", None, true),
            "JobFailed(skipped)",
        ),
        (
            Op::Stop,
            None,
            status("inactive", "dead", None, true),
            "Stopped",
        ),
    ];
    for (op, job, unit_status, want) in cases {
        let got = settle("x.service", op, job.as_ref(), &unit_status);
        assert_eq!(
            label(&got),
            want,
            "{op} job={job:?} state={}",
            unit_status.summary()
        );
    }
}

#[test]
fn job_failed_message_names_unit_op_result_and_state() {
    let mut unit_status = status("failed", "failed", Some("exit-code"), true);
    unit_status.exec_main_code = ExecMainCode::from_raw(1);
    unit_status.exec_main_status = Some(1);
    let err = settle(
        "bad.service",
        Op::Start,
        Some(&JobResult::Done),
        &unit_status,
    )
    .expect_err("a failed unit is not a successful start");
    assert_eq!(
        err.to_string(),
        "start bad.service failed: job result done, unit is failed/failed (result exit-code, \
         main process exited, status 1); see journalctl --user -u bad.service"
    );
}

#[test]
fn messages_give_a_fix() {
    let skipped = Error::StartSkipped {
        unit: "c.service".to_owned(),
    };
    assert!(skipped.to_string().contains("Condition*="), "{skipped}");
    let bus = Error::BusUnavailable {
        address: "session bus".to_owned(),
        message: "no such file".to_owned(),
    };
    assert!(bus.to_string().contains("loginctl enable-linger"), "{bus}");
    let deadline = Error::Deadline {
        unit: "s.service".to_owned(),
        op: Op::Start,
        phase: "waiting for the job to finish",
        after_ms: 250,
        state: "activating/start".to_owned(),
    };
    assert_eq!(
        deadline.to_string(),
        "start s.service: no result after 250 ms while waiting for the job to finish; unit is \
         activating/start; raise the timeout or inspect it (systemctl --user status s.service)"
    );
}

#[test]
fn job_mode_round_trips_and_rejects_unknown() {
    for mode in JobMode::ALL {
        assert_eq!(mode.as_str().parse::<JobMode>(), Ok(mode));
    }
    let err = "replace-irreversibly"
        .parse::<JobMode>()
        .expect_err("not offered");
    assert!(err.to_string().contains("ignore-requirements"), "{err}");
}

#[test]
fn string_enums_keep_unknown_values() {
    assert_eq!(LoadState::parse("loaded"), LoadState::Loaded);
    assert_eq!(LoadState::parse("not-found"), LoadState::NotFound);
    assert_eq!(ActiveState::parse("weird").as_str(), "weird");
    assert_eq!(JobResult::parse("done"), JobResult::Done);
    assert_eq!(
        serde_json::to_string(&ActiveState::Failed).expect("serialises"),
        "\"failed\""
    );
}

#[test]
fn next_elapse_maps_zero_and_infinity_to_none() {
    let never = NextElapse::from_raw(0, u64::MAX);
    assert_eq!(never.realtime_us, None);
    assert_eq!(never.monotonic_us, None);
    assert!(!never.is_scheduled());
    let calendar = NextElapse::from_raw(1_780_000_000_000_000, 0);
    assert_eq!(calendar.realtime_us, Some(1_780_000_000_000_000));
    assert!(calendar.is_scheduled());
}

#[test]
fn exec_main_code_from_si_code() {
    assert_eq!(ExecMainCode::from_raw(0), None);
    assert_eq!(ExecMainCode::from_raw(1), Some(ExecMainCode::Exited));
    assert_eq!(ExecMainCode::from_raw(2), Some(ExecMainCode::Killed));
    assert_eq!(ExecMainCode::from_raw(3), Some(ExecMainCode::Dumped));
    assert_eq!(ExecMainCode::from_raw(7), Some(ExecMainCode::Other(7)));
}

#[test]
fn only_a_blinking_managers_errors_are_transient() {
    let dbus = |message: &str| Error::Dbus {
        op: Op::Status,
        unit: "u.service".into(),
        message: message.into(),
    };
    assert!(dbus("org.freedesktop.DBus.Error.NoReply: Message recipient disconnected from message bus without replying").is_transient());
    assert!(
        dbus("org.freedesktop.DBus.Error.ServiceUnknown: The name is not activatable")
            .is_transient()
    );
    assert!(!dbus("org.freedesktop.DBus.Error.AccessDenied: no").is_transient());
    assert!(!dbus("org.freedesktop.systemd1.NoSuchUnit: x").is_transient());
    assert!(!Error::NoSuchUnit { unit: "u".into() }.is_transient());
}
