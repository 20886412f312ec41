//! The one place that maps outcomes to process exit codes.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | ok (for `run`: the gate passed) |
//! | 1 | findings: an invalid spec, failed checks, a refused tier, a failed gate or probe, a twin that found a difference; a person's missing input ([`InputError`]: an unknown tenant, an unset variable the spec names, a local image not built) |
//! | 2 | cyclix itself failed (I/O, D-Bus, podman, a bug), or the command line is wrong (clap's usage error: an unknown verb or flag, a missing argument; nothing ran; LSB's "invalid argument") |
//! | 3 | interrupted: a person stopped the run (`cyclix stop`, `systemctl --user stop`, Ctrl-C: SIGTERM or SIGINT); teardown ran. The run unit lists it in `SuccessExitStatus=`, so it is not `failed` (issue 19, item 6) |

use std::process::ExitCode;

/// How a verb ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything passed.
    Ok,
    /// The verb worked and found problems (reported on stderr/stdout already).
    Findings,
    /// A person stopped it (SIGTERM or SIGINT) and it cleaned up.
    Interrupted,
}

/// A person's missing or wrong input, found before anything was created: the verb exits 1
/// (a finding), not 2 ("cyclix failed"). The message names the input and the fix.
#[derive(Debug)]
pub struct InputError(pub String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

/// An [`InputError`] as an `anyhow::Error`.
#[must_use]
pub fn input(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError(message.into()))
}

/// Exit status 0.
pub const OK: u8 = 0;
/// Exit status 1.
pub const FINDINGS: u8 = 1;
/// Exit status 2.
pub const TOOL_FAILED: u8 = 2;
/// Exit status 3: interrupted by a person (listed in the run unit's `SuccessExitStatus=`).
pub const INTERRUPTED: u8 = 3;

impl From<Outcome> for ExitCode {
    fn from(o: Outcome) -> Self {
        ExitCode::from(match o {
            Outcome::Ok => OK,
            Outcome::Findings => FINDINGS,
            Outcome::Interrupted => INTERRUPTED,
        })
    }
}

/// Whether `err` is stdout's reader having gone away (`EPIPE`, `cyclix ... | head`).
#[must_use]
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The exit code for an error that escaped a verb: "cyclix failed", except a person's input
/// ([`InputError`]: a finding) and a broken pipe on stdout (`cyclix ... | head`), which is
/// success (as ripgrep does).
#[must_use]
pub fn for_error(err: &anyhow::Error) -> ExitCode {
    let broken_pipe = is_broken_pipe(err);
    let input = err
        .chain()
        .any(|c| c.downcast_ref::<InputError>().is_some());
    ExitCode::from(if broken_pipe {
        OK
    } else if input {
        FINDINGS
    } else {
        TOOL_FAILED
    })
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
            INTERRUPTED => Some(Outcome::Interrupted),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_through_outcomes() {
        for o in [Outcome::Ok, Outcome::Findings, Outcome::Interrupted] {
            let code = match o {
                Outcome::Ok => OK,
                Outcome::Findings => FINDINGS,
                Outcome::Interrupted => INTERRUPTED,
            };
            assert_eq!(Outcome::from_code(code), Some(o));
            assert_eq!(ExitCode::from(o), ExitCode::from(code));
        }
        assert_eq!(Outcome::from_code(TOOL_FAILED), None);
        assert_eq!(Outcome::from_passed(true), Outcome::Ok);
        assert_eq!(Outcome::from_passed(false), Outcome::Findings);
    }

    #[test]
    fn a_persons_input_is_a_finding_and_anything_else_a_failure() {
        let e = input("no tenant `x`").context("cyclix status");
        assert_eq!(for_error(&e), ExitCode::from(FINDINGS));
        assert_eq!(
            for_error(&anyhow::anyhow!("podman failed")),
            ExitCode::from(TOOL_FAILED)
        );
    }
}
