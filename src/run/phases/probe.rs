//! The probe phase and the leak watch: the probes run inside the agent's held-back container,
//! its processes' environments are scanned from the host, strangers on its network and the
//! tripwires are looked at; then the agent goes (`ctl/go`) or is refused (`ctl/refused`).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result};

use super::super::boundary;
use super::super::state::now_ms;
use super::super::tripwire::{self, Tripwires};
use crate::render::{self};
use crate::run::seam::RunPodman;

/// What the probe phase and the leak watch need of the run's inputs.
pub(crate) struct Probe<'a> {
    /// The run id (its network is named after it).
    pub(crate) run_id: &'a str,
    /// The run's state directory (its control directory gets the verdict file).
    pub(crate) run_dir: &'a Path,
    /// The deadline of one probe run (`Deadlines::probe`).
    pub(crate) deadline: Duration,
    /// Host variables the sandbox must never see.
    pub(crate) watched: &'a [boundary::Watched],
    /// The agent's variables (`agent.env`): handed to its held-back container at the go
    /// ([`release`]), their values among `secrets`.
    pub(crate) agent_env: &'a [String],
    /// The run's secret values (name, value).
    pub(crate) secrets: &'a [(String, Vec<u8>)],
    /// The run's tier (where its report FIFO is: `render::plan::report_fifo`).
    pub(crate) tier: crate::tier::Tier,
    /// The run's private repository (tier `gvisor`'s report FIFO is beside it).
    pub(crate) worktree: &'a Path,
    /// Tier `gvisor`'s runsc: the sandbox's processes are then listed by gVisor's kernel
    /// (`RunPodman::gvisor_members`), and the host-side scan of their environments is not
    /// made (the host's `/proc` shows runsc, not them: `run::boundary::GVISOR_NO_HOST_SCAN`).
    pub(crate) gvisor: Option<&'a crate::tier::runsc::OciRuntime>,
}

/// Writes the agent's verdict file: `ctl/go` lets it start, `ctl/refused` (holding `why`,
/// which `cyclix agent-wait` prints) keeps it from ever starting. With the go, the agent's
/// variables are handed over (`run::handover::give`, within the probe deadline): only a
/// proven container ever gets them. Returns when (ms since the Unix epoch), taken before the
/// file exists.
///
/// # Errors
/// The file cannot be written, or the hand-over failed (the agent then never starts).
pub(crate) fn release(inp: &Probe<'_>, host: &dyn RunPodman, go: bool, why: &str) -> Result<u128> {
    let ctl = inp.run_dir.join(render::plan::CTL_DIR);
    let (file, text) = if go {
        (ctl.join(render::plan::GO_FILE), "")
    } else {
        (ctl.join(render::plan::REFUSED_FILE), why)
    };
    // Taken before the file exists: nothing the agent does can start earlier (the egress
    // split of `collect::egress_source` relies on it).
    let at = now_ms();
    std::fs::write(&file, text.as_bytes())
        .with_context(|| format!("writing {}", file.display()))?;
    if go && !inp.agent_env.is_empty() {
        let vars: Vec<(String, Vec<u8>)> = inp
            .secrets
            .iter()
            .filter(|(k, _)| inp.agent_env.contains(k))
            .cloned()
            .collect();
        host.hand_over(&ctl.join(render::plan::HANDOVER_FILE), &vars, inp.deadline)?;
    }
    Ok(at)
}

/// The boundary check, without the verdict file ([`release`] writes it): runs the probes inside the
/// agent's (held back) container, scans its processes' environments from the host, lists
/// strangers on the run's network and checks the tripwires. The probe report goes into
/// `probes` as soon as it is read; returns why the boundary is refused (empty: proven).
pub(crate) fn boundary_proven(
    inp: &Probe<'_>,
    host: &(dyn RunPodman + Sync),
    container: &str,
    tripwires: Option<&mut Tripwires>,
    probes: &mut Vec<serde_json::Value>,
) -> Result<Vec<String>> {
    // The agent unit was started in the start phase, next to the proxy; its agent-wait runs
    // the probes once the report FIFO is opened here (no `podman exec`, issue 16). The
    // probes, the environment scan and the network listing are independent looks: side by
    // side, each with its own deadline, all of them judged.
    let network = crate::naming::RunNames::new(inp.run_id).base();
    let (report, environ, members) = std::thread::scope(|s| {
        let environ = s.spawn(|| match inp.gvisor {
            Some(_) => Ok(Vec::new()),
            None => host.sandbox_environ(container),
        });
        let members = s.spawn(|| host.network_members(&network));
        let fifo = render::plan::report_fifo(inp.run_dir, inp.worktree, inp.tier);
        let report = host.held_probe(container, &fifo, inp.deadline);
        (report, joined(environ), joined(members))
    });
    let (exit, stdout) = report?;
    let (report, ok, mut why) = boundary::judge(exit, &stdout);
    *probes = report;
    if !ok && why.is_empty() {
        why.push(format!(
            "the probe run exited {exit} without a complete report"
        ));
    }
    // A probe's own short-lived child (P9's, in a user namespace of its own) can be seen by
    // the scan beside the probes and not be readable: then the sandbox is scanned again now
    // the report is in, and that scan decides for every process it finds (what the first
    // one read is judged too).
    let mut procs = environ?;
    if procs.iter().any(|p| p.unreadable.is_some()) {
        procs.retain(|p| p.unreadable.is_none());
        procs.extend(host.sandbox_environ(container)?);
    }
    crate::failpoint::kill_point("probe.reported");
    let known: Vec<u32> = procs.iter().map(|p| p.pid).collect();
    why.extend(held_alone(&|| members_now(inp, host, container, &known))?);
    why.extend(boundary::leaks(&procs, inp.watched));
    why.extend(boundary::network_strangers(&network, &members?));
    if let Some(tw) = tripwires {
        why.extend(tripwire::check(tw));
    }
    Ok(why)
}

/// How long the look at the held container waits for a probe's child to end (an ended one
/// not yet reaped is a zombie and does not count) before what still runs refuses the go.
pub(crate) const HELD_ALONE_WAIT: Duration = Duration::from_secs(2);

/// Why the held agent container does not hold only its init and agent-wait now that the
/// probes are done ([`alone`]), looked at again every 50 ms for at most [`HELD_ALONE_WAIT`]:
/// at the go nothing else may run there (a process left by image code the probes ran could
/// take the hand-over FIFO, `run::handover`, or watch the agent start). Empty: alone.
///
/// # Errors
/// The container's processes cannot be read (`known`: pids an earlier look saw).
fn held_alone(
    members_now: &dyn Fn() -> Result<Vec<crate::run::seam::Member>>,
) -> Result<Vec<String>> {
    let end = std::time::Instant::now() + HELD_ALONE_WAIT;
    loop {
        let members = members_now()?;
        match alone(&members) {
            None => return Ok(Vec::new()),
            Some(why) if std::time::Instant::now() >= end => return Ok(vec![why]),
            Some(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The processes of the agent container now: from the host's `/proc` (`known`: pids an
/// earlier look saw), or under tier `gvisor` as gVisor's kernel lists them.
///
/// # Errors
/// They cannot be read.
pub(crate) fn members_now(
    inp: &Probe<'_>,
    host: &dyn RunPodman,
    container: &str,
    known: &[u32],
) -> Result<Vec<crate::run::seam::Member>> {
    match inp.gvisor {
        Some(runsc) => host.gvisor_members(container, runsc),
        None => host.container_members(container, known),
    }
}

/// Whether `members` of the held agent container are exactly its init (pid 1 in its PID
/// namespace: podman's catatonit) and one other process, agent-wait: `None` when they are,
/// else why not, naming every process but the init. Pure.
#[must_use]
pub(crate) fn alone(members: &[crate::run::seam::Member]) -> Option<String> {
    let inits = members.iter().filter(|m| m.init).count();
    if inits == 1 && members.len() == 2 {
        return None;
    }
    let others: Vec<String> = members
        .iter()
        .filter(|m| !m.init)
        .map(|m| format!("{} ({})", m.pid, m.comm))
        .collect();
    Some(format!(
        "the held agent container runs more than its init and agent-wait after the probes: {}; \
         something the image ran (a probe runs some of its binaries) is still there, and nothing \
         but agent-wait may run at the go",
        match (others.is_empty(), inits) {
            (true, 0) => "no process at all".to_string(),
            (true, _) => "its init alone (agent-wait is gone)".to_string(),
            (false, _) => others.join(", "),
        }
    ))
}

/// The result of a scoped thread; a panic in it is an error of the look it made.
fn joined<T>(h: std::thread::ScopedJoinHandle<'_, Result<T>>) -> Result<T> {
    h.join().unwrap_or_else(|_| {
        Err(anyhow::anyhow!(
            "a host-side look of the probe phase panicked"
        ))
    })
}

/// What one leak-watch round found.
#[derive(Debug, Default)]
pub(crate) struct Round {
    /// Findings that fail the run (failed watch probes, watched values, names that decide).
    pub(crate) findings: Vec<String>,
    /// Why the round did not come back whole: the watch probe killed, stopped or hung past the
    /// round's deadline, garbled output, the environments unreadable. A finding too (fail
    /// closed) unless the agent turns out to have ended.
    pub(crate) incomplete: Vec<String>,
    /// Variables merely named like a watched one (the agent's doing), from the host-side scan
    /// and from P22: recorded, not findings.
    pub(crate) named: Vec<String>,
}

/// One leak-watch round: the ★ probes inside the agent container (`--watch`: with the W0
/// guard) with a deadline of at most one watch `interval`, so a watch probe the agent stopped
/// or hung is seen within one interval, and the host-side scan of every sandbox process's
/// environment (authoritative: it does not depend on the sandbox's cooperation).
pub(crate) fn watch_round(
    inp: &Probe<'_>,
    host: &dyn RunPodman,
    container: &str,
    interval: Duration,
) -> Round {
    let deadline = inp.deadline.min(interval);
    let mut r = Round::default();
    // Under tier `gvisor` the watch re-runs the gVisor profile's share of the ★ probes, P3
    // aside: runsc puts no seccomp filter on a process `podman exec` starts (the watch
    // probe's own); the agent's tree got it at its start, which P3 proved before the go.
    let watch: Vec<&str> = boundary::WATCH_PROBES
        .iter()
        .copied()
        .filter(|p| {
            inp.gvisor.is_none() || (crate::probe::profile::GVISOR_PROBES.contains(p) && *p != "P3")
        })
        .collect();
    match host.probe(container, &watch, true, deadline) {
        Ok((exit, out)) => {
            let (probes, ok, why) = boundary::judge(exit, &out);
            if !ok && why.is_empty() {
                r.incomplete.push(cut_short(exit, &probes));
            } else if !probes.iter().any(|p| p.get("id").and_then(serde_json::Value::as_str) == Some("W0")) {
                r.incomplete.push("the watch round's report has no W0 guard line (not the watch probe's output)".into());
            }
            r.findings = why;
            r.named = named_by_p22(&probes);
        }
        Err(e) => r.incomplete.push(format!(
            "the watch round did not come back within its deadline of {} ms (the watch probe was stopped, hung or could not run): {e:#}",
            deadline.as_millis()
        )),
    }
    // Under tier `gvisor` the host sees runsc's processes, not the agent's: no host-side scan
    // (the record's notice says so); the watch probes above read the sandbox's own /proc.
    if inp.gvisor.is_some() {
        return r;
    }
    match host.sandbox_environ(container) {
        Ok(procs) => {
            let s = boundary::sightings(&procs, inp.watched, true);
            r.findings.extend(s.leaks);
            r.named.extend(s.named);
        }
        Err(e) => r
            .incomplete
            .push(format!("the sandbox environment could not be read: {e:#}")),
    }
    r
}

/// Why a watch round's report is incomplete: the probe killed by a signal (podman exec exits
/// 128+N), or its output cut short or garbled.
fn cut_short(exit: i32, probes: &[serde_json::Value]) -> String {
    if exit > 128 && exit < 160 {
        format!(
            "the watch probe was killed by signal {} (podman exec exited {exit}) after {} of its report lines",
            exit - 128,
            probes.len()
        )
    } else {
        format!(
            "the watch probes exited {exit} without a complete report ({} probe lines, no summary: cut short or garbled)",
            probes.len()
        )
    }
}

/// The variables a passing P22 line records as merely named like a watched one.
fn named_by_p22(probes: &[serde_json::Value]) -> Vec<String> {
    probes
        .iter()
        .filter(|p| p.get("id").and_then(serde_json::Value::as_str) == Some("P22"))
        .filter_map(|p| p.get("detail").and_then(serde_json::Value::as_str))
        .filter_map(|d| d.strip_prefix(crate::probe::verdict::credentials::NAMED_ONLY))
        .map(|d| format!("P22: {d}"))
        .collect()
}

/// How long a watch round that could not run waits for the agent unit to show that it ended
/// (its container exiting during the round) before the round counts as a finding.
pub(crate) const WATCH_EXIT_GRACE: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::seam::FakeRunHost;

    fn inp() -> Probe<'static> {
        Probe {
            run_id: "r1",
            run_dir: Path::new("/nonexistent"),
            deadline: Duration::from_secs(30),
            watched: &[],
            agent_env: &[],
            secrets: &[],
            tier: crate::tier::Tier::Container,
            worktree: Path::new("/nonexistent/w"),
            gvisor: None,
        }
    }

    #[test]
    fn only_the_init_and_one_other_process_may_be_in_the_held_container() {
        // (pid, comm, init): the init is told by its pid in the container, not by a name.
        let m = |v: &[(u32, &str, bool)]| -> Vec<crate::run::seam::Member> {
            v.iter()
                .map(|(pid, c, init)| crate::run::seam::Member {
                    pid: *pid,
                    comm: (*c).to_string(),
                    init: *init,
                })
                .collect()
        };
        assert_eq!(
            alone(&m(&[(10, "podman-init", true), (11, "cyclix", false)])),
            None
        );
        // A daemon the image left (P6's setuid child forked it): named, the init is not.
        let why = alone(&m(&[
            (10, "podman-init", true),
            (11, "cyclix", false),
            (12, "python3", false),
        ]))
        .expect("refused");
        assert!(
            why.contains("11 (cyclix), 12 (python3)") && !why.contains("podman-init"),
            "{why}"
        );
        // One that took the init's name is still one too many.
        assert!(
            alone(&m(&[
                (10, "catatonit", true),
                (11, "cyclix", false),
                (12, "catatonit", false)
            ]))
            .is_some()
        );
        // No init, agent-wait gone, nothing: never alone.
        assert!(alone(&m(&[(11, "cyclix", false), (12, "sh", false)])).is_some());
        assert!(
            alone(&m(&[(10, "catatonit", true)])).is_some_and(|w| w.contains("agent-wait is gone"))
        );
        assert!(alone(&[]).is_some_and(|w| w.contains("no process at all")));
    }

    #[test]
    fn a_round_that_does_not_come_back_is_named_with_a_deadline_of_one_interval() {
        let host = FakeRunHost {
            fail: vec!["probe".into()],
            ..Default::default()
        };
        let r = watch_round(&inp(), &host, "c", Duration::from_secs(5));
        assert!(r.findings.is_empty());
        assert_eq!(r.incomplete.len(), 1, "{r:?}");
        assert!(
            r.incomplete[0].contains("did not come back within its deadline of 5000 ms"),
            "the round's deadline is the interval, not the 30 s probe deadline: {r:?}"
        );
    }

    #[test]
    fn garbled_output_is_incomplete_and_p22_names_are_collected() {
        let host = FakeRunHost {
            watch_report: Some((0, "garbage\n".into())),
            ..Default::default()
        };
        let _ = host.probe("c", &[], false, Duration::from_secs(1));
        let r = watch_round(&inp(), &host, "c", Duration::from_secs(5));
        assert!(r.incomplete[0].contains("cut short or garbled"), "{r:?}");
        let named = format!(
            "{{\"id\":\"P22\",\"verdict\":\"PASS\",\"detail\":\"{}/proc/9/environ: CYCLIX_CANARY\"}}\n",
            crate::probe::verdict::credentials::NAMED_ONLY
        );
        assert_eq!(
            named_by_p22(&[serde_json::from_str(named.trim()).expect("json")]),
            ["P22: /proc/9/environ: CYCLIX_CANARY"]
        );
    }
}
