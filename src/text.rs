//! Text that came out of a sandbox (commit subjects, log lines), made safe to print: control
//! and bidi characters replaced ([`printable`]), secret values redacted ([`redact`]); and the
//! agent's and gate's output streams cut into such lines with marked limits ([`output`]).

pub mod output;

/// The shortest secret value [`redact`] replaces (bytes): shorter values would redact
/// ordinary words.
pub const MIN_SECRET_LEN: usize = 4;

/// `text` with every secret value of at least [`MIN_SECRET_LEN`] bytes (as text) replaced by
/// `***`. Exact values only: an agent that holds a secret can re-encode it (base64, reversed,
/// split over lines) and print it past this (docs/output.md says so).
#[must_use]
pub fn redact(text: &str, secrets: &[&[u8]]) -> String {
    // Longest first: a value that holds another (`abcd` in `xxabcdyy`) must not be cut up by
    // the shorter one's `***` and so escape its own replacement.
    let mut values: Vec<&[u8]> = secrets
        .iter()
        .copied()
        .filter(|s| s.len() >= MIN_SECRET_LEN)
        .collect();
    values.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut t = text.to_string();
    for s in values {
        t = t.replace(&*String::from_utf8_lossy(s), "***");
    }
    t
}

/// `text` with every control character (C0, DEL, C1) and bidirectional formatting character
/// replaced by U+FFFD: a commit subject is the agent's, and a terminal must not take it as
/// escape sequences or reorder what the summary shows.
#[must_use]
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            let bidi = matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}');
            if c.is_control() || bidi { '\u{fffd}' } else { c }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_holding_another_is_redacted_whole() {
        let secrets: [&[u8]; 2] = [b"abcd", b"tok-abcd-EFGHIJKLMN"];
        assert_eq!(
            redact("x tok-abcd-EFGHIJKLMN y abcd", &secrets),
            "x *** y ***"
        );
    }

    #[test]
    fn subjects_lose_escapes_and_bidi_controls() {
        assert_eq!(
            printable("fix \u{1b}[31mred\u{7}"),
            "fix \u{fffd}[31mred\u{fffd}"
        );
        assert_eq!(printable("a\u{202e}b\u{9b}c"), "a\u{fffd}b\u{fffd}c");
        assert_eq!(
            printable("Fix calc.subtract: ünïcode"),
            "Fix calc.subtract: ünïcode"
        );
    }
}
