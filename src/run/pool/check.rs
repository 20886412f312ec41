//! The claim's check of a warm environment (issue 16): what is wrong with a claimed
//! environment compared with what its fill recorded, looked at before anything else of the
//! run exists. It is not the boundary proof (the run's whole probe suite still runs on the
//! claimed objects after the claim); it refuses an environment tampered with while it idled:
//! an edited file, a stranger on its networks, a container or a process left in its pod or
//! its proxy, a process in the proxy's or the pod's network namespace from outside them.
//!
//! One podman process looks, beside the file digests and the render: `podman ps --all --ns
//! --format json` for both networks and the pod (was a `network inspect` per network and a
//! `pod inspect`), and the first process and PID namespace of the proxy, the pod's infra
//! container and each service, whose processes are then read from the host's `/proc` and
//! cgroup tree (was a `podman top` of each, side by side: issue 33); the same look at `/proc`
//! gives every process's network namespace. What the look cannot see (a same-user process can
//! hide from it, or enter after it) is in docs/pool.md, "What the claim's look is not".

use anyhow::Context as _;

use super::Filled;
use super::env::{EnvHost, digest, env_files};
use crate::naming::RunNames;
use crate::podman::{ContainerInfo, Podman};

/// The processes a pooled proxy runs (`podman top … comm`): podman's init, squid (Debian's
/// `squid-openssl`, its kids), the SNI helper the proxy image ships (one Perl script:
/// `images/proxy/cyclix-sni-eq`), the budget helper (`images/proxy/cyclix-budget`) and
/// squid's certificate generator (`security_file_certgen`, its name cut to the kernel's 15
/// bytes; issue 31).
pub const PROXY_PROCESSES: &[&str] = &[
    "catatonit",
    "podman-init",
    "squid",
    "squid-openssl",
    "cyclix-sni-eq",
    "cyclix-budget",
    "security_file_c",
];

/// The one process a pod's infra container runs (podman's pause image: `catatonit -P`).
pub const INFRA_PROCESSES: &[&str] = &["catatonit"];

impl EnvHost<'_> {
    /// What is wrong with claimed environment `filled` compared with what its fill recorded
    /// (checked before anything else of the run): a file changed, the spec renders another
    /// environment now, a container other than the proxy and the pod's infra on its networks,
    /// a container in its pod other than the infra, a process in the proxy other than squid's,
    /// a process in the infra container besides its one `catatonit`, a process outside them in
    /// the proxy's or the pod's network namespace ([`net_strangers_wrong`]). A look that cannot
    /// be made is wrong too (fail closed). Empty when nothing is.
    #[must_use]
    pub fn check(&self, filled: &Filled, podman: &Podman) -> Vec<String> {
        let n = RunNames::new(&filled.env);
        let (proxy, infra) = (n.proxy(), n.infra());
        std::thread::scope(|s| {
            let listed = s.spawn(|| podman.all_containers());
            let mut wrong = self.files_wrong(filled);
            wrong.extend(self.idle_wrong(filled));
            let members: Vec<&str> = filled
                .services
                .iter()
                .map(|p| p.container.as_str())
                .collect();
            let agent = filled.agent.as_ref().map(|a| a.container.as_str());
            let in_pod: Vec<&str> = members.iter().copied().chain(agent).collect();
            let all = match joined(listed) {
                Ok(all) => {
                    wrong.extend(topology_wrong(&n, &in_pod, &all));
                    Ok(all)
                }
                Err(e) => {
                    wrong.push(format!(
                        "the containers on {}'s networks cannot be listed: {e:#}",
                        n.base()
                    ));
                    Err(e)
                }
            };
            // One look at every process's namespaces for all the containers; a second look
            // (later) takes a new one.
            let namespaces = || crate::run::procs::namespaces(std::path::Path::new("/proc"));
            let scan = namespaces();
            let top = |name: &str, scan: &Scan| container_processes(all.as_ref(), scan, name);
            let names: Vec<&str> = [proxy.as_str(), infra.as_str()]
                .into_iter()
                .chain(in_pod.iter().copied())
                .collect();
            // Each container's processes, looked at once.
            let (proxy_look, infra_look) = (top(&proxy, &scan), top(&infra, &scan));
            let service_looks: Vec<Look> = members.iter().map(|c| top(c, &scan)).collect();
            let agent_look: Option<Look> = agent.map(|a| top(a, &scan));
            if let (Ok(listing), Ok(first)) = (all.as_ref(), scan.as_ref()) {
                wrong.extend(net_strangers_wrong(
                    &net_namespaces(listing, &[proxy.as_str(), infra.as_str()]),
                    first,
                    &pids(
                        [&proxy_look, &infra_look]
                            .into_iter()
                            .chain(&service_looks)
                            .chain(agent_look.as_ref()),
                    ),
                    || {
                        std::thread::sleep(std::time::Duration::from_millis(SERVICE_LOOK_AGAIN_MS));
                        let again = namespaces();
                        let looks: Vec<Look> = names.iter().map(|c| top(c, &again)).collect();
                        let members = pids(&looks);
                        (again, members)
                    },
                    |pid| {
                        std::fs::read_to_string(format!("/proc/{pid}/comm"))
                            .map_or_else(|_| "?".into(), |c| c.trim_end().to_string())
                    },
                ));
            }
            wrong.extend(processes_wrong(
                &format!("the proxy {proxy}"),
                proxy_look,
                PROXY_PROCESSES,
                None,
            ));
            wrong.extend(processes_wrong(
                &format!("the pod's infra container {infra}"),
                infra_look,
                INFRA_PROCESSES,
                Some(1),
            ));
            let mut stale = false;
            if let (Some(rec), Some(look)) = (filled.agent.as_ref(), agent_look) {
                let paths = (self.paths)(&filled.env);
                let (w, older) = held_wrong(rec, all.as_ref(), look, &paths, self.cyclix_bin);
                wrong.extend(w);
                stale = older;
            }
            for (p, look) in filled.services.iter().zip(service_looks) {
                wrong.extend(service_processes_wrong(
                    p,
                    look,
                    || top(&p.container, &namespaces()),
                    crate::run::procs::executable,
                ));
            }
            if stale && wrong.is_empty() {
                // Held by the cyclix of before an upgrade: the run makes its own agent
                // container (its start phase), as a cold run does; the rest stays warm.
                let unit = crate::naming::container_unit(&n.agent());
                if let Err(e) = self
                    .units
                    .stop(&unit, crate::systemd::JobMode::Replace, self.start)
                {
                    wrong.push(format!(
                        "the agent container {} runs an older cyclix and could not be stopped: {e}",
                        n.agent()
                    ));
                }
            }
            wrong
        })
    }

    /// An environment whose agent container is held, idle for the pool's `max_idle` or longer
    /// (no keeper expired it): its unit's clock, which counts from the fill, would cut the run
    /// short (attack review).
    fn idle_wrong(&self, filled: &Filled) -> Option<String> {
        let max_idle_ms = u128::from(self.spec.pool.as_ref()?.max_idle_s) * 1000;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_millis();
        let idle = now.saturating_sub(filled.ready_ms);
        (filled.agent.is_some() && idle >= max_idle_ms).then(|| {
            format!(
                "idle {} s, past the pool's max_idle ({} s): its held agent container's time \
                 is spent (the keeper expires such environments)",
                idle / 1000,
                max_idle_ms / 1000
            )
        })
    }

    /// Every file of the environment against its digest at the fill, and the spec rendered
    /// now against the files the fill installed.
    fn files_wrong(&self, filled: &Filled) -> Vec<String> {
        let id = filled.env.as_str();
        let mut wrong = Vec::new();
        for (path, want) in filled.files.iter().chain(&filled.units) {
            match std::fs::read(path) {
                Ok(b) if digest(&b) == *want => {}
                Ok(_) => wrong.push(format!("{path} changed since the fill")),
                Err(e) => wrong.push(format!("{path} cannot be read ({e})")),
            }
        }
        if !filled.credentials_file.is_empty() {
            wrong.extend(super::credfile::wrong(
                std::path::Path::new(&filled.credentials_file),
                crate::host::namespaces::host_uid(),
                filled.credentials_gid,
            ));
        }
        match self.render(id, filled) {
            Ok(r) => {
                // The files the claiming run replaces anyway (the agent's holds the path of
                // the binary it mounts, which an upgrade since the fill changes) are left out.
                let paths = (self.paths)(id);
                let replaced = super::replaced_by_the_run(id, &self.spec.services);
                let kept = |p: &str| !replaced.iter().any(|name| p.ends_with(&format!("/{name}")));
                let now: Vec<(String, String)> = env_files(&r, id, &paths)
                    .into_iter()
                    .map(|(p, f)| (p.display().to_string(), digest(f.contents.as_bytes())))
                    .filter(|(p, _)| kept(p))
                    .collect();
                let then: Vec<(String, String)> = filled
                    .files
                    .iter()
                    .filter(|(p, _)| kept(p))
                    .cloned()
                    .collect();
                if now != then && wrong.is_empty() {
                    wrong.push(
                        "the spec renders another environment now (changed since the fill)".into(),
                    );
                }
            }
            Err(e) => wrong.push(format!("the spec does not render: {e:#}")),
        }
        wrong
    }
}

/// What is wrong with the held agent container `rec` (its processes `look`, its container in
/// the listing `all`): not exactly init and agent-wait, agent-wait no longer blocked on the
/// claim FIFO, its mounts or writable files changed, the host's side of it (`paths`) changed
/// (`held`). A look that cannot be made is wrong. With it, whether agent-wait runs another
/// program than the host's cyclix binary `cyclix_bin` now (an upgrade since the fill: not
/// wrong, but the run must not use that container).
fn held_wrong(
    rec: &super::held::HeldAgent,
    all: Result<&Vec<ContainerInfo>, &anyhow::Error>,
    look: Look,
    paths: &crate::run::inputs::RunPaths,
    cyclix_bin: &std::path::Path,
) -> (Vec<String>, bool) {
    use std::os::unix::fs::MetadataExt as _;
    let what = format!("the agent container {}", rec.container);
    let mut wrong = super::held::host_side_wrong(&paths.run_dir, &paths.worktree, &rec.claim);
    let init = all.ok().and_then(|all| {
        all.iter()
            .find(|c| c.names.contains(&rec.container))
            .and_then(|c| c.pid)
    });
    let (procs, init) = match (look, init) {
        (Ok(p), Some(i)) => (p, i),
        (Err(e), _) => {
            wrong.push(format!("{what}'s processes cannot be listed: {e:#}"));
            return (wrong, false);
        }
        (Ok(_), None) => {
            wrong.push(format!("{what} is not running (the fill left it running)"));
            return (wrong, false);
        }
    };
    let pid = match super::held::agent_wait_pid(init, &procs) {
        Ok(pid) => pid,
        Err(why) => {
            wrong.push(format!("{what} {why}"));
            return (wrong, false);
        }
    };
    match super::held::blocked_in_open(pid) {
        Ok(true) => {}
        Ok(false) => wrong.push(format!(
            "{what}'s agent-wait (pid {pid}) no longer waits for its claim"
        )),
        Err(e) => wrong.push(format!("{what}: {e:#}")),
    }
    let exe = crate::run::procs::executable(pid);
    let bin = std::fs::metadata(cyclix_bin).map(|m| format!("{}:{}", m.dev(), m.ino()));
    let stale = match (exe, bin) {
        (Ok(a), Ok(b)) => a != b,
        (Err(e), _) | (_, Err(e)) => {
            wrong.push(format!("{what}'s program cannot be read: {e}"));
            false
        }
    };
    match super::held::look(init, &procs, std::path::Path::new(&rec.upper)) {
        Ok(seen) => wrong.extend(super::held::wrong(rec, &seen)),
        Err(e) => wrong.push(format!("{what} cannot be looked at: {e:#}")),
    }
    (wrong, stale)
}

/// The processes of container `name` of listing `all` (`podman ps --all --ns`), read from the
/// host's `/proc` and cgroup tree ([`crate::run::procs::container_processes`]): every process
/// `podman top NAME hpid comm` gives a host pid, and more. An error when the listing failed or
/// the container is not in it or not running.
fn container_processes(
    all: Result<&Vec<ContainerInfo>, &anyhow::Error>,
    namespaces: &Scan,
    name: &str,
) -> anyhow::Result<Vec<(u32, String)>> {
    let all = all.map_err(|e| anyhow::anyhow!("the listing failed: {e:#}"))?;
    let namespaces = namespaces
        .as_ref()
        .map_err(|e| anyhow::anyhow!("/proc cannot be listed: {e}"))?;
    let c = all
        .iter()
        .find(|c| c.names.iter().any(|n| n == name))
        .ok_or_else(|| anyhow::anyhow!("no container {name}"))?;
    let pidns = c
        .namespaces
        .iter()
        .find_map(|(k, v)| (k == "Pidns").then_some(v.as_str()));
    let (Some(init), Some(pidns)) = (c.pid, pidns) else {
        anyhow::bail!("container {name} is {}, not running", c.state);
    };
    crate::run::procs::container_processes(
        std::path::Path::new("/proc"),
        std::path::Path::new("/sys/fs/cgroup"),
        init,
        pidns,
        namespaces,
    )
    .with_context(|| format!("reading the processes of container {name} (pid {init})"))
}

/// One look at every process's namespaces ([`crate::run::procs::namespaces`]).
type Scan = std::io::Result<Vec<crate::run::procs::Namespaces>>;

/// One container's processes (pid, `comm`), or why they could not be read.
type Look = anyhow::Result<Vec<(u32, String)>>;

/// The pids of the looks that worked.
fn pids<'a>(looks: impl IntoIterator<Item = &'a Look>) -> std::collections::BTreeSet<u32> {
    looks
        .into_iter()
        .filter_map(|l| l.as_ref().ok())
        .flatten()
        .map(|(pid, _)| *pid)
        .collect()
}

/// The network namespaces of containers `names` in `listing` (podman ps `--ns`'s `Net`), as
/// (container, inode); a container not listed or not running has none. Pure.
#[must_use]
pub fn net_namespaces(listing: &[ContainerInfo], names: &[&str]) -> Vec<(String, String)> {
    names
        .iter()
        .filter_map(|name| {
            let c = listing.iter().find(|c| c.names.iter().any(|n| n == name))?;
            let (_, inode) = c.namespaces.iter().find(|(k, _)| k == "Net")?;
            Some(((*name).to_string(), inode.clone()))
        })
        .collect()
}

/// What is wrong with the network namespaces `held` (container, inode: the proxy's and the
/// pod's, [`net_namespaces`]): a process in one of them that is none of the environment's
/// containers' (`members`, by pid), in the look `first`, and in the same namespace again
/// (that process or another: an attack review's spy re-entered every 0.5 s under new pids)
/// in a second look `again` takes ([`SERVICE_LOOK_AGAIN_MS`] later; a `podman exec` of a
/// health check passes through the namespace from outside for a moment). Such a process
/// entered it from outside (`nsenter -U -n -t PID` from a unit of its own: no PID namespace or
/// cgroup of the containers holds it), and sees and makes their connections; the fill left
/// none. `comm` names a pid. Pure but for `again`.
pub fn net_strangers_wrong(
    held: &[(String, String)],
    first: &[crate::run::procs::Namespaces],
    members: &std::collections::BTreeSet<u32>,
    again: impl FnOnce() -> (Scan, std::collections::BTreeSet<u32>),
    comm: impl Fn(u32) -> String,
) -> Vec<String> {
    let inodes: Vec<&str> = held.iter().map(|(_, i)| i.as_str()).collect();
    let seen = crate::run::procs::strangers(first, &inodes, members);
    if seen.is_empty() {
        return Vec::new();
    }
    let (scan, members) = again();
    let scan = match scan {
        Ok(s) => s,
        Err(e) => {
            return vec![format!(
                "the processes in the network namespaces of {} cannot be looked at again: {e}",
                held.iter()
                    .map(|(c, _)| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )];
        }
    };
    crate::run::procs::strangers(&scan, &inodes, &members)
        .into_iter()
        .filter(|(_, net)| seen.iter().any(|(_, n)| n == net))
        .map(|(pid, net)| {
            let whose = held
                .iter()
                .find(|(_, i)| format!("net:[{i}]") == net)
                .map_or("?", |(c, _)| c.as_str());
            format!(
                "{} (pid {pid}) is in the network namespace of {whose} from outside the \
                 environment's containers (entered with `nsenter`: it sees and makes their \
                 connections; the fill left none)",
                comm(pid)
            )
        })
        .collect()
}

/// The result of a look made in a scoped thread; a panic in it is an error of that look.
fn joined<T>(h: std::thread::ScopedJoinHandle<'_, crate::podman::Result<T>>) -> anyhow::Result<T> {
    match h.join() {
        Ok(r) => Ok(r?),
        Err(_) => Err(anyhow::anyhow!("the look panicked")),
    }
}

/// What is wrong with environment `n`'s containers in `all` (every container of the user,
/// `podman ps --all --ns`): its internal network must hold exactly its proxy and its pod's
/// infra container, its egress network exactly its proxy, its pod exactly its infra container
/// and the pooled `services` (each running), and no other container may share a namespace
/// with them ([`joined_wrong`]). Pure.
#[must_use]
pub fn topology_wrong(n: &RunNames, services: &[&str], all: &[ContainerInfo]) -> Vec<String> {
    let (proxy, infra) = (n.proxy(), n.infra());
    let name = |c: &ContainerInfo| c.names.join(",");
    let mut wrong = Vec::new();
    let mut both = vec![proxy.clone(), infra.clone()];
    both.sort();
    for (net, want) in [(n.base(), both), (n.egress(), vec![proxy.clone()])] {
        let mut got: Vec<String> = all
            .iter()
            .filter(|c| c.networks.contains(&net))
            .map(name)
            .collect();
        got.sort();
        if got != want {
            wrong.push(format!(
                "network {net} has the containers {got:?}, the fill left {want:?}"
            ));
        }
    }
    let pod_id = all
        .iter()
        .find(|c| c.names.contains(&infra) && c.is_infra)
        .and_then(|c| c.pod.clone());
    match pod_id {
        None => wrong.push(format!(
            "pod {} has no infra container {infra}: the fill left one",
            n.base()
        )),
        Some(id) => {
            let mut got: Vec<String> = all
                .iter()
                .filter(|c| c.pod.as_deref() == Some(id.as_str()))
                .map(name)
                .collect();
            got.sort();
            let mut want: Vec<String> = std::iter::once(infra.as_str())
                .chain(services.iter().copied())
                .map(str::to_string)
                .collect();
            want.sort();
            if got != want {
                wrong.push(format!(
                    "pod {} has the containers {got:?}, the fill left {want:?}",
                    n.base()
                ));
            }
            wrong.extend(joined_wrong(&infra, &proxy, services, all));
            let down: Vec<&str> = all
                .iter()
                .filter(|c| c.names.iter().any(|m| services.contains(&m.as_str())))
                .filter(|c| c.state != "running")
                .map(|c| c.names.first().map_or("?", String::as_str))
                .collect();
            if !down.is_empty() {
                wrong.push(format!(
                    "the pooled services {down:?} are not running (the fill left them running)"
                ));
            }
        }
    }
    wrong
}

/// The containers outside environment `n`'s (its `infra`, `proxy` and pooled `services`) that
/// share a namespace with one of them (`podman run --network/--pid/--ipc/--uts container:X`
/// joins one without joining a network or the pod, so neither look sees it). Pure.
#[must_use]
pub fn joined_wrong(
    infra: &str,
    proxy: &str,
    services: &[&str],
    all: &[ContainerInfo],
) -> Vec<String> {
    let ours = |c: &ContainerInfo| {
        c.names
            .iter()
            .any(|m| m == infra || m == proxy || services.contains(&m.as_str()))
    };
    let held: Vec<(&str, &str, &str)> = all
        .iter()
        .filter(|c| ours(c))
        .flat_map(|c| {
            let name = c.names.first().map_or("?", String::as_str);
            c.namespaces
                .iter()
                .map(move |(k, v)| (name, k.as_str(), v.as_str()))
        })
        .collect();
    let mut wrong = Vec::new();
    for c in all.iter().filter(|c| !ours(c)) {
        for (kind, inode) in &c.namespaces {
            if let Some((of, _, _)) = held.iter().find(|(_, k, v)| k == kind && v == inode) {
                wrong.push(format!(
                    "container {} shares the {kind} namespace of {of} (joined with `container:`; the fill left none)",
                    c.names.first().map_or(c.id.as_str(), String::as_str)
                ));
            }
        }
    }
    wrong
}

/// What is wrong with the processes `listed` of container `what` (`podman top … hpid comm`):
/// none (it is not running), one whose command is not in `allowed`, or more than `at_most`.
/// Empty when nothing is. Pure.
#[must_use]
pub fn processes_wrong(
    what: &str,
    listed: anyhow::Result<Vec<(u32, String)>>,
    allowed: &[&str],
    at_most: Option<usize>,
) -> Option<String> {
    let procs = match listed {
        Ok(p) => p,
        Err(e) => return Some(format!("{what}'s processes cannot be listed: {e:#}")),
    };
    let all = || {
        procs
            .iter()
            .map(|(pid, comm)| format!("{comm} (pid {pid})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let odd: Vec<String> = procs
        .iter()
        .filter(|(_, comm)| !allowed.contains(&comm.as_str()))
        .map(|(pid, comm)| format!("{comm} (pid {pid})"))
        .collect();
    if procs.is_empty() {
        Some(format!("{what} runs nothing (the fill left it running)"))
    } else if !odd.is_empty() {
        Some(format!(
            "{what} runs {} besides {}",
            odd.join(", "),
            allowed.join("/")
        ))
    } else if at_most.is_some_and(|m| procs.len() > m) {
        Some(format!(
            "{what} runs {} processes, the fill left {}: {}",
            procs.len(),
            at_most.unwrap_or_default(),
            all()
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests;

/// How long a second look at a pooled service waits when the first found a process the fill
/// did not see there: a health check's command (`podman healthcheck run`, an exec session in
/// the container) is gone by then; a process left there is not (ms).
pub const SERVICE_LOOK_AGAIN_MS: u64 = 1500;

/// What is wrong with pooled service `p`'s processes (`listed`): nothing running, or a name
/// the fill did not see there (`PooledService::processes`), or an executable it did not see
/// there (`PooledService::executables`, each process's by `exe`: a copy of another program
/// named like the service's), in `listed` AND in a second look (`again`, taken
/// [`SERVICE_LOOK_AGAIN_MS`] later), so a health check's passing command is not taken for a
/// process left in the pod.
#[must_use]
pub fn service_processes_wrong(
    p: &super::PooledService,
    listed: anyhow::Result<Vec<(u32, String)>>,
    again: impl FnOnce() -> anyhow::Result<Vec<(u32, String)>>,
    exe: impl Fn(u32) -> std::io::Result<String>,
) -> Option<String> {
    let allowed: Vec<&str> = p.processes.iter().map(String::as_str).collect();
    let what = format!("the service {}", p.container);
    let look = |listed: anyhow::Result<Vec<(u32, String)>>| {
        let listed = match listed {
            Ok(l) => l,
            e @ Err(_) => return processes_wrong(&what, e, &allowed, None),
        };
        let known = p.executables.as_deref().unwrap_or_default();
        let other: Vec<String> = listed
            .iter()
            .filter(|_| p.executables.is_some())
            .filter_map(|(pid, comm)| match exe(*pid) {
                Ok(id) if known.contains(&id) => None,
                Ok(id) => Some(format!("{comm} (pid {pid}, executable {id})")),
                Err(e) => Some(format!("{comm} (pid {pid}, executable unreadable: {e})")),
            })
            .collect();
        processes_wrong(&what, Ok(listed), &allowed, None).or_else(|| {
            (!other.is_empty()).then(|| {
                format!(
                    "{what} runs {}: not an executable the fill saw there",
                    other.join(", ")
                )
            })
        })
    };
    // No listing, or nothing running, is wrong at once; only an odd process gets a second look.
    let at_once = listed.as_ref().map_or(true, Vec::is_empty);
    let first = look(listed)?;
    if at_once {
        return Some(first);
    }
    std::thread::sleep(std::time::Duration::from_millis(SERVICE_LOOK_AGAIN_MS));
    look(again())
}
