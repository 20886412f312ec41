//! Identity and privilege (P1–P9): capabilities, `NoNewPrivs`, seccomp, the LSM label, the
//! user namespace map, setuid binaries, bad-argument syscalls, mounts and nested user namespaces.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Attempt, Judged, all_errno, errno_name, judged, list};
use crate::probe::Context;

/// P1: the five capability sets from `/proc/self/status` (`CapInh` ... `CapBnd`), as read.
#[must_use]
///
/// Under the `gvisor` profile `CapAmb` may be missing: gVisor's `/proc/self/status` has no such
/// line (the four others must be there and empty).
pub fn p1(caps: &BTreeMap<String, String>, profile: crate::probe::Profile) -> Judged {
    let want = ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"];
    let gvisor = profile == crate::probe::Profile::Gvisor;
    let got = want
        .iter()
        .map(|k| format!("{k}={}", caps.get(*k).map_or("missing", String::as_str)))
        .collect::<Vec<_>>()
        .join(" ");
    let bad: Vec<&str> = want
        .iter()
        .copied()
        .filter(|k| caps.get(*k).map(String::as_str) != Some("0000000000000000"))
        .filter(|k| !(gvisor && *k == "CapAmb" && !caps.contains_key(*k)))
        .collect();
    judged(
        "CapInh CapPrm CapEff CapBnd CapAmb all 0000000000000000",
        got,
        bad.is_empty(),
        if bad.is_empty() {
            String::new()
        } else {
            format!("not empty or missing: {}", bad.join(", "))
        },
    )
}

/// P2: `NoNewPrivs` from `/proc/self/status`.
#[must_use]
pub fn p2(nnp: Option<&str>) -> Judged {
    judged(
        "NoNewPrivs 1",
        nnp.unwrap_or("missing"),
        nnp == Some("1"),
        "",
    )
}

/// P3: `Seccomp` and `Seccomp_filters` from `/proc/self/status`. Under the `gvisor` profile
/// the `Seccomp_filters` line may be missing (gVisor's status has none; runsc applies podman's
/// filter inside the sandbox with `oci-seccomp`, and `Seccomp 2` must be there).
#[must_use]
pub fn p3(mode: Option<&str>, filters: Option<&str>, profile: crate::probe::Profile) -> Judged {
    let n: Option<u32> = filters
        .and_then(|f| f.parse().ok())
        .or_else(|| (profile == crate::probe::Profile::Gvisor && filters.is_none()).then_some(1));
    judged(
        "Seccomp 2, Seccomp_filters >= 1",
        format!(
            "Seccomp {} Seccomp_filters {}",
            mode.unwrap_or("missing"),
            filters.unwrap_or("missing")
        ),
        mode == Some("2") && n.is_some_and(|n| n >= 1),
        "",
    )
}

/// P4: the LSM label (`/proc/self/attr/current`: the text, or the open/read errno).
///
/// Policy (measured on the testbed: no LSM, the read fails with `EINVAL`): with
/// `context.lsm = None` the host recorded that no LSM is enabled, so the read must fail with
/// `EINVAL` (nothing to label; confinement rests on P1, P3, P5). With `apparmor` the label must
/// be `containers-default-* (enforce)`; with `selinux` it must contain `:container_t:`. A label
/// of `unconfined` or `spc_t` is always a FAIL.
#[must_use]
pub fn p4(label: &Result<String, i32>, lsm: Option<&str>) -> Judged {
    let got = match label {
        Ok(l) => l.trim_end_matches(['\0', '\n']).to_string(),
        Err(e) => errno_name(*e),
    };
    let unconfined = got.contains("unconfined") || got.contains("spc_t");
    let (expect, pass, detail) = match lsm {
        None => (
            "EINVAL (host records no LSM)",
            *label == Err(libc::EINVAL),
            "policy: on a kernel without AppArmor/SELinux there is no label; the read must fail with EINVAL, confinement rests on capabilities (P1), seccomp (P3) and the user namespace (P5)",
        ),
        Some("apparmor") => (
            "containers-default-* (enforce)",
            got.starts_with("containers-default") && got.ends_with("(enforce)"),
            "",
        ),
        Some("selinux") => ("…:container_t:…", got.contains(":container_t:"), ""),
        Some(_) => (
            "a known LSM",
            false,
            "context.lsm names an LSM the probe does not know",
        ),
    };
    judged(
        expect,
        got,
        pass && !unconfined,
        if unconfined {
            "unconfined label"
        } else {
            detail
        },
    )
}

/// P5: `uid_map`, `gid_map` (text) and the user namespace inode, against the host's.
#[must_use]
pub fn p5(uid_map: &str, gid_map: &str, user_ns: Option<u64>, ctx: &Context) -> Judged {
    let identity = |m: &str| m.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"];
    let host = ctx.host_namespaces.get("user").copied();
    let parent = ctx.parent_uid().to_string();
    let maps_host_uid = uid_map.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() == 3
            && f[1] == parent
            && ctx
                .agent_uid
                .is_none_or(|u| f[0] == u.to_string() && f[2] == "1")
    });
    let mut why = Vec::new();
    if identity(uid_map) || identity(gid_map) {
        why.push("identity map (no user namespace)".to_string());
    }
    if uid_map.trim().is_empty() {
        why.push("uid_map unreadable".into());
    }
    match (user_ns, host) {
        (Some(a), Some(b)) if a == b => why.push(format!("user ns {a} is the host's")),
        (None, _) => why.push("user ns inode unreadable".into()),
        (_, None) => why.push("no host-recorded user ns inode (positive control missing)".into()),
        _ => {}
    }
    let to_host = match ctx.agent_uid {
        Some(u) => format!(
            "host uid {} (agent uid {u} -> uid 0 of the rootless namespace, keep-id)",
            ctx.host_uid
        ),
        None => format!("host uid {}", ctx.host_uid),
    };
    if !maps_host_uid {
        why.push(format!("no uid_map line maps to the {to_host}"));
    }
    judged(
        format!(
            "not the identity map; user ns ≠ host ({}); maps to {to_host}",
            host.map_or("none".into(), |h| h.to_string()),
        ),
        format!(
            "uid_map [{}] user ns {}",
            uid_map.split_whitespace().collect::<Vec<_>>().join(" "),
            user_ns.map_or("?".into(), |u| u.to_string())
        ),
        why.is_empty(),
        why.join("; "),
    )
}

/// What P6 saw when it executed a setuid-root binary from the image.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SetuidObs {
    /// The binary executed (setuid root), or `None` when the image has none of the candidates.
    pub binary: Option<String>,
    /// Our own effective uid.
    pub own_euid: u32,
    /// The running binary's effective uid and `CapEff`, read from its `/proc/PID/status`.
    pub status: Option<(u32, String)>,
    /// Why the status could not be read.
    pub error: Option<String>,
}

/// P6: a setuid-root binary must not change the effective uid nor gain capabilities.
#[must_use]
pub fn p6(o: &SetuidObs) -> Judged {
    let expect = format!("euid stays {}; CapEff 0000000000000000", o.own_euid);
    let Some(bin) = &o.binary else {
        return judged(
            expect,
            "no setuid-root binary",
            false,
            "missing tool: none of the candidate setuid-root binaries exists in the image, so nothing was tested",
        );
    };
    match &o.status {
        Some((euid, cap)) => judged(
            expect,
            format!("{bin}: euid {euid} CapEff {cap}"),
            *euid == o.own_euid && cap == "0000000000000000",
            "",
        ),
        None => judged(
            expect,
            format!("{bin}: not observed"),
            false,
            o.error.clone().unwrap_or_default(),
        ),
    }
}

/// P7 policy per call: the accepted errnos and why.
///
/// Measured on the testbed (podman 5.4.2, containers-common default profile, crun 1.21,
/// kernel 6.1 without Yama): see the report; `ptrace` is allowed by the profile and answers
/// `ESRCH`, `setns` answers `EBADF` (allowed, useless without `CAP_SYS_ADMIN`), `userfaultfd`
/// is refused with `EPERM`.
#[must_use]
pub fn p7_expected(call: &str, profile: crate::probe::Profile) -> (&'static [i32], &'static str) {
    match call {
        // runsc's `oci-seccomp` applies podman's profile without its `defaultErrnoRet`
        // (ENOSYS): an unknown call gets the filter's EPERM there.
        "unknown(999)" if profile == crate::probe::Profile::Gvisor => (
            &[libc::ENOSYS, libc::EPERM],
            "ENOSYS, or EPERM (gvisor: the seccomp filter's errno)",
        ),
        // gVisor does not implement these: the call reaches nothing (its own answer).
        "perf_event_open" | "open_by_handle_at" | "userfaultfd"
            if profile == crate::probe::Profile::Gvisor =>
        {
            (
                &[libc::EPERM, libc::ENOSYS, libc::ENODEV, libc::EOPNOTSUPP],
                "EPERM, or ENOSYS/ENODEV/EOPNOTSUPP (gvisor: not implemented)",
            )
        }
        "unknown(999)" => (&[libc::ENOSYS], "ENOSYS"),
        // Policy: the default profile allows ptrace (kernel ≥ 4.8) and setns; both are
        // harmless here: no CAP_SYS_PTRACE (P1) and a private pid ns (P20) for ptrace, no
        // CAP_SYS_ADMIN in any namespace we could join for setns. Allowed = the bad-argument
        // answer (ESRCH / EBADF), EPERM is accepted too (a stricter profile).
        "ptrace" => (&[libc::EPERM, libc::ESRCH], "EPERM or ESRCH (policy)"),
        "setns" if profile == crate::probe::Profile::Gvisor => (
            &[libc::EPERM, libc::EBADF, libc::EOPNOTSUPP],
            "EPERM or EBADF (policy), or EOPNOTSUPP (gvisor 2022: not implemented)",
        ),
        "setns" => (&[libc::EPERM, libc::EBADF], "EPERM or EBADF (policy)"),
        _ => (&[libc::EPERM], "EPERM"),
    }
}

/// P7: bad-argument syscalls (name, outcome).
#[must_use]
pub fn p7(calls: &[(String, Attempt)], profile: crate::probe::Profile) -> Judged {
    let expect = calls
        .iter()
        .map(|(n, _)| format!("{n}={}", p7_expected(n, profile).1))
        .collect::<Vec<_>>()
        .join(" ");
    let bad: Vec<&str> = calls
        .iter()
        .filter(|(n, a)| !a.is_errno(p7_expected(n, profile).0))
        .map(|(n, _)| n.as_str())
        .collect();
    judged(
        expect,
        list(calls),
        !calls.is_empty() && bad.is_empty(),
        if bad.is_empty() {
            "policy: ptrace and setns are allowed by the default seccomp profile and harmless without capabilities".to_string()
        } else {
            format!("allowed or wrong errno: {}", bad.join(", "))
        },
    )
}

/// P8: `mount -t tmpfs|cgroup|proc` attempts.
#[must_use]
pub fn p8(items: &[(String, Attempt)]) -> Judged {
    all_errno("tmpfs=EPERM cgroup=EPERM proc=EPERM", items, &[libc::EPERM])
}

/// What P9 saw in a child that tried to make a user namespace.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UsernsObs {
    /// `unshare(CLONE_NEWUSER)`.
    pub unshare_user: Option<Attempt>,
    /// Writing `uid_map` in the new namespace.
    pub uid_map: Option<Attempt>,
    /// `unshare(CLONE_NEWNS)` inside it.
    pub unshare_mnt: Option<Attempt>,
    /// `mount -t proc` inside it.
    pub mount_proc: Option<Attempt>,
    /// `mount -t cgroup2` inside it.
    pub mount_cgroup: Option<Attempt>,
    /// Our mount table is unchanged afterwards (no host-visible effect).
    pub mounts_unchanged: bool,
    /// The child could not be run or answered garbage.
    pub error: Option<String>,
}

/// P9: user namespace creation (decided policy).
///
/// Policy (§2 "decide the policy"; measured on the testbed: `unshare(CLONE_NEWUSER)` succeeds,
/// the `uid_map` write is refused with `EPERM`): creating a nested user namespace is accepted
/// (the default profile allows it; cyclix ships no custom seccomp profile), but it must not
/// give a working mount: either the namespace cannot be created (`EPERM`), or its `uid_map`
/// cannot be written, or `mount -t proc`/`cgroup2` inside it fail with `EPERM`; and our mount
/// table must be unchanged afterwards.
#[must_use]
pub fn p9(o: &UsernsObs) -> Judged {
    let expect = "unshare(CLONE_NEWUSER)=EPERM, or no working mapping/mount inside (EPERM); no host-visible mount";
    let t = |a: &Option<Attempt>| a.as_ref().map_or("-".into(), Attempt::text);
    let got = format!(
        "unshare_user={} uid_map={} unshare_mnt={} mount_proc={} mount_cgroup={}",
        t(&o.unshare_user),
        t(&o.uid_map),
        t(&o.unshare_mnt),
        t(&o.mount_proc),
        t(&o.mount_cgroup)
    );
    if let Some(e) = &o.error {
        return judged(expect, got, false, format!("the child failed: {e}"));
    }
    let eperm = |a: &Option<Attempt>| matches!(a, Some(Attempt::Errno(e)) if *e == libc::EPERM);
    let (pass, detail) = match &o.unshare_user {
        Some(Attempt::Errno(e)) if *e == libc::EPERM => (true, "user namespaces refused"),
        Some(Attempt::Ok) if eperm(&o.uid_map) => (
            true,
            "policy: accepted — a nested user namespace can be created but its uid_map cannot be written (EPERM), so it gives no privileged mapping",
        ),
        Some(Attempt::Ok) if eperm(&o.mount_proc) && eperm(&o.mount_cgroup) => (
            true,
            "policy: accepted — a nested user namespace works but proc/cgroup mounts inside it are refused (EPERM)",
        ),
        _ => (
            false,
            "a nested user namespace gave a working mount, or answered with an unexpected errno",
        ),
    };
    let pass = pass && o.mounts_unchanged;
    judged(
        expect,
        got,
        pass,
        if o.mounts_unchanged {
            detail
        } else {
            "our mount table changed"
        },
    )
}
