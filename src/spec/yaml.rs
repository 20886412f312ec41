//! YAML decoding of a tenant spec: the only module in the crate that uses a YAML crate.
//!
//! Owns: the encoding checks on the raw text, the serde-saphyr options (budgets, duplicate and
//! merge keys, tags), the generic decoder that checks a mapping against a key table (unknown
//! keys with the nearest valid key, missing keys, strict YAML types) and the line/column/key
//! path of every value. Knows no key by name: the tables and the raw forms are the sections'
//! (`spec/sections/*.rs`). Makes no semantic decisions. Pure: no file system, no environment.
//!
//! Files: `text` (encoding checks), `events` (scalar styles, node paths, tags), `tree`
//! (serde-saphyr's located tree and its errors), `scalar` (how YAML 1.1/1.2 read a plain
//! scalar), `decode` (the [`Decoder`]).
//!
//! How strict typing works: serde-saphyr builds a tree of the document (one
//! `Spanned<RawNode>` per node, so every node has a line and column), and a second pass over
//! the parser's events records each scalar's style (plain, quoted, block) and any explicit
//! tag. A string field accepts a quoted or block scalar, or a plain scalar that neither YAML
//! 1.2 nor YAML 1.1 would read as anything but a string: `tenant: no`, `base: 0755`,
//! `on_calendar: 2024-01-01`, `tenant: ~` and `tenant: 1e3` are errors that say how YAML would
//! read the value and how to quote it (security-cases §4 "YAML 1.1 typing"). Booleans are only
//! the plain words `true` and `false`. Numbers are plain decimals.

mod decode;
mod events;
mod scalar;
mod text;
mod tree;

pub(crate) use decode::{Decoder, Fields, StrMap};
pub(crate) use text::check_text;
pub(crate) use tree::Node;

use super::Diagnostic;
use events::event_facts;
use tree::{Value, parse_tree, yaml_error};

/// "limits on alias count (≤100)").
pub const MAX_ALIASES: usize = 100;
/// Deepest nesting of mappings and sequences. The schema needs 4 levels; 32 leaves room.
pub const MAX_DEPTH: usize = 32;
/// Most nodes replayed from aliases in total: stops billion-laughs inputs before they grow.
pub const MAX_ALIAS_REPLAY_EVENTS: usize = 10_000;

/// Reads a spec text into the located tree the sections decode.
///
/// # Errors
/// The diagnostics when the text cannot be read as one YAML document at all: encoding,
/// syntax, budgets, tags, or an empty document.
pub(crate) fn read(text: &str) -> Result<Node, Vec<Diagnostic>> {
    let text_problems = check_text(text);
    if !text_problems.is_empty() {
        return Err(text_problems);
    }
    // The event pass runs first so every explicit tag is reported where it is written; it
    // does not expand aliases, so it is linear in the (size-capped) text.
    let facts = event_facts(text);
    if !facts.tags.is_empty() {
        return Err(facts.tags);
    }
    let root = parse_tree(text).map_err(|e| {
        let mut d = yaml_error(&e);
        if let (Some(line), Some(column)) = (d.line, d.column) {
            d.path = facts.path_at(line, column);
        }
        vec![d]
    })?;
    let root = Node::from_spanned(root, text, &facts.styles);
    if matches!(root.value, Value::Null) {
        return Err(vec![
            Diagnostic::at(root.line, root.column, "", "the spec is empty")
                .hint("a spec needs at least `tenant`, `repo`, `task`, `agent` and `gate`"),
        ]);
    }
    Ok(root)
}

/// `parent.key`, or `key` at the top.
fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

#[cfg(test)]
mod tests;
