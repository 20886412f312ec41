//! The probe phase and the leak watch: the probes run inside the agent's held-back container,
//! its processes' environments are scanned from the host, strangers on its network and the
//! tripwires are looked at; then the agent goes (`ctl/go`) or is refused (`ctl/refused`).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result};

use super::super::boundary;
use super::super::lifecycle::now_ms;
use super::super::seam::RunHost;
use super::super::tripwire::{self, Tripwires};
use crate::render::{self};
use crate::run::record::RunRecord;

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
}

/// Starts the agent's unit (its container holds the agent back in `agent-wait`), runs the
/// probes inside that very container, scans its processes' environments from the host, and
/// then lets the agent go (`ctl/go`) or refuses (`ctl/refused`). Returns whether it went.
pub(crate) fn prove(
    inp: &Probe<'_>,
    host: &dyn RunHost,
    container: &str,
    tripwires: Option<&mut Tripwires>,
    rec: &mut RunRecord,
) -> Result<bool> {
    let ctl = inp.run_dir.join(render::plan::CTL_DIR);
    let go = boundary_proven(inp, host, container, tripwires, rec)?;
    let file = ctl.join(if go {
        render::plan::GO_FILE
    } else {
        render::plan::REFUSED_FILE
    });
    std::fs::write(&file, b"").with_context(|| format!("writing {}", file.display()))?;
    rec.go_ms = Some(now_ms());
    Ok(go)
}

/// The boundary check of [`prove`] without its verdict file: runs the probes inside the
/// agent's (held back) container, scans its processes' environments from the host, lists
/// strangers on the run's network and checks the tripwires. Sets `rec.probes` and
/// `rec.refusal`; returns whether everything passed.
pub(crate) fn boundary_proven(
    inp: &Probe<'_>,
    host: &dyn RunHost,
    container: &str,
    tripwires: Option<&mut Tripwires>,
    rec: &mut RunRecord,
) -> Result<bool> {
    // The agent unit was started in the start phase, next to the proxy.
    let (exit, stdout) = host.probe(container, &[], inp.deadline)?;
    let (probes, ok, mut why) = boundary::judge(exit, &stdout);
    rec.probes = probes;
    if !ok && why.is_empty() {
        why.push(format!(
            "the probe run exited {exit} without a complete report"
        ));
    }
    why.extend(boundary::leaks(
        &host.sandbox_environ(container)?,
        inp.watched,
    ));
    let network = crate::naming::RunNames::new(inp.run_id).base();
    why.extend(boundary::network_strangers(
        &network,
        &host.network_members(&network)?,
    ));
    if let Some(tw) = tripwires {
        why.extend(tripwire::check(tw)?);
    }
    let go = ok && why.is_empty();
    rec.refusal = why;
    Ok(go)
}

/// One leak-watch round: (findings, reasons the round could not complete). A round that
/// cannot run is itself a finding (fail closed) unless the agent turns out to have ended.
pub(crate) fn watch_round(
    inp: &Probe<'_>,
    host: &dyn RunHost,
    container: &str,
) -> (Vec<String>, Vec<String>) {
    let mut incomplete = Vec::new();
    let mut findings = match host.probe(container, boundary::WATCH_PROBES, inp.deadline) {
        Ok((exit, out)) => {
            let (_, ok, why) = boundary::judge(exit, &out);
            if !ok && why.is_empty() {
                incomplete.push(format!(
                    "the watch probes exited {exit} without a complete report"
                ));
            }
            why
        }
        Err(e) => {
            incomplete.push(format!("the watch probes could not run: {e:#}"));
            Vec::new()
        }
    };
    match host.sandbox_environ(container) {
        Ok(procs) => findings.extend(boundary::leaks(&procs, inp.watched)),
        Err(e) => incomplete.push(format!("the sandbox environment could not be read: {e:#}")),
    }
    (findings, incomplete)
}

/// How long a watch round that could not run waits for the agent unit to show that it ended
/// (its container exiting during the round) before the round counts as a finding.
pub(crate) const WATCH_EXIT_GRACE: Duration = Duration::from_secs(5);
