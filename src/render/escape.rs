//! The one place that turns untrusted strings into systemd unit-file values.
//!
//! systemd.service(5) "Command lines" and systemd.unit(5) "Specifiers" define the grammar:
//! words are split on whitespace, double quotes group, C-style escapes (`\n`, `\"`, `\\`,
//! `\xNN`) are decoded, `%` starts a specifier and `$` an environment substitution, and a word
//! that is exactly `;` separates two command lines. [`exec_word`] neutralises all of these;
//! [`split_exec`] is the inverse (used by the round-trip tests, and checked against the real
//! systemd on the testbed).
//!
//! Quadlet (podman 5.4.2, measured on the testbed) re-splits `Exec=` itself and drops every
//! argument after an empty one, and passes a lone `;` through raw, so [`quadlet_exec_word`]
//! refuses both. Pure: no I/O.

use std::fmt::Write as _;

/// Why a value cannot be written into a unit file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EscapeError {
    /// Quadlet drops the rest of `Exec=` after an empty argument (podman 5.4.2).
    #[error(
        "an empty argument is not supported by Quadlet's Exec= (podman 5.4 drops every argument after it)"
    )]
    EmptyArgForQuadlet,
    /// Quadlet writes a lone `;` unescaped, which systemd reads as a second command line.
    #[error(
        "an argument that is exactly `;` is not supported by Quadlet's Exec= (it would start a second command line)"
    )]
    SemicolonForQuadlet,
    /// A plain value (not an argv word) holds a character systemd cannot carry safely.
    #[error("control character U+{0:04X} is not allowed in a unit value")]
    ControlChar(u32),
}

/// Quotes one argv word for an `Exec*=` line of a systemd unit so that systemd hands exactly
/// `word` to the process: no specifier (`%` → `%%`), no variable substitution (`$` → `$$`),
/// no command separator (a lone `;` → `\;`), quotes, backslashes and control characters
/// C-escaped. Every other word is wrapped in double quotes.
///
/// ```
/// use cyclix::render::escape::{exec_word, split_exec};
/// let w = exec_word("50% of $HOME \"x\"");
/// assert_eq!(w, r#""50%% of $$HOME \"x\"""#);
/// assert_eq!(split_exec(&w).unwrap(), vec!["50% of $HOME \"x\"".to_string()]);
/// ```
#[must_use]
pub fn exec_word(word: &str) -> String {
    if word == ";" {
        return "\\;".to_string();
    }
    let mut out = String::with_capacity(word.len() + 2);
    out.push('"');
    push_escaped(&mut out, word, true);
    out.push('"');
    out
}

/// [`exec_word`] for Quadlet's `Exec=`, which Quadlet re-splits and re-quotes itself.
///
/// # Errors
/// [`EscapeError::EmptyArgForQuadlet`] for `""` and [`EscapeError::SemicolonForQuadlet`] for
/// `;` (both measured on podman 5.4.2: the first truncates argv, the second splits the line).
pub fn quadlet_exec_word(word: &str) -> Result<String, EscapeError> {
    match word {
        "" => Err(EscapeError::EmptyArgForQuadlet),
        ";" => Err(EscapeError::SemicolonForQuadlet),
        _ => Ok(exec_word(word)),
    }
}

/// Joins `argv` into an `Exec*=` value with [`exec_word`].
#[must_use]
pub fn exec_line(argv: &[String]) -> String {
    argv.iter()
        .map(|w| exec_word(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A non-argv value (`Description=`, `Label=`, `Environment=`-style `K=V`, paths): specifiers
/// escaped (`%` → `%%`); control characters refused.
///
/// # Errors
/// [`EscapeError::ControlChar`] for any C0/C1 control character or DEL.
pub fn value(v: &str) -> Result<String, EscapeError> {
    if let Some(c) = v.chars().find(|c| c.is_control()) {
        return Err(EscapeError::ControlChar(u32::from(c)));
    }
    Ok(v.replace('%', "%%"))
}

/// A value that systemd unquotes (`Environment=`, Quadlet `Label=`/`Environment=`): the whole
/// `K=V` pair in double quotes with `%`, `"` and `\` escaped (systemd.exec(5) "Environment=").
///
/// # Errors
/// [`EscapeError::ControlChar`] for any control character.
pub fn quoted_value(v: &str) -> Result<String, EscapeError> {
    if let Some(c) = v.chars().find(|c| c.is_control()) {
        return Err(EscapeError::ControlChar(u32::from(c)));
    }
    let mut out = String::with_capacity(v.len() + 2);
    out.push('"');
    push_escaped(&mut out, v, false);
    out.push('"');
    Ok(out)
}

fn push_escaped(out: &mut String, s: &str, dollar: bool) {
    for c in s.chars() {
        match c {
            '%' => out.push_str("%%"),
            '$' if dollar => out.push_str("$$"),
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                // is_control covers C0, DEL and C1; all are below U+0100.
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
}

/// Splits an `Exec*=` value the way systemd does (quotes, C escapes, `%%`, `$$`, `\;`) and
/// returns the argv the process would receive. Only the subset cyclix emits is accepted:
/// other specifiers or variable references are an error, so a test can never pass by
/// accident.
///
/// # Errors
/// A message naming the offending position for unbalanced quotes, unknown escapes, a lone
/// `;` (a second command line), a bare `%x` specifier or `$VAR` substitution.
pub fn split_exec(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(words);
        }
        let mut word = String::new();
        let mut quote: Option<char> = None;
        let mut raw_semicolon = false;
        let mut any_quote = false;
        while let Some(c) = chars.next() {
            match (quote, c) {
                (None, c) if c.is_whitespace() => break,
                (None, '"' | '\'') => {
                    quote = Some(c);
                    any_quote = true;
                }
                (Some(q), c) if c == q => quote = None,
                (_, '\\') => {
                    let e = chars.next().ok_or("trailing backslash")?;
                    match e {
                        'n' => word.push('\n'),
                        't' => word.push('\t'),
                        'r' => word.push('\r'),
                        '\\' | '"' | '\'' => word.push(e),
                        ';' if quote.is_none() => word.push(';'),
                        'x' => {
                            let hex: String = chars.by_ref().take(2).collect();
                            let n = u32::from_str_radix(&hex, 16)
                                .map_err(|_| format!("bad \\x escape `\\x{hex}`"))?;
                            word.push(char::from_u32(n).ok_or("bad \\x escape")?);
                        }
                        other => return Err(format!("unknown escape `\\{other}`")),
                    }
                }
                (_, '%') => match chars.next() {
                    Some('%') => word.push('%'),
                    other => {
                        return Err(format!("unexpected specifier `%{}`", other.unwrap_or(' ')));
                    }
                },
                (_, '$') => match chars.next() {
                    Some('$') => word.push('$'),
                    other => {
                        return Err(format!(
                            "unexpected substitution `${}`",
                            other.unwrap_or(' ')
                        ));
                    }
                },
                (None, ';') => {
                    raw_semicolon = true;
                    word.push(';');
                }
                (_, c) => word.push(c),
            }
        }
        if quote.is_some() {
            return Err("unbalanced quote".to_string());
        }
        if raw_semicolon && word == ";" && !any_quote {
            return Err("a lone `;` starts a second command line".to_string());
        }
        words.push(word);
    }
}

#[cfg(test)]
mod tests;
