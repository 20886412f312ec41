//! `run/` has floors (issue 30): its files form no import circle, and no file imports one on
//! a higher floor. Floor 1 is the run's state, its record and the adapters; floor 2 the
//! phases (`run/phases/`); floor 3 the compositions that fold the phases' facts into a run
//! (`lifecycle`, `twin`, `pool`, `converge`). Read from the code's own paths (`crate::run::…`,
//! `super::…`, `self::…`), test code left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{Graph, circles, rust_files, without_tests};

/// The compositions, on floor 3.
const COMPOSITIONS: [&str; 4] = ["run::lifecycle", "run::twin", "run::pool", "run::converge"];

/// A file's floor by its module path.
pub fn floor(module: &str) -> u8 {
    let under = |m: &str| module == m || module.starts_with(&format!("{m}::"));
    if COMPOSITIONS.iter().any(|c| under(c)) {
        3
    } else if under("run::phases") {
        2
    } else {
        1
    }
}

/// The module path of `rel` below `src/` (`run/phases/agent.rs` → `run::phases::agent`).
fn module_of(rel: &str) -> String {
    rel.trim_end_matches(".rs").replace('/', "::")
}

/// `path` (`super::record::X`, `crate::run::seam`, `self::core::Y`) from module `at`, as the
/// absolute module path it names (`run::record::X`).
fn resolve(at: &str, path: &str) -> Vec<String> {
    let mut cur: Vec<String> = at.split("::").map(str::to_string).collect();
    let mut parts = path.split("::").peekable();
    match parts.peek().copied() {
        Some("crate") => {
            cur.clear();
            parts.next();
        }
        Some("self") => {
            parts.next();
        }
        _ => {
            while parts.peek() == Some(&"super") {
                cur.pop();
                parts.next();
            }
        }
    }
    cur.extend(parts.map(str::to_string));
    cur
}

/// The file-level import graph of `files` (module → code): an edge for every path that names
/// another file's module, ancestors and descendants left out (a module declares and re-exports
/// its children; they use its items).
pub fn edges(files: &BTreeMap<String, String>) -> Graph {
    let known: BTreeSet<&str> = files.keys().map(String::as_str).collect();
    let mut g = Graph::new();
    for (m, code) in files {
        let mut named: Vec<Vec<String>> = Vec::new();
        for (i, _) in code.match_indices("::") {
            // The whole path around this `::`, from its first segment.
            let start = code[..i]
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(0, |s| s + 1);
            let rest = &code[start..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let path = rest[..end].trim_end_matches(':');
            if ["crate::", "super::", "self::"]
                .iter()
                .any(|p| path.starts_with(p))
            {
                named.push(resolve(m, path));
                // `use super::{a, b::c}`: each item of the group.
                if rest[end..].starts_with('{') {
                    let group = &rest[end + 1..rest[end..].find('}').map_or(end, |c| end + c)];
                    for item in group.split(',') {
                        let item = item.trim().split([' ', ':']).next().unwrap_or_default();
                        if !item.is_empty() && item != "self" {
                            let mut p = resolve(m, path);
                            p.push(item.to_string());
                            named.push(p);
                        }
                    }
                }
            }
        }
        for full in named {
            let target = (1..=full.len())
                .rev()
                .map(|k| full[..k].join("::"))
                .find(|c| known.contains(c.as_str()));
            let Some(t) = target else { continue };
            let kin =
                t == *m || t.starts_with(&format!("{m}::")) || m.starts_with(&format!("{t}::"));
            if !kin {
                g.entry(m.clone()).or_default().insert(t);
            }
        }
    }
    g
}

/// What is wrong with the floors of `g`: every import of a file on a higher floor.
pub fn upward(g: &Graph) -> Vec<String> {
    let mut hits = Vec::new();
    for (m, deps) in g {
        for d in deps {
            if floor(d) > floor(m) {
                hits.push(format!(
                    "{m} (floor {}) imports {d} (floor {})",
                    floor(m),
                    floor(d)
                ));
            }
        }
    }
    hits
}

/// `run/`'s files (and `run.rs`), test code and comments left out, by module path.
fn run_sources() -> BTreeMap<String, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("run"), &mut files);
    files.push(src.join("run.rs"));
    files
        .into_iter()
        .filter(|f| {
            !f.components().any(|c| c.as_os_str() == "tests")
                && f.file_name().is_none_or(|n| n != "tests.rs")
        })
        .map(|f| {
            let rel = f
                .strip_prefix(&src)
                .expect("below src")
                .display()
                .to_string();
            let text = std::fs::read_to_string(&f).expect("read");
            let code: String = without_tests(&text)
                .lines()
                .map(|l| l.split("//").next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n");
            (module_of(&rel), code)
        })
        .collect()
}

#[test]
fn run_has_floors_and_its_files_form_no_circle() {
    let g = edges(&run_sources());
    assert!(g.len() >= 20, "the graph looks empty: {g:?}");
    let mut hits = upward(&g);
    hits.extend(
        circles(&g)
            .into_iter()
            .map(|c| format!("file-level circle: {c}")),
    );
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

#[test]
fn the_floor_guard_sees_a_planted_upward_import_and_a_circle() {
    let files: BTreeMap<String, String> = [
        ("run::state", "use super::record::RunRecord;"),
        ("run::record", "pub struct RunRecord;"),
        // A phase reaching up into a composition, and two phases importing each other.
        (
            "run::phases::agent",
            "use super::super::lifecycle::Recorder; use super::gate::x;",
        ),
        (
            "run::phases::gate",
            "use crate::run::phases::agent::{y, z};",
        ),
        ("run::lifecycle", "use super::phases::{agent, gate};"),
    ]
    .into_iter()
    .map(|(m, c)| (m.to_string(), c.to_string()))
    .collect();
    let g = edges(&files);
    assert_eq!(
        upward(&g),
        ["run::phases::agent (floor 2) imports run::lifecycle (floor 3)"]
    );
    assert!(
        circles(&g)
            .iter()
            .any(|c| c == "run::phases::agent -> run::phases::gate -> run::phases::agent"),
        "{:?}",
        circles(&g)
    );
    assert!(
        g["run::state"].contains("run::record"),
        "a downward import is an edge: {g:?}"
    );
}

/// Phases return facts: no file of `run/phases/` names the run's record (they take narrow
/// views and fill reports of their own; the compositions fold those into the record).
#[test]
fn no_phase_sees_the_run_record() {
    let files = run_sources();
    let seen: Vec<&String> = files
        .iter()
        .filter(|(m, code)| floor(m) == 2 && code.contains("RunRecord"))
        .map(|(m, _)| m)
        .collect();
    assert!(files.keys().any(|m| floor(m) == 2), "no phases found");
    assert!(seen.is_empty(), "phases that name RunRecord: {seen:?}");
}
