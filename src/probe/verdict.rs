//! PURE: observation → verdict for every probe (security-cases §0, §2). No I/O here: the
//! observations come from [`super::observe`], the expected facts from [`super::Context`].
//!
//! Rules every function follows (§0.3): PASS only on the exact expected errno or status; a
//! [`Attempt::Timeout`] is a FAIL ("dropped, not rejected"); a missing tool or object is a FAIL,
//! never a skip; a deny check whose positive control did not work is a FAIL.
//!
//! Layout: this file holds what every family shares ([`Attempt`], [`Judged`], the errno-list
//! judgement); one file per probe family holds its observation types and verdicts, in the
//! family's probe order.

use nix::errno::Errno;
use serde::{Deserialize, Serialize};

pub mod credentials;
pub mod dns;
pub mod escape;
pub mod filesystem;
pub mod kernel;
pub mod network;
pub mod privilege;
pub mod processes;
pub mod proxy;
pub mod sockets;

#[cfg(test)]
mod tests;

/// The outcome of one attempt (a syscall, a `connect()`, a write, an open).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Attempt {
    /// It succeeded.
    Ok,
    /// It failed with this `errno` (positive).
    Errno(i32),
    /// No answer within the probe's own deadline (a dropped packet, a hung call).
    Timeout,
    /// The tool, file or host needed for the attempt is missing; the text says which.
    Missing(String),
}

impl Attempt {
    /// From a `Result` whose error is an `errno`.
    #[must_use]
    #[allow(clippy::needless_pass_by_value)] // takes the syscall's result as returned
    pub fn of<T>(r: Result<T, i32>) -> Attempt {
        match r {
            Ok(_) => Attempt::Ok,
            Err(e) => Attempt::Errno(e),
        }
    }

    /// Short text: `ok`, `EPERM`, `timeout`, `missing: WHAT`.
    #[must_use]
    pub fn text(&self) -> String {
        match self {
            Attempt::Ok => "ok".into(),
            Attempt::Errno(e) => errno_name(*e),
            Attempt::Timeout => "timeout".into(),
            Attempt::Missing(w) => format!("missing: {w}"),
        }
    }

    fn is_errno(&self, want: &[i32]) -> bool {
        matches!(self, Attempt::Errno(e) if want.contains(e))
    }
}

/// `EPERM`, `ENETUNREACH`, ... for an errno number (`errno 999` when unknown).
#[must_use]
pub fn errno_name(e: i32) -> String {
    let n = Errno::from_raw(e);
    if n == Errno::UnknownErrno {
        format!("errno {e}")
    } else {
        format!("{n:?}")
    }
}

/// The judgement of one probe: what was expected, what was seen, PASS or not, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// The expected value (from security-cases §2 or the decided policy).
    pub expect: String,
    /// What the probe saw.
    pub got: String,
    /// PASS.
    pub pass: bool,
    /// Why, including any policy decision that applies.
    pub detail: String,
}

fn judged(
    expect: impl Into<String>,
    got: impl Into<String>,
    pass: bool,
    detail: impl Into<String>,
) -> Judged {
    Judged {
        expect: expect.into(),
        got: got.into(),
        pass,
        detail: detail.into(),
    }
}

/// A probe that did not finish within its hard deadline: FAIL (§2 "a TIMEOUT is a FAIL").
#[must_use]
pub fn timed_out(limit_ms: u64) -> Judged {
    judged(
        "an answer within the probe's deadline",
        "timeout",
        false,
        format!("dropped, not rejected: no result within {limit_ms} ms"),
    )
}

/// A probe that was not started because the suite's budget was used up: FAIL.
#[must_use]
pub fn over_budget(budget_ms: u64) -> Judged {
    judged(
        "run within the suite budget",
        "not run",
        false,
        format!("the suite budget of {budget_ms} ms was used up before this probe started"),
    )
}

/// Judges a list of (label, attempt) against the accepted errnos: PASS when every attempt
/// failed with one of `want`.
fn all_errno(expect: &str, items: &[(String, Attempt)], want: &[i32]) -> Judged {
    let got = list(items);
    if items.is_empty() {
        return judged(expect, "nothing attempted", false, "no attempt was made");
    }
    let bad: Vec<&str> = items
        .iter()
        .filter(|(_, a)| !a.is_errno(want))
        .map(|(l, _)| l.as_str())
        .collect();
    let pass = bad.is_empty();
    let detail = if pass {
        String::new()
    } else if items.iter().any(|(_, a)| *a == Attempt::Timeout) {
        format!(
            "dropped, not rejected (timeout) or wrong answer: {}",
            bad.join(", ")
        )
    } else {
        format!("wrong answer for: {}", bad.join(", "))
    };
    judged(expect, got, pass, detail)
}

fn list(items: &[(String, Attempt)]) -> String {
    items
        .iter()
        .map(|(l, a)| format!("{l}={}", a.text()))
        .collect::<Vec<_>>()
        .join(" ")
}
