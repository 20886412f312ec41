//! The run's human summary: what `cyclix run` prints at the end and `status` shows, from the
//! record alone.

use super::{ImportRecord, RunRecord, RunResult, ServiceRecord};

/// The summary's lines about the run branch and its commits.
fn branch_lines(r: &RunRecord) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let no_commits = r.import.as_ref().is_some_and(|i| i.outcome != "imported");
    if r.tier == "direct" {
        // The agent worked in the user's own checkout: its commits are on the branch checked
        // out there, whatever the gate said (issue 32 item 3: the summary named a run branch).
        let _ = writeln!(
            s,
            "  committed in your checkout: +{} commit{} on its checked-out branch, on {} \
             (tier direct: no isolation, no run branch; the gate's verdict does not hold them back)",
            r.commits.len(),
            if r.commits.len() == 1 { "" } else { "s" },
            short(&r.base_commit)
        );
    } else if r.branch.is_empty() && no_commits {
        let _ = writeln!(s, "  branch: none (nothing imported from the run)");
    } else if r.branch.is_empty() {
        let _ = writeln!(s, "  branch: none (the run ended before it made one)");
    } else {
        let _ = writeln!(
            s,
            "  branch {} (+{} commit{} on {})",
            r.branch,
            r.commits.len(),
            if r.commits.len() == 1 { "" } else { "s" },
            short(&r.base_commit)
        );
    }
    for c in &r.commits {
        let _ = writeln!(s, "    {} {}", short(&c.sha), c.subject);
    }
    s
}

/// The summary's lines about the import: a refused one, and the uncommitted files.
fn import_lines(import: Option<&ImportRecord>) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let Some(i) = import else {
        return s;
    };
    if !matches!(i.outcome.as_str(), "imported" | "no-commits") {
        let _ = writeln!(s, "  IMPORT {}: {}", i.outcome, i.reason);
    }
    if i.uncommitted_files > 0 {
        let _ = writeln!(
            s,
            "  uncommitted: {} file(s) left changed by the agent{}",
            i.uncommitted_files,
            i.uncommitted_diff
                .as_ref()
                .map_or_else(String::new, |p| format!(", diff kept at {}", p.display()))
        );
    }
    s
}

/// Whether the run claimed a warm environment (and how long it idled) or went cold and why;
/// nothing for a tenant without a pool (newcomer trial 8: a pooled tenant's summary did not
/// say whether the pool served the run).
fn environment_line(e: Option<&super::EnvironmentRecord>) -> String {
    match e {
        Some(e) if e.pooled => format!(
            "  environment: warm {} from the pool (idle {} s)\n",
            e.id,
            e.idle_ms / 1000
        ),
        Some(e) if !e.why_cold.is_empty() && e.why_cold != super::NO_POOL => {
            format!("  environment: cold: {}\n", e.why_cold)
        }
        _ => String::new(),
    }
}

/// The line naming the OCI runtime the agent and the gate ran on (tier `gvisor`'s runsc);
/// empty for podman's default.
fn runtime_line(r: &RunRecord) -> String {
    r.oci_runtime
        .as_ref()
        .map(|rt| format!("  agent and gate on {}\n", rt.describe()))
        .unwrap_or_default()
}

/// A human summary (what `cyclix run` prints at the end and `status` shows).
#[must_use]
pub fn summary(r: &RunRecord) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "run {} (tenant {}, tier {}): {}",
        r.run_id,
        r.tenant,
        r.tier,
        r.result.as_str()
    );
    s.push_str(&environment_line(r.environment.as_ref()));
    s.push_str(&runtime_line(r));
    if let Some(p) = &r.failed_phase {
        let err = r.error.as_deref().unwrap_or("-");
        // A person's stop is no failure (newcomer trial 7, item 11).
        let how = if r.result == super::RunResult::Interrupted {
            "stopped"
        } else {
            "failed"
        };
        let _ = writeln!(
            s,
            "  {how} in phase {p}: {}",
            err.strip_prefix(&format!("phase {p}: ")).unwrap_or(err)
        );
    }
    let ex = |c: Option<i32>| c.map_or_else(|| "-".to_string(), |c| c.to_string());
    let passed = r
        .probes
        .iter()
        .filter(|p| p.get("verdict").and_then(|v| v.as_str()) == Some("PASS"))
        .count();
    if r.probes.is_empty() && !ran(r, "probe") {
        // Ended before the probes: `0/0 PASS` would read as a suite that found nothing.
        let _ = writeln!(s, "  probes: not run (the run ended before them)");
    } else {
        let _ = writeln!(
            s,
            "  probes: {passed}/{} PASS; leak watch ran {} time(s)",
            r.probes.len(),
            r.watch_rounds
        );
    }
    for why in &r.refusal {
        let _ = writeln!(s, "  REFUSED: {why}");
    }
    s.push_str(&super::baseline_summary_lines(r.baseline.as_ref()));
    s.push_str(&service_lines(&r.services));
    for c in &r.causes {
        let _ = writeln!(s, "  CAUSE: {c}");
    }
    let _ = writeln!(
        s,
        "  agent exit {}, gate exit {}",
        ex(r.agent_exit),
        ex(r.gate_exit)
    );
    s.push_str(&super::gate::summary_lines(
        r.gate_inventory.as_ref(),
        &r.protected_changes,
    ));
    s.push_str(&last_lines(r));
    s.push_str(&import_lines(r.import.as_ref()));
    s.push_str(&branch_lines(r));
    if !r.setup_changes.is_empty() {
        let _ = writeln!(
            s,
            "  SETUP CHANGED by the run's commits: {}",
            r.setup_changes.join(", ")
        );
    }
    s.push_str(&egress_line(r));
    s.push_str(&delivery_line(r));
    for n in &r.notices {
        let _ = writeln!(s, "  NOTICE: {n}");
    }
    for c in &r.repo_changes {
        let _ = writeln!(
            s,
            "  CHANGED ON THE HOST during the run (not by the sandbox): {c}"
        );
    }
    if r.leftovers.is_empty() {
        let _ = writeln!(s, "  leftovers: none");
    } else {
        for l in &r.leftovers {
            let _ = writeln!(s, "  LEFTOVER: {l}");
        }
    }
    let total = r
        .phases
        .first()
        .zip(r.phases.last())
        .map_or(0, |(a, b)| b.end_ms.saturating_sub(a.start_ms));
    let times: Vec<String> = r
        .phases
        .iter()
        .map(|p| format!("{} {}ms", p.name, p.end_ms.saturating_sub(p.start_ms)))
        .collect();
    let _ = writeln!(s, "  phases ({total} ms): {}", times.join(", "));
    s
}

/// Whether an allowed request never reached its server: squid's own 502/503/504 for a name
/// that did not resolve (`ERR_DNS_FAIL`) or a connection that failed (`ERR_CONNECT_FAIL`).
/// Not a read timeout, an empty or invalid answer (`ERR_READ_TIMEOUT`, `ERR_ZERO_SIZE_OBJECT`,
/// `ERR_INVALID_RESP`…): the request was sent then (attack review), and a server's own 5xx is
/// an answer like any other.
pub(crate) fn failed_upstream(status: &str, err: &str) -> bool {
    matches!(status, "502" | "503" | "504")
        && (err.contains("ERR_DNS_FAIL") || err.contains("ERR_CONNECT_FAIL"))
}

/// One side's egress as the proxy decided it (`by`: `agent` or `probe`, each decision's `by`,
/// `collect::egress_source`): the summary's egress line and the metrics (`crate::metrics`)
/// count with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EgressCounts {
    /// Requests (decisions) of that side.
    pub requests: usize,
    /// Refused before a byte left.
    pub refused: usize,
    /// Tunnels cut by their content (not TLS, or TLS naming another host).
    pub cut: usize,
    /// Sent, but the answer was withheld.
    pub withheld: usize,
    /// Allowed, but the proxy could not reach the server (no DNS answer, no connection).
    pub failed_upstream: usize,
}

impl EgressCounts {
    /// What was denied: refusals and cut tunnels (nothing of theirs reached the server).
    #[must_use]
    pub fn denied(&self) -> usize {
        self.refused + self.cut
    }
}

/// The egress counts of `r`'s side `by` (`agent`: decisions without a `by` are the agent's).
#[must_use]
pub fn egress_counts(r: &RunRecord, by: &str) -> EgressCounts {
    use crate::render::proxy::Outcome;
    let text = |d: &serde_json::Value, k: &str| {
        d.get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut n = EgressCounts::default();
    for d in r
        .egress_decisions
        .iter()
        .filter(|d| d.get("by").and_then(|v| v.as_str()).unwrap_or("agent") == by)
    {
        n.requests += 1;
        match Outcome::of(&text(d, "reason"), &text(d, "status"), &text(d, "err")) {
            Outcome::Forwarded if failed_upstream(&text(d, "status"), &text(d, "err")) => {
                n.failed_upstream += 1;
            }
            Outcome::Forwarded => {}
            Outcome::Refused => n.refused += 1,
            Outcome::TunnelCut => n.cut += 1,
            Outcome::SentAnswerWithheld => n.withheld += 1,
        }
    }
    n
}

/// The summary's egress line: the agent's requests, those refused before a byte left, tunnels
/// cut by their content, and requests sent whose answer was withheld; then the probe suite's
/// (each decision's `by`, `collect::egress_source`).
fn egress_line(r: &RunRecord) -> String {
    use std::fmt::Write as _;

    if r.tier == "kubernetes" && r.egress_decisions.is_empty() {
        // kube-run reads no proxy decisions: they stay in the proxy Pod's log.
        return "  egress: not read (kube-run does not collect the proxy's decisions: they are in the proxy Pod's log until teardown)\n".to_string();
    }
    if r.egress_decisions.is_empty() && !ran(r, "collect") {
        // The proxy's decisions are read in collect: none read is not none made.
        return "  egress: not read (the run ended before collect)\n".to_string();
    }
    let count = |by: &str| {
        let c = egress_counts(r, by);
        [c.requests, c.refused, c.cut, c.withheld, c.failed_upstream]
    };
    let [n, refused, cut, withheld, failed] = count("agent");
    let [pn, prefused, pcut, _, _] = count("probe");
    // Cut tunnels are refusals of what they carried (nothing reached the server).
    let mut s = format!(
        "  egress: the agent made {n} requests, {} denied",
        refused + cut
    );
    if cut > 0 {
        let _ = write!(
            s,
            " ({cut} tunnels cut: not TLS, or TLS naming another host)"
        );
    }
    if failed > 0 {
        // Allowed, but the proxy could not reach the server (issue 32 item 3: "3 requests,
        // 0 denied" when all three had failed).
        let _ = write!(
            s,
            ", {failed} failed upstream (allowed, but the proxy could not reach the server: no DNS answer or no connection)"
        );
    }
    if withheld > 0 {
        let _ = write!(
            s,
            ", {withheld} sent with the answer withheld (the server did not speak HTTP, or a tunnel's server did not answer TLS)"
        );
    }
    let _ = writeln!(s, "; the probes {pn}, {} denied", prefused + pcut);
    for c in &r.credentials {
        let _ = writeln!(s, "  {}", c.summary());
    }
    s
}

/// Whether the run reached phase `name` (whatever its outcome).
fn ran(r: &RunRecord, name: &str) -> bool {
    r.phases.iter().any(|p| p.name == name)
}

/// `  delivery: …` when the run has a delivery, else nothing.
fn delivery_line(r: &RunRecord) -> String {
    r.delivery
        .as_ref()
        .map_or_else(String::new, |d| format!("  delivery: {}\n", d.summary()))
}

/// One summary line per service: address, database, volume.
fn service_lines(services: &[ServiceRecord]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for svc in services {
        let _ = writeln!(
            s,
            "  service {} at {} (database {}{})",
            svc.name,
            svc.address,
            svc.database,
            svc.volume
                .as_ref()
                .map_or_else(String::new, |v| format!(", volume {v}"))
        );
    }
    s
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// The last lines of a failed agent's or gate's output, sanitised again (a record written
/// elsewhere is made safe here too), with how to see the earlier ones.
fn last_lines(r: &RunRecord) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let shown = match r.result {
        RunResult::AgentFailed | RunResult::AgentTimeout => {
            Some(("agent", &r.agent_log, &r.agent_output))
        }
        RunResult::GateFailed | RunResult::GateWeakened => {
            Some(("gate", &r.gate_log, &r.gate_output))
        }
        _ => None,
    };
    if let Some((who, log, out)) = shown {
        // A preset's CLI writes its events as JSON lines, parsed into `agent_report`: its
        // final message says why it failed (an API error, say), and the event lines are left
        // out of the last lines (`cyclix logs` has them all).
        let report = r.agent_report.as_ref().filter(|_| who == "agent");
        let parsed: Vec<String>;
        let log = if let Some(rep) = report {
            let flag = if rep.is_error == Some(true) {
                ", an error"
            } else {
                ""
            };
            match rep
                .final_message
                .as_deref()
                .map(str::trim)
                .filter(|m| !m.is_empty())
            {
                Some(m) => {
                    let _ = writeln!(s, "  the agent's final message ({}{flag}):", rep.stream);
                    for l in m.lines().take(5) {
                        let _ = writeln!(s, "    > {}", crate::text::printable(l));
                    }
                }
                None => {
                    let _ = writeln!(
                        s,
                        "  the agent's stream ({}) held no final message",
                        rep.stream
                    );
                }
            }
            parsed = log
                .iter()
                .filter(|l| !l.trim_start().starts_with('{'))
                .cloned()
                .collect();
            &parsed
        } else {
            log
        };
        let shown = log.len().min(10);
        let total = out.as_ref().map_or(log.len() as u64, |o| o.lines);
        let more = total.saturating_sub(shown as u64);
        let earlier = if more > 0 {
            format!(
                " ({more} earlier lines: `cyclix logs {} --run {}`)",
                r.tenant, r.run_id
            )
        } else {
            String::new()
        };
        if shown == 0 && report.is_none() {
            // Not an empty heading (a newcomer's report): say that nothing was printed, or
            // that its last lines were blank (the record keeps no blank line).
            if more > 0 {
                let _ = writeln!(s, "  the {who}'s last lines were blank{earlier}");
            } else {
                let _ = writeln!(s, "  the {who} printed nothing");
            }
        } else if shown > 0 {
            let what = if report.is_some() {
                "other lines"
            } else {
                "lines"
            };
            let _ = writeln!(s, "  last {what} of the {who}{earlier}:");
        }
        for l in &log[log.len() - shown..] {
            let _ = writeln!(s, "    | {}", crate::text::printable(l));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::record::Phase;

    fn phase(name: &str) -> Phase {
        Phase {
            name: name.into(),
            start_ms: 0,
            end_ms: 1,
            outcome: "ok".into(),
        }
    }

    #[test]
    fn allowed_requests_the_proxy_could_not_forward_are_counted_apart() {
        let mut r = RunRecord::new("t", "r1", "container".into());
        r.phases = vec![phase("probe"), phase("collect")];
        let d = |status: &str, err: &str| serde_json::json!({"by": "agent", "reason": "allowlisted", "status": status, "err": err});
        r.egress_decisions = vec![
            d("503", "ERR_DNS_FAIL"),
            d("502", "ERR_CONNECT_FAIL"),
            // The server's own 503 is an answer, not a failure to reach it.
            d("503", "-"),
            // Sent, then no usable answer: the server may have it.
            d("504", "ERR_READ_TIMEOUT"),
            d("200", "-"),
        ];
        let s = summary(&r);
        assert!(
            s.contains("the agent made 5 requests, 0 denied, 2 failed upstream (allowed, but the proxy could not reach the server"),
            "{s}"
        );
    }

    #[test]
    fn a_run_that_ended_early_says_what_was_not_read_instead_of_zeros() {
        let mut r = RunRecord::new("t", "r1", "container".into());
        r.phases = vec![phase("queue"), phase("teardown"), phase("audit")];
        let s = summary(&r);
        assert!(
            s.contains("probes: not run (the run ended before them)"),
            "{s}"
        );
        assert!(
            s.contains("egress: not read (the run ended before collect)"),
            "{s}"
        );
        assert!(
            !s.contains("0/0 PASS") && !s.contains("the probes 0"),
            "{s}"
        );
        // kube-run collects no proxy decisions, whatever phases ran: it says so.
        let mut k = RunRecord::new("t", "r1", "kubernetes".into());
        k.phases = vec![phase("wait-collect"), phase("import")];
        assert!(
            summary(&k).contains("egress: not read (kube-run does not collect"),
            "{}",
            summary(&k)
        );
        // A run that reached them keeps the counts, zeros included.
        r.phases = vec![phase("probe"), phase("collect")];
        let s = summary(&r);
        assert!(s.contains("probes: 0/0 PASS"), "{s}");
        assert!(
            s.contains("egress: the agent made 0 requests, 0 denied; the probes 0, 0 denied"),
            "{s}"
        );
    }

    /// Issue 31: a request whose bytes left is never counted as denied; cut tunnels are.
    #[test]
    fn the_egress_line_counts_what_left() {
        let mut r = RunRecord::new("t", "r1", "container".into());
        r.phases = vec![phase("probe"), phase("collect")];
        let d = |reason: &str, status: &str| serde_json::json!({"by": "agent", "reason": reason, "status": status});
        r.egress_decisions = vec![
            d("allowlisted", "200"),
            d("domain_not_allowlisted", "403"),
            d("server_not_tls", "200"),
            d("not_http", "403"),
            serde_json::json!({"by": "probe", "reason": "sni_mismatch", "status": "200"}),
        ];
        let s = summary(&r);
        assert!(
            s.contains(
                "egress: the agent made 4 requests, 1 denied, 2 sent with the answer withheld \
                 (the server did not speak HTTP, or a tunnel's server did not answer TLS); the \
                 probes 1, 1 denied"
            ),
            "{s}"
        );
        r.egress_decisions
            .push(serde_json::json!({"by": "agent", "reason": "not_tls", "status": "200"}));
        assert!(
            summary(&r).contains(
                "5 requests, 2 denied (1 tunnels cut: not TLS, or TLS naming another host), 2 sent"
            ),
            "{}",
            summary(&r)
        );
    }

    #[test]
    fn a_stopped_run_reads_stopped_not_failed() {
        let mut r = RunRecord::new("t", "r1", "container".into());
        r.result = RunResult::Interrupted;
        r.failed_phase = Some("agent".into());
        r.error = Some("phase agent: interrupted (SIGTERM or SIGINT) while u ran".into());
        let s = summary(&r);
        assert!(s.contains("  stopped in phase agent: interrupted"), "{s}");
        assert!(!s.contains("failed in phase"), "{s}");
        r.result = RunResult::Error;
        assert!(summary(&r).contains("  failed in phase agent:"));
    }

    #[test]
    fn an_agent_that_printed_nothing_is_said_so_not_an_empty_heading() {
        let mut r = RunRecord::new("t", "r1", "container".into());
        r.result = RunResult::AgentFailed;
        let s = summary(&r);
        assert!(s.contains("  the agent printed nothing\n"), "{s}");
        assert!(!s.contains("last lines of the agent:"), "{s}");
        r.agent_log = vec!["boom".into()];
        assert!(summary(&r).contains("  last lines of the agent:\n    | boom"));
    }

    #[test]
    fn a_failed_preset_run_shows_the_cli_final_message_not_its_json_events() {
        let mut r = RunRecord::new("t", "r1", "container".into());
        r.result = RunResult::AgentFailed;
        r.agent_log = vec![
            r#"{"type":"system","subtype":"init"}"#.into(),
            r#"{"type":"result","is_error":true,"result":"API Error: 502 Bad Gateway"}"#.into(),
            "warning: retrying".into(),
        ];
        r.agent_report = Some(crate::agents::AgentReport {
            stream: "claude-stream-json".into(),
            final_message: Some("API Error: 502 Bad Gateway".into()),
            is_error: Some(true),
            ..crate::agents::AgentReport::default()
        });
        let s = summary(&r);
        assert!(
            s.contains("the agent's final message (claude-stream-json, an error):"),
            "{s}"
        );
        assert!(s.contains("> API Error: 502 Bad Gateway"), "{s}");
        assert!(
            s.contains("| warning: retrying") && !s.contains(r#"| {"type""#),
            "{s}"
        );
        // Without a report the raw lines are the evidence, JSON or not.
        r.agent_report = None;
        let s = summary(&r);
        assert!(s.contains(r#"| {"type":"result""#), "{s}");
    }

    #[test]
    fn the_summary_says_warm_with_its_idle_time_or_cold_and_why_and_nothing_without_a_pool() {
        let mut r = RunRecord::new("t", "r1", "container".into());
        r.environment = Some(crate::run::pool::cold("r1", crate::run::pool::NO_POOL));
        assert!(!summary(&r).contains("environment:"), "{}", summary(&r));
        r.environment = Some(crate::run::pool::cold("r1", crate::run::pool::NONE_READY));
        assert!(
            summary(&r).contains("  environment: cold: none ready: the pool is empty"),
            "{}",
            summary(&r)
        );
        r.environment = Some(crate::run::pool::EnvironmentRecord {
            id: "e7".into(),
            pooled: true,
            why_cold: String::new(),
            filled_ms: 1_000,
            idle_ms: 125_400,
        });
        assert!(
            summary(&r).contains("  environment: warm e7 from the pool (idle 125 s)\n"),
            "{}",
            summary(&r)
        );
    }
}
