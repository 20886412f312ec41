//! The spec's JSON Schema (`cyclix spec schema`, generated from the key tables) and
//! `cyclix spec validate` judge every fixture the same way for the classes a schema can
//! express, at the same key path (issue 18, item 3): unknown keys, missing required keys and
//! values of the wrong JSON type. Excluded at a path, on both sides: what only the YAML text
//! shows (a YAML 1.1 reading such as an unquoted `no`, the spelling of a number, duplicate
//! keys); the semantic rules are `spec validate`'s alone. A fixture no YAML reader takes
//! (tabs, an alias bomb, a tag) must be refused by `spec validate` too.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{cyclix, text};

/// One finding: key path in cyclix's spelling (`agent.env[1]`) and its class.
type Finding = (String, &'static str);

/// `/agent/env/1` as `agent.env[1]`.
fn key_path(pointer: &str) -> String {
    let mut out = String::new();
    for seg in pointer.split('/').skip(1) {
        let seg = seg.replace("~1", "/").replace("~0", "~");
        if seg.parse::<usize>().is_ok() {
            out.push_str(&format!("[{seg}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    out
}

fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// The value at cyclix key path `path` (`agent.env[1]`) of `doc`.
fn at<'a>(doc: &'a Value, path: &str) -> &'a Value {
    let mut v = doc;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (key, idx) = part
            .split_once('[')
            .map_or((part, None), |(k, i)| (k, Some(i)));
        v = &v[key];
        for i in idx.into_iter().flat_map(|i| i.split('[')) {
            v = &v[i
                .trim_end_matches(']')
                .parse::<usize>()
                .unwrap_or(usize::MAX)];
        }
    }
    v
}

/// What the schema says about `doc`.
fn schema_findings(validator: &jsonschema::Validator, doc: &Value) -> Vec<Finding> {
    use jsonschema::error::ValidationErrorKind as K;
    let mut out = Vec::new();
    for e in validator.iter_errors(doc) {
        let at = key_path(e.instance_path().as_str());
        match e.kind() {
            K::AdditionalProperties { unexpected } => {
                out.extend(unexpected.iter().map(|u| (child(&at, u), "unknown")));
            }
            K::Required { property } => {
                out.push((child(&at, property.as_str().unwrap_or_default()), "missing"));
            }
            K::Type { .. } => out.push((at, "type")),
            other => {
                panic!("a schema finding of a class the test does not know: {other:?} at {at}")
            }
        }
    }
    out
}

/// What `spec validate --json` says about the file: the comparable findings, and the paths
/// whose findings a schema cannot express.
fn cyclix_findings(diagnostics: &[Value], doc: &Value) -> (Vec<Finding>, BTreeSet<String>) {
    let mut out = Vec::new();
    let mut excluded = BTreeSet::new();
    for d in diagnostics {
        let path = d["path"].as_str().unwrap_or_default().to_owned();
        let m = d["message"].as_str().unwrap_or_default();
        if m.contains("YAML 1.1 would read it as")
            || m.contains("is not written as a plain decimal")
            || m.starts_with("duplicate key")
        {
            excluded.insert(path);
        } else if m.starts_with("expected `true` or `false`, found `")
            && at(doc, &path).is_boolean()
        {
            // `yes`: a boolean to a YAML 1.1 reader, refused for its spelling.
            excluded.insert(path);
        } else if m.starts_with("unknown key") {
            out.push((path, "unknown"));
        } else if m.starts_with("missing required key") {
            out.push((path, "missing"));
        } else if m.starts_with("expected ") {
            out.push((path, "type"));
        }
    }
    (out, excluded)
}

#[test]
fn the_schema_and_spec_validate_judge_every_fixture_alike() {
    let o = cyclix(&["spec", "schema"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let schema: Value = serde_json::from_slice(&o.stdout).expect("schema JSON");
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/spec");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let (mut compared, mut findings, mut unreadable) = (0, 0, 0);
    let mut report = Vec::new();
    for f in &files {
        let rel = format!(
            "tests/fixtures/spec/{}",
            f.file_name().expect("name").to_string_lossy()
        );
        let o = cyclix(&["spec", "validate", "--json", &rel]);
        let out: Value = serde_json::from_slice(&o.stdout).expect("validate JSON");
        let diagnostics = out["diagnostics"].as_array().cloned().unwrap_or_default();
        let yaml = std::fs::read_to_string(f).unwrap_or_default();
        let options = serde_saphyr::options! {
            duplicate_keys: serde_saphyr::DuplicateKeyPolicy::FirstWins,
        };
        let doc = serde_saphyr::from_str_with_options::<Value>(&yaml, options);
        let Some(doc) = doc.ok().filter(|_| cyclix::spec::yaml_readable(&yaml)) else {
            // Refused as text before any key is looked at (tabs, CRLF, bidi, tags, aliases).
            unreadable += 1;
            assert_eq!(
                o.status.code(),
                Some(1),
                "{rel}: refused as YAML, yet cyclix took it"
            );
            continue;
        };
        let (mine, excluded) = cyclix_findings(&diagnostics, &doc);
        let keep = |v: Vec<Finding>| -> BTreeSet<Finding> {
            v.into_iter()
                .filter(|(p, _)| !excluded.contains(p))
                .collect()
        };
        let theirs = keep(schema_findings(&validator, &doc));
        let mine = keep(mine);
        findings += mine.len();
        compared += 1;
        if mine != theirs {
            report.push(format!(
                "{rel}:\n  spec validate only: {:?}\n  schema only: {:?}",
                mine.difference(&theirs).collect::<Vec<_>>(),
                theirs.difference(&mine).collect::<Vec<_>>()
            ));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
    assert!(
        compared >= 6 && findings >= 5,
        "compared {compared} fixtures, {findings} findings"
    );
    assert!(unreadable >= 1, "the YAML-level fixtures were not seen");
}

#[test]
fn the_comparison_sees_a_planted_difference() {
    // Positive control: a schema that allows one more key disagrees with `spec validate`
    // on bad-keys.yaml, and the finding sets say where.
    let o = cyclix(&["spec", "schema"]);
    let mut schema: Value = serde_json::from_slice(&o.stdout).expect("schema JSON");
    schema["properties"]["netwrok"] = serde_json::json!({ "type": "string" });
    let validator = jsonschema::validator_for(&schema).expect("schema");
    let yaml = "tenant: a\nnetwrok: open\n";
    let doc: Value = serde_saphyr::from_str(yaml).expect("yaml");
    let theirs: BTreeSet<Finding> = schema_findings(&validator, &doc).into_iter().collect();
    assert!(
        !theirs.contains(&("netwrok".to_owned(), "unknown")),
        "{theirs:?}"
    );
    assert!(
        theirs.contains(&("repo".to_owned(), "missing")),
        "{theirs:?}"
    );
    assert_eq!(key_path("/agent/env/1"), "agent.env[1]");
    assert_eq!(key_path(""), "");
}
