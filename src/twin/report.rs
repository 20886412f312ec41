//! The twin's report: the sides, the shared names and the comparison, as JSON (schema
//! [`SCHEMA`]) and as text. Pure.

use std::fmt::Write as _;

use serde::Serialize;

use super::comparison::short;
use super::{Comparison, Counts, Results, SCHEMA, Shared, Side, SuiteRun, TestOutcome, judge};

/// The whole report (`--json`: schema [`SCHEMA`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The tenant.
    pub tenant: String,
    /// The commit both environments and the reference were built from (full sha).
    pub commit: String,
    /// The quick suite's argv.
    pub quick: Vec<String>,
    /// A, B and the reference.
    pub sides: [Side; 3],
    /// How many identity values of plan A were compared with plan B.
    pub names_compared: usize,
    /// Values both plans hold (each a failure).
    pub shared: Vec<Shared>,
    /// How long both environments were up at the same time, in ms.
    pub overlap_ms: Option<u128>,
    /// The comparison of the sides, with the verdict.
    pub verdict: Comparison,
}

impl Report {
    /// Builds the report: judges the sides and the shared names.
    #[must_use]
    pub fn new(
        tenant: String,
        commit: String,
        quick: Vec<String>,
        sides: [Side; 3],
        names: (usize, Vec<Shared>),
    ) -> Self {
        let verdict = judge(&sides, &names.1);
        let overlap_ms = match (&sides[0], &sides[1]) {
            (
                Side {
                    up_ms: Some(ua),
                    down_ms: Some(da),
                    ..
                },
                Side {
                    up_ms: Some(ub),
                    down_ms: Some(db),
                    ..
                },
            ) => (*da).min(*db).checked_sub((*ua).max(*ub)),
            _ => None,
        };
        Report {
            schema: SCHEMA,
            tenant,
            commit,
            quick,
            sides,
            names_compared: names.0,
            shared: names.1,
            overlap_ms,
            verdict,
        }
    }

    /// The human report: the sides side by side, the per-test table (differing rows marked
    /// `*` and `<- differs`), the failures and a verdict line.
    #[must_use]
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "cyclix twin {} @ {} — quick suite: {}",
            self.tenant,
            self.commit.get(..12).unwrap_or(&self.commit),
            self.quick.join(" ")
        );
        let contract = match self.sides.iter().find_map(|x| x.suite.as_ref()) {
            Some(SuiteRun {
                results: Results::Junit { .. },
                ..
            }) => "per-test results (JUnit XML at $CYCLIX_RESULTS)".to_string(),
            Some(SuiteRun {
                results: Results::Digest { .. },
                ..
            }) => "no results file: exit status + normalised output digest compared".to_string(),
            _ => "-".to_string(),
        };
        let _ = writeln!(s, "compared: {contract}");
        self.sides_text(&mut s);
        if let Some(o) = self.overlap_ms {
            let _ = writeln!(s, "both environments were up at the same time for {o} ms");
        }
        if !self.verdict.rows.is_empty() {
            let tw = self
                .verdict
                .rows
                .iter()
                .map(|r| r.test.chars().count())
                .max()
                .unwrap_or(4)
                .max(4);
            let _ = writeln!(
                s,
                "\n  {:<tw$}  {:<8} {:<8} reference",
                "test", "env A", "env B"
            );
            for r in &self.verdict.rows {
                let c = |i: usize| r.outcomes[i].map_or("missing", TestOutcome::as_str);
                let row = format!(
                    "{} {:<tw$}  {:<8} {:<8} {:<9}{}",
                    if r.differs { "*" } else { " " },
                    r.test,
                    c(0),
                    c(1),
                    c(2),
                    if r.differs { "  <- differs" } else { "" }
                );
                let _ = writeln!(s, "{}", row.trim_end());
            }
        }
        let _ = writeln!(
            s,
            "\nshared names: {} ({} identity values of env A compared with env B)",
            if self.shared.is_empty() {
                "none".to_string()
            } else {
                self.shared.len().to_string()
            },
            self.names_compared
        );
        for f in &self.verdict.failures {
            let _ = writeln!(s, "  [{}] {}", f.class.as_str(), f.detail);
        }
        let _ = writeln!(s, "{}", self.verdict_line());
        s
    }

    /// The sides, one column each.
    fn sides_text(&self, s: &mut String) {
        // Each column as wide as its longest cell (run ids and network names are long).
        let widths: Vec<usize> = self
            .sides
            .iter()
            .map(|x| {
                [
                    x.run_id.len(),
                    x.networks.join(",").len(),
                    x.pod.as_ref().map_or(0, String::len),
                    12,
                ]
                .into_iter()
                .max()
                .unwrap_or(12)
            })
            .collect();
        let mut line = |k: &str, f: &dyn Fn(&Side) -> String| {
            let _ = write!(s, "{k:<22}");
            for (side, w) in self.sides.iter().zip(&widths) {
                let _ = write!(s, "  {:<w$}", f(side));
            }
            s.truncate(s.trim_end().len());
            s.push('\n');
        };
        line("", &|x| {
            if x.label == "reference" {
                "reference".into()
            } else {
                format!("env {}", x.label)
            }
        });
        line("run", &|x| x.run_id.clone());
        line("network", &|x| x.networks.join(","));
        line("subnet", &|x| {
            x.subnet.clone().unwrap_or_else(|| "-".into())
        });
        line("pod", &|x| x.pod.clone().unwrap_or_else(|| "-".into()));
        line("probes", &|x| {
            if x.label == "reference" {
                "- (no network)".into()
            } else if x.probe_failures.is_empty() {
                format!("{} passed", x.probes_passed)
            } else {
                format!("{} FAILED", x.probe_failures.len())
            }
        });
        line("quick suite exit", &|x| {
            x.suite
                .as_ref()
                .map_or_else(|| "did not run".into(), |r| r.exit.to_string())
        });
        line("passed/failed/skip/err", &|x| match &x.suite {
            Some(SuiteRun {
                results: Results::Junit { tests },
                ..
            }) => {
                let c = Counts::of(tests);
                format!("{}/{}/{}/{}", c.passed, c.failed, c.skipped, c.error)
            }
            Some(SuiteRun {
                results: Results::Digest { sha256, .. },
                ..
            }) => format!("digest {}", short(sha256)),
            Some(SuiteRun {
                results: Results::Unreadable { .. },
                ..
            }) => "unreadable results".into(),
            None => "-".into(),
        });
        line("leftovers", &|x| {
            if x.leftovers.is_empty() {
                "none".into()
            } else {
                format!("{}", x.leftovers.len())
            }
        });
    }

    /// `verdict: PASS …` or `verdict: FAIL …`.
    #[must_use]
    pub fn verdict_line(&self) -> String {
        if self.verdict.passed {
            let what = match self.verdict.counts[0] {
                Some(c) => format!("{} tests, {c}", self.verdict.rows.len()),
                None => "the same exit status and output".into(),
            };
            format!(
                "verdict: PASS — env A, env B and the reference agree ({what}); no shared names; nothing left"
            )
        } else {
            let mut classes: Vec<&str> = self
                .verdict
                .failures
                .iter()
                .map(|f| f.class.as_str())
                .collect();
            classes.dedup();
            format!(
                "verdict: FAIL — {} problem(s): {}",
                self.verdict.failures.len(),
                classes.join(", ")
            )
        }
    }
}
