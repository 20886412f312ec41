//! The generic decoder: walks the located tree one mapping at a time against a key table
//! ([`Key`]), reporting unknown, duplicate and missing keys and wrong YAML types, and hands
//! each value on with its position. The section files (`sections/*.rs`) say which key goes
//! into which field of their raw form; this file knows no key by name.

use std::collections::BTreeMap;

use super::child;
use super::events::Style;
use super::scalar::plain_reading;
use super::text::{char_name, is_control_char, is_format_char};
use super::tree::{Node, Value};
use crate::spec::Diagnostic;
use crate::spec::keys::{Key, Kind, StrKind, names};
use crate::spec::located::{Located, Pos};
use crate::spec::suggest::nearest;

/// The entries of a `Kind::StrMap` value: (name, value) in the order written.
pub(crate) type StrMap = Vec<(Located<String>, Located<String>)>;

/// The entries of one mapping, by schema key.
pub(crate) struct Fields<'a> {
    at: &'a Node,
    path: String,
    keys: &'static [Key],
    entries: BTreeMap<&'static str, &'a Node>,
}

impl Fields<'_> {
    /// Where the mapping was written.
    pub(crate) fn pos(&self) -> Pos {
        self.at.located(&self.path, ())
    }
}

/// Collects the schema diagnostics while the sections decode.
pub(crate) struct Decoder {
    pub(crate) out: Vec<Diagnostic>,
}

impl Decoder {
    /// Checks that `node` is a mapping with only the keys of `keys`, each at most once.
    pub(crate) fn mapping<'a>(
        &mut self,
        node: &'a Node,
        path: &str,
        keys: &'static [Key],
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
                .hint(format!("valid keys here: {}", names(keys).join(", "))),
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
            if let Some(known) = keys.iter().find(|known| known.name == name) {
                fields.insert(known.name, v);
            } else {
                let hint = match nearest(&name, &names(keys)) {
                    Some(n) => format!("did you mean `{n}`?"),
                    None => format!("valid keys here: {}", names(keys).join(", ")),
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
            keys,
            entries: fields,
        })
    }

    /// The table entry for `name`. Asking for a key that is not in the table is a bug in the
    /// section (caught by the tests that decode every key), never a user error.
    fn key(f: &Fields<'_>, name: &str) -> Option<&'static Key> {
        let key = f.keys.iter().find(|k| k.name == name);
        debug_assert!(
            key.is_some(),
            "`{name}` is not in the key table of `{}`",
            f.path
        );
        key
    }

    /// The value of `name`; reports it as missing when its entry is `required`.
    fn get<'a>(&mut self, f: &Fields<'a>, name: &str) -> Option<(&'static Key, &'a Node)> {
        let key = Self::key(f, name)?;
        let node = f.entries.get(key.name).copied();
        if node.is_none() && key.required {
            let path = child(&f.path, key.name);
            let hint = match key.example {
                Some(example) => format!("add {example}"),
                None => format!("add `{}`", key.name),
            };
            self.out.push(
                f.at.diag(&path, format!("missing required key `{}`", key.name))
                    .hint(hint),
            );
        }
        node.map(|n| (key, n))
    }

    /// A string key (`Kind::Str`).
    pub(crate) fn string(&mut self, f: &Fields<'_>, name: &str) -> Option<Located<String>> {
        let (key, node) = self.get(f, name)?;
        let Kind::Str(kind) = key.kind else {
            debug_assert!(false, "`{name}` is not a string key");
            return None;
        };
        self.string_at(node, &child(&f.path, key.name), kind)
    }

    /// A boolean key (`Kind::Bool`): only the plain words `true` and `false`.
    pub(crate) fn boolean(&mut self, f: &Fields<'_>, name: &str) -> Option<Located<bool>> {
        let (key, node) = self.get(f, name)?;
        debug_assert_eq!(key.kind, Kind::Bool, "`{name}` is not a boolean key");
        let path = child(&f.path, key.name);
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

    /// A number key (`Kind::Integer`, or `Kind::Number` with a fraction), as written.
    pub(crate) fn number(&mut self, f: &Fields<'_>, name: &str) -> Option<Located<String>> {
        let (key, node) = self.get(f, name)?;
        debug_assert!(
            matches!(key.kind, Kind::Integer | Kind::Number),
            "`{name}` is not a number key"
        );
        let fraction = key.kind == Kind::Number;
        self.number_at(node, &child(&f.path, key.name), fraction)
    }

    /// A list-of-strings key (`Kind::StrList`).
    pub(crate) fn strings(
        &mut self,
        f: &Fields<'_>,
        name: &str,
    ) -> Option<Located<Vec<Located<String>>>> {
        let (key, node) = self.get(f, name)?;
        debug_assert_eq!(key.kind, Kind::StrList, "`{name}` is not a string list key");
        let key = key.name;
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
            .filter_map(|(i, item)| self.string_at(item, &format!("{path}[{i}]"), StrKind::Line))
            .collect();
        // Items with a problem are reported and left out. If none is left, the list is absent
        // rather than empty, so no "list is empty" error follows the real one.
        (values.len() == items.len() || !values.is_empty()).then(|| node.located(&path, values))
    }

    /// A list-of-integers key (`Kind::IntList`).
    pub(crate) fn numbers(
        &mut self,
        f: &Fields<'_>,
        name: &str,
    ) -> Option<Located<Vec<Located<String>>>> {
        let (key, node) = self.get(f, name)?;
        debug_assert_eq!(
            key.kind,
            Kind::IntList,
            "`{name}` is not an integer list key"
        );
        let path = child(&f.path, key.name);
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
            .filter_map(|(i, item)| self.number_at(item, &format!("{path}[{i}]"), false))
            .collect();
        // Items with a problem are reported and left out. If none is left, the list is absent
        // rather than empty, so no "list is empty" error follows the real one.
        (values.len() == items.len() || !values.is_empty()).then(|| node.located(&path, values))
    }

    /// A nested mapping key (`Kind::Map`), decoded by `section` at its path.
    pub(crate) fn section<T>(
        &mut self,
        f: &Fields<'_>,
        name: &str,
        section: fn(&mut Self, &Node, &str) -> Option<T>,
    ) -> Option<T> {
        let (key, node) = self.get(f, name)?;
        debug_assert!(
            matches!(key.kind, Kind::Map(_)),
            "`{name}` is not a mapping key"
        );
        section(self, node, &child(&f.path, key.name))
    }

    /// A list-of-mappings key (`Kind::MapList`): each item decoded by `item` at `key[i]`;
    /// absent is empty.
    pub(crate) fn list<T>(
        &mut self,
        f: &Fields<'_>,
        name: &str,
        item: fn(&mut Self, &Node, &str) -> Option<T>,
    ) -> Vec<T> {
        let Some((key, node)) = self.get(f, name) else {
            return Vec::new();
        };
        debug_assert!(
            matches!(key.kind, Kind::MapList(_)),
            "`{name}` is not a list-of-mappings key"
        );
        let path = child(&f.path, key.name);
        let Value::Seq(items) = &node.value else {
            self.out.push(
                node.diag(&path, format!("expected a list, found {}", node.kind()))
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

    /// A mapping of free names to strings (`Kind::StrMap`): each key a string scalar written
    /// once, each value a one-line string; the entries in the order written.
    pub(crate) fn string_map(&mut self, f: &Fields<'_>, name: &str) -> Option<Located<StrMap>> {
        let (key, node) = self.get(f, name)?;
        debug_assert_eq!(key.kind, Kind::StrMap, "`{name}` is not a string map key");
        let path = child(&f.path, key.name);
        let Value::Map(entries) = &node.value else {
            self.out.push(
                node.diag(&path, format!("expected a mapping, found {}", node.kind()))
                    .hint("write `NAME: value` lines, e.g. `{ NODE_ENV: production }`"),
            );
            return None;
        };
        let before = self.out.len();
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut values = Vec::new();
        for (k, v) in entries {
            let Some(kname) = self.string_at(k, &path, StrKind::Line) else {
                continue;
            };
            let vpath = child(&path, &kname.value);
            if let Some(first) = seen.get(&kname.value) {
                self.out.push(
                    k.diag(
                        &vpath,
                        format!(
                            "duplicate key `{}` (first defined at line {first})",
                            kname.value
                        ),
                    )
                    .hint("remove one of them: YAML keys must be unique"),
                );
                continue;
            }
            seen.insert(kname.value.clone(), k.line);
            if let Some(value) = self.string_at(v, &vpath, StrKind::Line) {
                values.push((kname, value));
            }
        }
        (self.out.len() == before).then(|| node.located(&path, values))
    }

    /// A plain decimal number (integer or, with `fraction`, `1.5`) as written.
    fn number_at(&mut self, node: &Node, path: &str, fraction: bool) -> Option<Located<String>> {
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
    fn string_at(&mut self, node: &Node, path: &str, kind: StrKind) -> Option<Located<String>> {
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
}
