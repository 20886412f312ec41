//! The tenant spec: the typed, validated model that every other module consumes.
//!
//! Owns: the model types (`spec/model.rs`, re-exported here), YAML reading (`spec/yaml/`, the
//! only YAML user in the crate: positions, the tree, scalars, the generic decoder), the key
//! tables (`spec/keys.rs` types; one `KEYS` table per section), the sections
//! (`spec/sections/*.rs`: raw form, keys, decoding and validation of each top-level section),
//! the shared value rules (`spec/rules/*.rs`) and the nearest-key suggestions
//! (`spec/suggest.rs`). Pure: no file system, no environment, no processes. Reading the file
//! (with its size cap) and the symlink walk over mount sources are I/O and live in the adapters
//! (`app`, `host::paths`).
//!
//! A spec that reaches this model has passed every section's `validate`: names are from the safe
//! alphabet, images are pinned (or loudly opted out), the allowlist is normalised, mounts are
//! component-wise inside their allowed roots. Fields document the unit key or podman flag they
//! become.

pub mod host_config;
pub mod keys;
mod located;
mod model;
pub mod mount_guard;
pub(crate) mod rules;
pub mod schema;
mod sections;
mod suggest;
pub mod validate;
pub mod yaml;

use std::fmt;

pub use model::{
    Agent, Baseline, Build, CaCert, Credential, CredentialBudget, CredentialScheme, Delivery,
    Egress, Gate, Health, HostPattern, Image, Mount, Notify, Pool, PresetUse, Repo, Resources,
    Schedule, Service, Spec, Task,
};
pub use rules::durations::duration_s;
pub use sections::agent_preset::{SANDBOX_TASK_PATH, apply_model};
pub use sections::build::BUILD_REPOSITORY;
pub use sections::credentials::{KNOWN_KEY_HOSTS, default_base_url_env, env_key_warnings};
pub use sections::setup::{
    ALWAYS as SETUP_ALWAYS, pathspec_of as setup_pathspecs_of, pathspecs as setup_pathspecs,
};

/// Largest spec file cyclix reads, in bytes (256 KiB, security-cases §4 "Huge or hostile file").
/// The size is checked before parsing.
pub const MAX_SPEC_BYTES: u64 = 256 * 1024;

/// Facts from outside the file that validation needs, injected by the caller (never read from
/// the environment here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecContext {
    /// Label used in error messages: the spec's path as the user gave it.
    pub file: String,
    /// The invoking user's home directory (absolute): `~/` in paths expands to it.
    pub home: String,
    /// The invoking user's `$XDG_RUNTIME_DIR` (absolute, e.g. `/run/user/1000`): never mountable.
    pub runtime_dir: String,
}

/// One problem found in a spec file: where it is, which key, what is wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// 1-based line of the offending node, when known.
    pub line: Option<usize>,
    /// 1-based column (in characters) of the offending node, when known.
    pub column: Option<usize>,
    /// Key path of the offending node, e.g. `agent.env[1]` or `mounts[0].source`; empty for the
    /// document as a whole.
    pub path: String,
    /// What is wrong, lowercase, no trailing period.
    pub message: String,
    /// How to fix it, when there is something specific to say.
    pub hint: Option<String>,
}

impl Diagnostic {
    /// A diagnostic at a known position.
    #[must_use]
    pub fn at(line: usize, column: usize, path: &str, message: impl Into<String>) -> Self {
        Diagnostic {
            line: Some(line),
            column: Some(column),
            path: path.to_owned(),
            message: message.into(),
            hint: None,
        }
    }

    /// The same diagnostic with a fix attached.
    #[must_use]
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Writes the diagnostic as `{file}:{line}:{col}: {path}: {message}` plus, when a hint is
    /// present, a second line `  fix: {hint}`. The position is left out when unknown and the
    /// path when empty.
    ///
    /// # Errors
    /// Only those of the underlying writer.
    pub fn write_to(&self, file: &str, f: &mut impl fmt::Write) -> fmt::Result {
        f.write_str(file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        f.write_str(": ")?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  fix: {hint}")?;
        }
        Ok(())
    }
}

/// A spec that was rejected, with every problem found (not only the first).
///
/// `Display` writes one diagnostic per line (see [`Diagnostic::write_to`]), e.g.
///
/// ```text
/// acme.yaml:1:9: tenant: expected a string, found boolean `no` (YAML 1.1 would read it as false)
///   fix: quote it: "no"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render_diagnostics(.file, .diagnostics))]
pub struct SpecError {
    /// The spec's path as the user gave it ([`SpecContext::file`]).
    pub file: String,
    /// The problems, ordered by position in the file (document-level ones last).
    pub diagnostics: Vec<Diagnostic>,
}

impl SpecError {
    /// An error with one document-level diagnostic (no position, no key), e.g. "the file is
    /// too large".
    #[must_use]
    pub fn single(file: &str, message: impl Into<String>, hint: impl Into<String>) -> Self {
        SpecError {
            file: file.to_string(),
            diagnostics: vec![Diagnostic {
                line: None,
                column: None,
                path: String::new(),
                message: message.into(),
                hint: Some(hint.into()),
            }],
        }
    }

    /// The diagnostics as JSON: `{"file": F, "diagnostics": [{"line", "column", "path",
    /// "message", "hint"}]}` (`line`/`column` 1-based or null).
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "file": self.file,
            "diagnostics": self.diagnostics.iter().map(|d| serde_json::json!({
                "line": d.line, "column": d.column, "path": d.path, "message": d.message, "hint": d.hint,
            })).collect::<Vec<_>>(),
        })
    }
}

fn render_diagnostics(file: &str, diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for (i, d) in diagnostics.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        // Writing into a String cannot fail.
        let _ = d.write_to(file, &mut out);
    }
    out
}

/// Whether `text` gets past the YAML reading (encoding, syntax, budgets, tags) to the key
/// tables: what the JSON Schema ([`schema`]) can judge starts there.
#[must_use]
pub fn yaml_readable(text: &str) -> bool {
    yaml::read(text).is_ok()
}

/// The hosts of `text` that validation normalised, one line each
/// (``LINE:COL: egress.allow[i]: `WRITTEN` is read as `NORMALISED` ``); empty when none
/// changed or the text does not decode.
#[must_use]
pub fn host_changes(text: &str) -> Vec<String> {
    sections::decode(text)
        .map(|(raw, _)| sections::egress::host_changes(&raw))
        .unwrap_or_default()
}

/// Parses and validates a tenant spec.
///
/// `text` is the whole file. The caller checks the file size against [`MAX_SPEC_BYTES`] before
/// reading it; `parse` checks again. Order of checks: size, encoding (BOM, CR, tabs, control
/// and bidi/format characters; `yaml::text`), YAML syntax and budgets (aliases ≤ 100,
/// depth ≤ 32, one document, no merge keys, no tags), the closed schema (unknown and
/// duplicate keys, strict YAML types), then the semantic rules of each section (`spec/sections/*.rs`). Once the YAML
/// is well-formed, every schema and validation problem is reported, not only the first.
///
/// # Errors
/// [`SpecError`] carrying `ctx.file` and the diagnostics, ordered by line and column.
pub fn parse(text: &str, ctx: &SpecContext) -> Result<Spec, SpecError> {
    let fail = |mut diagnostics: Vec<Diagnostic>| {
        sort_diagnostics(&mut diagnostics);
        SpecError {
            file: ctx.file.clone(),
            diagnostics,
        }
    };
    if text.len() as u64 > MAX_SPEC_BYTES {
        return Err(fail(vec![Diagnostic {
            line: None,
            column: None,
            path: String::new(),
            message: format!(
                "file is {} bytes, larger than the limit of {MAX_SPEC_BYTES} bytes",
                text.len()
            ),
            hint: Some("a tenant spec is a short file; move long task text to `task.file`".into()),
        }]));
    }
    let (raw, mut diagnostics) = sections::decode(text).map_err(fail)?;
    let spec = sections::top::validate(&raw, ctx, &mut diagnostics);
    match spec {
        Some(spec) if diagnostics.is_empty() => Ok(spec),
        _ => {
            if diagnostics.is_empty() {
                // `sections::top::validate` returns None only after reporting why; keep the error
                // non-empty all the same.
                diagnostics.push(Diagnostic {
                    line: None,
                    column: None,
                    path: String::new(),
                    message: "spec is incomplete".into(),
                    hint: None,
                });
            }
            Err(fail(diagnostics))
        }
    }
}

/// Orders diagnostics by position; those without a position go last. Stable, so diagnostics at
/// the same position keep the order in which they were found.
fn sort_diagnostics(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by_key(|d| (d.line.is_none(), d.line, d.column));
}

#[cfg(test)]
mod tests;
