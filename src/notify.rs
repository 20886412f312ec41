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

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn the_command_gets_the_summary_on_stdin_and_a_failure_is_named() {
        let d = tempfile::tempdir().expect("tmp");
        let out = d.path().join("told.json");
        let script = format!("cat > '{}'", out.display());
        tell(&argv(&["sh", "-c", &script]), b"{\"run_id\":\"r1\"}").expect("told");
        assert_eq!(
            std::fs::read_to_string(&out).expect("read"),
            "{\"run_id\":\"r1\"}"
        );
        let e = tell(&argv(&["sh", "-c", "echo no mail >&2; exit 3"]), b"{}").expect_err("exit 3");
        assert_eq!(
            e.to_string(),
            "the notify command `sh -c echo no mail >&2; exit 3` exited with exit status: 3: no mail"
        );
        assert_eq!(
            tell(&[], b"{}").expect_err("empty").to_string(),
            "notify.command is empty"
        );
        assert!(tell(&argv(&["/nonexistent/notify"]), b"{}").is_err());
    }
}
