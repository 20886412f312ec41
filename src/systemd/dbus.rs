//! The real [`UnitManager`]: the systemd user manager over D-Bus with zbus. This file and
//! `dbus/` are the ONLY code in the crate that imports zbus.
//!
//! Owns: hand-written `#[proxy]` traits for `org.freedesktop.systemd1.Manager`, `.Unit`,
//! `.Service` and `.Timer` (only the members cyclix uses; names and signatures from
//! org.freedesktop.systemd1(5)), [`ZbusUnitManager`], the mapping of zbus errors to
//! [`Error`], and the lock that serialises cyclix's own reloads against its jobs (B21).
//!
//! Files: this one (the connection, [`ZbusUnitManager`], error mapping, the [`UnitManager`]
//! impl), `dbus/proxies.rs` (the `#[proxy]` traits), `dbus/reload_gate.rs` (the reload/job
//! lock), `dbus/status.rs` (reading a unit's state), `dbus/jobs.rs` (queueing a job and waiting
//! for it), `dbus/tests.rs` + `dbus/tests/` (against a fake systemd on a private bus).
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

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_io::Timer;
use futures_lite::future;
use zbus::Connection;
use zbus::proxy::CacheProperties;

use super::{
    Error, JobMode, JobOutcome, LoadState, MANAGER, NextElapse, Op, UnitFileChange, UnitIdentity,
    UnitManager, UnitStatus,
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

mod jobs;
mod proxies;
mod reload_gate;
mod retry;
mod status;
mod system_bus;

use proxies::{LoginProxy, LoginUserProxy, ManagerProxy, UnitProxy};
use reload_gate::Access;
#[cfg(test)]
mod tests;

/// The D-Bus error name logind uses for a user it does not track.
const NO_SUCH_USER: &str = "org.freedesktop.login1.NoSuchUser";

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

    /// One call of the seam under the one retry rule ([`retry::retrying`]): `f` is asked
    /// with a fresh [`Call`] of `op` on `unit` whose deadline is `timeout` from the FIRST ask,
    /// and asked again after a transient D-Bus error (the user manager re-executing) while that
    /// deadline has not passed. Every method of the [`UnitManager`] impl that is safe to repeat
    /// goes through here: reads, `LoadUnit`, `Reload`, `ResetFailed`, unit-file (dis)enabling,
    /// and start/stop jobs waited for (retried so since issue 20). A start asked again after
    /// its job ran to its end can start a unit that already finished once more (a lost reply
    /// cannot tell); a restart and a start not waited for are asked once ([`Self::once`]).
    fn ask<T>(
        &self,
        op: Op,
        unit: &str,
        timeout: Duration,
        f: impl Fn(&Call<'_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let first = self.call(op, unit, timeout);
        retry::retrying(timeout, || f(&first))
    }

    /// One call asked once (no retry: see [`Self::ask`]), bounded by `timeout`.
    fn once<T>(
        &self,
        op: Op,
        unit: &str,
        timeout: Duration,
        f: impl Fn(&Call<'_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        f(&self.call(op, unit, timeout))
    }

    /// A timer's next elapse, read within `call`'s deadline.
    async fn read_next_elapse(&self, call: &Call<'_>, unit: &str) -> Result<NextElapse, Error> {
        let manager = self.manager(call).await?;
        // GetUnit, not LoadUnit: a timer nobody loaded (no `schedule:`) has no next
        // elapse, and loading one that lacks a trigger makes systemd log a refusal.
        let path = call
            .run("finding the timer", manager.get_unit(unit))
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
        self.ask(Op::Reload, MANAGER, self.call_timeout, |call| {
            let _lock = self.lock(call, Access::Exclusive)?;
            async_io::block_on(async {
                let manager = self.manager(call).await?;
                call.run("waiting for the reload to finish", manager.reload())
                    .await
            })?;
            tracing::debug!(elapsed_ms = call.elapsed_ms(), "reloaded");
            Ok(())
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit, mode = %mode, timeout_ms = timeout.as_millis()))]
    fn start(&self, unit: &str, mode: JobMode, timeout: Duration) -> Result<JobOutcome, Error> {
        self.ask(Op::Start, unit, timeout, |call| {
            async_io::block_on(self.job(call, mode))
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit, mode = %mode))]
    fn start_no_block(&self, unit: &str, mode: JobMode) -> Result<String, Error> {
        self.once(Op::Start, unit, self.call_timeout, |call| {
            let _lock = self.lock(call, Access::Shared)?;
            async_io::block_on(async {
                let manager = self.manager(call).await?;
                let job = call
                    .run("queueing the job", manager.start_unit(unit, mode.as_str()))
                    .await?;
                tracing::debug!(%job, "job queued, not waited for");
                Ok(job.to_string())
            })
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit, mode = %mode, timeout_ms = timeout.as_millis()))]
    fn stop(&self, unit: &str, mode: JobMode, timeout: Duration) -> Result<JobOutcome, Error> {
        self.ask(Op::Stop, unit, timeout, |call| {
            async_io::block_on(self.job(call, mode))
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit, timer = %timer, after_s = after.as_secs()))]
    fn stop_later(&self, unit: &str, timer: &str, after: Duration) -> Result<(), Error> {
        use zbus::zvariant::Value;
        let service = format!("{}.service", timer.trim_end_matches(".timer"));
        let usec = u64::try_from(after.as_micros()).unwrap_or(u64::MAX);
        let what = format!("cyclix: stops {unit} at its deadline");
        let timer_props: Vec<(&str, Value<'_>)> = vec![
            ("Description", Value::from(what.as_str())),
            ("TimersMonotonic", Value::from(vec![("OnActiveSec", usec)])),
            ("AccuracyUSec", Value::from(1_000_000u64)),
            ("RemainAfterElapse", Value::from(false)),
        ];
        let service_props: Vec<(&str, Value<'_>)> = vec![
            ("Description", Value::from(what.as_str())),
            ("Conflicts", Value::from(vec![unit])),
            ("Type", Value::from("oneshot")),
            (
                "ExecStart",
                Value::from(vec![("/bin/true", vec!["true"], false)]),
            ),
            ("CollectMode", Value::from("inactive-or-failed")),
        ];
        let aux = [(service.as_str(), service_props.as_slice())];
        self.once(Op::Start, timer, self.call_timeout, |call| {
            let _lock = self.lock(call, Access::Shared)?;
            async_io::block_on(async {
                let manager = self.manager(call).await?;
                let job = call
                    .run(
                        "creating the transient timer",
                        manager.start_transient_unit(timer, "fail", &timer_props, &aux),
                    )
                    .await?;
                tracing::debug!(%job, "deadline armed");
                Ok(())
            })
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit, mode = %mode, timeout_ms = timeout.as_millis()))]
    fn restart(&self, unit: &str, mode: JobMode, timeout: Duration) -> Result<JobOutcome, Error> {
        self.once(Op::Restart, unit, timeout, |call| {
            async_io::block_on(self.job(call, mode))
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit))]
    fn reset_failed(&self, unit: &str) -> Result<(), Error> {
        self.ask(Op::ResetFailed, unit, self.call_timeout, |call| {
            async_io::block_on(async {
                let manager = self.manager(call).await?;
                call.run(
                    "resetting the failed state",
                    manager.reset_failed_unit(unit),
                )
                .await
            })
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit))]
    fn unit_status(&self, unit: &str) -> Result<UnitStatus, Error> {
        self.ask(Op::Status, unit, self.call_timeout, |call| {
            async_io::block_on(self.read_status(call))
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit))]
    fn unit_identity(&self, unit: &str) -> Result<UnitIdentity, Error> {
        self.ask(Op::Identity, unit, self.call_timeout, |call| {
            async_io::block_on(self.read_identity(call))
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit))]
    fn timer_next_elapse(&self, unit: &str) -> Result<NextElapse, Error> {
        self.ask(Op::TimerNextElapse, unit, self.call_timeout, |call| {
            async_io::block_on(self.read_next_elapse(call, unit))
        })
    }

    #[tracing::instrument(skip_all, fields(units = ?units))]
    fn enable_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, Error> {
        let names = units.join(" ");
        let (_, changes) = self.ask(Op::Enable, &names, self.call_timeout, |call| {
            async_io::block_on(async {
                let manager = self.manager(call).await?;
                call.run(
                    "enabling unit files",
                    manager.enable_unit_files(units, false, true),
                )
                .await
            })
        })?;
        self.reload()?;
        Ok(Self::unit_file_changes(changes))
    }

    #[tracing::instrument(skip_all, fields(units = ?units))]
    fn disable_unit_files(&self, units: &[&str]) -> Result<Vec<UnitFileChange>, Error> {
        let names = units.join(" ");
        let changes = self.ask(Op::Disable, &names, self.call_timeout, |call| {
            async_io::block_on(async {
                let manager = self.manager(call).await?;
                call.run(
                    "disabling unit files",
                    manager.disable_unit_files(units, false),
                )
                .await
            })
        })?;
        self.reload()?;
        Ok(Self::unit_file_changes(changes))
    }

    #[tracing::instrument(skip_all, fields(unit = %unit))]
    fn load_unit(&self, unit: &str) -> Result<LoadState, Error> {
        self.ask(Op::LoadUnit, unit, self.call_timeout, |call| {
            async_io::block_on(async {
                let proxy = self.loaded_unit(call, unit).await?;
                let state = call
                    .run("reading the load state", proxy.load_state())
                    .await?;
                Ok(LoadState::parse(&state))
            })
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit))]
    fn load_current(&self, unit: &str) -> Result<(LoadState, bool), Error> {
        self.ask(Op::LoadUnit, unit, self.call_timeout, |call| {
            async_io::block_on(async {
                let proxy = self.loaded_unit(call, unit).await?;
                let (state, reload) = futures_lite::future::zip(
                    call.run("reading the load state", proxy.load_state()),
                    call.run("reading NeedDaemonReload", proxy.need_daemon_reload()),
                )
                .await;
                Ok((LoadState::parse(&state?), reload?))
            })
        })
    }

    #[tracing::instrument(skip_all)]
    fn manager_version(&self) -> Result<String, Error> {
        self.ask(Op::Version, MANAGER, self.call_timeout, |call| {
            async_io::block_on(async {
                let manager = self.manager(call).await?;
                call.run("reading the manager version", manager.version())
                    .await
            })
        })
    }

    #[tracing::instrument(skip_all)]
    fn manager_environment_names(&self) -> Result<Vec<String>, Error> {
        let block = self.ask(Op::Environment, MANAGER, self.call_timeout, |call| {
            async_io::block_on(async {
                let manager = self.manager(call).await?;
                call.run("reading the manager environment", manager.environment())
                    .await
            })
        })?;
        Ok(block
            .iter()
            .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_string()))
            .collect())
    }

    #[tracing::instrument(skip_all, fields(uid = uid))]
    fn user_linger(&self, uid: u32) -> Result<bool, Error> {
        let unit = format!("login1 user {uid}");
        self.ask(Op::Linger, &unit, self.call_timeout, |call| {
            self.linger_of(call, uid)
        })
    }

    #[tracing::instrument(skip_all, fields(unit = %unit))]
    fn system_unit_active_state(&self, unit: &str) -> Result<ActiveState, Error> {
        self.ask(Op::SystemStatus, unit, self.call_timeout, |call| {
            self.system_state_of(call, unit)
        })
    }
}
