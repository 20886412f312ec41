//! Gathers [`HostFacts`] for `cyclix check`: the ONLY I/O of the check. Returns facts, never
//! verdicts (those are `host::checks`, pure).
//!
//! Owns: reading the host's files (`/proc/self/status`, `/etc/passwd`, `/etc/subuid`,
//! `/etc/subgid`, `/proc/self/mounts`, the user manager's `cgroup.controllers`, podman's
//! `storage.conf` and image store), the `$PATH` lookups, the child processes (`podman
//! --version`, `quadlet -version`, `getcap`, and without `--quick`: `podman info`,
//! `podman image exists`, the outcome test), and the D-Bus reads through the systemd seam
//! ([`UnitManager::manager_version`], [`UnitManager::user_linger`],
//! [`UnitManager::system_unit_active_state`]).
//!
//! May not: decide pass/fail, print, or change the host, except the outcome test's throwaway
//! network and containers (labelled `io.cyclix.check=<nonce>`, removed, and the removal verified).
//!
//! Speed (`--quick` target ≤ 50 ms): the three slow sources run in parallel threads: podman
//! (`podman --version`, about 25 ms), D-Bus (two connections, a few ms) and Quadlet
//! (`quadlet -version`, about 4 ms); everything else is a file read. `--quick` never runs
//! `podman info` (about 130 ms) and reads image presence from the image store's
//! `images.json` instead of one `podman image exists` per image. Every child has a deadline
//! ([`crate::process`]).

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::context::HostEnv;
use crate::podman::{Podman, PodmanInfo};
use crate::process;
use crate::spec::{Image, Spec};
use crate::systemd::{UnitManager, ZbusUnitManager};
use crate::tier::Tier;

/// Deadline of the quick children (`podman --version`, `quadlet -version`, `getcap`): 10 s.
pub const QUICK_DEADLINE: Duration = Duration::from_secs(10);
/// Deadline of `podman info` and of each step of the outcome test: 60 s (podman's first call
/// after boot migrates storage; a first `podman run` may set up the rootless network).
pub const SLOW_DEADLINE: Duration = Duration::from_secs(60);
/// Bound of each D-Bus call of the check: 5 s.
pub const DBUS_DEADLINE: Duration = Duration::from_secs(5);

/// Where systemd looks for user generators, in its order (systemd.generator(7)).
pub const USER_GENERATOR_DIRS: [&str; 4] = [
    "/run/systemd/user-generators",
    "/etc/systemd/user-generators",
    "/usr/local/lib/systemd/user-generators",
    "/usr/lib/systemd/user-generators",
];
/// The name of Podman's Quadlet user generator (a link to `quadlet`).
pub const QUADLET_GENERATOR: &str = "podman-user-generator";
/// Where podman looks for its helpers (containers.conf `helper_binaries_dir` default).
pub const HELPER_DIRS: [&str; 4] = [
    "/usr/local/libexec/podman",
    "/usr/local/lib/podman",
    "/usr/libexec/podman",
    "/usr/lib/podman",
];
/// The outside address the outcome test tries to reach (TEST-NET-1, RFC 5737: public to the
/// egress policy, never a real service).
pub const OUTSIDE_ADDRESS: &str = "192.0.2.1";
/// The label of every object the outcome test creates; the value is the run's nonce.
pub const CHECK_LABEL: &str = "io.cyclix.check";
/// Images the outcome test may use, in order of preference (the first present one).
pub const PROBE_IMAGES: [&str; 3] = [
    "docker.io/library/busybox:latest",
    crate::images::AGENT_PYTHON_IMAGE,
    crate::images::PROXY_IMAGE,
];

/// A fact that could not be read carries the reason as text.
pub type Fact<T> = Result<T, String>;

/// Everything `check` decides on.
#[derive(Debug, Clone, PartialEq)]
pub struct HostFacts {
    /// `--quick`: no `podman info`, no outcome test, image presence from `images.json`.
    pub quick: bool,
    /// Real uid of this process (`/proc/self/status`).
    pub uid: u32,
    /// The user's name (`/etc/passwd`), or the uid as text when it has none there.
    pub user: String,
    /// `$XDG_RUNTIME_DIR` and what is at that path.
    pub runtime_dir: RuntimeDirFacts,
    /// podman on `$PATH` and its version.
    pub podman: PodmanFacts,
    /// The Quadlet user generator.
    pub quadlet: QuadletFacts,
    /// The user manager's `Version` over the user bus.
    pub manager_version: Fact<String>,
    /// logind's `Linger` for this uid (system bus).
    pub linger: Fact<bool>,
    /// `ActiveState` of the system's `network-online.target` (B07).
    pub network_online: Fact<String>,
    /// `/etc/subuid`.
    pub subuid: SubIds,
    /// `/etc/subgid`.
    pub subgid: SubIds,
    /// `newuidmap` on `$PATH`.
    pub newuidmap: IdMapper,
    /// `newgidmap` on `$PATH`.
    pub newgidmap: IdMapper,
    /// cgroup version and the controllers delegated to the user manager.
    pub cgroup: CgroupFacts,
    /// OCI runtimes found (`crun`, `runc`): their paths, preferred first.
    pub oci_runtimes: Vec<String>,
    /// `netavark` in podman's helper directories.
    pub netavark: Option<String>,
    /// `aardvark-dns` in podman's helper directories.
    pub aardvark_dns: Option<String>,
    /// `pasta` (helper directories or `$PATH`).
    pub pasta: Option<String>,
    /// `slirp4netns` (helper directories or `$PATH`).
    pub slirp4netns: Option<String>,
    /// The storage driver as configured or as found in the store.
    pub storage: StorageFacts,
    /// `podman info`; `None` with `--quick` or when podman is missing.
    pub info: Option<Fact<PodmanInfo>>,
    /// Lines of `podman unshare cat /proc/self/uid_map` (B10); `None` with `--quick` or when
    /// podman is missing.
    pub uid_map: Option<Fact<Vec<String>>>,
    /// The tenants checked, with their images.
    pub tenants: Vec<TenantFacts>,
    /// The outcome test; `None` with `--quick` or when podman is missing.
    pub outcome: Option<Fact<OutcomeFacts>>,
}

/// `$XDG_RUNTIME_DIR`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeDirFacts {
    /// The value as set; `None` when unset.
    pub value: Option<String>,
    /// Whether it is an existing directory.
    pub is_dir: bool,
    /// Its owner's uid, when it exists.
    pub owner: Option<u32>,
    /// Its permission bits (e.g. `0o700`), when it exists.
    pub mode: Option<u32>,
}

/// podman on `$PATH`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodmanFacts {
    /// The path found on `$PATH`; `None` when there is none.
    pub path: Option<String>,
    /// What `podman --version` said (`"5.4.2"`); `None` when podman was not found.
    pub version: Option<Fact<String>>,
    /// `--quick` took the version from the cache for this exact binary instead of running it.
    pub version_cached: bool,
}

/// The Quadlet user generator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QuadletFacts {
    /// The directories searched, in systemd's order.
    pub searched: Vec<String>,
    /// The first `podman-user-generator` found.
    pub generator: Option<String>,
    /// What `GENERATOR -version` said; `None` when there is no generator.
    pub version: Option<Fact<String>>,
    /// Without `--quick`: whether `QUADLET_UNIT_DIRS=TMP GENERATOR -dryrun -user` turned a
    /// scratch `probe.container` into `probe.service` (B01); `None` when not run.
    pub dryrun: Option<Fact<bool>>,
}

/// One line of `/etc/subuid` or `/etc/subgid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubIdEntry {
    /// User name or numeric uid as written.
    pub owner: String,
    /// First id of the range.
    pub start: u64,
    /// Number of ids.
    pub count: u64,
}

/// A sub-id file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubIds {
    /// Its path.
    pub file: String,
    /// Its well-formed lines, or why it could not be read.
    pub entries: Fact<Vec<SubIdEntry>>,
}

/// `newuidmap` / `newgidmap`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdMapper {
    /// `newuidmap` or `newgidmap`.
    pub name: String,
    /// Where it was found on `$PATH`.
    pub path: Option<String>,
    /// Owned by root with the setuid bit (after following links).
    pub setuid_root: bool,
    /// `getcap PATH` output when it is not setuid root (e.g. `cap_setuid=ep`), or why it
    /// could not be read; `None` when setuid root or missing.
    pub caps: Option<Fact<String>>,
}

/// cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupFacts {
    /// File system type mounted at `/sys/fs/cgroup` (`cgroup2` = unified v2).
    pub fs_type: Option<String>,
    /// The user manager's `cgroup.controllers` path.
    pub file: String,
    /// The controllers listed there, or why it could not be read.
    pub delegated: Fact<Vec<String>>,
}

/// The storage driver.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StorageFacts {
    /// `overlay`, `vfs`, ...; `None` when neither configured nor visible in the store.
    pub driver: Option<String>,
    /// Where the driver was read (a `storage.conf`, the store directory, or `podman info`).
    pub source: String,
    /// The image store's root (`graphroot`).
    pub graphroot: String,
}

/// A tenant and its images.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantFacts {
    /// The tenant name (from the file name).
    pub name: String,
    /// The spec file.
    pub file: String,
    /// The validated spec, or the validation report.
    pub spec: Fact<Spec>,
    /// Images a run of this tenant needs (agent, gate, services, and the proxy for tier
    /// `container`), with presence.
    pub images: Vec<ImageFact>,
}

/// One image a tenant needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFact {
    /// `agent`, `gate`, `service NAME` or `proxy`.
    pub role: String,
    /// The reference.
    pub reference: String,
    /// Pinned by digest.
    pub pinned: bool,
    /// Whether local storage has it, or why that could not be read.
    pub present: Fact<bool>,
}

/// One container of the outcome test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFacts {
    /// Exit status of `podman run` (`None`: killed by a signal).
    pub exit: Option<i32>,
    /// stdout + stderr, trimmed to 500 bytes.
    pub output: String,
    /// Wall time in ms.
    pub elapsed_ms: u64,
}

/// The outcome test: a throwaway container on a fresh internal network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeFacts {
    /// The label value of every object created.
    pub nonce: String,
    /// The image used.
    pub image: String,
    /// The internal network created.
    pub network: String,
    /// Positive control: the container runs `true` on the network.
    pub control: StepFacts,
    /// The probe: a connection to [`OUTSIDE_ADDRESS`]:80 from the network.
    pub probe: StepFacts,
    /// Objects labelled with the nonce still present after the cleanup (must be empty).
    pub leftovers: Vec<String>,
    /// A cleanup step that failed.
    pub cleanup_error: Option<String>,
    /// Wall time of the whole test in ms.
    pub elapsed_ms: u64,
}

/// A tenant to check, as loaded by the caller (spec loading is the app's).
#[derive(Debug, Clone, PartialEq)]
pub struct TenantInput {
    /// The tenant name.
    pub name: String,
    /// Its spec file.
    pub file: String,
    /// The validated spec or the validation report.
    pub spec: Fact<Spec>,
}

/// What [`gather`] needs from the caller.
#[derive(Debug, Clone)]
pub struct GatherInput<'a> {
    /// The user's directories (`$HOME`, XDG).
    pub env: &'a HostEnv,
    /// `$XDG_RUNTIME_DIR` exactly as set.
    pub runtime_dir_raw: Option<String>,
    /// The `$PATH` directories.
    pub search_path: Vec<PathBuf>,
    /// `--quick`.
    pub quick: bool,
    /// The tenants to check.
    pub tenants: Vec<TenantInput>,
}

/// Gathers every fact, the slow sources in parallel.
#[must_use]
#[allow(clippy::similar_names)] // subuid/subgid, newuidmap/newgidmap: the files' and tools' names
pub fn gather(input: &GatherInput<'_>) -> HostFacts {
    let uid = read_uid();
    let user = uid
        .and_then(user_name)
        .unwrap_or_else(|| uid.map_or_else(|| "unknown".to_string(), |u| u.to_string()));
    let uid = uid.unwrap_or(u32::MAX);
    let podman_path = which("podman", &input.search_path);
    let generator = find_generator();
    let storage = storage_facts(input.env);

    std::thread::scope(|scope| {
        let podman_thread = scope.spawn(|| podman_side(podman_path.as_deref(), input, &storage));
        let dbus_thread = scope.spawn(|| dbus_side(input, uid));
        let quadlet_thread = scope.spawn(|| {
            let version = generator.as_ref().map(|g| {
                process::run(g, &["-version"], None, QUICK_DEADLINE, "")
                    .map(|o| o.stdout.trim().to_string())
                    .map_err(|e| e.to_string())
            });
            let dryrun = match (&generator, input.quick) {
                (Some(g), false) => Some(quadlet_dryrun(g)),
                _ => None,
            };
            (version, dryrun)
        });

        let runtime_dir = runtime_dir_facts(input.runtime_dir_raw.as_deref());
        let (subuid, subgid) = (read_subids("/etc/subuid"), read_subids("/etc/subgid"));
        let (newuidmap, newgidmap) = (
            id_mapper("newuidmap", &input.search_path),
            id_mapper("newgidmap", &input.search_path),
        );
        let cgroup = cgroup_facts(uid);
        let oci_runtimes = ["crun", "runc"]
            .iter()
            .filter_map(|n| which(n, &input.search_path).or_else(|| in_dirs(n, &HELPER_DIRS)))
            .collect();
        let netavark = in_dirs("netavark", &HELPER_DIRS);
        let aardvark_dns = in_dirs("aardvark-dns", &HELPER_DIRS);
        let pasta = in_dirs("pasta", &HELPER_DIRS).or_else(|| which("pasta", &input.search_path));
        let slirp4netns = in_dirs("slirp4netns", &HELPER_DIRS)
            .or_else(|| which("slirp4netns", &input.search_path));

        let (quadlet_version, quadlet_dryrun) = quadlet_thread
            .join()
            .unwrap_or_else(|_| (Some(Err("the quadlet probe thread panicked".into())), None));
        let podman = podman_thread.join().unwrap_or_else(|_| PodmanSide {
            version: Some(Err("the podman probe thread panicked".into())),
            ..PodmanSide::default()
        });
        let dbus = dbus_thread.join().unwrap_or_else(|_| {
            let e = "the D-Bus probe thread panicked".to_string();
            DbusSide {
                manager_version: Err(e.clone()),
                linger: Err(e.clone()),
                network_online: Err(e),
            }
        });
        let mut storage = storage.clone();
        if let Some(Ok(info)) = &podman.info
            && !info.graph_driver.is_empty()
        {
            storage.driver = Some(info.graph_driver.clone());
            storage.source = "podman info".to_string();
        }
        HostFacts {
            quick: input.quick,
            uid,
            user,
            runtime_dir,
            podman: PodmanFacts {
                path: podman_path.clone(),
                version: podman.version,
                version_cached: podman.version_cached,
            },
            quadlet: QuadletFacts {
                searched: USER_GENERATOR_DIRS
                    .iter()
                    .map(|d| (*d).to_string())
                    .collect(),
                generator: generator.clone(),
                version: quadlet_version,
                dryrun: quadlet_dryrun,
            },
            manager_version: dbus.manager_version,
            linger: dbus.linger,
            network_online: dbus.network_online,
            subuid,
            subgid,
            newuidmap,
            newgidmap,
            cgroup,
            oci_runtimes,
            netavark,
            aardvark_dns,
            pasta,
            slirp4netns,
            storage,
            info: podman.info,
            uid_map: podman.uid_map,
            tenants: podman.tenants,
            outcome: podman.outcome,
        }
    })
}

#[derive(Default)]
struct PodmanSide {
    version: Option<Fact<String>>,
    version_cached: bool,
    info: Option<Fact<PodmanInfo>>,
    uid_map: Option<Fact<Vec<String>>>,
    tenants: Vec<TenantFacts>,
    outcome: Option<Fact<OutcomeFacts>>,
}

/// Everything that runs podman, in one thread: version, then (full mode) info, image presence
/// and the outcome test.
fn podman_side(path: Option<&str>, input: &GatherInput<'_>, storage: &StorageFacts) -> PodmanSide {
    let podman = path.map(Podman::with_bin);
    let cache = input
        .env
        .runtime_dir
        .as_ref()
        .map(|d| d.join("cyclix/podman-version.json"));
    let mut version_cached = false;
    let version = podman.as_ref().map(|p| {
        let key = path.and_then(binary_key);
        if input.quick
            && let (Some(key), Some(cache)) = (&key, &cache)
            && let Some(v) = cached_version(cache, key)
        {
            version_cached = true;
            return Ok(v);
        }
        let v = p.version_line(QUICK_DEADLINE).map_err(|e| e.to_string())?;
        if let (Some(key), Some(cache)) = (key, &cache) {
            store_version(cache, key, &v);
        }
        Ok(v)
    });
    let store = if input.quick {
        Some(read_image_store(storage))
    } else {
        None
    };
    let tenants = input
        .tenants
        .iter()
        .map(|t| {
            let images = t.spec.as_ref().map_or_else(
                |_| Vec::new(),
                |spec| {
                    needed_images(spec)
                        .into_iter()
                        .map(|(role, reference, pinned)| {
                            let present = match (&podman, &store) {
                                (_, Some(store)) => store
                                    .as_ref()
                                    .map(|s| image_in_store(s, &reference))
                                    .map_err(Clone::clone),
                                (Some(p), None) => {
                                    p.image_exists(&reference).map_err(|e| e.to_string())
                                }
                                (None, None) => Err("podman is not on $PATH".to_string()),
                            };
                            ImageFact {
                                role,
                                reference,
                                pinned,
                                present,
                            }
                        })
                        .collect()
                },
            );
            TenantFacts {
                name: t.name.clone(),
                file: t.file.clone(),
                spec: t.spec.clone(),
                images,
            }
        })
        .collect();
    let (info, uid_map, outcome) = match (&podman, input.quick) {
        (Some(p), false) => std::thread::scope(|scope| {
            let info = scope.spawn(|| {
                let info = p.info(SLOW_DEADLINE).map_err(|e| e.to_string());
                let map = p
                    .unshare_uid_map(SLOW_DEADLINE)
                    .map(|m| m.lines().map(|l| l.trim().to_string()).collect())
                    .map_err(|e| e.to_string());
                (info, map)
            });
            let outcome = outcome_test(p);
            let (info, map) = info.join().unwrap_or_else(|_| {
                let e = "the podman info thread panicked".to_string();
                (Err(e.clone()), Err(e))
            });
            (Some(info), Some(map), Some(outcome))
        }),
        _ => (None, None, None),
    };
    PodmanSide {
        version,
        version_cached,
        info,
        uid_map,
        tenants,
        outcome,
    }
}

/// What identifies an installed binary: a package upgrade or a different file changes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BinaryKey {
    /// The path found on `$PATH`.
    pub path: String,
    /// Device and inode of the file it resolves to.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i128,
    /// Status change time, ns since the epoch.
    pub ctime_ns: i128,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct CachedVersion {
    key: BinaryKey,
    version: String,
}

fn binary_key(path: &str) -> Option<BinaryKey> {
    let m = fs::metadata(path).ok()?;
    Some(BinaryKey {
        path: path.to_string(),
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
    })
}

/// The podman version `--quick` remembered for exactly this binary (same path, inode, size,
/// mtime and ctime), from `$XDG_RUNTIME_DIR/cyclix/podman-version.json` (a tmpfs: gone at
/// reboot). Saves the 25 ms of `podman --version`; a different or upgraded binary misses.
fn cached_version(cache: &Path, key: &BinaryKey) -> Option<String> {
    let text = fs::read_to_string(cache).ok()?;
    let c: CachedVersion = serde_json::from_str(&text).ok()?;
    (c.key == *key).then_some(c.version)
}

fn store_version(cache: &Path, key: BinaryKey, version: &str) {
    let Some(dir) = cache.parent() else { return };
    let Ok(text) = serde_json::to_string(&CachedVersion {
        key,
        version: version.to_string(),
    }) else {
        return;
    };
    // Best effort: a cache that cannot be written only costs the next --quick 25 ms.
    let tmp = dir.join(format!(".podman-version.{}.tmp", std::process::id()));
    let ok = fs::create_dir_all(dir).is_ok()
        && fs::write(&tmp, text).is_ok()
        && fs::rename(&tmp, cache).is_ok();
    if !ok {
        let _ = fs::remove_file(&tmp);
        tracing::debug!(cache = %cache.display(), "cannot write the podman version cache");
    }
}

/// The images a run of `spec` needs: (role, reference, pinned). Only tier `container` runs
/// containers (and its proxy).
#[must_use]
pub fn needed_images(spec: &Spec) -> Vec<(String, String, bool)> {
    if crate::tier::floor(spec.tier, spec.legacy_worktree_isolation) != Tier::Container {
        return Vec::new();
    }
    let one = |role: String, image: &Image| {
        (
            role,
            image.reference().to_string(),
            matches!(image, Image::Pinned { .. }),
        )
    };
    let mut v = vec![
        one("agent".into(), &spec.agent.image),
        one("gate".into(), &spec.gate.image),
    ];
    for s in &spec.services {
        v.push(one(format!("service {}", s.name), &s.image));
    }
    v.push((
        "proxy".into(),
        crate::images::PROXY_IMAGE.to_string(),
        false,
    ));
    v
}

struct DbusSide {
    manager_version: Fact<String>,
    linger: Fact<bool>,
    network_online: Fact<String>,
}

fn dbus_side(input: &GatherInput<'_>, uid: u32) -> DbusSide {
    let lock = input
        .env
        .runtime_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("/nonexistent"))
        .join("cyclix/systemd.lock");
    match ZbusUnitManager::session(lock) {
        Ok(m) => dbus_facts(&m.with_call_timeout(DBUS_DEADLINE), uid),
        Err(e) => {
            // logind and the system manager live on the system bus, reachable without the
            // user's bus: linger is the usual fix for a missing user manager (B08, B09).
            let system = ZbusUnitManager::system(PathBuf::from("/nonexistent/cyclix.lock"))
                .map(|m| m.with_call_timeout(DBUS_DEADLINE));
            let (linger, network_online) = match &system {
                Ok(m) => {
                    let d = dbus_facts(m, uid);
                    (d.linger, d.network_online)
                }
                Err(se) => (Err(se.to_string()), Err(se.to_string())),
            };
            DbusSide {
                manager_version: Err(e.to_string()),
                linger,
                network_online,
            }
        }
    }
}

fn dbus_facts(m: &dyn UnitManager, uid: u32) -> DbusSide {
    DbusSide {
        manager_version: m.manager_version().map_err(|e| e.to_string()),
        linger: m.user_linger(uid).map_err(|e| e.to_string()),
        network_online: m
            .system_unit_active_state("network-online.target")
            .map(|s| s.as_str().to_string())
            .map_err(|e| e.to_string()),
    }
}

fn read_uid() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|u| u.parse().ok())
}

fn user_name(uid: u32) -> Option<String> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let _ = f.next()?;
        (f.next()?.parse::<u32>().ok()? == uid).then(|| name.to_string())
    })
}

fn is_executable_file(p: &Path) -> bool {
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The first executable `name` in `dirs` (as `execvp` finds it).
#[must_use]
pub fn which(name: &str, dirs: &[PathBuf]) -> Option<String> {
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| is_executable_file(p))
        .map(|p| p.to_string_lossy().into_owned())
}

fn in_dirs(name: &str, dirs: &[&str]) -> Option<String> {
    let dirs: Vec<PathBuf> = dirs.iter().map(PathBuf::from).collect();
    which(name, &dirs)
}

fn find_generator() -> Option<String> {
    USER_GENERATOR_DIRS
        .iter()
        .map(|d| Path::new(d).join(QUADLET_GENERATOR))
        .find(|p| is_executable_file(p))
        .map(|p| p.to_string_lossy().into_owned())
}

/// Runs the generator in user dry-run mode over a scratch directory holding only
/// `probe.container` (`env QUADLET_UNIT_DIRS=DIR GENERATOR -dryrun -user`): `Ok(true)` when it
/// printed the `---probe.service---` unit (B01).
fn quadlet_dryrun(generator: &str) -> Fact<bool> {
    let dir = tempfile::tempdir().map_err(|e| format!("creating a scratch unit dir: {e}"))?;
    fs::write(
        dir.path().join("probe.container"),
        "[Container]\nImage=localhost/cyclix-check-probe:latest\nExec=true\n",
    )
    .map_err(|e| format!("writing the probe unit: {e}"))?;
    let dirs = format!("QUADLET_UNIT_DIRS={}", dir.path().display());
    let out = process::run(
        "env",
        &[&dirs, generator, "-dryrun", "-user"],
        None,
        QUICK_DEADLINE,
        "",
    )
    .map_err(|e| e.to_string())?;
    Ok(out.stdout.contains("---probe.service---"))
}

fn runtime_dir_facts(value: Option<&str>) -> RuntimeDirFacts {
    let meta = value.and_then(|v| fs::metadata(v).ok());
    RuntimeDirFacts {
        value: value.map(str::to_string),
        is_dir: meta.as_ref().is_some_and(fs::Metadata::is_dir),
        owner: meta.as_ref().map(MetadataExt::uid),
        mode: meta.as_ref().map(|m| m.permissions().mode() & 0o7777),
    }
}

/// Parses a sub-id file: `OWNER:START:COUNT` lines; comments, blank and malformed lines are
/// skipped (as shadow-utils does).
#[must_use]
pub fn parse_subids(text: &str) -> Vec<SubIdEntry> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                return None;
            }
            let mut f = l.split(':');
            let owner = f.next()?.to_string();
            let start = f.next()?.trim().parse().ok()?;
            let count = f.next()?.trim().parse().ok()?;
            (f.next().is_none() && !owner.is_empty()).then_some(SubIdEntry {
                owner,
                start,
                count,
            })
        })
        .collect()
}

fn read_subids(file: &str) -> SubIds {
    SubIds {
        file: file.to_string(),
        entries: fs::read_to_string(file)
            .map(|t| parse_subids(&t))
            .map_err(|e| format!("reading {file}: {e}")),
    }
}

fn id_mapper(name: &str, path: &[PathBuf]) -> IdMapper {
    let found = which(name, path);
    let meta = found.as_ref().and_then(|p| fs::metadata(p).ok());
    let setuid_root = meta
        .as_ref()
        .is_some_and(|m| m.uid() == 0 && m.permissions().mode() & 0o4000 != 0);
    let caps = match (&found, setuid_root) {
        (Some(p), false) => Some(read_caps(p, path)),
        _ => None,
    };
    IdMapper {
        name: name.to_string(),
        path: found,
        setuid_root,
        caps,
    }
}

/// File capabilities through `getcap` (std has no xattr API and cyclix forbids `unsafe`).
fn read_caps(file: &str, path: &[PathBuf]) -> Fact<String> {
    let mut dirs = path.to_vec();
    dirs.extend(["/usr/sbin", "/sbin"].iter().map(PathBuf::from));
    let getcap = which("getcap", &dirs).ok_or_else(|| {
        "getcap is not installed, so file capabilities cannot be read".to_string()
    })?;
    let out =
        process::run(&getcap, &[file], None, QUICK_DEADLINE, "").map_err(|e| e.to_string())?;
    // `FILE cap_setuid=ep` (libcap ≥ 2.4x) or `FILE = cap_setuid+ep` (older); empty: none.
    Ok(out
        .stdout
        .trim()
        .strip_prefix(file)
        .unwrap_or(out.stdout.trim())
        .trim()
        .trim_start_matches('=')
        .trim()
        .to_string())
}

/// The cgroup facts of `uid`'s user manager (also read by `cyclix run` before a run with
/// resource limits).
#[must_use]
pub fn cgroup_facts(uid: u32) -> CgroupFacts {
    let fs_type = fs::read_to_string("/proc/self/mounts").ok().and_then(|m| {
        m.lines().find_map(|l| {
            let mut f = l.split_whitespace();
            let _src = f.next()?;
            (f.next()? == "/sys/fs/cgroup").then(|| f.next().map(str::to_string))?
        })
    });
    let file =
        format!("/sys/fs/cgroup/user.slice/user-{uid}.slice/user@{uid}.service/cgroup.controllers");
    let delegated = fs::read_to_string(&file)
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .map_err(|e| format!("reading {file}: {e}"));
    CgroupFacts {
        fs_type,
        file,
        delegated,
    }
}

/// The value of `key = "value"` in the `[storage]` table of a `storage.conf` (TOML subset:
/// podman's files are flat `key = "string"` lines).
#[must_use]
pub fn storage_conf_value(text: &str, key: &str) -> Option<String> {
    let mut in_storage = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_storage = l == "[storage]";
            continue;
        }
        if !in_storage {
            continue;
        }
        if let Some((k, v)) = l.split_once('=')
            && k.trim() == key
        {
            let v = v.split('#').next().unwrap_or_default().trim();
            return Some(v.trim_matches('"').to_string()).filter(|s| !s.is_empty());
        }
    }
    None
}

fn storage_facts(env: &HostEnv) -> StorageFacts {
    let user_conf = env.config_home.join("containers/storage.conf");
    let user_text = fs::read_to_string(&user_conf).ok();
    let graphroot = user_text
        .as_deref()
        .and_then(|t| storage_conf_value(t, "graphroot"))
        .unwrap_or_else(|| {
            env.data_home
                .join("containers/storage")
                .to_string_lossy()
                .into_owned()
        });
    let mut confs = vec![(user_conf.to_string_lossy().into_owned(), user_text)];
    for sys in [
        "/etc/containers/storage.conf",
        "/usr/share/containers/storage.conf",
    ] {
        confs.push((sys.to_string(), fs::read_to_string(sys).ok()));
    }
    for (file, text) in &confs {
        if let Some(driver) = text
            .as_deref()
            .and_then(|t| storage_conf_value(t, "driver"))
        {
            return StorageFacts {
                driver: Some(driver),
                source: file.clone(),
                graphroot,
            };
        }
    }
    // Not configured: podman picks one and records it in the store's layout.
    for driver in ["overlay", "btrfs", "zfs", "vfs"] {
        let dir = Path::new(&graphroot).join(format!("{driver}-images"));
        if dir.is_dir() {
            return StorageFacts {
                driver: Some(driver.to_string()),
                source: dir.to_string_lossy().into_owned(),
                graphroot,
            };
        }
    }
    StorageFacts {
        driver: None,
        source: "no storage.conf sets a driver and the store is empty".to_string(),
        graphroot,
    }
}

/// An image of the store's `images.json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct StoredImage {
    /// Full names with tags (`docker.io/library/busybox:latest`).
    #[serde(default)]
    pub names: Vec<String>,
    /// Manifest digests (`sha256:...`).
    #[serde(default)]
    pub digests: Vec<String>,
    /// The main manifest digest.
    #[serde(default)]
    pub digest: String,
}

fn read_image_store(storage: &StorageFacts) -> Fact<Vec<StoredImage>> {
    let driver = storage.driver.as_deref().unwrap_or("overlay");
    let file = Path::new(&storage.graphroot).join(format!("{driver}-images/images.json"));
    match fs::read_to_string(&file) {
        Ok(text) => {
            serde_json::from_str(&text).map_err(|e| format!("reading {}: {e}", file.display()))
        }
        // No store yet: no images.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("reading {}: {e}", file.display())),
    }
}

/// Whether `reference` is among `images` (c/storage's `images.json`): a digest reference
/// matches a stored digest, a tag reference a stored name (`:latest` implied, unqualified
/// names as `docker.io/library/NAME`).
#[must_use]
pub fn image_in_store(images: &[StoredImage], reference: &str) -> bool {
    if let Some((_, digest)) = reference.split_once('@') {
        return images
            .iter()
            .any(|i| i.digest == digest || i.digests.iter().any(|d| d == digest));
    }
    let last = reference.rsplit('/').next().unwrap_or(reference);
    let tagged = if last.contains(':') {
        reference.to_string()
    } else {
        format!("{reference}:latest")
    };
    let first = tagged.split('/').next().unwrap_or_default();
    let qualified = if tagged.contains('/')
        && (first.contains('.') || first.contains(':') || first == "localhost")
    {
        tagged
    } else if tagged.contains('/') {
        format!("docker.io/{tagged}")
    } else {
        format!("docker.io/library/{tagged}")
    };
    images.iter().any(|i| i.names.contains(&qualified))
}

fn nonce() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| {
        d.subsec_nanos() ^ u32::try_from(d.as_secs() & 0xffff_ffff).unwrap_or(0)
    });
    format!("{nanos:08x}{:04x}", std::process::id() & 0xffff)
}

fn ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn trim_output(out: &process::Output) -> String {
    let mut s = format!("{}{}", out.stdout, out.stderr).trim().to_string();
    if s.len() > 500 {
        let mut cut = 500;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// The probe run in the container: Python where the image has it, else `wget` (busybox).
/// Prints `connected` only if a TCP connection to [`OUTSIDE_ADDRESS`]:80 succeeded, and
/// `no probe tool` when the image has neither.
fn probe_script() -> String {
    format!(
        "if command -v python3 >/dev/null 2>&1; then exec python3 -c 'import socket; \
         s=socket.socket(); s.settimeout(5); s.connect((\"{OUTSIDE_ADDRESS}\", 80)); \
         print(\"connected\")'; elif command -v wget >/dev/null 2>&1; then \
         wget -T 5 -q -O /dev/null http://{OUTSIDE_ADDRESS}/ && echo connected; \
         else echo 'no probe tool (python3, wget)'; exit 3; fi"
    )
}

/// The outcome test: creates internal network `cyclix-check-NONCE`, runs a container that
/// must start and run `true` (positive control) and one that must fail to reach
/// [`OUTSIDE_ADDRESS`] fast, then removes everything labelled `io.cyclix.check=NONCE` and
/// lists what is still there.
fn outcome_test(podman: &Podman) -> Fact<OutcomeFacts> {
    let started = Instant::now();
    let image = PROBE_IMAGES
        .iter()
        .find(|i| podman.image_exists(i).unwrap_or(false))
        .ok_or_else(|| {
            format!(
                "none of the probe images is present ({}); run `cyclix images build` or \
                 `podman pull docker.io/library/busybox:latest`",
                PROBE_IMAGES.join(", ")
            )
        })?;
    let nonce = nonce();
    let network = format!("cyclix-check-{nonce}");
    let labels = [(CHECK_LABEL, nonce.as_str())];
    podman
        .network_create_internal(&network, &labels)
        .map_err(|e| e.to_string())?;
    let step = |argv: &[&str]| -> Fact<StepFacts> {
        let t = Instant::now();
        let out = podman
            .run_rm(
                &labels,
                &["--network", &network],
                image,
                argv,
                SLOW_DEADLINE,
            )
            .map_err(|e| e.to_string())?;
        Ok(StepFacts {
            exit: out.status.code(),
            output: trim_output(&out),
            elapsed_ms: ms(t),
        })
    };
    let script = probe_script();
    let control = step(&["true"]);
    let probe = step(&["sh", "-c", &script]);
    let label = format!("{CHECK_LABEL}={nonce}");
    let mut cleanup_error = None;
    let mut note = |r: crate::podman::Result<()>| {
        if let Err(e) = r {
            cleanup_error.get_or_insert(e.to_string());
        }
    };
    if let Ok(cs) = podman.containers(&label) {
        note(podman.rm_containers(&cs.into_iter().map(|c| c.id).collect::<Vec<_>>()));
    }
    note(podman.rm_networks(std::slice::from_ref(&network)));
    let mut leftovers = Vec::new();
    match podman.containers(&label) {
        Ok(cs) => leftovers.extend(cs.into_iter().map(|c| format!("container {}", c.id))),
        Err(e) => leftovers.push(format!("cannot list containers: {e}")),
    }
    match podman.networks(&label) {
        Ok(ns) => leftovers.extend(ns.into_iter().map(|n| format!("network {}", n.name))),
        Err(e) => leftovers.push(format!("cannot list networks: {e}")),
    }
    match podman.volumes(&label) {
        Ok(vs) => leftovers.extend(vs.into_iter().map(|v| format!("volume {}", v.name))),
        Err(e) => leftovers.push(format!("cannot list volumes: {e}")),
    }
    Ok(OutcomeFacts {
        nonce,
        image: (*image).to_string(),
        network,
        control: control?,
        probe: probe?,
        leftovers,
        cleanup_error,
        elapsed_ms: ms(started),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::systemd::{ActiveState, FakeUnitManager};

    #[test]
    fn subid_lines() {
        let e = parse_subids("# c\ncyx:200000:65536\n\nbad\n1001:300000:1000\nx:1:2:3\n");
        assert_eq!(
            e,
            [
                SubIdEntry {
                    owner: "cyx".into(),
                    start: 200_000,
                    count: 65_536
                },
                SubIdEntry {
                    owner: "1001".into(),
                    start: 300_000,
                    count: 1000
                }
            ]
        );
    }

    #[test]
    fn storage_conf_and_image_store() {
        let conf = "[storage]\ndriver = \"overlay\" # comment\n[storage.options]\ndriver = \"x\"\n";
        assert_eq!(
            storage_conf_value(conf, "driver").as_deref(),
            Some("overlay")
        );
        assert_eq!(storage_conf_value(conf, "graphroot"), None);
        let store: Vec<StoredImage> = serde_json::from_str(
            r#"[{"id":"a","names":["docker.io/library/busybox:latest","localhost/cyclix-proxy:latest"],
                 "digest":"sha256:aa","digests":["sha256:aa","sha256:bb"]}]"#,
        )
        .expect("store");
        assert!(image_in_store(&store, "busybox"));
        assert!(image_in_store(&store, "docker.io/library/busybox:latest"));
        assert!(image_in_store(&store, "localhost/cyclix-proxy:latest"));
        assert!(image_in_store(&store, "ghcr.io/x/y@sha256:bb"));
        assert!(!image_in_store(&store, "ghcr.io/x/y@sha256:cc"));
        assert!(!image_in_store(
            &store,
            "localhost/cyclix-agent-python:latest"
        ));
    }

    #[test]
    fn which_finds_executables_only() {
        let dir = tempfile::tempdir().expect("tmp");
        let exe = dir.path().join("tool");
        fs::write(&exe, "#!/bin/sh\n").expect("write");
        assert_eq!(which("tool", &[dir.path().to_path_buf()]), None);
        fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).expect("chmod");
        assert_eq!(
            which(
                "tool",
                &[PathBuf::from("/nonexistent"), dir.path().to_path_buf()]
            ),
            Some(exe.to_string_lossy().into_owned())
        );
    }

    #[test]
    fn dbus_facts_come_through_the_seam() {
        let fake = FakeUnitManager::new();
        fake.set_linger(1000);
        fake.set_system_unit_state("network-online.target", ActiveState::Active);
        let d = dbus_facts(&fake, 1000);
        assert_eq!(d.manager_version.as_deref(), Ok("257"));
        assert_eq!(d.linger, Ok(true));
        assert_eq!(d.network_online.as_deref(), Ok("active"));
        assert_eq!(dbus_facts(&fake, 1001).linger, Ok(false));
    }

    #[test]
    fn probe_script_reports_connected_only_on_success() {
        let s = probe_script();
        assert!(
            s.contains(OUTSIDE_ADDRESS) && s.contains("connected"),
            "{s}"
        );
    }
}
