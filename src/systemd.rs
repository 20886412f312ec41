//! The systemd seam: what cyclix asks of the systemd **user** manager, as a trait plus domain
//! types and typed errors.
//!
//! Owns: [`UnitManager`] (reload, start/stop/restart with a deadline, reset-failed, unit and
//! timer status, enable/disable of unit files, force-loading a unit), the domain types it speaks
//! ([`JobMode`], [`JobResult`], [`UnitStatus`], [`JobOutcome`], ...), the pure decision
//! [`settle`] that turns "the job finished" plus "the unit's state" into an outcome (field report
//! B22), and [`Error`].
//!
//! May not: import zbus (that is `systemd/dbus.rs`, the only D-Bus code in the crate), read the
//! environment, or print. No zbus type appears in this module's API.
//!
//! Implementations: [`dbus::ZbusUnitManager`] (the real user manager over D-Bus) and
//! [`fake::FakeUnitManager`] (a recording fake for orchestrator tests).
//!
//! Units of numbers: systemd reports times in microseconds (µs, field names end in `_us`); this
//! API takes durations as [`Duration`] and reports elapsed time in milliseconds (`_ms`).

pub mod dbus;
pub mod fake;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;

pub use dbus::ZbusUnitManager;
pub use fake::FakeUnitManager;

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

    /// Reads when the timer `unit` (a `.timer`) elapses next (`NextElapseUSecRealtime`,
    /// `NextElapseUSecMonotonic`). Neither being set means the timer will never fire again
    /// (B25).
    ///
    /// # Errors
    /// [`Error::NoSuchUnit`] if the timer does not exist, [`Error::BusUnavailable`],
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

    /// The user manager's version: its `org.freedesktop.systemd1.Manager.Version` property,
    /// e.g. `"257.13-1~deb13u1"` (what `systemctl --user --version` prints after `systemd`).
    /// Read-only; used by `cyclix check`.
    ///
    /// # Errors
    /// [`Error::BusUnavailable`], [`Error::Dbus`], [`Error::Deadline`].
    fn manager_version(&self) -> Result<String, Error>;

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

/// Declares a string-valued systemd enum with a catch-all `Other(String)` variant, so values
/// added by newer systemd versions parse instead of failing.
macro_rules! systemd_string_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            /// A value this version of cyclix does not know, kept verbatim.
            Other(String),
        }

        impl $name {
            /// Parses systemd's string form; unknown values become `Other`.
            #[must_use]
            pub fn parse(value: &str) -> Self {
                match value {
                    $($text => Self::$variant,)+
                    other => Self::Other(other.to_owned()),
                }
            }

            /// systemd's string form.
            #[must_use]
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $text,)+
                    Self::Other(other) => other,
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
    };
}

systemd_string_enum! {
    /// The unit's `LoadState` property (org.freedesktop.systemd1(5), "Unit Objects").
    LoadState {
        /// The unit file was found and parsed.
        Loaded => "loaded",
        /// No unit file of that name exists (or no generator produced it: B01).
        NotFound => "not-found",
        /// The unit file has an invalid setting.
        BadSetting => "bad-setting",
        /// Loading failed.
        Error => "error",
        /// The unit is masked.
        Masked => "masked",
        /// The unit is referenced but not loaded yet.
        Stub => "stub",
        /// The unit was merged into another one (an alias).
        Merged => "merged",
    }
}

systemd_string_enum! {
    /// The unit's `ActiveState` property (org.freedesktop.systemd1(5)).
    ActiveState {
        /// Started, bound, plugged in, depending on the unit type.
        Active => "active",
        /// Active and reloading its configuration.
        Reloading => "reloading",
        /// Not running.
        Inactive => "inactive",
        /// Not running, and the last run failed (see `Result`).
        Failed => "failed",
        /// Starting.
        Activating => "activating",
        /// Stopping.
        Deactivating => "deactivating",
        /// Inactive while a maintenance operation runs (e.g. cleaning).
        Maintenance => "maintenance",
        /// Active while refreshing extensions.
        Refreshing => "refreshing",
    }
}

systemd_string_enum! {
    /// The `result` argument of the `JobRemoved` signal (org.freedesktop.systemd1(5),
    /// "Signals").
    JobResult {
        /// The job ran. For a start job this does NOT mean the unit runs (B22): read its state.
        Done => "done",
        /// The job was canceled before it finished (e.g. replaced by a conflicting job).
        Canceled => "canceled",
        /// The job timed out (`JobTimeoutSec=`).
        Timeout => "timeout",
        /// The job failed.
        Failed => "failed",
        /// A required dependency failed.
        Dependency => "dependency",
        /// The job was skipped: not applicable to the unit's state (or, with
        /// `StartUnitWithFlags`, a condition failed).
        Skipped => "skipped",
        /// The job was invalid for the unit type.
        Invalid => "invalid",
        /// An `Assert*=` check failed.
        Assert => "assert",
        /// The unit type is not supported on this system.
        Unsupported => "unsupported",
        /// The job was garbage-collected.
        Collected => "collected",
        /// A `once` job whose unit was already started once.
        Once => "once",
        /// The unit is frozen.
        Frozen => "frozen",
        /// A concurrency limit was hit.
        Concurrency => "concurrency",
    }
}

/// How systemd treats a new job that conflicts with queued ones: the `mode` argument of
/// `StartUnit`/`StopUnit`/`RestartUnit` (systemctl(1) `--job-mode=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobMode {
    /// Replace conflicting queued jobs (the default).
    Replace,
    /// Fail if the new job conflicts with a queued one (e.g. a still-queued stop from a
    /// previous teardown, B22).
    Fail,
    /// Start the unit and stop every unit not required by it.
    Isolate,
    /// Ignore all dependencies of the unit.
    IgnoreDependencies,
    /// Ignore requirement dependencies, keep ordering.
    IgnoreRequirements,
}

impl JobMode {
    /// Every mode, in the order shown to users.
    pub const ALL: [JobMode; 5] = [
        JobMode::Replace,
        JobMode::Fail,
        JobMode::Isolate,
        JobMode::IgnoreDependencies,
        JobMode::IgnoreRequirements,
    ];

    /// The D-Bus string form, e.g. `"replace"`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            JobMode::Replace => "replace",
            JobMode::Fail => "fail",
            JobMode::Isolate => "isolate",
            JobMode::IgnoreDependencies => "ignore-dependencies",
            JobMode::IgnoreRequirements => "ignore-requirements",
        }
    }
}

impl fmt::Display for JobMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`JobMode`]: holds the rejected text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown job mode {0:?}; use one of replace, fail, isolate, ignore-dependencies, ignore-requirements"
)]
pub struct ParseJobModeError(pub String);

impl FromStr for JobMode {
    type Err = ParseJobModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobMode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == s)
            .ok_or_else(|| ParseJobModeError(s.to_owned()))
    }
}

/// The operation an outcome or error belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// `Manager.Reload`.
    Reload,
    /// `Manager.StartUnit`.
    Start,
    /// `Manager.StopUnit`.
    Stop,
    /// `Manager.RestartUnit`.
    Restart,
    /// `Manager.ResetFailedUnit`.
    ResetFailed,
    /// Reading unit properties.
    Status,
    /// Reading timer properties.
    TimerNextElapse,
    /// `Manager.LoadUnit`.
    LoadUnit,
    /// `Manager.EnableUnitFiles`.
    Enable,
    /// `Manager.DisableUnitFiles`.
    Disable,
    /// Reading the manager's `Version`.
    Version,
    /// Reading logind's `User.Linger` (system bus).
    Linger,
    /// Reading a system unit's state (system bus).
    SystemStatus,
}

impl Op {
    /// The lowercase verb used in messages, e.g. `"start"`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Reload => "reload",
            Op::Start => "start",
            Op::Stop => "stop",
            Op::Restart => "restart",
            Op::ResetFailed => "reset-failed",
            Op::Status => "read status of",
            Op::TimerNextElapse => "read next elapse of",
            Op::LoadUnit => "load",
            Op::Enable => "enable",
            Op::Disable => "disable",
            Op::Version => "read the version of",
            Op::Linger => "read linger of",
            Op::SystemStatus => "read system state of",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the main process of a service last ended: the `ExecMainCode` property, a `si_code` of
/// `waitid(2)` (`CLD_EXITED` = 1, `CLD_KILLED` = 2, `CLD_DUMPED` = 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecMainCode {
    /// Exited; `ExecMainStatus` is the exit status.
    Exited,
    /// Killed by a signal; `ExecMainStatus` is the signal number.
    Killed,
    /// Killed by a signal and dumped core; `ExecMainStatus` is the signal number.
    Dumped,
    /// Another `si_code` value.
    Other(i32),
}

impl ExecMainCode {
    /// Maps the raw property value; `0` (the main process never ran) is `None`.
    #[must_use]
    pub fn from_raw(code: i32) -> Option<Self> {
        match code {
            0 => None,
            1 => Some(ExecMainCode::Exited),
            2 => Some(ExecMainCode::Killed),
            3 => Some(ExecMainCode::Dumped),
            other => Some(ExecMainCode::Other(other)),
        }
    }

    /// The name `systemctl show` uses, e.g. `"exited"`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ExecMainCode::Exited => "exited",
            ExecMainCode::Killed => "killed",
            ExecMainCode::Dumped => "dumped",
            ExecMainCode::Other(_) => "other",
        }
    }
}

impl fmt::Display for ExecMainCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecMainCode::Other(code) => write!(f, "code {code}"),
            known => f.write_str(known.as_str()),
        }
    }
}

impl Serialize for ExecMainCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ExecMainCode::Other(code) => serializer.serialize_str(&format!("code-{code}")),
            known => serializer.serialize_str(known.as_str()),
        }
    }
}

/// A unit's state as read from the manager (properties of org.freedesktop.systemd1.Unit and,
/// for services and timers, of `.Service` / `.Timer`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnitStatus {
    /// `LoadState`.
    pub load_state: LoadState,
    /// `ActiveState`.
    pub active_state: ActiveState,
    /// `SubState`, type-specific (e.g. `running`, `exited`, `dead`, `waiting`).
    pub sub_state: String,
    /// `Result` of a service or timer (`success`, `exit-code`, `signal`, `timeout`, ...);
    /// `None` for unit types without it or a unit that is not loaded.
    pub result: Option<String>,
    /// `ExecMainStatus` of a service: exit status, or signal number if killed. `None` if the
    /// main process never ran or the unit is not a service.
    pub exec_main_status: Option<i32>,
    /// `ExecMainCode` of a service. `None` if the main process never ran or the unit is not a
    /// service.
    pub exec_main_code: Option<ExecMainCode>,
    /// `NeedDaemonReload`: the unit file changed on disk since it was loaded.
    pub need_daemon_reload: bool,
    /// The last start attempt was skipped because a `Condition*=` check failed:
    /// `ConditionResult=no` with `ConditionTimestamp` set. (A unit whose conditions were never
    /// checked, e.g. freshly loaded, also has `ConditionResult=no`, but a zero timestamp.)
    pub condition_failed: bool,
    /// `Type` of a service (`simple`, `exec`, `oneshot`, `notify`, ...); `None` otherwise.
    pub service_type: Option<String>,
    /// Whether a job for the unit is queued or running (`Job` property not `(0, "/")`).
    pub job_pending: bool,
}

impl UnitStatus {
    /// The status of a unit the manager has no file for (as `LoadUnit` reports it).
    #[must_use]
    pub fn not_found() -> Self {
        UnitStatus {
            load_state: LoadState::NotFound,
            active_state: ActiveState::Inactive,
            sub_state: "dead".to_owned(),
            result: None,
            exec_main_status: None,
            exec_main_code: None,
            need_daemon_reload: false,
            condition_failed: false,
            service_type: None,
            job_pending: false,
        }
    }

    /// One line for messages, e.g. `failed/failed (result exit-code, main process exited,
    /// status 1)`.
    #[must_use]
    pub fn summary(&self) -> String {
        let mut out = format!("{}/{}", self.active_state, self.sub_state);
        let mut details = Vec::new();
        if self.load_state != LoadState::Loaded {
            details.push(format!("load state {}", self.load_state));
        }
        if let Some(result) = &self.result {
            details.push(format!("result {result}"));
        }
        if let (Some(code), Some(status)) = (self.exec_main_code, self.exec_main_status) {
            details.push(format!("main process {code}, status {status}"));
        }
        if self.condition_failed {
            details.push("condition failed".to_owned());
        }
        if !details.is_empty() {
            out.push_str(" (");
            out.push_str(&details.join(", "));
            out.push(')');
        }
        out
    }

    fn is_oneshot(&self) -> bool {
        self.service_type.as_deref() == Some("oneshot")
    }
}

/// When a timer elapses next (org.freedesktop.systemd1(5), "Timer Unit Objects").
///
/// systemd reports `0` or `u64::MAX` ("infinity") when there is no next elapse; both become
/// `None` here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NextElapse {
    /// `NextElapseUSecRealtime`: µs since the Unix epoch (`CLOCK_REALTIME`), from `OnCalendar=`.
    pub realtime_us: Option<u64>,
    /// `NextElapseUSecMonotonic`: µs on the manager's monotonic clock, from `OnActiveSec=`,
    /// `OnStartupSec=`, `OnUnitActiveSec=` and the like.
    pub monotonic_us: Option<u64>,
}

impl NextElapse {
    /// Builds from the raw property values (µs), mapping `0` and `u64::MAX` to `None`.
    #[must_use]
    pub fn from_raw(realtime_us: u64, monotonic_us: u64) -> Self {
        let set = |us: u64| (us != 0 && us != u64::MAX).then_some(us);
        NextElapse {
            realtime_us: set(realtime_us),
            monotonic_us: set(monotonic_us),
        }
    }

    /// Whether the timer will fire again at all (B25: `false` means it never fires).
    #[must_use]
    pub fn is_scheduled(&self) -> bool {
        self.realtime_us.is_some() || self.monotonic_us.is_some()
    }
}

/// One symlink change reported by `EnableUnitFiles` / `DisableUnitFiles`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnitFileChange {
    /// `symlink` or `unlink`.
    pub kind: String,
    /// The symlink's path.
    pub path: String,
    /// Where the symlink points (empty for `unlink`).
    pub destination: String,
}

/// Where a unit ended up after a successful job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Settled {
    /// `ActiveState` is `active` (or `reloading`/`refreshing`).
    Active,
    /// A start that ran to completion: `inactive` with `Result=success` and its conditions met
    /// (a oneshot without `RemainAfterExit=`, or a service whose main process already exited 0).
    Exited,
    /// A stop that left the unit `inactive` or `failed`.
    Stopped,
}

/// The outcome of a successful start, stop or restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobOutcome {
    /// The unit name.
    pub unit: String,
    /// The operation.
    pub op: Op,
    /// The job's `JobRemoved` result; `None` if the signal was never seen and the outcome was
    /// read from the unit's state after the job had disappeared (B21, reload race).
    pub job_result: Option<JobResult>,
    /// Where the unit ended up.
    pub settled: Settled,
    /// The unit's state read after the job finished.
    pub status: UnitStatus,
    /// Wall-clock time of the whole call, in milliseconds.
    pub elapsed_ms: u64,
}

/// Decides what a finished job means, from its `JobRemoved` result (`None` if the signal was
/// lost) and the unit's state read afterwards (B22). Pure.
///
/// | op | job result | unit state | outcome |
/// |---|---|---|---|
/// | start/restart | `skipped` | any | `StartSkipped` |
/// | any | not `done` | any | `JobFailed` |
/// | start/restart | `done`/lost | condition failed, not active | `StartSkipped` |
/// | start/restart | `done`/lost | active, reloading, refreshing | `Active` |
/// | start/restart | `done`/lost | inactive, `Result=success` | `Exited` |
/// | start/restart | `done`/lost | anything else (failed, activating/auto-restart, ...) | `JobFailed` |
/// | stop | `done`/lost | inactive, failed | `Stopped` |
/// | stop | `done`/lost | anything else | `JobFailed` |
///
/// `op` is one of [`Op::Start`], [`Op::Restart`], [`Op::Stop`]; other ops are treated as stop.
///
/// # Errors
/// [`Error::StartSkipped`] or [`Error::JobFailed`] as in the table.
pub fn settle(
    unit: &str,
    op: Op,
    job: Option<&JobResult>,
    status: &UnitStatus,
) -> Result<Settled, Error> {
    let starting = matches!(op, Op::Start | Op::Restart);
    let failed = |result: JobResult| Error::JobFailed {
        unit: unit.to_owned(),
        op,
        result,
        state: status.summary(),
    };
    match job {
        Some(JobResult::Skipped) if starting => {
            return Err(Error::StartSkipped {
                unit: unit.to_owned(),
            });
        }
        Some(result) if *result != JobResult::Done => return Err(failed(result.clone())),
        _ => {}
    }
    let job_result = job.cloned().unwrap_or(JobResult::Done);
    let state = &status.active_state;
    if starting {
        let running = matches!(
            state,
            ActiveState::Active | ActiveState::Reloading | ActiveState::Refreshing
        );
        if status.condition_failed && !running {
            return Err(Error::StartSkipped {
                unit: unit.to_owned(),
            });
        }
        if running {
            return Ok(Settled::Active);
        }
        if *state == ActiveState::Inactive && status.result.as_deref() == Some("success") {
            return Ok(Settled::Exited);
        }
        return Err(failed(job_result));
    }
    if matches!(state, ActiveState::Inactive | ActiveState::Failed) {
        Ok(Settled::Stopped)
    } else {
        Err(failed(job_result))
    }
}

impl Settled {
    /// Whether a start that ended here was a oneshot that ran to completion (as opposed to a
    /// long-running service whose main process exited 0 right away).
    #[must_use]
    pub fn is_oneshot_completion(self, status: &UnitStatus) -> bool {
        self == Settled::Exited && status.is_oneshot()
    }
}

/// The type suffix of a unit name: `"service"` for `a.service`, `"timer"` for `b.timer`.
/// Unit names are case-sensitive (systemd.unit(5)).
#[must_use]
pub fn unit_type(unit: &str) -> Option<&str> {
    unit.rsplit_once('.').map(|(_, suffix)| suffix)
}

/// Hint printed with every bus-unavailable error.
pub const BUS_HINT: &str = "is the user manager running? (loginctl enable-linger $USER; are \
     DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR set, and does $XDG_RUNTIME_DIR/bus exist?)";

/// How to look at what a deadline was waiting for: the unit's status, or for manager-wide
/// operations (the unit `user manager`) the manager's jobs.
fn inspect_hint(unit: &str) -> String {
    if unit.contains('.') {
        format!("systemctl --user status {unit}")
    } else {
        "systemctl --user list-jobs".to_string()
    }
}

/// Errors of the systemd seam. Each message names the operation and the unit and gives a fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The user manager's bus cannot be reached (connect failed or the connection dropped).
    #[error("cannot reach the systemd user manager at {address}: {message}; {hint}", hint = BUS_HINT)]
    BusUnavailable {
        /// Which bus address was tried (or how it was looked up).
        address: String,
        /// The underlying error.
        message: String,
    },
    /// The manager has no unit of that name (`org.freedesktop.systemd1.NoSuchUnit`).
    #[error(
        "unit {unit} not found; is its file installed and was the manager reloaded? \
         (cyclix unit reload; systemctl --user cat {unit})"
    )]
    NoSuchUnit {
        /// The unit name.
        unit: String,
    },
    /// The job finished with a result other than `done`, or `done` but the unit did not end
    /// in the expected state.
    #[error(
        "{op} {unit} failed: job result {result}, unit is {state}; \
         see journalctl --user -u {unit}"
    )]
    JobFailed {
        /// The unit name.
        unit: String,
        /// The operation.
        op: Op,
        /// The job's result (`done` if the job ran but the unit failed afterwards).
        result: JobResult,
        /// The unit's state, as [`UnitStatus::summary`].
        state: String,
    },
    /// A start job finished but a `Condition*=` check failed, so nothing ran (B22).
    #[error(
        "start of {unit} skipped: a Condition*= check failed (ConditionResult=no), the unit did \
         not run; check its Condition*= lines (systemctl --user cat {unit})"
    )]
    StartSkipped {
        /// The unit name.
        unit: String,
    },
    /// A wait ran past its deadline; the job (if any) is left running.
    #[error(
        "{op} {unit}: no result after {after_ms} ms while {phase}; unit is {state}; \
         raise the timeout or inspect it ({})",
        inspect_hint(unit)
    )]
    Deadline {
        /// The unit name (`user manager` for reload).
        unit: String,
        /// The operation.
        op: Op,
        /// What was being waited for, e.g. `waiting for the job to finish`.
        phase: &'static str,
        /// The deadline, in milliseconds.
        after_ms: u64,
        /// The unit's state when the deadline passed, or why it could not be read.
        state: String,
    },
    /// Any other D-Bus error, with systemd's error name and message.
    #[error("{op} {unit}: D-Bus error: {message}")]
    Dbus {
        /// The operation.
        op: Op,
        /// The unit name (`user manager` for manager-wide calls).
        unit: String,
        /// The D-Bus error name and message.
        message: String,
    },
    /// The lock that serialises reloads against jobs could not be taken.
    #[error("locking {path}: {message}; is the directory writable (check XDG_RUNTIME_DIR)?")]
    Lock {
        /// The lock file.
        path: String,
        /// The underlying error.
        message: String,
    },
}

/// The `unit` value used in errors of manager-wide operations such as reload.
pub const MANAGER: &str = "user manager";

#[cfg(test)]
mod tests {
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
}
