//! The closed schema as data: one [`Key`] entry per key of the spec, grouped in one table per
//! mapping (`KEYS` in each `sections/*.rs` file).
//!
//! The tables are the one source for: which keys a mapping accepts (unknown-key detection and
//! the "valid keys here" list), which are required (and the example the "missing required
//! key" fix shows), the YAML type the decoder reads for each key, the nearest-key suggestions
//! ([`super::suggest`]), and a JSON Schema generated from them later. A new key is one entry
//! in its section's table, one field in its section's raw form, its rule, and the model.

/// One key of a spec mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    /// The key as written in YAML, e.g. `on_calendar`.
    pub name: &'static str,
    /// The YAML shape the value must have.
    pub kind: Kind,
    /// Whether the mapping must have the key ("missing required key" when absent).
    pub required: bool,
    /// One line saying what the key is for (the schema's `description`).
    pub doc: &'static str,
    /// For a required key: the example shown in the fix when it is missing (`add {example}`);
    /// `None` shows ``add `NAME` ``.
    pub example: Option<&'static str>,
}

/// The YAML shape of a key's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string scalar, written as [`StrKind`] says.
    Str(StrKind),
    /// `true` or `false`.
    Bool,
    /// A plain decimal integer (`443`).
    Integer,
    /// A plain decimal number, with an optional fraction (`1.5`).
    Number,
    /// A list of one-line strings.
    StrList,
    /// A list of plain decimal integers.
    IntList,
    /// A mapping with the keys of the given table.
    Map(&'static [Key]),
    /// A list of mappings, each with the keys of the given table.
    MapList(&'static [Key]),
    /// A mapping of names the user chooses to one-line strings (`build.args`).
    StrMap,
}

/// How a string field is meant to be written, for the fix in a type error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrKind {
    /// A one-line string.
    Line,
    /// Text that may span lines (`task.text`).
    Text,
    /// A duration such as `30m`.
    Duration,
    /// A size such as `2G`.
    Size,
}

impl Key {
    /// An optional key of `kind`.
    #[must_use]
    pub const fn optional(name: &'static str, kind: Kind, doc: &'static str) -> Key {
        Key {
            name,
            kind,
            required: false,
            doc,
            example: None,
        }
    }

    /// A required key of `kind`; `example` is the fix shown when it is missing.
    #[must_use]
    pub const fn required(
        name: &'static str,
        kind: Kind,
        doc: &'static str,
        example: Option<&'static str>,
    ) -> Key {
        Key {
            name,
            kind,
            required: true,
            doc,
            example,
        }
    }
}

/// The names of a table's keys, in table order.
#[must_use]
pub fn names(keys: &[Key]) -> Vec<&'static str> {
    keys.iter().map(|k| k.name).collect()
}

#[cfg(test)]
mod tests;
