//! The record's parts of a gate with `gate.protected` (docs/gate.md): what the run's commits
//! did to the protected paths, and the two inventories of the base's tests compared.

use serde::{Deserialize, Serialize};

use crate::gate::{Verdict, Weakened};
use crate::twin::Counts;

/// A protected path the run's commits changed; the gate ran the base's version (or, for an
/// added path, without it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectedChange {
    /// The path in the repository (printable: control characters escaped).
    pub path: String,
    /// `added`, `modified`, `deleted` or `type-changed`.
    pub change: String,
}

impl std::fmt::Display for ProtectedChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.path, self.change)
    }
}

/// The gate's run on the base tree: where its inventory came from and what it counted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseInventory {
    /// The base commit's tree (the cache key's first part).
    pub tree: String,
    /// `ran` (this run ran the gate on the base tree) or `cached` (an earlier run did, with
    /// the same tree, gate image and argv: `run_id` names it).
    pub source: String,
    /// The run that ran it.
    pub run_id: String,
    /// Its exit status.
    pub exit: i32,
    /// Its counts.
    pub counts: Counts,
}

/// The comparison of the base's tests with the agent's tree's (`crate::gate::judge`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateInventory {
    /// The base's inventory.
    pub base: BaseInventory,
    /// What the gate's run on the agent's tree left: `junit`, `missing` or
    /// `unreadable: WHY`.
    pub results: String,
    /// Its counts (`None`: no readable results).
    pub counts: Option<Counts>,
    /// The verdict.
    pub verdict: Verdict,
    /// Tests that ran at base and not on the agent's tree (at most
    /// [`crate::gate::MAX_LISTED`]; `weakened_total` counts them all).
    pub weakened: Vec<Weakened>,
    /// How many there are.
    pub weakened_total: usize,
    /// Tests only the agent's tree has (at most [`crate::gate::MAX_LISTED`]).
    pub new_tests: Vec<String>,
    /// How many there are.
    pub new_total: usize,
    /// The exit status contradicts the results, if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contradiction: Option<String>,
}

/// The summary's lines about a gate with `gate.protected`: the two inventories, each test
/// the agent's tree no longer runs, a contradicting exit status, and the protected paths the
/// run's commits changed.
#[must_use]
pub fn summary_lines(inventory: Option<&GateInventory>, changes: &[ProtectedChange]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if let Some(inv) = inventory {
        let base = &inv.base;
        let whence = if base.source == "cached" {
            format!("kept from run {}", base.run_id)
        } else {
            "run on the base tree".to_string()
        };
        let judged = crate::gate::Judged {
            verdict: inv.verdict,
            weakened: Vec::new(),
            new_tests: vec![String::new(); inv.new_total],
            contradiction: None,
            counts: inv.counts,
        };
        let _ = writeln!(
            s,
            "  gate: {} ({whence})",
            crate::gate::describe(&base.counts, &judged)
        );
        for w in &inv.weakened {
            let now = match w.now {
                crate::gate::Now::Missing => "did not run",
                crate::gate::Now::Skipped => "was skipped",
                crate::gate::Now::Shadowed => "was shadowed by another test of its name",
            };
            let _ = writeln!(
                s,
                "  GATE WEAKENED: {} ran at base ({}), on the agent's tree it {now}",
                w.test,
                w.at_base.as_str()
            );
        }
        if inv.weakened_total > inv.weakened.len() {
            let _ = writeln!(
                s,
                "  GATE WEAKENED: … and {} more (the record lists {})",
                inv.weakened_total - inv.weakened.len(),
                inv.weakened.len()
            );
        }
        if let Some(c) = &inv.contradiction {
            let _ = writeln!(s, "  GATE WEAKENED: {c}");
        }
        if inv.results != "junit" && inv.verdict == crate::gate::Verdict::Weakened {
            let _ = writeln!(
                s,
                "  GATE WEAKENED: the gate exited 0 on the agent's tree with results {}",
                inv.results
            );
        }
    }
    if !changes.is_empty() {
        let list: Vec<String> = changes.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            s,
            "  PROTECTED paths changed by the run's commits (the gate ran the base's): {}",
            list.join(", ")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twin::TestOutcome;

    #[test]
    fn the_summary_names_each_weakened_test_and_each_protected_change() {
        let inv = GateInventory {
            base: BaseInventory {
                tree: "t".into(),
                source: "cached".into(),
                run_id: "r0".into(),
                exit: 1,
                counts: Counts {
                    passed: 2,
                    failed: 1,
                    skipped: 0,
                    error: 0,
                },
            },
            results: "missing".into(),
            counts: None,
            verdict: crate::gate::Verdict::Weakened,
            weakened: vec![Weakened {
                test: "t::sub".into(),
                at_base: TestOutcome::Failed,
                now: crate::gate::Now::Missing,
            }],
            weakened_total: 3,
            new_tests: Vec::new(),
            new_total: 0,
            contradiction: None,
        };
        let changes = [ProtectedChange {
            path: "conftest.py".into(),
            change: "added".into(),
        }];
        let s = summary_lines(Some(&inv), &changes);
        assert_eq!(
            s,
            "  gate: 3 tests at base (1 failed), on the agent's tree no results (kept from run r0)\n  \
             GATE WEAKENED: t::sub ran at base (failed), on the agent's tree it did not run\n  \
             GATE WEAKENED: … and 2 more (the record lists 1)\n  \
             GATE WEAKENED: the gate exited 0 on the agent's tree with results missing\n  \
             PROTECTED paths changed by the run's commits (the gate ran the base's): conftest.py (added)\n"
        );
        assert_eq!(summary_lines(None, &[]), "");
    }
}
