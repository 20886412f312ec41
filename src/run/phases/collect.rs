//! The collect phase: the run branch's commits, the proxy's health and decisions, the tails
//! of the agent's and the gate's logs (secret values redacted); and, for a run that did not
//! pass, a full project file system named as the cause.

use std::path::Path;

use anyhow::{Result, bail};

use super::super::ledger::Ledger;
use crate::render::{self};
use crate::run::record::CommitInfo;
use crate::run::seam::{RunHost, RunJournal};
use crate::systemd::{ActiveState, UnitManager};

/// What the collect phase found, for the record.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    /// The run branch's commits, oldest first.
    pub(crate) commits: Vec<CommitInfo>,
    /// The proxy's decisions ([`decisions`]).
    pub(crate) egress_decisions: Vec<serde_json::Value>,
    /// Notices about the proxy's journal.
    pub(crate) notices: Vec<String>,
}

/// Commits on the run branch (`base..tip`; none for an empty `tip`), the proxy's health and
/// its decisions (only the lines carrying `log_key`, [`decisions`]; the agent's from `go_ms`
/// on), into `out`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn collect(
    units: &dyn UnitManager,
    host: &dyn RunHost,
    repo: &Path,
    (base, tip): (&str, &str),
    names: &render::plan::UnitNames,
    log_key: &str,
    go_ms: Option<u128>,
    out: &mut Collected,
) -> Result<()> {
    // An empty tip: nothing was imported (tier `container`), so there are no commits to list.
    if !tip.is_empty() {
        out.commits = host.commits(repo, base, tip)?;
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
        let found = decisions(&host.unit_stdout_journal(proxy)?, log_key, go_ms);
        out.egress_decisions = found.kept;
        let (forged, unreadable) = (found.forged, found.unreadable);
        if unreadable > 0 {
            out.notices.push(format!(
                "the proxy's journal held {unreadable} line(s) with this run's access-log key that \
                 are not JSON even joined with the lines after them: requests squid decided that \
                 egress_decisions does not show; see `journalctl --user --identifier={}`",
                proxy.strip_suffix(".service").unwrap_or(proxy)
            ));
        }
        if forged > 0 {
            out.notices.push(format!(
                "the proxy's journal held {forged} JSON line(s) without this run's access-log key: \
                 not squid's decisions (request bytes its cache log quoted, e.g. a header with a NUL); \
                 ignored, never read as decisions"
            ));
        }
    }
    Ok(())
}

/// What [`decisions`] found among the proxy's journal lines.
#[derive(Debug, Default)]
pub struct Decisions {
    /// The decisions, oldest first: without `key`, with `by` ([`egress_source`]).
    pub kept: Vec<serde_json::Value>,
    /// JSON objects without the run's key: lines that look like decisions but did not come
    /// from the access log (forged).
    pub forged: usize,
    /// Lines that start with the run's key and are no JSON object, even with control bytes
    /// escaped and joined with the pieces after them: decisions that cannot be shown.
    pub unreadable: usize,
}

/// The least length of a journal entry that was cut from a longer line: conmon's journald
/// driver cuts at its 8 KiB buffer (`STDIO_BUF_SIZE`; measured: the first piece of a split
/// access-log line was 8,192 bytes), journald a stream's line at `LineMax=` (48 KiB by
/// default). A shorter line is whole: nothing is joined to it (on the plain backend the lines
/// after it may be the cache log's, which quote the agent's bytes).
const PIECE_MIN: usize = 8192;

/// The most journal entries one access-log line is taken to be split into: conmon's journald
/// driver cuts a line at its 8 KiB buffer (measured: a 8.1 KiB URL made two entries), and a
/// line is at most squid's 8 KiB URL (its quoting doubles `"` and `\`) plus a 16 KiB SNI.
const MAX_PIECES: usize = 8;

/// The proxy's decisions among its journal `lines` ([`Decisions`]): the JSON objects whose
/// `key` is the run's access-log key (`render::RunContext::log_key`; squid writes it first on
/// every access-log line, and only squid.conf, out of the agent's reach, holds it).
///
/// Two things an agent can do to its own request's line are undone, so that the request is not
/// left out of the record: squid's `%"` quoting escapes only `"`, `\`, CR, LF and TAB, so a
/// control byte in an SNI or a URL reaches the line raw (JSON forbids it in a string: it is
/// escaped here, [`json_controls_escaped`]); and a line longer than conmon's buffer is split
/// over journal entries (the pieces after one that starts with the key and does not parse are
/// joined to it while each piece before is [`PIECE_MIN`] long and none of them starts a line of
/// squid's, at most [`MAX_PIECES`]).
#[must_use]
pub fn decisions(lines: &[String], log_key: &str, go_ms: Option<u128>) -> Decisions {
    const LINE_START: &str = r#"{"key":""#;
    let ours = format!(r#"{LINE_START}{log_key}""#);
    let mut out = Decisions::default();
    let mut i = 0;
    while i < lines.len() {
        let first = lines[i].trim_start();
        i += 1;
        if !first.starts_with(&ours) {
            if object(first).is_some() {
                out.forged += 1;
            }
            continue;
        }
        let mut text = first.to_string();
        let mut parsed = object(&text);
        let mut next = i;
        while parsed.is_none()
            && next < lines.len()
            && lines[next - 1].len() >= PIECE_MIN
            && next - i < MAX_PIECES - 1
            && !lines[next].trim_start().starts_with(LINE_START)
        {
            text.push_str(&lines[next]);
            next += 1;
            parsed = object(&text);
        }
        let Some(mut d) = parsed else {
            // The lines after it are judged on their own.
            out.unreadable += 1;
            continue;
        };
        i = next;
        d.remove("key");
        let mut d = serde_json::Value::Object(d);
        let by = egress_source(&d, go_ms);
        d["by"] = by.into();
        // A tunnel the server never answered TLS for is recorded as what it was.
        render::proxy::settle(&mut d);
        out.kept.push(d);
    }
    out
}

/// `text` as a JSON object, its control characters (U+0000 to U+001F) read as `\u00XX`
/// escapes ([`json_controls_escaped`]).
fn object(text: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    match serde_json::from_str(json_controls_escaped(text.trim_end()).as_ref()) {
        Ok(serde_json::Value::Object(d)) => Some(d),
        _ => None,
    }
}

/// `text` with every control character U+0000 to U+001F written `\u00XX`. squid's access-log
/// lines have none outside their strings, so this changes only bytes the agent put in one (a
/// raw control character is not valid JSON there).
fn json_controls_escaped(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c < ' ') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c < ' ' {
            let _ = std::fmt::Write::write_fmt(&mut out, format_args!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
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
    host: &dyn RunJournal,
    names: &render::plan::UnitNames,
) -> Result<()> {
    let format = if o.tier.is_sandboxed() {
        crate::run::output::Format::K8sFile
    } else {
        crate::run::output::Format::Plain
    };
    let files = o
        .records_dir
        .map(|d| crate::layout::RunFiles::new(d, o.run_id));
    let base = names
        .gate_base
        .as_ref()
        .map(|u| ("gate-base", u, render::plan::GATE_BASE_OUTPUT_FILE));
    for (label, unit, raw) in [
        ("agent", &names.agent, render::plan::AGENT_OUTPUT_FILE),
        ("gate", &names.gate, render::plan::GATE_OUTPUT_FILE),
    ]
    .into_iter()
    .chain(base)
    {
        host.follow_output(crate::run::output::OutputFollow {
            unit: unit.clone(),
            label,
            source: o.run_dir.join(raw),
            format,
            // The base tree's run is the project's own code: its output is read for the
            // record when it leaves no results, not kept.
            kept: files
                .as_ref()
                .filter(|_| label != "gate-base")
                .map(|f| f.output_log(label)),
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
        let Decisions {
            kept,
            forged,
            unreadable,
        } = decisions(&lines, key, None);
        assert_eq!(unreadable, 0);
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept[0]["host"], "real.example");
        assert!(kept[0].get("key").is_none(), "the key is not recorded");
        assert_eq!(kept[0]["by"], "probe");
        assert_eq!(forged, 3, "every other JSON object is counted");
    }

    #[test]
    fn a_control_byte_or_a_split_does_not_hide_a_decision_line() {
        let key = "0123456789abcdef0123456789abcdef";
        let long = "a".repeat(9000);
        let line = format!(
            r#"{{"key":"{key}","host":"long.example","url":"http://long.example/{long}"}}"#
        );
        let (head, tail) = line.split_at(8192);
        let lines: Vec<String> = [
            format!("{{\"key\":\"{key}\",\"host\":\"allowed.example\",\"sni\":\"hidden.example\u{1}\u{1f}\"}}"),
            head.to_string(),
            tail.to_string(),
            format!(r#"{{"key":"{key}","host":"cut.example","url":"http://cut.example/"#),
            format!(r#"{{"key":"{key}","host":"short.example","url":"x"#),
            r#"","status":"200"}"#.to_string(),
            r#"{"key":"ffffffffffffffffffffffffffffffff","host":"forged.example"}"#.to_string(),
        ]
        .to_vec();
        let d = decisions(&lines, key, None);
        let hosts: Vec<&str> = d.kept.iter().filter_map(|d| d["host"].as_str()).collect();
        assert_eq!(hosts, ["allowed.example", "long.example"], "{d:?}");
        assert_eq!(d.kept[0]["sni"], "hidden.example\u{1}\u{1f}");
        assert_eq!(d.kept[1]["url"].as_str().map(str::len), Some(9020));
        assert_eq!(
            (d.forged, d.unreadable),
            (1, 2),
            "a piece never joins a line of squid's, nor a short line"
        );
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
