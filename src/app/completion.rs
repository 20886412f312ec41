//! Shell completion as the verbs use it: the tenant names a spec directory holds, and the
//! registration script of a shell (`completions`, `install`, `uninstall`).

use std::ffi::OsStr;

use anyhow::{Context as _, Result};
use clap_complete::env::Shells;

/// The stems of the `*.yaml` files in `dir` whose names are valid tenant names, sorted.
#[must_use]
pub fn tenant_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension() == Some(OsStr::new("yaml")))
        .filter_map(|p| p.file_stem().and_then(OsStr::to_str).map(str::to_owned))
        .filter(|t| super::tenant::check_name(t).is_ok())
        .collect();
    names.sort();
    names
}

/// The registration script of `shell` for the binary at `bin` (absolute).
///
/// # Errors
/// An unknown shell (the error names the known ones).
pub fn registration(shell: &str, bin: &str) -> Result<String> {
    let shells = Shells::builtins();
    let Some(completer) = shells.completer(shell) else {
        let known: Vec<&str> = shells.names().collect();
        return Err(crate::exit::input(format!(
            "unknown shell `{}`; one of: {}",
            shell.escape_debug(),
            known.join(", ")
        )));
    };
    let mut buf = Vec::new();
    completer
        .write_registration(COMPLETE_VAR, "cyclix", "cyclix", bin, &mut buf)
        .context("writing the completion script")?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The variable the registration script sets when it calls cyclix back.
pub const COMPLETE_VAR: &str = "COMPLETE";
