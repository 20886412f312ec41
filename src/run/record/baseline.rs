//! The record's part about the baseline (`baseline:` in the spec, `run::phases::baseline`).

use serde::{Deserialize, Serialize};

/// The `baseline` object of the run record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaselineRecord {
    /// The argv that ran.
    pub command: Vec<String>,
    /// Its exit status; `None`: it did not finish within `timeout_s` (then `error` says so).
    pub exit: Option<i32>,
    /// Whether it passed (exit 0).
    pub passed: bool,
    /// Its budget, in seconds.
    pub timeout_s: u64,
    /// How long it ran, in ms.
    pub duration_ms: u128,
    /// The last lines it printed (stdout, then stderr; secret values replaced by `***`,
    /// terminal escapes removed).
    pub log: Vec<String>,
    /// Why it has no exit status (the deadline), or what else failed it (the processes it
    /// left running beside the agent), if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The summary's lines for a failed baseline: whose fault it is, and its last lines.
#[must_use]
pub fn summary_lines(b: Option<&BaselineRecord>) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let Some(b) = b.filter(|b| !b.passed) else {
        return s;
    };
    let how = match (&b.exit, &b.error) {
        (Some(code), Some(e)) => format!("exited {code} and {e}"),
        (Some(code), None) => format!("exited {code}"),
        (None, Some(e)) => e.clone(),
        (None, None) => "failed".into(),
    };
    let _ = writeln!(
        s,
        "  SETUP BROKEN: the baseline `{}` {how} before the agent started; the agent never ran. \
         The project's setup (its image, services or baseline command), not the agent, is at fault",
        crate::text::printable(&b.command.join(" "))
    );
    let _ = writeln!(s, "  last lines of the baseline:");
    for l in b.log.iter().rev().take(10).rev() {
        let _ = writeln!(s, "    | {l}");
    }
    s
}
