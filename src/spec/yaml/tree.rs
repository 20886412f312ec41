//! The document tree with locations: serde-saphyr's options (budgets, duplicate and merge
//! keys, tags), its located tree ([`RawNode`]), the messages for its errors, and the [`Node`]
//! tree the decoder walks (each node with its line, column, scalar style and source text).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::options::{DuplicateKeyPolicy, MergeKeyPolicy, NonFiniteFloatPolicy};
use serde_saphyr::{Error as YamlError, Spanned};

use super::events::Style;
use super::{MAX_ALIAS_REPLAY_EVENTS, MAX_ALIASES, MAX_DEPTH};
use crate::spec::Diagnostic;
use crate::spec::located::Located;

/// The serde-saphyr options: budgets sized for a 256 KiB spec, duplicate keys forwarded to
/// [`RawNode`] (which records both lines), merge keys and unknown tags refused, non-finite
/// floats kept as text (so `.inf` in a string field gets the "quote it" message).
fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_reader_input_bytes: Some(256 * 1024),
            max_events: 100_000,
            max_aliases: MAX_ALIASES,
            max_anchors: MAX_ALIASES,
            max_depth: MAX_DEPTH,
            flow_nesting_limit: MAX_DEPTH,
            max_documents: 1,
            max_nodes: 50_000,
            max_total_scalar_bytes: 1 << 20,
            max_merge_keys: 0,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: MAX_ALIAS_REPLAY_EVENTS,
            max_replay_stack_depth: 8,
            max_alias_expansions_per_anchor: MAX_ALIASES,
        },
        duplicate_keys: DuplicateKeyPolicy::PassThrough,
        merge_keys: MergeKeyPolicy::Error,
        reject_unsupported_tags: true,
        reject_tagged_field_names: true,
        non_finite_float_policy: NonFiniteFloatPolicy::AsString,
        with_snippet: false,
    }
}

/// A YAML node as serde-saphyr infers it. Scalar values other than strings are not kept: the
/// decoder reads numbers and booleans from the source text itself.
#[derive(Debug)]
pub(crate) enum RawNode {
    Null,
    Bool,
    Int,
    Float,
    Str(String),
    Seq(Vec<Spanned<RawNode>>),
    Map(Vec<(Spanned<RawNode>, Spanned<RawNode>)>),
}

struct RawNodeVisitor;

impl<'de> Visitor<'de> for RawNodeVisitor {
    type Value = RawNode;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }
    fn visit_unit<E>(self) -> Result<RawNode, E> {
        Ok(RawNode::Null)
    }
    fn visit_none<E>(self) -> Result<RawNode, E> {
        Ok(RawNode::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<RawNode, D::Error> {
        RawNode::deserialize(d)
    }
    fn visit_bool<E>(self, _: bool) -> Result<RawNode, E> {
        Ok(RawNode::Bool)
    }
    fn visit_i64<E>(self, _: i64) -> Result<RawNode, E> {
        Ok(RawNode::Int)
    }
    fn visit_u64<E>(self, _: u64) -> Result<RawNode, E> {
        Ok(RawNode::Int)
    }
    fn visit_i128<E>(self, _: i128) -> Result<RawNode, E> {
        Ok(RawNode::Int)
    }
    fn visit_u128<E>(self, _: u128) -> Result<RawNode, E> {
        Ok(RawNode::Int)
    }
    fn visit_f64<E>(self, _: f64) -> Result<RawNode, E> {
        Ok(RawNode::Float)
    }
    fn visit_str<E>(self, v: &str) -> Result<RawNode, E> {
        Ok(RawNode::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<RawNode, E> {
        Ok(RawNode::Str(v))
    }
    fn visit_bytes<E>(self, v: &[u8]) -> Result<RawNode, E> {
        Ok(RawNode::Str(String::from_utf8_lossy(v).into_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawNode, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(RawNode::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawNode, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key()? {
            let value = map.next_value()?;
            entries.push((key, value));
        }
        Ok(RawNode::Map(entries))
    }
}

impl<'de> Deserialize<'de> for RawNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawNodeVisitor)
    }
}

/// Parses the text into a located tree.
pub(crate) fn parse_tree(text: &str) -> Result<Spanned<RawNode>, YamlError> {
    serde_saphyr::from_str_with_options::<Spanned<RawNode>>(text, options())
}

/// A diagnostic for a serde-saphyr error: its location and a message naming the limit or rule.
pub(crate) fn yaml_error(e: &YamlError) -> Diagnostic {
    let (line, column) = e.location().map_or((None, None), |l| {
        (
            usize::try_from(l.line()).ok().filter(|n| *n > 0),
            usize::try_from(l.column()).ok().filter(|n| *n > 0),
        )
    });
    let mut inner = e;
    while let YamlError::AliasError { error, .. } | YamlError::WithSnippet { error, .. } = inner {
        inner = error;
    }
    let (message, hint) = yaml_error_text(inner);
    Diagnostic {
        line,
        column,
        path: String::new(),
        message,
        hint: Some(hint.to_owned()),
    }
}

fn yaml_error_text(e: &YamlError) -> (String, &'static str) {
    const NO_ALIASES: &str =
        "write the values out instead of using anchors (`&a`) and aliases (`*a`)";
    match e {
        YamlError::AliasReplayLimitExceeded { .. }
        | YamlError::AliasExpansionLimitExceeded { .. }
        | YamlError::AliasReplayStackDepthExceeded { .. } => (
            format!(
                "aliases expand to too many nodes (billion-laughs style input; limit {MAX_ALIAS_REPLAY_EVENTS} replayed nodes)"
            ),
            NO_ALIASES,
        ),
        YamlError::MergeKeyNotAllowed { .. } => (
            "merge keys (`<<`) are not allowed".into(),
            "write the keys out in full",
        ),
        YamlError::UnsupportedTag { tag, .. } => (
            format!("YAML tags are not allowed (`{tag}`)"),
            "remove the tag; quote the value if it is a string",
        ),
        YamlError::Budget { breach, .. } => match breach {
            BudgetBreach::Aliases { .. } => {
                (format!("more than {MAX_ALIASES} aliases"), NO_ALIASES)
            }
            BudgetBreach::Anchors { .. } => {
                (format!("more than {MAX_ALIASES} anchors"), NO_ALIASES)
            }
            BudgetBreach::AliasAnchorRatio { .. } => (
                "too many aliases per anchor (billion-laughs style input)".into(),
                NO_ALIASES,
            ),
            BudgetBreach::Depth { .. } => (
                format!("nesting deeper than {MAX_DEPTH} levels"),
                "a spec is at most a few levels deep; check the brackets and indentation",
            ),
            BudgetBreach::Documents { .. } => (
                "more than one YAML document (`---`)".into(),
                "keep one tenant spec per file",
            ),
            BudgetBreach::MergeKeys { .. } => (
                "merge keys (`<<`) are not allowed".into(),
                "write the keys out in full",
            ),
            other => (
                format!("the document is too large ({other:?})"),
                "a tenant spec is a short file; move long task text to `task.file`",
            ),
        },
        other => {
            let text = other.to_string();
            // The parser's own nesting guard (flow collections) surfaces as a parser error
            // whose text is its only distinguishing mark.
            if text.starts_with("recursion limit exceeded") {
                return (
                    format!("nesting deeper than {MAX_DEPTH} levels"),
                    "a spec is at most a few levels deep; check the brackets and indentation",
                );
            }
            let message = match text.find(" at line ") {
                Some(i) => &text[..i],
                None => text.as_str(),
            };
            (
                format!("invalid YAML: {message}"),
                "fix the YAML syntax at this position",
            )
        }
    }
}

#[derive(Debug)]
pub(crate) enum Value {
    Null,
    Bool,
    Int,
    Float,
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) value: Value,
    /// 1-based line where the node is used (for an alias: the `*a`).
    pub(crate) line: usize,
    /// 1-based column where the node is used.
    pub(crate) column: usize,
    /// Scalar style of the node's definition.
    pub(crate) style: Style,
    /// The scalar as written in the source (for messages and number parsing).
    pub(crate) raw: String,
}

impl Node {
    pub(crate) fn from_spanned(
        s: Spanned<RawNode>,
        text: &str,
        styles: &BTreeMap<(usize, usize), Style>,
    ) -> Node {
        let line = usize::try_from(s.referenced.line()).unwrap_or(0);
        let column = usize::try_from(s.referenced.column()).unwrap_or(0);
        let def = (
            usize::try_from(s.defined.line()).unwrap_or(0),
            usize::try_from(s.defined.column()).unwrap_or(0),
        );
        let span = s.defined.span();
        let source = span
            .byte_offset()
            .zip(span.byte_len())
            .and_then(|(o, l)| {
                let o = usize::try_from(o).ok()?;
                let l = usize::try_from(l).ok()?;
                text.get(o..o.checked_add(l)?)
            })
            .unwrap_or_default()
            .to_owned();
        let style = styles.get(&def).copied().unwrap_or(Style::Plain);
        let (value, raw) = match s.value {
            RawNode::Null => (Value::Null, source),
            RawNode::Bool => (Value::Bool, source),
            RawNode::Int => (Value::Int, source),
            RawNode::Float => (Value::Float, source),
            RawNode::Str(v) => (Value::Str(v.clone()), v),
            RawNode::Seq(items) => (
                Value::Seq(
                    items
                        .into_iter()
                        .map(|i| Node::from_spanned(i, text, styles))
                        .collect(),
                ),
                String::new(),
            ),
            RawNode::Map(entries) => (
                Value::Map(
                    entries
                        .into_iter()
                        .map(|(k, v)| {
                            (
                                Node::from_spanned(k, text, styles),
                                Node::from_spanned(v, text, styles),
                            )
                        })
                        .collect(),
                ),
                String::new(),
            ),
        };
        Node {
            value,
            line,
            column,
            style,
            raw,
        }
    }

    /// What the node is, for "found ..." messages.
    pub(crate) fn kind(&self) -> String {
        match &self.value {
            Value::Null if self.raw.is_empty() => "an empty value".into(),
            Value::Null => format!("null `{}`", self.raw),
            Value::Bool => format!("boolean `{}`", self.raw),
            Value::Int => format!("integer `{}`", self.raw),
            Value::Float => format!("float `{}`", self.raw),
            Value::Str(s) if s.chars().count() > 40 || s.contains('\n') => "a string".into(),
            Value::Str(s) => format!("string \"{}\"", s.escape_debug()),
            Value::Seq(_) => "a sequence".into(),
            Value::Map(_) => "a mapping".into(),
        }
    }

    pub(crate) fn diag(&self, path: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::at(self.line, self.column, path, message)
    }

    pub(crate) fn located<T>(&self, path: &str, value: T) -> Located<T> {
        Located {
            value,
            line: self.line,
            column: self.column,
            path: path.to_owned(),
        }
    }
}
