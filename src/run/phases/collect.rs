//! The collect phase: the run branch's commits, the proxy's health and decisions, the tails
//! of the agent's and the gate's logs (secret values redacted); and, for a run that did not
//! pass, a full project file system named as the cause.

use std::path::Path;

use anyhow::{Result, bail};

use super::super::ledger::Ledger;
use super::super::seam::RunHost;
use crate::render::{self};
use crate::run::record::RunRecord;
use crate::systemd::{ActiveState, UnitManager};

/// Commits on the run branch, the proxy's health and its decisions (only the lines carrying
/// `log_key`, [`decisions`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn collect(
    units: &dyn UnitManager,
    host: &dyn RunHost,
    repo: &Path,
    base: &str,
    names: &render::plan::UnitNames,
    rec: &mut RunRecord,
    tip: &str,
    log_key: &str,
) -> Result<()> {
    // An empty tip: nothing was imported (tier `container`), so there are no commits to list.
    if !tip.is_empty() {
        rec.commits = host.commits(repo, base, tip)?;
    }
    if let Some(proxy) = names.infra.first() {
        // Fail closed is not enough: a proxy that died means the run did not have the
        // egress its spec states, so the run is not trustworthy as a result.
        let st = units.unit_status(proxy)?;
        if st.active_state != ActiveState::Active {
            bail!(
                "the egress proxy {proxy} is {} while the run was on: the agent had no egress; \
                 see `journalctl --user -u {proxy}`",
                st.summary()
            );
        }
        let (kept, forged) = decisions(&host.unit_stdout_journal(proxy)?, log_key, rec.go_ms);
        rec.egress_decisions = kept;
        if forged > 0 {
            rec.notices.push(format!(
                "the proxy's journal held {forged} JSON line(s) without this run's access-log key: \
                 not squid's decisions (request bytes its cache log quoted, e.g. a header with a NUL); \
                 ignored, never read as decisions"
            ));
        }
    }
    Ok(())
}

/// The proxy's decisions among its journal `lines`: the JSON objects whose `key` is the run's
/// access-log key (`render::RunContext::log_key`; squid writes it first on every access-log
/// line, and only squid.conf, out of the agent's reach, holds it), without that field and with
/// `by` ([`egress_source`]); and how many other JSON objects were there (lines that look like
/// decisions but did not come from the access log: forged).
#[must_use]
pub fn decisions(
    lines: &[String],
    log_key: &str,
    go_ms: Option<u128>,
) -> (Vec<serde_json::Value>, usize) {
    let mut forged = 0;
    let mut kept = Vec::new();
    for l in lines {
        let Ok(serde_json::Value::Object(mut d)) = serde_json::from_str(l.trim()) else {
            continue;
        };
        if d.remove("key").as_ref().and_then(serde_json::Value::as_str) != Some(log_key) {
            forged += 1;
            continue;
        }
        let mut d = serde_json::Value::Object(d);
        let by = egress_source(&d, go_ms);
        d["by"] = by.into();
        kept.push(d);
    }
    (kept, forged)
}

/// Who made a proxy request (issue 19 item 8): `probe` when squid saw it start before the go
/// signal (`go_ms`, taken before the go file is written: the agent is held in `agent-wait`
/// until then, and the leak watch's probes make no proxy request), else `agent`. The start is
/// squid's own: the log time `ts` (seconds, ms fraction) less the response time `ms`
/// (`%ts.%03tu`, `%tr`; squid's logformat). A run whose agent never went has only `probe`s; a
/// decision without a readable time is the agent's (never hidden among the probes').
#[must_use]
// Milliseconds since 1970 fit an f64's 53-bit mantissa exactly.
#[allow(clippy::cast_precision_loss)]
pub fn egress_source(d: &serde_json::Value, go_ms: Option<u128>) -> &'static str {
    let Some(go) = go_ms else {
        return "probe";
    };
    let ts = d.get("ts").and_then(serde_json::Value::as_f64);
    let took = d
        .get("ms")
        .and_then(|v| {
            v.as_str()
                .and_then(|s| s.parse::<f64>().ok())
                .or(v.as_f64())
        })
        .unwrap_or(0.0);
    match ts {
        Some(t) if t.is_finite() && t * 1000.0 - took < go as f64 => "probe",
        _ => "agent",
    }
}

/// How many lines of the agent's and the gate's output the record keeps.
pub const LOG_TAIL_LINES: usize = 40;

/// The agent's and the gate's output follows of a run (`run::output`).
pub(crate) struct Outputs<'a> {
    /// The run id and its tenant (named in the markers' `cyclix logs T --run R`).
    pub(crate) run_id: &'a str,
    /// The tenant.
    pub(crate) tenant: &'a str,
    /// The run directory (the raw files).
    pub(crate) run_dir: &'a Path,
    /// The records directory (the kept logs `RUN.agent.log`, `RUN.gate.log`); `None`: none.
    pub(crate) records_dir: Option<&'a Path>,
    /// Tier `container` writes podman's `k8s-file` records; the host tiers plain output.
    pub(crate) tier: crate::tier::Tier,
    /// The run's secret values.
    pub(crate) secrets: &'a [(String, Vec<u8>)],
}

/// Starts reading the agent's and the gate's raw output files (before their units start).
pub(crate) fn follow_outputs(
    o: &Outputs<'_>,
    host: &dyn RunHost,
    names: &render::plan::UnitNames,
) -> Result<()> {
    let format = if o.tier == crate::tier::Tier::Container {
        crate::run::output::Format::K8sFile
    } else {
        crate::run::output::Format::Plain
    };
    let files = o
        .records_dir
        .map(|d| crate::layout::RunFiles::new(d, o.run_id));
    for (label, unit, raw) in [
        ("agent", &names.agent, render::plan::AGENT_OUTPUT_FILE),
        ("gate", &names.gate, render::plan::GATE_OUTPUT_FILE),
    ] {
        host.follow_output(crate::run::output::OutputFollow {
            unit: unit.clone(),
            label,
            source: o.run_dir.join(raw),
            format,
            kept: files.as_ref().map(|f| f.output_log(label)),
            secrets: o.secrets.iter().map(|(_, v)| v.clone()).collect(),
            hint: format!("cyclix logs {} --run {}", o.tenant, o.run_id),
            journal: true,
        })?;
    }
    Ok(())
}

/// The last [`LOG_TAIL_LINES`] of `c`'s lines (already redacted and printable).
pub(crate) fn tail(c: &crate::run::output::Captured) -> Vec<String> {
    c.lines[c.lines.len().saturating_sub(LOG_TAIL_LINES)..].to_vec()
}

/// The last [`LOG_TAIL_LINES`] lines a container printed, from its unit's journal: podman's own
/// event lines, container ids and conmon's warnings left out, every secret value replaced by
/// `***`.
pub(crate) fn log_tail(journal: &[String], secrets: &[&[u8]]) -> Vec<String> {
    let mut lines: Vec<String> = journal
        .iter()
        .filter(|l| !l.contains(" UTC m=+") && !l.starts_with("conmon ") && !l.is_empty())
        // `podman run -d` prints the new container's id (plain units, Quadlet's too).
        .filter(|l| !(l.len() == 64 && l.bytes().all(|b| b.is_ascii_hexdigit())))
        .map(|l| {
            // The agent's bytes: no terminal escape or bidi control reaches a terminal.
            crate::text::printable(&redact(l, secrets))
        })
        .collect();
    let skip = lines.len().saturating_sub(LOG_TAIL_LINES);
    lines.drain(..skip);
    lines
}

/// The agent CLI's report (`kind`'s parser over the agent unit's `journal`) with every secret
/// value redacted twice: in each raw line, and in the parsed text, which is decoded JSON (a
/// `\u0041` in a line is an `A` in the record) and may join several lines (Gemini's deltas),
/// so a value the raw lines hide shows only there.
pub(crate) fn agent_report(
    kind: crate::agents::StreamKind,
    journal: &[String],
    secrets: &[&[u8]],
) -> crate::agents::AgentReport {
    let lines: Vec<String> = journal.iter().map(|l| redact(l, secrets)).collect();
    let mut report = crate::agents::stream::report(kind, &lines);
    if let Some(m) = report.final_message.as_mut() {
        *m = redact(m, secrets);
    }
    report
}

pub(crate) use crate::text::redact;

/// `project filesystem full (…)` for the run's worktree and the repository's git dir when one
/// of them is (nearly) full; nothing when they have room or cannot be looked at.
pub(crate) fn project_space_causes(
    repo: &Path,
    worktree: &Path,
    host: &dyn RunHost,
    ledger: &Ledger,
) -> Vec<String> {
    let git = host.common_dir(repo).unwrap_or_else(|_| repo.join(".git"));
    let mut looked = Vec::new();
    if ledger.worktree().is_some() && worktree.exists() {
        looked.push(("the run's worktree", worktree.to_path_buf()));
    } else if let Some(parent) = worktree.parent() {
        looked.push(("the worktrees directory", parent.to_path_buf()));
    }
    looked.push(("the repository's git dir", git));
    let spaces: Vec<(&str, &Path, crate::run::space::FsSpace)> = looked
        .iter()
        .filter_map(|(what, p)| Some((*what, p.as_path(), host.fs_space(p).ok()?)))
        .collect();
    crate::run::space::full_causes(&spaces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::StreamKind;

    #[test]
    fn a_request_that_started_before_the_go_signal_is_the_probes() {
        let d = |ts: f64, ms: &str| serde_json::json!({"ts": ts, "ms": ms, "status": "403"});
        let go = Some(1_764_600_000_500);
        assert_eq!(egress_source(&d(1_764_600_000.400, "5"), go), "probe");
        // Logged after the go, but it started before (a tunnel the probe closed late).
        assert_eq!(egress_source(&d(1_764_600_002.000, "1600"), go), "probe");
        assert_eq!(egress_source(&d(1_764_600_000.600, "50"), go), "agent");
        assert_eq!(
            egress_source(&serde_json::json!({"status": "200"}), go),
            "agent"
        );
        assert_eq!(egress_source(&d(1_764_600_009.0, "1"), None), "probe");
    }

    #[test]
    fn only_lines_with_the_runs_access_log_key_are_decisions() {
        let key = "0123456789abcdef0123456789abcdef";
        let lines: Vec<String> = [
            r#"{"key":"0123456789abcdef0123456789abcdef","host":"real.example","status":"403"}"#,
            r#"{"host":"no-key.example","status":"200"}"#,
            r#"{"key":"ffffffffffffffffffffffffffffffff","host":"guessed.example"}"#,
            r#"{"key":1,"host":"number.example"}"#,
            "WARNING: HTTP header contains NULL characters",
            r#"["key"]"#,
        ]
        .map(str::to_string)
        .to_vec();
        let (kept, forged) = decisions(&lines, key, None);
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept[0]["host"], "real.example");
        assert!(kept[0].get("key").is_none(), "the key is not recorded");
        assert_eq!(kept[0]["by"], "probe");
        assert_eq!(forged, 3, "every other JSON object is counted");
    }

    #[test]
    fn a_secret_hidden_in_json_escapes_or_split_over_deltas_is_redacted_from_the_report() {
        let secrets: Vec<&[u8]> = vec![b"hunter2-secret"];
        let escaped = vec![
            r#"{"type":"result","result":"LEAK:\u0068unter2-secret:END","num_turns":1}"#
                .to_string(),
        ];
        let r = agent_report(StreamKind::ClaudeStreamJson, &escaped, &secrets);
        assert_eq!(r.final_message.as_deref(), Some("LEAK:***:END"));
        let split = vec![
            r#"{"type":"message","role":"assistant","content":"a hunter2","delta":true}"#
                .to_string(),
            r#"{"type":"message","role":"assistant","content":"-secret b","delta":true}"#
                .to_string(),
        ];
        let r = agent_report(StreamKind::GeminiStreamJson, &split, &secrets);
        assert_eq!(r.final_message.as_deref(), Some("a *** b"));
    }
}
