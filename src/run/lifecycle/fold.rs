//! What the run's record takes from each phase's report: one fold per phase, so a new
//! record field is one report field and one line here.

use std::path::Path;

use anyhow::Result;

use super::super::phases::agent::AgentReport;
use super::super::phases::collect::{Collected, agent_report, collect, redact, tail};
use super::super::phases::gate::GateReport;
use super::super::record::{RunRecord, RunResult};
use super::super::seam::RunHost;
use super::RunInputs;
use crate::systemd::UnitManager;

/// Folds what the probe, baseline and agent phases found into the record.
pub(super) fn agent(a: AgentReport, rec: &mut RunRecord) {
    rec.probes = a.probes;
    rec.refusal = a.refusal;
    rec.go_ms = a.go_ms;
    rec.baseline = a.baseline;
    rec.agent_exit = a.agent_exit;
    rec.watch_rounds = a.watch_rounds;
    rec.agent_named = a.agent_named;
    rec.causes.extend(a.causes);
    rec.notices.extend(a.notices);
}

/// Folds the gate phases' report into the record; the run's result.
pub(super) fn gate(g: GateReport, rec: &mut RunRecord) -> RunResult {
    rec.gate_exit = g.exit;
    rec.protected_changes = g.protected_changes;
    rec.gate_inventory = g.inventory;
    rec.causes.extend(g.causes);
    rec.notices.extend(g.notices);
    g.result.unwrap_or(RunResult::Error)
}

/// What the collect phase reads from (see [`collect_into`]).
pub(super) struct CollectFrom<'a> {
    pub(super) inp: &'a RunInputs,
    /// The spec as the run rendered it.
    pub(super) spec: &'a crate::spec::Spec,
    pub(super) units: &'a (dyn UnitManager + Sync),
    pub(super) host: &'a dyn RunHost,
    pub(super) names: &'a crate::render::plan::UnitNames,
    pub(super) base: &'a str,
    /// Where the run's commits are (empty: none were imported).
    pub(super) tip: &'a str,
}

/// The collect phase: the run's commits and the proxy's decisions ([`collect`]), the setup
/// paths the commits change, the agent's and the gate's output — every text of the agent's
/// with the run's secret values redacted — into the record.
///
/// # Errors
/// git, the journal or the unit manager failed.
pub(super) fn collect_into(c: &CollectFrom<'_>, rec: &mut RunRecord) -> Result<()> {
    let CollectFrom {
        inp,
        spec,
        units,
        host,
        names,
        base,
        tip,
    } = *c;
    let repo = Path::new(&spec.repo.path);
    let mut found = Collected::default();
    let got = collect(
        units,
        host,
        repo,
        (base, tip),
        names,
        &inp.log_key,
        rec.go_ms,
        &mut found,
    );
    rec.commits = found.commits;
    rec.egress_decisions = found.egress_decisions;
    rec.notices.extend(found.notices);
    got?;
    if !tip.is_empty() && !rec.commits.is_empty() {
        // git compares the trees in the user's repository: a plumbing commit counts.
        rec.setup_changes = super::super::phases::setup::changes(spec, host, base, tip)?;
    }
    let secrets: Vec<&[u8]> = inp.secrets.iter().map(|(_, v)| v.as_slice()).collect();
    // The agent's text in the record: a secret value it put in a subject or a request
    // line (squid logs the URL) is never recorded.
    for c in &mut rec.commits {
        c.subject = redact(&c.subject, &secrets);
    }
    for d in &mut rec.egress_decisions {
        let text = redact(&d.to_string(), &secrets);
        *d = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
    }
    rec.credentials =
        crate::run::record::credential_usage(&spec.agent.credentials, &rec.egress_decisions);
    // The agent's and the gate's output, as the followers kept it (redacted, printable).
    let agent_out = host.output(&names.agent)?;
    if let (Some(p), Some(_)) = (&spec.agent.preset, rec.agent_exit) {
        rec.agent_report = Some(agent_report(p.stream, &agent_out.lines, &secrets));
    }
    rec.agent_log = tail(&agent_out);
    rec.agent_output = Some(agent_out.summary);
    let gate_out = host.output(&names.gate)?;
    if rec.gate_exit.is_some() {
        rec.gate_log = tail(&gate_out);
        rec.gate_output = Some(gate_out.summary);
    }
    Ok(())
}
