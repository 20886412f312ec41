//! [`FakeUnitManager`]: a recording, scriptable [`UnitManager`] for tests of code that drives
//! systemd (tier (a) of the D-Bus tests in STYLE.md; after youki's `TestSystemdClient`).
//!
//! Owns: an in-memory model of units (status + next timer elapse), the ordered list of calls it
//! received, and queues of scripted errors. Does no I/O; compiled for unit tests only (`cfg(test)`:
//! nothing outside the crate's unit tests uses it).
//!
//! Default behaviour, unless scripted otherwise: every unit exists and is `loaded`/`inactive`;
//! `start`/`restart` make it `active`/`running`, `stop` makes it `inactive`/`dead`,
//! `reset_failed` turns `failed` into `inactive`; timers have no next elapse; enable/disable
//! report no changes. [`FakeUnitManager::fail_next`] makes the next matching call fail.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::{
    ActiveState, Error, JobMode, JobOutcome, JobResult, LoadState, NextElapse, Op, UnitFileChange,
    UnitIdentity, UnitManager, UnitStatus, settle,
};

/// One call the fake received, with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// [`UnitManager::reload`].
    Reload,
    /// [`UnitManager::start`]; `timeout` as given.
    Start {
        /// Unit name.
        unit: String,
        /// Job mode.
        mode: JobMode,
        /// Deadline given by the caller.
        timeout: Duration,
    },
    /// [`UnitManager::stop`].
    Stop {
        /// Unit name.
        unit: String,
        /// Job mode.
        mode: JobMode,
        /// Deadline given by the caller.
        timeout: Duration,
    },
    /// [`UnitManager::stop_later`].
    StopLater {
        /// The unit to stop.
        unit: String,
        /// The transient timer.
        timer: String,
        /// When.
        after: Duration,
    },
    /// [`UnitManager::restart`].
    Restart {
        /// Unit name.
        unit: String,
        /// Job mode.
        mode: JobMode,
        /// Deadline given by the caller.
        timeout: Duration,
    },
    /// [`UnitManager::reset_failed`].
    ResetFailed(String),
    /// [`UnitManager::unit_status`].
    UnitStatus(String),
    /// [`UnitManager::timer_next_elapse`].
    TimerNextElapse(String),
    /// [`UnitManager::enable_unit_files`].
    EnableUnitFiles(Vec<String>),
    /// [`UnitManager::disable_unit_files`].
    DisableUnitFiles(Vec<String>),
    /// [`UnitManager::load_unit`].
    LoadUnit(String),
    /// [`UnitManager::manager_version`].
    ManagerVersion,
    /// [`UnitManager::manager_environment_names`].
    ManagerEnvironment,
    /// [`UnitManager::user_linger`] with the uid.
    UserLinger(u32),
    /// [`UnitManager::system_unit_active_state`].
    SystemUnitActiveState(String),
}

impl Call {
    /// The operation of this call.
    #[must_use]
    pub fn op(&self) -> Op {
        match self {
            Call::Reload => Op::Reload,
            Call::Start { .. } | Call::StopLater { .. } => Op::Start,
            Call::Stop { .. } => Op::Stop,
            Call::Restart { .. } => Op::Restart,
            Call::ResetFailed(_) => Op::ResetFailed,
            Call::UnitStatus(_) => Op::Status,
            Call::TimerNextElapse(_) => Op::TimerNextElapse,
            Call::EnableUnitFiles(_) => Op::Enable,
            Call::DisableUnitFiles(_) => Op::Disable,
            Call::LoadUnit(_) => Op::LoadUnit,
            Call::ManagerVersion => Op::Version,
            Call::ManagerEnvironment => Op::Environment,
            Call::UserLinger(_) => Op::Linger,
            Call::SystemUnitActiveState(_) => Op::SystemStatus,
        }
    }

    /// The unit names the call is about (empty for reload).
    #[must_use]
    pub fn units(&self) -> Vec<&str> {
        match self {
            Call::Reload
            | Call::ManagerVersion
            | Call::ManagerEnvironment
            | Call::UserLinger(_) => Vec::new(),
            Call::Start { unit, .. } | Call::Stop { unit, .. } | Call::Restart { unit, .. } => {
                vec![unit.as_str()]
            }
            Call::StopLater { unit, timer, .. } => vec![timer.as_str(), unit.as_str()],
            Call::ResetFailed(unit)
            | Call::UnitStatus(unit)
            | Call::TimerNextElapse(unit)
            | Call::LoadUnit(unit)
            | Call::SystemUnitActiveState(unit) => vec![unit.as_str()],
            Call::EnableUnitFiles(units) | Call::DisableUnitFiles(units) => {
                units.iter().map(String::as_str).collect()
            }
        }
    }
}

/// A scripted error: fails the next call of `op` (for `unit`, or any unit if `None`).
struct Scripted {
    op: Op,
    unit: Option<String>,
    error: Error,
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    units: BTreeMap<String, UnitStatus>,
    timers: BTreeMap<String, NextElapse>,
    scripted: Vec<Scripted>,
    exits: BTreeMap<String, i32>,
    exit_results: BTreeMap<String, String>,
    exit_polls: BTreeMap<String, usize>,
    lingering: Vec<u32>,
    environment: Vec<String>,
    system_units: BTreeMap<String, ActiveState>,
    running: Vec<String>,
}

impl State {
    fn take_scripted(&mut self, call: &Call) -> Option<Error> {
        let op = call.op();
        let units = call.units();
        let index = self.scripted.iter().position(|s| {
            s.op == op && s.unit.as_deref().is_none_or(|unit| units.contains(&unit))
        })?;
        Some(self.scripted.remove(index).error)
    }

    fn status(&self, unit: &str) -> UnitStatus {
        self.units
            .get(unit)
            .cloned()
            .unwrap_or_else(loaded_inactive)
    }
}

/// A unit that is loaded and inactive, as the fake assumes for every unit it was not told about.
#[must_use]
pub fn loaded_inactive() -> UnitStatus {
    UnitStatus {
        load_state: LoadState::Loaded,
        ..UnitStatus::not_found()
    }
}

/// The recording fake. `Sync`, so it can be shared by reference like the real one.
#[derive(Default)]
pub struct FakeUnitManager {
    state: Mutex<State>,
}

impl std::fmt::Debug for FakeUnitManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeUnitManager")
            .field("calls", &self.calls())
            .finish_non_exhaustive()
    }
}

impl FakeUnitManager {
    /// A fake in which every unit is `loaded`/`inactive`.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock leaves consistent data behind.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every call received so far, in order.
    #[must_use]
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// Sets the status that `unit_status`/`load_unit` report for `unit` (and that jobs start
    /// from).
    pub fn set_status(&self, unit: &str, status: UnitStatus) {
        self.state().units.insert(unit.to_owned(), status);
    }

    /// Makes `unit` unknown: `load_unit` reports `not-found`, jobs fail with
    /// [`Error::NoSuchUnit`].
    pub fn set_missing(&self, unit: &str) {
        self.set_status(unit, UnitStatus::not_found());
    }

    /// Sets what `timer_next_elapse` reports for `unit`.
    pub fn set_next_elapse(&self, unit: &str, next: NextElapse) {
        self.state().timers.insert(unit.to_owned(), next);
    }

    /// Makes the next call of `op` about `unit` (any unit if `None`) fail with `error`. Queued
    /// errors are used in the order they were added.
    pub fn fail_next(&self, op: Op, unit: Option<&str>, error: Error) {
        self.state().scripted.push(Scripted {
            op,
            unit: unit.map(str::to_owned),
            error,
        });
    }

    /// Makes `unit` end by itself after each start: the start leaves it `active` (as a
    /// container that runs), and the next `unit_status` finds it ended with `code`: `0` leaves
    /// it `inactive` with `Result=success`, anything else `failed` with `Result=exit-code` and
    /// `ExecMainStatus=code`.
    pub fn exit_after_start(&self, unit: &str, code: i32) {
        self.state().exits.insert(unit.to_owned(), code);
    }

    /// As [`FakeUnitManager::exit_after_start`], but the unit is still running for the first
    /// `polls - 1` `unit_status` calls after its start and has ended at the `polls`-th.
    pub fn exit_after_polls(&self, unit: &str, code: i32, polls: usize) {
        let mut state = self.state();
        state.exits.insert(unit.to_owned(), code);
        state.exit_polls.insert(unit.to_owned(), polls);
    }

    /// As [`FakeUnitManager::exit_after_start`] with a non-zero `code`, but the unit's
    /// `Result=` is `result` (e.g. `oom-kill`: the kernel's OOM killer acted in its cgroup).
    pub fn end_after_start(&self, unit: &str, code: i32, result: &str) {
        let mut state = self.state();
        state.exits.insert(unit.to_owned(), code);
        state
            .exit_results
            .insert(unit.to_owned(), result.to_owned());
    }

    /// Sets the names `manager_environment_names` reports (by default none).
    pub fn set_manager_environment(&self, names: &[&str]) {
        self.state().environment = names.iter().map(|n| (*n).to_owned()).collect();
    }

    /// Makes `user_linger(uid)` report `true` (by default no user lingers).
    pub fn set_linger(&self, uid: u32) {
        self.state().lingering.push(uid);
    }

    /// Sets what `system_unit_active_state(unit)` reports (by default `inactive`).
    pub fn set_system_unit_state(&self, unit: &str, state: ActiveState) {
        self.state().system_units.insert(unit.to_owned(), state);
    }

    /// Makes the next start of `unit` report [`Error::StartSkipped`] (B22).
    pub fn skip_next_start(&self, unit: &str) {
        self.fail_next(
            Op::Start,
            Some(unit),
            Error::StartSkipped {
                unit: unit.to_owned(),
            },
        );
    }

    /// Records `call` and returns its scripted error, if any.
    fn record(&self, call: Call) -> Result<MutexGuard<'_, State>, Error> {
        let mut state = self.state();
        let scripted = state.take_scripted(&call);
        state.calls.push(call);
        match scripted {
            Some(error) => Err(error),
            None => Ok(state),
        }
    }

    fn job(&self, call: Call, unit: &str) -> Result<JobOutcome, Error> {
        let op = call.op();
        let mut state = self.record(call)?;
        let mut status = state.status(unit);
        if status.load_state == LoadState::NotFound {
            return Err(Error::NoSuchUnit {
                unit: unit.to_owned(),
            });
        }
        if op == Op::Stop {
            if status.active_state != ActiveState::Failed {
                status.active_state = ActiveState::Inactive;
                "dead".clone_into(&mut status.sub_state);
            }
            state.running.retain(|u| u != unit);
        } else {
            if state.exits.contains_key(unit) {
                state.running.push(unit.to_owned());
            }
            status.active_state = ActiveState::Active;
            "running".clone_into(&mut status.sub_state);
            status.result = Some("success".to_owned());
            status.condition_failed = false;
        }
        state.units.insert(unit.to_owned(), status.clone());
        let settled = settle(unit, op, Some(&JobResult::Done), &status)?;
        Ok(JobOutcome {
            unit: unit.to_owned(),
            op,
            job_result: Some(JobResult::Done),
            settled,
            status,
            elapsed_ms: 0,
        })
    }
}

impl UnitManager for FakeUnitManager {
    fn reload(&self) -> Result<(), Error> {
        self.record(Call::Reload).map(drop)
    }

    fn start(&self, unit: &str, mode: JobMode, timeout: Duration) -> Result<JobOutcome, Error> {
        let call = Call::Start {
            unit: unit.to_owned(),
            mode,
            timeout,
        };
        self.job(call, unit)
    }

    /// Recorded as [`Call::StopLater`]; nothing stops.
    fn stop_later(&self, unit: &str, timer: &str, after: Duration) -> Result<(), Error> {
        self.record(Call::StopLater {
            unit: unit.to_owned(),
            timer: timer.to_owned(),
            after,
        })
        .map(drop)
    }

    /// Recorded as [`Call::Start`] with a zero `timeout`; the unit becomes active as for
    /// [`UnitManager::start`].
    fn start_no_block(&self, unit: &str, mode: JobMode) -> Result<String, Error> {
        let call = Call::Start {
            unit: unit.to_owned(),
            mode,
            timeout: Duration::ZERO,
        };
        self.job(call, unit)?;
        Ok(format!(
            "/org/freedesktop/systemd1/job/{}",
            self.calls().len()
        ))
    }

    fn stop(&self, unit: &str, mode: JobMode, timeout: Duration) -> Result<JobOutcome, Error> {
        let call = Call::Stop {
            unit: unit.to_owned(),
            mode,
            timeout,
        };
        self.job(call, unit)
    }

    fn restart(&self, unit: &str, mode: JobMode, timeout: Duration) -> Result<JobOutcome, Error> {
        let call = Call::Restart {
            unit: unit.to_owned(),
            mode,
            timeout,
        };
        self.job(call, unit)
    }

    fn reset_failed(&self, unit: &str) -> Result<(), Error> {
        let mut state = self.record(Call::ResetFailed(unit.to_owned()))?;
        let mut status = state.status(unit);
        if status.active_state == ActiveState::Failed {
            status.active_state = ActiveState::Inactive;
            "dead".clone_into(&mut status.sub_state);
            status.result = Some("success".to_owned());
            state.units.insert(unit.to_owned(), status);
        }
        Ok(())
    }

    fn unit_status(&self, unit: &str) -> Result<UnitStatus, Error> {
        let mut state = self.record(Call::UnitStatus(unit.to_owned()))?;
        let code = state.exits.get(unit).copied();
        let running = state.running.iter().any(|u| u == unit);
        if running && let Some(left) = state.exit_polls.get_mut(unit) {
            *left = left.saturating_sub(1);
            if *left > 0 {
                return Ok(state.status(unit));
            }
        }
        if let (Some(code), true) = (code, running) {
            state.running.retain(|u| u != unit);
            let mut status = state.status(unit);
            let ok = code == 0;
            status.active_state = if ok {
                ActiveState::Inactive
            } else {
                ActiveState::Failed
            };
            (if ok { "dead" } else { "failed" }).clone_into(&mut status.sub_state);
            status.result = Some(
                state
                    .exit_results
                    .get(unit)
                    .cloned()
                    .unwrap_or_else(|| if ok { "success" } else { "exit-code" }.to_owned()),
            );
            status.exec_main_status = Some(code);
            state.units.insert(unit.to_owned(), status);
        }
        Ok(state.status(unit))
    }

    /// Not recorded as a call. The identity of the N-th start (or restart) of `unit`:
    /// invocation `UNIT#N`, main pid N, so a restart shows as a change.
    fn unit_identity(&self, unit: &str) -> Result<UnitIdentity, Error> {
        let starts = self
            .state()
            .calls
            .iter()
            .filter(|c| {
                matches!(c, Call::Start { unit: u, .. } | Call::Restart { unit: u, .. } if u == unit)
            })
            .count();
        Ok(UnitIdentity {
            invocation_id: format!("{unit}#{starts}"),
            main_pid: u32::try_from(starts).unwrap_or(u32::MAX),
        })
    }

    fn timer_next_elapse(&self, unit: &str) -> Result<NextElapse, Error> {
        let state = self.record(Call::TimerNextElapse(unit.to_owned()))?;
        if state.status(unit).load_state == LoadState::NotFound {
            return Err(Error::NoSuchUnit {
                unit: unit.to_owned(),
            });
        }
        Ok(state
            .timers
            .get(unit)
            .copied()
            .unwrap_or(NextElapse::from_raw(0, 0)))
    }

    fn enable_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, Error> {
        let names = units.iter().map(|u| (*u).to_owned()).collect();
        self.record(Call::EnableUnitFiles(names)).map(drop)?;
        Ok(Vec::new())
    }

    fn disable_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, Error> {
        let names = units.iter().map(|u| (*u).to_owned()).collect();
        self.record(Call::DisableUnitFiles(names)).map(drop)?;
        Ok(Vec::new())
    }

    fn load_unit(&self, unit: &str) -> Result<LoadState, Error> {
        let state = self.record(Call::LoadUnit(unit.to_owned()))?;
        Ok(state.status(unit).load_state)
    }

    /// Always `"257"` unless scripted to fail.
    fn manager_version(&self) -> Result<String, Error> {
        self.record(Call::ManagerVersion).map(drop)?;
        Ok("257".to_owned())
    }

    fn manager_environment_names(&self) -> Result<Vec<String>, Error> {
        let state = self.record(Call::ManagerEnvironment)?;
        Ok(state.environment.clone())
    }

    fn user_linger(&self, uid: u32) -> Result<bool, Error> {
        let state = self.record(Call::UserLinger(uid))?;
        Ok(state.lingering.contains(&uid))
    }

    fn system_unit_active_state(&self, unit: &str) -> Result<ActiveState, Error> {
        let state = self.record(Call::SystemUnitActiveState(unit.to_owned()))?;
        Ok(state
            .system_units
            .get(unit)
            .cloned()
            .unwrap_or(ActiveState::Inactive))
    }
}

#[cfg(test)]
mod tests;
