//! `cyclix unit ...`: plumbing verbs over the systemd seam, for humans debugging a host and for
//! e2e tests of the seam on the testbed (reload, start/stop/restart with a deadline,
//! reset-failed, show, enable, disable).
//!
//! Owns: the printing of outcomes to stdout (the clap types of the group, [`UnitArgs`],
//! [`UnitCommand`] and [`crate::cli::unit::JobArgs`], are in `cli`). The work is done by a
//! [`UnitManager`]: [`run`] connects the real one, [`execute`] takes any (unit tests use
//! `systemd::FakeUnitManager`).
//!
//! May not: talk D-Bus itself (that is `systemd/dbus.rs`) or shell out to `systemctl`.
//!
//! Outcomes (`crate::exit`): `Ok` success; `Findings` the job ran but the unit did not end up
//! as asked (job failed, start skipped by a condition, deadline passed; the error is printed to
//! stderr here); other failures (bus unavailable, unknown unit, D-Bus errors) are returned as
//! `Err` for `main` to print.

use std::io::Write;

use anyhow::Context;

use crate::cli::unit::{UnitArgs, UnitCommand};
use crate::exit::Outcome;
use crate::systemd::{
    self, JobOutcome, NextElapse, Settled, UnitManager, UnitStatus, ZbusUnitManager,
};

/// Runs `cyclix unit ...` against the real user manager (session bus).
///
/// # Errors
/// The bus is unavailable, the unit is unknown, a D-Bus call failed, or stdout is closed.
pub fn run(args: &UnitArgs) -> anyhow::Result<Outcome> {
    let lock = crate::layout::Runtime(args.runtime_dir.clone()).systemd_lock();
    let manager =
        ZbusUnitManager::session(lock).context("connecting to the systemd user manager")?;
    let stdout = std::io::stdout();
    execute(&manager, &args.command, &mut stdout.lock())
}

/// Runs one verb against `manager`, printing results to `out` and job-level failures to stderr.
///
/// # Errors
/// As [`run`], for any [`UnitManager`].
pub fn execute(
    manager: &impl UnitManager,
    command: &UnitCommand,
    out: &mut impl Write,
) -> anyhow::Result<Outcome> {
    match command {
        UnitCommand::Reload => {
            manager.reload().context("reloading the user manager")?;
            writeln!(out, "reloaded the user manager")?;
        }
        UnitCommand::Start(job) => {
            let result = manager.start(&job.name, job.mode.into(), job.timeout);
            return job_result(result, out);
        }
        UnitCommand::Stop(job) => {
            let result = manager.stop(&job.name, job.mode.into(), job.timeout);
            return job_result(result, out);
        }
        UnitCommand::Restart(job) => {
            let result = manager.restart(&job.name, job.mode.into(), job.timeout);
            return job_result(result, out);
        }
        UnitCommand::ResetFailed { name } => {
            manager
                .reset_failed(name)
                .with_context(|| format!("resetting the failed state of {name}"))?;
            writeln!(out, "reset {name}")?;
        }
        UnitCommand::Show { name, json } => {
            let status = manager
                .unit_status(name)
                .with_context(|| format!("reading the state of {name}"))?;
            let next = if systemd::unit_type(name) == Some("timer")
                && status.load_state == systemd::LoadState::Loaded
            {
                Some(
                    manager
                        .timer_next_elapse(name)
                        .with_context(|| format!("reading the next elapse of {name}"))?,
                )
            } else {
                None
            };
            if *json {
                let value = serde_json::json!({
                    "unit": name,
                    "status": status,
                    "next_elapse": next,
                });
                writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
            } else {
                write_show(out, name, &status, next.as_ref())?;
            }
        }
        UnitCommand::Enable { names } => {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let changes = manager
                .enable_unit_files(&names)
                .with_context(|| format!("enabling {}", names.join(" ")))?;
            write_changes(out, &changes)?;
        }
        UnitCommand::Disable { names } => {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let changes = manager
                .disable_unit_files(&names)
                .with_context(|| format!("disabling {}", names.join(" ")))?;
            write_changes(out, &changes)?;
        }
    }
    Ok(Outcome::Ok)
}

/// Prints a job's outcome; job-level failures go to stderr as findings, the rest is `Err`.
fn job_result(
    result: Result<JobOutcome, systemd::Error>,
    out: &mut impl Write,
) -> anyhow::Result<Outcome> {
    match result {
        Ok(outcome) => {
            let verb = match (outcome.op, outcome.settled) {
                (_, Settled::Stopped) => "stopped",
                (_, Settled::Exited) => "finished",
                (systemd::Op::Restart, Settled::Active) => "restarted",
                (_, Settled::Active) => "started",
            };
            let job = outcome.job_result.as_ref().map_or_else(
                || "lost (state read instead)".to_owned(),
                ToString::to_string,
            );
            writeln!(
                out,
                "{verb} {}: {} (job {job}, {} ms)",
                outcome.unit,
                outcome.status.summary(),
                outcome.elapsed_ms
            )?;
            Ok(Outcome::Ok)
        }
        Err(
            err @ (systemd::Error::JobFailed { .. }
            | systemd::Error::StartSkipped { .. }
            | systemd::Error::Deadline { .. }),
        ) => {
            // The job ran and the unit did not end up as asked: a finding, exit 1.
            let mut stderr = std::io::stderr().lock();
            writeln!(stderr, "error: {err}")?;
            Ok(Outcome::Findings)
        }
        Err(err) => Err(err.into()),
    }
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

fn or_empty<T: ToString>(value: Option<T>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

/// `systemctl show`-style `Key=value` lines; the realtime elapse as a UTC date (as
/// `systemctl show` prints it; `--json` keeps the µs), the monotonic one in µs since boot.
fn write_show(
    out: &mut impl Write,
    name: &str,
    status: &UnitStatus,
    next: Option<&NextElapse>,
) -> std::io::Result<()> {
    writeln!(out, "Id={name}")?;
    writeln!(out, "LoadState={}", status.load_state)?;
    writeln!(out, "ActiveState={}", status.active_state)?;
    writeln!(out, "SubState={}", status.sub_state)?;
    writeln!(out, "Result={}", or_empty(status.result.as_ref()))?;
    writeln!(out, "ExecMainCode={}", or_empty(status.exec_main_code))?;
    writeln!(out, "ExecMainStatus={}", or_empty(status.exec_main_status))?;
    writeln!(out, "Type={}", or_empty(status.service_type.as_ref()))?;
    writeln!(out, "ConditionFailed={}", yes_no(status.condition_failed))?;
    writeln!(
        out,
        "NeedDaemonReload={}",
        yes_no(status.need_daemon_reload)
    )?;
    writeln!(out, "JobPending={}", yes_no(status.job_pending))?;
    if let Some(next) = next {
        let date = next
            .realtime_us
            .map(|us| super::clock::utc_timestamp(u128::from(us) / 1000));
        writeln!(out, "NextElapseUSecRealtime={}", or_empty(date))?;
        writeln!(
            out,
            "NextElapseUSecMonotonic={}",
            or_empty(next.monotonic_us)
        )?;
    }
    Ok(())
}

fn write_changes(out: &mut impl Write, changes: &[systemd::UnitFileChange]) -> std::io::Result<()> {
    for change in changes {
        if change.destination.is_empty() {
            writeln!(out, "{} {}", change.kind, change.path)?;
        } else {
            writeln!(
                out,
                "{} {} -> {}",
                change.kind, change.path, change.destination
            )?;
        }
    }
    writeln!(out, "reloaded the user manager")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::systemd::JobMode;
    use crate::systemd::fake::{Call, loaded_inactive};
    use crate::systemd::{ActiveState, Error, FakeUnitManager, Op};
    use clap::Parser;
    use std::time::Duration;

    #[derive(Debug, Parser)]
    struct TestCli {
        #[command(flatten)]
        unit: UnitArgs,
    }

    fn parse(args: &[&str]) -> Result<UnitArgs, clap::Error> {
        let full = ["cyclix", "--runtime-dir", "/run/user/1000"]
            .into_iter()
            .chain(args.iter().copied());
        TestCli::try_parse_from(full).map(|cli| cli.unit)
    }

    fn exec(fake: &FakeUnitManager, args: &[&str]) -> (Outcome, String) {
        let parsed = parse(args).expect("valid args");
        let mut out = Vec::new();
        let code = execute(fake, &parsed.command, &mut out).expect("no tool error");
        (code, String::from_utf8(out).expect("utf-8"))
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        TestCli::command().debug_assert();
    }

    #[test]
    fn start_parses_mode_and_timeout_and_calls_the_manager() {
        let fake = FakeUnitManager::new();
        let (code, out) = exec(
            &fake,
            &["start", "a.service", "--mode", "fail", "--timeout", "5s"],
        );
        assert_eq!(code, Outcome::Ok);
        assert!(
            out.starts_with("started a.service: active/running"),
            "{out}"
        );
        assert_eq!(
            fake.calls(),
            vec![Call::Start {
                unit: "a.service".to_owned(),
                mode: JobMode::Fail,
                timeout: Duration::from_secs(5)
            }]
        );
        assert!(parse(&["start", "a.service", "--mode", "sideways"]).is_err());
    }

    #[test]
    fn job_findings_exit_1_and_tool_errors_are_err() {
        let fake = FakeUnitManager::new();
        fake.skip_next_start("c.service");
        let (code, out) = exec(&fake, &["start", "c.service"]);
        assert_eq!(code, Outcome::Findings);
        assert!(out.is_empty(), "{out}");

        fake.fail_next(
            Op::Stop,
            None,
            Error::NoSuchUnit {
                unit: "x.service".to_owned(),
            },
        );
        let parsed = parse(&["stop", "x.service"]).expect("valid");
        let err = execute(&fake, &parsed.command, &mut Vec::new()).expect_err("tool error");
        assert!(
            format!("{err:#}").contains("unit x.service not found"),
            "{err:#}"
        );
    }

    #[test]
    fn show_prints_key_values_and_json() {
        let fake = FakeUnitManager::new();
        let mut status = loaded_inactive();
        status.active_state = ActiveState::Failed;
        "failed".clone_into(&mut status.sub_state);
        status.result = Some("exit-code".to_owned());
        status.exec_main_code = systemd::ExecMainCode::from_raw(1);
        status.exec_main_status = Some(1);
        fake.set_status("bad.service", status);
        let (_, out) = exec(&fake, &["show", "bad.service"]);
        assert!(out.contains("ActiveState=failed\n"), "{out}");
        assert!(
            out.contains("ExecMainCode=exited\nExecMainStatus=1\n"),
            "{out}"
        );
        assert!(!out.contains("NextElapse"), "{out}");

        fake.set_next_elapse("n.timer", NextElapse::from_raw(1_800_000_000_000_000, 0));
        let (_, out) = exec(&fake, &["show", "n.timer"]);
        assert!(
            out.contains("NextElapseUSecRealtime=2027-01-15 08:00:00 UTC\n"),
            "{out}"
        );
        let (_, out) = exec(&fake, &["show", "n.timer", "--json"]);
        let value: serde_json::Value = serde_json::from_str(&out).expect("json");
        assert_eq!(
            value["next_elapse"]["realtime_us"],
            1_800_000_000_000_000_u64
        );
        assert_eq!(
            value["next_elapse"]["monotonic_us"],
            serde_json::Value::Null
        );
        assert_eq!(value["status"]["load_state"], "loaded");
    }

    #[test]
    fn enable_and_disable_take_several_names() {
        let fake = FakeUnitManager::new();
        exec(&fake, &["enable", "a.timer", "b.timer"]);
        exec(&fake, &["disable", "a.timer"]);
        assert_eq!(
            fake.calls(),
            vec![
                Call::EnableUnitFiles(vec!["a.timer".to_owned(), "b.timer".to_owned()]),
                Call::DisableUnitFiles(vec!["a.timer".to_owned()]),
            ]
        );
        assert!(parse(&["enable"]).is_err(), "at least one name");
    }
}
