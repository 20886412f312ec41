//! Table-driven tests of every check from fixture facts: one healthy host (the testbed as
//! `cyclix check` saw it), then one mutation per row with the expected status of one check.

use super::*;
use crate::host::facts::{
    CgroupFacts, OutcomeFacts, PodmanFacts, QuadletFacts, RuntimeDirFacts, StepFacts, StorageFacts,
    SubIdEntry,
};
use crate::podman::PodmanInfo;
use crate::spec::{self, SpecContext};

const PINNED: &str =
    "ghcr.io/acme/agent@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn spec_yaml(name: &str, extra_agent: &str, tail: &str) -> String {
    format!(
        "tenant: {name}\nrepo: {{ path: ~/src/{name}, base: main }}\ntask: {{ text: hi }}\n\
         agent:\n  image: {PINNED}\n  command: [run]\n{extra_agent}gate:\n  image: {PINNED}\n  \
         command: [test]\n{tail}"
    )
}

fn tenant(name: &str, yaml: &str) -> TenantFacts {
    let ctx = SpecContext {
        file: format!("{name}.yaml"),
        home: "/home/cyx".into(),
        runtime_dir: "/run/user/1000".into(),
    };
    let spec = spec::parse(yaml, &ctx).map_err(|e| e.to_string());
    let images = spec
        .as_ref()
        .map(|s| {
            crate::host::facts::needed_images(s)
                .into_iter()
                .map(|(role, reference, pinned)| ImageFact {
                    role,
                    reference,
                    pinned,
                    present: Ok(true),
                })
                .collect()
        })
        .unwrap_or_default();
    TenantFacts {
        name: name.into(),
        file: format!("/home/cyx/.config/cyclix/tenants/{name}.yaml"),
        spec,
        images,
    }
}

fn subids(lines: &[(&str, u64, u64)], file: &str) -> SubIds {
    SubIds {
        file: file.into(),
        entries: Ok(lines
            .iter()
            .map(|(o, s, c)| SubIdEntry {
                owner: (*o).into(),
                start: *s,
                count: *c,
            })
            .collect()),
    }
}

fn step(exit: i32, output: &str, ms: u64) -> StepFacts {
    StepFacts {
        exit: Some(exit),
        output: output.into(),
        elapsed_ms: ms,
    }
}

/// The testbed as `cyclix check` (full mode) saw it, with one tenant.
fn good() -> HostFacts {
    let mapper = |name: &str| IdMapper {
        name: name.into(),
        path: Some(format!("/usr/bin/{name}")),
        setuid_root: true,
        caps: None,
    };
    HostFacts {
        quick: false,
        uid: 1000,
        user: "cyx".into(),
        runtime_dir: RuntimeDirFacts {
            value: Some("/run/user/1000".into()),
            is_dir: true,
            owner: Some(1000),
            mode: Some(0o700),
        },
        podman: PodmanFacts {
            path: Some("/usr/bin/podman".into()),
            version: Some(Ok("5.4.2".into())),
            version_cached: false,
        },
        quadlet: QuadletFacts {
            searched: crate::host::facts::USER_GENERATOR_DIRS
                .iter()
                .map(|d| (*d).to_string())
                .collect(),
            generator: Some("/usr/lib/systemd/user-generators/podman-user-generator".into()),
            version: Some(Ok("5.4.2".into())),
            dryrun: Some(Ok(true)),
        },
        manager_version: Ok("257.13-1~deb13u1".into()),
        linger: Ok(true),
        network_online: Ok("active".into()),
        subuid: subids(&[("cyx", 200_000, 65_536)], "/etc/subuid"),
        subgid: subids(&[("cyx", 200_000, 65_536)], "/etc/subgid"),
        newuidmap: mapper("newuidmap"),
        newgidmap: mapper("newgidmap"),
        cgroup: CgroupFacts {
            fs_type: Some("cgroup2".into()),
            file: "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/cgroup.controllers"
                .into(),
            delegated: Ok(vec!["cpu".into(), "memory".into(), "pids".into()]),
        },
        oci_runtimes: vec!["/usr/bin/crun".into()],
        netavark: Some("/usr/lib/podman/netavark".into()),
        aardvark_dns: Some("/usr/lib/podman/aardvark-dns".into()),
        pasta: Some("/usr/bin/pasta".into()),
        slirp4netns: None,
        storage: StorageFacts {
            driver: Some("overlay".into()),
            source: "podman info".into(),
            graphroot: "/home/cyx/.local/share/containers/storage".into(),
        },
        info: Some(Ok(PodmanInfo {
            version: "5.4.2".into(),
            oci_runtime: "crun".into(),
            oci_runtime_path: "/usr/bin/crun".into(),
            network_backend: "netavark".into(),
            dns_path: "/usr/lib/podman/aardvark-dns".into(),
            pasta: "/usr/bin/pasta".into(),
            slirp4netns: String::new(),
            cgroup_manager: "systemd".into(),
            cgroup_version: "v2".into(),
            cgroup_controllers: vec![],
            rootless: true,
            graph_driver: "overlay".into(),
            graph_root: "/srv/podman/storage".into(),
            run_root: "/run/user/1000/containers".into(),
            volume_path: "/srv/podman/storage/volumes".into(),
        })),
        uid_map: Some(Ok(vec!["0 1000 1".into(), "1 200000 65536".into()])),
        tenants: vec![tenant("acme", &spec_yaml("acme", "", ""))],
        outcome: Some(Ok(OutcomeFacts {
            nonce: "abc".into(),
            image: "docker.io/library/busybox:latest".into(),
            network: "cyclix-check-abc".into(),
            control: step(0, "", 120),
            probe: step(
                1,
                "wget: can't connect to remote host (192.0.2.1): Network is unreachable",
                90,
            ),
            leftovers: vec![],
            cleanup_error: None,
            elapsed_ms: 600,
        })),
    }
}

fn status_of(checks: &[Check], id: &str) -> Status {
    checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check {id}"))
        .status
}

#[test]
fn a_healthy_host_passes_every_check() {
    let c = checks(&good(), &CheckOptions::default());
    for check in &c {
        assert_eq!(check.status, Status::Pass, "{check:?}");
        assert!(check.fix.is_none(), "{check:?}");
    }
    let ids: Vec<&str> = c.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "podman",
            "quadlet",
            "rootless",
            "runtime-dir",
            "user-manager",
            "linger",
            "subuid",
            "subgid",
            "newuidmap",
            "newgidmap",
            "cgroup-v2",
            "cgroup-delegation",
            "oci-runtime",
            "network-backend",
            "rootless-network",
            "storage-driver",
            "podman-info",
            "network-online",
            "spec:acme",
            "images:acme",
            "outcome",
        ],
        "the ids and their order are part of the JSON schema"
    );
}

type Mutation = fn(&mut HostFacts);

/// (row name, mutation, check id, expected status, text the found/fix must contain).
#[allow(clippy::too_many_lines)] // one row per case
fn table() -> Vec<(&'static str, Mutation, &'static str, Status, &'static str)> {
    vec![
        // podman
        (
            "podman missing",
            |f| {
                f.podman = PodmanFacts::default();
            },
            "podman",
            Status::Fail,
            "not on $PATH",
        ),
        (
            "podman --version fails",
            |f| f.podman.version = Some(Err("boom".into())),
            "podman",
            Status::Fail,
            "boom",
        ),
        (
            "podman 4.2 is below the floor",
            |f| f.podman.version = Some(Ok("4.2.0".into())),
            "podman",
            Status::Fail,
            "older than cyclix's floor 4.3",
        ),
        (
            "podman 4.3 runs plain units",
            |f| f.podman.version = Some(Ok("4.3.1".into())),
            "podman",
            Status::Warn,
            "plain units",
        ),
        (
            "podman 5.0.0-rc1 is Quadlet",
            |f| f.podman.version = Some(Ok("5.0.0-rc1".into())),
            "podman",
            Status::Pass,
            "5.0.0-rc1",
        ),
        (
            "B09 podman blocked by a foreign runtime dir",
            |f| {
                f.runtime_dir.value = Some("/run/user/0".into());
                f.podman.version = Some(Err(
                    "Failed to obtain podman configuration: mkdir /run/user/0/libpod: permission denied".into(),
                ));
            },
            "podman",
            Status::Skip,
            "see runtime-dir",
        ),
        // quadlet (B01)
        (
            "B01 generator missing with podman 5",
            |f| {
                f.quadlet.generator = None;
                f.quadlet.version = None;
            },
            "quadlet",
            Status::Fail,
            "/usr/lib/systemd/user-generators",
        ),
        (
            "generator missing with podman 4.3",
            |f| {
                f.quadlet.generator = None;
                f.quadlet.version = None;
                f.podman.version = Some(Ok("4.3.1".into()));
            },
            "quadlet",
            Status::Warn,
            "plain units",
        ),
        (
            "B01 generator emits no unit",
            |f| f.quadlet.dryrun = Some(Ok(false)),
            "quadlet",
            Status::Fail,
            "no probe.service",
        ),
        (
            "generator dry run fails",
            |f| f.quadlet.dryrun = Some(Err("exit 1".into())),
            "quadlet",
            Status::Fail,
            "dry run failed",
        ),
        (
            "generator broken",
            |f| f.quadlet.version = Some(Err("exec format error".into())),
            "quadlet",
            Status::Fail,
            "exec format error",
        ),
        // rootless
        (
            "root",
            |f| f.uid = 0,
            "rootless",
            Status::Fail,
            "unprivileged user",
        ),
        (
            "uid unreadable",
            |f| f.uid = u32::MAX,
            "rootless",
            Status::Fail,
            "/proc/self/status",
        ),
        // runtime dir (B09)
        (
            "B09 runtime dir unset",
            |f| f.runtime_dir.value = None,
            "runtime-dir",
            Status::Fail,
            "unset",
        ),
        (
            "B09 runtime dir of root (su)",
            |f| {
                f.runtime_dir.value = Some("/run/user/0".into());
                f.runtime_dir.owner = Some(0);
            },
            "runtime-dir",
            Status::Fail,
            "/run/user/0 (owned by uid 0), not /run/user/1000",
        ),
        (
            "runtime dir missing",
            |f| {
                f.runtime_dir.is_dir = false;
                f.runtime_dir.owner = None;
            },
            "runtime-dir",
            Status::Fail,
            "does not exist",
        ),
        (
            "runtime dir owned by another",
            |f| f.runtime_dir.owner = Some(1001),
            "runtime-dir",
            Status::Fail,
            "owned by uid 1001",
        ),
        (
            "runtime dir open to others",
            |f| f.runtime_dir.mode = Some(0o755),
            "runtime-dir",
            Status::Warn,
            "chmod 0700",
        ),
        // user manager (B09)
        (
            "B09 user bus unreachable",
            |f| f.manager_version = Err("no such file".into()),
            "user-manager",
            Status::Fail,
            "loginctl enable-linger cyx",
        ),
        // linger (B08)
        (
            "B08 no linger, scheduled tenant",
            |f| {
                f.linger = Ok(false);
                f.tenants = vec![tenant(
                    "nightly",
                    &spec_yaml(
                        "nightly",
                        "",
                        "schedule: { on_calendar: \"*-*-* 02:00:00\" }\n",
                    ),
                )];
            },
            "linger",
            Status::Fail,
            "loginctl enable-linger cyx",
        ),
        (
            "no linger, on-demand tenants only",
            |f| f.linger = Ok(false),
            "linger",
            Status::Warn,
            "session-bound",
        ),
        (
            "linger unreadable, scheduled tenant",
            |f| {
                f.linger = Err("no system bus".into());
                f.tenants = vec![tenant(
                    "nightly",
                    &spec_yaml("nightly", "", "schedule: { on_calendar: daily }\n"),
                )];
            },
            "linger",
            Status::Fail,
            "no system bus",
        ),
        (
            "linger unreadable",
            |f| f.linger = Err("no system bus".into()),
            "linger",
            Status::Warn,
            "no system bus",
        ),
        // sub-ids (B10)
        (
            "B10 no subuid line",
            |f| f.subuid = subids(&[("other", 100_000, 65_536)], "/etc/subuid"),
            "subuid",
            Status::Fail,
            "sudo usermod --add-subuids 196608-262143 cyx",
        ),
        (
            "B10 subgid range too small",
            |f| f.subgid = subids(&[("cyx", 200_000, 1000)], "/etc/subgid"),
            "subgid",
            Status::Fail,
            "1000 ids",
        ),
        (
            "B10 podman maps a single id",
            |f| f.uid_map = Some(Ok(vec!["0 1000 1".into()])),
            "subuid",
            Status::Fail,
            "podman system migrate",
        ),
        (
            "subuid by numeric uid",
            |f| f.subuid = subids(&[("1000", 200_000, 65_536)], "/etc/subuid"),
            "subuid",
            Status::Pass,
            "65536 ids",
        ),
        (
            "subuid split in two ranges",
            |f| {
                f.subuid = subids(
                    &[("cyx", 200_000, 32_768), ("cyx", 300_000, 32_768)],
                    "/etc/subuid",
                );
            },
            "subuid",
            Status::Pass,
            "65536 ids",
        ),
        (
            "subuid overlaps another user",
            |f| {
                f.subuid = subids(
                    &[("cyx", 200_000, 65_536), ("tst", 250_000, 65_536)],
                    "/etc/subuid",
                );
            },
            "subuid",
            Status::Fail,
            "overlaps tst's range 250000-315535",
        ),
        (
            "subgid file missing",
            |f| {
                f.subgid = SubIds {
                    file: "/etc/subgid".into(),
                    entries: Err("reading /etc/subgid: No such file".into()),
                }
            },
            "subgid",
            Status::Fail,
            "--add-subgids",
        ),
        // newuidmap / newgidmap (B10)
        (
            "B10 newuidmap without setuid or caps",
            |f| {
                f.newuidmap.setuid_root = false;
                f.newuidmap.caps = Some(Ok(String::new()));
            },
            "newuidmap",
            Status::Fail,
            "neither setuid root nor has cap_setuid",
        ),
        (
            "newuidmap with file caps",
            |f| {
                f.newuidmap.setuid_root = false;
                f.newuidmap.caps = Some(Ok("cap_setuid=ep".into()));
            },
            "newuidmap",
            Status::Pass,
            "cap_setuid=ep",
        ),
        (
            "newgidmap with the wrong cap",
            |f| {
                f.newgidmap.setuid_root = false;
                f.newgidmap.caps = Some(Ok("cap_setuid=ep".into()));
            },
            "newgidmap",
            Status::Fail,
            "cap_setgid",
        ),
        (
            "newgidmap caps unreadable",
            |f| {
                f.newgidmap.setuid_root = false;
                f.newgidmap.caps = Some(Err("getcap is not installed".into()));
            },
            "newgidmap",
            Status::Fail,
            "getcap is not installed",
        ),
        (
            "newgidmap missing",
            |f| {
                f.newgidmap.path = None;
                f.newgidmap.setuid_root = false;
            },
            "newgidmap",
            Status::Fail,
            "apt install uidmap",
        ),
        // cgroups (B09)
        (
            "cgroup v1",
            |f| f.cgroup.fs_type = Some("tmpfs".into()),
            "cgroup-v2",
            Status::Fail,
            "systemd.unified_cgroup_hierarchy=1",
        ),
        (
            "B09 limits asked, nothing delegated",
            |f| {
                f.cgroup.delegated = Ok(vec![]);
                f.tenants = vec![tenant(
                    "big",
                    &spec_yaml("big", "  resources: { memory: 2G, pids: 512 }\n", ""),
                )];
            },
            "cgroup-delegation",
            Status::Fail,
            "big: memory, big: pids",
        ),
        (
            "nothing delegated, no limits asked",
            |f| f.cgroup.delegated = Ok(vec![]),
            "cgroup-delegation",
            Status::Pass,
            "none (not cpu, memory, pids",
        ),
        (
            "delegation unreadable",
            |f| f.cgroup.delegated = Err("no such file".into()),
            "cgroup-delegation",
            Status::Warn,
            "Delegate=",
        ),
        // runtime, network, storage
        (
            "no OCI runtime (quick)",
            |f| {
                f.oci_runtimes.clear();
                f.info = None;
                f.quick = true;
            },
            "oci-runtime",
            Status::Fail,
            "apt install crun",
        ),
        (
            "runc only (quick)",
            |f| {
                f.oci_runtimes = vec!["/usr/bin/runc".into()];
                f.info = None;
                f.quick = true;
            },
            "oci-runtime",
            Status::Pass,
            "runc",
        ),
        (
            "no aardvark-dns",
            |f| f.aardvark_dns = None,
            "network-backend",
            Status::Fail,
            "missing: aardvark-dns",
        ),
        (
            "CNI backend",
            |f| {
                if let Some(Ok(i)) = &mut f.info {
                    i.network_backend = "cni".into();
                }
            },
            "network-backend",
            Status::Fail,
            "cni",
        ),
        (
            "slirp4netns only",
            |f| {
                f.pasta = None;
                f.slirp4netns = Some("/usr/bin/slirp4netns".into());
            },
            "rootless-network",
            Status::Pass,
            "slirp4netns",
        ),
        (
            "no rootless network",
            |f| f.pasta = None,
            "rootless-network",
            Status::Fail,
            "apt install passt",
        ),
        (
            "vfs storage",
            |f| f.storage.driver = Some("vfs".into()),
            "storage-driver",
            Status::Warn,
            "driver = \"overlay\"",
        ),
        // podman info (B09)
        (
            "podman info skipped in quick mode",
            |f| {
                f.quick = true;
                f.info = None;
            },
            "podman-info",
            Status::Skip,
            "--quick",
        ),
        (
            "podman info fails",
            |f| f.info = Some(Err("cannot set up namespace".into())),
            "podman-info",
            Status::Fail,
            "cannot set up namespace",
        ),
        (
            "B09 cgroupfs manager",
            |f| {
                if let Some(Ok(i)) = &mut f.info {
                    i.cgroup_manager = "cgroupfs".into();
                }
            },
            "podman-info",
            Status::Warn,
            "cgroupfs",
        ),
        // network-online (B07)
        (
            "B07 network-online inactive",
            |f| f.network_online = Ok("inactive".into()),
            "network-online",
            Status::Warn,
            "systemd-networkd-wait-online",
        ),
        (
            "network-online irrelevant before 5.3",
            |f| {
                f.network_online = Ok("inactive".into());
                f.podman.version = Some(Ok("5.2.0".into()));
            },
            "network-online",
            Status::Skip,
            "5.3",
        ),
        // spec + tier gate
        (
            "invalid spec",
            |f| f.tenants = vec![tenant("bad", "tenant: bad\nbogus: 1\n")],
            "spec:bad",
            Status::Fail,
            "cyclix spec validate",
        ),
        (
            "container tier without runtime is a FAIL",
            |f| f.podman = PodmanFacts::default(),
            "spec:acme",
            Status::Fail,
            "tier `container` is configured but no usable container runtime",
        ),
        (
            "container tier when no container starts",
            |f| {
                if let Some(Ok(o)) = &mut f.outcome {
                    o.control = step(126, "crun: permission denied", 50);
                }
            },
            "spec:acme",
            Status::Fail,
            "a container did not start",
        ),
        (
            "worktree tier without runtime is allowed",
            |f| {
                f.podman = PodmanFacts::default();
                f.tenants = vec![tenant("wt", &spec_yaml("wt", "", "tier: worktree\n"))];
            },
            "spec:wt",
            Status::Warn,
            "tier worktree",
        ),
        // images
        (
            "image missing",
            |f| f.tenants[0].images[0].present = Ok(false),
            "images:acme",
            Status::Fail,
            "podman pull ghcr.io/acme/agent@sha256:",
        ),
        (
            "proxy image missing",
            |f| {
                let last = f.tenants[0].images.len() - 1;
                f.tenants[0].images[last].present = Ok(false);
            },
            "images:acme",
            Status::Fail,
            "cyclix images build",
        ),
        (
            "image presence unknown",
            |f| f.tenants[0].images[0].present = Err("podman failed".into()),
            "images:acme",
            Status::Fail,
            "podman failed",
        ),
        (
            "unpinned local image",
            |f| {
                f.tenants[0].images[0].pinned = false;
            },
            "images:acme",
            Status::Warn,
            "not pinned",
        ),
        (
            "tier without containers",
            |f| f.tenants = vec![tenant("wt", &spec_yaml("wt", "", "tier: worktree\n"))],
            "images:wt",
            Status::Skip,
            "no containers",
        ),
        // outcome
        (
            "outcome skipped in quick mode",
            |f| {
                f.quick = true;
                f.outcome = None;
            },
            "outcome",
            Status::Skip,
            "--quick",
        ),
        (
            "outcome could not run",
            |f| f.outcome = Some(Err("no probe image".into())),
            "outcome",
            Status::Fail,
            "no probe image",
        ),
        (
            "outcome: container does not start",
            |f| {
                if let Some(Ok(o)) = &mut f.outcome {
                    o.control = step(126, "OCI runtime error", 40);
                }
            },
            "outcome",
            Status::Fail,
            "OCI runtime error",
        ),
        (
            "outcome: reached outside",
            |f| {
                if let Some(Ok(o)) = &mut f.outcome {
                    o.probe = step(0, "connected", 30);
                }
            },
            "outcome",
            Status::Fail,
            "reached 192.0.2.1",
        ),
        (
            "outcome: dropped, not rejected",
            |f| {
                if let Some(Ok(o)) = &mut f.outcome {
                    o.probe = step(1, "wget: download timed out", 5000);
                }
            },
            "outcome",
            Status::Fail,
            "did not fail fast",
        ),
        (
            "outcome: leftovers",
            |f| {
                if let Some(Ok(o)) = &mut f.outcome {
                    o.leftovers = vec!["network cyclix-check-abc".into()];
                }
            },
            "outcome",
            Status::Fail,
            "podman network rm",
        ),
        (
            "outcome without podman is a failure, not a skip",
            |f| {
                f.podman = PodmanFacts::default();
                f.info = None;
                f.outcome = None;
            },
            "outcome",
            Status::Fail,
            "cannot run: podman is not on $PATH",
        ),
        (
            "outcome: no probe tool in the image",
            |f| {
                if let Some(Ok(o)) = &mut f.outcome {
                    o.probe = step(3, "no probe tool (python3, wget)", 40);
                }
            },
            "outcome",
            Status::Fail,
            "podman pull docker.io/library/busybox:latest",
        ),
        (
            "runtime dir with a trailing slash",
            |f| f.runtime_dir.value = Some("/run/user/1000/".into()),
            "runtime-dir",
            Status::Pass,
            "/run/user/1000/",
        ),
        (
            "podman version from the cache",
            |f| f.podman.version_cached = true,
            "podman",
            Status::Pass,
            "remembered for this exact binary",
        ),
    ]
}

#[test]
fn every_check_pass_warn_fail_from_fixture_facts() {
    for (row, mutate, id, want, text) in table() {
        let mut f = good();
        mutate(&mut f);
        let c = checks(&f, &CheckOptions::default());
        let check = c
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("{row}: no check {id} in {c:#?}"));
        assert_eq!(check.status, want, "{row}: {check:#?}");
        let all = format!("{} {}", check.found, check.fix.as_deref().unwrap_or(""));
        assert!(all.contains(text), "{row}: {text:?} not in {all:?}");
        if matches!(want, Status::Warn | Status::Fail) {
            assert!(check.fix.is_some(), "{row}: a {want:?} without a fix");
        }
    }
}

#[test]
fn a_fault_fails_only_its_own_check() {
    // The fault-injection rows of issue 4, each on an otherwise healthy host.
    let rows: [(&str, Mutation, &str); 6] = [
        (
            "no subuid line",
            |f| f.subuid = subids(&[], "/etc/subuid"),
            "subuid",
        ),
        (
            "small subgid",
            |f| f.subgid = subids(&[("cyx", 200_000, 10)], "/etc/subgid"),
            "subgid",
        ),
        (
            "newuidmap",
            |f| {
                f.newuidmap.setuid_root = false;
                f.newuidmap.caps = Some(Ok(String::new()));
            },
            "newuidmap",
        ),
        (
            "generator",
            |f| {
                f.quadlet.generator = None;
                f.quadlet.version = None;
            },
            "quadlet",
        ),
        (
            "runtime dir",
            |f| {
                f.runtime_dir.value = Some("/run/user/1001".into());
                f.runtime_dir.owner = Some(1001);
            },
            "runtime-dir",
        ),
        (
            "image",
            |f| f.tenants[0].images[1].present = Ok(false),
            "images:acme",
        ),
    ];
    for (row, mutate, id) in rows {
        let mut f = good();
        mutate(&mut f);
        let failed: Vec<String> = checks(&f, &CheckOptions::default())
            .into_iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| c.id)
            .collect();
        assert_eq!(failed, [id], "{row}");
    }
}

#[test]
fn missing_tenant_named_with_tenant_is_a_fail() {
    let c = checks(
        &good(),
        &CheckOptions {
            tenant: Some("ghost".into()),
        },
    );
    assert_eq!(status_of(&c, "spec:ghost"), Status::Fail);
}

#[test]
fn versions_parse_leniently() {
    assert_eq!(parse_version("5.4.2"), Some((5, 4, 2)));
    assert_eq!(parse_version("4.3.1-dev"), Some((4, 3, 1)));
    assert_eq!(parse_version("5.0.0-rc1"), Some((5, 0, 0)));
    assert_eq!(parse_version("5"), Some((5, 0, 0)));
    assert_eq!(parse_version("dev"), None);
}

#[test]
fn statuses_serialise_lowercase() {
    let c = Check::skip("x", "why");
    assert_eq!(
        serde_json::to_value(&c).expect("json"),
        serde_json::json!({"id": "x", "status": "skip", "found": "why", "fix": null})
    );
}

#[test]
fn field_reports_b01_b07_b08_b09_b10_each_have_rows() {
    let rows = table();
    for b in ["B01", "B07", "B08", "B09", "B10"] {
        assert!(
            rows.iter().any(|(name, ..)| name.starts_with(b)),
            "no row for field report {b}"
        );
    }
}

/// Issue 11: `spec validate` cannot know podman's real storage; `check` compares the mounts
/// with `podman info`'s graph root (or, without it, the configured one) and FAILs `spec:T`.
#[test]
fn a_mount_into_podmans_storage_from_facts_fails_the_spec_check() {
    let mounts = "mounts:\n  - { source: /srv/data, target: /mnt/data }\n  - { source: /srv/podman/storage/volumes/v, target: /mnt/v }\n";
    let mut f = good();
    f.tenants = vec![tenant("acme", &spec_yaml("acme", "", mounts))];
    let all = checks(&f, &CheckOptions::default());
    let c = all
        .iter()
        .find(|c| c.id == "spec:acme")
        .expect("spec check");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        c.found.starts_with(
            "/home/cyx/.config/cyclix/tenants/acme.yaml:12:15: mounts[1].source: mount source `/srv/podman/storage/volumes/v` lies inside podman's volume storage `/srv/podman/storage/volumes`"
        ),
        "{c:?}"
    );
    assert!(c.found.contains("\n  fix: mount a directory"), "{c:?}");
    assert!(
        c.fix
            .as_deref()
            .is_some_and(|x| x.starts_with("mount a directory")),
        "{c:?}"
    );
    // --quick: no `podman info`; the configured graph root decides.
    let mut q = good();
    q.info = None;
    q.storage.graphroot = "/var/lib/alt".into();
    q.tenants = vec![tenant(
        "acme",
        &spec_yaml(
            "acme",
            "",
            "mounts:\n  - { source: /var/lib/alt/overlay, target: /mnt/v }\n",
        ),
    )];
    let all = checks(&q, &CheckOptions::default());
    let c = all
        .iter()
        .find(|c| c.id == "spec:acme")
        .expect("spec check");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(c.found.contains(":11:15: mounts[0].source: mount source `/var/lib/alt/overlay` lies inside podman's storage (graph root"), "{c:?}");
    // A plain data directory stays a PASS.
    let mut ok = good();
    ok.tenants = vec![tenant(
        "acme",
        &spec_yaml(
            "acme",
            "",
            "mounts:\n  - { source: ~/datasets/x, target: /mnt/x }\n",
        ),
    )];
    let all = checks(&ok, &CheckOptions::default());
    assert_eq!(status_of(&all, "spec:acme"), Status::Pass);
}
