//! The domain types of the systemd seam: job modes and results, unit and timer state, the
//! operation an outcome or error belongs to, and unit-file changes. Pure data; no zbus type.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

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
    /// Reading the manager's `Environment`.
    Environment,
    /// Reading logind's `User.Linger` (system bus).
    Linger,
    /// Reading a system unit's state (system bus).
    SystemStatus,
    /// Reading a unit's `InvocationID` and `MainPID`.
    Identity,
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
            Op::Environment => "read the environment of",
            Op::Linger => "read linger of",
            Op::SystemStatus => "read system state of",
            Op::Identity => "read the invocation of",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which start of a unit is running: what changes when the unit is restarted (issue 20, item
/// 1: a sandbox that changed after its proof is not the one the probes proved).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnitIdentity {
    /// `InvocationID` in lowercase hex (32 digits; empty while the unit never ran).
    pub invocation_id: String,
    /// `MainPID` of a service (0: none, or not a service).
    pub main_pid: u32,
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

impl Settled {
    /// Whether a start that ended here was a oneshot that ran to completion (as opposed to a
    /// long-running service whose main process exited 0 right away).
    #[must_use]
    pub fn is_oneshot_completion(self, status: &UnitStatus) -> bool {
        self == Settled::Exited && status.is_oneshot()
    }
}
