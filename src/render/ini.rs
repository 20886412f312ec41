//! The unit-file writer: sections in order, repeated keys in order, one `Key=Value` per line.
//! It knows nothing about Quadlet or systemd semantics; values arrive already escaped by
//! `render::escape`. Pure.

use std::fmt::Write as _;

/// One unit file being built: ordered sections of ordered `(key, value)` entries.
///
/// ```
/// use cyclix::render::ini::UnitFile;
/// let mut u = UnitFile::new("# generated\n");
/// u.section("Unit").add("Description", "x");
/// u.section("Service").add("ExecStart", "/bin/true");
/// assert_eq!(u.to_text(), "# generated\n[Unit]\nDescription=x\n\n[Service]\nExecStart=/bin/true\n");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitFile {
    header: String,
    sections: Vec<(String, Vec<(String, String)>)>,
}

/// A handle to append entries to one section.
pub struct Section<'a>(&'a mut Vec<(String, String)>);

impl Section<'_> {
    /// Appends `key=value` (keys may repeat; order is kept).
    pub fn add(&mut self, key: &str, value: impl Into<String>) -> &mut Self {
        self.0.push((key.to_string(), value.into()));
        self
    }
}

impl UnitFile {
    /// A new file whose text starts with `header` (comment lines, each ending in `\n`).
    #[must_use]
    pub fn new(header: &str) -> Self {
        UnitFile {
            header: header.to_string(),
            sections: Vec::new(),
        }
    }

    /// The section named `name`, created at the end if it does not exist yet.
    pub fn section(&mut self, name: &str) -> Section<'_> {
        let idx = if let Some(i) = self.sections.iter().position(|(n, _)| n == name) {
            i
        } else {
            self.sections.push((name.to_string(), Vec::new()));
            self.sections.len() - 1
        };
        Section(&mut self.sections[idx].1)
    }

    /// The file's text. Empty sections are left out.
    ///
    /// # Panics
    /// Never for values built by `render`: they are escaped first; a newline in a value is a
    /// programming error caught here (`invariant`), because it would inject a directive.
    #[must_use]
    pub fn to_text(&self) -> String {
        let mut out = self.header.clone();
        let mut first = true;
        for (name, entries) in self.sections.iter().filter(|(_, e)| !e.is_empty()) {
            if !first {
                out.push('\n');
            }
            first = false;
            let _ = writeln!(out, "[{name}]");
            for (k, v) in entries {
                assert!(
                    !v.contains('\n'),
                    "invariant: unit values are escaped before writing"
                );
                let _ = writeln!(out, "{k}={v}");
            }
        }
        out
    }
}
