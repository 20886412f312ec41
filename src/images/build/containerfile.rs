//! What cyclix reads of a project's Containerfile before it builds it (issue 15, item 1):
//! the images it starts from (`FROM`, `COPY --from=`, `RUN --mount=…,from=`), each of which
//! must be local or pinned by digest, and `ADD <url>`, which is refused: those fetches would
//! happen outside the build's proxy. Pure.
//!
//! The reading follows the Containerfile format (containerfile(5), Docker's "Dockerfile
//! reference"): `#` comment lines, a trailing `\` continues the line, `ARG` before the first
//! `FROM` gives defaults that `FROM` may use as `$NAME` or `${NAME}` (overridden by the build
//! args). A parser directive `# escape=` is refused (cyclix reads the default `\` only).

use std::collections::BTreeMap;

/// An image the build starts from or copies out of, as written after substitution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseRef {
    /// The reference (`localhost/node:22`, `docker.io/library/node@sha256:…`).
    pub reference: String,
    /// 1-based line of the instruction.
    pub line: usize,
    /// Whether it is pinned by digest (`@sha256:` and 64 hex): podman may pull it, the
    /// digest fixes its content. Otherwise it must be in local storage.
    pub pinned: bool,
}

/// One instruction: its 1-based first line, its keyword (uppercase) and the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Instruction {
    line: usize,
    keyword: String,
    rest: String,
}

/// Joins continued lines and drops comments and empty lines.
fn instructions(text: &str) -> Result<Vec<Instruction>, (usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    let mut directives = true;
    // A UTF-8 byte-order mark before the first line is dropped, as buildah's parser does:
    // otherwise `\u{feff}# escape=`` would pass as a plain line (attack review 17).
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = raw.trim();
        if directives && trimmed.starts_with('#') {
            let d = trimmed.trim_start_matches('#').trim().to_ascii_lowercase();
            if d.starts_with("escape") && d.contains('=') {
                return Err((
                    n,
                    "the parser directive `# escape=` is not supported; fix: remove it and escape with `\\`".into(),
                ));
            }
        }
        if !trimmed.is_empty() && !trimmed.starts_with('#') {
            directives = false;
        }
        if trimmed.starts_with('#') && current.is_none() {
            continue;
        }
        if trimmed.starts_with('#') {
            continue; // a comment inside a continued instruction
        }
        let (body, continued) = match trimmed.strip_suffix('\\') {
            Some(b) => (b, true),
            None => (trimmed, false),
        };
        match current.as_mut() {
            Some((_, acc)) => {
                acc.push(' ');
                acc.push_str(body);
            }
            None if body.is_empty() => {}
            None => current = Some((n, body.to_string())),
        }
        if !continued && let Some((line, acc)) = current.take() {
            let acc = acc.trim().to_string();
            let (kw, rest) = acc.split_once(char::is_whitespace).unwrap_or((&acc, ""));
            out.push(Instruction {
                line,
                keyword: kw.to_ascii_uppercase(),
                rest: rest.trim().to_string(),
            });
        }
    }
    if let Some((line, acc)) = current {
        let (kw, rest) = acc.split_once(char::is_whitespace).unwrap_or((&acc, ""));
        out.push(Instruction {
            line,
            keyword: kw.to_ascii_uppercase(),
            rest: rest.trim().to_string(),
        });
    }
    Ok(out)
}

/// `$NAME` and `${NAME}` replaced from `vars`; `None` when one is unknown or a `${NAME:-x}`
/// form is used (cyclix does not guess).
fn substitute(s: &str, vars: &BTreeMap<String, String>) -> Option<String> {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let braced = chars.peek() == Some(&'{');
        if braced {
            chars.next();
        }
        let mut name = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_ascii_alphanumeric() || c == '_' {
                name.push(c);
                chars.next();
            } else {
                break;
            }
        }
        if braced && chars.next() != Some('}') {
            return None;
        }
        out.push_str(vars.get(&name)?);
    }
    Some(out)
}

/// Whether `r` is `NAME@sha256:<64 lowercase hex>`.
fn is_pinned(r: &str) -> bool {
    r.split_once("@sha256:").is_some_and(|(name, hex)| {
        !name.is_empty()
            && hex.len() == 64
            && hex
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

/// Whether `src` names something fetched over the network (`ADD <url>`, a git source).
fn is_remote(src: &str) -> bool {
    let s = src.to_ascii_lowercase();
    s.contains("://") || s.starts_with("git@")
}

/// The images `text` (the Containerfile `file`) starts from or copies out of, with `args`
/// (the spec's build args) over the `ARG` defaults before the first `FROM`.
///
/// # Errors
/// A message naming `file:line`, what is refused and the fix: `ADD` of a URL or git source,
/// a `FROM` whose reference uses an unknown variable, a parser directive `# escape=`, no
/// `FROM` at all.
pub fn bases(text: &str, file: &str, args: &[(String, String)]) -> Result<Vec<BaseRef>, String> {
    let ins = instructions(text).map_err(|(n, e)| format!("{file}:{n}: {e}"))?;
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    let mut stages: Vec<String> = Vec::new();
    let mut out = Vec::new();
    let mut seen_from = false;
    let mut base = |reference: &str, line: usize, out: &mut Vec<BaseRef>, stages: &[String]| {
        let lower = reference.to_ascii_lowercase();
        if lower == "scratch" || stages.contains(&lower) || reference.parse::<usize>().is_ok() {
            return;
        }
        out.push(BaseRef {
            reference: reference.to_string(),
            line,
            pinned: is_pinned(reference),
        });
    };
    for i in &ins {
        let words: Vec<&str> = i.rest.split_whitespace().collect();
        match i.keyword.as_str() {
            "ARG" if !seen_from => {
                for w in &words {
                    // A later declaration's default wins, as in buildah (`ARG B=x` then
                    // `ARG B=y`: `FROM $B` is `y`; attack review 17).
                    match w.split_once('=') {
                        Some((k, v)) => {
                            vars.insert(k.to_string(), v.trim_matches('"').to_string());
                        }
                        None => {
                            vars.entry((*w).to_string()).or_default();
                        }
                    }
                }
                for (k, v) in args {
                    if vars.contains_key(k) {
                        vars.insert(k.clone(), v.clone());
                    }
                }
            }
            "FROM" => {
                seen_from = true;
                let plain: Vec<&str> = words
                    .iter()
                    .copied()
                    .filter(|w| !w.starts_with("--"))
                    .collect();
                let Some(raw) = plain.first() else {
                    return Err(format!(
                        "{file}:{}: `FROM` names no image; fix: `FROM IMAGE`",
                        i.line
                    ));
                };
                let Some(reference) = substitute(raw, &vars) else {
                    return Err(format!(
                        "{file}:{}: `FROM {raw}` uses a variable cyclix cannot resolve; fix: give it a default with `ARG NAME=value` before the first FROM, or set it in `build.args`",
                        i.line
                    ));
                };
                base(&reference, i.line, &mut out, &stages);
                if let (Some(kw), Some(name)) = (plain.get(1), plain.get(2))
                    && kw.eq_ignore_ascii_case("as")
                {
                    stages.push(name.to_ascii_lowercase());
                }
            }
            "ADD" => {
                let sources: Vec<&str> = words
                    .iter()
                    .copied()
                    .filter(|w| !w.starts_with("--"))
                    .collect();
                let n = sources.len().saturating_sub(1);
                if let Some(url) = sources
                    .iter()
                    .take(n)
                    .find(|s| is_remote(s.trim_matches(['[', ']', '"', ','])))
                {
                    return Err(format!(
                        "{file}:{}: `ADD {url}` fetches over the network outside the build's proxy: refused; fix: `RUN curl …` (or wget) through the proxy with the host in `build.egress`, or commit the file and `COPY` it",
                        i.line
                    ));
                }
                from_flags(&words, "--from=", i.line, &mut out, &stages, &mut base);
            }
            "COPY" => from_flags(&words, "--from=", i.line, &mut out, &stages, &mut base),
            "RUN" => {
                for w in words.iter().filter(|w| w.starts_with("--mount=")) {
                    for opt in w.trim_start_matches("--mount=").split(',') {
                        if let Some(from) = opt.strip_prefix("from=") {
                            base(from, i.line, &mut out, &stages);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if !seen_from {
        return Err(format!(
            "{file}: no `FROM` instruction; fix: start the Containerfile with `FROM IMAGE`"
        ));
    }
    Ok(out)
}

/// The `--from=X` flags of `words` that name an image rather than a stage.
fn from_flags(
    words: &[&str],
    flag: &str,
    line: usize,
    out: &mut Vec<BaseRef>,
    stages: &[String],
    base: &mut impl FnMut(&str, usize, &mut Vec<BaseRef>, &[String]),
) {
    for w in words {
        if let Some(from) = w.strip_prefix(flag) {
            base(from, line, out, stages);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PIN: &str = "docker.io/library/node@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn from_copy_from_and_mounts_name_the_bases_but_not_stages() {
        let text = format!(
            "# syntax comment\nARG BASE=localhost/node:22\nFROM $BASE AS build\nRUN --mount=type=cache,target=/c \\\n    npm ci\nFROM {PIN}\nCOPY --from=build /app /app\nCOPY --from=localhost/tools:1 /bin/t /bin/t\nFROM scratch\n"
        );
        let got = bases(&text, "Containerfile", &[]).expect("reads");
        let refs: Vec<(&str, usize, bool)> = got
            .iter()
            .map(|b| (b.reference.as_str(), b.line, b.pinned))
            .collect();
        assert_eq!(
            refs,
            [
                ("localhost/node:22", 3, false),
                (PIN, 6, true),
                ("localhost/tools:1", 8, false)
            ]
        );
        let over = bases(&text, "C", &[("BASE".into(), "localhost/other".into())]).expect("reads");
        assert_eq!(
            over.first().map(|b| b.reference.as_str()),
            Some("localhost/other")
        );
    }

    #[test]
    fn add_of_a_url_unknown_variables_and_no_from_are_refused_with_file_and_line() {
        let e = bases(
            "FROM localhost/x\nADD https://example.org/a.tgz /a\n",
            "app/Containerfile",
            &[],
        )
        .expect_err("refused");
        assert!(
            e.starts_with("app/Containerfile:2: `ADD https://example.org/a.tgz`"),
            "{e}"
        );
        assert!(e.contains("fix:"), "{e}");
        let e = bases(
            "FROM localhost/x\nADD \\\n  git@github.com:a/b.git /b\n",
            "C",
            &[],
        )
        .expect_err("refused");
        assert!(e.starts_with("C:2:"), "{e}");
        let e = bases("FROM node:${V}\n", "C", &[]).expect_err("refused");
        assert!(e.contains("C:1:") && e.contains("ARG NAME=value"), "{e}");
        assert!(bases("# only a comment\n", "C", &[]).is_err());
        assert!(bases("# escape=`\nFROM x\n", "C", &[]).is_err());
        // Behind a byte-order mark, as buildah reads it (attack review 17).
        let e = bases("\u{feff}# escape=`\nFROM x\n", "C", &[]).expect_err("refused");
        assert!(e.starts_with("C:1:") && e.contains("escape"), "{e}");
        // A local ADD is fine.
        assert!(bases("FROM localhost/x\nADD app.tgz /app\n", "C", &[]).is_ok());
    }

    #[test]
    fn a_redeclared_arg_before_from_takes_its_last_default_as_buildah_does() {
        let text = "ARG B=localhost/ok\nARG B=docker.io/library/alpine:latest\nARG B\nFROM $B\n";
        let got = bases(text, "C", &[]).expect("reads");
        assert_eq!(
            got.first().map(|b| b.reference.as_str()),
            Some("docker.io/library/alpine:latest")
        );
    }

    #[test]
    fn pins_need_sha256_and_64_hex() {
        assert!(is_pinned(PIN));
        assert!(!is_pinned("node:22"));
        assert!(!is_pinned("node@sha256:abc"));
    }
}
