//! The tenant's env file (`~/.config/cyclix/tenants/TENANT.env`), read the way the run unit's
//! `EnvironmentFile=` reads it, so every verb resolves the tenant's environment the same way
//! (issue 19, item 4: `cyclix twin` said a variable "is not set" while the file held it).
//! Pure: the caller reads the file.
//!
//! The rules are systemd.exec(5), `EnvironmentFile=`: one `KEY=VALUE` per line; empty lines
//! and lines starting with `#` or `;` are skipped; whitespace around the key and the `=` and
//! leading whitespace of the value is dropped; a value in double quotes keeps its inner text
//! with `\"`, `\\` unescaped, one in single quotes its inner text as written. A line that is not
//! an assignment of a valid name is skipped (systemd logs "Ignoring invalid environment
//! assignment" and does the same). Line continuations (`\` at the end) are not supported: such
//! a line is taken as it stands.

/// The assignments of `text`, in order (a later one of the same name wins, as in systemd).
#[must_use]
pub fn parse(text: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let valid = key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            continue;
        }
        let value = unquote(value.trim_start().trim_end_matches(['\r', ' ', '\t']));
        out.retain(|(k, _)| k != key);
        out.push((key.to_owned(), value.into_bytes()));
    }
    out
}

/// The value of `name` in `vars` ([`parse`]'s output).
#[must_use]
pub fn get<'a>(vars: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    vars.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_slice())
}

fn unquote(v: &str) -> String {
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        let inner = &v[1..v.len() - 1];
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\'
                && let Some(n) = chars.next()
            {
                if !matches!(n, '"' | '\\') {
                    out.push('\\');
                }
                out.push(n);
            } else {
                out.push(c);
            }
        }
        out
    } else if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        v[1..v.len() - 1].to_owned()
    } else {
        v.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_comments_and_quotes_as_systemd_reads_them() {
        let v = parse(
            "# a comment\n; another\n\nAPI_KEY=sk-1\n  SPACED = padded\nQ=\"a \\\"b\\\" \\\\ c\"\nS='x $y'\nbad-name=1\nnot an assignment\nAPI_KEY=sk-2\n",
        );
        assert_eq!(get(&v, "API_KEY"), Some(&b"sk-2"[..]), "the later one wins");
        assert_eq!(get(&v, "SPACED"), Some(&b"padded"[..]));
        assert_eq!(get(&v, "Q"), Some(&b"a \"b\" \\ c"[..]));
        assert_eq!(get(&v, "S"), Some(&b"x $y"[..]));
        assert_eq!(get(&v, "bad-name"), None);
        assert_eq!(v.len(), 4);
    }
}
