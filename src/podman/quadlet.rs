//! Podman's Quadlet generator, run by cyclix over a run's Quadlet files (issue 33 item 3; the
//! caller is `run::phases::bring_up::load`).

use std::path::Path;
use std::time::Duration;

use super::{PodmanError, Result};
use crate::process;

/// Deadline of one run of Quadlet's generator over a run's files: 10 s (it takes about 10 ms).
pub const GENERATOR_DEADLINE: Duration = Duration::from_secs(10);

/// The `PATH` Quadlet's generator runs with: systemd's default for the processes it starts.
const GENERATOR_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin";

/// Runs `generator` (a `podman-user-generator`, `host::facts::find_generator`) as the user
/// manager would (`-user`, without its kernel-log output) over the directories `sources` in
/// that order (`QUADLET_UNIT_DIRS`: the first file of a name wins, drop-ins merge from all),
/// writing the units into `out`. It gets none of cyclix's environment (a `PODMAN=` there
/// would name the binary every unit runs): the directories, `PATH`, and the `HOME`,
/// `XDG_RUNTIME_DIR` and `XDG_CONFIG_HOME` a user generator has from the manager. Returns what
/// it printed on stderr: the files it could not turn into units (it still generates the
/// others and exits 1).
///
/// # Errors
/// [`PodmanError::Command`]: it could not be started or outran [`GENERATOR_DEADLINE`];
/// [`PodmanError::Output`]: a directory's path holds a `:`.
pub fn generate_units(generator: &str, sources: &[&Path], out: &Path) -> Result<String> {
    let action = "running Quadlet's generator over the run's files";
    let dirs = std::env::join_paths(sources)
        .map_err(|e| PodmanError::Output {
            action: action.to_string(),
            detail: format!("a Quadlet directory's path cannot be listed: {e}"),
        })?
        .to_string_lossy()
        .into_owned();
    let out = crate::context::path_str(out);
    let var = |k: &str| std::env::var(k).ok();
    let (home, runtime, config) = (var("HOME"), var("XDG_RUNTIME_DIR"), var("XDG_CONFIG_HOME"));
    let env = [
        ("QUADLET_UNIT_DIRS", Some(dirs.as_str())),
        ("PATH", Some(GENERATOR_PATH)),
        ("HOME", home.as_deref()),
        ("XDG_RUNTIME_DIR", runtime.as_deref()),
        ("XDG_CONFIG_HOME", config.as_deref()),
    ];
    let ran = process::run_with(
        generator,
        &["-user", "-no-kmsg-log", &out],
        &process::Opts {
            deadline: GENERATOR_DEADLINE,
            env_remove_prefixes: &[""],
            env: &env,
            ..process::Opts::default()
        },
    )
    .map_err(|source| PodmanError::Command {
        action: action.to_string(),
        source,
    })?;
    Ok(ran.stderr.trim().to_string())
}
