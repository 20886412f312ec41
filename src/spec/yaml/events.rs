//! One pass over the parser's events: the style of every scalar (plain or quoted), the key
//! path of every node (for errors serde-saphyr reports by position only) and every explicit
//! tag (refused). Linear in the text: aliases are not expanded here.

use std::collections::BTreeMap;

use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};

use super::child;
use crate::spec::Diagnostic;

/// How a scalar was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// Unquoted: YAML infers its type.
    Plain,
    /// Single- or double-quoted, or a `|`/`>` block: always a string.
    Quoted,
}

/// What one pass over the parser's events tells the decoder.
#[derive(Debug, Default)]
pub(crate) struct EventFacts {
    /// Scalar styles keyed by (1-based line, 1-based column) of the scalar.
    pub(crate) styles: BTreeMap<(usize, usize), Style>,
    /// The key path of every node, keyed by its (1-based line, 1-based column): names the key
    /// in errors that serde-saphyr reports by position only.
    paths: BTreeMap<(usize, usize), String>,
    /// One diagnostic per explicit tag (`!!str`, `!!int`, `!foo`: none are allowed).
    pub(crate) tags: Vec<Diagnostic>,
}

impl EventFacts {
    /// The key path of the last node that starts on `line` at or before `column`; empty when
    /// no node starts there (e.g. a `---` line).
    pub(crate) fn path_at(&self, line: usize, column: usize) -> String {
        self.paths
            .range((line, 0)..=(line, column))
            .next_back()
            .map(|(_, p)| p.clone())
            .unwrap_or_default()
    }
}

/// An open collection while walking events.
struct Frame {
    path: String,
    /// For a mapping: the key whose value comes next (`None`: a key comes next).
    /// For a sequence: unused.
    key: Option<String>,
    /// For a sequence: the index of the next item.
    index: Option<usize>,
    /// Whether this collection is itself a mapping key.
    is_key: bool,
}

/// The path of the node that comes next, and whether it is a mapping key.
fn next_path(stack: &[Frame], scalar: &str) -> (String, bool) {
    match stack.last() {
        None => (String::new(), false),
        Some(Frame {
            path,
            index: Some(i),
            ..
        }) => (format!("{path}[{i}]"), false),
        Some(Frame {
            path, key: None, ..
        }) => (child(path, scalar), true),
        Some(Frame {
            path, key: Some(k), ..
        }) => (child(path, k), false),
    }
}

/// Moves the innermost collection past a finished node.
fn finish_node(stack: &mut [Frame], text: &str, was_key: bool) {
    if let Some(top) = stack.last_mut() {
        match &mut top.index {
            Some(i) => *i += 1,
            None => top.key = was_key.then(|| text.to_owned()),
        }
    }
}

/// Walks the parser's events once: scalar styles, node paths, tags.
pub(crate) fn event_facts(text: &str) -> EventFacts {
    let mut facts = EventFacts::default();
    let mut stack: Vec<Frame> = Vec::new();
    for event in Parser::new_from_str(text) {
        // On a syntax error stop quietly: serde-saphyr reports it next, with its message.
        let Ok((event, span)) = event else { break };
        let at = (span.start.line(), span.start.col() + 1);
        let (tag, path) = match &event {
            Event::Scalar(value, style, _, tag) => {
                let style = if matches!(style, ScalarStyle::Plain) {
                    Style::Plain
                } else {
                    Style::Quoted
                };
                facts.styles.insert(at, style);
                let (path, is_key) = next_path(&stack, value);
                finish_node(&mut stack, value, is_key);
                (tag.as_ref().map(ToString::to_string), path)
            }
            Event::Alias(_) => {
                let (path, is_key) = next_path(&stack, "*");
                finish_node(&mut stack, "*", is_key);
                (None, path)
            }
            Event::SequenceStart(_, _, tag) | Event::MappingStart(_, _, tag) => {
                let (path, is_key) = next_path(&stack, "?");
                let is_seq = matches!(event, Event::SequenceStart(..));
                stack.push(Frame {
                    path: path.clone(),
                    key: None,
                    index: is_seq.then_some(0),
                    is_key,
                });
                (tag.as_ref().map(ToString::to_string), path)
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(done) = stack.pop() {
                    finish_node(&mut stack, "?", done.is_key);
                }
                continue;
            }
            _ => continue,
        };
        // The innermost node at a position wins (a block mapping starts where its first key does).
        facts.paths.insert(at, path.clone());
        if let Some(resolved) = tag {
            let tag_at = span.tag_start.unwrap_or(span.start);
            // Name the tag as written (`!!str`), not as resolved (`tag:yaml.org,2002:str`).
            let tag = tag_at
                .byte_offset()
                .and_then(|o| text.get(o..))
                .and_then(|rest| rest.split(|c: char| c.is_whitespace() || c == ',').next())
                .filter(|t| t.starts_with('!'))
                .map_or(resolved, str::to_owned);
            facts.tags.push(
                Diagnostic::at(
                    tag_at.line(),
                    tag_at.col() + 1,
                    &path,
                    format!("YAML tags are not allowed (`{tag}`)"),
                )
                .hint("remove the tag; quote the value if it is a string"),
            );
        }
    }
    facts
}
