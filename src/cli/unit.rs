//! The clap types of `cyclix unit ...` (plumbing over the systemd seam) and the duration
//! parser of its `--timeout`. Pure data; `app::unit_cmd` runs them.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use crate::systemd::JobMode;

/// `cyclix unit`: drive the systemd user manager directly.
#[derive(Debug, Clone, Args)]
pub struct UnitArgs {
    /// The user's runtime directory; the reload/job lock is `DIR/cyclix/systemd.lock`.
    #[arg(long, env = "XDG_RUNTIME_DIR", value_name = "DIR")]
    pub runtime_dir: PathBuf,

    /// What to do.
    #[command(subcommand)]
    pub command: UnitCommand,
}

/// The verbs of `cyclix unit`.
#[derive(Debug, Clone, Subcommand)]
pub enum UnitCommand {
    /// Reload the user manager (like `systemctl --user daemon-reload`; reruns Quadlet).
    Reload,
    /// Start a unit and wait until it is active (or a oneshot has finished).
    Start(JobArgs),
    /// Stop a unit and wait until it is inactive.
    Stop(JobArgs),
    /// Restart a unit and wait until it is active.
    Restart(JobArgs),
    /// Clear a unit's failed state.
    ResetFailed {
        /// Unit name, e.g. `foo.service`.
        name: String,
    },
    /// Show a unit's state (and a timer's next elapse).
    Show {
        /// Unit name, e.g. `foo.service` or `foo.timer`.
        name: String,
        /// Print JSON instead of `Key=value` lines.
        #[arg(long)]
        json: bool,
    },
    /// Enable unit files (symlinks in ~/.config/systemd/user/*.wants), then reload.
    Enable {
        /// Unit names.
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Disable unit files, then reload.
    Disable {
        /// Unit names.
        #[arg(required = true)]
        names: Vec<String>,
    },
}

/// Arguments of `start`, `stop` and `restart`.
#[derive(Debug, Clone, Args)]
pub struct JobArgs {
    /// Unit name, e.g. `foo.service`.
    pub name: String,
    /// How to treat conflicting queued jobs (systemctl --job-mode).
    #[arg(long, value_enum, default_value_t = ModeArg::Replace)]
    pub mode: ModeArg,
    /// Deadline for the whole operation: `30s`, `500ms`, `2m`, `1h` or plain seconds.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// `--mode` values; mirror [`JobMode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Replace conflicting queued jobs.
    Replace,
    /// Fail if a conflicting job is queued.
    Fail,
    /// Stop every unit the started one does not need.
    Isolate,
    /// Ignore all dependencies.
    IgnoreDependencies,
    /// Ignore requirement dependencies.
    IgnoreRequirements,
}

impl From<ModeArg> for JobMode {
    fn from(mode: ModeArg) -> Self {
        match mode {
            ModeArg::Replace => JobMode::Replace,
            ModeArg::Fail => JobMode::Fail,
            ModeArg::Isolate => JobMode::Isolate,
            ModeArg::IgnoreDependencies => JobMode::IgnoreDependencies,
            ModeArg::IgnoreRequirements => JobMode::IgnoreRequirements,
        }
    }
}

/// Parses `500ms`, `30s`, `2m`, `1h` or plain seconds (`45`) into a [`Duration`].
///
/// # Errors
/// A message naming the accepted forms, for clap to show.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(split);
    let bad = || format!("invalid duration {text:?}; use e.g. 500ms, 30s, 2m, 1h or plain seconds");
    let value: u64 = digits.parse().map_err(|_| bad())?;
    let duration = match suffix {
        "ms" => Duration::from_millis(value),
        "" | "s" => Duration::from_secs(value),
        "m" | "min" => Duration::from_secs(value.checked_mul(60).ok_or_else(bad)?),
        "h" => Duration::from_secs(value.checked_mul(3600).ok_or_else(bad)?),
        _ => return Err(bad()),
    };
    if duration.is_zero() {
        return Err(format!("duration {text:?} must be greater than zero"));
    }
    Ok(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        for bad in ["", "s", "1.5s", "10x", "0s", "-1s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} must be rejected");
        }
    }
}
