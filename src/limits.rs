//! The agent's resource limits against what the host can enforce. Pure.
//!
//! A limit in the spec (`agent.resources`) is a guarantee the user asked for. A rootless
//! container (or a host unit of the user manager) can only get it when the cgroup controller
//! is delegated to the user manager (`cgroup.controllers` of `user@UID.service`). Measured on
//! the testbed (no controller delegated): `podman run --memory=64m` fails in crun ("opening
//! file `memory.max` for writing: No such file or directory"), and so do `--cpus` and
//! `--pids-limit`; a run with `agent.resources.memory` failed in its start phase with the
//! agent unit's exit status 127 and the cause only in the journal, after its networks, pod and
//! proxy had been created. systemd host units (`MemoryMax=` for the host tiers) silently go
//! without a controller that is not delegated. Neither is acceptable: cyclix refuses such a
//! run before it creates anything, naming the key, the controller and the fix, and `cyclix
//! check` fails the same way for that tenant.
//!
//! When a limit is enforced and the agent is killed for it, the agent unit ends with systemd's
//! `Result=oom-kill` (the kernel's OOM killer acted in the unit's cgroup; podman's conmon and
//! the container are in it, `--cgroups=split`). [`oom_cause`] turns that into the record's
//! cause. Podman's `State.OOMKilled` cannot be read afterwards: Quadlet and the plain units run
//! the agent with `--rm`, so the container is gone when its unit ends.

use crate::spec::Resources;

/// One limit the spec asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// The spec key (`agent.resources.memory`).
    pub key: &'static str,
    /// The cgroup v2 controller enforcing it (`memory`).
    pub controller: &'static str,
}

/// The limits `r` asks for, in the order cpus, memory, pids.
#[must_use]
pub fn needed(r: &Resources) -> Vec<Need> {
    let mut v = Vec::new();
    if r.cpu_millis.is_some() {
        v.push(Need {
            key: "agent.resources.cpus",
            controller: "cpu",
        });
    }
    if r.memory_bytes.is_some() {
        v.push(Need {
            key: "agent.resources.memory",
            controller: "memory",
        });
    }
    if r.pids.is_some() {
        v.push(Need {
            key: "agent.resources.pids",
            controller: "pids",
        });
    }
    v
}

/// The fix for a controller that is not delegated (field report B09).
pub const DELEGATE_FIX: &str = "delegate the controllers to user managers: `sudo mkdir -p \
     /etc/systemd/system/user@.service.d && printf '[Service]\\nDelegate=cpu cpuset io memory \
     pids\\n' | sudo tee /etc/systemd/system/user@.service.d/delegate.conf && sudo systemctl \
     daemon-reload`, then log out and in (B09)";

/// Why a run with `r` must be refused on a host whose user manager has `delegated`
/// controllers (read from `file`; `Err` when unreadable), or `None` when every limit can be
/// enforced.
#[must_use]
pub fn refusal(r: &Resources, delegated: Result<&[String], &str>, file: &str) -> Option<String> {
    let needs = needed(r);
    if needs.is_empty() {
        return None;
    }
    let missing: Vec<String> = match delegated {
        Ok(d) => needs
            .iter()
            .filter(|n| !d.iter().any(|c| c == n.controller))
            .map(|n| format!("{} needs the `{}` controller", n.key, n.controller))
            .collect(),
        Err(e) => {
            return Some(format!(
                "the spec sets {} but the controllers delegated to the user manager cannot be \
                 read ({e}), so the limits may not be enforced; the run is refused, not run \
                 without them.\n  fix: {DELEGATE_FIX}, or remove the keys",
                needs.iter().map(|n| n.key).collect::<Vec<_>>().join(", ")
            ));
        }
    };
    if missing.is_empty() {
        return None;
    }
    let shown = match delegated {
        Ok([]) => "none".to_string(),
        Ok(d) => d.join(" "),
        Err(_) => String::new(),
    };
    Some(format!(
        "{}, which is not delegated to the user manager ({file}: {shown}): the limit cannot be \
         enforced on this host, so the run is refused instead of running without it.\n  fix: \
         {DELEGATE_FIX}, or remove the key from the spec",
        missing.join("; ")
    ))
}

/// The record's cause when the agent unit ended with systemd's `Result=oom-kill`, or `None`.
#[must_use]
pub fn oom_cause(unit_result: Option<&str>, r: &Resources) -> Option<String> {
    (unit_result == Some("oom-kill")).then(|| {
        let limit = r.memory_bytes.map_or_else(
            || "no agent.resources.memory set: the host ran out of memory".to_string(),
            |b| format!("agent.resources.memory = {}", bytes(b)),
        );
        format!("agent killed for memory (oom): {limit}")
    })
}

/// `256 MiB`, `2 GiB`, `1.5 GiB`, `512 B`.
#[must_use]
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut u = 0;
    while v >= 1024 && v.is_multiple_of(1024) && u < UNITS.len() - 1 {
        v /= 1024;
        u += 1;
    }
    if v >= 1024 && u < UNITS.len() - 1 {
        #[allow(clippy::cast_precision_loss)]
        let f = b as f64 / 1024f64.powi(i32::try_from(u + 1).unwrap_or(0));
        return format!("{f:.1} {}", UNITS[u + 1]);
    }
    format!("{v} {}", UNITS[u])
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str =
        "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/cgroup.controllers";

    fn res(memory: Option<u64>, cpu: Option<u32>, pids: Option<u32>) -> Resources {
        Resources {
            memory_bytes: memory,
            cpu_millis: cpu,
            pids,
        }
    }

    #[test]
    fn a_limit_the_host_cannot_enforce_refuses_the_run_naming_key_controller_and_fix() {
        let none: Vec<String> = Vec::new();
        let r = res(Some(256 << 20), None, Some(100));
        let why = refusal(&r, Ok(&none), FILE).expect("refused");
        for want in [
            "agent.resources.memory needs the `memory` controller",
            "agent.resources.pids needs the `pids` controller",
            "user@1000.service/cgroup.controllers: none",
            "Delegate=cpu cpuset io memory pids",
            "refused instead of running without it",
        ] {
            assert!(why.contains(want), "`{want}` missing: {why}");
        }
        let some = vec!["cpuset".to_string(), "memory".to_string()];
        let why = refusal(&r, Ok(&some), FILE).expect("pids still missing");
        assert!(
            !why.contains("`memory`") && why.contains("`pids`") && why.contains(": cpuset memory"),
            "{why}"
        );
        let all = vec!["cpu".to_string(), "memory".to_string(), "pids".to_string()];
        assert_eq!(refusal(&r, Ok(&all), FILE), None);
        assert_eq!(
            refusal(&res(None, None, None), Ok(&none), FILE),
            None,
            "no limit, nothing to enforce"
        );
        let why = refusal(
            &res(None, Some(500), None),
            Err("reading x: No such file"),
            FILE,
        )
        .expect("unknown");
        assert!(
            why.contains("agent.resources.cpus") && why.contains("cannot be read"),
            "{why}"
        );
    }

    #[test]
    fn an_oom_killed_agent_unit_is_named_in_the_cause() {
        assert_eq!(
            oom_cause(Some("oom-kill"), &res(Some(256 << 20), None, None)).as_deref(),
            Some("agent killed for memory (oom): agent.resources.memory = 256 MiB")
        );
        assert!(
            oom_cause(Some("oom-kill"), &res(None, None, None))
                .is_some_and(|c| c.contains("host ran out of memory"))
        );
        for other in [Some("exit-code"), Some("success"), Some("signal"), None] {
            assert_eq!(oom_cause(other, &res(Some(1 << 30), None, None)), None);
        }
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(2 << 30), "2 GiB");
        assert_eq!(bytes(1536 << 20), "1.5 GiB");
    }
}
