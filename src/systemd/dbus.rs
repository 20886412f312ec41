//! The real [`UnitManager`]: the systemd user manager over D-Bus with zbus. The ONLY file in the
//! crate that imports zbus.
//!
//! Owns: hand-written `#[proxy]` traits for `org.freedesktop.systemd1.Manager`, `.Unit`,
//! `.Service` and `.Timer` (only the members cyclix uses; names and signatures from
//! org.freedesktop.systemd1(5)), [`ZbusUnitManager`], the mapping of zbus errors to
//! [`Error`], and the lock that serialises cyclix's own reloads against its jobs (B21).
//!
//! May not: read the environment (the caller passes the lock path), shell out to `systemctl`,
//! or let a zbus type escape its public API.
//!
//! Blocking API, bounded waits: the trait is synchronous. Each call runs zbus's async proxies
//! under `async_io::block_on`, because a job wait needs a deadline and zbus's blocking signal
//! iterator has none. Every await is raced against the call's deadline, and the connection's
//! method timeout is a second bound.
//!
//! How a job is waited for (B21, B22):
//! 1. take the lock (shared for jobs, exclusive for reload), bounded by the deadline;
//! 2. `Subscribe` (once per connection), then create the `JobRemoved` stream BEFORE calling
//!    `StartUnit`, so a job that finishes before the reply arrives is not missed;
//! 3. match `JobRemoved` on the job path the call returned, ignoring every other job;
//! 4. while waiting, every `poll_interval` (1 s) check the unit's `Job` property: a job that
//!    vanished without a signal (a concurrent reload on old systemd, systemd#5328) is settled
//!    from the unit's state instead of hanging;
//! 5. after the job, read the unit's state and decide with [`settle`].

use std::collections::BTreeMap;
use std::fs::{DirBuilder, File, OpenOptions};
use std::future::Future;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use async_io::Timer;
use futures_lite::{StreamExt, future};
use zbus::proxy::CacheProperties;
use zbus::zvariant::OwnedObjectPath;
use zbus::{Connection, proxy};

use super::{
    Error, ExecMainCode, JobMode, JobOutcome, JobResult, LoadState, MANAGER, NextElapse, Op,
    UnitFileChange, UnitManager, UnitStatus, settle, unit_type,
};
use crate::systemd::ActiveState;

/// Default bound of a single D-Bus call and of operations without a caller-given deadline:
/// 25 s, the libdbus default reply timeout.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(25);

/// How often a job wait checks whether the job vanished without a `JobRemoved` signal: 1 s.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Extra time after a job deadline for reading the unit's state before reporting
/// [`Error::Deadline`]: 500 ms. A job wait returns no later than its timeout plus this.
pub const FALLBACK_READ_BUDGET: Duration = Duration::from_millis(500);

/// The `state` of a [`Error::Deadline`] hit before the unit's state could be read.
const STATE_NOT_READ: &str = "unknown (not read: the deadline passed first)";

/// The D-Bus error name systemd uses for unknown or unloaded units.
const NO_SUCH_UNIT: &str = "org.freedesktop.systemd1.NoSuchUnit";
/// The D-Bus error name for a second `Subscribe` on the same connection.
const ALREADY_SUBSCRIBED: &str = "org.freedesktop.systemd1.AlreadySubscribed";

#[proxy(
    interface = "org.freedesktop.systemd1.Manager",
    default_service = "org.freedesktop.systemd1",
    default_path = "/org/freedesktop/systemd1",
    gen_blocking = false
)]
trait Manager {
    /// Asks the manager to send job and unit signals to this connection.
    fn subscribe(&self) -> zbus::Result<()>;

    /// `systemctl daemon-reload`; replies when the reload has finished.
    fn reload(&self) -> zbus::Result<()>;

    /// Queues a start job; returns the job's object path.
    fn start_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;

    /// Queues a stop job; returns the job's object path.
    fn stop_unit(&self, name: &str, mode: &str) -> zbus::Result<OwnedObjectPath>;

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
trait Unit {
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
}

#[proxy(
    interface = "org.freedesktop.systemd1.Service",
    default_service = "org.freedesktop.systemd1",
    gen_blocking = false
)]
trait Service {
    #[zbus(property)]
    fn result(&self) -> zbus::Result<String>;

    #[zbus(property)]
    fn exec_main_status(&self) -> zbus::Result<i32>;

    #[zbus(property)]
    fn exec_main_code(&self) -> zbus::Result<i32>;

    #[zbus(property, name = "Type")]
    fn service_type(&self) -> zbus::Result<String>;
}

#[proxy(
    interface = "org.freedesktop.systemd1.Timer",
    default_service = "org.freedesktop.systemd1",
    gen_blocking = false
)]
trait Timer {
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
trait Login {
    /// The object path of the user `uid`; `NoSuchUser` if logind does not track it.
    fn get_user(&self, uid: u32) -> zbus::Result<OwnedObjectPath>;
}

#[proxy(
    interface = "org.freedesktop.login1.User",
    default_service = "org.freedesktop.login1",
    gen_blocking = false
)]
trait LoginUser {
    /// Whether the user's manager runs without a session (`loginctl enable-linger`).
    #[zbus(property)]
    fn linger(&self) -> zbus::Result<bool>;
}

/// The D-Bus error name logind uses for a user it does not track.
const NO_SUCH_USER: &str = "org.freedesktop.login1.NoSuchUser";

/// The in-process half of the reload/job lock, per lock file: how many jobs hold it and whether
/// a reload does. (`flock` alone would also exclude threads, since each acquisition opens its own
/// file description; the gate keeps threads from polling the file against each other.)
static GATES: Mutex<BTreeMap<PathBuf, GateCount>> = Mutex::new(BTreeMap::new());

#[derive(Debug, Default)]
struct GateCount {
    jobs: usize,
    reload: bool,
}

/// Who may hold the lock together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Jobs: any number at once.
    Shared,
    /// Reload: alone.
    Exclusive,
}

/// A held in-process gate; released on drop.
struct Gate {
    path: PathBuf,
    access: Access,
}

fn gates() -> MutexGuard<'static, BTreeMap<PathBuf, GateCount>> {
    // The counts stay consistent even if a holder panicked: they are updated in one step.
    GATES.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Gate {
    fn try_take(path: &Path, access: Access) -> Option<Gate> {
        let mut gates = gates();
        let count = gates.entry(path.to_owned()).or_default();
        let free = match access {
            Access::Shared => !count.reload,
            Access::Exclusive => !count.reload && count.jobs == 0,
        };
        if !free {
            return None;
        }
        match access {
            Access::Shared => count.jobs += 1,
            Access::Exclusive => count.reload = true,
        }
        Some(Gate {
            path: path.to_owned(),
            access,
        })
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let mut gates = gates();
        if let Some(count) = gates.get_mut(&self.path) {
            match self.access {
                Access::Shared => count.jobs = count.jobs.saturating_sub(1),
                Access::Exclusive => count.reload = false,
            }
            if count.jobs == 0 && !count.reload {
                gates.remove(&self.path);
            }
        }
    }
}

/// A held lock: the in-process gate plus the `flock` on the lock file (released when the file
/// closes).
struct LockGuard {
    _file: File,
    _gate: Gate,
}

/// Why the lock could not be taken.
enum LockFailure {
    /// The deadline passed while another holder kept it.
    Busy,
    /// The lock file could not be created or locked.
    Io(std::io::Error),
}

/// Takes the process gate and the `flock` on `path` (created mode 0600, its directory mode 0700),
/// polling until `deadline` (2 ms, doubling to 50 ms between attempts).
fn acquire_lock(path: &Path, access: Access, deadline: Instant) -> Result<LockGuard, LockFailure> {
    if let Some(dir) = path.parent() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(LockFailure::Io)?;
    }
    let mut pause = Duration::from_millis(2);
    let wait = |pause: &mut Duration| -> Result<(), LockFailure> {
        let now = Instant::now();
        if now >= deadline {
            return Err(LockFailure::Busy);
        }
        std::thread::sleep((*pause).min(deadline - now));
        *pause = (*pause * 2).min(Duration::from_millis(50));
        Ok(())
    };
    let gate = loop {
        match Gate::try_take(path, access) {
            Some(gate) => break gate,
            None => wait(&mut pause)?,
        }
    };
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(LockFailure::Io)?;
    loop {
        let attempt = match access {
            Access::Shared => file.try_lock_shared(),
            Access::Exclusive => file.try_lock(),
        };
        match attempt {
            Ok(()) => {
                return Ok(LockGuard {
                    _file: file,
                    _gate: gate,
                });
            }
            Err(std::fs::TryLockError::WouldBlock) => wait(&mut pause)?,
            Err(std::fs::TryLockError::Error(err)) => return Err(LockFailure::Io(err)),
        }
    }
}

/// Races `fut` against `deadline`; `None` if the deadline came first.
async fn within<T>(deadline: Instant, fut: impl Future<Output = T>) -> Option<T> {
    future::or(async { Some(fut.await) }, async {
        Timer::at(deadline).await;
        None
    })
    .await
}

/// The context of one operation: what errors name, and its deadline.
#[derive(Clone, Copy)]
struct Call<'a> {
    op: Op,
    unit: &'a str,
    started: Instant,
    deadline: Instant,
    address: &'a str,
}

impl Call<'_> {
    fn after_ms(&self) -> u64 {
        u64::try_from(
            self.deadline
                .saturating_duration_since(self.started)
                .as_millis(),
        )
        .unwrap_or(u64::MAX)
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn deadline_error(&self, phase: &'static str, state: String) -> Error {
        Error::Deadline {
            unit: self.unit.to_owned(),
            op: self.op,
            phase,
            after_ms: self.after_ms(),
            state,
        }
    }

    /// Maps a zbus error to the seam's error, naming this call's op and unit.
    fn map_err(&self, err: zbus::Error) -> Error {
        match err {
            zbus::Error::MethodError(name, _, _) if name.as_str() == NO_SUCH_UNIT => {
                Error::NoSuchUnit {
                    unit: self.unit.to_owned(),
                }
            }
            zbus::Error::MethodError(name, message, _) => Error::Dbus {
                op: self.op,
                unit: self.unit.to_owned(),
                message: match message {
                    Some(message) => format!("{name}: {message}"),
                    None => name.to_string(),
                },
            },
            zbus::Error::InputOutput(io) if io.kind() == std::io::ErrorKind::TimedOut => {
                self.deadline_error("waiting for a D-Bus reply", STATE_NOT_READ.to_owned())
            }
            zbus::Error::InputOutput(io) => Error::BusUnavailable {
                address: self.address.to_owned(),
                message: format!("connection lost: {io}"),
            },
            other => Error::Dbus {
                op: self.op,
                unit: self.unit.to_owned(),
                message: other.to_string(),
            },
        }
    }

    /// Awaits a D-Bus call within this call's deadline.
    async fn run<T>(
        &self,
        phase: &'static str,
        fut: impl Future<Output = zbus::Result<T>>,
    ) -> Result<T, Error> {
        match within(self.deadline, fut).await {
            Some(result) => result.map_err(|err| self.map_err(err)),
            None => Err(self.deadline_error(phase, STATE_NOT_READ.to_owned())),
        }
    }
}

/// [`UnitManager`] over a D-Bus connection to the systemd user manager.
///
/// One connection per value; cheap to share by reference across threads (`Sync`). The
/// reload/job lock is process-wide plus a `flock` on the lock file given to the constructor
/// (conventionally `$XDG_RUNTIME_DIR/cyclix/systemd.lock`), so two cyclix processes of one user
/// serialise too.
pub struct ZbusUnitManager {
    conn: Connection,
    address: String,
    lock_path: PathBuf,
    call_timeout: Duration,
    poll_interval: Duration,
    subscribed: AtomicBool,
    /// The system bus (logind, the system manager), connected on first use.
    system: Mutex<Option<Connection>>,
}

impl std::fmt::Debug for ZbusUnitManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZbusUnitManager")
            .field("address", &self.address)
            .field("lock_path", &self.lock_path)
            .field("call_timeout", &self.call_timeout)
            .finish_non_exhaustive()
    }
}

impl ZbusUnitManager {
    /// Connects to the session bus of the user manager (zbus reads `DBUS_SESSION_BUS_ADDRESS`,
    /// falling back to `$XDG_RUNTIME_DIR/bus`). `lock_path` is the reload/job lock file.
    /// The connect is bounded by [`DEFAULT_CALL_TIMEOUT`].
    ///
    /// # Errors
    /// [`Error::BusUnavailable`] if the bus cannot be reached or the handshake fails.
    pub fn session(lock_path: PathBuf) -> Result<Self, Error> {
        let address = "the session bus ($DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus)";
        Self::connect(zbus::connection::Builder::session(), address, lock_path)
    }

    /// Connects to the SYSTEM bus (`$DBUS_SYSTEM_BUS_ADDRESS`, else
    /// `/run/dbus/system_bus_socket`). The manager methods then talk to the system manager
    /// (PID 1): cyclix uses such a value only for the read-only system-bus facts
    /// ([`UnitManager::user_linger`], [`UnitManager::system_unit_active_state`]) when the user
    /// bus is unreachable (`cyclix check`). The connect is bounded by [`DEFAULT_CALL_TIMEOUT`].
    ///
    /// # Errors
    /// [`Error::BusUnavailable`] if the system bus cannot be reached.
    pub fn system(lock_path: PathBuf) -> Result<Self, Error> {
        let address = "the system bus ($DBUS_SYSTEM_BUS_ADDRESS, else /run/dbus/system_bus_socket)";
        Self::connect(zbus::connection::Builder::system(), address, lock_path)
    }

    /// Connects to the bus at `address` (a D-Bus address such as
    /// `unix:path=/run/user/1000/bus`). `lock_path` is the reload/job lock file.
    ///
    /// # Errors
    /// [`Error::BusUnavailable`] if the address is invalid or the bus cannot be reached.
    pub fn at_address(address: &str, lock_path: PathBuf) -> Result<Self, Error> {
        Self::connect(
            zbus::connection::Builder::address(address),
            address,
            lock_path,
        )
    }

    fn connect(
        builder: zbus::Result<zbus::connection::Builder<'_>>,
        address: &str,
        lock_path: PathBuf,
    ) -> Result<Self, Error> {
        let unavailable = |message: String| Error::BusUnavailable {
            address: address.to_owned(),
            message,
        };
        let builder = builder
            .map_err(|err| unavailable(err.to_string()))?
            .method_timeout(DEFAULT_CALL_TIMEOUT);
        let deadline = Instant::now() + DEFAULT_CALL_TIMEOUT;
        let conn = async_io::block_on(within(deadline, builder.build()))
            .ok_or_else(|| {
                unavailable(format!(
                    "no answer within {} ms",
                    DEFAULT_CALL_TIMEOUT.as_millis()
                ))
            })?
            .map_err(|err| unavailable(err.to_string()))?;
        Ok(Self::from_connection(conn, address.to_owned(), lock_path))
    }

    fn from_connection(conn: Connection, address: String, lock_path: PathBuf) -> Self {
        ZbusUnitManager {
            conn,
            address,
            lock_path,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            poll_interval: DEFAULT_POLL_INTERVAL,
            subscribed: AtomicBool::new(false),
            system: Mutex::new(None),
        }
    }

    /// Sets the bound of calls without a caller-given deadline (reload, status reads, ...).
    #[must_use]
    pub fn with_call_timeout(mut self, call_timeout: Duration) -> Self {
        self.call_timeout = call_timeout;
        self
    }

    /// The lock file this manager serialises reloads and jobs on.
    #[must_use]
    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }

    /// The system bus connection (`$DBUS_SYSTEM_BUS_ADDRESS`, else
    /// `/run/dbus/system_bus_socket`), made on first use within `call`'s deadline and kept.
    fn system_bus(&self, call: &Call<'_>) -> Result<Connection, Error> {
        let mut slot = self.system.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let unavailable = |message: String| Error::BusUnavailable {
            address: "the system bus ($DBUS_SYSTEM_BUS_ADDRESS, else /run/dbus/system_bus_socket)"
                .to_owned(),
            message,
        };
        let builder = zbus::connection::Builder::system()
            .map_err(|err| unavailable(err.to_string()))?
            .method_timeout(self.call_timeout);
        let conn = async_io::block_on(within(call.deadline, builder.build()))
            .ok_or_else(|| unavailable(format!("no answer within {} ms", call.after_ms())))?
            .map_err(|err| unavailable(err.to_string()))?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    fn call<'a>(&'a self, op: Op, unit: &'a str, timeout: Duration) -> Call<'a> {
        let started = Instant::now();
        Call {
            op,
            unit,
            started,
            deadline: started + timeout,
            address: &self.address,
        }
    }

    fn lock(&self, call: &Call<'_>, access: Access) -> Result<LockGuard, Error> {
        acquire_lock(&self.lock_path, access, call.deadline).map_err(|failure| match failure {
            LockFailure::Busy => call.deadline_error(
                "waiting for the cyclix systemd lock (another cyclix reload or job holds it)",
                STATE_NOT_READ.to_owned(),
            ),
            LockFailure::Io(err) => Error::Lock {
                path: self.lock_path.display().to_string(),
                message: err.to_string(),
            },
        })
    }

    async fn manager(&self, call: &Call<'_>) -> Result<ManagerProxy<'_>, Error> {
        call.run(
            "creating the manager proxy",
            ManagerProxy::builder(&self.conn)
                .cache_properties(CacheProperties::No)
                .build(),
        )
        .await
    }

    async fn subscribe(&self, call: &Call<'_>, manager: &ManagerProxy<'_>) -> Result<(), Error> {
        if self.subscribed.load(Ordering::Acquire) {
            return Ok(());
        }
        match within(call.deadline, manager.subscribe()).await {
            None => {
                Err(call
                    .deadline_error("subscribing to manager signals", STATE_NOT_READ.to_owned()))
            }
            Some(Ok(())) => {
                self.subscribed.store(true, Ordering::Release);
                Ok(())
            }
            Some(Err(zbus::Error::MethodError(name, _, _)))
                if name.as_str() == ALREADY_SUBSCRIBED =>
            {
                self.subscribed.store(true, Ordering::Release);
                Ok(())
            }
            Some(Err(err)) => Err(call.map_err(err)),
        }
    }

    /// Reads the unit's state at `path`.
    async fn read_status_at(
        &self,
        call: &Call<'_>,
        path: OwnedObjectPath,
    ) -> Result<UnitStatus, Error> {
        const PHASE: &str = "reading unit properties";
        let unit = call.run(PHASE, self.unit_proxy(path.clone())).await?;
        // The properties are read concurrently: each Get is a round trip to the manager, and
        // ten in a row were most of a job's wall time (bench/run, issue 7).
        let ((load, active), ((sub, reload), ((cond, cond_ts), job))) = Box::pin(future::zip(
            future::zip(
                call.run(PHASE, unit.load_state()),
                call.run(PHASE, unit.active_state()),
            ),
            future::zip(
                future::zip(
                    call.run(PHASE, unit.sub_state()),
                    call.run(PHASE, unit.need_daemon_reload()),
                ),
                future::zip(
                    future::zip(
                        call.run(PHASE, unit.condition_result()),
                        call.run(PHASE, unit.condition_timestamp()),
                    ),
                    call.run(PHASE, unit.job()),
                ),
            ),
        ))
        .await;
        let mut status = UnitStatus {
            active_state: ActiveState::parse(&active?),
            sub_state: sub?,
            need_daemon_reload: reload?,
            condition_failed: !cond? && cond_ts? != 0,
            job_pending: job?.0 != 0,
            ..UnitStatus::not_found()
        };
        status.load_state = LoadState::parse(&load?);
        if status.load_state != LoadState::Loaded {
            return Ok(status);
        }
        if unit_type(call.unit) == Some("service") {
            let service = call.run(PHASE, self.service_proxy(path)).await?;
            let ((result, code), (main_status, service_type)) = Box::pin(future::zip(
                future::zip(
                    call.run(PHASE, service.result()),
                    call.run(PHASE, service.exec_main_code()),
                ),
                future::zip(
                    call.run(PHASE, service.exec_main_status()),
                    call.run(PHASE, service.service_type()),
                ),
            ))
            .await;
            status.result = Some(result?);
            let code = ExecMainCode::from_raw(code?);
            status.exec_main_code = code;
            if code.is_some() {
                status.exec_main_status = Some(main_status?);
            }
            status.service_type = Some(service_type?);
        } else if unit_type(call.unit) == Some("timer") {
            let timer = call.run(PHASE, self.timer_proxy(path)).await?;
            status.result = Some(call.run(PHASE, timer.result()).await?);
        }
        Ok(status)
    }

    async fn timer_proxy(&self, path: OwnedObjectPath) -> zbus::Result<TimerProxy<'_>> {
        TimerProxy::builder(&self.conn)
            .path(path)?
            .cache_properties(CacheProperties::No)
            .build()
            .await
    }

    async fn unit_proxy(&self, path: OwnedObjectPath) -> zbus::Result<UnitProxy<'_>> {
        UnitProxy::builder(&self.conn)
            .path(path)?
            .cache_properties(CacheProperties::No)
            .build()
            .await
    }

    async fn service_proxy(&self, path: OwnedObjectPath) -> zbus::Result<ServiceProxy<'_>> {
        ServiceProxy::builder(&self.conn)
            .path(path)?
            .cache_properties(CacheProperties::No)
            .build()
            .await
    }

    /// Loads the unit and reads its state.
    async fn read_status(&self, call: &Call<'_>) -> Result<UnitStatus, Error> {
        let manager = self.manager(call).await?;
        let path = call
            .run("loading the unit", manager.load_unit(call.unit))
            .await?;
        self.read_status_at(call, path).await
    }

    /// Whether `job` is still the unit's queued or running job. A unit that is no longer
    /// loaded has no job.
    async fn job_still_queued(
        &self,
        call: &Call<'_>,
        manager: &ManagerProxy<'_>,
        job: &OwnedObjectPath,
    ) -> Result<bool, Error> {
        let path = match call
            .run("looking up the unit", manager.get_unit(call.unit))
            .await
        {
            Ok(path) => path,
            Err(Error::NoSuchUnit { .. }) => return Ok(false),
            Err(err) => return Err(err),
        };
        let unit = call
            .run("reading the unit's job", self.unit_proxy(path))
            .await?;
        let (_, current) = call.run("reading the unit's job", unit.job()).await?;
        Ok(current == *job)
    }

    /// Waits for `JobRemoved` of `job`. `Ok(None)`: the job vanished without a signal.
    async fn wait_for_job(
        &self,
        call: &Call<'_>,
        manager: &ManagerProxy<'_>,
        removed: &mut JobRemovedStream,
        job: &OwnedObjectPath,
    ) -> Result<Option<JobResult>, Error> {
        loop {
            let now = Instant::now();
            if now >= call.deadline {
                break;
            }
            let tick = (now + self.poll_interval).min(call.deadline);
            match within(tick, removed.next()).await {
                Some(Some(signal)) => {
                    let args = signal.args().map_err(|err| call.map_err(err))?;
                    if *args.job() == **job {
                        return Ok(Some(JobResult::parse(args.result())));
                    }
                    tracing::trace!(other = %args.job(), unit = args.unit(), "JobRemoved of another job");
                }
                Some(None) => {
                    return Err(Error::BusUnavailable {
                        address: self.address.clone(),
                        message: "connection closed while waiting for the job".to_owned(),
                    });
                }
                None => {
                    if Instant::now() < call.deadline
                        && !self.job_still_queued(call, manager, job).await?
                    {
                        tracing::warn!(%job, "job vanished without JobRemoved; reading unit state");
                        return Ok(None);
                    }
                }
            }
        }
        // Deadline: look once more, with a small budget, before giving up (B21).
        let fallback = Call {
            deadline: Instant::now() + FALLBACK_READ_BUDGET,
            ..*call
        };
        match self.job_still_queued(&fallback, manager, job).await {
            Ok(false) => Ok(None),
            Ok(true) => {
                let state = match self.read_status(&fallback).await {
                    Ok(status) => format!("{} with its job still queued", status.summary()),
                    Err(err) => format!("unknown ({err})"),
                };
                Err(call.deadline_error("waiting for the job to finish", state))
            }
            Err(err) => {
                Err(call
                    .deadline_error("waiting for the job to finish", format!("unknown ({err})")))
            }
        }
    }

    /// Queues a start/stop/restart job and waits for it (steps 2–5 of the module docs).
    async fn job(&self, call: &Call<'_>, mode: JobMode) -> Result<JobOutcome, Error> {
        let manager = self.manager(call).await?;
        self.subscribe(call, &manager).await?;
        // The stream exists before the job is queued (B21a).
        let mut removed = call
            .run("subscribing to JobRemoved", manager.receive_job_removed())
            .await?;
        // Hold a reference so the manager does not unload the unit the moment the job ends
        // (an inactive oneshot is garbage-collected at once, and a freshly loaded copy reads
        // Result=success, ExecMainCode=0, ConditionResult=no: seen on systemd 257).
        let path = call
            .run("loading the unit", manager.load_unit(call.unit))
            .await?;
        let unit = call
            .run("loading the unit", self.unit_proxy(path.clone()))
            .await?;
        let held = match call.run("referencing the unit", unit.hold()).await {
            Ok(()) => true,
            Err(err) => {
                tracing::warn!(%err, "cannot reference the unit; its state may be read after unloading");
                false
            }
        };
        let outcome = self
            .queue_and_wait(call, mode, &manager, &mut removed, path)
            .await;
        if held {
            let release = Instant::now() + FALLBACK_READ_BUDGET;
            if let Some(Err(err)) = within(release, unit.release()).await {
                tracing::debug!(%err, "releasing the unit reference");
            }
        }
        outcome
    }

    async fn queue_and_wait(
        &self,
        call: &Call<'_>,
        mode: JobMode,
        manager: &ManagerProxy<'_>,
        removed: &mut JobRemovedStream,
        path: OwnedObjectPath,
    ) -> Result<JobOutcome, Error> {
        let mode = mode.as_str();
        let job = {
            // cyclix's reloads are serialised against QUEUEING a job, not against waiting for
            // it: holding the lock through a long wait deadlocked `cyclix start` against the
            // run it started (the run reloads). A reload while a job runs is safe: systemd
            // replays JobRemoved after a reload (systemd#8803) and `wait_for_job` also polls
            // `Unit.Job` every second (B21).
            let _lock = self.lock(call, Access::Shared)?;
            call.run("queueing the job", async {
                match call.op {
                    Op::Start => manager.start_unit(call.unit, mode).await,
                    Op::Stop => manager.stop_unit(call.unit, mode).await,
                    _ => manager.restart_unit(call.unit, mode).await,
                }
            })
            .await?
        };
        tracing::debug!(%job, "job queued");
        let job_result = self.wait_for_job(call, manager, removed, &job).await?;
        // The state read gets at least the fallback budget, even if the job took all the time.
        let read = Call {
            deadline: call.deadline.max(Instant::now() + FALLBACK_READ_BUDGET),
            ..*call
        };
        let status = self.read_status_at(&read, path).await?;
        let settled = settle(call.unit, call.op, job_result.as_ref(), &status)?;
        tracing::debug!(?settled, elapsed_ms = call.elapsed_ms(), "job finished");
        Ok(JobOutcome {
            unit: call.unit.to_owned(),
            op: call.op,
            job_result,
            settled,
            status,
            elapsed_ms: call.elapsed_ms(),
        })
    }

    fn run_job(
        &self,
        op: Op,
        unit: &str,
        mode: JobMode,
        timeout: Duration,
    ) -> Result<JobOutcome, Error> {
        let call = self.call(op, unit, timeout);
        async_io::block_on(self.job(&call, mode))
    }

    fn unit_file_changes(changes: Vec<(String, String, String)>) -> Vec<UnitFileChange> {
        changes
            .into_iter()
            .map(|(kind, path, destination)| UnitFileChange {
                kind,
                path,
                destination,
            })
            .collect()
    }
}

impl UnitManager for ZbusUnitManager {
    #[tracing::instrument(skip_all)]
    fn reload(&self) -> Result<(), Error> {
        let call = self.call(Op::Reload, MANAGER, self.call_timeout);
        let _lock = self.lock(&call, Access::Exclusive)?;
        async_io::block_on(async {
            let manager = self.manager(&call).await?;
            call.run("waiting for the reload to finish", manager.reload())
                .await
        })?;
        tracing::debug!(elapsed_ms = call.elapsed_ms(), "reloaded");
        Ok(())
    }

    #[tracing::instrument(skip_all, fields(unit = %unit, mode = %mode, timeout_ms = timeout.as_millis()))]
    fn start(&self, unit: &str, mode: JobMode, timeout: Duration) -> Result<JobOutcome, Error> {
        self.run_job(Op::Start, unit, mode, timeout)
    }

    #[tracing::instrument(skip_all, fields(unit = %unit, mode = %mode))]
    fn start_no_block(&self, unit: &str, mode: JobMode) -> Result<String, Error> {
        let call = self.call(Op::Start, unit, self.call_timeout);
        let _lock = self.lock(&call, Access::Shared)?;
        async_io::block_on(async {
            let manager = self.manager(&call).await?;
            let job = call
                .run("queueing the job", manager.start_unit(unit, mode.as_str()))
                .await?;
            tracing::debug!(%job, "job queued, not waited for");
            Ok(job.to_string())
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit, mode = %mode, timeout_ms = timeout.as_millis()))]
    fn stop(&self, unit: &str, mode: JobMode, timeout: Duration) -> Result<JobOutcome, Error> {
        self.run_job(Op::Stop, unit, mode, timeout)
    }

    #[tracing::instrument(skip_all, fields(unit = %unit, mode = %mode, timeout_ms = timeout.as_millis()))]
    fn restart(&self, unit: &str, mode: JobMode, timeout: Duration) -> Result<JobOutcome, Error> {
        self.run_job(Op::Restart, unit, mode, timeout)
    }

    #[tracing::instrument(skip_all, fields(unit = %unit))]
    fn reset_failed(&self, unit: &str) -> Result<(), Error> {
        let call = self.call(Op::ResetFailed, unit, self.call_timeout);
        async_io::block_on(async {
            let manager = self.manager(&call).await?;
            call.run(
                "resetting the failed state",
                manager.reset_failed_unit(unit),
            )
            .await
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit))]
    fn unit_status(&self, unit: &str) -> Result<UnitStatus, Error> {
        let call = self.call(Op::Status, unit, self.call_timeout);
        async_io::block_on(self.read_status(&call))
    }

    #[tracing::instrument(skip_all, fields(unit = %unit))]
    fn timer_next_elapse(&self, unit: &str) -> Result<NextElapse, Error> {
        let call = self.call(Op::TimerNextElapse, unit, self.call_timeout);
        async_io::block_on(async {
            let manager = self.manager(&call).await?;
            let path = call
                .run("loading the timer", manager.load_unit(unit))
                .await?;
            let timer = call
                .run("reading timer properties", self.timer_proxy(path.clone()))
                .await?;
            let unit_proxy = call
                .run("reading timer properties", self.unit_proxy(path))
                .await?;
            let load_state = call
                .run("reading timer properties", unit_proxy.load_state())
                .await?;
            if LoadState::parse(&load_state) != LoadState::Loaded {
                return Err(Error::NoSuchUnit {
                    unit: unit.to_owned(),
                });
            }
            let realtime = call
                .run(
                    "reading timer properties",
                    timer.next_elapse_usec_realtime(),
                )
                .await?;
            let monotonic = call
                .run(
                    "reading timer properties",
                    timer.next_elapse_usec_monotonic(),
                )
                .await?;
            Ok(NextElapse::from_raw(realtime, monotonic))
        })
    }

    #[tracing::instrument(skip_all, fields(units = ?units))]
    fn enable_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, Error> {
        let names = units.join(" ");
        let call = self.call(Op::Enable, &names, self.call_timeout);
        let (_, changes) = async_io::block_on(async {
            let manager = self.manager(&call).await?;
            call.run(
                "enabling unit files",
                manager.enable_unit_files(units, false, true),
            )
            .await
        })?;
        self.reload()?;
        Ok(Self::unit_file_changes(changes))
    }

    #[tracing::instrument(skip_all, fields(units = ?units))]
    fn disable_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, Error> {
        let names = units.join(" ");
        let call = self.call(Op::Disable, &names, self.call_timeout);
        let changes = async_io::block_on(async {
            let manager = self.manager(&call).await?;
            call.run(
                "disabling unit files",
                manager.disable_unit_files(units, false),
            )
            .await
        })?;
        self.reload()?;
        Ok(Self::unit_file_changes(changes))
    }

    #[tracing::instrument(skip_all, fields(unit = %unit))]
    fn load_unit(&self, unit: &str) -> Result<LoadState, Error> {
        let call = self.call(Op::LoadUnit, unit, self.call_timeout);
        async_io::block_on(async {
            let manager = self.manager(&call).await?;
            let path = call
                .run("loading the unit", manager.load_unit(unit))
                .await?;
            let proxy = call
                .run("reading the load state", self.unit_proxy(path))
                .await?;
            let state = call
                .run("reading the load state", proxy.load_state())
                .await?;
            Ok(LoadState::parse(&state))
        })
    }

    #[tracing::instrument(skip_all)]
    fn manager_version(&self) -> Result<String, Error> {
        let call = self.call(Op::Version, MANAGER, self.call_timeout);
        async_io::block_on(async {
            let manager = self.manager(&call).await?;
            call.run("reading the manager version", manager.version())
                .await
        })
    }

    #[tracing::instrument(skip_all, fields(uid = uid))]
    fn user_linger(&self, uid: u32) -> Result<bool, Error> {
        let unit = format!("login1 user {uid}");
        let call = self.call(Op::Linger, &unit, self.call_timeout);
        let conn = self.system_bus(&call)?;
        async_io::block_on(async {
            let login = call
                .run(
                    "creating the logind proxy",
                    LoginProxy::builder(&conn)
                        .cache_properties(CacheProperties::No)
                        .build(),
                )
                .await?;
            let path = match within(call.deadline, login.get_user(uid)).await {
                None => {
                    return Err(call
                        .deadline_error("asking logind for the user", STATE_NOT_READ.to_owned()));
                }
                Some(Err(zbus::Error::MethodError(name, _, _)))
                    if name.as_str() == NO_SUCH_USER =>
                {
                    return Ok(false);
                }
                Some(result) => result.map_err(|err| call.map_err(err))?,
            };
            let user = call
                .run("creating the logind user proxy", async {
                    LoginUserProxy::builder(&conn)
                        .path(path)?
                        .cache_properties(CacheProperties::No)
                        .build()
                        .await
                })
                .await?;
            call.run("reading Linger", user.linger()).await
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit))]
    fn system_unit_active_state(&self, unit: &str) -> Result<ActiveState, Error> {
        let call = self.call(Op::SystemStatus, unit, self.call_timeout);
        let conn = self.system_bus(&call)?;
        async_io::block_on(async {
            let manager = call
                .run(
                    "creating the system manager proxy",
                    ManagerProxy::builder(&conn)
                        .cache_properties(CacheProperties::No)
                        .build(),
                )
                .await?;
            // GetUnit, not LoadUnit: a unit nobody pulled in is not loaded, i.e. inactive.
            let path = match call
                .run("looking the unit up", manager.get_unit(unit))
                .await
            {
                Ok(path) => path,
                Err(Error::NoSuchUnit { .. }) => return Ok(ActiveState::Inactive),
                Err(err) => return Err(err),
            };
            let proxy = call
                .run("reading the unit state", async {
                    UnitProxy::builder(&conn)
                        .path(path)?
                        .cache_properties(CacheProperties::No)
                        .build()
                        .await
                })
                .await?;
            let state = call
                .run("reading the unit state", proxy.active_state())
                .await?;
            Ok(ActiveState::parse(&state))
        })
    }
}

/// Tier (b) of STYLE.md: the real proxy code above against an in-process fake
/// `org.freedesktop.systemd1` served with zbus `#[interface]` over a p2p `UnixStream::pair()`.
#[cfg(test)]
#[allow(clippy::unused_self)] // fake properties with constant values keep the D-Bus shape
mod tests {
    use std::collections::HashMap;
    use std::fmt::Write as _;
    use std::os::unix::net::UnixStream;
    use std::sync::{Arc, Mutex, MutexGuard};

    use zbus::object_server::SignalEmitter;
    use zbus::zvariant::ObjectPath;
    use zbus::{connection, interface};

    use super::*;
    use crate::systemd::Settled;

    /// The unit's state after its job.
    #[derive(Debug, Clone)]
    struct After {
        active: &'static str,
        sub: &'static str,
        result: &'static str,
        condition_result: bool,
        main_code: i32,
        main_status: i32,
    }

    const RUNNING: After = After {
        active: "active",
        sub: "running",
        result: "success",
        condition_result: true,
        main_code: 0,
        main_status: 0,
    };

    /// How the fake answers a job for one unit.
    #[derive(Debug, Clone)]
    struct Script {
        /// `JobRemoved` result; `None`: never sent.
        result: Option<&'static str>,
        /// Send `JobRemoved` before the method reply (the B21a race).
        before_reply: bool,
        /// First send `JobRemoved` for a different job path.
        decoy_first: bool,
        /// Without a signal: still clear the unit's `Job` after `delay` (a signal lost in a
        /// reload, B21b).
        vanish: bool,
        /// Delay between the reply and the job's end.
        delay: Duration,
        after: After,
        service_type: &'static str,
    }

    impl Script {
        fn done(after: After) -> Self {
            Script {
                result: Some("done"),
                before_reply: false,
                decoy_first: false,
                vanish: false,
                delay: Duration::from_millis(30),
                after,
                service_type: "simple",
            }
        }
    }

    struct FakeUnit {
        script: Script,
        active: &'static str,
        sub: &'static str,
        result: &'static str,
        condition_result: bool,
        condition_timestamp: u64,
        main_code: i32,
        main_status: i32,
        job: (u32, OwnedObjectPath),
    }

    #[derive(Default)]
    struct World {
        units: HashMap<String, FakeUnit>,
        next_job: u32,
        /// Method calls in arrival order, e.g. `StartUnit a.service` or `JobRemoved 1 done`.
        log: Vec<String>,
        refs: i32,
    }

    type Shared = Arc<Mutex<World>>;

    fn lock(world: &Shared) -> MutexGuard<'_, World> {
        world.lock().expect("fake world lock")
    }

    /// systemd's bus label escaping: `a.service` → `a_2eservice`.
    fn unit_path(name: &str) -> OwnedObjectPath {
        let mut label = String::new();
        for byte in name.bytes() {
            if byte.is_ascii_alphanumeric() {
                label.push(char::from(byte));
            } else {
                write!(label, "_{byte:02x}").expect("writing to a String cannot fail");
            }
        }
        OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/unit/{label}"))
            .expect("valid path")
    }

    fn no_job() -> (u32, OwnedObjectPath) {
        (0, OwnedObjectPath::try_from("/").expect("valid path"))
    }

    #[derive(Debug, zbus::DBusError)]
    #[zbus(prefix = "org.freedesktop.systemd1")]
    enum SystemdError {
        #[zbus(error)]
        ZBus(zbus::Error),
        NoSuchUnit(String),
        AlreadySubscribed(String),
    }

    struct FakeManager {
        world: Shared,
        subscribed: Mutex<bool>,
    }

    /// Applies the scripted end state and clears the job, as systemd does before `JobRemoved`.
    fn finish(world: &Shared, unit: &str) {
        let mut world = lock(world);
        let unit = world.units.get_mut(unit).expect("known unit");
        let after = unit.script.after.clone();
        unit.active = after.active;
        unit.sub = after.sub;
        unit.result = after.result;
        unit.condition_result = after.condition_result;
        unit.condition_timestamp = 1_700_000_000_000_000;
        unit.main_code = after.main_code;
        unit.main_status = after.main_status;
        unit.job = no_job();
    }

    async fn emit(emitter: &SignalEmitter<'_>, world: &Shared, id: u32, unit: &str, result: &str) {
        let path = format!("/org/freedesktop/systemd1/job/{id}");
        lock(world).log.push(format!("JobRemoved {id} {result}"));
        FakeManager::job_removed(
            emitter,
            id,
            ObjectPath::try_from(path.as_str()).expect("valid path"),
            unit,
            result,
        )
        .await
        .expect("emit JobRemoved");
    }

    impl FakeManager {
        async fn queue(
            &self,
            method: &str,
            name: String,
            mode: &str,
            emitter: SignalEmitter<'_>,
        ) -> Result<OwnedObjectPath, SystemdError> {
            let (id, script) = {
                let mut world = lock(&self.world);
                world.log.push(format!("{method} {name} {mode}"));
                world.next_job += 1;
                let id = world.next_job;
                let unit = world
                    .units
                    .get_mut(&name)
                    .ok_or_else(|| SystemdError::NoSuchUnit(format!("Unit {name} not found.")))?;
                let path = OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/job/{id}"))
                    .expect("valid path");
                unit.job = (id, path);
                unit.active = "activating";
                unit.sub = "start";
                (id, unit.script.clone())
            };
            if script.decoy_first {
                emit(&emitter, &self.world, id + 1000, &name, "failed").await;
            }
            match script.result {
                Some(result) if script.before_reply => {
                    finish(&self.world, &name);
                    emit(&emitter, &self.world, id, &name, result).await;
                }
                Some(result) => {
                    let (world, emitter) = (self.world.clone(), emitter.to_owned());
                    std::thread::spawn(move || {
                        std::thread::sleep(script.delay);
                        finish(&world, &name);
                        async_io::block_on(emit(&emitter, &world, id, &name, result));
                    });
                }
                None if script.vanish => {
                    let world = self.world.clone();
                    std::thread::spawn(move || {
                        std::thread::sleep(script.delay);
                        finish(&world, &name);
                    });
                }
                None => {}
            }
            Ok(
                OwnedObjectPath::try_from(format!("/org/freedesktop/systemd1/job/{id}"))
                    .expect("valid path"),
            )
        }

        fn known(&self, name: &str) -> Result<OwnedObjectPath, SystemdError> {
            if lock(&self.world).units.contains_key(name) {
                Ok(unit_path(name))
            } else {
                Err(SystemdError::NoSuchUnit(format!("Unit {name} not loaded.")))
            }
        }
    }

    #[interface(name = "org.freedesktop.systemd1.Manager")]
    impl FakeManager {
        #[zbus(property)]
        fn version(&self) -> String {
            "257.13-1~deb13u1".to_owned()
        }

        fn subscribe(&self) -> Result<(), SystemdError> {
            lock(&self.world).log.push("Subscribe".to_owned());
            let mut subscribed = self.subscribed.lock().expect("lock");
            if *subscribed {
                return Err(SystemdError::AlreadySubscribed(
                    "Client is already subscribed.".to_owned(),
                ));
            }
            *subscribed = true;
            Ok(())
        }

        fn reload(&self) {
            lock(&self.world).log.push("Reload".to_owned());
        }

        async fn start_unit(
            &self,
            name: String,
            mode: &str,
            #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
        ) -> Result<OwnedObjectPath, SystemdError> {
            self.queue("StartUnit", name, mode, emitter).await
        }

        async fn stop_unit(
            &self,
            name: String,
            mode: &str,
            #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
        ) -> Result<OwnedObjectPath, SystemdError> {
            self.queue("StopUnit", name, mode, emitter).await
        }

        async fn restart_unit(
            &self,
            name: String,
            mode: &str,
            #[zbus(signal_emitter)] emitter: SignalEmitter<'_>,
        ) -> Result<OwnedObjectPath, SystemdError> {
            self.queue("RestartUnit", name, mode, emitter).await
        }

        fn get_unit(&self, name: &str) -> Result<OwnedObjectPath, SystemdError> {
            self.known(name)
        }

        fn load_unit(&self, name: &str) -> Result<OwnedObjectPath, SystemdError> {
            lock(&self.world).log.push(format!("LoadUnit {name}"));
            self.known(name)
        }

        #[zbus(signal)]
        async fn job_removed(
            emitter: &SignalEmitter<'_>,
            id: u32,
            job: ObjectPath<'_>,
            unit: &str,
            result: &str,
        ) -> zbus::Result<()>;
    }

    struct FakeUnitObject {
        world: Shared,
        name: String,
    }

    impl FakeUnitObject {
        fn read<T>(&self, f: impl FnOnce(&FakeUnit) -> T) -> T {
            f(lock(&self.world).units.get(&self.name).expect("known unit"))
        }
    }

    #[interface(name = "org.freedesktop.systemd1.Unit")]
    impl FakeUnitObject {
        #[zbus(property)]
        fn load_state(&self) -> String {
            "loaded".to_owned()
        }
        #[zbus(property)]
        fn active_state(&self) -> String {
            self.read(|u| u.active.to_owned())
        }
        #[zbus(property)]
        fn sub_state(&self) -> String {
            self.read(|u| u.sub.to_owned())
        }
        #[zbus(property)]
        fn need_daemon_reload(&self) -> bool {
            false
        }
        #[zbus(property)]
        fn condition_result(&self) -> bool {
            self.read(|u| u.condition_result)
        }
        #[zbus(property)]
        fn condition_timestamp(&self) -> u64 {
            self.read(|u| u.condition_timestamp)
        }
        #[zbus(property)]
        fn job(&self) -> (u32, OwnedObjectPath) {
            self.read(|u| u.job.clone())
        }
        #[zbus(name = "Ref")]
        fn hold(&self) {
            let mut world = lock(&self.world);
            world.refs += 1;
            world.log.push(format!("Ref {}", self.name));
        }
        #[zbus(name = "Unref")]
        fn release(&self) {
            let mut world = lock(&self.world);
            world.refs -= 1;
            world.log.push(format!("Unref {}", self.name));
        }
    }

    struct FakeServiceObject(FakeUnitObject);

    #[interface(name = "org.freedesktop.systemd1.Service")]
    impl FakeServiceObject {
        #[zbus(property)]
        fn result(&self) -> String {
            self.0.read(|u| u.result.to_owned())
        }
        #[zbus(property)]
        fn exec_main_code(&self) -> i32 {
            self.0.read(|u| u.main_code)
        }
        #[zbus(property)]
        fn exec_main_status(&self) -> i32 {
            self.0.read(|u| u.main_status)
        }
        #[zbus(property, name = "Type")]
        fn service_type(&self) -> String {
            self.0.read(|u| u.script.service_type.to_owned())
        }
    }

    struct FakeTimerObject {
        realtime: u64,
        monotonic: u64,
    }

    #[interface(name = "org.freedesktop.systemd1.Timer")]
    impl FakeTimerObject {
        #[zbus(property)]
        fn result(&self) -> String {
            "success".to_owned()
        }
        #[zbus(property, name = "NextElapseUSecRealtime")]
        fn next_elapse_usec_realtime(&self) -> u64 {
            self.realtime
        }
        #[zbus(property, name = "NextElapseUSecMonotonic")]
        fn next_elapse_usec_monotonic(&self) -> u64 {
            self.monotonic
        }
    }

    /// A client manager connected to a fake systemd with `units`. Keep the returned server
    /// connection and tempdir alive for the test.
    struct Harness {
        manager: ZbusUnitManager,
        world: Shared,
        _server: Connection,
        _dir: tempfile::TempDir,
    }

    fn harness(units: &[(&str, Script)]) -> Harness {
        let world: Shared = Arc::default();
        let (server_end, client_end) = UnixStream::pair().expect("socket pair");
        let mut server = connection::Builder::async_io_unix_stream(server_end)
            .server(zbus::Guid::generate())
            .expect("guid")
            .p2p()
            .serve_at(
                "/org/freedesktop/systemd1",
                FakeManager {
                    world: world.clone(),
                    subscribed: Mutex::new(false),
                },
            )
            .expect("serve manager");
        for (name, script) in units {
            lock(&world).units.insert(
                (*name).to_owned(),
                FakeUnit {
                    script: script.clone(),
                    active: "inactive",
                    sub: "dead",
                    result: "success",
                    condition_result: false,
                    condition_timestamp: 0,
                    main_code: 0,
                    main_status: 0,
                    job: no_job(),
                },
            );
            let object = || FakeUnitObject {
                world: world.clone(),
                name: (*name).to_owned(),
            };
            server = server
                .serve_at(unit_path(name), object())
                .expect("serve unit")
                .serve_at(unit_path(name), FakeServiceObject(object()))
                .expect("serve service");
            if unit_type(name) == Some("timer") {
                server = server
                    .serve_at(
                        unit_path(name),
                        FakeTimerObject {
                            realtime: 1_800_000_000_000_000,
                            monotonic: u64::MAX,
                        },
                    )
                    .expect("serve timer");
            }
        }
        let client = connection::Builder::async_io_unix_stream(client_end)
            .p2p()
            .method_timeout(Duration::from_secs(5));
        let (server, client) = async_io::block_on(future::zip(server.build(), client.build()));
        let dir = tempfile::tempdir().expect("tempdir");
        let mut manager = ZbusUnitManager::from_connection(
            client.expect("client connection"),
            "p2p test socket".to_owned(),
            dir.path().join("cyclix").join("systemd.lock"),
        );
        manager.poll_interval = Duration::from_millis(50);
        Harness {
            manager,
            world,
            _server: server.expect("server connection"),
            _dir: dir,
        }
    }

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
        assert!(took >= timeout, "returned before the deadline: {took:?}");
        assert!(
            // Bounded, not timed: a loaded 2-core CI machine (four builds at once) was seen
            // 1 s over; the failure this guards against is an unbounded wait.
            took < timeout + FALLBACK_READ_BUDGET + Duration::from_secs(4),
            "returned too late: {took:?}"
        );
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
                assert_eq!(*phase, "waiting for the job to finish");
                assert!(state.contains("activating/start"), "{state}");
                assert!(state.contains("job still queued"), "{state}");
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
        let started = Instant::now();
        let err = manager.reload().expect_err("lock busy");
        assert!(started.elapsed() < Duration::from_secs(1));
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
}
