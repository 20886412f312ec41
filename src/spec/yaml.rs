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
    Located, Pos, RawAgent, RawEgress, RawGate, RawImage, RawMount, RawRepo, RawResources,
    RawSchedule, RawService, RawSpec, RawTask, nearest,
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
    let root = parse_tree(text).map_err(|d| vec![d])?;
    let (styles, tag_problems) = scalar_styles(text);
    if !tag_problems.is_empty() {
        return Err(tag_problems);
    }
    let root = Node::from_spanned(root, text, &styles);
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

/// Parses the text into a located tree, mapping serde-saphyr's errors to diagnostics.
fn parse_tree(text: &str) -> Result<Spanned<RawNode>, Diagnostic> {
    serde_saphyr::from_str_with_options::<Spanned<RawNode>>(text, options())
        .map_err(|e| yaml_error(&e))
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
                "a spec is at most a few levels deep; check the indentation",
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

/// Scalar styles keyed by (1-based line, 1-based column) of the scalar, and one diagnostic per
/// explicit tag (`!!str`, `!!int`, `!foo`: none are allowed).
fn scalar_styles(text: &str) -> (BTreeMap<(usize, usize), Style>, Vec<Diagnostic>) {
    let mut styles = BTreeMap::new();
    let mut tags = Vec::new();
    for event in Parser::new_from_str(text) {
        // serde-saphyr already accepted this text, so the parser does not fail here; stop
        // quietly if it does.
        let Ok((event, span)) = event else { break };
        let tag = match &event {
            Event::Scalar(_, style, _, tag) => {
                let style = if matches!(style, ScalarStyle::Plain) {
                    Style::Plain
                } else {
                    Style::Quoted
                };
                styles.insert((span.start.line(), span.start.col() + 1), style);
                tag.as_ref().map(ToString::to_string)
            }
            Event::SequenceStart(_, _, tag) | Event::MappingStart(_, _, tag) => {
                tag.as_ref().map(ToString::to_string)
            }
            _ => None,
        };
        if let Some(tag) = tag {
            let at = span.tag_start.unwrap_or(span.start);
            tags.push(
                Diagnostic::at(
                    at.line(),
                    at.col() + 1,
                    "",
                    format!("YAML tags are not allowed (`{tag}`)"),
                )
                .hint("remove the tag; quote the value if it is a string"),
            );
        }
    }
    (styles, tags)
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
            Value::Str(s) => format!("string \"{s}\""),
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
const GATE_KEYS: &[&str] = &["image", "unpinned_local_image", "command", "timeout"];
const EGRESS_KEYS: &[&str] = &["allow", "ports", "report_only"];
const MOUNT_KEYS: &[&str] = &["source", "target", "read_only"];
const SERVICE_KEYS: &[&str] = &[
    "name",
    "image",
    "unpinned_local_image",
    "command",
    "env",
    "port",
];
const SCHEDULE_KEYS: &[&str] = &["on_calendar", "persistent", "randomized_delay"];

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
            let name = match &k.value {
                Value::Str(s) => s.clone(),
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
                _ if key == "image" => "`image: NAME@sha256:<64 hex>`",
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
            let hint = if matches!(node.value, Value::Str(_)) && key == "command" {
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
        // Items with a problem are reported and left out; the rest are still validated.
        let values: Vec<Located<String>> = items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| self.string(item, &format!("{path}[{i}]"), StrKind::Line))
            .collect();
        Some(node.located(&path, values))
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
        Some(node.located(&path, values))
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
                .get(&f, "port", true)
                .and_then(|p| self.number(p, &child(path, "port"), false)),
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
}
