//! The one adapter over `journalctl` (the user journal): nothing else in the crate spawns it.
//! Every read goes through [`crate::process`] with the deadline [`DEADLINE`].

use std::time::Duration;

use anyhow::{Context as _, Result};

use crate::process::{self, ProcessError};

/// Deadline for one journal read (30 s).
pub const DEADLINE: Duration = Duration::from_secs(30);

/// `journalctl --user --unit UNIT` followed by `tail` (the output options).
fn argv<'a>(unit: &'a str, tail: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--user", "--unit", unit];
    args.extend_from_slice(tail);
    args
}

/// The last `lines` entries of `unit`'s user journal in journalctl's `short-iso` form (what
/// `cyclix logs` prints): the whole captured stdout.
///
/// # Errors
/// journalctl is missing (the error asks whether it is installed), fails, or runs past
/// [`DEADLINE`].
pub fn unit_log(unit: &str, lines: u32) -> Result<String, ProcessError> {
    let n = lines.to_string();
    let args = argv(
        unit,
        &["--no-pager", "--lines", &n, "--output", "short-iso"],
    );
    let out = process::run(
        "journalctl",
        &args,
        None,
        DEADLINE,
        " (is journalctl installed?)",
    )?;
    Ok(out.stdout)
}

/// Every message of `unit` in the user journal, one per line, without metadata
/// (`--output cat --quiet`): how a run reads a service's or a gate's lines.
///
/// # Errors
/// journalctl is missing, fails or runs past [`DEADLINE`]; the error says "reading the journal
/// of UNIT" and that the proxy decisions come from the user journal.
pub fn unit_messages(unit: &str) -> Result<Vec<String>> {
    messages(unit, &[])
}

/// [`unit_messages`] of priority `info` only (`--priority=info..info`, journalctl(1)): a
/// container's stdout under conmon's journald log driver (stderr is `err`), how a run reads
/// its proxy's decisions apart from squid's cache log.
///
/// # Errors
/// As [`unit_messages`].
pub fn unit_info_messages(unit: &str) -> Result<Vec<String>> {
    messages(unit, &["--priority=info..info"])
}

/// [`unit_messages`] logged at or after `since_s` (seconds since the Unix epoch;
/// `--since @S`, journalctl(1)): what one start of `unit` said, e.g. why a run unit exited
/// before its run wrote a record.
///
/// # Errors
/// As [`unit_messages`].
pub fn unit_messages_since(unit: &str, since_s: u64) -> Result<Vec<String>> {
    let since = format!("--since=@{since_s}");
    messages(unit, &[since.as_str()])
}

fn messages(unit: &str, filter: &[&str]) -> Result<Vec<String>> {
    let mut args = argv(unit, &["--output", "cat", "--no-pager", "--quiet"]);
    args.extend_from_slice(filter);
    let out = process::run(
        "journalctl",
        &args,
        None,
        DEADLINE,
        " (is journalctl installed? the run's proxy decisions are read from the user journal)",
    )
    .with_context(|| format!("reading the journal of {unit}"))?;
    Ok(out.stdout.lines().map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_comes_first_then_the_output_options() {
        assert_eq!(
            argv("cyclix-run@t.service", &["--output", "cat"]),
            [
                "--user",
                "--unit",
                "cyclix-run@t.service",
                "--output",
                "cat"
            ]
        );
    }
}
