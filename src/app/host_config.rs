//! Loading cyclix's own settings (`spec::host_config`) and the host's run capacity as the verbs
//! show it: `cyclix run` takes a slot by it, `cyclix status` shows the slots and the queue,
//! `cyclix check` checks the file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::context::HostEnv;
use crate::run::capacity::{self, Occupant};
use crate::spec::host_config::{self, HostConfig};

/// The settings in force and where they come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The settings (defaults when the file does not exist).
    pub config: HostConfig,
    /// The file read (or that would be read).
    pub file: PathBuf,
    /// Whether the file exists.
    pub exists: bool,
    /// The cores this process may use (`available_parallelism`: affinity and cgroup quota).
    pub cores: usize,
}

impl Loaded {
    /// The limit in force.
    #[must_use]
    pub fn max_runs(&self) -> u32 {
        self.config.max_runs_for(self.cores)
    }

    /// Where the limit comes from: the file, or the default.
    #[must_use]
    pub fn max_runs_source(&self) -> String {
        match self.config.max_runs {
            Some(_) => format!("max_runs in {}", self.file.display()),
            None => format!("default: 2 per core, {} core(s)", self.cores),
        }
    }

    /// What `cyclix run` asks of the limit.
    #[must_use]
    pub fn request(&self, runtime_dir: &Path, records: &Path) -> capacity::Request {
        capacity::Request {
            dirs: capacity::Dirs::under(runtime_dir),
            records: records.to_path_buf(),
            max_runs: self.max_runs(),
            timeout: Duration::from_secs(self.config.queue_timeout_s),
            config: self.file.display().to_string(),
        }
    }
}

/// The config file: `$CYCLIX_CONFIG`, else `$XDG_CONFIG_HOME/cyclix/config.yaml`.
#[must_use]
pub fn path(env: &HostEnv) -> PathBuf {
    env.config_file
        .clone()
        .unwrap_or_else(|| env.layout().config_file())
}

/// Reads the settings; a missing file is the defaults.
///
/// # Errors
/// The file cannot be read, or does not validate: the message names the file, line and column, the key
/// and the fix (one line per problem).
pub fn load(env: &HostEnv) -> Result<Loaded, String> {
    let file = path(env);
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let (config, exists) = match std::fs::read(&file) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes).map_err(|_| {
                format!(
                    "{}: not UTF-8 text; fix: write it as UTF-8 YAML (keys max_runs, queue_timeout, metrics_textfile)",
                    file.display()
                )
            })?;
            let c = host_config::parse(&text, &file.display().to_string())
                .map_err(|e| e.to_string().trim_end().to_string())?;
            (c, true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && env.config_file.is_some() => {
            // A file named on purpose that is not there is a typo, not "the defaults".
            return Err(format!(
                "{}: named by CYCLIX_CONFIG but does not exist; fix: create it, or unset \
                 CYCLIX_CONFIG for {}",
                file.display(),
                env.layout().config_file().display()
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (HostConfig::default(), false),
        Err(e) => return Err(format!("{}: cannot be read: {e}", file.display())),
    };
    Ok(Loaded {
        config,
        file,
        exists,
        cores,
    })
}

/// The host's run capacity now (`cyclix status`; JSON key `capacity`).
#[derive(Debug, Clone, Serialize)]
pub struct CapacityView {
    /// The limit in force.
    pub max_runs: u32,
    /// Where it comes from.
    pub from: String,
    /// The runs holding a slot.
    pub running: Vec<Occupant>,
    /// The runs waiting for one, oldest first.
    pub queued: Vec<Occupant>,
}

/// Reads the slots and the queue under `runtime_dir` for `loaded`'s limit.
#[must_use]
pub fn view(loaded: &Loaded, runtime_dir: &Path) -> CapacityView {
    let dirs = capacity::Dirs::under(runtime_dir);
    CapacityView {
        max_runs: loaded.max_runs(),
        from: loaded.max_runs_source(),
        running: capacity::occupants(&dirs.slots),
        queued: capacity::waiters(&dirs.queue),
    }
}

/// The text lines of a [`CapacityView`] (`now_ms`: for how long each run has waited).
#[must_use]
pub fn view_lines(v: &CapacityView, now_ms: u64) -> Vec<String> {
    let mut out = vec![format!(
        "run slots: {} of {} taken ({})",
        v.running.len(),
        v.max_runs,
        v.from
    )];
    for q in &v.queued {
        out.push(format!(
            "  queued: {}/{} for {} s",
            q.tenant,
            q.run_id,
            now_ms.saturating_sub(q.since_ms) / 1000
        ));
    }
    out
}
