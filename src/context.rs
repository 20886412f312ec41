//! Host facts resolved once at start-up from the real environment. The only module that
//! reads environment variables (`std::env`); everything downstream receives paths from here.

use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};

/// The invoking user's directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEnv {
    /// `$HOME`.
    pub home: PathBuf,
    /// `$XDG_RUNTIME_DIR` (e.g. `/run/user/1000`); `None` when unset.
    pub runtime_dir: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` or `~/.config`.
    pub config_home: PathBuf,
    /// `$XDG_DATA_HOME` or `~/.local/share`.
    pub data_home: PathBuf,
    /// `$XDG_STATE_HOME` or `~/.local/state`.
    pub state_home: PathBuf,
    /// `$CYCLIX_CONFIG`: another file for cyclix's own settings than
    /// `$XDG_CONFIG_HOME/cyclix/config.yaml` (`spec::host_config`); `None` when unset.
    pub config_file: Option<PathBuf>,
}

fn abs_var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

impl HostEnv {
    /// Reads the environment.
    ///
    /// # Errors
    /// When `$HOME` is unset or not absolute.
    pub fn from_env() -> Result<Self> {
        let Some(home) = abs_var("HOME") else {
            bail!(
                "$HOME is unset or not an absolute path; cyclix needs it for ~/.config/cyclix and ~/.local/share/cyclix"
            )
        };
        Ok(HostEnv {
            runtime_dir: abs_var("XDG_RUNTIME_DIR"),
            config_home: abs_var("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config")),
            data_home: abs_var("XDG_DATA_HOME").unwrap_or_else(|| home.join(".local/share")),
            state_home: abs_var("XDG_STATE_HOME").unwrap_or_else(|| home.join(".local/state")),
            config_file: abs_var("CYCLIX_CONFIG"),
            home,
        })
    }

    /// `$XDG_RUNTIME_DIR`, required by every verb that touches the user manager or runs.
    ///
    /// # Errors
    /// When it is unset, with the usual causes as the fix.
    pub fn runtime_dir(&self) -> Result<&PathBuf> {
        self.runtime_dir.as_ref().context(
            "$XDG_RUNTIME_DIR is unset: log in through a real session (not `su`), or use `machinectl shell USER@` / `systemd-run --user`",
        )
    }

    /// Every path cyclix uses, from these base directories ([`crate::layout`]).
    #[must_use]
    pub fn layout(&self) -> crate::layout::Layout {
        crate::layout::Layout {
            config_home: self.config_home.clone(),
            data_home: self.data_home.clone(),
            state_home: self.state_home.clone(),
            runtime_dir: self.runtime_dir.clone(),
        }
    }

    /// The paths under `$XDG_RUNTIME_DIR` ([`crate::layout::Runtime`]).
    ///
    /// # Errors
    /// As [`HostEnv::runtime_dir`].
    pub fn runtime(&self) -> Result<crate::layout::Runtime> {
        Ok(crate::layout::Runtime(self.runtime_dir()?.clone()))
    }
}

/// `JOURNAL_STREAM` is set: stdout or stderr is connected to the journal (systemd.exec(5),
/// "Environment variables in spawned processes"), as when cyclix runs under its run unit.
#[must_use]
pub fn journal_stream() -> bool {
    std::env::var_os("JOURNAL_STREAM").is_some()
}

/// The directories of `$PATH`, in order (empty entries and relative ones dropped: podman and
/// the kernel's `execvp` would treat them as the working directory, which `check` refuses to
/// trust).
#[must_use]
pub fn search_path() -> Vec<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .filter(|d| d.is_absolute())
                .collect()
        })
        .unwrap_or_default()
}

/// `$XDG_RUNTIME_DIR` exactly as set (also when relative), for reporting; `None` when unset.
#[must_use]
pub fn runtime_dir_raw() -> Option<String> {
    std::env::var_os("XDG_RUNTIME_DIR").map(|v| v.to_string_lossy().into_owned())
}

/// Absolute path of the running cyclix binary (written into the unit template).
///
/// # Errors
/// When the OS cannot tell.
pub fn current_exe() -> Result<PathBuf> {
    std::env::current_exe().context("finding the path of the cyclix binary")
}

/// Lossy UTF-8 string of a path, for the pure core (which works on `str`).
#[must_use]
pub fn path_str(p: &std::path::Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The value of the variable `name` in cyclix's own environment (the source of the secrets a
/// spec names in `agent.env`); `None` when unset. The value is returned as bytes and must only
/// ever travel to podman on stdin.
#[must_use]
pub fn secret_value(name: &str) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt as _;
    std::env::var_os(name).map(|v| v.as_bytes().to_vec())
}

/// cyclix's whole environment as `(name, value bytes)`: the leak watch looks for the
/// credentials among it that were not handed over (`run::boundary::watch_list`).
#[must_use]
pub fn all_env() -> Vec<(String, Vec<u8>)> {
    use std::os::unix::ffi::OsStrExt as _;
    std::env::vars_os()
        .map(|(k, v)| (k.to_string_lossy().into_owned(), v.as_bytes().to_vec()))
        .collect()
}

/// The value of `name` in cyclix's environment; `None` when unset or not UTF-8 (the run
/// canary's variables, `run::canary`).
#[must_use]
pub fn utf8_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Whether cyclix's environment names an ssh command for git (`GIT_SSH_COMMAND` or
/// `GIT_SSH`): a delivery then leaves ssh to it rather than adding `BatchMode=yes`.
#[must_use]
pub fn git_ssh_from_env() -> bool {
    ["GIT_SSH_COMMAND", "GIT_SSH"]
        .iter()
        .any(|n| std::env::var_os(n).is_some_and(|v| !v.is_empty()))
}

/// Whether standard error is connected to the journal: `$JOURNAL_STREAM` (`DEV:INODE`, set by
/// systemd for a unit whose output goes to the journal, systemd.exec(5)) names the very file
/// that fd 2 is. A child that inherited the variable but has its stderr elsewhere gets false.
#[must_use]
pub fn stderr_is_journal() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = stream.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    let Ok(meta) = std::fs::metadata("/proc/self/fd/2") else {
        return false;
    };
    dev.parse() == Ok(meta.dev()) && ino.parse() == Ok(meta.ino())
}
