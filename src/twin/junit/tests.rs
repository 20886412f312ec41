//! `junit`'s unit tests.

use super::*;

fn outcomes(xml: &str) -> Vec<(String, TestOutcome)> {
    parse(xml)
        .expect("valid report")
        .into_iter()
        .map(|c| (c.name, c.outcome))
        .collect()
}

#[test]
fn pytest_report_gives_one_result_per_case() {
    // What pytest 8 writes with --junitxml (trimmed).
    let xml = r#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4" time="0.031" timestamp="2026-11-30T14:00:00" hostname="cyclix-x-gate"><testcase classname="tests.test_calc" name="test_add" time="0.001" /><testcase classname="tests.test_calc" name="test_subtract" time="0.001"><failure message="assert 4 == 2">def test_subtract():
&gt;       assert subtract(3, 1) == 2</failure></testcase><testcase classname="tests.test_calc" name="test_later" time="0.000"><skipped type="pytest.skip" message="later">skip</skipped></testcase><testcase classname="tests.test_io" name="test_x[a&amp;b]" time="0.1"><error message="fixture">boom</error><system-out>noise</system-out></testcase></testsuite></testsuites>"#;
    assert_eq!(
        outcomes(xml),
        [
            ("tests.test_calc::test_add".into(), TestOutcome::Passed),
            ("tests.test_calc::test_subtract".into(), TestOutcome::Failed),
            ("tests.test_calc::test_later".into(), TestOutcome::Skipped),
            ("tests.test_io::test_x[a&b]".into(), TestOutcome::Error),
        ]
    );
}

#[test]
fn a_bare_testsuite_root_and_duplicate_names_work() {
    let xml = r#"<testsuite><testcase name="t"/><testcase name="t"><failure/></testcase><testcase classname="" name="u"></testcase></testsuite>"#;
    assert_eq!(
        outcomes(xml),
        [
            ("t".into(), TestOutcome::Passed),
            ("t #2".into(), TestOutcome::Failed),
            ("u".into(), TestOutcome::Passed),
        ]
    );
    assert_eq!(outcomes("<testsuites/>"), []);
}

#[test]
fn broken_or_foreign_documents_are_refused_with_a_position() {
    let e = parse("<testsuites><testcase name='a'></testsuites>").expect_err("mismatch");
    assert!(e.contains("malformed XML near byte"), "{e}");
    let e = parse("<html><body/></html>").expect_err("not junit");
    assert!(e.contains("root element is <html>"), "{e}");
    let e = parse("").expect_err("empty");
    assert!(e.contains("not a JUnit XML report"), "{e}");
    let e = parse("<testsuite><testcase classname='c'/></testsuite>").expect_err("no name");
    assert!(e.contains("has no `name`"), "{e}");
}
