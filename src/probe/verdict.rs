//! PURE: observation → verdict for every probe (security-cases §0, §2). No I/O here: the
//! observations come from [`super::observe`], the expected facts from [`super::Context`].
//!
//! Rules every function follows (§0.3): PASS only on the exact expected errno or status; a
//! [`Attempt::Timeout`] is a FAIL ("dropped, not rejected"); a missing tool or object is a FAIL,
//! never a skip; a deny check whose positive control did not work is a FAIL.

use std::collections::BTreeMap;

use nix::errno::Errno;
use serde::{Deserialize, Serialize};

use super::Context;

/// The outcome of one attempt (a syscall, a `connect()`, a write, an open).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Attempt {
    /// It succeeded.
    Ok,
    /// It failed with this `errno` (positive).
    Errno(i32),
    /// No answer within the probe's own deadline (a dropped packet, a hung call).
    Timeout,
    /// The tool, file or host needed for the attempt is missing; the text says which.
    Missing(String),
}

impl Attempt {
    /// From a `Result` whose error is an `errno`.
    #[must_use]
    #[allow(clippy::needless_pass_by_value)] // takes the syscall's result as returned
    pub fn of<T>(r: Result<T, i32>) -> Attempt {
        match r {
            Ok(_) => Attempt::Ok,
            Err(e) => Attempt::Errno(e),
        }
    }

    /// Short text: `ok`, `EPERM`, `timeout`, `missing: WHAT`.
    #[must_use]
    pub fn text(&self) -> String {
        match self {
            Attempt::Ok => "ok".into(),
            Attempt::Errno(e) => errno_name(*e),
            Attempt::Timeout => "timeout".into(),
            Attempt::Missing(w) => format!("missing: {w}"),
        }
    }

    fn is_errno(&self, want: &[i32]) -> bool {
        matches!(self, Attempt::Errno(e) if want.contains(e))
    }
}

/// `EPERM`, `ENETUNREACH`, ... for an errno number (`errno 999` when unknown).
#[must_use]
pub fn errno_name(e: i32) -> String {
    let n = Errno::from_raw(e);
    if n == Errno::UnknownErrno {
        format!("errno {e}")
    } else {
        format!("{n:?}")
    }
}

/// The reply to one request through the proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reply {
    /// A status line arrived.
    Status {
        /// The HTTP status code.
        code: u16,
        /// The proxy's error header (`X-Squid-Error`), if any.
        error_header: Option<String>,
        /// The `Location` header, if any.
        location: Option<String>,
        /// The first bytes of the body (at most 256).
        body: String,
    },
    /// No status line: the connection failed, timed out or closed.
    Failed(Attempt),
}

impl Reply {
    fn code(&self) -> Option<u16> {
        match self {
            Reply::Status { code, .. } => Some(*code),
            Reply::Failed(_) => None,
        }
    }

    /// Short text: `403 (ERR_ACCESS_DENIED 0)`, `200`, `timeout`.
    #[must_use]
    pub fn text(&self) -> String {
        match self {
            Reply::Status {
                code, error_header, ..
            } => match error_header {
                Some(h) => format!("{code} ({h})"),
                None => code.to_string(),
            },
            Reply::Failed(a) => a.text(),
        }
    }

    /// A deny: 403 or 407 with the proxy's error header.
    #[must_use]
    pub fn is_deny(&self) -> bool {
        matches!(
            self,
            Reply::Status {
                code: 403 | 407,
                error_header: Some(_),
                ..
            }
        )
    }
}

/// The judgement of one probe: what was expected, what was seen, PASS or not, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// The expected value (from security-cases §2 or the decided policy).
    pub expect: String,
    /// What the probe saw.
    pub got: String,
    /// PASS.
    pub pass: bool,
    /// Why, including any policy decision that applies.
    pub detail: String,
}

fn judged(
    expect: impl Into<String>,
    got: impl Into<String>,
    pass: bool,
    detail: impl Into<String>,
) -> Judged {
    Judged {
        expect: expect.into(),
        got: got.into(),
        pass,
        detail: detail.into(),
    }
}

/// A probe that did not finish within its hard deadline: FAIL (§2 "a TIMEOUT is a FAIL").
#[must_use]
pub fn timed_out(limit_ms: u64) -> Judged {
    judged(
        "an answer within the probe's deadline",
        "timeout",
        false,
        format!("dropped, not rejected: no result within {limit_ms} ms"),
    )
}

/// A probe that was not started because the suite's budget was used up: FAIL.
#[must_use]
pub fn over_budget(budget_ms: u64) -> Judged {
    judged(
        "run within the suite budget",
        "not run",
        false,
        format!("the suite budget of {budget_ms} ms was used up before this probe started"),
    )
}

/// Judges a list of (label, attempt) against the accepted errnos: PASS when every attempt
/// failed with one of `want`.
fn all_errno(expect: &str, items: &[(String, Attempt)], want: &[i32]) -> Judged {
    let got = list(items);
    if items.is_empty() {
        return judged(expect, "nothing attempted", false, "no attempt was made");
    }
    let bad: Vec<&str> = items
        .iter()
        .filter(|(_, a)| !a.is_errno(want))
        .map(|(l, _)| l.as_str())
        .collect();
    let pass = bad.is_empty();
    let detail = if pass {
        String::new()
    } else if items.iter().any(|(_, a)| *a == Attempt::Timeout) {
        format!(
            "dropped, not rejected (timeout) or wrong answer: {}",
            bad.join(", ")
        )
    } else {
        format!("wrong answer for: {}", bad.join(", "))
    };
    judged(expect, got, pass, detail)
}

fn list(items: &[(String, Attempt)]) -> String {
    items
        .iter()
        .map(|(l, a)| format!("{l}={}", a.text()))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------- identity, privilege

/// P1: the five capability sets from `/proc/self/status` (`CapInh` ... `CapBnd`), as read.
#[must_use]
pub fn p1(caps: &BTreeMap<String, String>) -> Judged {
    let want = ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"];
    let got = want
        .iter()
        .map(|k| format!("{k}={}", caps.get(*k).map_or("missing", String::as_str)))
        .collect::<Vec<_>>()
        .join(" ");
    let bad: Vec<&str> = want
        .iter()
        .copied()
        .filter(|k| caps.get(*k).map(String::as_str) != Some("0000000000000000"))
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

/// P3: `Seccomp` and `Seccomp_filters` from `/proc/self/status`.
#[must_use]
pub fn p3(mode: Option<&str>, filters: Option<&str>) -> Judged {
    let n: Option<u32> = filters.and_then(|f| f.parse().ok());
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
    let maps_host_uid = uid_map.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() == 3 && f[1] == ctx.host_uid.to_string()
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
    if !maps_host_uid {
        why.push(format!(
            "no uid_map line maps to the host uid {}",
            ctx.host_uid
        ));
    }
    judged(
        format!(
            "not the identity map; user ns ≠ host ({}); maps to host uid {}",
            host.map_or("none".into(), |h| h.to_string()),
            ctx.host_uid
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
pub fn p7_expected(call: &str) -> (&'static [i32], &'static str) {
    match call {
        "unknown(999)" => (&[libc::ENOSYS], "ENOSYS"),
        // Policy: the default profile allows ptrace (kernel ≥ 4.8) and setns; both are
        // harmless here: no CAP_SYS_PTRACE (P1) and a private pid ns (P20) for ptrace, no
        // CAP_SYS_ADMIN in any namespace we could join for setns. Allowed = the bad-argument
        // answer (ESRCH / EBADF), EPERM is accepted too (a stricter profile).
        "ptrace" => (&[libc::EPERM, libc::ESRCH], "EPERM or ESRCH (policy)"),
        "setns" => (&[libc::EPERM, libc::EBADF], "EPERM or EBADF (policy)"),
        _ => (&[libc::EPERM], "EPERM"),
    }
}

/// P7: bad-argument syscalls (name, outcome).
#[must_use]
pub fn p7(calls: &[(String, Attempt)]) -> Judged {
    let expect = calls
        .iter()
        .map(|(n, _)| format!("{n}={}", p7_expected(n).1))
        .collect::<Vec<_>>()
        .join(" ");
    let bad: Vec<&str> = calls
        .iter()
        .filter(|(n, a)| !a.is_errno(p7_expected(n).0))
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

/// What P10 saw in `/dev`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevObs {
    /// Names in `/dev` (non-recursive, plus `net/tun` if present).
    pub entries: Vec<String>,
    /// `/dev/null` is a character device 1:3 (positive control).
    pub null_ok: bool,
    /// `mknod /tmp/... c 1 3`.
    pub mknod: Attempt,
}

/// Device nodes that must not exist (§2 P10) — prefixes for the numbered families.
pub const FORBIDDEN_DEV: &[&str] = &[
    "sd", "nvme", "vd", "xvd", "hd", "kmsg", "mem", "kmem", "port", "fuse", "net/tun", "loop",
    "dm-", "mapper",
];

/// P10: the device set, `mknod`.
#[must_use]
pub fn p10(o: &DevObs) -> Judged {
    let forbidden: Vec<&String> = o
        .entries
        .iter()
        .filter(|e| FORBIDDEN_DEV.iter().any(|f| e.starts_with(f)))
        .collect();
    let pass = o.null_ok && forbidden.is_empty() && o.mknod.is_errno(&[libc::EPERM]);
    let mut why = Vec::new();
    if !o.null_ok {
        why.push("positive control failed: /dev/null is not char 1:3".to_string());
    }
    if !forbidden.is_empty() {
        why.push(format!("forbidden nodes: {forbidden:?}"));
    }
    judged(
        "no disk/kmsg/mem/port/fuse/tun nodes; mknod EPERM; /dev/null char 1:3",
        format!("{} entries; mknod={}", o.entries.len(), o.mknod.text()),
        pass,
        why.join("; "),
    )
}

/// One masked path as seen by P11.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Masked {
    /// A character device with `/dev/null`'s device number.
    NullDev,
    /// An empty directory (checked by listing it).
    EmptyDir,
    /// Absent on this kernel (`ENOENT`).
    Absent,
    /// Anything else: the text says what (a readable file, a non-empty dir).
    Exposed(String),
}

/// Paths podman masks by default plus `/sys/devices/virtual/powercap` (§2 P11).
///
/// Measured on podman 5.4.2: `/sys/dev/block` is NOT masked (a read-only sysfs listing of the
/// host's block device numbers; no device node is reachable, P10). Policy: accepted
/// information exposure, so it is not in this list; `--security-opt mask=/sys/dev/block`
/// (Quadlet `Mask=`) would remove it.
pub const MASKED_PATHS: &[&str] = &[
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/fs/selinux",
    "/sys/devices/virtual/powercap",
];

/// P11: every masked path is `/dev/null` or an empty dir (or absent on this kernel); the
/// positive control is that `/proc/keys` (always present) is masked.
#[must_use]
pub fn p11(items: &[(String, Masked)]) -> Judged {
    let exposed: Vec<String> = items
        .iter()
        .filter_map(|(p, m)| match m {
            Masked::Exposed(w) => Some(format!("{p}: {w}")),
            _ => None,
        })
        .collect();
    let control = items
        .iter()
        .any(|(p, m)| p == "/proc/keys" && *m == Masked::NullDev);
    let got = items
        .iter()
        .map(|(p, m)| {
            format!(
                "{p}={}",
                match m {
                    Masked::NullDev => "null",
                    Masked::EmptyDir => "empty-dir",
                    Masked::Absent => "absent",
                    Masked::Exposed(_) => "EXPOSED",
                }
            )
        })
        .collect::<Vec<_>>()
        .join(" ");
    let mut why = exposed;
    if !control {
        why.push("positive control failed: /proc/keys is not masked with /dev/null".into());
    }
    judged(
        "each masked path is /dev/null's char device or an empty dir (absent on this kernel is recorded)",
        got,
        why.is_empty(),
        why.join("; "),
    )
}

/// Kernel knobs that exist only with some kernel configurations (P12).
pub const OPTIONAL_KNOBS: &[&str] = &["/sys/kernel/uevent_helper", "/proc/sysrq-trigger"];

/// P12: opening the kernel knobs for writing (no byte is written).
///
/// `ENOENT` is accepted only for `/sys/kernel/uevent_helper` (absent with
/// `CONFIG_UEVENT_HELPER=n`) and `/proc/sysrq-trigger` (absent with `CONFIG_MAGIC_SYSRQ=n`;
/// measured on the testbed kernel): a knob that does not exist cannot be written.
#[must_use]
pub fn p12(items: &[(String, Attempt)]) -> Judged {
    let bad: Vec<&str> = items
        .iter()
        .filter(|(p, a)| {
            !(a.is_errno(&[libc::EROFS, libc::EACCES])
                || (OPTIONAL_KNOBS.contains(&p.as_str()) && a.is_errno(&[libc::ENOENT])))
        })
        .map(|(p, _)| p.as_str())
        .collect();
    judged(
        "EROFS or EACCES for each",
        list(items),
        !items.is_empty() && bad.is_empty(),
        if bad.is_empty() {
            String::new()
        } else {
            format!("writable or wrong errno: {}", bad.join(", "))
        },
    )
}

/// One line of `/proc/self/mountinfo`, the fields the probes use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The mount point (field 5).
    pub point: String,
    /// The root of the mount within its filesystem (field 4): for a bind mount, the source.
    pub root: String,
    /// Per-mount options (field 6), e.g. `ro,nosuid,nodev`.
    pub opts: Vec<String>,
    /// The filesystem type.
    pub fstype: String,
}

impl Mount {
    /// Has this per-mount option.
    #[must_use]
    pub fn has(&self, opt: &str) -> bool {
        self.opts.iter().any(|o| o == opt)
    }
}

/// The last mount at `point` (the one that is visible).
#[must_use]
pub fn mount_at<'a>(mounts: &'a [Mount], point: &str) -> Option<&'a Mount> {
    mounts.iter().rev().find(|m| m.point == point)
}

/// P13: `/`, `/sys` and `/sys/fs/cgroup` are mounted read-only.
#[must_use]
pub fn p13(mounts: &[Mount]) -> Judged {
    let items: Vec<(String, String)> = ["/", "/sys", "/sys/fs/cgroup"]
        .iter()
        .map(|p| {
            let s = match mount_at(mounts, p) {
                Some(m) if m.has("ro") => "ro".to_string(),
                Some(_) => "rw".to_string(),
                None => "missing".to_string(),
            };
            ((*p).to_string(), s)
        })
        .collect();
    judged(
        "/ ro, /sys ro, /sys/fs/cgroup ro",
        items
            .iter()
            .map(|(p, s)| format!("{p} {s}"))
            .collect::<Vec<_>>()
            .join(", "),
        items.iter().all(|(_, s)| s == "ro"),
        "",
    )
}

/// P14: creating files on the root filesystem.
#[must_use]
pub fn p14(items: &[(String, Attempt)]) -> Judged {
    all_errno(
        "EROFS for /probe-root-* and /usr/probe-*",
        items,
        &[libc::EROFS],
    )
}

/// One scratch directory as seen by P15.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScratchObs {
    /// The directory.
    pub path: String,
    /// Creating, writing and removing a file there.
    pub write: Attempt,
    /// Its mount (if it is a mount point).
    pub mount: Option<Mount>,
}

/// P15: `/tmp`, `/var/tmp`, `/run`, `/dev/shm` writable (positive control for P14) and mounted
/// `nosuid,nodev`.
#[must_use]
pub fn p15(items: &[ScratchObs]) -> Judged {
    let mut bad = Vec::new();
    for s in items {
        if s.write != Attempt::Ok {
            bad.push(format!("{}: write {}", s.path, s.write.text()));
        }
        match &s.mount {
            Some(m) if m.has("nosuid") && m.has("nodev") => {}
            Some(m) => bad.push(format!("{}: mounted {}", s.path, m.opts.join(","))),
            None => bad.push(format!("{}: not a separate mount", s.path)),
        }
    }
    judged(
        "writable, nosuid,nodev: /tmp /var/tmp /run /dev/shm",
        items
            .iter()
            .map(|s| {
                format!(
                    "{}={}[{}]",
                    s.path,
                    s.write.text(),
                    s.mount.as_ref().map_or(String::new(), |m| m.opts.join(","))
                )
            })
            .collect::<Vec<_>>()
            .join(" "),
        items.len() == 4 && bad.is_empty(),
        bad.join("; "),
    )
}

/// What P16 saw in the project directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectObs {
    /// Create, rename, delete of `.probe-*`.
    pub cycle: Attempt,
    /// The created file's owner uid (inside).
    pub owner: Option<u32>,
    /// Our effective uid.
    pub own_euid: u32,
    /// The host uid our uid maps to (from `uid_map`).
    pub host_uid_of_owner: Option<u32>,
    /// The project's mount.
    pub mount: Option<Mount>,
}

/// P16: the project is writable, files belong to the agent uid that maps to the invoking host
/// user, and the project mount and the writable git common dir mount carry `nosuid,nodev`
/// (§2 P16; a setuid file planted there would otherwise be runnable by other host users as the
/// invoking user, and by later sandboxes that mount the same tree).
#[must_use]
pub fn p16(o: &ProjectObs, ctx: &Context) -> Judged {
    let mut why = Vec::new();
    if o.cycle != Attempt::Ok {
        why.push(format!("create/rename/delete: {}", o.cycle.text()));
    }
    if o.owner != Some(o.own_euid) {
        why.push(format!("owner {:?} is not our uid {}", o.owner, o.own_euid));
    }
    if o.host_uid_of_owner != Some(ctx.host_uid) {
        why.push(format!(
            "owner maps to host uid {:?}, not {}",
            o.host_uid_of_owner, ctx.host_uid
        ));
    }
    match &o.mount {
        Some(m) if m.has("nosuid") && m.has("nodev") => {}
        Some(m) => why.push(format!(
            "{} is mounted without nosuid,nodev ({})",
            ctx.workdir,
            m.opts.join(",")
        )),
        None => why.push(format!("{} is not a mount point", ctx.workdir)),
    }
    judged(
        format!(
            "create/rename/delete ok; owner maps to host uid {}; project nosuid,nodev",
            ctx.host_uid
        ),
        format!(
            "cycle={} owner={:?}->{:?} opts={}",
            o.cycle.text(),
            o.owner,
            o.host_uid_of_owner,
            o.mount.as_ref().map_or("-".into(), |m| m.opts.join(","))
        ),
        why.is_empty(),
        why.join("; "),
    )
}

/// P17: the user repository's git dir — its host path, its `config` and `hooks`, and the
/// repository around it — does not exist in the sandbox (each must be `ENOENT`), plus the
/// positive control (a write in the private repository's own `.git`).
///
/// Policy (issue 11): the agent commits into a private repository of the run; nothing of the
/// user's repository is mounted, so nothing host git reads can be written from here. Files
/// the host may run later (`.bashrc`, `.mcp.json`, `Makefile`, `.github/`) are the agent's
/// product, imported as data and held from delivery when they are automation files.
#[must_use]
pub fn p17(items: &[(String, Attempt)], control: &Attempt) -> Judged {
    let mut j = all_errno(
        "ENOENT for the user's git dir, its config and hooks, and its repository; a write in /work/.git ok",
        items,
        &[libc::ENOENT],
    );
    j.got = format!("{} control={}", j.got, control.text());
    if *control != Attempt::Ok {
        j.pass = false;
        j.detail = format!(
            "positive control failed: a write in the private repository's .git gave {}",
            control.text()
        );
    } else if j.pass {
        j.detail = "policy: the agent's repository is its own; the user's is not mounted".into();
    }
    j
}

/// Mount points every agent container has (podman 5.4, `--read-only`, `--init`, rootless):
/// the base set of §2 P18 plus the device-node binds and masks podman adds.
pub const BASE_MOUNTS: &[&str] = &[
    "/",
    "/proc",
    "/dev",
    "/dev/pts",
    "/dev/mqueue",
    "/dev/shm",
    "/sys",
    "/sys/fs/cgroup",
    "/tmp",
    "/var/tmp",
    "/run",
    "/etc/hosts",
    "/etc/hostname",
    "/etc/resolv.conf",
    "/run/.containerenv",
    "/run/podman-init",
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
    "/dev/console",
    // read-only and masked paths (podman defaults)
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/asound",
    "/proc/interrupts",
];

/// P18: every mount point is expected; none exposes a host home or runtime dir it should not.
#[must_use]
pub fn p18(mounts: &[Mount], ctx: &Context) -> Judged {
    let mut allowed: Vec<String> = BASE_MOUNTS.iter().map(|s| (*s).to_string()).collect();
    allowed.extend(MASKED_PATHS.iter().map(|s| (*s).to_string()));
    allowed.push(ctx.workdir.clone());
    allowed.extend(ctx.expected_binds.iter().cloned());
    let extra: Vec<String> = mounts
        .iter()
        .filter(|m| !allowed.contains(&m.point))
        .map(|m| format!("{} (from {})", m.point, m.root))
        .collect();
    let declared = |p: &str| p == ctx.workdir;
    let leaks: Vec<String> = mounts
        .iter()
        .filter(|m| {
            !declared(&m.point)
                && (m.root.starts_with("/home/")
                    || m.root.starts_with("/run/user/")
                    || m.root.starts_with("/root"))
        })
        .map(|m| format!("{} <- {}", m.point, m.root))
        .collect();
    let has_root = mounts.iter().any(|m| m.point == "/");
    let mut why = Vec::new();
    if !has_root {
        why.push("mountinfo unreadable or has no / (positive control)".to_string());
    }
    if !extra.is_empty() {
        why.push(format!("unexpected mounts: {}", extra.join(", ")));
    }
    if !leaks.is_empty() {
        why.push(format!("host home/runtime paths: {}", leaks.join(", ")));
    }
    judged(
        "only the base set, the project and context.expected_binds",
        format!("{} mounts, {} unexpected", mounts.len(), extra.len()),
        why.is_empty(),
        why.join("; "),
    )
}

/// What P19 saw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SocketObs {
    /// Socket files found by the walk (outside `/proc` and `/sys`).
    pub found: Vec<String>,
    /// The walk found the probe's own socket (positive control).
    pub control_found: bool,
    /// The walk finished within its budget.
    pub complete: bool,
    /// Paths in `/proc/net/unix`.
    pub net_unix: Vec<String>,
    /// Socket-ish variables set in our environment (`SSH_AUTH_SOCK`, `DBUS_SESSION_BUS_ADDRESS`, ...).
    pub env: Vec<String>,
}

/// Names that mark a dangerous socket (engine sockets, the user and system bus, ssh agents).
pub const BAD_SOCKET_MARKS: &[&str] = &[
    "docker.sock",
    "podman.sock",
    "containerd.sock",
    "/bus",
    "system_bus_socket",
    "/systemd/",
    "/run/user/",
    "ssh-",
    "agent.",
    "crio.sock",
];

/// P19: no engine, bus or agent socket is reachable.
#[must_use]
pub fn p19(o: &SocketObs) -> Judged {
    let bad = |p: &str| BAD_SOCKET_MARKS.iter().any(|m| p.contains(m)) || p.ends_with("/bus");
    let hits: Vec<&String> = o
        .found
        .iter()
        .chain(o.net_unix.iter())
        .filter(|p| bad(p))
        .collect();
    let mut why = Vec::new();
    if !o.control_found {
        why.push(
            "positive control failed: the walk did not find the probe's own socket".to_string(),
        );
    }
    if !o.complete {
        why.push("the file walk did not finish within its budget".into());
    }
    if !hits.is_empty() {
        why.push(format!("dangerous sockets: {hits:?}"));
    }
    if !o.env.is_empty() {
        why.push(format!("socket variables in env: {:?}", o.env));
    }
    judged(
        "no docker/podman/containerd socket, no user or system bus, no SSH agent",
        format!(
            "{} sockets {:?}; /proc/net/unix {:?}",
            o.found.len(),
            o.found,
            o.net_unix
        ),
        why.is_empty(),
        why.join("; "),
    )
}

/// What P20 saw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NsObs {
    /// Our namespace inodes by name (`pid`, `net`, ...).
    pub ns: BTreeMap<String, u64>,
    /// Number of processes visible in `/proc`.
    pub pids: usize,
    /// `/proc/1/comm`.
    pub init_comm: Option<String>,
}

/// Namespaces that must differ from the host's (§2 P20; `time` is shared by design).
pub const PRIVATE_NS: &[&str] = &["pid", "net", "mnt", "ipc", "uts", "cgroup", "user"];

/// P20: every namespace differs from the host-recorded one; few processes; pid 1 is our init.
#[must_use]
pub fn p20(o: &NsObs, ctx: &Context) -> Judged {
    let mut why = Vec::new();
    for n in PRIVATE_NS {
        match (o.ns.get(*n), ctx.host_namespaces.get(*n)) {
            (Some(a), Some(b)) if a == b => why.push(format!("{n} is the host's ({a})")),
            (None, _) => why.push(format!("{n}: unreadable")),
            (_, None) => why.push(format!(
                "{n}: no host-recorded inode (positive control missing)"
            )),
            _ => {}
        }
    }
    if o.pids == 0 || o.pids > ctx.max_pids {
        why.push(format!(
            "{} processes visible (want 1..={})",
            o.pids, ctx.max_pids
        ));
    }
    if o.init_comm.as_deref() != Some(ctx.init_comm.as_str()) {
        why.push(format!("pid 1 is {:?}, not {}", o.init_comm, ctx.init_comm));
    }
    judged(
        format!(
            "pid net mnt ipc uts cgroup user ≠ host; ≤ {} pids; pid 1 = {}",
            ctx.max_pids, ctx.init_comm
        ),
        format!("{} pids, pid 1 {:?}, ns {:?}", o.pids, o.init_comm, o.ns),
        why.is_empty(),
        why.join("; "),
    )
}

/// What P21 saw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CgroupObs {
    /// `/proc/self/cgroup` lines.
    pub lines: Vec<String>,
    /// `cgroup.controllers` of our cgroup.
    pub controllers: String,
    /// `memory.max`, `pids.max`, `cpu.max` (`None` when the file is absent).
    pub memory_max: Option<String>,
    /// See `memory_max`.
    pub pids_max: Option<String>,
    /// See `memory_max`.
    pub cpu_max: Option<String>,
}

/// P21: a private cgroup namespace, and the spec's limits in force.
///
/// Policy (measured on the testbed: no controller is delegated, `cgroup.controllers` is empty):
/// limits are required exactly where the spec sets them (`context.limits`); an unset limit is
/// not required. A configured limit whose controller file is missing or differs is a FAIL (a
/// limit that is not enforced is worse than none, because the spec claims it).
#[must_use]
pub fn p21(o: &CgroupObs, ctx: &Context) -> Judged {
    let mut why = Vec::new();
    if o.lines.is_empty() {
        why.push("/proc/self/cgroup unreadable".to_string());
    }
    let non_root: Vec<&String> = o
        .lines
        .iter()
        .filter(|l| l.rsplit(':').next() != Some("/"))
        .collect();
    if !non_root.is_empty() {
        why.push(format!("not a private cgroup ns: {non_root:?}"));
    }
    let l = &ctx.limits;
    let mut check = |name: &str, want: Option<String>, got: &Option<String>| {
        if let Some(w) = want
            && got.as_deref().map(str::trim) != Some(w.as_str())
        {
            why.push(format!(
                "{name}: want {w}, got {got:?} (controllers: '{}')",
                o.controllers.trim()
            ));
        }
    };
    check(
        "memory.max",
        l.memory_bytes.map(|b| b.to_string()),
        &o.memory_max,
    );
    check("pids.max", l.pids.map(|p| p.to_string()), &o.pids_max);
    check(
        "cpu.max",
        l.cpu_millis
            .map(|m| format!("{} 100000", u64::from(m) * 100)),
        &o.cpu_max,
    );
    let configured = l.memory_bytes.is_some() || l.pids.is_some() || l.cpu_millis.is_some();
    judged(
        format!(
            "every cgroup path /; limits as configured ({})",
            if configured { "set" } else { "none configured" }
        ),
        format!(
            "{:?}; controllers '{}'; memory.max {:?} pids.max {:?} cpu.max {:?}",
            o.lines,
            o.controllers.trim(),
            o.memory_max,
            o.pids_max,
            o.cpu_max
        ),
        why.is_empty(),
        if why.is_empty() && !configured {
            "policy: the spec sets no limits, so none is required".to_string()
        } else {
            why.join("; ")
        },
    )
}

/// What P22 saw: variables of our environment and of every readable `/proc/*/environ`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvObs {
    /// (source, NAME, sha256 of the value in lowercase hex).
    pub vars: Vec<(String, String, String)>,
    /// How many environ files were read (positive control: at least our own).
    pub sources: usize,
}

/// Name fragments that mark a secret or a host handle (§2 P22), matched case-insensitively.
pub const SECRET_MARKS: &[&str] = &[
    "pass",
    "secret",
    "key",
    "token",
    "aws_",
    "github_",
    "ssh_auth_sock",
    "dbus_session",
    "xdg_runtime_dir",
];

/// P22: no forbidden name, no secret-looking name that is not allowed, no forbidden value.
#[must_use]
pub fn p22(o: &EnvObs, ctx: &Context) -> Judged {
    let mut why = Vec::new();
    if o.sources == 0 || o.vars.is_empty() {
        why.push("positive control failed: no environment could be read".to_string());
    }
    let mut names: Vec<String> = Vec::new();
    for (src, name, hash) in &o.vars {
        let lower = name.to_ascii_lowercase();
        let allowed = ctx.allowed_env_names.contains(name);
        if ctx.forbidden_env_names.contains(name) {
            why.push(format!("{src}: forbidden name {name}"));
        } else if !allowed && SECRET_MARKS.iter().any(|m| lower.contains(m)) {
            why.push(format!("{src}: secret-looking name {name}"));
        }
        if ctx
            .forbidden_env_sha256
            .iter()
            .any(|h| h.eq_ignore_ascii_case(hash))
        {
            why.push(format!("{src}: {name} carries a forbidden value"));
        }
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    why.dedup();
    judged(
        "no forbidden name or value; secret-looking names only if allowlisted",
        format!("{} sources, names {}", o.sources, names.join(",")),
        why.is_empty(),
        why.join("; "),
    )
}

/// A key linked to a keyring: its description and, for a keyring, how many keys it holds
/// (`Ok(1)` for a plain key; the errno when it cannot be read).
pub type LinkedKey = (String, Result<usize, i32>);

/// A keyring as P23 saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyring {
    /// Its own description (`keyring;UID;GID;PERM;NAME`) or the errno name.
    pub own: String,
    /// The keys linked to it: (description, how many keys a linked keyring holds — `Ok(1)`
    /// for a plain key), or the `KEYCTL_READ` errno.
    pub linked: Result<Vec<LinkedKey>, i32>,
}

/// P23: `/proc/keys` masked; the session and user keyrings hold no key (an errno such as
/// `EACCES` also shows nothing readable).
///
/// Policy (measured: a process started with `podman exec` has the session keyring `_ses` of
/// the exec'ing user's systemd unit, which links the host user's user keyring `_uid.UID` with
/// full user permissions): a linked *keyring* is accepted only when it is empty (or
/// unreadable); any plain key, or a linked keyring holding keys, is a FAIL because the agent
/// could read the host user's keys.
#[must_use]
pub fn p23(proc_keys_masked: bool, session: &Keyring, user: &Keyring) -> Judged {
    let t = |k: &Keyring| match &k.linked {
        Ok(l) => format!("[{}] linked {l:?}", k.own),
        Err(e) => format!("[{}] {}", k.own, errno_name(*e)),
    };
    // The one key allowed: systemd's `invocation_id` user key, which a unit with
    // `KeyringMode=private` (cyclix-run@.service) gets in its fresh session keyring
    // (systemd.exec(5)); a unit id, not a secret. Any other key fails.
    let empty = |k: &Keyring| match &k.linked {
        Ok(l) => l.iter().all(|(d, n)| {
            (d.starts_with("keyring;") && matches!(n, Ok(0) | Err(_)))
                || (d.starts_with("user;") && d.ends_with(";invocation_id"))
        }),
        Err(_) => true,
    };
    judged(
        "/proc/keys masked; @s and @u hold no key",
        format!(
            "/proc/keys {}; @s {}; @u {}",
            if proc_keys_masked {
                "masked"
            } else {
                "READABLE"
            },
            t(session),
            t(user)
        ),
        proc_keys_masked && empty(session) && empty(user),
        "",
    )
}

/// What P24 saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelObs {
    /// `syslog(READ_ALL)`.
    pub syslog: Attempt,
    /// `/proc/sys/kernel/dmesg_restrict` as read (for the record).
    pub dmesg_restrict: Option<String>,
    /// Lines of `/proc/kallsyms` read, and how many had a non-zero address.
    pub kallsyms: (usize, usize),
    /// `/lib/modules` exists.
    pub modules_dir: bool,
}

/// P24: `dmesg` refused, kallsyms zeroed, no `/lib/modules`.
///
/// Policy (§2): the effect decides; with `kernel.dmesg_restrict=0` the read succeeds and this
/// is a FAIL naming the sysctl (the default profile allows `syslog`). Measured on the testbed:
/// `dmesg_restrict=1`, `EPERM`.
#[must_use]
pub fn p24(o: &KernelObs) -> Judged {
    let mut why = Vec::new();
    if o.syslog != Attempt::Errno(libc::EPERM) {
        why.push(format!("syslog READ_ALL gave {} (dmesg_restrict={:?}; set kernel.dmesg_restrict=1 on the host)", o.syslog.text(), o.dmesg_restrict));
    }
    if o.kallsyms.0 == 0 {
        why.push("positive control failed: /proc/kallsyms unreadable".into());
    }
    if o.kallsyms.1 > 0 {
        why.push(format!(
            "{} kallsyms lines with real addresses",
            o.kallsyms.1
        ));
    }
    if o.modules_dir {
        why.push("/lib/modules exists".into());
    }
    judged(
        "syslog EPERM; kallsyms addresses 0; no /lib/modules",
        format!(
            "syslog={} dmesg_restrict={} kallsyms {}/{} non-zero modules={}",
            o.syslog.text(),
            o.dmesg_restrict.as_deref().unwrap_or("?"),
            o.kallsyms.1,
            o.kallsyms.0,
            o.modules_dir
        ),
        why.is_empty(),
        why.join("; "),
    )
}

// ---------------------------------------------------------------- network

/// What N1 saw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteObs {
    /// Interfaces with their IPv4 addresses (`eth0` → `["10.213.7.3"]`).
    pub ifaces: BTreeMap<String, Vec<String>>,
    /// Default routes found (v4 and v6, excluding the kernel's reject route on `lo`).
    pub defaults: Vec<String>,
    /// `/proc/net/route` was readable (positive control).
    pub read_ok: bool,
}

/// Parses `a.b.c.d/len` and tests membership.
#[must_use]
pub fn in_subnet(ip: &str, cidr: &str) -> bool {
    let Some((net, len)) = cidr.split_once('/') else {
        return false;
    };
    let (Ok(ip), Ok(net), Ok(len)) = (
        ip.parse::<std::net::Ipv4Addr>(),
        net.parse::<std::net::Ipv4Addr>(),
        len.parse::<u32>(),
    ) else {
        return false;
    };
    if len > 32 {
        return false;
    }
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    u32::from(ip) & mask == u32::from(net) & mask
}

/// N1: only `lo` and one interface in the run's subnet; no default route.
#[must_use]
pub fn n1(o: &RouteObs, ctx: &Context) -> Judged {
    let mut why = Vec::new();
    if !o.read_ok {
        why.push("/proc/net/route unreadable".to_string());
    }
    let others: Vec<(&String, &Vec<String>)> = o
        .ifaces
        .iter()
        .filter(|(n, _)| n.as_str() != "lo")
        .collect();
    if others.len() != 1 {
        why.push(format!(
            "want exactly one non-lo interface, got {}",
            others.len()
        ));
    }
    for (n, ips) in &others {
        if ips.is_empty() || !ips.iter().all(|i| in_subnet(i, &ctx.subnet)) {
            why.push(format!("{n} {ips:?} not in {}", ctx.subnet));
        }
    }
    if !o.defaults.is_empty() {
        why.push(format!("default routes: {:?}", o.defaults));
    }
    judged(
        format!("lo + one interface in {}; no default route", ctx.subnet),
        format!("ifaces {:?}; defaults {:?}", o.ifaces, o.defaults),
        why.is_empty(),
        why.join("; "),
    )
}

/// N2: direct TCP/UDP to public addresses → `ENETUNREACH`.
#[must_use]
pub fn n2(items: &[(String, Attempt)]) -> Judged {
    all_errno("ENETUNREACH for each", items, &[libc::ENETUNREACH])
}

/// N3: direct IPv6 → `ENETUNREACH`; no global IPv6 address.
#[must_use]
pub fn n3(items: &[(String, Attempt)], global_v6: &[String]) -> Judged {
    let mut j = all_errno(
        "ENETUNREACH; no global IPv6 address",
        items,
        &[libc::ENETUNREACH],
    );
    j.got = format!("{} global_v6={global_v6:?}", j.got);
    if !global_v6.is_empty() {
        j.pass = false;
        j.detail = format!("global IPv6 addresses: {global_v6:?}");
    }
    j
}

/// N4: direct connections to cloud metadata endpoints → `ENETUNREACH`.
#[must_use]
pub fn n4(items: &[(String, Attempt)]) -> Judged {
    all_errno("ENETUNREACH for each", items, &[libc::ENETUNREACH])
}

/// [`proxy_denies`] for a deny-all run (empty allowlist): the positive control is the proxy's
/// own immediate deny (403/407 with `X-Squid-Error`) of a request for the denied host.
#[must_use]
pub fn proxy_denies_all(items: &[(String, Reply)], control: &Reply) -> Judged {
    let mut j = proxy_denies(
        items,
        &Reply::Status {
            code: 200,
            error_header: None,
            location: None,
            body: String::new(),
        },
    );
    j.expect =
        "403/407 with X-Squid-Error for each; control: the proxy's own 403 (deny-all run)".into();
    j.got = format!(
        "{} control={}",
        j.got
            .rsplit_once(" control=")
            .map_or(j.got.as_str(), |(a, _)| a),
        control.text()
    );
    if !control.is_deny() {
        j.pass = false;
        j.detail = format!(
            "positive control failed: the proxy did not answer with its own deny: {}; {}",
            control.text(),
            j.detail
        )
        .trim_end_matches("; ")
        .to_string();
    }
    j
}

/// N8 for a deny-all run: GET and CONNECT are answered at once with the proxy's own deny.
#[must_use]
pub fn n8_deny_all(get: &Reply, connect: &Reply) -> Judged {
    judged(
        "deny-all run: GET 403 and CONNECT 403 from the proxy (X-Squid-Error)",
        format!("GET {} CONNECT {}", get.text(), connect.text()),
        get.is_deny() && connect.is_deny(),
        "policy: with an empty allowlist the proxy answering its deny at once is the positive control",
    )
}

/// Proxy deny probes (N5, N9, N10, N11, N12 denies): every request denied (403/407 with the
/// proxy's error header), and the positive control (`GET http://ALLOWED/`) answered 200.
#[must_use]
pub fn proxy_denies(items: &[(String, Reply)], control: &Reply) -> Judged {
    let got = format!(
        "{} control={}",
        items
            .iter()
            .map(|(l, r)| format!("{l}={}", r.text()))
            .collect::<Vec<_>>()
            .join(" "),
        control.text()
    );
    let mut why = Vec::new();
    if control.code() != Some(200) {
        why.push(format!(
            "positive control failed: the allowed host gave {}",
            control.text()
        ));
    }
    let bad: Vec<&str> = items
        .iter()
        .filter(|(_, r)| !r.is_deny())
        .map(|(l, _)| l.as_str())
        .collect();
    if !bad.is_empty() {
        let timeout = items
            .iter()
            .any(|(_, r)| *r == Reply::Failed(Attempt::Timeout));
        why.push(format!(
            "{}not denied: {}",
            if timeout {
                "dropped, not rejected; "
            } else {
                ""
            },
            bad.join(", ")
        ));
    }
    if items.is_empty() {
        why.push("nothing attempted".into());
    }
    judged(
        "403/407 with X-Squid-Error for each; control 200",
        got,
        why.is_empty(),
        why.join("; "),
    )
}

/// N6: the gateway and `host.containers.internal` refuse fast on service ports; the control is
/// a TCP connect to the proxy.
#[must_use]
pub fn n6(items: &[(String, Attempt)], control: &Attempt) -> Judged {
    let mut j = all_errno(
        "ECONNREFUSED, EHOSTUNREACH or ENETUNREACH for each; proxy connect ok",
        items,
        &[libc::ECONNREFUSED, libc::EHOSTUNREACH, libc::ENETUNREACH],
    );
    j.got = format!("{} control={}", j.got, control.text());
    if *control != Attempt::Ok {
        j.pass = false;
        j.detail = format!("positive control failed: proxy connect {}", control.text());
    }
    j
}

/// One DNS answer as seen by N7.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dns {
    /// A reply: its rcode and the IPv4 addresses in the answer section.
    Reply {
        /// RCODE (0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN, 5 REFUSED).
        rcode: u8,
        /// A records.
        addrs: Vec<String>,
    },
    /// No reply.
    Failed(Attempt),
}

impl Dns {
    fn text(&self) -> String {
        match self {
            Dns::Reply { rcode, addrs } => format!("rcode {rcode} {addrs:?}"),
            Dns::Failed(a) => a.text(),
        }
    }
}

/// N7: the run's resolver answers the proxy's name (control) and refuses to resolve an
/// external name (an error rcode, no addresses, within 1 s); direct DNS is unreachable.
///
/// Policy (measured on the testbed, aardvark-dns 1.14): an external name on an internal
/// network gets an error rcode at once; a timeout is a FAIL.
#[must_use]
pub fn n7(control: &Dns, external: &Dns, direct: &Attempt, ctx: &Context) -> Judged {
    let proxy_ip = ctx.proxy_ip();
    let mut why = Vec::new();
    match control {
        Dns::Reply { rcode: 0, addrs }
            if addrs
                .iter()
                .any(|a| Some(a.as_str()) == proxy_ip.as_deref()) => {}
        _ => why.push(format!(
            "positive control failed: {} did not resolve to {proxy_ip:?}",
            ctx.proxy_name
        )),
    }
    match external {
        Dns::Reply { rcode, addrs } if *rcode != 0 && addrs.is_empty() => {}
        Dns::Reply { rcode: 0, addrs } if addrs.is_empty() => {}
        other => why.push(format!("external name: {}", other.text())),
    }
    if !direct.is_errno(&[libc::ENETUNREACH]) {
        why.push(format!("direct DNS to 8.8.8.8: {}", direct.text()));
    }
    judged(
        "control resolves to the proxy; example.com refused (error rcode, no address, < 1 s); 8.8.8.8:53 ENETUNREACH",
        format!(
            "control {}; example.com {}; direct {}",
            control.text(),
            external.text(),
            direct.text()
        ),
        why.is_empty(),
        why.join("; "),
    )
}

/// N8: the positive controls through the proxy: `GET http://ALLOWED:PORT/` → 200 and
/// `CONNECT ALLOWED:PORT` → 200.
///
/// Policy: the TLS handshake of §2 N8 needs a TLS server on an allowed host; the testbed has
/// none, so the check is the `200 Connection established` of the tunnel.
#[must_use]
pub fn n8(get: &Reply, connect: &Reply) -> Judged {
    judged(
        "GET 200, CONNECT 200",
        format!("GET {} CONNECT {}", get.text(), connect.text()),
        get.code() == Some(200) && connect.code() == Some(200),
        "policy: no TLS server on the allowed host, so the tunnel's 200 is the check",
    )
}

/// N13: a plain request for the allowed URI with a smuggled `Host:` is decided on the URI: 200
/// with the allowed host's page (squid rewrites Host from the URI), or a deny.
#[must_use]
pub fn n13(reply: &Reply, allowed_marker: &str) -> Judged {
    let pass = match reply {
        Reply::Status {
            code: 200, body, ..
        } => body.contains(allowed_marker) || allowed_marker.is_empty(),
        r => r.is_deny(),
    };
    judged(
        "200 from the allowed host (decided on the URI) or 403",
        reply.text(),
        pass,
        "policy: TLS SNI inside an allowed CONNECT (domain fronting) is an accepted, documented risk",
    )
}

/// N14: a redirect from an allowed URL reaches the client as a 3xx (the proxy does not follow
/// it), and the follow-up request to the target is denied on its own.
#[must_use]
pub fn n14(redirect: Option<&Reply>, follow_up: &Reply) -> Judged {
    let mut why = Vec::new();
    if let Some(r) = redirect
        && !matches!(
            r,
            Reply::Status {
                code: 300..=399,
                location: Some(_),
                ..
            }
        )
    {
        why.push(format!("the redirect endpoint answered {}", r.text()));
    }
    if !follow_up.is_deny() {
        why.push(format!(
            "follow-up request not denied: {}",
            follow_up.text()
        ));
    }
    judged(
        "3xx passed through; follow-up 403",
        format!(
            "redirect {}; follow-up {}",
            redirect.map_or("not configured".into(), Reply::text),
            follow_up.text()
        ),
        why.is_empty(),
        if why.is_empty() && redirect.is_none() {
            "policy: no redirect endpoint in the context; only the follow-up request is checked"
                .into()
        } else {
            why.join("; ")
        },
    )
}

/// N15: raw sockets and link/route changes → `EPERM`; ICMP to the outside fails.
#[must_use]
pub fn n15(items: &[(String, Attempt)]) -> Judged {
    let bad: Vec<&str> = items
        .iter()
        .filter(|(l, a)| {
            if l.starts_with("ping") {
                !a.is_errno(&[libc::ENETUNREACH, libc::EACCES, libc::EPERM])
            } else {
                !a.is_errno(&[libc::EPERM])
            }
        })
        .map(|(l, _)| l.as_str())
        .collect();
    judged(
        "AF_PACKET, SOCK_RAW, RTM_NEWROUTE, RTM_NEWLINK: EPERM; ping fails",
        list(items),
        !items.is_empty() && bad.is_empty(),
        if bad.is_empty() {
            String::new()
        } else {
            format!("wrong answer: {}", bad.join(", "))
        },
    )
}

/// N16: all four proxy variables point at the proxy; `NO_PROXY`/`no_proxy` list only the
/// allowed local entries (no `*`, no domain suffix).
#[must_use]
pub fn n16(env: &BTreeMap<String, String>, ctx: &Context) -> Judged {
    let mut why = Vec::new();
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        if env.get(k) != Some(&ctx.proxy_url) {
            why.push(format!("{k}={:?}", env.get(k)));
        }
    }
    for k in ["NO_PROXY", "no_proxy"] {
        if let Some(v) = env.get(k) {
            let bad: Vec<&str> = v
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty() && !ctx.no_proxy_allowed.iter().any(|a| a == e))
                .collect();
            if !bad.is_empty() {
                why.push(format!("{k} has {bad:?}"));
            }
        }
    }
    judged(
        format!(
            "HTTP(S)_PROXY, http(s)_proxy = {}; NO_PROXY ⊆ {:?}",
            ctx.proxy_url, ctx.no_proxy_allowed
        ),
        env.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        why.is_empty(),
        why.join("; "),
    )
}

#[cfg(test)]
mod tests;

/// E1: every escape attempt fails: the host key and sockets are not there (`ENOENT`), the host
/// path cannot be created (`ENOENT`, `EROFS`, `EACCES`), the host sentinel cannot be signalled
/// (`ESRCH`, `EPERM`). Nothing attempted is a FAIL.
#[must_use]
pub fn e1(items: &[(String, Attempt)]) -> Judged {
    all_errno(
        "each attempt fails: ENOENT/EROFS/EACCES for host paths, ESRCH/EPERM for the sentinel, ENOENT/ECONNREFUSED for host sockets",
        items,
        &[
            libc::ENOENT,
            libc::EROFS,
            libc::EACCES,
            libc::ESRCH,
            libc::EPERM,
            libc::ECONNREFUSED,
        ],
    )
}

/// The report-only form of the proxy deny probes (N9, N10, N12, N13): the spec switched
/// enforcement of names, ports and IP literals off (the record says so), so any status line
/// from the proxy passes; a request the proxy did not answer (refused, dropped, timed out)
/// fails, because tools then hang instead of failing fast.
#[must_use]
pub fn report_only_answers(items: &[(String, Reply)]) -> Judged {
    let unanswered: Vec<&str> = items
        .iter()
        .filter(|(_, r)| !matches!(r, Reply::Status { .. }))
        .map(|(l, _)| l.as_str())
        .collect();
    judged(
        "report-only run: every request answered by the proxy (would-be denials are logged, not enforced)",
        list_replies(items),
        !items.is_empty() && unanswered.is_empty(),
        if unanswered.is_empty() {
            String::new()
        } else {
            format!("not answered: {}", unanswered.join(", "))
        },
    )
}

fn list_replies(items: &[(String, Reply)]) -> String {
    items
        .iter()
        .map(|(l, r)| format!("{l}={}", r.text()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// N5/N11 in a report-only run: every request answered by the proxy itself (a squid error
/// page, `X-Squid-Error`: 403 after resolution to a private address, or 503 for a name that
/// does not resolve), never forwarded to the target.
#[must_use]
pub fn proxy_not_forwarded(items: &[(String, Reply)]) -> Judged {
    let bad: Vec<&str> = items
        .iter()
        .filter(|(_, r)| {
            !matches!(
                r,
                Reply::Status {
                    error_header: Some(_),
                    ..
                }
            )
        })
        .map(|(l, _)| l.as_str())
        .collect();
    judged(
        "report-only run: each request answered by the proxy itself (X-Squid-Error), not forwarded",
        list_replies(items),
        !items.is_empty() && bad.is_empty(),
        if bad.is_empty() {
            String::new()
        } else {
            format!("forwarded or unanswered: {}", bad.join(", "))
        },
    )
}
