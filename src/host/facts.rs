//! Gathers [`CheckFacts`] for `cyclix check`: the ONLY I/O of the check. Returns facts, never
//! verdicts (those are `host::checks`, pure).
//!
//! Owns: reading the host's files (`/proc/self/status`, `/etc/passwd`, `/etc/subuid`,
//! `/etc/subgid`, `/proc/self/mounts`, the user manager's `cgroup.controllers`, podman's
//! `storage.conf` and image store), the `$PATH` lookups, the child processes (`podman
//! --version`, `quadlet -version`, `getcap`, and without `--quick`: `podman info`,
//! `podman image exists`, the outcome test, the gVisor proof), and the D-Bus reads through the
//! systemd seam ([`UnitManager::manager_version`], [`UnitManager::user_linger`],
//! [`UnitManager::system_unit_active_state`]).
//!
//! May not: decide pass/fail, print, or change the host, except the outcome test's and the
//! gVisor proof's throwaway network and containers (labelled `io.cyclix.check=<nonce>`,
//! removed, and the removal verified).
//!
//! Speed (`--quick` target ≤ 50 ms): the three slow sources run in parallel threads: podman
//! (`podman --version`, about 25 ms), D-Bus (two connections, a few ms) and Quadlet
//! (`quadlet -version`, about 4 ms); everything else is a file read. `--quick` never runs
//! `podman info` (about 130 ms) and reads image presence from the image store's
//! `images.json` instead of one `podman image exists` per image. Every child has a deadline
//! ([`crate::process`]).
//!
//! Files by fact family: this one (the gathered struct, [`gather`], `$PATH` lookups),
//! `facts/account.rs` (uid, runtime dir, subordinate ids, cgroups), `facts/podman_side.rs`
//! (podman and Quadlet), `facts/images.rs` (needed images, storage, image store),
//! `facts/manager.rs` (D-Bus reads), `facts/outcome.rs` (the outcome test),
//! `facts/gvisor_proof.rs` (a throwaway container on runsc).

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::context::HostEnv;
use crate::podman::PodmanInfo;
use crate::process;
use crate::spec::Spec;

mod account;
pub mod gvisor;
mod gvisor_proof;
mod images;
mod manager;
mod outcome;
mod podman_side;

pub use account::*;
pub use gvisor_proof::*;
pub use images::*;
use manager::{DbusSide, dbus_side};
pub use outcome::*;
pub use podman_side::*;

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
pub const CHECK_LABEL: &str = crate::naming::label::CHECK;
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
pub struct CheckFacts {
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
    /// The names the user manager's environment block sets (never the values), which every
    /// run unit inherits.
    pub manager_env: Fact<Vec<String>>,
    /// When the user manager is unreachable: the `ActiveState` of `user@UID.service` in the
    /// system manager (`failed`: the user manager died; linger does not restart it). `None`
    /// when the user manager answered.
    pub user_unit: Option<Fact<String>>,
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
    /// The host programs cyclix runs itself ([`HOST_TOOLS`]), each with its path on `$PATH`
    /// or `None` when it is not there.
    pub host_tools: Vec<(&'static str, Option<String>)>,
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
    /// gVisor's `runsc` (`host::facts::gvisor::look`, made once per process): its path,
    /// version and the runtime flags this host needs, or why it is not usable.
    pub gvisor: Fact<crate::tier::runsc::OciRuntime>,
    /// The gVisor proof (a throwaway container on runsc, `facts/gvisor_proof.rs`); `None` with
    /// `--quick`, when podman is missing or when runsc was not found.
    pub gvisor_proof: Option<Fact<GvisorProof>>,
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
    /// The variables the spec names (secrets, credentials) and where this host has them.
    pub env: Vec<EnvNeed>,
    /// The commit `repo.base` names in `repo.path` (`git rev-parse`), or why it names none;
    /// `None` when the spec is invalid.
    pub base: Option<Fact<String>>,
    /// The keeper of its warm pool; `None` without a pool of size > 0.
    pub keeper: Option<KeeperFact>,
    /// Whether `task.file` can be read as a run reads it (`app::tenant::read_task_file`),
    /// or why not; `None` for a task given as text or an invalid spec.
    pub task: Option<Fact<()>>,
}

/// The keeper of a tenant's warm pool (`cyclix-pool@TENANT.service`, issue 16) as `check`
/// sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeeperFact {
    /// Its unit's `ActiveState` (`active`, `inactive`, `failed`, …), or why it could not be
    /// read.
    pub active: Fact<String>,
    /// What it wrote down last (`keeper.json` in the pool's directory; `None`: nothing yet),
    /// or why that could not be read.
    pub note: Fact<Option<KeeperNote>>,
}

/// What a pool's keeper wrote down last, as `check` needs it (`run::pool::keeper::KeeperState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeeperNote {
    /// `filling`, `full`, `waiting`, `retrying`, `stopped` or `blocked`.
    pub state: String,
    /// Failed fills in a row.
    pub failures: u32,
    /// The last failure's error; empty after a fill succeeded.
    pub last_error: String,
    /// Its line for people (`KeeperState::line`).
    pub line: String,
}

/// One variable a spec names (`agent.env`, `services[].env`, `agent.credentials[].env`) and
/// where it is set. Only presence: a value never enters the facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvNeed {
    /// The spec key that names it, e.g. `agent.credentials[0].env`.
    pub key: String,
    /// The spec line of the key, when the spec keeps it.
    pub line: Option<usize>,
    /// The variable's name.
    pub name: String,
    /// Set in the tenant's env file (`~/.config/cyclix/tenants/T.env`).
    pub in_file: bool,
    /// Set in the environment of the `cyclix check` process (a shell's, which a run started
    /// by the user manager does not see).
    pub in_shell: bool,
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
pub fn gather(input: &GatherInput<'_>) -> CheckFacts {
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
        let dbus = dbus_thread
            .join()
            .unwrap_or_else(|_| DbusSide::failed("the D-Bus probe thread panicked"));
        let mut storage = storage.clone();
        if let Some(Ok(info)) = &podman.info
            && !info.graph_driver.is_empty()
        {
            storage.driver = Some(info.graph_driver.clone());
            storage.source = "podman info".to_string();
        }
        CheckFacts {
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
            manager_env: dbus.manager_env,
            user_unit: dbus.user_unit,
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
            host_tools: host_tools(&input.search_path),
            storage,
            info: podman.info,
            uid_map: podman.uid_map,
            tenants: podman.tenants,
            outcome: podman.outcome,
            gvisor: crate::host::facts::gvisor::look(),
            gvisor_proof: podman.gvisor_proof,
        }
    })
}

pub(crate) fn is_executable_file(p: &Path) -> bool {
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The programs cyclix runs on the host by name from `$PATH`: `git` (each run's private
/// repository, the import and the delivery: `src/git*`), `setpriv` and `nsenter` (util-linux:
/// a build runs in its holder's network namespace, `src/podman/build_net.rs`).
pub const HOST_TOOLS: &[&str] = &["git", "setpriv", "nsenter"];

/// Each of [`HOST_TOOLS`] with its path in `dirs` (`None`: not there).
fn host_tools(dirs: &[PathBuf]) -> Vec<(&'static str, Option<String>)> {
    HOST_TOOLS.iter().map(|n| (*n, which(n, dirs))).collect()
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

#[cfg(test)]
mod tests {
    use super::manager::dbus_facts;
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

#[cfg(test)]
mod generator_tests {
    use super::{QUADLET_GENERATOR, first_generator};
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn the_first_generator_of_its_name_decides_and_a_masked_one_is_none() {
        let d = tempfile::tempdir().expect("tempdir");
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        for dir in [&a, &b] {
            std::fs::create_dir_all(dir).expect("dir");
        }
        let real = b.join(QUADLET_GENERATOR);
        std::fs::write(&real, "#!/bin/sh\n").expect("generator");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o755)).expect("mode");
        let dirs = [a.to_str().expect("utf-8"), b.to_str().expect("utf-8")];
        // Only the second directory has one: it is the one.
        assert_eq!(first_generator(&dirs), real.to_str().map(String::from));
        // The first directory masks it (a link to /dev/null): none, not the second one.
        std::os::unix::fs::symlink("/dev/null", a.join(QUADLET_GENERATOR)).expect("mask");
        assert_eq!(first_generator(&dirs), None);
        // Not executable: none either.
        std::fs::remove_file(a.join(QUADLET_GENERATOR)).expect("unmask");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).expect("mode");
        assert_eq!(first_generator(&dirs), None);
    }
}
