//! The record's part about the baseline (`baseline:` in the spec, `run::baseline`).

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
    /// Why it has no exit status (the deadline), if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
