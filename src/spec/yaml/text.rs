//! The encoding checks on the raw text, before any YAML is read: BOM, CR, tabs, control and
//! bidi/format characters (Trojan Source). Also names refused characters for the scalar
//! checks in `decode`.

use std::collections::BTreeMap;

use crate::spec::Diagnostic;

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
pub(crate) fn is_format_char(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{2028}' | '\u{2029}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// Whether `c` is a C0 control (other than `\n`), DEL or a C1 control.
pub(crate) fn is_control_char(c: char) -> bool {
    c != '\n' && c.is_control()
}

/// A short name for a refused character, e.g. `U+202E (right-to-left override)`.
pub(crate) fn char_name(c: char) -> String {
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
pub(crate) fn check_text(text: &str) -> Vec<Diagnostic> {
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
