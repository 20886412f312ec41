//! A value read from the spec file together with where it was written: what the decoder
//! produces and the section validators point their diagnostics at.

use super::Diagnostic;

/// A value read from the spec file, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located<T> {
    /// The decoded value.
    pub value: T,
    /// 1-based line of the node.
    pub line: usize,
    /// 1-based column (characters) of the node.
    pub column: usize,
    /// Key path of the node (`agent.env[1]`).
    pub path: String,
}

impl<T> Located<T> {
    /// A diagnostic pointing at this value.
    #[must_use]
    pub fn diag(&self, message: impl Into<String>) -> Diagnostic {
        Diagnostic::at(self.line, self.column, &self.path, message)
    }
}

/// Where a mapping was written (for "missing key" style diagnostics).
pub type Pos = Located<()>;
