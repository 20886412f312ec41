//! Table-driven tests: every probe with a passing and a failing fixture observation, plus the
//! cross-cutting rules (timeout → FAIL, missing positive control → FAIL, missing tool → FAIL).

use std::collections::BTreeMap;

use super::*;
use crate::probe::{Context, Limits};

const E: fn(i32) -> Attempt = Attempt::Errno;

fn ctx() -> Context {
    Context {
        proxy_url: "http://10.213.7.2:3128".into(),
        proxy_name: "cyclix-r-proxy".into(),
        subnet: "10.213.7.0/24".into(),
        gateway_ip: "10.213.7.1".into(),
        allowed_host: "allowed.example".into(),
        allowed_port: 80,
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
        forbidden_env_names: vec!["CYCLIX_PROBE_CANARY".into()],
        forbidden_env_sha256: vec!["ab".repeat(32)],
        allowed_env_names: vec!["API_TOKEN".into()],
        workdir: "/work".into(),
        git_dir: "/home/u/p/.git".into(),
        expected_binds: vec!["/cyclix/task.md".into()],
        lsm: None,
        limits: Limits::default(),
        init_comm: "podman-init".into(),
        max_pids: 30,
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

#[test]
fn timeout_and_budget_are_fails() {
    assert!(!timed_out(2000).pass);
    assert!(timed_out(2000).detail.contains("dropped, not rejected"));
    assert!(!over_budget(15000).pass);
    // A timeout inside an errno list is a FAIL too.
    let j = n2(&items(&[("tcp 1.1.1.1:443", Attempt::Timeout)]));
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
    assert!(!n7(&dead, &nx, &E(libc::ENETUNREACH), &ctx()).pass);
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
    assert!(!p7(&[]).pass);
    assert!(!p8(&[]).pass);
}

#[test]
fn identity_probes() {
    let zero = |k: &str| (k.to_string(), "0000000000000000".to_string());
    let mut caps: BTreeMap<String, String> = ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"]
        .iter()
        .map(|k| zero(k))
        .collect();
    assert!(p1(&caps).pass);
    caps.insert("CapBnd".into(), "000001ffffffffff".into());
    assert!(!p1(&caps).pass);
    caps.remove("CapBnd");
    assert!(!p1(&caps).pass, "a missing set is a FAIL");

    for (nnp, pass) in [(Some("1"), true), (Some("0"), false), (None, false)] {
        assert_eq!(p2(nnp).pass, pass, "{nnp:?}");
    }
    for (m, f, pass) in [
        (Some("2"), Some("6"), true),
        (Some("2"), Some("0"), false),
        (Some("0"), Some("0"), false),
        (None, None, false),
    ] {
        assert_eq!(p3(m, f).pass, pass, "{m:?} {f:?}");
    }
}

#[test]
fn p4_lsm_policy() {
    let cases: &[(Result<String, i32>, Option<&str>, bool)] = &[
        (Err(libc::EINVAL), None, true),
        (Ok("unconfined".into()), None, false),
        (Err(libc::EACCES), None, false),
        (
            Ok("containers-default-0.62.2 (enforce)".into()),
            Some("apparmor"),
            true,
        ),
        (
            Ok("containers-default-0.62.2 (complain)".into()),
            Some("apparmor"),
            false,
        ),
        (Ok("unconfined".into()), Some("apparmor"), false),
        (Err(libc::EINVAL), Some("apparmor"), false),
        (
            Ok("system_u:system_r:container_t:s0:c1,c2".into()),
            Some("selinux"),
            true,
        ),
        (
            Ok("system_u:system_r:spc_t:s0".into()),
            Some("selinux"),
            false,
        ),
    ];
    for (label, lsm, pass) in cases {
        assert_eq!(p4(label, *lsm).pass, *pass, "{label:?} {lsm:?}");
    }
}

#[test]
fn p5_user_namespace() {
    let c = ctx();
    let mine = Some(4_026_532_413);
    assert!(p5("0 1000 1\n1 200000 65536\n", "0 1000 1\n", mine, &c).pass);
    assert!(
        !p5("0 0 4294967295\n", "0 0 4294967295\n", mine, &c).pass,
        "identity map"
    );
    assert!(
        !p5(
            "0 1000 1\n",
            "0 1000 1\n",
            c.host_namespaces.get("user").copied(),
            &c
        )
        .pass,
        "host user ns"
    );
    assert!(
        !p5("0 2000 1\n", "0 2000 1\n", mine, &c).pass,
        "maps to another host uid"
    );
    let mut no_host = c.clone();
    no_host.host_namespaces.clear();
    assert!(
        !p5("0 1000 1\n", "0 1000 1\n", mine, &no_host).pass,
        "no host-recorded inode"
    );
}

#[test]
fn p6_setuid() {
    let base = SetuidObs {
        binary: Some("/usr/bin/passwd".into()),
        own_euid: 0,
        ..Default::default()
    };
    let with = |s: Option<(u32, &str)>| SetuidObs {
        status: s.map(|(e, c)| (e, c.to_string())),
        ..base.clone()
    };
    assert!(p6(&with(Some((0, "0000000000000000")))).pass);
    assert!(!p6(&with(Some((0, "000001ffffffffff")))).pass);
    let user = SetuidObs {
        own_euid: 1000,
        ..with(Some((0, "0000000000000000")))
    };
    assert!(!p6(&user).pass, "euid changed to root");
    assert!(!p6(&with(None)).pass, "not observed");
}

#[test]
fn p7_syscalls_exact_errno_table() {
    let measured = items(&[
        ("kexec_load", E(libc::EPERM)),
        ("bpf", E(libc::EPERM)),
        ("ptrace", E(libc::ESRCH)),
        ("setns", E(libc::EBADF)),
        ("userfaultfd", E(libc::EPERM)),
        ("unknown(999)", E(libc::ENOSYS)),
    ]);
    assert!(p7(&measured).pass);
    for (name, a) in [
        ("bpf", E(libc::EFAULT)),         // allowed
        ("kexec_load", E(libc::ENOSYS)),  // wrong errno
        ("unknown(999)", E(libc::EPERM)), // the unknown number must be ENOSYS
        ("userfaultfd", Attempt::Ok),     // allowed and worked
        ("ptrace", E(libc::EFAULT)),
    ] {
        assert!(!p7(&items(&[(name, a.clone())])).pass, "{name} {a:?}");
    }
}

#[test]
fn p8_p9_mounts_and_user_namespaces() {
    assert!(
        p8(&items(&[
            ("tmpfs", E(libc::EPERM)),
            ("cgroup", E(libc::EPERM)),
            ("proc", E(libc::EPERM))
        ]))
        .pass
    );
    assert!(!p8(&items(&[("tmpfs", Attempt::Ok)])).pass);
    let measured = UsernsObs {
        unshare_user: Some(Attempt::Ok),
        uid_map: Some(E(libc::EPERM)),
        unshare_mnt: Some(Attempt::Ok),
        mount_proc: Some(E(libc::EPERM)),
        mount_cgroup: Some(E(libc::EPERM)),
        mounts_unchanged: true,
        error: None,
    };
    assert!(p9(&measured).pass);
    assert!(
        p9(&UsernsObs {
            unshare_user: Some(E(libc::EPERM)),
            mounts_unchanged: true,
            ..Default::default()
        })
        .pass
    );
    let working = UsernsObs {
        uid_map: Some(Attempt::Ok),
        mount_proc: Some(Attempt::Ok),
        ..measured.clone()
    };
    assert!(!p9(&working).pass, "a working nested mount");
    assert!(
        !p9(&UsernsObs {
            mounts_unchanged: false,
            ..measured.clone()
        })
        .pass
    );
    assert!(
        !p9(&UsernsObs {
            error: Some("no child".into()),
            ..measured
        })
        .pass
    );
}

#[test]
fn p10_to_p12_devices_masks_knobs() {
    let dev = DevObs {
        entries: vec!["null".into(), "zero".into(), "pts".into()],
        null_ok: true,
        mknod: E(libc::EPERM),
    };
    assert!(p10(&dev).pass);
    assert!(
        !p10(&DevObs {
            entries: vec!["sda".into()],
            ..dev.clone()
        })
        .pass
    );
    assert!(
        !p10(&DevObs {
            entries: vec!["net/tun".into()],
            ..dev.clone()
        })
        .pass
    );
    assert!(
        !p10(&DevObs {
            mknod: Attempt::Ok,
            ..dev.clone()
        })
        .pass
    );
    assert!(
        !p10(&DevObs {
            null_ok: false,
            ..dev
        })
        .pass
    );

    let keys = ("/proc/keys".to_string(), Masked::NullDev);
    assert!(
        p11(&[
            keys.clone(),
            ("/proc/acpi".into(), Masked::EmptyDir),
            ("/proc/scsi".into(), Masked::Absent)
        ])
        .pass
    );
    assert!(
        !p11(&[
            keys,
            (
                "/sys/firmware".into(),
                Masked::Exposed("a non-empty directory".into())
            )
        ])
        .pass
    );
    assert!(
        !p11(&[("/proc/acpi".into(), Masked::EmptyDir)]).pass,
        "control: /proc/keys must be masked"
    );

    let measured = items(&[
        ("/proc/sys/kernel/core_pattern", E(libc::EACCES)),
        ("/proc/sysrq-trigger", E(libc::ENOENT)),
        ("/sys/kernel/uevent_helper", E(libc::ENOENT)),
        ("/sys/fs/cgroup/cgroup.procs", E(libc::EROFS)),
    ]);
    assert!(p12(&measured).pass);
    assert!(!p12(&items(&[("/proc/sys/kernel/core_pattern", Attempt::Ok)])).pass);
    assert!(
        !p12(&items(&[(
            "/proc/sys/kernel/core_pattern",
            E(libc::ENOENT)
        )]))
        .pass,
        "ENOENT only for optional knobs"
    );
}

#[test]
fn p13_to_p15_filesystems() {
    let ro = vec![
        mount("/", "/", "ro,relatime"),
        mount("/sys", "/", "ro,nosuid"),
        mount("/sys/fs/cgroup", "/", "ro,nosuid"),
    ];
    assert!(p13(&ro).pass);
    let mut rw = ro.clone();
    rw.push(mount("/sys", "/", "rw,nosuid"));
    assert!(!p13(&rw).pass, "the last mount at /sys is rw");
    assert!(!p13(&ro[..1]).pass, "missing /sys");

    assert!(
        p14(&items(&[
            ("/probe-root", E(libc::EROFS)),
            ("/usr/probe", E(libc::EROFS))
        ]))
        .pass
    );
    assert!(!p14(&items(&[("/probe-root", Attempt::Ok)])).pass);
    assert!(
        !p14(&items(&[("/probe-root", E(libc::EACCES))])).pass,
        "exact errno"
    );

    let s = |p: &str, w: Attempt, o: &str| ScratchObs {
        path: p.into(),
        write: w,
        mount: Some(mount(p, "/", o)),
    };
    let good: Vec<ScratchObs> = ["/tmp", "/var/tmp", "/run", "/dev/shm"]
        .iter()
        .map(|p| s(p, Attempt::Ok, "rw,nosuid,nodev"))
        .collect();
    assert!(p15(&good).pass);
    let mut bad = good.clone();
    bad[0] = s("/tmp", E(libc::EROFS), "rw,nosuid,nodev");
    assert!(!p15(&bad).pass);
    let mut bad = good;
    bad[1] = s("/var/tmp", Attempt::Ok, "rw");
    assert!(!p15(&bad).pass);
}

#[test]
fn p16_project_mount_owner_and_flags() {
    let c = ctx();
    let o = ProjectObs {
        cycle: Attempt::Ok,
        owner: Some(0),
        own_euid: 0,
        host_uid_of_owner: Some(1000),
        mount: Some(mount("/work", "/home/u/wt", "rw,nosuid,nodev,relatime")),
    };
    assert!(p16(&o, &c).pass);
    let measured = ProjectObs {
        mount: Some(mount("/work", "/home/u/wt", "rw,relatime")),
        ..o.clone()
    };
    let j = p16(&measured, &c);
    assert!(!j.pass && j.detail.contains("nosuid"), "{j:?}");
    assert!(
        !p16(
            &ProjectObs {
                host_uid_of_owner: Some(200_000),
                ..o.clone()
            },
            &c
        )
        .pass
    );
    assert!(
        !p16(
            &ProjectObs {
                cycle: E(libc::EROFS),
                ..o
            },
            &c
        )
        .pass
    );
}

#[test]
fn p17_p18_git_paths_and_mount_allowlist() {
    let absent = items(&[
        ("/home/u/p/.git", E(libc::ENOENT)),
        ("/home/u/p/.git/config", E(libc::ENOENT)),
        ("/home/u/p", E(libc::ENOENT)),
    ]);
    assert!(p17(&absent, &Attempt::Ok).pass);
    // The user's git dir visible at all (even read-only, EROFS on a write) is a FAIL.
    for seen in [Attempt::Ok, E(libc::EROFS), E(libc::EACCES)] {
        assert!(!p17(&items(&[("/home/u/p/.git", seen.clone())]), &Attempt::Ok).pass);
    }

    let c = ctx();
    let base = vec![
        mount("/", "/", "ro"),
        mount("/work", "/home/u/wt", "rw"),
        mount("/cyclix/task.md", "/cyclix/runs/r/task.md", "ro"),
        mount("/proc/keys", "/null", "ro"),
    ];
    assert!(p18(&base, &c).pass, "{:?}", p18(&base, &c));
    let mut git = base.clone();
    git.push(mount("/home/u/p/.git", "/home/u/p/.git", "ro"));
    assert!(
        !p18(&git, &c).pass,
        "the user's git dir mounted is unexpected"
    );
    let mut extra = base.clone();
    extra.push(mount("/run/user/1000/bus", "/run/user/1000/bus", "rw"));
    assert!(!p18(&extra, &c).pass);
    let mut leak = base.clone();
    leak.push(mount("/etc/hosts", "/home/u/.ssh/id_rsa", "ro"));
    assert!(
        !p18(&leak, &c).pass,
        "a host home path behind an allowed point"
    );
    assert!(!p18(&[], &c).pass, "no mountinfo");
}

#[test]
fn p19_sockets() {
    let ok = SocketObs {
        control_found: true,
        complete: true,
        ..Default::default()
    };
    assert!(p19(&ok).pass);
    for found in [
        "/run/podman/podman.sock",
        "/var/run/docker.sock",
        "/run/user/1000/bus",
        "/run/dbus/system_bus_socket",
    ] {
        assert!(
            !p19(&SocketObs {
                found: vec![found.into()],
                ..ok.clone()
            })
            .pass,
            "{found}"
        );
    }
    assert!(
        !p19(&SocketObs {
            net_unix: vec!["/run/user/1000/systemd/private".into()],
            ..ok.clone()
        })
        .pass
    );
    assert!(
        !p19(&SocketObs {
            env: vec!["SSH_AUTH_SOCK".into()],
            ..ok.clone()
        })
        .pass
    );
    assert!(
        !p19(&SocketObs {
            complete: false,
            ..ok
        })
        .pass,
        "an unfinished walk proves nothing"
    );
}

#[test]
fn p20_p21_namespaces_and_cgroups() {
    let c = ctx();
    let mine: BTreeMap<String, u64> = PRIVATE_NS
        .iter()
        .enumerate()
        .map(|(i, n)| ((*n).to_string(), 4_026_532_000 + i as u64))
        .collect();
    let o = NsObs {
        ns: mine.clone(),
        pids: 3,
        init_comm: Some("podman-init".into()),
    };
    assert!(p20(&o, &c).pass);
    let mut shared = mine;
    shared.insert("net".into(), c.host_namespaces["net"]);
    assert!(
        !p20(
            &NsObs {
                ns: shared,
                ..o.clone()
            },
            &c
        )
        .pass
    );
    assert!(
        !p20(
            &NsObs {
                pids: 200,
                ..o.clone()
            },
            &c
        )
        .pass
    );
    assert!(
        !p20(
            &NsObs {
                init_comm: Some("sleep".into()),
                ..o
            },
            &c
        )
        .pass
    );

    let measured = CgroupObs {
        lines: vec!["1:cpu:/".into(), "0::/".into()],
        ..Default::default()
    };
    assert!(p21(&measured, &c).pass, "no limits configured");
    assert!(
        !p21(
            &CgroupObs {
                lines: vec!["0::/user.slice/x".into()],
                ..Default::default()
            },
            &c
        )
        .pass
    );
    let limited = Context {
        limits: Limits {
            memory_bytes: Some(1 << 30),
            pids: Some(512),
            cpu_millis: Some(1500),
        },
        ..c
    };
    assert!(
        !p21(&measured, &limited).pass,
        "configured but no controller"
    );
    let enforced = CgroupObs {
        memory_max: Some("1073741824".into()),
        pids_max: Some("512".into()),
        cpu_max: Some("150000 100000".into()),
        ..measured
    };
    assert!(p21(&enforced, &limited).pass);
}

#[test]
fn p22_environment() {
    let c = ctx();
    let v = |n: &str, h: &str| {
        (
            "/proc/self/environ".to_string(),
            n.to_string(),
            h.to_string(),
        )
    };
    let ok = EnvObs {
        vars: vec![v("HTTP_PROXY", "00"), v("HOME", "01"), v("API_TOKEN", "02")],
        sources: 2,
    };
    assert!(p22(&ok, &c).pass, "an allowed secret name is fine");
    for bad in [
        v("CYCLIX_PROBE_CANARY", "03"),
        v("GITHUB_TOKEN", "04"),
        v("XDG_RUNTIME_DIR", "05"),
        v("INNOCENT", &"AB".repeat(32)),
    ] {
        let mut o = ok.clone();
        o.vars.push(bad.clone());
        assert!(!p22(&o, &c).pass, "{bad:?}");
    }
}

#[test]
fn p23_p24_keys_and_kernel() {
    let empty_user = Keyring {
        own: "keyring;0;65534;1f3f0000;_uid.0".into(),
        linked: Ok(vec![]),
    };
    let ses = |linked| Keyring {
        own: "keyring;0;0;3f030000;_ses".into(),
        linked: Ok(linked),
    };
    let measured = ses(vec![("keyring;0;65534;1f3f0000;_uid.1000".into(), Ok(0))]);
    assert!(p23(true, &measured, &empty_user).pass);
    assert!(
        !p23(false, &measured, &empty_user).pass,
        "/proc/keys readable"
    );
    assert!(
        !p23(
            true,
            &ses(vec![("keyring;0;65534;1f3f0000;_uid.1000".into(), Ok(2))]),
            &empty_user
        )
        .pass,
        "host user's keys readable"
    );
    assert!(
        !p23(
            true,
            &ses(vec![("user;0;0;3f010000;token".into(), Ok(1))]),
            &empty_user
        )
        .pass
    );
    // systemd's invocation_id key (KeyringMode=private) is allowed, nothing else is.
    let invocation = ("user;0;0;0b0b0000;invocation_id".to_string(), Ok(1));
    assert!(p23(true, &ses(vec![invocation.clone()]), &empty_user).pass);
    assert!(
        !p23(
            true,
            &ses(vec![invocation, ("user;0;0;3f010000;token".into(), Ok(1))]),
            &empty_user
        )
        .pass
    );

    let k = KernelObs {
        syslog: E(libc::EPERM),
        dmesg_restrict: Some("1".into()),
        kallsyms: (5000, 0),
        modules_dir: false,
    };
    assert!(p24(&k).pass);
    assert!(
        !p24(&KernelObs {
            syslog: Attempt::Ok,
            dmesg_restrict: Some("0".into()),
            ..k.clone()
        })
        .pass
    );
    assert!(
        !p24(&KernelObs {
            kallsyms: (5000, 12),
            ..k.clone()
        })
        .pass
    );
    assert!(
        !p24(&KernelObs {
            kallsyms: (0, 0),
            ..k.clone()
        })
        .pass,
        "kallsyms unreadable: no control"
    );
    assert!(
        !p24(&KernelObs {
            modules_dir: true,
            ..k
        })
        .pass
    );
}

#[test]
fn n1_to_n4_routes_and_direct_connections() {
    let c = ctx();
    let mut o = RouteObs {
        read_ok: true,
        ..Default::default()
    };
    o.ifaces.insert("lo".into(), vec!["127.0.0.1".into()]);
    o.ifaces.insert("eth0".into(), vec!["10.213.7.3".into()]);
    assert!(n1(&o, &c).pass);
    assert!(
        !n1(
            &RouteObs {
                defaults: vec!["v4 via 0100D50A dev eth0".into()],
                ..o.clone()
            },
            &c
        )
        .pass
    );
    let mut two = o.clone();
    two.ifaces.insert("eth1".into(), vec!["10.89.0.5".into()]);
    assert!(!n1(&two, &c).pass);
    let mut wrong = o;
    wrong.ifaces.insert("eth0".into(), vec!["10.88.0.3".into()]);
    assert!(!n1(&wrong, &c).pass);

    assert!(n2(&items(&[("tcp 1.1.1.1:443", E(libc::ENETUNREACH))])).pass);
    assert!(
        !n2(&items(&[("tcp 1.1.1.1:443", E(libc::ECONNREFUSED))])).pass,
        "a route exists"
    );
    assert!(!n2(&items(&[("udp 8.8.8.8:53", Attempt::Ok)])).pass);
    assert!(n3(&items(&[("v6", E(libc::ENETUNREACH))]), &[]).pass);
    assert!(
        !n3(
            &items(&[("v6", E(libc::ENETUNREACH))]),
            &["2001:db8::1".into()]
        )
        .pass
    );
    assert!(!n4(&items(&[("tcp 169.254.169.254:80", Attempt::Timeout)])).pass);
    assert!(in_subnet("10.213.7.3", "10.213.7.0/24") && !in_subnet("10.213.8.3", "10.213.7.0/24"));
}

#[test]
fn proxy_probes() {
    let c = ctx();
    assert!(proxy_denies(&[("CONNECT 169.254.169.254:80".into(), deny())], &ok200("")).pass);
    let bare403 = Reply::Status {
        code: 403,
        error_header: None,
        location: None,
        body: String::new(),
    };
    assert!(
        !proxy_denies(&[("x".into(), bare403)], &ok200("")).pass,
        "403 without the proxy's header may come from the origin"
    );
    assert!(!proxy_denies(&[("x".into(), ok200(""))], &ok200("")).pass);
    assert!(!proxy_denies(&[], &ok200("")).pass);

    assert!(
        n6(
            &items(&[
                ("gw:22", E(libc::ECONNREFUSED)),
                ("hci:22", E(libc::ENETUNREACH))
            ]),
            &Attempt::Ok
        )
        .pass
    );
    assert!(!n6(&items(&[("gw:22", Attempt::Ok)]), &Attempt::Ok).pass);
    assert!(!n6(&items(&[("gw:22", Attempt::Timeout)]), &Attempt::Ok).pass);

    let ctl = Dns::Reply {
        rcode: 0,
        addrs: vec!["10.213.7.2".into()],
    };
    let nx = Dns::Reply {
        rcode: 3,
        addrs: vec![],
    };
    assert!(n7(&ctl, &nx, &E(libc::ENETUNREACH), &c).pass);
    assert!(
        !n7(
            &ctl,
            &Dns::Reply {
                rcode: 0,
                addrs: vec!["93.184.216.34".into()]
            },
            &E(libc::ENETUNREACH),
            &c
        )
        .pass,
        "forwarded"
    );
    assert!(
        !n7(
            &ctl,
            &Dns::Failed(Attempt::Timeout),
            &E(libc::ENETUNREACH),
            &c
        )
        .pass,
        "dropped"
    );

    assert!(n8(&ok200(""), &ok200("")).pass);
    assert!(!n8(&ok200(""), &deny()).pass);
    assert!(n13(&ok200("hello from allowed"), "hello").pass);
    assert!(!n13(&ok200("private page"), "hello").pass);
    let redirect = Reply::Status {
        code: 302,
        error_header: None,
        location: Some("http://denied.example/".into()),
        body: String::new(),
    };
    assert!(n14(Some(&redirect), &deny()).pass);
    assert!(n14(None, &deny()).pass);
    assert!(
        !n14(Some(&ok200("followed")), &deny()).pass,
        "the proxy followed the redirect"
    );
    assert!(!n14(None, &ok200("")).pass);
}

#[test]
fn n15_n16_raw_sockets_and_proxy_env() {
    let measured = items(&[
        ("AF_PACKET", E(libc::EPERM)),
        ("SOCK_RAW icmp", E(libc::EPERM)),
        ("RTM_NEWROUTE", E(libc::EPERM)),
        ("ping 1.1.1.1", E(libc::ENETUNREACH)),
    ]);
    assert!(n15(&measured).pass);
    assert!(!n15(&items(&[("AF_PACKET", Attempt::Ok)])).pass);
    assert!(!n15(&items(&[("ping 1.1.1.1", Attempt::Ok)])).pass);

    let c = ctx();
    let mut env: BTreeMap<String, String> =
        ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
            .iter()
            .map(|k| ((*k).to_string(), c.proxy_url.clone()))
            .collect();
    env.insert("NO_PROXY".into(), "localhost,127.0.0.1,::1".into());
    assert!(n16(&env, &c).pass);
    let mut star = env.clone();
    star.insert("no_proxy".into(), "*".into());
    assert!(!n16(&star, &c).pass);
    let mut suffix = env.clone();
    suffix.insert("NO_PROXY".into(), "localhost,.example.com".into());
    assert!(!n16(&suffix, &c).pass);
    env.remove("https_proxy");
    assert!(!n16(&env, &c).pass);
}

#[test]
fn report_only_requires_an_answer_not_a_deny() {
    let ok = Reply::Status {
        code: 200,
        error_header: None,
        location: None,
        body: String::new(),
    };
    let denied = Reply::Status {
        code: 403,
        error_header: Some("ERR_ACCESS_DENIED 0".into()),
        location: None,
        body: String::new(),
    };
    assert!(
        report_only_answers(&[
            ("GET http://d/".into(), ok),
            ("CONNECT d:22".into(), denied)
        ])
        .pass
    );
    assert!(
        !report_only_answers(&[("GET http://d/".into(), Reply::Failed(Attempt::Timeout))]).pass,
        "a drop fails"
    );
    assert!(!report_only_answers(&[]).pass, "nothing attempted fails");
}

#[test]
fn report_only_keeps_private_targets_unforwarded() {
    let squid503 = Reply::Status {
        code: 503,
        error_header: Some("ERR_DNS_FAIL 0".into()),
        location: None,
        body: String::new(),
    };
    let origin200 = Reply::Status {
        code: 200,
        error_header: None,
        location: None,
        body: String::new(),
    };
    assert!(proxy_not_forwarded(&[("CONNECT metadata:80".into(), squid503)]).pass);
    assert!(
        !proxy_not_forwarded(&[("CONNECT 169.254.169.254:80".into(), origin200)]).pass,
        "forwarded"
    );
}
