//! The agent CLIs' output streams, read into the run record (issue 14 item 1): the final
//! message, the turns, the tool calls and the token usage, as the CLI reports them.
//!
//! The stream comes out of the sandbox, so it is untrusted data: each line is parsed as JSON
//! on its own (anything else is counted and skipped), numbers must be non-negative integers,
//! text is cut at [`TEXT_MAX`] bytes, and nothing in it is ever read as configuration. The
//! record says the figures are the CLI's own report, not a measurement.
//!
//! Shapes (measured against the testbed's stand-in, docs/agents.md):
//! - Claude Code `--output-format stream-json --verbose`: one object per line; `assistant`
//!   messages hold `tool_use` blocks; the last line is `{"type": "result", "result": TEXT,
//!   "num_turns": N, "usage": {"input_tokens", "output_tokens", "cache_read_input_tokens",
//!   "cache_creation_input_tokens"}, "total_cost_usd": X, "is_error": B}`.
//! - Codex `exec --json`: `item.completed` events whose `item.type` is `agent_message` (text)
//!   or a tool item (`command_execution`, `file_change`, `mcp_tool_call`, `web_search`);
//!   `turn.completed` carries `usage` {`input_tokens`, `cached_input_tokens`, `output_tokens`}.
//! - Gemini CLI `--output-format stream-json`: `message` events (assistant text, `delta`),
//!   `tool_use` events and a last `result` with `stats` {`input_tokens`, `output_tokens`,
//!   `tool_calls`}.

use serde::Serialize;
use serde_json::Value;

/// Longest text kept from the stream (final message, error), in bytes.
pub const TEXT_MAX: usize = 16 * 1024;

/// Which parser reads a CLI's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamKind {
    /// Claude Code's `stream-json`.
    ClaudeStreamJson,
    /// Codex's `exec --json` events.
    CodexJson,
    /// Gemini CLI's `stream-json`.
    GeminiStreamJson,
    /// Plain text (aider): only the lines are counted.
    PlainText,
}

/// Token usage as the CLI reports it (summed over the run where the CLI reports per turn).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Usage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens served from the API's cache (Anthropic `cache_read_input_tokens`, `OpenAI`
    /// `cached_input_tokens`).
    pub cache_read_input_tokens: u64,
    /// Input tokens written to the API's cache (Anthropic only).
    pub cache_creation_input_tokens: u64,
}

/// What the agent CLI reported about its run (record field `agent_report`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct AgentReport {
    /// The parser used (`claude-stream-json`, `codex-json`, ...).
    pub stream: String,
    /// The CLI's final message, cut at [`TEXT_MAX`] bytes.
    pub final_message: Option<String>,
    /// Whether `final_message` was cut.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub final_message_truncated: bool,
    /// Model turns as the CLI counts them (Claude `num_turns`, Codex `turn.completed` events).
    pub turns: Option<u64>,
    /// Tool calls seen in the stream.
    pub tool_calls: u64,
    /// Token usage as reported; `None` when the stream held none.
    pub usage: Option<Usage>,
    /// The cost the CLI computed, in USD (Claude `total_cost_usd`), if any.
    pub cost_usd: Option<f64>,
    /// Whether the CLI said its run ended in an error.
    pub is_error: Option<bool>,
    /// Lines read, and of them lines that were not one JSON object (skipped).
    pub lines: u64,
    /// Lines that were not a JSON object.
    pub lines_unparsed: u64,
}

/// A non-negative integer field of `v`, or 0.
fn num(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// `s` cut at [`TEXT_MAX`] bytes on a character boundary, and whether it was cut.
fn cut(s: &str) -> (String, bool) {
    if s.len() <= TEXT_MAX {
        return (s.to_string(), false);
    }
    let mut end = TEXT_MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (s[..end].to_string(), true)
}

impl AgentReport {
    /// Keeps `text` as the final message: cut at [`TEXT_MAX`], each line through
    /// `text::printable` (no terminal escape or bidi control survives; line breaks do).
    fn set_final(&mut self, text: &str) {
        let (t, truncated) = cut(text);
        let clean: Vec<String> = t.split('\n').map(crate::text::printable).collect();
        self.final_message = Some(clean.join("\n"));
        self.final_message_truncated = truncated;
    }

    fn add_usage(&mut self, u: &Value) {
        let total = self.usage.get_or_insert_with(Usage::default);
        total.input_tokens += num(u, "input_tokens");
        total.output_tokens += num(u, "output_tokens");
        total.cache_read_input_tokens +=
            num(u, "cache_read_input_tokens") + num(u, "cached_input_tokens");
        total.cache_creation_input_tokens += num(u, "cache_creation_input_tokens");
    }
}

/// Reads a CLI's output `lines` (the agent unit's journal messages) with `kind`'s parser.
/// Pure; never fails: what it cannot read it counts in `lines_unparsed`.
#[must_use]
pub fn report(kind: StreamKind, lines: &[String]) -> AgentReport {
    let mut r = AgentReport {
        stream: serde_json::to_value(kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        ..AgentReport::default()
    };
    for line in lines {
        r.lines += 1;
        if kind == StreamKind::PlainText {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
            r.lines_unparsed += 1;
            continue;
        };
        if !v.is_object() {
            r.lines_unparsed += 1;
            continue;
        }
        match kind {
            StreamKind::ClaudeStreamJson => claude(&mut r, &v),
            StreamKind::CodexJson => codex(&mut r, &v),
            StreamKind::GeminiStreamJson => gemini(&mut r, &v),
            StreamKind::PlainText => {}
        }
    }
    r
}

fn claude(r: &mut AgentReport, v: &Value) {
    match v.get("type").and_then(Value::as_str) {
        Some("assistant") => {
            let blocks = v
                .pointer("/message/content")
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice);
            let calls = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
                .count();
            r.tool_calls += calls as u64;
        }
        Some("result") => {
            if let Some(t) = v.get("result").and_then(Value::as_str) {
                r.set_final(t);
            }
            r.turns = v.get("num_turns").and_then(Value::as_u64);
            if let Some(u) = v.get("usage") {
                r.usage = None; // the result's usage is the run's total
                r.add_usage(u);
            }
            r.cost_usd = v
                .get("total_cost_usd")
                .and_then(Value::as_f64)
                .filter(|c| c.is_finite() && *c >= 0.0);
            r.is_error = v.get("is_error").and_then(Value::as_bool);
        }
        _ => {}
    }
}

fn codex(r: &mut AgentReport, v: &Value) {
    match v.get("type").and_then(Value::as_str) {
        Some("item.completed") => match v.pointer("/item/type").and_then(Value::as_str) {
            Some("agent_message") => {
                if let Some(t) = v.pointer("/item/text").and_then(Value::as_str) {
                    r.set_final(t);
                }
            }
            Some("command_execution" | "file_change" | "mcp_tool_call" | "web_search") => {
                r.tool_calls += 1;
            }
            _ => {}
        },
        Some("turn.completed") => {
            r.turns = Some(r.turns.unwrap_or(0) + 1);
            if let Some(u) = v.get("usage") {
                r.add_usage(u);
            }
            r.is_error.get_or_insert(false);
        }
        Some("turn.failed" | "error") => r.is_error = Some(true),
        _ => {}
    }
}

/// Gemini CLI 0.61.0 (a real capture against the stand-in): `init`, the user `message`,
/// `tool_use` {`tool_name`, `tool_id`, `parameters`} and `tool_result` per call, the assistant
/// `message` {`content`, `delta: true`} (chunks of ONE answer: a tool call between two
/// answers starts a new one), and the last `result` {`status`: "success" | "error",
/// `error`: {`message`}, `stats`: {`input_tokens`, `output_tokens`, `cached`, `tool_calls`,
/// `models`}}; `stats` sums the run's requests and has no turn count.
fn gemini(r: &mut AgentReport, v: &Value) {
    match v.get("type").and_then(Value::as_str) {
        Some("message") if v.get("role").and_then(Value::as_str) == Some("assistant") => {
            let text = v.get("content").and_then(Value::as_str).unwrap_or("");
            let delta = v.get("delta").and_then(Value::as_bool) == Some(true);
            let joined = match (&r.final_message, delta) {
                (Some(prev), true) => format!("{prev}{text}"),
                _ => text.to_string(),
            };
            r.set_final(&joined);
        }
        Some("tool_use") => {
            r.tool_calls += 1;
            r.final_message = None; // text before a tool call is not the final answer
        }
        Some("result") => {
            if let Some(s) = v.get("stats") {
                r.usage = None;
                r.add_usage(s);
                if let Some(u) = r.usage.as_mut() {
                    u.cache_read_input_tokens += num(s, "cached");
                }
            }
            let status = v.get("status").and_then(Value::as_str);
            r.is_error = status.map(|s| s != "success");
            if status != Some("success")
                && let Some(m) = v.pointer("/error/message").and_then(Value::as_str)
            {
                r.set_final(m);
            }
        }
        _ => {}
    }
}

/// A content value as text: a string, the `text`/`content` of blocks, joined by lines; other
/// values are "". Pure.
pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join("\n"),
        Value::Object(o) => o
            .get("text")
            .or(o.get("content"))
            .map(text)
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// The text of every tool result in a CLI's output `lines`, as the CLI recorded what its tool
/// printed: Claude Code's `tool_result` blocks (in `user` messages), Codex's finished
/// `command_execution` items (`aggregated_output`), Gemini CLI's `tool_result` events. The
/// model's own words (assistant text) are never in it, so a drill cannot take them for an
/// attempt (issue 14 attack review). `None` for a stream without tool records (plain text).
/// Untrusted like the stream; pure.
#[must_use]
pub fn tool_outputs(kind: StreamKind, lines: &[String]) -> Option<Vec<String>> {
    if kind == StreamKind::PlainText {
        return None;
    }
    let mut out = Vec::new();
    for line in lines {
        let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
            continue;
        };
        match (kind, v.get("type").and_then(Value::as_str)) {
            (StreamKind::ClaudeStreamJson, Some("user")) => {
                let blocks = v.pointer("/message/content").and_then(Value::as_array);
                for b in blocks.map_or(&[][..], Vec::as_slice) {
                    if b.get("type").and_then(Value::as_str) == Some("tool_result") {
                        out.push(b.get("content").map(text).unwrap_or_default());
                    }
                }
            }
            (StreamKind::CodexJson, Some("item.completed"))
                if v.pointer("/item/type").and_then(Value::as_str) == Some("command_execution") =>
            {
                let item = &v["item"];
                out.push(format!(
                    "{} rc={}",
                    item.get("aggregated_output").map(text).unwrap_or_default(),
                    item.get("exit_code")
                        .and_then(Value::as_i64)
                        .map_or("?".into(), |c| c.to_string())
                ));
            }
            (StreamKind::GeminiStreamJson, Some("tool_result")) => {
                out.push(
                    v.get("output")
                        .or(v.get("content"))
                        .map(text)
                        .unwrap_or_default(),
                );
            }
            _ => {}
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &[&str]) -> Vec<String> {
        s.iter().map(|l| (*l).to_string()).collect()
    }

    #[test]
    fn claude_result_line_gives_final_text_turns_usage_and_cost() {
        let r = report(
            StreamKind::ClaudeStreamJson,
            &lines(&[
                r#"{"type":"system","subtype":"init","model":"m"}"#,
                r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"ls"}}],"usage":{"input_tokens":1,"output_tokens":1}}}"#,
                "not json at all",
                r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"x"}]}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"num_turns":2,"result":"done: 42","usage":{"input_tokens":1234,"output_tokens":56,"cache_read_input_tokens":7},"total_cost_usd":0.0123}"#,
            ]),
        );
        assert_eq!(r.final_message.as_deref(), Some("done: 42"));
        assert_eq!(r.turns, Some(2));
        assert_eq!(r.tool_calls, 1);
        let u = r.usage.expect("usage");
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cache_read_input_tokens),
            (1234, 56, 7)
        );
        assert_eq!(r.cost_usd, Some(0.0123));
        assert_eq!(r.is_error, Some(false));
        assert_eq!((r.lines, r.lines_unparsed), (5, 1));
    }

    #[test]
    fn codex_sums_turn_usage_counts_tool_items_and_keeps_the_last_message() {
        let r = report(
            StreamKind::CodexJson,
            &lines(&[
                r#"{"type":"thread.started","thread_id":"t"}"#,
                r#"{"type":"item.completed","item":{"id":"i0","type":"command_execution","command":"bash -lc ls","exit_code":0}}"#,
                r#"{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"first"}}"#,
                r#"{"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"final words"}}"#,
                r#"{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":3,"output_tokens":4}}"#,
            ]),
        );
        assert_eq!(r.final_message.as_deref(), Some("final words"));
        assert_eq!((r.turns, r.tool_calls), (Some(1), 1));
        let u = r.usage.expect("usage");
        assert_eq!(
            (u.input_tokens, u.cache_read_input_tokens, u.output_tokens),
            (10, 3, 4)
        );
    }

    #[test]
    fn gemini_real_capture_gives_the_last_answer_and_the_result_stats() {
        // Gemini CLI 0.61.0 against the stand-in (trimmed timestamps and ids).
        let r = report(
            StreamKind::GeminiStreamJson,
            &lines(&[
                r#"{"type":"init","session_id":"76f2","model":"gm-test"}"#,
                r#"{"type":"message","role":"user","content":"do it"}"#,
                r#"{"type":"message","role":"assistant","content":"let me look","delta":true}"#,
                r#"{"type":"tool_use","tool_name":"run_shell_command","tool_id":"r1","parameters":{"command":"echo MARK-123"}}"#,
                r#"{"type":"tool_result","tool_id":"r1","status":"success","output":"MARK-123"}"#,
                r#"{"type":"message","role":"assistant","content":"stand-in final ","delta":true}"#,
                r#"{"type":"message","role":"assistant","content":"MARK-123","delta":true}"#,
                r#"{"type":"result","status":"success","stats":{"total_tokens":1290,"input_tokens":1234,"output_tokens":56,"cached":7,"input":1234,"duration_ms":601,"tool_calls":1}}"#,
            ]),
        );
        assert_eq!(r.final_message.as_deref(), Some("stand-in final MARK-123"));
        assert_eq!(r.tool_calls, 1);
        let u = r.usage.expect("usage");
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cache_read_input_tokens),
            (1234, 56, 7)
        );
        assert_eq!(r.is_error, Some(false));
        let e = report(
            StreamKind::GeminiStreamJson,
            &lines(&[
                r#"{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: 403 stand-in refused]"},"stats":{"input_tokens":0,"output_tokens":0}}"#,
            ]),
        );
        assert_eq!(e.is_error, Some(true));
        assert!(
            e.final_message
                .as_deref()
                .is_some_and(|m| m.contains("403"))
        );
    }

    #[test]
    fn the_final_message_keeps_its_lines_and_loses_terminal_escapes() {
        let r = report(
            StreamKind::ClaudeStreamJson,
            &lines(&[r#"{"type":"result","result":"done\n\u001b[2Jgone\u202eevil"}"#]),
        );
        assert_eq!(
            r.final_message.as_deref(),
            Some("done\n\u{fffd}[2Jgone\u{fffd}evil")
        );
    }

    #[test]
    fn tool_outputs_hold_what_the_tools_printed_and_never_the_models_words() {
        let claude = lines(&[
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"drill-1: No such file or directory"}]}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"cat: x: No such file or directory\ndrill-1 rc=1"}]}}"#,
            r#"{"type":"result","result":"drill-1: No such file or directory"}"#,
        ]);
        let got = tool_outputs(StreamKind::ClaudeStreamJson, &claude).expect("structured");
        assert_eq!(got, ["cat: x: No such file or directory\ndrill-1 rc=1"]);
        let codex = lines(&[
            r#"{"type":"item.completed","item":{"type":"agent_message","text":"drill-2 rc=1"}}"#,
            r#"{"type":"item.completed","item":{"type":"command_execution","aggregated_output":"drill-2 denied\n","exit_code":1}}"#,
        ]);
        assert_eq!(
            tool_outputs(StreamKind::CodexJson, &codex).expect("structured"),
            ["drill-2 denied\n rc=1"]
        );
        assert_eq!(tool_outputs(StreamKind::PlainText, &codex), None);
    }

    #[test]
    fn hostile_streams_cannot_break_the_parser_or_grow_the_record() {
        let huge = "x".repeat(TEXT_MAX * 3);
        let line = format!(
            r#"{{"type":"result","result":"{huge}","num_turns":-3,"usage":{{"input_tokens":"9"}},"total_cost_usd":-1}}"#
        );
        let r = report(
            StreamKind::ClaudeStreamJson,
            &lines(&["[1,2]", "\u{0}\u{7f}", "{", &line]),
        );
        assert_eq!(r.final_message.as_ref().map(String::len), Some(TEXT_MAX));
        assert!(r.final_message_truncated);
        assert_eq!(r.turns, None, "a negative count is not a count");
        assert_eq!(
            r.usage.map(|u| u.input_tokens),
            Some(0),
            "a string is not a number"
        );
        assert_eq!(r.cost_usd, None);
        assert_eq!(r.lines_unparsed, 3);
    }
}
