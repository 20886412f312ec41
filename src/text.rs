//! Text that came out of a sandbox (commit subjects, log lines), made safe to print.

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
