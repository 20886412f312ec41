//! A preset CLI's output stream as a person reads it (issue 32 item 1): what `cyclix logs`
//! prints for a preset run — the CLI's messages, its tool calls and what they returned — in
//! place of the raw JSON events (`cyclix logs --raw` keeps those).
//!
//! The stream comes out of the sandbox: each line is parsed on its own, nothing in it is read
//! as configuration, and every line this view makes goes through [`crate::text::printable`]
//! (a JSON string may hold `\u001b`: decoded, it would be a terminal escape again) and the
//! caller's redaction. Shapes: [`super::stream`]'s (measured against the testbed's stand-in).
//! A line that is not a JSON object is shown as it is; an event this view does not know is
//! left out (`--raw` shows it).

use serde_json::Value;

use super::StreamKind;

/// Most lines of one tool result shown; the rest are counted.
pub const RESULT_LINES: usize = 6;

/// Longest summary of a tool call's input (characters).
const INPUT_MAX: usize = 200;

/// Reads a CLI's stream line by line and says what happened in it. Holds Gemini CLI's
/// assistant text until its answer ends (it streams one answer as `delta` chunks).
#[derive(Debug)]
pub struct View {
    kind: StreamKind,
    answer: Option<String>,
}

impl View {
    /// A view of a `kind` stream.
    #[must_use]
    pub fn new(kind: StreamKind) -> Self {
        Self { kind, answer: None }
    }

    /// The lines one stream line makes (none for an event this view leaves out). Pure.
    pub fn push(&mut self, line: &str) -> Vec<String> {
        if self.kind == StreamKind::PlainText {
            return vec![crate::text::printable(line)];
        }
        let v = match serde_json::from_str::<Value>(line.trim()) {
            Ok(v) if v.is_object() => v,
            _ => {
                let mut out = self.finish();
                out.push(crate::text::printable(line));
                return out;
            }
        };
        let mut out = Vec::new();
        match self.kind {
            StreamKind::ClaudeStreamJson => claude(&v, &mut out),
            StreamKind::CodexJson => codex(&v, &mut out),
            StreamKind::GeminiStreamJson => self.gemini(&v, &mut out),
            StreamKind::PlainText => {}
        }
        out.iter().map(|l| crate::text::printable(l)).collect()
    }

    /// What the view still holds (an answer the stream did not end): at the end of the
    /// stream, or before a line it shows as it is.
    pub fn finish(&mut self) -> Vec<String> {
        self.answer
            .take()
            .map(|a| said("assistant", &a))
            .unwrap_or_default()
            .iter()
            .map(|l| crate::text::printable(l))
            .collect()
    }

    fn gemini(&mut self, v: &Value, out: &mut Vec<String>) {
        let kind = v.get("type").and_then(Value::as_str);
        let assistant = v.get("role").and_then(Value::as_str) == Some("assistant");
        if kind == Some("message") && assistant {
            let text = str_at(v, "/content");
            if v.get("delta").and_then(Value::as_bool) == Some(true) {
                self.answer.get_or_insert_with(String::new).push_str(text);
                return;
            }
            out.extend(self.finish());
            out.extend(said("assistant", text));
            return;
        }
        out.extend(self.finish());
        match kind {
            Some("init") => out.push(format!("session started: model {}", str_at(v, "/model"))),
            Some("tool_use") => out.push(format!(
                "tool {}: {}",
                str_at(v, "/tool_name"),
                input_summary(v.get("parameters"))
            )),
            Some("tool_result") => {
                let error = v.get("status").and_then(Value::as_str) == Some("error");
                let body = v
                    .get("output")
                    .or(v.get("content"))
                    .map_or_else(String::new, text);
                out.extend(result(&body, error));
            }
            Some("result") => {
                let status = str_at(v, "/status");
                let mut l = format!("result: {status}");
                if let Some(s) = v.get("stats") {
                    l.push_str(&tokens(s, "input_tokens", "output_tokens"));
                }
                if status != "success" {
                    l.push_str(": ");
                    l.push_str(str_at(v, "/error/message"));
                }
                out.push(l);
            }
            _ => {}
        }
    }
}

/// The string at JSON pointer `p` of `v`, or "".
fn str_at<'a>(v: &'a Value, p: &str) -> &'a str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

/// A content value as text: a string, the `text`/`content` of blocks, joined by lines.
fn text(v: &Value) -> String {
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

/// `who: first line`, the other lines indented under it.
fn said(who: &str, body: &str) -> Vec<String> {
    let mut lines = body.trim_end().lines();
    let mut out = vec![format!("{who}: {}", lines.next().unwrap_or(""))];
    out.extend(lines.map(|l| format!("  {l}")));
    out
}

/// A tool's result: its first [`RESULT_LINES`] lines, indented, the rest counted.
fn result(body: &str, error: bool) -> Vec<String> {
    let lines: Vec<&str> = body.trim_end().lines().collect();
    let head = if error { "  ↳ error" } else { "  ↳" };
    if lines.is_empty() {
        return vec![format!("{head} (no output)")];
    }
    let mut out: Vec<String> = lines
        .iter()
        .take(RESULT_LINES)
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                format!("{head} {l}")
            } else {
                format!("    {l}")
            }
        })
        .collect();
    if lines.len() > RESULT_LINES {
        out.push(format!(
            "    … {} more line(s) (cyclix logs --raw shows them)",
            lines.len() - RESULT_LINES
        ));
    }
    out
}

/// A tool call's input in one line: its command, file or pattern when it names one, else its
/// JSON; cut at [`INPUT_MAX`] characters.
fn input_summary(input: Option<&Value>) -> String {
    let Some(input) = input else {
        return String::new();
    };
    let named = [
        "command",
        "cmd",
        "file_path",
        "path",
        "absolute_path",
        "pattern",
        "url",
        "query",
    ]
    .iter()
    .find_map(|k| input.get(*k))
    .map(|v| match v {
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(" "),
        other => text(other),
    });
    let s = named
        .unwrap_or_else(|| input.to_string())
        .replace('\n', "⏎");
    if s.chars().count() <= INPUT_MAX {
        return s;
    }
    let cut: String = s.chars().take(INPUT_MAX).collect();
    format!("{cut}…")
}

/// ` (N in, M out tokens)` from `u`'s `inp`/`outp` fields; "" without them.
fn tokens(u: &Value, inp: &str, outp: &str) -> String {
    match (
        u.get(inp).and_then(Value::as_u64),
        u.get(outp).and_then(Value::as_u64),
    ) {
        (Some(i), Some(o)) => format!(" ({i} in, {o} out tokens)"),
        _ => String::new(),
    }
}

fn claude(v: &Value, out: &mut Vec<String>) {
    let blocks = || {
        v.pointer("/message/content")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
    };
    match v.get("type").and_then(Value::as_str) {
        Some("system") if str_at(v, "/subtype") == "init" => out.push(format!(
            "session started: model {}, {} tools",
            str_at(v, "/model"),
            v.get("tools").and_then(Value::as_array).map_or(0, Vec::len)
        )),
        Some("assistant") => {
            for b in blocks() {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => out.extend(said("assistant", str_at(b, "/text"))),
                    Some("tool_use") => out.push(format!(
                        "tool {}: {}",
                        str_at(b, "/name"),
                        input_summary(b.get("input"))
                    )),
                    _ => {}
                }
            }
        }
        Some("user") => {
            for b in blocks() {
                if b.get("type").and_then(Value::as_str) == Some("tool_result") {
                    let error = b.get("is_error").and_then(Value::as_bool) == Some(true);
                    out.extend(result(
                        &b.get("content").map_or_else(String::new, text),
                        error,
                    ));
                }
            }
        }
        Some("result") => {
            let error = v.get("is_error").and_then(Value::as_bool) == Some(true);
            let mut l = format!("result: {}", if error { "error" } else { "success" });
            if let Some(n) = v.get("num_turns").and_then(Value::as_u64) {
                l.push_str(" after ");
                l.push_str(&n.to_string());
                l.push_str(" turn(s)");
            }
            if let Some(u) = v.get("usage") {
                l.push_str(&tokens(u, "input_tokens", "output_tokens"));
            }
            // A success's `result` repeats the last assistant text, shown already; an error's
            // is the error.
            let r = str_at(v, "/result");
            if error && !r.is_empty() {
                l.push(':');
                out.push(l);
                out.extend(said("  error", r));
            } else {
                out.push(l);
            }
        }
        _ => {}
    }
}

fn codex(v: &Value, out: &mut Vec<String>) {
    let item = |p: &str| str_at(v, &format!("/item{p}")).to_owned();
    match v.get("type").and_then(Value::as_str) {
        Some("thread.started") => out.push("session started".to_owned()),
        Some("item.completed") => match item("/type").as_str() {
            "agent_message" => out.extend(said("assistant", &item("/text"))),
            "command_execution" => {
                let code = v.pointer("/item/exit_code").and_then(Value::as_i64);
                out.push(format!(
                    "tool shell: {}{}",
                    input_summary(v.pointer("/item")),
                    code.map_or(String::new(), |c| format!(" (exit {c})"))
                ));
                let body = v
                    .pointer("/item/aggregated_output")
                    .map_or_else(String::new, text);
                out.extend(result(&body, code.is_some_and(|c| c != 0)));
            }
            "file_change" => {
                let changes = v.pointer("/item/changes").and_then(Value::as_array);
                let what: Vec<String> = changes
                    .map_or(&[][..], Vec::as_slice)
                    .iter()
                    .map(|c| format!("{} ({})", str_at(c, "/path"), str_at(c, "/kind")))
                    .collect();
                out.push(format!("edit: {}", what.join(", ")));
            }
            "mcp_tool_call" => out.push(format!("tool {}.{}", item("/server"), item("/tool"))),
            "web_search" => out.push(format!("web search: {}", item("/query"))),
            _ => {}
        },
        Some("turn.completed") => out.push(format!(
            "turn done{}",
            v.get("usage").map_or(String::new(), |u| tokens(
                u,
                "input_tokens",
                "output_tokens"
            ))
        )),
        Some("turn.failed") => out.push(format!("turn failed: {}", str_at(v, "/error/message"))),
        Some("error") => out.push(format!("error: {}", str_at(v, "/message"))),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(kind: StreamKind, lines: &[&str]) -> Vec<String> {
        let mut v = View::new(kind);
        let mut out: Vec<String> = lines.iter().flat_map(|l| v.push(l)).collect();
        out.extend(v.finish());
        out
    }

    #[test]
    fn claude_events_read_as_messages_tool_calls_and_results() {
        let out = view(
            StreamKind::ClaudeStreamJson,
            &[
                r#"{"type":"system","subtype":"init","model":"claude-x","tools":["Bash","Edit"]}"#,
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Looking."},{"type":"tool_use","name":"Bash","input":{"command":"python -m pytest -q"}}]}}"#,
                r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"1 failed, 2 passed\nline2\nl3\nl4\nl5\nl6\nl7\nl8"}]}}"#,
                r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Edit","input":{"file_path":"calc.py","old_string":"a + b"}}]}}"#,
                "not json",
                r#"{"type":"rate_limit_event"}"#,
                r#"{"type":"result","is_error":false,"num_turns":3,"result":"Fixed.\nAll pass.","usage":{"input_tokens":10,"output_tokens":5}}"#,
            ],
        );
        assert_eq!(
            out,
            [
                "session started: model claude-x, 2 tools",
                "assistant: Looking.",
                "tool Bash: python -m pytest -q",
                "  ↳ 1 failed, 2 passed",
                "    line2",
                "    l3",
                "    l4",
                "    l5",
                "    l6",
                "    … 2 more line(s) (cyclix logs --raw shows them)",
                "tool Edit: calc.py",
                "not json",
                "result: success after 3 turn(s) (10 in, 5 out tokens)",
            ]
        );
        let out = view(
            StreamKind::ClaudeStreamJson,
            &[r#"{"type":"result","is_error":true,"result":"API Error: 502"}"#],
        );
        assert_eq!(out, ["result: error:", "  error: API Error: 502"]);
    }

    #[test]
    fn codex_and_gemini_events_read_the_same_way() {
        let out = view(
            StreamKind::CodexJson,
            &[
                r#"{"type":"thread.started","thread_id":"t"}"#,
                r#"{"type":"item.completed","item":{"type":"command_execution","command":"bash -lc 'pytest -q'","aggregated_output":"","exit_code":1}}"#,
                r#"{"type":"item.completed","item":{"type":"file_change","changes":[{"path":"calc.py","kind":"update"}]}}"#,
                r#"{"type":"item.completed","item":{"type":"agent_message","text":"Done."}}"#,
                r#"{"type":"turn.completed","usage":{"input_tokens":7,"output_tokens":2}}"#,
            ],
        );
        assert_eq!(
            out,
            [
                "session started",
                "tool shell: bash -lc 'pytest -q' (exit 1)",
                "  ↳ error (no output)",
                "edit: calc.py (update)",
                "assistant: Done.",
                "turn done (7 in, 2 out tokens)",
            ]
        );
        let out = view(
            StreamKind::GeminiStreamJson,
            &[
                r#"{"type":"init","model":"gemini-y"}"#,
                r#"{"type":"message","role":"user","content":"the task"}"#,
                r#"{"type":"message","role":"assistant","content":"I will ","delta":true}"#,
                r#"{"type":"message","role":"assistant","content":"fix it.","delta":true}"#,
                r#"{"type":"tool_use","tool_name":"run_shell_command","parameters":{"command":"ls"}}"#,
                r#"{"type":"tool_result","status":"success","output":"calc.py"}"#,
                r#"{"type":"message","role":"assistant","content":"Fixed","delta":true}"#,
            ],
        );
        assert_eq!(
            out,
            [
                "session started: model gemini-y",
                "assistant: I will fix it.",
                "tool run_shell_command: ls",
                "  ↳ calc.py",
                "assistant: Fixed",
            ],
            "an answer the stream did not end is shown at its end"
        );
    }

    #[test]
    fn a_decoded_escape_never_reaches_the_terminal() {
        // The raw log line is printable (`\u001b` is six characters); decoding makes it ESC.
        let out = view(
            StreamKind::ClaudeStreamJson,
            &[
                r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"\u001b]52;c;AAAA\u0007 \u202e"}]}}"#,
                r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"\u001b[2J","input":{"command":"a\nb"}}]}}"#,
            ],
        );
        for l in &out {
            assert!(
                !l.chars().any(|c| c.is_control() || c == '\u{202e}'),
                "{l:?}"
            );
        }
        assert_eq!(out[0], "  ↳ \u{fffd}]52;c;AAAA\u{fffd} \u{fffd}");
        assert_eq!(out[1], "tool \u{fffd}[2J: a⏎b");
    }
}
