//! The one place that maps outcomes to process exit codes.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | ok (for `run`: the gate passed) |
//! | 1 | findings: an invalid spec, failed checks, a refused tier, a failed gate or probe, a twin that found a difference |
//! | 2 | cyclix itself failed (I/O, D-Bus, podman, a bug) |

use std::process::ExitCode;

/// How a verb ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything passed.
    Ok,
    /// The verb worked and found problems (reported on stderr/stdout already).
    Findings,
}

/// Exit status 0.
pub const OK: u8 = 0;
/// Exit status 1.
pub const FINDINGS: u8 = 1;
/// Exit status 2.
pub const TOOL_FAILED: u8 = 2;

impl From<Outcome> for ExitCode {
    fn from(o: Outcome) -> Self {
        ExitCode::from(match o {
            Outcome::Ok => OK,
            Outcome::Findings => FINDINGS,
        })
    }
}

/// The exit code for an error that escaped a verb: always "cyclix failed", except a broken
/// pipe on stdout (`cyclix ... | head`), which is success (as ripgrep does).
#[must_use]
pub fn for_error(err: &anyhow::Error) -> ExitCode {
    let broken_pipe = err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    });
    ExitCode::from(if broken_pipe { OK } else { TOOL_FAILED })
}
