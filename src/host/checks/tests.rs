//! Table-driven tests of every check from fixture facts: one healthy host (the testbed as
//! `cyclix check` saw it), then one mutation per row with the expected status of one check.

mod rows_account;
mod rows_cgroups;
mod rows_gvisor;
mod rows_podman;
mod rows_tenants;
mod tools_and_pins;

use super::*;
use crate::host::facts::{
    CgroupFacts, CheckFacts, GvisorProof, IdMapper, ImageFact, OutcomeFacts, PodmanFacts,
    QuadletFacts, RuntimeDirFacts, StepFacts, StorageFacts, SubIdEntry, SubIds, TenantFacts,
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

/// [`spec_yaml`] with a gate that protects its tests and writes `JUnit` to `$CYCLIX_RESULTS`.
fn guarded_yaml(name: &str) -> String {
    spec_yaml(name, "", "").replace(
        "  command: [test]\n",
        "  command: [sh, -c, 'pytest --junitxml=\"$CYCLIX_RESULTS\"']\n  protected: [tests/]\n",
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
        env: Vec::new(),
        base: None,
        keeper: None,
        task: None,
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
fn good() -> CheckFacts {
    let mapper = |name: &str| IdMapper {
        name: name.into(),
        path: Some(format!("/usr/bin/{name}")),
        setuid_root: true,
        caps: None,
    };
    CheckFacts {
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
        manager_env: Ok(Vec::new()),
        user_unit: None,
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
        host_tools: crate::host::facts::HOST_TOOLS
            .iter()
            .map(|n| (*n, Some(format!("/usr/bin/{n}"))))
            .collect(),
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
        tenants: vec![tenant("acme", &guarded_yaml("acme"))],
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
        gvisor: Ok(runsc(&[
            crate::tier::runsc::NETWORK_HOST,
            crate::tier::runsc::HOST_FIFO_OPEN,
        ])),
        gvisor_proof: Some(Ok(proof("4.4.0"))),
    }
}

/// Debian's runsc with `flags`.
fn runsc(flags: &[&str]) -> crate::tier::runsc::OciRuntime {
    crate::tier::runsc::OciRuntime {
        path: "/usr/bin/runsc".into(),
        version: "0.0~20240729.0".into(),
        flags: flags.iter().map(|f| (*f).to_string()).collect(),
    }
}

/// A gVisor proof whose container printed `kernel` on a host running 6.12.48.
fn proof(kernel: &str) -> GvisorProof {
    GvisorProof {
        nonce: "def".into(),
        image: "docker.io/library/busybox:latest".into(),
        options: runsc(&[crate::tier::runsc::NETWORK_HOST])
            .podman_args()
            .into_iter()
            .chain(
                crate::host::facts::PROOF_OPTIONS
                    .iter()
                    .map(|o| (*o).to_string()),
            )
            .collect(),
        run: step(0, kernel, 450),
        kernel: kernel.into(),
        host_kernel: "6.12.48+deb13-amd64".into(),
        leftovers: vec![],
        cleanup_error: None,
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
            "gvisor",
            "network-backend",
            "rootless-network",
            "storage-driver",
            "podman-info",
            "network-online",
            "host-tools",
            "spec:acme",
            "images:acme",
            "gate:acme",
            "outcome",
        ],
        "the ids and their order are part of the JSON schema"
    );
}
type Mutation = fn(&mut CheckFacts);

/// (row name, mutation, check id, expected status, text the found/fix must contain).
type Row = (&'static str, Mutation, &'static str, Status, &'static str);

/// Every row, family by family (`tests/rows_*.rs`).
fn table() -> Vec<Row> {
    [
        rows_podman::podman_rows(),
        rows_account::account_rows(),
        rows_cgroups::cgroup_rows(),
        rows_podman::runtime_rows(),
        rows_gvisor::gvisor_rows(),
        rows_account::network_online_rows(),
        rows_tenants::tenant_rows(),
    ]
    .concat()
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

/// A claude-code preset tenant: the preset's own (local) image and its credential variable
/// `ANTHROPIC_API_KEY`, found where `where_` says.
fn preset_tenant(in_file: bool, in_shell: bool) -> TenantFacts {
    let yaml = format!(
        "tenant: shop\nrepo: {{ path: ~/src/shop, base: main }}\ntask: {{ text: hi }}\n\
         agent:\n  preset: claude-code\ngate:\n  image: {PINNED}\n  command: [test]\n"
    );
    let mut t = tenant("shop", &yaml);
    let spec = t.spec.as_ref().expect("the preset spec is valid");
    t.env = spec
        .agent
        .credentials
        .iter()
        .enumerate()
        .map(|(i, c)| crate::host::facts::EnvNeed {
            key: format!("agent.credentials[{i}].env"),
            line: Some(c.line),
            name: c.env.clone(),
            in_file,
            in_shell,
        })
        .collect();
    assert!(!t.env.is_empty(), "the preset declares its credential");
    t
}

#[test]
fn a_credential_variable_set_nowhere_fails_env_and_only_in_the_shell_warns() {
    let with = |t: TenantFacts, manager: &[&str]| {
        let mut f = good();
        f.tenants = vec![t];
        f.manager_env = Ok(manager.iter().map(|m| (*m).to_string()).collect());
        checks(&f, &CheckOptions::default())
    };
    let nowhere = with(preset_tenant(false, false), &[]);
    let c = nowhere
        .iter()
        .find(|c| c.id == "env:shop")
        .expect("env:shop");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        c.found
            .contains("agent.credentials[0].env `ANTHROPIC_API_KEY`")
            && c.found.contains("shop.yaml:"),
        "names the file, line and key: {c:?}"
    );
    assert!(
        c.fix.as_deref().is_some_and(|f| f.contains("shop.env")),
        "{c:?}"
    );
    let shell = with(preset_tenant(false, true), &[]);
    assert_eq!(status_of(&shell, "env:shop"), Status::Warn);
    // Positive controls: the env file, or the user manager's environment, is where a run sees it.
    assert_eq!(
        status_of(&with(preset_tenant(true, false), &[]), "env:shop"),
        Status::Pass
    );
    assert_eq!(
        status_of(
            &with(preset_tenant(false, false), &["ANTHROPIC_API_KEY"]),
            "env:shop"
        ),
        Status::Pass
    );
    // The manager's environment unreadable: a variable in no file is not assumed present.
    let mut f = good();
    f.tenants = vec![preset_tenant(false, false)];
    f.manager_env = Err("bus down".into());
    let c = checks(&f, &CheckOptions::default());
    let env = c.iter().find(|c| c.id == "env:shop").expect("env:shop");
    assert_eq!(env.status, Status::Fail);
    assert!(env.found.contains("bus down"), "{env:?}");
}

#[test]
fn a_presets_own_image_is_not_reported_as_an_unpinned_local_image() {
    let mut f = good();
    f.tenants = vec![preset_tenant(true, false)];
    let c = checks(&f, &CheckOptions::default());
    let images = c
        .iter()
        .find(|c| c.id == "images:shop")
        .expect("images:shop");
    assert_eq!(images.status, Status::Pass, "{images:?}");
    assert!(
        images.found.contains("preset claude-code")
            && !images.found.contains("unpinned_local_image"),
        "{images:?}"
    );
}

#[test]
fn a_missing_preset_image_is_fixed_with_images_build_preset() {
    let mut t = preset_tenant(true, false);
    for i in &mut t.images {
        if i.role == "agent" {
            i.present = Ok(false);
        }
    }
    let mut f = good();
    f.tenants = vec![t];
    let c = checks(&f, &CheckOptions::default());
    let images = c
        .iter()
        .find(|c| c.id == "images:shop")
        .expect("images:shop");
    assert_eq!(images.status, Status::Fail, "{images:?}");
    assert!(
        images
            .fix
            .as_deref()
            .is_some_and(|f| f.starts_with("`cyclix images build --preset claude-code`")),
        "{images:?}"
    );
}

#[test]
fn a_base_that_names_no_commit_fails_repo_and_one_that_does_passes() {
    let yaml = spec_yaml("acme", "", "");
    let mut t = tenant("acme", &yaml);
    t.base = Some(Err("ref `mian` does not exist in /home/cyx/src/acme".into()));
    let mut f = good();
    f.tenants = vec![t.clone()];
    let c = checks(&f, &CheckOptions::default());
    let repo = c.iter().find(|c| c.id == "repo:acme").expect("repo:acme");
    assert_eq!(repo.status, Status::Fail, "{repo:?}");
    assert!(
        repo.found
            .contains("acme.yaml: repo.base `main`: ref `mian` does not exist"),
        "{repo:?}"
    );
    assert!(
        repo.fix
            .as_deref()
            .is_some_and(|f| f.contains("branch --list")),
        "{repo:?}"
    );
    t.base = Some(Ok("0123456789abcdef0123456789abcdef01234567".into()));
    f.tenants = vec![t];
    let c = checks(&f, &CheckOptions::default());
    assert_eq!(status_of(&c, "repo:acme"), Status::Pass);
}

/// `check --tenant` passed a missing `task.file`, and the run then ended at once (issue 32
/// item 3): an unreadable one FAILs naming the spec file, the task file and a fix.
#[test]
fn a_task_file_that_does_not_read_fails_its_check_and_a_readable_one_passes() {
    let yaml = spec_yaml("acme", "", "").replace(
        "task: { text: hi }",
        "task: { file: /home/cyx/tasks/acme.md }",
    );
    let task_check = |read: crate::host::facts::Fact<()>| {
        let mut f = good();
        let mut t = tenant("acme", &yaml);
        t.task = Some(read);
        f.tenants = vec![t];
        checks(&f, &CheckOptions::default())
            .into_iter()
            .find(|c| c.id == "task:acme")
            .expect("a task check")
    };
    let bad = task_check(Err(
        "`/home/cyx/tasks/acme.md`: No such file or directory".into()
    ));
    assert_eq!(bad.status, Status::Fail, "{bad:?}");
    assert!(
        bad.found.contains("tenants/acme.yaml") && bad.found.contains("acme.md"),
        "{bad:?}"
    );
    assert!(
        bad.fix
            .as_deref()
            .is_some_and(|f| f.contains("task: { text")),
        "{bad:?}"
    );
    assert_eq!(task_check(Ok(())).status, Status::Pass);
}

/// `install`: passes when nothing would change, warns naming each change (at most
/// `DRIFT_SHOWN`, then how many more) with the fix.
#[test]
fn the_install_row_names_what_install_would_change() {
    assert_eq!(install_drift(&Ok(Vec::new())).status, Status::Pass);
    let many: Vec<String> = (0..10).map(|i| format!("change {i}")).collect();
    let w = install_drift(&Ok(many));
    assert_eq!(w.status, Status::Warn);
    assert!(
        w.found
            .starts_with("`cyclix install` would change 10 thing(s): change 0;")
            && w.found.ends_with("; and 2 more"),
        "{w:?}"
    );
    assert!(
        w.fix
            .as_deref()
            .is_some_and(|f| f.contains("cyclix install"))
    );
    assert_eq!(install_drift(&Err("boom".into())).status, Status::Warn);
}
