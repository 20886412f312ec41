//! A run's container output as cyclix kept it, read back (`logs`, `drill`).

use std::path::Path;

use anyhow::{Context as _, Result};

/// The container's own lines of a kept log (`LABEL| TEXT` without the prefix; cyclix's
/// markers left out): what the drill searches.
///
/// # Errors
/// The log cannot be read.
pub fn container_lines(path: &Path, label: &str) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let prefix = format!("{label}| ");
    Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix).map(str::to_string))
        .collect())
}
