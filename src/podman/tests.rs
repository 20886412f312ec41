//! Parser tests against output captured from podman 5.4.2, and error messages.

use super::*;

const PS: &str = include_str!("../../tests/fixtures/podman/ps.json");
const POD_PS: &str = include_str!("../../tests/fixtures/podman/pod-ps.json");
const NETWORK_LS: &str = include_str!("../../tests/fixtures/podman/network-ls.json");
const VOLUME_LS: &str = include_str!("../../tests/fixtures/podman/volume-ls.json");
const VERSION: &str = include_str!("../../tests/fixtures/podman/version.json");
const SECRET_LS: &str = include_str!("../../tests/fixtures/podman/secret-ls.jsonl");
const EMPTY: &str = include_str!("../../tests/fixtures/podman/empty-list.json");

fn run_labels() -> Labels {
    [("io.cyclix.run", "r1"), ("io.cyclix.tenant", "acme")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn containers_from_podman_5_4() {
    let cs = parse_containers(PS).expect("parse");
    let names: Vec<(&str, &str, bool)> = cs
        .iter()
        .map(|c| (c.names[0].as_str(), c.state.as_str(), c.is_infra))
        .collect();
    assert_eq!(
        names,
        [
            ("c8728495906c-infra", "exited", true),
            ("cyclix-r1-agent", "running", false),
            ("cyclix-r1-gate", "created", false),
        ]
    );
    let agent = &cs[1];
    assert_eq!(
        agent.id,
        "9144f0b89dfafbb927f2b92a2d769a2f932edff00d62864b146082095d069c29"
    );
    assert_eq!(agent.labels, run_labels());
    assert_eq!(
        agent.pod.as_deref(),
        Some("c8728495906c6f5717722b112e73ec8cf37d92baf15e1f992b756164dfcd6f13")
    );
    assert_eq!(cs[2].pod, None);
    // The infra container also carries podman's own label.
    assert_eq!(
        cs[0].labels.get("io.buildah.version").map(String::as_str),
        Some("1.39.3")
    );
}

#[test]
fn pods_networks_volumes_from_podman_5_4() {
    let pods = parse_pods(POD_PS).expect("pods");
    assert_eq!(pods.len(), 1);
    assert_eq!(pods[0].name, "cyclix-r1");
    assert_eq!(pods[0].status, "Degraded");
    assert_eq!(pods[0].labels, run_labels());

    let nets = parse_networks(NETWORK_LS).expect("networks");
    assert_eq!(
        nets,
        [NetworkInfo {
            id: "5315be72fe89af5158592a39a28f0321f030ff9500565e6dc7a10b54c58f9e82".into(),
            name: "cyclix-r1-int".into(),
            internal: true,
            subnets: vec!["10.89.0.0/24".into()],
            labels: run_labels(),
        }]
    );

    let vols = parse_volumes(VOLUME_LS).expect("volumes");
    assert_eq!(
        vols,
        [VolumeInfo {
            name: "cyclix-r1-vol".into(),
            labels: run_labels(),
        }]
    );
}

#[test]
fn empty_and_null_lists() {
    assert!(parse_containers(EMPTY).expect("[]").is_empty());
    assert!(parse_pods(EMPTY).expect("[]").is_empty());
    assert!(parse_networks(EMPTY).expect("[]").is_empty());
    assert!(parse_volumes(EMPTY).expect("[]").is_empty());
    assert!(parse_containers("null").expect("null").is_empty());
    assert!(parse_volumes("").expect("empty").is_empty());
    assert!(parse_secret_names("").expect("empty").is_empty());
    // A container without labels: podman prints `"Labels": null`.
    let c = parse_containers(r#"[{"Id":"a","Names":["n"],"State":"created","Labels":null}]"#)
        .expect("null labels");
    assert!(c[0].labels.is_empty());
}

#[test]
fn version_and_secrets_from_podman_5_4() {
    assert_eq!(parse_version(VERSION).expect("version"), "5.4.2");
    assert_eq!(
        parse_secret_names(SECRET_LS).expect("secrets"),
        ["cyclix-r1-KEY"]
    );
}

#[test]
fn info_and_version_line_from_podman_5_4() {
    let info = parse_info(include_str!("../../tests/fixtures/podman/info.json")).expect("info");
    assert_eq!(info.version, "5.4.2");
    assert_eq!(info.oci_runtime, "crun");
    assert_eq!(info.network_backend, "netavark");
    assert_eq!(info.dns_path, "/usr/lib/podman/aardvark-dns");
    assert_eq!(info.pasta, "/usr/bin/pasta");
    assert_eq!(info.cgroup_manager, "systemd");
    assert_eq!(info.cgroup_version, "v2");
    assert!(info.rootless);
    assert_eq!(info.graph_driver, "overlay");
    assert_eq!(info.graph_root, "/home/cyx/.local/share/containers/storage");
    assert_eq!(info.run_root, "/run/user/1000/containers");
    assert_eq!(
        info.volume_path,
        "/home/cyx/.local/share/containers/storage/volumes"
    );
    assert!(parse_info("[]").is_err());
    assert_eq!(
        parse_version_line("podman version 5.4.2\n").as_deref(),
        Some("5.4.2")
    );
    assert_eq!(
        parse_version_line("podman version 4.3.1").as_deref(),
        Some("4.3.1")
    );
    assert_eq!(parse_version_line("docker version 20"), None);
    assert_eq!(parse_version_line(""), None);
}

#[test]
fn wrong_shapes_are_errors() {
    assert!(parse_containers(r#"{"Id":"x"}"#).is_err());
    assert!(parse_pods(r#"[{"Name":"p"}]"#).is_err());
    assert!(parse_version("json").is_err());
    // What `podman secret ls --format json` really prints on 5.4.
    assert!(parse_secret_names("json\n").is_err());
}

#[test]
fn missing_podman_names_the_fix() {
    let p = Podman::with_bin("/nonexistent/podman");
    let e = p.version().expect_err("missing binary");
    let msg = e.to_string();
    assert!(
        msg.contains("reading the podman version")
            && msg.contains("is podman installed")
            && msg.contains("cyclix check"),
        "{msg}"
    );
    // Removing nothing runs nothing, so it succeeds even without podman.
    p.rm_containers(&[]).expect("nothing to remove");
}

#[test]
fn failures_carry_argv_and_stderr_and_never_the_secret() {
    // A stand-in binary: prints to stderr and fails, like podman does.
    let tmp = tempfile::tempdir().expect("tempdir");
    let bin = tmp.path().join("podman");
    crate::process::write_executable(
        &bin,
        "#!/bin/sh\ncat >/dev/null\necho 'Error: no secret with name or id \"x\": no such secret' >&2\nexit 125\n",
    );
    let p = Podman::with_bin(bin.to_string_lossy());
    assert!(!p.secret_rm("x").expect("missing is fine"));
    let e = p
        .secret_create("cyclix-r1-KEY", b"s3cret-value", &[("io.cyclix.run", "r1")])
        .expect_err("fails");
    let msg = e.to_string();
    assert!(
        msg.contains("creating secret cyclix-r1-KEY")
            && msg.contains("secret create --label io.cyclix.run=r1 -- cyclix-r1-KEY -")
            && msg.contains("no such secret"),
        "{msg}"
    );
    assert!(!format!("{e:?}").contains("s3cret-value"), "{e:?}");
    let e = p.secret_rm("-rf").expect_err("option-like");
    assert!(matches!(e, PodmanError::BadName { .. }), "{e}");
}

#[test]
fn network_members_from_podman_5_inspect_and_none_from_podman_4_3() {
    // podman 5.4: the attached containers under `containers`.
    let v5 = r#"[{"name":"n","internal":true,"containers":{"a1":{"name":"run-proxy"},"b2":{"name":"run-infra"}}}]"#;
    assert_eq!(
        parse_network_containers(v5).expect("parse"),
        Some(vec!["run-infra".to_string(), "run-proxy".to_string()])
    );
    let none_attached = r#"[{"name":"n","internal":true,"containers":{}}]"#;
    assert_eq!(
        parse_network_containers(none_attached).expect("parse"),
        Some(vec![])
    );
    // podman 4.3.1 (Debian 12, measured): no `containers` key at all, so the caller asks ps.
    let v4 = r#"[{"name":"tbi","id":"7507","driver":"bridge","internal":true,"dns_enabled":true}]"#;
    assert_eq!(parse_network_containers(v4).expect("parse"), None);
    let ps = r#"[{"Id":"a","Names":["run-proxy"],"State":"running","Labels":null},{"Id":"b","Names":["run-infra"],"State":"running","Labels":null,"IsInfra":true}]"#;
    assert_eq!(
        parse_container_names(ps).expect("parse"),
        ["run-infra", "run-proxy"]
    );
}

/// `podman ps --all --ns --format json` of podman 5.4.2 (the testbed): `fx-join` was started
/// with `--network container:fx-base`; `fx-created` never ran.
const PS_NS: &str = include_str!("../../tests/fixtures/podman/ps-ns.json");

#[test]
fn containers_with_their_joinable_namespaces_from_podman_5_4() {
    let cs = parse_containers(PS_NS).expect("parse");
    let ns = |name: &str| {
        cs.iter()
            .find(|c| c.names[0] == name)
            .map(|c| c.namespaces.clone())
            .expect(name)
    };
    let kinds: Vec<String> = ns("fx-base").into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        kinds,
        ["Ipc", "Net", "Pidns", "Uts"],
        "User, Mnt, Cgroup left out"
    );
    let net = |name: &str| {
        ns(name)
            .into_iter()
            .find(|(k, _)| k == "Net")
            .map(|(_, v)| v)
    };
    assert_eq!(
        net("fx-join"),
        net("fx-base"),
        "the joined network namespace"
    );
    assert!(net("fx-base").is_some());
    assert!(
        ns("fx-created").is_empty(),
        "a container that never ran has none"
    );
}
