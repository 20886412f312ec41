//! The warm pool's state on disk (issue 16) and the run's environment as its record states it.
//!
//! A tenant's pool lives in `$XDG_RUNTIME_DIR/cyclix/pool/TENANT/` (`layout::Runtime::pool_dir`),
//! outside anything an environment or a sandbox can write. One file per environment, named by
//! its environment id (the syntax of a run id, `spec::rules::names::run_id`), moves through
//! four directories:
//!
//! | directory | meaning |
//! | --- | --- |
//! | `filling/ENV` | a filler is making it (created exclusively *before* any object is made) |
//! | `ready/ENV` | made and recorded ([`Filled`]): a run may claim it |
//! | `claimed/ENV@RUN` | run `RUN` claimed it (one rename(2) from `ready/`) |
//! | `expiring/ENV` | idle past `max_idle`, or dead ([`dead`]): taken out of `ready/` to be destroyed |
//!
//! A claim is one `rename(2)` of `ready/ENV` to `claimed/ENV@RUN`: of two claims of the same
//! environment exactly one rename finds the source (the other gets `ENOENT` and tries the next
//! one), so two runs can never get the same environment. Expiry takes an environment out of
//! `ready/` the same way, so a run never claims one being destroyed.
//!
//! `cyclix pool fill` makes environments (`env`), `cyclix run` claims one (`app::pool_cmd`)
//! and every record says which environment the run used and, cold, why ([`why_cold`]).

use std::io::ErrorKind;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

pub use super::record::{EnvironmentRecord, NO_POOL, NONE_READY};
pub use super::warm::{holds_agent, poolable, replaced_by_the_run};
use crate::render::Backend;

/// The four state directories under a pool's directory.
const FILLING: &str = "filling";
const READY: &str = "ready";
const CLAIMED: &str = "claimed";
const EXPIRING: &str = "expiring";

/// What the pool recorded of an environment when it was filled (the JSON in its state file):
/// what a claim compares the environment against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Filled {
    /// The environment id.
    pub env: String,
    /// The tenant whose pool made it.
    pub tenant: String,
    /// When the filler began it, in ms since the Unix epoch.
    pub began_ms: u128,
    /// When it became ready, in ms since the Unix epoch; 0 while it is being filled.
    #[serde(default)]
    pub ready_ms: u128,
    /// The filler's pid: a `filling/` environment whose filler is dead is converged.
    #[serde(default)]
    pub pid: u32,
    /// The third octet of its reserved subnet `10.213.N.0/24` (0 until reserved).
    #[serde(default)]
    pub octet: u8,
    /// The proxy access log's key rendered into its `squid.conf` (random per environment;
    /// why the state file is mode 0600; never in the environment's labels or names).
    #[serde(default)]
    pub log_key: String,
    /// Every file of the environment as installed: (absolute path, SHA-256 hex of its bytes).
    #[serde(default)]
    pub files: Vec<(String, String)>,
    /// The units generated from its Quadlet files as installed (`bring_up::generate`): (absolute
    /// path, SHA-256 hex of its bytes). Checked at the claim like [`Filled::files`]; not part
    /// of the comparison with the spec rendered now (the generator makes them).
    #[serde(default)]
    pub units: Vec<(String, String)>,
    /// The credential placeholders rendered into its proxy and its agent's file, one per
    /// `agent.credentials` entry (random per environment; the claiming run's placeholders).
    #[serde(default)]
    pub placeholders: Vec<String>,
    /// The proxy's credential file (`credfile`), empty from the fill; "" without credentials.
    #[serde(default)]
    pub credentials_file: String,
    /// The host gid the fill gave the credential file (squid's group in the containers' user
    /// namespace); the claim's check refuses another.
    #[serde(default)]
    pub credentials_gid: u32,
    /// The services' ports, in spec order, reserved by the fill under the environment's id
    /// (`reserve::reserve_ports`; the claiming run's prepare finds the same ones held by it).
    #[serde(default)]
    pub service_ports: Vec<u16>,
    /// The services the fill started ([`poolable`]), in spec order.
    #[serde(default)]
    pub services: Vec<PooledService>,
    /// The agent container the fill started and holds for the claim (`held`); `None` in a
    /// state file from before, or while the fill is making it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<held::HeldAgent>,
}

/// A service a fill started: one that needs no secret and no work tree ([`poolable`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PooledService {
    /// Its container (`cyclix-ENV-svc-NAME`).
    pub container: String,
    /// The names of its processes once it was up (its start job done: healthy when it has a
    /// check), sorted, each once: what a claim allows in it (`check`).
    pub processes: Vec<String>,
    /// The executables of those processes (`DEV:INO` of `/proc/HPID/exe`, sorted, each once),
    /// so a process of an allowed name running another program is not taken for the service's
    /// own (`run::procs::executable`); absent in a state file from before they were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executables: Option<Vec<String>>,
}

/// An environment a run claimed: its state file is `claimed/ENV@RUN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// What the pool recorded at fill time.
    pub filled: Filled,
    /// The state file, now `claimed/ENV@RUN`.
    pub path: PathBuf,
}

/// How many environments a pool holds in each state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Being filled (`filling/`).
    pub filling: usize,
    /// Ready to be claimed (`ready/`).
    pub ready: usize,
    /// Claimed by a run (`claimed/`).
    pub claimed: usize,
    /// Idle past `max_idle` or dead, being destroyed (`expiring/`).
    pub expiring: usize,
}

/// One tenant's pool state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolState {
    dir: PathBuf,
}

impl PoolState {
    /// The pool state in `dir` (`layout::Runtime::pool_dir`); nothing is created yet.
    #[must_use]
    pub fn new(dir: PathBuf) -> Self {
        PoolState { dir }
    }

    fn sub(&self, state: &str) -> PathBuf {
        self.dir.join(state)
    }

    /// Notes that a filler begins environment `env` of `tenant`: creates `filling/ENV`
    /// exclusively (before any object of it is made, so convergence can undo a half-made one).
    ///
    /// # Errors
    /// `env` is not a valid id, the file exists already (another filler took the id), or I/O.
    pub fn begin(&self, env: &str, tenant: &str, now_ms: u128, pid: u32) -> Result<Filled> {
        crate::spec::rules::names::run_id(env)
            .map_err(|e| anyhow::anyhow!("environment id: {e}"))?;
        let dir = self.sub(FILLING);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let filled = Filled {
            env: env.to_string(),
            tenant: tenant.to_string(),
            began_ms: now_ms,
            ready_ms: 0,
            pid,
            octet: 0,
            log_key: String::new(),
            files: Vec::new(),
            units: Vec::new(),
            placeholders: Vec::new(),
            credentials_file: String::new(),
            credentials_gid: 0,
            service_ports: Vec::new(),
            services: Vec::new(),
            agent: None,
        };
        let path = dir.join(env);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| {
                format!(
                    "creating {} (is another filler using the id?)",
                    path.display()
                )
            })?;
        serde_json::to_writer(&mut f, &filled)
            .with_context(|| format!("writing {}", path.display()))?;
        f.sync_all()
            .with_context(|| format!("syncing {}", path.display()))?;
        Ok(filled)
    }

    /// Records what the filler made of environment `env` so far (`filled`, whose `env` must
    /// be `env`) in `filling/ENV` (mode 0600: it holds the log key).
    ///
    /// # Errors
    /// `env` was not begun ([`Self::begin`]), or I/O.
    pub fn note(&self, filled: &Filled) -> Result<()> {
        let path = self.sub(FILLING).join(&filled.env);
        if !path.exists() {
            bail!(
                "{} does not exist: the environment was not begun",
                path.display()
            );
        }
        let text = serde_json::to_vec(filled).context("serialising the environment's facts")?;
        crate::atomic::write(&path, &text)
    }

    /// Marks environment `env` ready: its facts with `ready_ms` are written into
    /// `filling/ENV`, which is then renamed to `ready/ENV`.
    ///
    /// # Errors
    /// `env` was not begun ([`Self::begin`]), or I/O.
    pub fn ready(&self, env: &str, now_ms: u128) -> Result<Filled> {
        let from = self.sub(FILLING).join(env);
        let mut filled = read(&from)?;
        filled.ready_ms = now_ms;
        let text = serde_json::to_vec(&filled).context("serialising the environment's facts")?;
        crate::atomic::write(&from, &text)?;
        let dir = self.sub(READY);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let to = dir.join(env);
        std::fs::rename(&from, &to)
            .with_context(|| format!("renaming {} to {}", from.display(), to.display()))?;
        Ok(filled)
    }

    /// The ids in state directory `state`, sorted (ids begin with their UTC time, so the
    /// oldest comes first); none when the directory does not exist.
    fn ids(&self, state: &str) -> Result<Vec<String>> {
        let dir = self.sub(state);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
        };
        let mut ids = Vec::new();
        for e in entries {
            let e = e.with_context(|| format!("listing {}", dir.display()))?;
            if let Some(name) = e.file_name().to_str() {
                // A temp file of `ready` (`.tmpXXXX`) is not an environment.
                if !name.starts_with('.') {
                    ids.push(name.to_string());
                }
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// Claims the oldest ready environment for run `run_id`: `ready/ENV` is renamed to
    /// `claimed/ENV@RUN`. `None` when none is ready (the run goes cold).
    ///
    /// # Errors
    /// `run_id` is not a valid run id, or I/O other than losing a race for an environment.
    #[cfg(test)]
    pub(crate) fn claim(&self, run_id: &str) -> Result<Option<Claim>> {
        crate::spec::rules::names::run_id(run_id).map_err(|e| anyhow::anyhow!("{e}"))?;
        self.claim_as(|_| run_id.to_string())
    }

    /// Claims the oldest ready environment for a run that adopts the environment's id as its
    /// run id (`claimed/ENV@ENV`); `None` when none is ready.
    ///
    /// # Errors
    /// As [`Self::claim`].
    pub fn claim_own(&self) -> Result<Option<Claim>> {
        self.claim_as(str::to_string)
    }

    fn claim_as(&self, run_of: impl Fn(&str) -> String) -> Result<Option<Claim>> {
        let to_dir = self.sub(CLAIMED);
        for env in self.ids(READY)? {
            let run_id = run_of(&env);
            std::fs::create_dir_all(&to_dir)
                .with_context(|| format!("creating {}", to_dir.display()))?;
            let from = self.sub(READY).join(&env);
            let to = to_dir.join(format!("{env}@{run_id}"));
            match std::fs::rename(&from, &to) {
                Ok(()) => {
                    let filled = read(&to)?;
                    if filled.env != env {
                        bail!(
                            "{} names environment `{}`, not `{env}`: the pool state was edited",
                            to.display(),
                            filled.env
                        );
                    }
                    return Ok(Some(Claim { filled, path: to }));
                }
                // Another run claimed it (or expiry took it) first: try the next one.
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("renaming {} to {}", from.display(), to.display())
                    });
                }
            }
        }
        Ok(None)
    }

    /// What the pool recorded of each ready environment, oldest first (one claimed or
    /// expired while this reads is left out).
    ///
    /// # Errors
    /// I/O, or a ready state file that does not parse.
    pub fn ready_envs(&self) -> Result<Vec<Filled>> {
        let mut out = Vec::new();
        for env in self.ids(READY)? {
            let path = self.sub(READY).join(&env);
            match read(&path) {
                Ok(f) => out.push(f),
                Err(_) if !path.exists() => {} // claimed meanwhile
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Takes every ready environment idle for `max_idle_ms` or longer out of `ready/` (into
    /// `expiring/ENV`, where a run cannot claim it) and returns what the pool recorded of
    /// each, for the caller to destroy.
    ///
    /// # Errors
    /// I/O other than losing a race for an environment to a claim.
    pub fn take_expired(&self, now_ms: u128, max_idle_ms: u128) -> Result<Vec<Filled>> {
        let mut out = Vec::new();
        for env in self.ids(READY)? {
            let from = self.sub(READY).join(&env);
            let filled = match read(&from) {
                Ok(f) => f,
                Err(_) if !from.exists() => continue, // claimed meanwhile
                Err(e) => return Err(e),
            };
            if filled.ready_ms.saturating_add(max_idle_ms) > now_ms {
                continue;
            }
            if self.take(&env)? {
                out.push(filled);
            }
        }
        Ok(out)
    }

    /// Takes ready environment `env` out of `ready/` into `expiring/ENV` (one rename, so no run
    /// can claim it meanwhile), for the caller to destroy. `false` when it is not ready any
    /// more (a run claimed it, or another cyclix took it, first).
    ///
    /// # Errors
    /// I/O other than losing the race for it.
    pub fn take(&self, env: &str) -> Result<bool> {
        let from = self.sub(READY).join(env);
        let to_dir = self.sub(EXPIRING);
        std::fs::create_dir_all(&to_dir)
            .with_context(|| format!("creating {}", to_dir.display()))?;
        let to = to_dir.join(env);
        match std::fs::rename(&from, &to) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => {
                Err(e).with_context(|| format!("renaming {} to {}", from.display(), to.display()))
            }
        }
    }

    /// Forgets a destroyed environment: removes its state file (`claimed/ENV@RUN` after the
    /// run's teardown, `expiring/ENV` or `filling/ENV` after its objects are gone).
    ///
    /// # Errors
    /// I/O other than the file being gone already.
    pub fn forget(path: &Path) -> Result<()> {
        match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).with_context(|| format!("removing {}", path.display())),
        }
    }

    /// The environments being filled (`filling/`): id, state file and what the filler noted
    /// (`None` when the file cannot be read, e.g. half-written by a filler that died).
    ///
    /// # Errors
    /// The directory cannot be listed.
    pub fn filling(&self) -> Result<Vec<(String, PathBuf, Option<Filled>)>> {
        Ok(self
            .ids(FILLING)?
            .into_iter()
            .map(|id| {
                let path = self.sub(FILLING).join(&id);
                let f = read(&path).ok();
                (id, path, f)
            })
            .collect())
    }

    /// The environments runs claimed (`claimed/ENV@RUN`): environment id and state file.
    ///
    /// # Errors
    /// The directory cannot be listed.
    pub fn claimed(&self) -> Result<Vec<(String, PathBuf)>> {
        Ok(self
            .ids(CLAIMED)?
            .into_iter()
            .map(|id| {
                let path = self.sub(CLAIMED).join(&id);
                (id.split('@').next().unwrap_or(&id).to_string(), path)
            })
            .collect())
    }

    /// Where the pool keeps the ledger of environment `env` (what its filler created, as a
    /// run's ledger: `run::ledger`), outside the tenant's records so a run's convergence never
    /// takes a ready environment for a dead run.
    #[must_use]
    pub fn ledger_path(&self, env: &str) -> PathBuf {
        self.sub("ledgers").join(format!("{env}.running"))
    }

    /// The state file of environment `env` while it is being filled (`filling/ENV`).
    #[must_use]
    pub fn filling_path(&self, env: &str) -> PathBuf {
        self.sub(FILLING).join(env)
    }

    /// The environments the pool holds (its objects are the pool's, not leftovers): (id,
    /// state) for every ready, claimed and expiring one.
    ///
    /// # Errors
    /// A state directory cannot be listed.
    pub fn held(&self) -> Result<Vec<(String, &'static str)>> {
        let mut out = Vec::new();
        for (dir, state) in [
            (READY, "ready"),
            (CLAIMED, "claimed"),
            (EXPIRING, "expiring"),
        ] {
            for id in self.ids(dir)? {
                let env = id.split('@').next().unwrap_or(&id).to_string();
                out.push((env, state));
            }
        }
        Ok(out)
    }

    /// The state file of environment `env` once expired (`expiring/ENV`).
    #[must_use]
    pub fn expiring_path(&self, env: &str) -> PathBuf {
        self.sub(EXPIRING).join(env)
    }

    /// How many environments the pool holds in each state.
    ///
    /// # Errors
    /// A state directory cannot be listed.
    pub fn counts(&self) -> Result<Counts> {
        Ok(Counts {
            filling: self.ids(FILLING)?.len(),
            ready: self.ids(READY)?.len(),
            claimed: self.ids(CLAIMED)?.len(),
            expiring: self.ids(EXPIRING)?.len(),
        })
    }
}

/// Reads an environment's state file.
fn read(path: &Path) -> Result<Filled> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Why a run of `spec` on `backend` cannot claim a warm environment, or `None` when it may
/// (tier `container` with a pool of size > 0 on the Quadlet backend, no services; credentials
/// are handed to the claimed proxy: `credfile`).
#[must_use]
pub fn why_cold(spec: &crate::spec::Spec, backend: Backend) -> Option<&'static str> {
    Some(match spec.pool.as_ref() {
        None => NO_POOL,
        Some(p) if p.size == 0 => "the tenant's pool has size 0",
        Some(_) if backend == Backend::Plain => {
            "plain backend (Podman < 5): a run always builds its own environment"
        }
        Some(_) => return None,
    })
}

/// The record of a cold run `run_id`: its environment id is the run id, and `why_cold` says
/// why it had no warm one ([`why_cold`], or [`NONE_READY`]).
#[must_use]
pub fn cold(run_id: &str, why: &str) -> EnvironmentRecord {
    EnvironmentRecord {
        id: run_id.to_string(),
        pooled: false,
        why_cold: why.to_string(),
        filled_ms: 0,
        idle_ms: 0,
    }
}

/// The record of a run that claimed environment `filled` at `claimed_ms` (ms since the
/// epoch): its id (the run's id too), when it was filled and how long it idled.
#[must_use]
pub fn warm(filled: &Filled, claimed_ms: u128) -> EnvironmentRecord {
    EnvironmentRecord {
        id: filled.env.clone(),
        pooled: true,
        why_cold: String::new(),
        filled_ms: u64::try_from(filled.ready_ms).unwrap_or(u64::MAX),
        idle_ms: u64::try_from(claimed_ms.saturating_sub(filled.ready_ms)).unwrap_or(u64::MAX),
    }
}

pub mod check;
pub mod credfile;
pub mod dead;
pub mod env;
pub mod held;
pub mod keeper;
mod view;

pub use view::{KeeperView, PoolView};

#[cfg(test)]
mod tests;
