//! The host side of tier `gvisor`: the look for gVisor's `runsc` (on `$PATH`, then Debian's
//! `/usr/bin` and `/usr/sbin`), its `--version` with a deadline and the user manager's
//! delegated cgroup controllers, made once per process ([`look`]) so the tier gate, the run
//! and the pool see the same fact. The decisions over them are `tier::runsc`'s.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use crate::process;
use crate::tier::runsc::{OciRuntime, parse_version, runtime_flags};

/// The variable naming the runsc to use (an absolute path) instead of the one looked up: a
/// runsc outside Debian's places, or a newer upstream release.
pub const RUNSC_VAR: &str = "CYCLIX_RUNSC";

/// How long `runsc --version` may take.
pub const VERSION_DEADLINE: Duration = Duration::from_secs(5);

/// The controllers the user manager of `uid` delegates (its `cgroup.controllers` under
/// `/sys/fs/cgroup`); empty when the file cannot be read (cgroup v1, no user manager).
#[must_use]
pub fn delegated_controllers(uid: u32) -> Vec<String> {
    let path =
        format!("/sys/fs/cgroup/user.slice/user-{uid}.slice/user@{uid}.service/cgroup.controllers");
    std::fs::read_to_string(path)
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Where `runsc` is looked for: `$PATH`, then Debian's `/usr/bin` and `/usr/sbin` (a user's
/// `$PATH` may lack the latter).
fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for d in ["/usr/bin", "/usr/sbin"] {
        if !dirs.iter().any(|x| x.as_os_str() == d) {
            dirs.push(PathBuf::from(d));
        }
    }
    dirs
}

/// Looks for `runsc` now: its path, `--version` (within [`VERSION_DEADLINE`]) and the flags
/// this host needs.
///
/// # Errors
/// A sentence for the tier gate and `cyclix check`: runsc not found, or `--version` failed
/// or said something else.
pub fn look_now() -> Result<OciRuntime, String> {
    let path = match std::env::var(RUNSC_VAR) {
        Ok(p) if !p.is_empty() => {
            let p = PathBuf::from(p);
            if !p.is_absolute() || !crate::host::facts::is_executable_file(&p) {
                return Err(format!(
                    "${RUNSC_VAR} is {}, which is not an executable file named by an absolute path (unset it to use the runsc on $PATH, or name runsc's absolute path; for runs of the user manager, `systemctl --user show-environment` shows it)",
                    p.display()
                ));
            }
            p.to_string_lossy().into_owned()
        }
        _ => crate::host::facts::which("runsc", &search_dirs()).ok_or_else(|| {
            format!(
                "runsc is not on $PATH, /usr/bin or /usr/sbin (Debian: `apt install runsc`; or \
                 set ${RUNSC_VAR} to its path)"
            )
        })?,
    };
    let opts = process::Opts {
        deadline: VERSION_DEADLINE,
        hint: "is gVisor's runsc installed?",
        ..process::Opts::default()
    };
    let out = process::run_with_ok(&path, &["--version"], &opts)
        .map_err(|e| format!("`{path} --version` failed: {e}"))?;
    let text = out.stdout.clone();
    let version = parse_version(&text).ok_or_else(|| {
        format!(
            "`{path} --version` did not name a runsc version (it said: {:?})",
            text.lines().next().unwrap_or("")
        )
    })?;
    Ok(OciRuntime {
        path,
        version,
        flags: runtime_flags(&delegated_controllers(nix::unistd::getuid().as_raw())),
    })
}

/// [`look_now`], once per process: the tier gate, the run's render and the pool's fill read
/// the same answer.
///
/// # Errors
/// As [`look_now`].
pub fn look() -> Result<OciRuntime, String> {
    static LOOK: OnceLock<Result<OciRuntime, String>> = OnceLock::new();
    LOOK.get_or_init(look_now).clone()
}
