//! The kernel surface (P10–P12, P24): `/dev`, the masked paths, kernel knobs opened for
//! writing (no byte written), the kernel log and `/proc/kallsyms`.

use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::Path;

use nix::sys::stat::{Mode, SFlag, mknod};

use super::unique;
use crate::probe::Context;
use crate::probe::clients::{io_attempt, nix_attempt};
use crate::probe::sys::{self};
use crate::probe::verdict::kernel as v;
use crate::probe::verdict::kernel::Masked;
use crate::probe::verdict::{Attempt, Judged};

/// P10.
#[must_use]
pub fn p10(_: &Context) -> Judged {
    let mut entries: Vec<String> = std::fs::read_dir("/dev")
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    if Path::new("/dev/net/tun").exists() {
        entries.push("net/tun".into());
    }
    let null_ok = std::fs::metadata("/dev/null")
        .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == nix::sys::stat::makedev(1, 3));
    let target = format!("/tmp/{}", unique("mknod"));
    let r = mknod(
        target.as_str(),
        SFlag::S_IFCHR,
        Mode::from_bits_truncate(0o600),
        nix::sys::stat::makedev(1, 3),
    );
    if r.is_ok() {
        let _ = std::fs::remove_file(&target);
    }
    v::p10(&v::DevObs {
        entries,
        null_ok,
        mknod: nix_attempt(r),
    })
}

/// P11.
#[must_use]
pub fn p11(_: &Context) -> Judged {
    let null = std::fs::metadata("/dev/null").map(|m| m.rdev()).ok();
    let items = v::MASKED_PATHS
        .iter()
        .map(|p| {
            let m = match std::fs::metadata(p) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Masked::Absent,
                Err(e) => Masked::Exposed(format!("stat: {e}")),
                Ok(m) if m.file_type().is_char_device() && Some(m.rdev()) == null => {
                    Masked::NullDev
                }
                Ok(m) if m.is_dir() => match std::fs::read_dir(p) {
                    Ok(mut rd) => {
                        if rd.next().is_none() {
                            Masked::EmptyDir
                        } else {
                            Masked::Exposed("a non-empty directory".into())
                        }
                    }
                    Err(e) => Masked::Exposed(format!("a directory we cannot list: {e}")),
                },
                Ok(_) => Masked::Exposed("a readable file".into()),
            };
            ((*p).to_string(), m)
        })
        .collect::<Vec<_>>();
    v::p11(&items)
}

/// Kernel knobs P12 opens for writing (no byte is written).
pub const KNOBS: &[&str] = &[
    "/proc/sys/kernel/core_pattern",
    "/proc/sysrq-trigger",
    "/sys/kernel/uevent_helper",
    "/sys/fs/cgroup/cgroup.procs",
];

/// P12.
#[must_use]
pub fn p12(_: &Context) -> Judged {
    let items: Vec<(String, Attempt)> = KNOBS
        .iter()
        .map(|p| {
            (
                (*p).to_string(),
                io_attempt(std::fs::OpenOptions::new().write(true).open(p)),
            )
        })
        .collect();
    v::p12(&items)
}

/// P25: the kernel's release (`uname`) and the first line of its log (`syslog`), against the
/// host's release in the context.
#[must_use]
pub fn p25(ctx: &Context) -> Judged {
    let release = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut buf = vec![0u8; 4096];
    let log = match sys::syslog_read_all(&mut buf) {
        Ok(n) => {
            let n = usize::try_from(n).unwrap_or(0).min(buf.len());
            Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
        }
        Err(e) => Err(e),
    };
    v::p25(
        &v::KernelIdObs {
            release,
            log_head: log.map(|l| {
                l.lines()
                    .map(|x| x.split_once("] ").map_or(x, |(_, t)| t).trim().to_string())
                    .find(|x| !x.is_empty())
                    .unwrap_or_default()
            }),
            host_release: ctx.host_kernel.clone(),
        },
        ctx.profile,
    )
}

/// P24.
#[must_use]
pub fn p24(_: &Context) -> Judged {
    let mut buf = vec![0u8; 4096];
    let syslog = Attempt::of(sys::syslog_read_all(&mut buf));
    // Only the first 5000 lines are judged: read no more of the file (all of it is some MB
    // and took most of P24's time).
    let lines: Vec<String> = std::fs::File::open("/proc/kallsyms").map_or_else(
        |_| Vec::new(),
        |f| {
            use std::io::BufRead as _;
            std::io::BufReader::new(f)
                .lines()
                .map_while(Result::ok)
                .take(5000)
                .collect()
        },
    );
    let nonzero = lines
        .iter()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|a| a.bytes().any(|b| b != b'0'))
        })
        .count();
    v::p24(&v::KernelObs {
        syslog,
        dmesg_restrict: std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict")
            .ok()
            .map(|s| s.trim().to_string()),
        kallsyms: (lines.len(), nonzero),
        modules_dir: Path::new("/lib/modules").exists(),
    })
}
