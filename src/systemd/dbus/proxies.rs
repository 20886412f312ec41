//! Hand-written zbus `#[proxy]` traits for `org.freedesktop.systemd1.Manager`, `.Unit`,
//! `.Service`, `.Timer` and logind's `Manager` and `User`: only the members cyclix uses; names and
//! signatures from org.freedesktop.systemd1(5) and org.freedesktop.login1(5).

use zbus::proxy;
use zbus::zvariant::OwnedObjectPath;

#[proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1",
    gen_blocking = false
)]
pub(super) trait Manager {
    /// Asks the manager to send job and unit signals to this connection.
    fn subscribe(&self) -> zbus::Result<()>;

    /// `systemctl daemon-reload`; replies when the reload has finished.
    fn reload(&self) -> zbus::Result<()>;

    /// Queues a start job; returns the job's object path.
    fn start_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;

    /// Queues a stop job; returns the job's object path.
    fn stop_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;

    /// Creates and starts a transient unit `name` with `properties` and auxiliary transient
    /// units `aux` (`StartTransientUnit`, signature `ssa(sv)a(sa(sv))`); returns the job's
    /// object path.
    fn start_transient_unit(
        &self,
        name: &str,
        mode: &str,
        properties: &[(&str, zbus::zvariant::Value<'_>)],
        aux: &[(&str, &[(&str, zbus::zvariant::Value<'_>)])],
    ) -> zbus::Result<OwnedObjectPath>;

    /// Queues a restart job; returns the job's object path.
    fn restart_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;

    /// Clears the failed state of a unit.
    fn reset_failed_unit(&self, name: &str) -> zbus::Result<()>;

    /// The object path of a loaded unit; `NoSuchUnit` if it is not loaded.
    fn get_unit(&self, name: &str) -> zbus::Result<OwnedObjectPath>;

    /// Loads the unit if needed and returns its object path (also for units without a file).
    fn load_unit(&self, name: &str) -> zbus::Result<OwnedObjectPath>;

    /// Enables unit files; returns (`carries_install_info`, changes as (type, file, dest)).
    fn enable_unit_files(
        &self,
        files: &[&str],
        runtime: bool,
        force: bool,
    ) -> zbus::Result<(bool, Vec<(String, String, String)>)>;

    /// Disables unit files; returns the changes as (type, file, dest).
    fn disable_unit_files(
        &self,
        files: &[&str],
        runtime: bool,
    ) -> zbus::Result<Vec<(String, String, String)>>;

    /// The manager's version string, e.g. `"257.13-1~deb13u1"`.
    #[zbus(property)]
    fn version(&self) -> zbus::Result<String>;

    /// The manager's environment block, `NAME=VALUE` strings: what it passes to every unit it
    /// starts (`systemctl --user show-environment`; org.freedesktop.systemd1(5), `Environment`).
    #[zbus(property)]
    fn environment(&self) -> zbus::Result<Vec<String>>;

    /// Sent when a job finished: (id, job path, unit name, result).
    #[zbus(signal)]
    fn job_removed(
        &self,
        id: u32,
        job: zbus::zvariant::ObjectPath<'_>,
        unit: &str,
        result: &str,
    ) -> zbus::Result<()>;
}

#[proxy(
    interface = "org.freedesktop.systemd1.Unit",
    default_service = "org.freedesktop.systemd1",
    gen_blocking = false
)]
pub(super) trait Unit {
    #[zbus(property)]
    fn load_state(&self) -> zbus::Result<String>;

    #[zbus(property)]
    fn active_state(&self) -> zbus::Result<String>;

    #[zbus(property)]
    fn sub_state(&self) -> zbus::Result<String>;

    #[zbus(property)]
    fn need_daemon_reload(&self) -> zbus::Result<bool>;

    #[zbus(property)]
    fn condition_result(&self) -> zbus::Result<bool>;

    /// µs since the Unix epoch of the last condition check; 0 if never checked.
    #[zbus(property)]
    fn condition_timestamp(&self) -> zbus::Result<u64>;

    /// Adds this connection as a reference holder: the manager will not unload (garbage-collect)
    /// the unit, so its state after a job stays readable (as `systemd-run --wait` does).
    #[zbus(name = "Ref")]
    fn hold(&self) -> zbus::Result<()>;

    /// Drops a reference added by `Ref`.
    #[zbus(name = "Unref")]
    fn release(&self) -> zbus::Result<()>;

    /// The queued or running job: (id, path); `(0, "/")` if none.
    #[zbus(property)]
    fn job(&self) -> zbus::Result<(u32, OwnedObjectPath)>;

    /// 16 random bytes, new each time the unit is started (`$INVOCATION_ID`, systemd.exec(5));
    /// empty while the unit never ran.
    #[zbus(property, name = "InvocationID")]
    fn invocation_id(&self) -> zbus::Result<Vec<u8>>;
}

#[proxy(
    interface = "org.freedesktop.systemd1.Service",
    default_service = "org.freedesktop.systemd1",
    gen_blocking = false
)]
pub(super) trait Service {
    #[zbus(property)]
    fn result(&self) -> zbus::Result<String>;

    #[zbus(property)]
    fn exec_main_status(&self) -> zbus::Result<i32>;

    #[zbus(property)]
    fn exec_main_code(&self) -> zbus::Result<i32>;

    #[zbus(property, name = "Type")]
    fn service_type(&self) -> zbus::Result<String>;

    /// The main process's pid; 0 when there is none.
    #[zbus(property, name = "MainPID")]
    fn main_pid(&self) -> zbus::Result<u32>;
}

#[proxy(
    interface = "org.freedesktop.systemd1.Timer",
    default_service = "org.freedesktop.systemd1",
    gen_blocking = false
)]
pub(super) trait Timer {
    #[zbus(property)]
    fn result(&self) -> zbus::Result<String>;

    /// µs since the Unix epoch; 0 or `u64::MAX` if unset.
    #[zbus(property, name = "NextElapseUSecRealtime")]
    fn next_elapse_usec_realtime(&self) -> zbus::Result<u64>;

    /// µs on the monotonic clock; 0 or `u64::MAX` if unset.
    #[zbus(property, name = "NextElapseUSecMonotonic")]
    fn next_elapse_usec_monotonic(&self) -> zbus::Result<u64>;
}

#[proxy(
    interface = "org.freedesktop.login1.Manager",
    default_service = "org.freedesktop.login1",
    default_path = "/org/freedesktop/login1",
    gen_blocking = false
)]
pub(super) trait Login {
    /// The object path of the user `uid`; `NoSuchUser` if logind does not track it.
    fn get_user(&self, uid: u32) -> zbus::Result<OwnedObjectPath>;
}

#[proxy(
    interface = "org.freedesktop.login1.User",
    default_service = "org.freedesktop.login1",
    gen_blocking = false
)]
pub(super) trait LoginUser {
    /// Whether the user's manager runs without a session (`loginctl enable-linger`).
    #[zbus(property)]
    fn linger(&self) -> zbus::Result<bool>;
}
