//! Every path cyclix reads or writes, in one pure module: built from the XDG base directories
//! (resolved once from the environment by `context::HostEnv`), never from the environment here.
//!
//! | what | where |
//! | --- | --- |
//! | cyclix's own settings (`max_runs`) | `$XDG_CONFIG_HOME/cyclix/config.yaml` (or `$CYCLIX_CONFIG`) |
//! | tenant specs and env files | `$XDG_CONFIG_HOME/cyclix/tenants/TENANT.{yaml,env}` |
//! | installed unit templates | `$XDG_CONFIG_HOME/systemd/user/` |
//! | records, markers, phase notes, import staging | `$XDG_STATE_HOME/cyclix/runs/TENANT/RUN.{json,running,phase,import,uncommitted.diff}` |
//! | work trees (private repositories, linked worktrees) | `$XDG_DATA_HOME/cyclix/worktrees/TENANT/RUN` (gate checkout: `RUN.gate`) |
//! | the demo tenant's repository | `$XDG_DATA_HOME/cyclix/demo` |
//! | run state (control dir, task, proxy config) | `$XDG_RUNTIME_DIR/cyclix/runs/RUN` |
//! | run slots and the queue (`max_runs`) | `$XDG_RUNTIME_DIR/cyclix/{slots/N.lock,queue/RUN.json}` |
//! | reservations (subnets, ports) | `$XDG_RUNTIME_DIR/cyclix/{subnets,ports}/N` |
//! | warm pool state (issue 16) | `$XDG_RUNTIME_DIR/cyclix/pool/TENANT/{filling,ready,claimed,expiring}/ENV` |
//! | locks (tenant, delivery, systemd reload) | `$XDG_RUNTIME_DIR/cyclix/locks/`, `$XDG_RUNTIME_DIR/cyclix/systemd.lock` |
//! | rendered Quadlet files | `$XDG_RUNTIME_DIR/containers/systemd/` (podman-systemd.unit(5), "rootless, runtime") |
//! | rendered plain units | `$XDG_RUNTIME_DIR/systemd/user/` (systemd.unit(5), "user unit search path") |
//!
//! The runtime directories live on a tmpfs that goes with the user's last session; records
//! and work trees are on disk.

use std::path::{Path, PathBuf};

/// The base directories all paths derive from (`context::HostEnv` fills them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `$XDG_CONFIG_HOME` (or `~/.config`).
    pub config_home: PathBuf,
    /// `$XDG_DATA_HOME` (or `~/.local/share`).
    pub data_home: PathBuf,
    /// `$XDG_STATE_HOME` (or `~/.local/state`).
    pub state_home: PathBuf,
    /// `$XDG_RUNTIME_DIR`; `None` when unset (anything runtime-bound then cannot run).
    pub runtime_dir: Option<PathBuf>,
}

/// The subdirectory of the runtime dir holding subnet reservations (one file per octet).
pub const SUBNETS_DIR: &str = "subnets";
/// The subdirectory of the runtime dir holding service port reservations (one file per port).
pub const PORTS_DIR: &str = "ports";

impl Layout {
    /// `$XDG_CONFIG_HOME/cyclix/tenants`.
    #[must_use]
    pub fn tenants_dir(&self) -> PathBuf {
        self.config_home.join("cyclix/tenants")
    }

    /// `…/tenants/TENANT.yaml`: the tenant's spec.
    #[must_use]
    pub fn tenant_spec(&self, tenant: &str) -> PathBuf {
        self.tenants_dir().join(format!("{tenant}.yaml"))
    }

    /// `…/tenants/TENANT.env`: the tenant's secret values (mode 0600).
    #[must_use]
    pub fn tenant_env(&self, tenant: &str) -> PathBuf {
        self.tenants_dir().join(format!("{tenant}.env"))
    }

    /// `$XDG_CONFIG_HOME/cyclix/config.yaml`: cyclix's own settings (`spec::host_config`).
    #[must_use]
    pub fn config_file(&self) -> PathBuf {
        self.config_home.join("cyclix/config.yaml")
    }

    /// `$XDG_CONFIG_HOME/systemd/user`: where `cyclix install` puts the unit templates.
    #[must_use]
    pub fn user_units_dir(&self) -> PathBuf {
        self.config_home.join("systemd/user")
    }

    /// `$XDG_STATE_HOME/cyclix/runs`: one directory of records per tenant.
    #[must_use]
    pub fn records_root(&self) -> PathBuf {
        records_root(&self.state_home)
    }

    /// `$XDG_STATE_HOME/cyclix/runs/TENANT`: the tenant's records.
    #[must_use]
    pub fn records_dir(&self, tenant: &str) -> PathBuf {
        self.records_root().join(tenant)
    }

    /// `$XDG_DATA_HOME/cyclix/worktrees`: one directory of work trees per tenant.
    #[must_use]
    pub fn worktrees_root(&self) -> PathBuf {
        self.data_home.join("cyclix/worktrees")
    }

    /// `$XDG_DATA_HOME/cyclix/worktrees/TENANT/RUN`: a run's work tree.
    #[must_use]
    pub fn worktree(&self, tenant: &str, run_id: &str) -> PathBuf {
        self.worktrees_root().join(tenant).join(run_id)
    }

    /// `$XDG_STATE_HOME/cyclix/paused`: one file per paused tenant (`cyclix pause`).
    #[must_use]
    pub fn paused_dir(&self) -> PathBuf {
        self.state_home.join("cyclix/paused")
    }

    /// `…/paused/TENANT`: present while the tenant is paused; it holds when and why.
    #[must_use]
    pub fn pause_marker(&self, tenant: &str) -> PathBuf {
        self.paused_dir().join(tenant)
    }

    /// `$XDG_DATA_HOME/cyclix/demo`: the demo tenant's repository and files.
    #[must_use]
    pub fn demo_dir(&self) -> PathBuf {
        self.data_home.join("cyclix/demo")
    }

    /// The runtime-bound paths; `None` without `$XDG_RUNTIME_DIR`.
    #[must_use]
    pub fn runtime(&self) -> Option<Runtime> {
        self.runtime_dir.clone().map(Runtime)
    }
}

/// `STATE_HOME/cyclix/runs`.
#[must_use]
pub fn records_root(state_home: &Path) -> PathBuf {
    state_home.join("cyclix/runs")
}

/// Paths under `$XDG_RUNTIME_DIR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runtime(pub PathBuf);

impl Runtime {
    /// `$XDG_RUNTIME_DIR/containers/systemd`: Quadlet's rootless runtime directory.
    #[must_use]
    pub fn quadlet_dir(&self) -> PathBuf {
        self.0.join("containers/systemd")
    }

    /// `$XDG_RUNTIME_DIR/systemd/user`: the runtime user unit directory.
    #[must_use]
    pub fn units_dir(&self) -> PathBuf {
        self.0.join("systemd/user")
    }

    /// `$XDG_RUNTIME_DIR/cyclix`.
    #[must_use]
    pub fn cyclix_dir(&self) -> PathBuf {
        self.0.join("cyclix")
    }

    /// `$XDG_RUNTIME_DIR/cyclix/runs`: one state directory per live run.
    #[must_use]
    pub fn runs_root(&self) -> PathBuf {
        self.cyclix_dir().join("runs")
    }

    /// `$XDG_RUNTIME_DIR/cyclix/runs/RUN`.
    #[must_use]
    pub fn run_dir(&self, run_id: &str) -> PathBuf {
        self.runs_root().join(run_id)
    }

    /// `$XDG_RUNTIME_DIR/cyclix/records/TENANT`: where a run's record goes when the state dir
    /// cannot take it (full, unwritable); the tenant's next run moves it back (issue 20
    /// item 4).
    #[must_use]
    pub fn fallback_records(&self, tenant: &str) -> PathBuf {
        self.cyclix_dir().join("records").join(tenant)
    }

    /// `$XDG_RUNTIME_DIR/cyclix/pool/TENANT`: the tenant's warm pool state (`run::pool`),
    /// outside anything an environment or a run's sandbox can write.
    #[must_use]
    pub fn pool_dir(&self, tenant: &str) -> PathBuf {
        self.cyclix_dir().join("pool").join(tenant)
    }

    /// `$XDG_RUNTIME_DIR/cyclix/locks`: tenant and delivery locks.
    #[must_use]
    pub fn locks_dir(&self) -> PathBuf {
        self.cyclix_dir().join("locks")
    }

    /// `$XDG_RUNTIME_DIR/cyclix/locks/TENANT.lock`.
    #[must_use]
    pub fn tenant_lock(&self, tenant: &str) -> PathBuf {
        self.locks_dir().join(format!("{tenant}.lock"))
    }

    /// `$XDG_RUNTIME_DIR/cyclix/systemd.lock`: serialises `daemon-reload` among cyclix
    /// processes (B01).
    #[must_use]
    pub fn systemd_lock(&self) -> PathBuf {
        self.cyclix_dir().join("systemd.lock")
    }

    /// `$XDG_RUNTIME_DIR/cyclix/KIND` for [`SUBNETS_DIR`] or [`PORTS_DIR`].
    #[must_use]
    pub fn reservations(&self, kind: &str) -> PathBuf {
        self.cyclix_dir().join(kind)
    }
}

/// The directory of reservations of `kind` beside a runs root (`RUNS/../KIND`).
#[must_use]
pub fn reservations_beside(runs_root: &Path, kind: &str) -> PathBuf {
    runs_root.parent().unwrap_or(runs_root).join(kind)
}

/// The files of one run in its tenant's records directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFiles<'a> {
    dir: &'a Path,
    run_id: &'a str,
}

impl<'a> RunFiles<'a> {
    /// Files of run `run_id` in records directory `dir`.
    #[must_use]
    pub fn new(dir: &'a Path, run_id: &'a str) -> Self {
        RunFiles { dir, run_id }
    }

    fn file(&self, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", self.run_id))
    }

    /// `RUN.json`: the run's record.
    #[must_use]
    pub fn record(&self) -> PathBuf {
        self.file("json")
    }

    /// `RUN.running`: present while the run lives (its ledger).
    #[must_use]
    pub fn marker(&self) -> PathBuf {
        self.file("running")
    }

    /// `RUN.phase`: the phase (or `teardown/STEP`) the run was last in.
    #[must_use]
    pub fn phase(&self) -> PathBuf {
        self.file("phase")
    }

    /// `RUN.import`: the import's staging directory (bundle, diff).
    #[must_use]
    pub fn import_dir(&self) -> PathBuf {
        self.file("import")
    }

    /// `RUN.LABEL.log` (`RUN.agent.log`, `RUN.gate.log`): the agent's or the gate's output as
    /// cyclix kept it (redacted, printable, limits marked; `run::output`).
    #[must_use]
    pub fn output_log(&self, label: &str) -> PathBuf {
        self.file(&format!("{label}.log"))
    }

    /// `RUN.gate-objects`: the objects of the gate's trees, packed for the container that
    /// checks them out (removed once the gate's trees are written).
    #[must_use]
    pub fn gate_objects(&self) -> PathBuf {
        self.file("gate-objects")
    }

    /// `gate-base/`: the base inventories of the tenant's gate, one file per key
    /// (`run::gate_cache`).
    #[must_use]
    pub fn gate_base_cache(&self) -> PathBuf {
        self.dir.join("gate-base")
    }

    /// `RUN.uncommitted.diff`: the agent's uncommitted work, kept.
    #[must_use]
    pub fn uncommitted_diff(&self) -> PathBuf {
        self.file("uncommitted.diff")
    }
}

/// The run id of a records-directory entry (`RUN.json`, `RUN.running`, …) and its kind
/// (`json`, `running`, `phase`, `import`, `gate-objects`, `uncommitted.diff`, `agent.log`,
/// `gate.log`);
/// `None` otherwise.
#[must_use]
pub fn parse_run_file(file_name: &str) -> Option<(&str, &str)> {
    for ext in [
        "uncommitted.diff",
        "gate-objects",
        "agent.log",
        "gate.log",
        "json",
        "running",
        "phase",
        "import",
    ] {
        if let Some(run) = file_name
            .strip_suffix(ext)
            .and_then(|s| s.strip_suffix('.'))
            .filter(|r| !r.is_empty() && *r != "latest")
        {
            return Some((run, ext));
        }
    }
    None
}

/// The gate's clean checkout beside a work tree: `WORKTREE.gate`.
#[must_use]
pub fn gate_tree(worktree: &Path) -> PathBuf {
    let mut s = worktree.as_os_str().to_os_string();
    s.push(".gate");
    PathBuf::from(s)
}

/// The checkout of the base tree for the gate's run on it (`gate.protected`), beside a work
/// tree: `WORKTREE.gate-base`.
#[must_use]
pub fn gate_base_tree(worktree: &Path) -> PathBuf {
    let mut s = worktree.as_os_str().to_os_string();
    s.push(".gate-base");
    PathBuf::from(s)
}

/// Tier `gvisor`'s directory of the probe report FIFO, beside a work tree: `WORKTREE.report`
/// (bound read-write into the agent container: on the private repository's disk, which the
/// agent can fill through `/work` anyway, never on the runtime directory's tmpfs; removed as
/// plain files with the gates' trees).
#[must_use]
pub fn report_tree(worktree: &Path) -> PathBuf {
    let mut s = worktree.as_os_str().to_os_string();
    s.push(".report");
    PathBuf::from(s)
}

/// Where the gate's runs write their per-test results, in the run directory (`results`: the
/// agent's tree; `results-base`: the base tree), each mounted at `/cyclix/results`.
#[must_use]
pub fn gate_results_dir(run_dir: &Path, base: bool) -> PathBuf {
    run_dir.join(if base { "results-base" } else { "results" })
}

#[cfg(test)]
mod tests;
