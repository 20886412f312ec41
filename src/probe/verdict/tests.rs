//! Table-driven tests: every probe with a passing and a failing fixture observation, plus the
//! cross-cutting rules (timeout → FAIL, missing positive control → FAIL, missing tool → FAIL).

use super::*;
use crate::probe::verdict::credentials::{EnvObs, p22};
use crate::probe::verdict::dns::{Dns, n7};
use crate::probe::verdict::filesystem::{Mount, p17};
use crate::probe::verdict::network::{n2, n6};
use crate::probe::verdict::privilege::{SetuidObs, p6, p7, p8};
use crate::probe::verdict::proxy::{Reply, proxy_denies};
use crate::probe::verdict::sockets::{SocketObs, p19};
use crate::probe::{Context, Limits};

mod credentials;
mod dns;
mod filesystem;
mod kernel;
mod network;
mod privilege;
mod processes;
mod proxy;
mod sockets;

fn ctx() -> Context {
    Context {
        host_kernel: String::new(),
        proxy_url: "http://10.213.7.2:3128".into(),
        proxy_name: "cyclix-r-proxy".into(),
        subnet: "10.213.7.0/24".into(),
        gateway_ip: "10.213.7.1".into(),
        allowed_host: "allowed.example".into(),
        allowed_port: 80,
        allowed_ports: vec![80],
        http_ports: vec![80],
        allowed_marker: "hello".into(),
        denied_host: "denied.example".into(),
        redirect_url: None,
        rebind_hosts: vec![],
        host_namespaces: ["pid", "net", "mnt", "ipc", "uts", "cgroup", "user"]
            .iter()
            .enumerate()
            .map(|(i, n)| ((*n).to_string(), 4_026_531_830 + i as u64))
            .collect(),
        host_uid: 1000,
        agent_uid: None,
        forbidden_env_names: vec!["CYCLIX_PROBE_CANARY".into()],
        forbidden_env_sha256: vec!["ab".repeat(32)],
        value_watched_env_names: vec![],
        watch: false,
        allowed_env_names: vec!["API_TOKEN".into()],
        workdir: "/work".into(),
        git_dir: "/home/u/p/.git".into(),
        expected_binds: vec!["/cyclix/task.md".into(), "/mnt/x".into()],
        declared_mounts: vec![crate::probe::DeclaredMount {
            target: "/mnt/x".into(),
            source: "/home/u/datasets/x".into(),
            read_only: true,
        }],
        lsm: None,
        limits: Limits::default(),
        init_comm: "podman-init".into(),
        max_pids: 30,
        profile: crate::probe::Profile::Podman,
        no_proxy_allowed: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
        report_only: false,
        escape: None,
    }
}

fn items(v: &[(&str, Attempt)]) -> Vec<(String, Attempt)> {
    v.iter()
        .map(|(l, a)| ((*l).to_string(), a.clone()))
        .collect()
}

fn mount(point: &str, root: &str, opts: &str) -> Mount {
    Mount {
        point: point.into(),
        root: root.into(),
        opts: opts.split(',').map(str::to_string).collect(),
        fstype: "overlay".into(),
    }
}

fn deny() -> Reply {
    Reply::Status {
        code: 403,
        error_header: Some("ERR_ACCESS_DENIED 0".into()),
        location: None,
        body: String::new(),
    }
}

fn ok200(body: &str) -> Reply {
    Reply::Status {
        code: 200,
        error_header: None,
        location: None,
        body: body.into(),
    }
}

const E: fn(i32) -> Attempt = Attempt::Errno;

#[test]
fn timeouts_are_fails() {
    assert!(!timed_out(2000).pass);
    assert!(timed_out(2000).detail.contains("dropped, not rejected"));
    assert!(!over_budget(15000).pass);
    // A timeout inside an errno list is a FAIL too.
    let j = n2(
        &items(&[("tcp 1.1.1.1:443", Attempt::Timeout)]),
        crate::probe::Profile::Podman,
    );
    assert!(!j.pass && j.detail.contains("dropped"), "{j:?}");
    let j = proxy_denies(&[("x".into(), Reply::Failed(Attempt::Timeout))], &ok200(""));
    assert!(!j.pass && j.detail.contains("dropped"), "{j:?}");
}

#[test]
fn a_missing_positive_control_fails_every_deny_check() {
    let no_ctl = Reply::Failed(E(libc::ECONNREFUSED));
    let j = proxy_denies(&[("CONNECT denied:80".into(), deny())], &no_ctl);
    assert!(!j.pass && j.detail.contains("positive control"), "{j:?}");
    let j = n6(
        &items(&[("gw:22", E(libc::ECONNREFUSED))]),
        &Attempt::Timeout,
    );
    assert!(!j.pass && j.detail.contains("positive control"), "{j:?}");
    let j = p17(
        &items(&[("/home/u/p/.git", E(libc::ENOENT))]),
        &E(libc::EROFS),
    );
    assert!(!j.pass && j.detail.contains("positive control"), "{j:?}");
    let dead = Dns::Failed(Attempt::Timeout);
    let nx = Dns::Reply {
        rcode: 3,
        addrs: vec![],
    };
    assert!(!n7(&dead, &nx, &[], &E(libc::ENETUNREACH), &ctx()).pass);
    let mut s = SocketObs {
        complete: true,
        ..Default::default()
    };
    assert!(!p19(&s).pass, "the walk must find its own socket");
    s.control_found = true;
    assert!(p19(&s).pass);
    assert!(
        !p22(&EnvObs::default(), &ctx()).pass,
        "no environment read is a FAIL"
    );
}

#[test]
fn a_missing_tool_is_a_fail() {
    assert!(!p6(&SetuidObs::default()).pass);
    let j = p17(
        &items(&[(".git", Attempt::Missing("context.git_dir is empty".into()))]),
        &Attempt::Ok,
    );
    assert!(!j.pass);
    assert!(!p7(&[], crate::probe::Profile::Podman).pass);
    assert!(!p8(&[]).pass);
}
