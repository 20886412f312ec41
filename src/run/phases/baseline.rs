//! The baseline (issue 15, item 4): the spec's `baseline.command`, run with `podman exec` in
//! the agent's own container once the boundary is proven and before the agent is let go, so
//! it sees exactly the agent's environment (image, user, variables, work tree, services,
//! proxy). When it fails (non-zero exit, or past `baseline.timeout`) the run ends
//! `setup_broken`: the agent never starts (`ctl/refused` is written instead of `ctl/go`), and
//! the record keeps the baseline's exit and output tail, so nobody chases the agent for what
//! the project's setup broke.

use std::time::{Duration, Instant};

use anyhow::Result;

pub use super::super::record::BaselineRecord;
use super::collect::log_tail;
use crate::run::seam::RunPodman;
use crate::spec::Baseline;

/// What the refused file says when the baseline failed (`cyclix agent-wait` prints it).
pub const REFUSED_REASON: &str = "the baseline failed, so the setup is broken";

/// Runs the baseline in `container`; what it did (`passed`: whether the agent may start). A
/// baseline past its deadline fails (fail closed); any other podman failure is an error.
///
/// # Errors
/// podman could not run the command for another reason than its deadline.
pub(crate) fn run(
    b: &Baseline,
    host: &dyn RunPodman,
    container: &str,
    secrets: &[&[u8]],
    env: &[(String, Vec<u8>)],
    gvisor: Option<&crate::tier::runsc::OciRuntime>,
) -> Result<BaselineRecord> {
    let pids = |host: &dyn RunPodman, container: &str| -> Result<Vec<(u32, String)>> {
        Ok(match gvisor {
            Some(runsc) => host
                .gvisor_members(container, runsc)?
                .into_iter()
                .map(|m| (m.pid, m.comm))
                .collect(),
            None => host
                .sandbox_environ(container)?
                .into_iter()
                .map(|p| (p.pid, p.comm))
                .collect(),
        })
    };
    let before: Vec<u32> = pids(host, container)?.into_iter().map(|(p, _)| p).collect();
    let t0 = Instant::now();
    let got = host.baseline(container, &b.command, env, Duration::from_secs(b.timeout_s));
    let duration_ms = t0.elapsed().as_millis();
    let (exit, text, mut error) = match got {
        Ok((code, text)) => (Some(code), text, None),
        Err(e) => match deadline_tail(&e) {
            // What it printed up to its deadline is kept: that is where the hang shows.
            Some(tail) => (
                None,
                tail.join("\n"),
                Some(format!(
                    "did not finish within {} s and was stopped",
                    b.timeout_s
                )),
            ),
            None => return Err(e),
        },
    };
    // What the baseline started and left running would run beside the agent, in an
    // environment the proof did not describe: the agent is refused, the processes named.
    let left: Vec<String> = pids(host, container)?
        .into_iter()
        .filter(|(pid, _)| !before.contains(pid))
        .map(|(pid, comm)| format!("{pid} ({comm})"))
        .collect();
    if !left.is_empty() && error.is_none() {
        error = Some(format!(
            "left {} process(es) running beside the agent: {}; a baseline must end what it \
             starts (e.g. `kill %1` or `wait` at its end)",
            left.len(),
            left.join(", ")
        ));
    }
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    Ok(BaselineRecord {
        command: b.command.clone(),
        exit,
        passed: exit == Some(0) && left.is_empty(),
        timeout_s: b.timeout_s,
        duration_ms,
        log: log_tail(&lines, secrets),
        error,
    })
}

/// The lines a command printed before its deadline killed it, when `e` is that deadline.
fn deadline_tail(e: &anyhow::Error) -> Option<Vec<String>> {
    e.chain()
        .find_map(|c| match c.downcast_ref::<crate::process::ProcessError>() {
            Some(crate::process::ProcessError::Deadline { tail, .. }) => Some(tail.clone()),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::seam::FakeRunHost;

    fn spec() -> Baseline {
        Baseline {
            command: vec!["make".into(), "check".into()],
            timeout_s: 60,
        }
    }

    #[test]
    fn a_failing_baseline_is_recorded_with_its_tail_and_blamed_on_the_setup() {
        let host = FakeRunHost {
            baseline: Some((2, "db down\nkey=s3cretvalue\n".into())),
            ..FakeRunHost::default()
        };
        let b = run(&spec(), &host, "c", &[b"s3cretvalue"], &[], None).expect("runs");
        assert!(!b.passed);
        assert_eq!(b.exit, Some(2));
        assert_eq!(b.log, ["db down", "key=***"]);
        let s = crate::run::record::baseline_summary_lines(Some(&b));
        assert!(
            s.contains("SETUP BROKEN: the baseline `make check` exited 2"),
            "{s}"
        );
        assert!(s.contains("not the agent, is at fault"), "{s}");
        assert!(s.contains("| db down"), "{s}");
        assert!(
            host.calls()
                .iter()
                .any(|c| c == "baseline c make check env:")
        );
    }

    #[test]
    fn a_passing_baseline_says_nothing_in_the_summary() {
        let host = FakeRunHost::default();
        let b = run(&spec(), &host, "c", &[], &[], None).expect("runs");
        assert!(b.passed);
        assert_eq!(crate::run::record::baseline_summary_lines(Some(&b)), "");
    }
}
