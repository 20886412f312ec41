//! Processes (P20, P21): namespace inodes, the pids in `/proc`, pid 1, the cgroup files.

use super::ns_inode;
use crate::probe::Context;
use crate::probe::verdict::Judged;
use crate::probe::verdict::processes as v;

/// P20.
#[must_use]
pub fn p20(ctx: &Context) -> Judged {
    let ns = v::PRIVATE_NS
        .iter()
        .filter_map(|n| Some(((*n).to_string(), ns_inode(n)?)))
        .collect();
    let pids = std::fs::read_dir("/proc").map_or(0, |rd| {
        rd.filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .bytes()
                    .all(|b| b.is_ascii_digit())
            })
            .count()
    });
    let init_comm = std::fs::read_to_string("/proc/1/comm")
        .ok()
        .map(|s| s.trim().to_string());
    v::p20(
        &v::NsObs {
            ns,
            pids,
            init_comm,
        },
        ctx,
    )
}

/// P21.
#[must_use]
pub fn p21(ctx: &Context) -> Judged {
    let rd = |f: &str| {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{f}"))
            .ok()
            .map(|s| s.trim().to_string())
    };
    v::p21(
        &v::CgroupObs {
            lines: std::fs::read_to_string("/proc/self/cgroup")
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect(),
            controllers: rd("cgroup.controllers").unwrap_or_default(),
            memory_max: rd("memory.max"),
            pids_max: rd("pids.max"),
            cpu_max: rd("cpu.max"),
        },
        ctx,
    )
}

/// W0 (`cyclix probe --watch` only): this process's dumpable flag and tracer, read before
/// anything else, then `PR_SET_DUMPABLE 0` as a second line of defence (it cannot close the
/// window between execve and here; the execute-only binary does, see [`v::w0`]), then the
/// tracer once more (the `gvisor` profile's check: its binary is readable).
#[must_use]
pub fn w0() -> v::WatchGuardObs {
    let tracer = || {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("TracerPid:"))
                    .and_then(|v| v.trim().parse().ok())
            })
    };
    let dumpable = crate::probe::sys::get_dumpable();
    let tracer_at_exec = tracer();
    let _ = nix::sys::prctl::set_dumpable(false);
    v::WatchGuardObs {
        dumpable,
        tracer: tracer_at_exec,
        tracer_after: tracer(),
    }
}
