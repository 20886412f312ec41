//! The JSON Schema of the spec, generated from the key tables (`KEYS` in each
//! `sections/*.rs`): the tables are the one source, so the schema cannot drift from what
//! `spec validate` accepts (issue 18, item 3). Pure.
//!
//! The schema expresses the closed key set of every mapping (`additionalProperties: false`),
//! the required keys and each value's JSON type. It does not express what only the YAML text
//! or the semantic rules can see (YAML 1.1 readings such as an unquoted `no`, the spelling of a
//! number, duplicate keys, control characters, names, pins, hosts, paths); `spec validate`
//! remains the judge, the schema is for editors (`yaml-language-server`).

use serde_json::{Map, Value, json};

use super::keys::{Key, Kind};
use super::sections::top;

/// The `$id` of the schema (a name, not a URL anything is fetched from).
pub const SCHEMA_ID: &str = "urn:cyclix:spec:1";

/// The file name `cyclix install` gives the schema in cyclix's data dir.
pub const SCHEMA_FILE: &str = "spec.schema.json";

/// The JSON Schema (draft 2020-12) of a tenant spec.
#[must_use]
pub fn json_schema() -> Value {
    let mut root = mapping(top::KEYS);
    if let Value::Object(o) = &mut root {
        let head = [
            (
                "$schema",
                json!("https://json-schema.org/draft/2020-12/schema"),
            ),
            ("$id", json!(SCHEMA_ID)),
            ("title", json!("cyclix tenant spec")),
            (
                "description",
                json!(
                    "A cyclix tenant spec (~/.config/cyclix/tenants/TENANT.yaml). Generated from cyclix's key tables; `cyclix spec validate` is the judge."
                ),
            ),
        ];
        let mut out = Map::new();
        for (k, v) in head {
            out.insert(k.to_owned(), v);
        }
        out.append(o);
        return Value::Object(out);
    }
    root
}

/// The schema as pretty JSON text with a final newline (what `cyclix spec schema` prints).
#[must_use]
pub fn json_schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&json_schema()).unwrap_or_default();
    s.push('\n');
    s
}

/// The schema of a mapping with the keys of `keys`.
fn mapping(keys: &'static [Key]) -> Value {
    let mut props = Map::new();
    for k in keys {
        let mut v = kind(k.kind);
        if let Value::Object(o) = &mut v {
            o.insert("description".to_owned(), json!(k.doc));
        }
        props.insert(k.name.to_owned(), v);
    }
    let required: Vec<&str> = keys.iter().filter(|k| k.required).map(|k| k.name).collect();
    let mut o = Map::new();
    o.insert("type".to_owned(), json!("object"));
    o.insert("properties".to_owned(), Value::Object(props));
    if !required.is_empty() {
        o.insert("required".to_owned(), json!(required));
    }
    o.insert("additionalProperties".to_owned(), json!(false));
    Value::Object(o)
}

/// The schema of one value shape.
fn kind(k: Kind) -> Value {
    match k {
        Kind::Str(_) => json!({ "type": "string" }),
        Kind::Bool => json!({ "type": "boolean" }),
        Kind::Integer => json!({ "type": "integer" }),
        Kind::Number => json!({ "type": "number" }),
        Kind::StrList => json!({ "type": "array", "items": { "type": "string" } }),
        Kind::IntList => json!({ "type": "array", "items": { "type": "integer" } }),
        Kind::Map(keys) => mapping(keys),
        Kind::MapList(keys) => json!({ "type": "array", "items": mapping(keys) }),
        Kind::StrMap => json!({ "type": "object", "additionalProperties": { "type": "string" } }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks every mapping of the schema with its key path.
    fn mappings<'a>(v: &'a Value, path: &str, out: &mut Vec<(String, &'a Value)>) {
        if v["type"] == "object" && v.get("properties").is_some() {
            out.push((path.to_owned(), v));
            for (k, p) in v["properties"].as_object().into_iter().flatten() {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                mappings(p, &child, out);
            }
        } else if v["type"] == "array" {
            mappings(&v["items"], path, out);
        }
    }

    #[test]
    fn every_mapping_is_closed_and_lists_its_table_keys() {
        let schema = json_schema();
        let mut all = Vec::new();
        mappings(&schema, "", &mut all);
        assert!(all.len() >= 10, "{}", all.len());
        for (path, m) in &all {
            assert_eq!(m["additionalProperties"], false, "{path}");
        }
        let mut top: Vec<&str> = schema["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .collect();
        let mut want = super::super::keys::names(top::KEYS);
        top.sort_unstable();
        want.sort_unstable();
        assert_eq!(top, want);
        assert_eq!(
            schema["required"],
            json!(["tenant", "repo", "task", "agent", "gate"])
        );
        assert_eq!(
            schema["properties"]["agent"]["properties"]["max_turns"]["type"],
            "integer"
        );
        assert_eq!(schema["properties"]["mounts"]["type"], "array");
    }

    #[test]
    fn every_key_carries_its_doc_line() {
        let schema = json_schema();
        let tenant = &schema["properties"]["tenant"]["description"];
        assert_eq!(tenant.as_str(), Some(top::KEYS[0].doc));
        assert!(json_schema_text().ends_with("}\n"));
    }
}
