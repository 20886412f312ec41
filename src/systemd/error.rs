//! [`Error`]: the typed errors of the systemd seam, each naming the operation and the unit and
//! giving a fix.

use super::{JobResult, Op};

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

/// D-Bus errors of a user manager that blinks (`systemctl --user daemon-reexec`, a package
/// update): the call's reply is lost (`NoReply: Message recipient disconnected`) or the name
/// has no owner for a moment (`ServiceUnknown`, `NameHasNoOwner`), while the manager, its units
/// and their jobs survive (systemd serialises them across the re-exec; measured on systemd
/// 257: a reexec mid-run failed a run with `NoReply` before these were retried).
pub const TRANSIENT_DBUS_ERRORS: &[&str] = &[
    "org.freedesktop.DBus.Error.NoReply",
    "org.freedesktop.DBus.Error.ServiceUnknown",
    "org.freedesktop.DBus.Error.NameHasNoOwner",
];

impl Error {
    /// Whether this error is one of [`TRANSIENT_DBUS_ERRORS`]: the same call, made again within
    /// its deadline, can succeed.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Dbus { message, .. }
            if TRANSIENT_DBUS_ERRORS.iter().any(|n| message.starts_with(n)))
    }
}

/// The `unit` value used in errors of manager-wide operations such as reload.
pub const MANAGER: &str = "user manager";
