//! The comparison of the three sides ([`judge`]): every failure by class, the per-test table
//! and the outcome counts. Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;

use super::{Counts, Results, Shared, Side, SuiteRun, TestCase, TestOutcome};

/// The kinds of failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// A side could not be built, started or run.
    Build,
    /// A boundary probe failed.
    Probe,
    /// Results differ.
    Results,
    /// Outcome counts differ.
    Counts,
    /// The two environments share a name or address.
    Shared,
    /// Something was left after teardown.
    Leftover,
}

impl FailureClass {
    /// The class's name in the report.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Build => "build",
            FailureClass::Probe => "probe",
            FailureClass::Results => "results",
            FailureClass::Counts => "counts",
            FailureClass::Shared => "shared",
            FailureClass::Leftover => "leftover",
        }
    }
}

/// One reason the twin failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// Its class.
    pub class: FailureClass,
    /// What, naming the side and the object.
    pub detail: String,
}

/// One row of the side-by-side table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The test.
    pub test: String,
    /// Its outcome in A, B and the reference (`None`: not in that side's results).
    pub outcomes: [Option<TestOutcome>; 3],
    /// Whether the three differ.
    pub differs: bool,
}

/// The comparison of the three sides: the twin's verdict (`passed`) and what it rests on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Comparison {
    /// No failure.
    pub passed: bool,
    /// Every failure, in class order.
    pub failures: Vec<Failure>,
    /// The per-test table (empty without `JUnit` results on any side).
    pub rows: Vec<Row>,
    /// Outcome counts of A, B and the reference, where they have `JUnit` results.
    pub counts: [Option<Counts>; 3],
}

/// Judges the three sides (`[A, B, reference]`) and the shared names of the two plans.
#[must_use]
pub fn judge(sides: &[Side; 3], shared: &[Shared]) -> Comparison {
    let mut failures = Vec::new();
    let mut fail = |class, detail: String| failures.push(Failure { class, detail });
    for s in sides {
        let who = who(s);
        if let Some(e) = &s.error {
            fail(FailureClass::Build, format!("{who}: {e}"));
        } else if s.suite.is_none() {
            fail(
                FailureClass::Build,
                format!("{who}: the quick suite did not run to its end"),
            );
        }
        for p in &s.probe_failures {
            fail(FailureClass::Probe, format!("{who}: {p}"));
        }
        for l in &s.leftovers {
            fail(FailureClass::Leftover, format!("{who}: {l}"));
        }
    }
    let tests: [Option<&Vec<TestCase>>; 3] = std::array::from_fn(|i| match &sides[i].suite {
        Some(SuiteRun {
            results: Results::Junit { tests },
            ..
        }) => Some(tests),
        _ => None,
    });
    let rows = rows(&tests);
    let counts: [Option<Counts>; 3] = std::array::from_fn(|i| tests[i].map(|t| Counts::of(t)));
    let suites: Vec<&SuiteRun> = sides.iter().filter_map(|s| s.suite.as_ref()).collect();
    if suites.len() == 3 {
        let exits: Vec<i32> = suites.iter().map(|s| s.exit).collect();
        if exits.iter().any(|e| *e != exits[0]) {
            fail(
                FailureClass::Results,
                format!(
                    "exit status of the quick suite: A {}, B {}, reference {}",
                    exits[0], exits[1], exits[2]
                ),
            );
        }
        compare_results(sides, &rows, &counts, &mut fail);
    }
    for s in shared {
        fail(
            FailureClass::Shared,
            format!(
                "`{}` is in both environments (A {}, B {})",
                s.value, s.a, s.b
            ),
        );
    }
    failures.sort_by_key(|f| f.class);
    Comparison {
        passed: failures.is_empty(),
        failures,
        rows,
        counts,
    }
}

fn who(s: &Side) -> String {
    if s.label == "reference" {
        format!("reference ({})", s.run_id)
    } else {
        format!("env {} ({})", s.label, s.run_id)
    }
}

fn compare_results(
    sides: &[Side; 3],
    rows: &[Row],
    counts: &[Option<Counts>; 3],
    fail: &mut impl FnMut(FailureClass, String),
) {
    let contract = |s: &Side| match s.suite.as_ref().map(|r| &r.results) {
        Some(Results::Junit { .. }) => "JUnit results",
        Some(Results::Digest { .. }) => "no results file",
        Some(Results::Unreadable { .. }) | None => "an unreadable results file",
    };
    for s in sides {
        if let Some(SuiteRun {
            results: Results::Unreadable { reason },
            ..
        }) = &s.suite
        {
            fail(
                FailureClass::Results,
                format!("{}: the results file is unreadable: {reason}", who(s)),
            );
        }
    }
    let kinds: Vec<&str> = sides.iter().map(contract).collect();
    if kinds.iter().any(|k| *k != kinds[0]) {
        fail(
            FailureClass::Results,
            format!(
                "the sides left different kinds of results: A {}, B {}, reference {}",
                kinds[0], kinds[1], kinds[2]
            ),
        );
        return;
    }
    let digests: Vec<(&str, &[String])> = sides
        .iter()
        .filter_map(|s| match s.suite.as_ref().map(|r| &r.results) {
            Some(Results::Digest { sha256, lines }) => Some((sha256.as_str(), lines.as_slice())),
            _ => None,
        })
        .collect();
    if digests.len() == 3 && digests.iter().any(|d| d.0 != digests[0].0) {
        // Each environment against the reference: the lines that differ, then how to compare
        // per test instead.
        let mut shown = String::new();
        for (label, d) in [("A", &digests[0]), ("B", &digests[1])] {
            let lines = super::diff::differing_lines(digests[2].1, d.1);
            if d.0 != digests[2].0 && !lines.is_empty() {
                let _ = write!(
                    shown,
                    "\n  {label} against the reference (- reference, + {label}):"
                );
                for l in lines {
                    let _ = write!(shown, "\n    {l}");
                }
            }
        }
        fail(
            FailureClass::Results,
            format!(
                "normalised output differs (no results file, so the output digest is compared): A {}, B {}, reference {}{shown}\n  \
                 for per-test results, have the quick suite write JUnit XML to ${} (pytest: `--junitxml=${}`)",
                short(digests[0].0),
                short(digests[1].0),
                short(digests[2].0),
                super::RESULTS_ENV,
                super::RESULTS_ENV,
            ),
        );
    }
    let cell = |o: Option<TestOutcome>| o.map_or("missing", TestOutcome::as_str);
    for r in rows.iter().filter(|r| r.differs) {
        fail(
            FailureClass::Results,
            format!(
                "{}: A {}, B {}, reference {}",
                r.test,
                cell(r.outcomes[0]),
                cell(r.outcomes[1]),
                cell(r.outcomes[2])
            ),
        );
    }
    if let [Some(a), Some(b), Some(r)] = counts
        && (a != b || a != r)
    {
        fail(FailureClass::Counts, format!("A {a}; B {b}; reference {r}"));
    }
}

pub(super) fn short(d: &str) -> &str {
    d.get(..12).unwrap_or(d)
}

fn rows(tests: &[Option<&Vec<TestCase>>; 3]) -> Vec<Row> {
    if tests.iter().all(Option::is_none) {
        return Vec::new();
    }
    // Report order of the first side that has the test; names first seen later go after.
    let mut order: Vec<&str> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut by_side: [BTreeMap<&str, TestOutcome>; 3] = Default::default();
    for (i, t) in tests.iter().enumerate() {
        for c in t.iter().flat_map(|v| v.iter()) {
            by_side[i].insert(c.name.as_str(), c.outcome);
            if seen.insert(c.name.as_str()) {
                order.push(c.name.as_str());
            }
        }
    }
    order
        .into_iter()
        .map(|name| {
            let outcomes: [Option<TestOutcome>; 3] =
                std::array::from_fn(|i| by_side[i].get(name).copied());
            Row {
                test: name.to_string(),
                differs: outcomes.iter().any(|o| *o != outcomes[0]),
                outcomes,
            }
        })
        .collect()
}
