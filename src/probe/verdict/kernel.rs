//! The kernel surface (P10–P12, P24): device nodes, masked `/proc` and `/sys` paths, writable
//! kernel knobs, the kernel log and symbols.

use super::{Attempt, Judged, judged, list};

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

/// What P25 saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelIdObs {
    /// The kernel's release as `uname(2)` gives it in the sandbox.
    pub release: String,
    /// The kernel log's first line, its timestamp cut (`syslog(READ_ALL)`), or the errno.
    pub log_head: Result<String, i32>,
    /// The host kernel's release from the context (empty: unknown).
    pub host_release: String,
}

/// How gVisor's kernel begins its log (its boot message, `dmesg` in a runsc sandbox).
pub const GVISOR_LOG_HEAD: &str = "Starting gVisor...";

/// P25: whose kernel the agent's system calls reach. Under the `gvisor` profile it must be
/// gVisor's: a release other than the host's AND gVisor's boot line first in the kernel log
/// (both, so neither a host that happens to report another release nor a log line alone
/// passes). Under the other profiles it states the fact (the agent's kernel is the host's, or
/// is not) and fails only when the sandbox names no release at all: tier `container` does not
/// claim a kernel of its own, and its records show P25 seeing the host's release — the
/// positive control of the gVisor verdict.
#[must_use]
pub fn p25(o: &KernelIdObs, profile: crate::probe::Profile) -> Judged {
    let log = match &o.log_head {
        Ok(l) => format!("log {l:?}"),
        Err(e) => format!("log {}", crate::probe::verdict::errno_name(*e)),
    };
    let got = format!(
        "release {} (host {}), {log}",
        o.release,
        if o.host_release.is_empty() {
            "unknown"
        } else {
            &o.host_release
        }
    );
    let same = !o.host_release.is_empty() && o.release == o.host_release;
    if profile == crate::probe::Profile::Gvisor {
        let gvisor_log = o.log_head.as_deref() == Ok(GVISOR_LOG_HEAD);
        let mut why = Vec::new();
        if o.host_release.is_empty() {
            why.push(
                "the host's release is unknown: nothing to tell the kernels apart".to_string(),
            );
        }
        if same {
            why.push(
                "the agent's kernel is the host's (its release is the host's): not gVisor"
                    .to_string(),
            );
        }
        if !gvisor_log {
            why.push(format!(
                "the kernel log does not begin with {GVISOR_LOG_HEAD:?}"
            ));
        }
        return judged(
            "gVisor's kernel: a release other than the host's, its log begins \"Starting gVisor...\"",
            got,
            why.is_empty(),
            why.join("; "),
        );
    }
    judged(
        "the kernel's release, compared with the host's (tier container shares the host's kernel)",
        got,
        !o.release.is_empty(),
        if same {
            "the agent's system calls reach the host's kernel".to_string()
        } else if o.host_release.is_empty() {
            "the host's release is unknown".to_string()
        } else {
            "the release is not the host's: another kernel answers (the host's default OCI runtime is not runc/crun?)".to_string()
        },
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
