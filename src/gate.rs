//! The gate's verdict when `gate.protected` is set, the pure half (docs/gate.md): the base's
//! tests counted one by one on the base tree and on the agent's tree (both with the base's
//! protected paths), and what the comparison says. No I/O (guarded by
//! tests/integration/architecture.rs).
//!
//! A test that ran at base (passed, failed or error) must run on the agent's tree too: one
//! missing (deleted, deselected, never collected) or skipped (`<skipped>`: a skip mark, an
//! xfail) there is the agent weakening the gate, whatever the exit status says. So is an exit
//! status of success while the results hold a failure or an error (a runner made to exit 0).
//! A test skipped at base that runs now is fine; a test only the agent's tree has is listed.
//!
//! What this cannot see: a test made trivially true through the code under test (the code
//! returns what the test expects for that input only), or code under test that rewrites the
//! runner's own report from inside its process. Review catches those; docs/gate.md says so.

use serde::{Deserialize, Serialize};

use crate::twin::{Counts, TestCase, TestOutcome};

/// Most names listed in a record's `weakened` and `new_tests` (the count is always whole).
pub const MAX_LISTED: usize = 200;

/// What the gate's run on one tree left to count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Results {
    /// The `JUnit` report's test cases.
    Tests(Vec<TestCase>),
    /// No report at `$CYCLIX_RESULTS`.
    Missing,
    /// A report that could not be read (why).
    Unreadable(String),
}

/// What became of a test that ran at base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Now {
    /// Not in the agent's tree's results (deleted, deselected, never collected, or no
    /// results at all).
    Missing,
    /// Skipped or xfailed there.
    Skipped,
    /// Another test took its name there (the report holds the name more often than the
    /// base's did): which one ran is not knowable from the report.
    Shadowed,
}

/// One test the agent's tree no longer runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Weakened {
    /// `CLASSNAME::NAME`.
    pub test: String,
    /// How it ended at base.
    pub at_base: TestOutcome,
    /// What became of it.
    pub now: Now,
}

/// The gate's verdict on the agent's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Exit 0 and every test that ran at base ran again.
    Passed,
    /// The gate exited non-zero (the code does not pass the base's tests).
    Failed,
    /// The gate exited 0, but a test that ran at base did not run, or the results hold a
    /// failure or an error.
    Weakened,
}

/// The comparison of the two inventories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// The verdict.
    pub verdict: Verdict,
    /// Every test that ran at base and did not run on the agent's tree, in the base's order.
    pub weakened: Vec<Weakened>,
    /// The agent's tree's tests the base did not have, in report order.
    pub new_tests: Vec<String>,
    /// The exit status contradicts the results (`the gate exited 0 but its results hold …`).
    pub contradiction: Option<String>,
    /// The agent's tree's counts (`None`: no readable results).
    pub counts: Option<Counts>,
}

/// A test's name without the ` #N` the report reader adds to a repeated name
/// ([`crate::twin::junit`]).
fn stem(name: &str) -> &str {
    match name.rsplit_once(" #") {
        Some((s, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => s,
        _ => name,
    }
}

/// How often each name (its [`stem`]) occurs in `tests`.
fn occurrences(tests: &[TestCase]) -> std::collections::BTreeMap<&str, usize> {
    let mut m = std::collections::BTreeMap::new();
    for t in tests {
        *m.entry(stem(&t.name)).or_insert(0) += 1;
    }
    m
}

/// Whether `t` is a module that could not be collected at base (pytest reports it as an
/// `error` named by the module alone, `tests.test_divide`, with no `::`) and whose tests run on
/// the agent's tree (`tests.test_divide::test_x`, not skipped): the fix the run was asked for.
fn collected_now(t: &TestCase, now: &[TestCase]) -> bool {
    let prefix = format!("{}::", t.name);
    t.outcome == TestOutcome::Error
        && !t.name.contains("::")
        && now
            .iter()
            .any(|n| n.name.starts_with(&prefix) && ran(n.outcome))
}

/// Whether a test ended in a way that means it ran.
fn ran(o: TestOutcome) -> bool {
    !matches!(o, TestOutcome::Skipped)
}

/// Compares the base's inventory `base` with what the gate's run on the agent's tree left:
/// its exit status `exit` and its `results` (see the module doc).
#[must_use]
pub fn judge(base: &[TestCase], exit: i32, results: &Results) -> Judged {
    let empty = Vec::new();
    let now: &Vec<TestCase> = match results {
        Results::Tests(t) => t,
        Results::Missing | Results::Unreadable(_) => &empty,
    };
    let by_name: std::collections::BTreeMap<&str, TestOutcome> =
        now.iter().map(|t| (t.name.as_str(), t.outcome)).collect();
    let (base_seen, now_seen) = (occurrences(base), occurrences(now));
    let weakened: Vec<Weakened> = base
        .iter()
        .filter(|t| ran(t.outcome))
        .filter_map(|t| {
            let stem = stem(&t.name);
            let now = match by_name.get(t.name.as_str()) {
                _ if now_seen.get(stem) > base_seen.get(stem) => Now::Shadowed,
                None if collected_now(t, now) => return None,
                None => Now::Missing,
                Some(TestOutcome::Skipped) => Now::Skipped,
                Some(_) => return None,
            };
            Some(Weakened {
                test: t.name.clone(),
                at_base: t.outcome,
                now,
            })
        })
        .collect();
    let known: std::collections::BTreeSet<&str> = base.iter().map(|t| t.name.as_str()).collect();
    let new_tests: Vec<String> = now
        .iter()
        .filter(|t| !known.contains(t.name.as_str()))
        .map(|t| t.name.clone())
        .collect();
    let counts = matches!(results, Results::Tests(_)).then(|| Counts::of(now));
    let contradiction = counts
        .filter(|c| exit == 0 && c.failed + c.error > 0)
        .map(|c| {
            format!(
                "the gate exited 0 but its results hold {} failed and {} error",
                c.failed, c.error
            )
        });
    let verdict = if exit != 0 {
        Verdict::Failed
    } else if !weakened.is_empty() || contradiction.is_some() {
        Verdict::Weakened
    } else {
        Verdict::Passed
    };
    Judged {
        verdict,
        weakened,
        new_tests,
        contradiction,
        counts,
    }
}

/// Why a base inventory cannot be judged against: `None` when it can. The gate's run on the
/// base tree must leave a readable `JUnit` report (`gate.command` writes it to
/// `$CYCLIX_RESULTS`); an empty one is fine (nothing to weaken).
#[must_use]
pub fn base_unusable(results: &Results) -> Option<String> {
    match results {
        Results::Tests(_) => None,
        Results::Missing => Some(
            "the gate wrote no per-test results on the base tree, so the base's tests cannot be \
             counted: make `gate.command` write a JUnit XML report to the path in \
             $CYCLIX_RESULTS (for pytest, the command in docs/gate.md)"
                .to_string(),
        ),
        Results::Unreadable(why) => Some(format!(
            "the gate's per-test results on the base tree could not be read ({why}): \
             `gate.protected` counts the base's tests from a JUnit XML report at \
             $CYCLIX_RESULTS (docs/gate.md)"
        )),
    }
}

/// The one-line account of `j` for the summary: `3 tests at base (1 failed), on the agent's
/// tree 3 (0 failed, 0 skipped); 1 new` (`1 test at base` for one).
#[must_use]
pub fn describe(base: &Counts, j: &Judged) -> String {
    use std::fmt::Write as _;
    let total = |c: &Counts| c.passed + c.failed + c.skipped + c.error;
    let bad = |c: &Counts| c.failed + c.error;
    let n = total(base);
    let mut s = format!(
        "{n} test{} at base ({} failed)",
        if n == 1 { "" } else { "s" },
        bad(base)
    );
    let _ = match &j.counts {
        Some(c) => write!(
            s,
            ", on the agent's tree {} ({} failed, {} skipped)",
            total(c),
            bad(c),
            c.skipped
        ),
        None => write!(s, ", on the agent's tree no results"),
    };
    if !j.new_tests.is_empty() {
        let _ = write!(s, "; {} new", j.new_tests.len());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, outcome: TestOutcome) -> TestCase {
        TestCase {
            name: name.into(),
            outcome,
        }
    }

    fn base() -> Vec<TestCase> {
        vec![
            t("t::add", TestOutcome::Passed),
            t("t::sub", TestOutcome::Failed),
            t("t::slow", TestOutcome::Skipped),
            t("t::broken", TestOutcome::Error),
        ]
    }

    #[test]
    fn an_honest_fix_passes_and_a_new_test_is_listed() {
        let now = Results::Tests(vec![
            t("t::add", TestOutcome::Passed),
            t("t::sub", TestOutcome::Passed),
            t("t::slow", TestOutcome::Passed),
            t("t::broken", TestOutcome::Passed),
            t("t::more", TestOutcome::Passed),
        ]);
        let j = judge(&base(), 0, &now);
        assert_eq!(j.verdict, Verdict::Passed);
        assert!(j.weakened.is_empty());
        assert_eq!(j.new_tests, ["t::more"]);
        assert_eq!(
            describe(&Counts::of(&base()), &j),
            "4 tests at base (2 failed), on the agent's tree 5 (0 failed, 0 skipped); 1 new"
        );
    }

    #[test]
    fn one_test_at_base_is_one_test() {
        let one = vec![t("t::only", TestOutcome::Passed)];
        let j = judge(&one, 0, &Results::Tests(one.clone()));
        assert_eq!(
            describe(&Counts::of(&one), &j),
            "1 test at base (0 failed), on the agent's tree 1 (0 failed, 0 skipped)"
        );
    }

    #[test]
    fn a_test_that_ran_at_base_and_is_missing_or_skipped_now_is_weakening() {
        let now = Results::Tests(vec![
            t("t::add", TestOutcome::Passed),
            t("t::sub", TestOutcome::Skipped),
        ]);
        let j = judge(&base(), 0, &now);
        assert_eq!(j.verdict, Verdict::Weakened);
        assert_eq!(
            j.weakened,
            [
                Weakened {
                    test: "t::sub".into(),
                    at_base: TestOutcome::Failed,
                    now: Now::Skipped
                },
                Weakened {
                    test: "t::broken".into(),
                    at_base: TestOutcome::Error,
                    now: Now::Missing
                },
            ],
            "a test skipped at base (t::slow) may stay away"
        );
    }

    #[test]
    fn a_test_that_takes_a_base_tests_name_shadows_it() {
        // The agent's own `t::sub` came first in the report; the base's became `t::sub #2`.
        let now = Results::Tests(vec![
            t("t::add", TestOutcome::Passed),
            t("t::sub", TestOutcome::Passed),
            t("t::sub #2", TestOutcome::Skipped),
            t("t::broken", TestOutcome::Passed),
        ]);
        let j = judge(&base(), 0, &now);
        assert_eq!(j.verdict, Verdict::Weakened);
        assert_eq!(
            j.weakened,
            [Weakened {
                test: "t::sub".into(),
                at_base: TestOutcome::Failed,
                now: Now::Shadowed
            }]
        );
        // A name repeated at base as often as now is no shadow.
        let twice = vec![
            t("p::x", TestOutcome::Failed),
            t("p::x #2", TestOutcome::Passed),
        ];
        let same = Results::Tests(vec![
            t("p::x", TestOutcome::Passed),
            t("p::x #2", TestOutcome::Passed),
        ]);
        assert_eq!(judge(&twice, 0, &same).verdict, Verdict::Passed);
        assert_eq!(stem("a #b"), "a #b");
        assert_eq!(stem("a #12"), "a");
    }

    #[test]
    fn a_module_that_could_not_be_collected_at_base_is_satisfied_by_its_tests_running_now() {
        let base = vec![
            t("tests.test_divide", TestOutcome::Error),
            t("tests.test_calc::test_add", TestOutcome::Passed),
        ];
        let fixed = Results::Tests(vec![
            t("tests.test_divide::test_div", TestOutcome::Passed),
            t("tests.test_calc::test_add", TestOutcome::Passed),
        ]);
        let j = judge(&base, 0, &fixed);
        assert_eq!(j.verdict, Verdict::Passed, "{j:?}");
        assert_eq!(j.new_tests, ["tests.test_divide::test_div"]);
        // Its tests skipped, or the module gone: not satisfied.
        let skipped = Results::Tests(vec![
            t("tests.test_divide::test_div", TestOutcome::Skipped),
            t("tests.test_calc::test_add", TestOutcome::Passed),
        ]);
        assert_eq!(judge(&base, 0, &skipped).verdict, Verdict::Weakened);
        let gone = Results::Tests(vec![t("tests.test_calc::test_add", TestOutcome::Passed)]);
        assert_eq!(judge(&base, 0, &gone).verdict, Verdict::Weakened);
    }

    #[test]
    fn no_results_with_exit_zero_is_weakening_and_a_failing_exit_is_a_failure() {
        let j = judge(&base(), 0, &Results::Missing);
        assert_eq!(j.verdict, Verdict::Weakened);
        assert_eq!(j.weakened.len(), 3);
        assert_eq!(j.counts, None);
        let j = judge(&base(), 1, &Results::Unreadable("bad".into()));
        assert_eq!(j.verdict, Verdict::Failed, "an honest crash fails the gate");
        assert_eq!(j.weakened.len(), 3, "and still lists what did not run");
    }

    #[test]
    fn exit_zero_with_a_failure_in_the_results_is_weakening() {
        let now = Results::Tests(vec![
            t("t::add", TestOutcome::Passed),
            t("t::sub", TestOutcome::Failed),
            t("t::slow", TestOutcome::Passed),
            t("t::broken", TestOutcome::Passed),
        ]);
        let j = judge(&base(), 0, &now);
        assert_eq!(j.verdict, Verdict::Weakened);
        assert_eq!(
            j.contradiction.as_deref(),
            Some("the gate exited 0 but its results hold 1 failed and 0 error")
        );
        assert_eq!(judge(&base(), 1, &now).verdict, Verdict::Failed);
    }

    #[test]
    fn a_base_without_results_cannot_be_judged_against() {
        assert!(base_unusable(&Results::Tests(Vec::new())).is_none());
        assert!(base_unusable(&Results::Missing).is_some_and(|w| {
            w.contains("$CYCLIX_RESULTS (for pytest, the command in docs/gate.md)")
        }));
        assert!(base_unusable(&Results::Unreadable("x".into())).is_some_and(|w| w.contains("(x)")));
    }
}
