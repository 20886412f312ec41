//! Tier (b) of STYLE.md: the real proxy code of [`ZbusUnitManager`] against an in-process fake
//! `org.freedesktop.systemd1` served with zbus `#[interface]` over a p2p `UnixStream::pair()`.
//! This file: the fake manager, unit, service and timer objects and the harness; the cases are in
//! `tests/jobs.rs`.

#![allow(clippy::unused_self)] // fake properties with constant values keep the D-Bus shape

use std::collections::HashMap;
use std::fmt::Write as _;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard};

use zbus::object_server::SignalEmitter;
use zbus::zvariant::ObjectPath;
use zbus::{connection, interface};

use zbus::zvariant::OwnedObjectPath;

use super::*;
use crate::systemd::{JobResult, Settled, unit_type};

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

mod jobs;
