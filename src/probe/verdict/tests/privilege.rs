//! The privilege verdicts (P1–P9): passing and failing fixtures.

use std::collections::BTreeMap;

use super::*;
use crate::probe::verdict::privilege::*;

#[test]
fn identity_probes() {
    let zero = |k: &str| (k.to_string(), "0000000000000000".to_string());
    let mut caps: BTreeMap<String, String> = ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"]
        .iter()
        .map(|k| zero(k))
        .collect();
    assert!(p1(&caps, crate::probe::Profile::Podman).pass);
    caps.insert("CapBnd".into(), "000001ffffffffff".into());
    assert!(!p1(&caps, crate::probe::Profile::Podman).pass);
    caps.remove("CapBnd");
    assert!(
        !p1(&caps, crate::probe::Profile::Podman).pass,
        "a missing set is a FAIL"
    );

    for (nnp, pass) in [(Some("1"), true), (Some("0"), false), (None, false)] {
        assert_eq!(p2(nnp).pass, pass, "{nnp:?}");
    }
    for (m, f, pass) in [
        (Some("2"), Some("6"), true),
        (Some("2"), Some("0"), false),
        (Some("0"), Some("0"), false),
        (None, None, false),
    ] {
        assert_eq!(
            p3(m, f, crate::probe::Profile::Podman).pass,
            pass,
            "{m:?} {f:?}"
        );
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
    // keep-id (a preset's uid 1000): the agent's uid maps to the rootless namespace's root,
    // as podman 5.4 shows it (measured on the testbed).
    let mut k = c.clone();
    k.agent_uid = Some(1000);
    let keep_id = "0 1 1000\n1000 0 1\n1001 1001 64536\n";
    assert!(
        p5(keep_id, keep_id, mine, &k).pass,
        "{:?}",
        p5(keep_id, keep_id, mine, &k)
    );
    assert!(
        !p5(keep_id, keep_id, mine, &c).pass,
        "not without keep-id in the context"
    );
    assert!(
        !p5("0 1000 1\n1 200000 65536\n", "0 1000 1\n", mine, &k).pass,
        "the default map under keep-id: uid 1000 is not the host user"
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
    assert!(p7(&measured, crate::probe::Profile::Podman).pass);
    for (name, a) in [
        ("bpf", E(libc::EFAULT)),         // allowed
        ("kexec_load", E(libc::ENOSYS)),  // wrong errno
        ("unknown(999)", E(libc::EPERM)), // the unknown number must be ENOSYS
        ("userfaultfd", Attempt::Ok),     // allowed and worked
        ("ptrace", E(libc::EFAULT)),
    ] {
        assert!(
            !p7(&items(&[(name, a.clone())]), crate::probe::Profile::Podman).pass,
            "{name} {a:?}"
        );
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
fn gvisor_answers_are_accepted_only_under_the_gvisor_profile() {
    use crate::probe::Profile;
    let zero = |k: &str| (k.to_string(), "0000000000000000".to_string());
    let four: BTreeMap<String, String> = ["CapInh", "CapPrm", "CapEff", "CapBnd"]
        .iter()
        .map(|k| zero(k))
        .collect();
    assert!(p1(&four, Profile::Gvisor).pass);
    assert!(!p1(&four, Profile::Podman).pass, "CapAmb missing on Linux");
    let mut set = four.clone();
    set.insert("CapEff".into(), "0000000000000400".into());
    assert!(
        !p1(&set, Profile::Gvisor).pass,
        "a capability is still a FAIL"
    );
    assert!(p3(Some("2"), None, Profile::Gvisor).pass);
    assert!(!p3(Some("2"), None, Profile::Podman).pass);
    assert!(
        !p3(Some("0"), None, Profile::Gvisor).pass,
        "no filter is a FAIL"
    );
    let gv = items(&[
        ("userfaultfd", E(libc::ENOSYS)),
        ("unknown(999)", E(libc::EPERM)),
    ]);
    assert!(p7(&gv, Profile::Gvisor).pass);
    assert!(!p7(&gv, Profile::Podman).pass);
    assert!(!p7(&items(&[("bpf", E(libc::ENOSYS))]), Profile::Gvisor).pass);
}
