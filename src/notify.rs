//! The one adapter over the user's notify command (`notify.command`, issue 18 item 6): run on
//! the host, outside any sandbox, with the run summary as JSON on stdin and a deadline.

use std::time::Duration;

use anyhow::{Result, bail};

/// Deadline for the notify command (60 s): a mail or webhook call that hangs fails.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `command` (an argv) with `summary` on stdin.
///
/// # Errors
/// An empty command, one that cannot start, outlives [`DEADLINE`] or exits non-zero (its
/// status and stderr named).
pub fn tell(command: &[String], summary: &[u8]) -> Result<()> {
    let Some((program, rest)) = command.split_first() else {
        bail!("notify.command is empty");
    };
    let args: Vec<&str> = rest.iter().map(String::as_str).collect();
    let out = crate::process::run_status(
        program,
        &args,
        Some(summary),
        DEADLINE,
        "check notify.command in the tenant's spec",
    )?;
    if !out.status.success() {
        bail!(
            "the notify command `{}` exited with {}: {}",
            command.join(" "),
            out.status,
            out.stderr.trim()
        );
    }
    Ok(())
}
