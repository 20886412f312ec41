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

/// The messages of priority `info` (`--priority=info..info`) whose `SYSLOG_IDENTIFIER` is
/// `identifier` (`--identifier`, journalctl(1)): how a run reads its proxy's lines. Both
/// backends tag a container unit's lines with the unit's name (`SyslogIdentifier=%N`): under
/// Quadlet conmon's journald driver writes them (stdout `info`, stderr `err`); under the plain
/// backend the attached `podman run` relays both streams through the unit's journal stream at
/// `info`, and as it moves itself into a `podman-PID.scope` (`--cgroups=split`) journald files
/// them under that scope, not the unit (measured on podman 4.3.1), so `--unit` finds none of
/// them there. Which lines are decisions is told by their key (the collect phase), never by
/// priority alone.
///
/// # Errors
/// As [`unit_messages`].
pub fn identifier_info_messages(identifier: &str) -> Result<Vec<String>> {
    let id = format!("--identifier={identifier}");
    let args = [
        "--user",
        id.as_str(),
        "--priority=info..info",
        "--output",
        "cat",
        "--no-pager",
        "--quiet",
    ];
    run_messages(identifier, &args)
}

/// What user unit `unit` (with `SyslogIdentifier=identifier`) said at or after `since_ms`
/// (ms since the Unix epoch; `--since=@S.mmm`, journalctl(1) and systemd.time(7)): the lines
/// filed under the unit OR carrying its identifier (`_SYSTEMD_USER_UNIT=U + SYSLOG_IDENTIFIER=I`),
/// since a process that exits at once leaves its last stderr lines untied to the unit. Why a
/// run unit ended before its run wrote a record.
///
/// # Errors
/// As [`unit_messages`].
pub fn unit_messages_since(unit: &str, identifier: &str, since_ms: u128) -> Result<Vec<String>> {
    let since = format!("--since=@{}.{:03}", since_ms / 1000, since_ms % 1000);
    let by_unit = format!("_SYSTEMD_USER_UNIT={unit}");
    let by_id = format!("SYSLOG_IDENTIFIER={identifier}");
    let args = [
        "--user",
        since.as_str(),
        "--output",
        "cat",
        "--no-pager",
        "--quiet",
        by_unit.as_str(),
        "+",
        by_id.as_str(),
    ];
    run_messages(unit, &args)
}

fn messages(unit: &str, filter: &[&str]) -> Result<Vec<String>> {
    let mut args = argv(unit, &["--output", "cat", "--no-pager", "--quiet"]);
    args.extend_from_slice(filter);
    run_messages(unit, &args)
}

fn run_messages(unit: &str, args: &[&str]) -> Result<Vec<String>> {
    let out = process::run(
        "journalctl",
        args,
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
