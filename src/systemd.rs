//! The systemd seam: what cyclix asks of the systemd **user** manager, as a trait plus domain
//! types and typed errors.
//!
//! Owns: [`UnitManager`] (reload, start/stop/restart with a deadline, reset-failed, unit and
//! timer status, enable/disable of unit files, force-loading a unit), the domain types it speaks
//! ([`JobMode`], [`JobResult`], [`UnitStatus`], [`JobOutcome`], ...), the pure decision
//! [`settle`] that turns "the job finished" plus "the unit's state" into an outcome (field report
//! B22), and [`Error`].
//!
//! May not: import zbus (that is `systemd/dbus.rs` and `systemd/dbus/`, the only D-Bus code in the crate), read the
//! environment, or print. No zbus type appears in this module's API.
//!
//! Implementations: [`dbus::ZbusUnitManager`] (the real user manager over D-Bus) and
//! `fake::FakeUnitManager` (a recording fake for orchestrator tests; unit-test builds only).
//!
//! Files: `types.rs` (the domain types), `settle.rs` (the pure job decision), `error.rs`
//! ([`Error`]), `dbus.rs` + `dbus/` (the real manager), `fake.rs` (the test fake).
//!
//! Units of numbers: systemd reports times in microseconds (µs, field names end in `_us`); this
//! API takes durations as [`Duration`] and reports elapsed time in milliseconds (`_ms`).

pub mod dbus;
mod error;
#[cfg(test)]
pub mod fake;
mod settle;
mod types;

use std::time::Duration;

pub use dbus::ZbusUnitManager;
pub use error::{BUS_HINT, Error, MANAGER};
#[cfg(test)]
pub use fake::FakeUnitManager;
pub use settle::settle;
pub use types::{
    ActiveState, ExecMainCode, JobMode, JobOutcome, JobResult, LoadState, NextElapse, Op,
    ParseJobModeError, Settled, UnitFileChange, UnitIdentity, UnitStatus,
};

/// What cyclix needs from the systemd user manager.
///
/// Every method is blocking and bounded: job waits take a caller-given deadline, every other
/// call is bounded by the implementation's call timeout. No method hangs forever (B21).
pub trait UnitManager {
    /// Reloads the manager's configuration (`Manager.Reload`, i.e. `systemctl --user
    /// daemon-reload`): reruns generators such as Quadlet and rereads unit files. Returns when
    /// the reload has finished. Serialised against this crate's own start/stop jobs (B21).
    ///
    /// # Errors
    /// [`Error::BusUnavailable`], [`Error::Deadline`] (lock or reply not in time),
    /// [`Error::Lock`], [`Error::Dbus`].
    fn reload(&self) -> Result<(), Error>;

    /// Starts `unit` (`Manager.StartUnit`) and waits until its job has finished and the unit's
    /// state says whether it really started (B21, B22).
    ///
    /// `timeout` bounds the whole call: lock, job and state read.
    ///
    /// # Errors
    /// [`Error::NoSuchUnit`], [`Error::StartSkipped`] (a `Condition*=` failed),
    /// [`Error::JobFailed`], [`Error::Deadline`], [`Error::BusUnavailable`], [`Error::Dbus`],
    /// [`Error::Lock`].
    fn start(&self, unit: &str, mode: JobMode, timeout: Duration) -> Result<JobOutcome, Error>;

    /// Queues a start job for `unit` (`Manager.StartUnit`) and returns as soon as systemd has
    /// queued it, with the job's object path (`systemctl --user start --no-block`): for a
    /// oneshot whose start job lasts as long as its work (a run), when the caller must not
    /// wait for it.
    ///
    /// # Errors
    /// [`Error::NoSuchUnit`], [`Error::Deadline`], [`Error::BusUnavailable`], [`Error::Dbus`],
    /// [`Error::Lock`].
    fn start_no_block(&self, unit: &str, mode: JobMode) -> Result<String, Error>;

    /// Stops `unit` (`Manager.StopUnit`) and waits for the job; success means the unit is
    /// `inactive` or `failed` afterwards.
    ///
    /// # Errors
    /// As [`UnitManager::start`], without `StartSkipped`.
    fn stop(&self, unit: &str, mode: JobMode, timeout: Duration) -> Result<JobOutcome, Error>;

    /// Arms the manager to stop `unit` `after` from now, whatever becomes of the caller: a
    /// transient timer `timer` (`Manager.StartTransientUnit`, `OnActiveSec=`, 1 s accuracy)
    /// whose transient service (`timer` with `.service`) `Conflicts=` `unit`, so its start
    /// stops it. Stopping `timer` disarms it; both are collected once inactive. Returns once
    /// the timer's start job is queued.
    ///
    /// # Errors
    /// [`Error::BusUnavailable`], [`Error::Dbus`] (e.g. a unit of that name exists),
    /// [`Error::Deadline`], [`Error::Lock`].
    fn stop_later(&self, unit: &str, timer: &str, after: Duration) -> Result<(), Error>;

    /// Restarts `unit` (`Manager.RestartUnit`) and waits like [`UnitManager::start`].
    ///
    /// # Errors
    /// As [`UnitManager::start`].
    fn restart(&self, unit: &str, mode: JobMode, timeout: Duration) -> Result<JobOutcome, Error>;

    /// Clears the `failed` state and restart counter of `unit` (`Manager.ResetFailedUnit`).
    ///
    /// # Errors
    /// [`Error::NoSuchUnit`] if the unit is not loaded, [`Error::BusUnavailable`],
    /// [`Error::Dbus`], [`Error::Deadline`].
    fn reset_failed(&self, unit: &str) -> Result<(), Error>;

    /// Reads the unit's state. Loads the unit if needed (`Manager.LoadUnit`), so a unit that does
    /// not exist is not an error: its `load_state` is [`LoadState::NotFound`].
    ///
    /// # Errors
    /// [`Error::BusUnavailable`], [`Error::Dbus`] (e.g. an invalid unit name),
    /// [`Error::Deadline`].
    fn unit_status(&self, unit: &str) -> Result<UnitStatus, Error>;

    /// Reads which start of `unit` is running: `Unit.InvocationID` and, for a service,
    /// `Service.MainPID` (org.freedesktop.systemd1(5)).
    ///
    /// # Errors
    /// [`Error::BusUnavailable`], [`Error::Dbus`], [`Error::Deadline`].
    fn unit_identity(&self, unit: &str) -> Result<UnitIdentity, Error>;

    /// Reads when the timer `unit` (a `.timer`) elapses next (`NextElapseUSecRealtime`,
    /// `NextElapseUSecMonotonic`). Neither being set means the timer will never fire again
    /// (B25). The timer is not loaded for this (D-Bus `GetUnit`): one that is not loaded is
    /// not scheduled.
    ///
    /// # Errors
    /// [`Error::NoSuchUnit`] if the timer is not loaded or does not exist, [`Error::BusUnavailable`],
    /// [`Error::Dbus`], [`Error::Deadline`].
    fn timer_next_elapse(&self, unit: &str) -> Result<NextElapse, Error>;

    /// Enables unit files (`Manager.EnableUnitFiles` with `runtime=false`, `force=true`: symlinks
    /// in `~/.config/systemd/user/*.wants/`), then reloads. Returns the symlink changes.
    ///
    /// # Errors
    /// [`Error::NoSuchUnit`] if a file is unknown, the errors of [`UnitManager::reload`],
    /// [`Error::Dbus`] (e.g. a unit without an `[Install]` section target).
    fn enable_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, Error>;

    /// Disables unit files (`Manager.DisableUnitFiles` with `runtime=false`), then reloads.
    /// Returns the symlink changes.
    ///
    /// # Errors
    /// As [`UnitManager::enable_unit_files`].
    fn disable_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, Error>;

    /// Forces `unit` to be loaded (`Manager.LoadUnit`) and returns its `LoadState`. Use after a
    /// reload to confirm a generated unit is [`LoadState::Loaded`] before starting it (B01).
    ///
    /// # Errors
    /// [`Error::BusUnavailable`], [`Error::Dbus`], [`Error::Deadline`].
    fn load_unit(&self, unit: &str) -> Result<LoadState, Error>;

    /// Forces `unit` to be loaded and returns its `LoadState` and `NeedDaemonReload` (its
    /// file, a drop-in or its `SourcePath=`, e.g. a Quadlet file, changed since it was loaded):
    /// whether the manager runs the unit as its files are now, without a reload. The default
    /// reads the whole [`UnitManager::unit_status`].
    ///
    /// # Errors
    /// [`Error::BusUnavailable`], [`Error::Dbus`], [`Error::Deadline`].
    fn load_current(&self, unit: &str) -> Result<(LoadState, bool), Error> {
        let s = self.unit_status(unit)?;
        Ok((s.load_state, s.need_daemon_reload))
    }

    /// The user manager's version: its `org.freedesktop.systemd1.Manager.Version` property,
    /// e.g. `"257.13-1~deb13u1"` (what `systemctl --user --version` prints after `systemd`).
    /// Read-only; used by `cyclix check`.
    ///
    /// # Errors
    /// [`Error::BusUnavailable`], [`Error::Dbus`], [`Error::Deadline`].
    fn manager_version(&self) -> Result<String, Error>;

    /// The NAMES the user manager's environment block sets: its
    /// `org.freedesktop.systemd1.Manager.Environment` property (`systemctl --user
    /// show-environment`), which every unit it starts inherits. Only the names leave this call:
    /// the values (which may be secrets) are dropped here. Read-only; used by `cyclix check` to
    /// tell whether a variable a spec names reaches the run unit (issue 19).
    ///
    /// # Errors
    /// [`Error::BusUnavailable`], [`Error::Dbus`], [`Error::Deadline`].
    fn manager_environment_names(&self) -> Result<Vec<String>, Error>;

    /// Whether logind keeps the user manager of `uid` running without a session: the `Linger`
    /// property of `org.freedesktop.login1.User` on the SYSTEM bus (`loginctl show-user UID -p
    /// Linger`; field report B08). A user logind does not track (no session, no linger) has no
    /// linger: `Ok(false)`. Read-only; used by `cyclix check`.
    ///
    /// # Errors
    /// [`Error::BusUnavailable`] (no system bus), [`Error::Dbus`], [`Error::Deadline`].
    fn user_linger(&self, uid: u32) -> Result<bool, Error>;

    /// The `ActiveState` of a unit of the SYSTEM manager (on the system bus), e.g.
    /// `network-online.target` for the stall of field report B07. A unit that does not exist
    /// reads as `inactive`. Read-only; used by `cyclix check`.
    ///
    /// # Errors
    /// [`Error::BusUnavailable`] (no system bus), [`Error::Dbus`], [`Error::Deadline`].
    fn system_unit_active_state(&self, unit: &str) -> Result<ActiveState, Error>;
}

/// The type suffix of a unit name: `"service"` for `a.service`, `"timer"` for `b.timer`.
/// Unit names are case-sensitive (systemd.unit(5)).
#[must_use]
pub fn unit_type(unit: &str) -> Option<&str> {
    unit.rsplit_once('.').map(|(_, suffix)| suffix)
}

#[cfg(test)]
mod tests;
