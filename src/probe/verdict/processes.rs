//! Processes (P20, P21): private namespaces, the pid count, pid 1, the cgroup and its limits.

use std::collections::BTreeMap;

use super::{Judged, judged};
use crate::probe::Context;

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

/// The process limit P20 applies: before the agent starts, [`Context::max_pids`] (the sandbox
/// holds only its init, `agent-wait` and the probe); while the agent works (`ctx.watch`),
/// only the spec's `agent.resources.pids` when it sets one — an agent running `make -j` or
/// `pytest -n` is real work, not a leak; what the watch proves is that its processes stay
/// in the sandbox's namespaces (issue 20 item 5). `None`: no count limit.
#[must_use]
pub fn pid_limit(ctx: &Context) -> Option<usize> {
    if ctx.watch {
        ctx.limits.pids.and_then(|p| usize::try_from(p).ok())
    } else {
        Some(ctx.max_pids)
    }
}

/// P20: every namespace differs from the host-recorded one; pid 1 is our init; at most
/// [`pid_limit`] processes (at least one: our own).
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
    let limit = pid_limit(ctx);
    if o.pids == 0 || limit.is_some_and(|l| o.pids > l) {
        why.push(format!(
            "{} processes visible (want 1..={})",
            o.pids,
            limit.map_or("any".into(), |l| l.to_string())
        ));
    }
    if o.init_comm.as_deref() != Some(ctx.init_comm.as_str()) {
        why.push(format!("pid 1 is {:?}, not {}", o.init_comm, ctx.init_comm));
    }
    judged(
        format!(
            "pid net mnt ipc uts cgroup user ≠ host; {} pids; pid 1 = {}",
            limit.map_or("any number of".into(), |l| format!("≤ {l}")),
            ctx.init_comm
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

/// What W0 saw: the dumpable flag and the tracer right after exec, and the tracer again once
/// the probe made itself non-dumpable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchGuardObs {
    /// `prctl(PR_GET_DUMPABLE)` first thing.
    pub dumpable: Result<i64, i32>,
    /// `TracerPid` then.
    pub tracer: Option<u32>,
    /// `TracerPid` after `PR_SET_DUMPABLE 0`.
    pub tracer_after: Option<u32>,
}

/// W0 under the `gvisor` profile: gVisor cannot execute the execute-only binary, so the watch
/// probe starts dumpable (docs/tiers.md); what is required is that no tracer holds it once it
/// made itself non-dumpable (a tracer attached in the window stays attached, and shows). What
/// the window leaves open is the probe's own `/proc/PID/fd`: a line written into its output
/// only adds or swallows report lines, which the host refuses (`run::boundary::judge`).
fn w0_gvisor(o: &WatchGuardObs) -> Judged {
    let untraced = o.tracer == Some(0) && o.tracer_after == Some(0);
    judged(
        "TracerPid 0 before and after PR_SET_DUMPABLE 0 (gvisor: the probe starts dumpable)",
        format!(
            "dumpable {}, TracerPid {} then {}",
            match o.dumpable {
                Ok(d) => d.to_string(),
                Err(e) => super::errno_name(e),
            },
            o.tracer
                .map_or_else(|| "unknown".to_string(), |t| t.to_string()),
            o.tracer_after
                .map_or_else(|| "unknown".to_string(), |t| t.to_string())
        ),
        untraced,
        if untraced {
            String::new()
        } else {
            "the watch probe is traced (or its TracerPid unreadable)".to_string()
        },
    )
}

/// W0, the watch probe's own guard (`cyclix probe --watch`, issue 13 item 3): the process is
/// not dumpable (`dumpable` from `PR_GET_DUMPABLE`: 0 or 2, never 1) from its first instruction
/// and nobody traces it (`tracer`: `TracerPid` of `/proc/self/status`, 0). Non-dumpable is what
/// makes the kernel refuse ptrace and `/proc/PID/{mem,environ,fd}` to the agent's same-uid
/// processes (ptrace(2) "Ptrace access mode checking"); the binary being execute-only makes
/// the kernel set it inside execve (`would_dump`), before any code of the probe runs, so a 1
/// here means the execute-only copy did not take effect, and a tracer means one attached
/// before the exec.
#[must_use]
pub fn w0(o: &WatchGuardObs, profile: crate::probe::Profile) -> Judged {
    let (dumpable, tracer) = (o.dumpable, o.tracer);
    if profile == crate::probe::Profile::Gvisor {
        return w0_gvisor(o);
    }
    let d = match dumpable {
        Ok(d) => d.to_string(),
        Err(e) => super::errno_name(e),
    };
    let t = tracer.map_or_else(|| "unknown".to_string(), |t| t.to_string());
    let undumpable = matches!(dumpable, Ok(0 | 2));
    let untraced = tracer == Some(0);
    let mut why = Vec::new();
    if !undumpable {
        why.push("the watch probe is dumpable: the agent could ptrace it or read its memory (is the bind-mounted cyclix binary readable inside?)");
    }
    if !untraced {
        why.push("the watch probe is traced (or its TracerPid unreadable)");
    }
    judged(
        "not dumpable (0 or 2), TracerPid 0",
        format!("dumpable {d}, TracerPid {t}"),
        undumpable && untraced,
        why.join("; "),
    )
}
