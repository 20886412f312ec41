//! Tests of the whole pipeline (`parse`: text checks, YAML, key tables, sections, rules) on
//! small specs, by topic. The helpers here build a valid spec and read the diagnostics.

use std::fmt::Write as _;

use super::{Diagnostic, Image, MAX_SPEC_BYTES, Spec, SpecContext, SpecError, parse};

mod build;
mod credentials;
mod document;
mod keys;
mod mounts;
mod presets;
mod sections;
mod setup;
mod typing;
mod values;

const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A valid spec; tests replace one line or append lines (from line 13 on).
fn base() -> String {
    format!(
        "tenant: acme
repo:
  path: /home/u/proj
  base: main
task:
  text: do it
agent:
  image: ghcr.io/acme/agent@sha256:{DIGEST}
  command: [agent, --run]
gate:
  image: ghcr.io/acme/gate@sha256:{DIGEST}
  command: [make, test]
"
    )
}

fn ctx() -> SpecContext {
    SpecContext {
        file: "t.yaml".into(),
        home: "/home/u".into(),
        runtime_dir: "/run/user/1000".into(),
    }
}

/// `base()` with the first occurrence of `old` replaced by `new`.
fn with(old: &str, new: &str) -> String {
    let b = base();
    assert!(b.contains(old), "base has no `{old}`");
    b.replacen(old, new, 1)
}

/// `base()` plus extra lines (the first extra line is line 13).
fn plus(extra: &str) -> String {
    format!("{}{extra}", base())
}

fn ok(text: &str) -> Spec {
    match parse(text, &ctx()) {
        Ok(s) => s,
        Err(e) => panic!("expected a valid spec, got:\n{e}"),
    }
}

fn err(text: &str) -> SpecError {
    parse(text, &ctx()).expect_err("spec must be rejected")
}

/// The only diagnostic, as `(line, column, path, message)`.
fn one(text: &str) -> (usize, usize, String, String) {
    let e = err(text);
    assert_eq!(e.diagnostics.len(), 1, "expected one diagnostic, got:\n{e}");
    let d = &e.diagnostics[0];
    (
        d.line.unwrap_or(0),
        d.column.unwrap_or(0),
        d.path.clone(),
        d.message.clone(),
    )
}

fn d(line: usize, column: usize, path: &str, message: &str) -> (usize, usize, String, String) {
    (line, column, path.to_owned(), message.to_owned())
}

/// Every diagnostic as `(line, column, path, message)`.
fn all(text: &str) -> Vec<(usize, usize, String, String)> {
    err(text)
        .diagnostics
        .into_iter()
        .map(|x| {
            (
                x.line.unwrap_or(0),
                x.column.unwrap_or(0),
                x.path,
                x.message,
            )
        })
        .collect()
}
