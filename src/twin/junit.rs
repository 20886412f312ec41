//! `JUnit` XML → per-test results, the contract of `cyclix twin`'s quick suite: the suite may write
//! a `JUnit` XML report to the path in `$CYCLIX_RESULTS` (pytest `--junitxml`, cargo-nextest's
//! `JUnit` output, jest-junit, Maven Surefire, Go's gotestsum all write this format).
//!
//! What is read: every `<testcase>` under a `<testsuites>` or `<testsuite>` root, named
//! `CLASSNAME::NAME` (just `NAME` without a class name); its outcome is `error` with an
//! `<error>` child, else `failed` with a `<failure>` child, else `skipped` with a `<skipped>`
//! child, else `passed`. A name seen twice gets ` #2`, ` #3`, … in document order. Timings and
//! captured output are ignored (they differ between runs without a difference in results).
//! Pure: the caller reads the file (with its size cap).

use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};

use super::{TestCase, TestOutcome};

/// The most test cases read from one report; more is refused rather than held in memory.
pub const MAX_CASES: usize = 200_000;

/// Parses a `JUnit` XML report.
///
/// # Errors
/// A message naming the byte offset when the XML is malformed, the root element is not
/// `<testsuites>`/`<testsuite>`, a `<testcase>` has no `name`, or there are more than
/// [`MAX_CASES`] cases.
pub fn parse(xml: &str) -> Result<Vec<TestCase>, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    reader.config_mut().trim_text(true);
    let mut cases: Vec<TestCase> = Vec::new();
    let mut seen: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    let mut current: Option<(String, TestOutcome)> = None;
    let mut root_seen = false;
    loop {
        let at = reader.buffer_position();
        let event = reader
            .read_event()
            .map_err(|e| format!("malformed XML near byte {at}: {e}"))?;
        let (start, empty) = match &event {
            Event::Start(e) => (Some(e), false),
            Event::Empty(e) => (Some(e), true),
            Event::End(e) if e.local_name().into_inner() == "testcase" => {
                if let Some((name, outcome)) = current.take() {
                    push(&mut cases, &mut seen, name, outcome)?;
                }
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let Some(e) = start else { continue };
        let name = e.local_name();
        let tag: &str = name.into_inner();
        if !root_seen {
            if !matches!(tag, "testsuites" | "testsuite") {
                return Err(format!(
                    "the root element is <{tag}>, not <testsuites> or <testsuite>: not a JUnit XML report"
                ));
            }
            root_seen = true;
            continue;
        }
        match tag {
            "testcase" => {
                let name = case_name(e, at)?;
                if empty {
                    push(&mut cases, &mut seen, name, TestOutcome::Passed)?;
                } else {
                    current = Some((name, TestOutcome::Passed));
                }
            }
            "error" | "failure" | "skipped" => {
                if let Some((_, outcome)) = current.as_mut() {
                    let found = match tag {
                        "error" => TestOutcome::Error,
                        "failure" => TestOutcome::Failed,
                        _ => TestOutcome::Skipped,
                    };
                    // error > failed > skipped > passed
                    if rank(found) > rank(*outcome) {
                        *outcome = found;
                    }
                }
            }
            _ => {}
        }
    }
    if !root_seen {
        return Err("no <testsuites> or <testsuite> element: not a JUnit XML report".into());
    }
    Ok(cases)
}

fn rank(o: TestOutcome) -> u8 {
    match o {
        TestOutcome::Passed => 0,
        TestOutcome::Skipped => 1,
        TestOutcome::Failed => 2,
        TestOutcome::Error => 3,
    }
}

fn attr(e: &BytesStart<'_>, key: &str, at: u64) -> Result<Option<String>, String> {
    let a = e
        .try_get_attribute(key)
        .map_err(|err| format!("malformed attribute near byte {at}: {err}"))?;
    a.map(|a| {
        a.normalized_value(XmlVersion::Implicit1_0)
            .map(std::borrow::Cow::into_owned)
            .map_err(|err| format!("bad `{key}` value near byte {at}: {err}"))
    })
    .transpose()
}

fn case_name(e: &BytesStart<'_>, at: u64) -> Result<String, String> {
    let Some(name) = attr(e, "name", at)? else {
        return Err(format!("a <testcase> near byte {at} has no `name`"));
    };
    Ok(match attr(e, "classname", at)? {
        Some(class) if !class.is_empty() => format!("{class}::{name}"),
        _ => name,
    })
}

fn push(
    cases: &mut Vec<TestCase>,
    seen: &mut std::collections::BTreeMap<String, usize>,
    name: String,
    outcome: TestOutcome,
) -> Result<(), String> {
    if cases.len() >= MAX_CASES {
        return Err(format!("more than {MAX_CASES} test cases"));
    }
    let n = seen.entry(name.clone()).or_insert(0);
    *n += 1;
    let name = if *n == 1 {
        name
    } else {
        format!("{name} #{n}")
    };
    cases.push(TestCase { name, outcome });
    Ok(())
}

#[cfg(test)]
mod tests;
