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

impl Outcome {
    /// [`Outcome::Ok`] when `passed`, else [`Outcome::Findings`].
    #[must_use]
    pub fn from_passed(passed: bool) -> Self {
        if passed {
            Outcome::Ok
        } else {
            Outcome::Findings
        }
    }

    /// The outcome for an exit status a result computed itself (a run's
    /// `RunResult::exit_code`): [`OK`] and [`FINDINGS`] map to theirs; [`TOOL_FAILED`] (or any
    /// other code) is `None`, which the verb turns into an error (exit 2).
    #[must_use]
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            OK => Some(Outcome::Ok),
            FINDINGS => Some(Outcome::Findings),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_through_outcomes() {
        for o in [Outcome::Ok, Outcome::Findings] {
            let code = match o {
                Outcome::Ok => OK,
                Outcome::Findings => FINDINGS,
            };
            assert_eq!(Outcome::from_code(code), Some(o));
            assert_eq!(ExitCode::from(o), ExitCode::from(code));
        }
        assert_eq!(Outcome::from_code(TOOL_FAILED), None);
        assert_eq!(Outcome::from_passed(true), Outcome::Ok);
        assert_eq!(Outcome::from_passed(false), Outcome::Findings);
    }
}
