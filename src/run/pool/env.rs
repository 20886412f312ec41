//! A pooled environment's objects (issue 16): made by a filler, checked at a claim, destroyed
//! when refused, expired or left half-made by a filler that died.
//!
//! An environment is the pre-made part of one future run whose id it has: the fill renders
//! that run's units exactly as the run will (`render::render` with the run's context: the
//! environment id as run id, its reserved subnet octet, its access-log key) and installs and
//! starts only the environment's part ([`env_file`]): the two `.network`s, the `.pod` (and its
//! drop-in), the `-proxy.container` and the run dir's files the proxy mounts (`squid.conf`).
//! The agent's and the gate's `.container` are installed and loaded too: they hold names and
//! paths only (the secrets' names, the work tree's and the task's paths), so a claim that
//! renders them the same needs no daemon-reload (`run::phases::bring_up`). The gate's is never
//! started; the agent's container is made and held for the claim when [`super::holds_agent`]
//! (`super::held`: its work tree an empty directory, its task an empty file). No secret,
//! credential, canary, work tree content or task is made. What it made is in a ledger of
//! its own (`PoolState::ledger_path`), which the claiming run copies into its ledger; a
//! refused, expired or half-made environment is destroyed over that ledger by the same
//! teardown and audit as a dead run's (`run::converge::converge`).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use sha2::Digest as _;

use super::{Filled, PoolState};
use crate::naming::RunNames;
use crate::render::{self, Backend, Dest, RenderedFile, RunContext};
use crate::run::inputs::RunPaths;
use crate::run::ledger::{Entry, Ledger, Owner};
use crate::run::phases::bring_up;
use crate::run::seam::RunHost;
use crate::spec::Spec;
use crate::systemd::{JobMode, UnitManager};

/// What a filler, a claim's check and a destruction need: the tenant's spec and the host.
pub struct EnvHost<'a> {
    /// The pool's state.
    pub state: &'a PoolState,
    /// The tenant's validated spec (the one runs of it render).
    pub spec: &'a Spec,
    /// The run paths of an id (`app::tenant::run_paths`).
    pub paths: &'a dyn Fn(&str) -> RunPaths,
    /// The cyclix binary the agent container mounts (rendered into the agent's file only,
    /// which the environment never installs).
    pub cyclix_bin: &'a Path,
    /// The user manager.
    pub units: &'a (dyn UnitManager + Sync),
    /// The host (subnets in use; the teardown of a destroyed environment).
    pub host: &'a dyn RunHost,
    /// The deadline of one unit start.
    pub start: Duration,
    /// How long a destruction waits for podman's storage lock.
    pub lock_wait: Duration,
    /// gVisor's runsc for tier `gvisor` (`RunInputs::gvisor`): its environments render
    /// their agent and gate on it, so they are claimed only by runs that render the same.
    pub gvisor: Option<&'a crate::tier::runsc::OciRuntime>,
}

/// How long a fill waits for its agent container's agent-wait to be held on the claim FIFO
/// once the unit started.
pub const HOLD_WAIT: Duration = Duration::from_secs(30);

/// SHA-256 of `bytes`, lower-case hex.
pub(super) fn digest(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Whether rendered file `f` of run `id` is part of the environment (installed by the fill):
/// every Quadlet file (the gate's `.container` is installed, not started), the pod unit's
/// drop-ins, and the run dir's files the proxy's and the agent's `.container` mount
/// (`proxy_file`: their texts).
#[must_use]
pub fn env_file(f: &RenderedFile, id: &str, proxy_file: &str) -> bool {
    let n = RunNames::new(id);
    match f.dest {
        Dest::Quadlet => true,
        Dest::RuntimeUnits => f
            .name
            .starts_with(&format!("{}.d/", crate::naming::pod_unit(&n.base()))),
        Dest::RunDir => proxy_file.contains(&format!("/{id}/{}", f.name)),
        Dest::UserConfig => false,
    }
}

/// The environment's files of `rendered` (run `id`), each with its absolute path.
pub(super) fn env_files<'r>(
    rendered: &'r render::Rendered,
    id: &str,
    paths: &RunPaths,
) -> Vec<(std::path::PathBuf, &'r RenderedFile)> {
    let n = RunNames::new(id);
    let held = [
        crate::naming::container_file(&n.proxy()),
        crate::naming::container_file(&n.agent()),
    ];
    // The run dir's files the proxy and the held agent container mount.
    let proxy_text: String = rendered
        .files
        .iter()
        .filter(|f| f.dest == Dest::Quadlet && held.contains(&f.name))
        .map(|f| f.contents.as_str())
        .collect();
    let proxy_text = proxy_text.as_str();
    rendered
        .files
        .iter()
        .filter(|f| env_file(f, id, proxy_text))
        .filter_map(|f| {
            let dir = match f.dest {
                Dest::Quadlet => &paths.quadlet_dir,
                Dest::RuntimeUnits => &paths.units_dir,
                Dest::RunDir => &paths.run_dir,
                Dest::UserConfig => return None,
            };
            Some((dir.join(&f.name), f))
        })
        .collect()
}

impl EnvHost<'_> {
    /// The run `id` renders with the subnet octet, access-log key, credential placeholders and
    /// service ports of `filled`, as a run of it would (its proxy reads the credential lines
    /// from its run dir: `credfile`).
    pub(super) fn render(&self, id: &str, filled: &Filled) -> Result<render::Rendered> {
        let paths = (self.paths)(id);
        let ctx = RunContext {
            run_id: id.to_string(),
            worktree: paths.worktree.display().to_string(),
            run_dir: paths.run_dir.display().to_string(),
            subnet_octet: filled.octet,
            proxy_image: crate::images::PROXY_IMAGE.to_string(),
            cyclix_bin: self.cyclix_bin.display().to_string(),
            service_ports: filled.service_ports.clone(),
            placeholders: filled.placeholders.clone(),
            setup_binds: Vec::new(),
            log_key: filled.log_key.clone(),
            credentials_file: true,
            gvisor: self.gvisor.cloned(),
            claim_wait_s: super::holds_agent(self.spec)
                .then(|| self.spec.pool.as_ref().map_or(0, |p| p.max_idle_s)),
        };
        Ok(render::render(self.spec, &ctx, Backend::Quadlet)?)
    }

    /// Fills environment `id` (a fresh run id) with access-log key `log_key` and credential
    /// `placeholders` (one per `agent.credentials` entry, random): notes it in
    /// `filling/` before any object exists, then reserves its subnet, installs and starts the
    /// environment's part, and marks it ready with what it installed (digests). On a failure
    /// what was made is destroyed ([`Self::destroy`]) and the error returned.
    ///
    /// # Errors
    /// Any step failed (the error names it).
    pub fn fill(
        &self,
        id: &str,
        log_key: &str,
        placeholders: &[String],
        now_ms: impl Fn() -> u128,
    ) -> Result<Filled> {
        let tenant = self.spec.tenant.as_str();
        let mut filled = self.state.begin(id, tenant, now_ms(), std::process::id())?;
        filled.placeholders = placeholders.to_vec();
        match self.make(&mut filled, log_key, &now_ms) {
            Ok(f) => Ok(f),
            Err(e) => {
                let left = self.destroy(id, &self.state.filling_path(id));
                bail!(
                    "{e:#}{}",
                    left.map(|l| format!("; {l}")).unwrap_or_default()
                )
            }
        }
    }

    fn make(
        &self,
        filled: &mut Filled,
        log_key: &str,
        now_ms: &dyn Fn() -> u128,
    ) -> Result<Filled> {
        let id = filled.env.clone();
        let paths = (self.paths)(&id);
        let mut ledger = Ledger::create(
            &self.state.ledger_path(&id),
            &Owner {
                tenant: self.spec.tenant.clone(),
                run_id: id.clone(),
                pid: std::process::id(),
                started_ms: u64::try_from(filled.began_ms).unwrap_or(u64::MAX),
                repo: self.spec.repo.path.clone().into(),
            },
        )?;
        ledger.record(Entry::RunDir {
            path: paths.run_dir.clone(),
        })?;
        std::fs::create_dir_all(&paths.run_dir)
            .with_context(|| format!("creating {}", paths.run_dir.display()))?;
        let runs_root = paths
            .run_dir
            .parent()
            .context("invariant: the run dir has a parent")?;
        ledger.record(Entry::Reservations {
            dir: crate::layout::reservations_beside(runs_root, crate::layout::SUBNETS_DIR),
        })?;
        let used = self.host.used_subnets()?;
        let (octet, _) = crate::run::reserve::reserve_subnet(runs_root, &id, &used)?;
        filled.octet = octet;
        filled.log_key = log_key.to_string();
        if !self.spec.services.is_empty() {
            // Every service's port, as the claiming run's prepare reserves them (it finds
            // them held by its id): the rendered files are the run's.
            ledger.record(Entry::Reservations {
                dir: crate::layout::reservations_beside(runs_root, crate::layout::PORTS_DIR),
            })?;
            filled.service_ports = crate::run::reserve::reserve_ports(
                runs_root,
                &id,
                &self.spec.services,
                &mut Vec::new(),
            )?;
        }
        self.state.note(filled)?;
        crate::failpoint::kill_point("pool.fill");
        let rendered = self.render(&id, filled)?;
        // Its units make podman objects: a destruction sweeps them by label.
        ledger.record(Entry::Podman)?;
        let mut quadlet = Vec::new();
        for (path, f) in env_files(&rendered, &id, &paths) {
            bring_up::install_file(&mut ledger, &path, f.contents.as_bytes(), &id)?;
            filled
                .files
                .push((path.display().to_string(), digest(f.contents.as_bytes())));
            if f.dest == Dest::Quadlet {
                quadlet.push(f.name.as_str());
            }
        }
        // The units made from its Quadlet files: installed and checked at the claim like the
        // rest (`bring_up::load`: no daemon-reload).
        let target = bring_up::Target {
            id: &id,
            paths: &paths,
            pooled: false,
        };
        // Not a claim (`pooled: false`): every unit is generated, none kept.
        for (path, contents) in bring_up::generate(&target, self.host, &quadlet, &[], &mut ledger)?
        {
            filled
                .units
                .push((path.display().to_string(), digest(&contents)));
        }
        if !self.spec.agent.credentials.is_empty() {
            // Empty: the run that claims the environment writes the lines (`credfile`).
            let path = paths.run_dir.join(super::credfile::PROXY_CREDENTIALS_FILE);
            filled.credentials_gid = super::credfile::make(&path, &crate::podman::Podman::new())?;
            filled.credentials_file = path.display().to_string();
        }
        bring_up::record_units(&mut ledger, &rendered.units)?;
        self.state.note(filled)?;
        bring_up::load_units(self.units, &rendered.units)?;
        self.start_environment(&id, filled)?;
        self.state.note(filled)?;
        if super::holds_agent(self.spec) {
            self.hold_agent(&id, &paths, &mut ledger, filled)?;
            self.state.note(filled)?;
        }
        crate::failpoint::kill_point("pool.fill.started");
        crate::failpoint::hold_point("pool.fill.held");
        self.state.ready(&id, now_ms())
    }

    /// Starts environment `id`'s part: the proxy, the services that need no secret and no
    /// work tree (each up, healthy when it has a check, once its start job is done) and the
    /// pod; notes each started service's processes in `filled`.
    fn start_environment(&self, id: &str, filled: &mut Filled) -> Result<()> {
        let names = RunNames::new(id);
        let pod = crate::naming::pod_unit(&names.base());
        // The proxy, the services that need no secret and no work tree (each up, healthy when
        // it has a check, once its start job is done), the pod.
        let pooled: Vec<String> = self
            .spec
            .services
            .iter()
            .filter(|s| super::poolable(s))
            .map(|s| names.service(&s.name))
            .collect();
        let units = std::iter::once(crate::naming::container_unit(&names.proxy()))
            .chain(pooled.iter().map(|c| crate::naming::container_unit(c)))
            .chain(std::iter::once(pod));
        for u in units {
            self.units
                .start(&u, JobMode::Replace, self.start)
                .with_context(|| format!("starting {u}"))?;
        }
        let podman = crate::podman::Podman::new();
        for container in pooled {
            let listed = podman
                .top_hpids(&container)
                .with_context(|| format!("listing the processes of {container}"))?;
            let mut executables: Vec<String> = listed
                .iter()
                .filter_map(|(pid, _)| crate::run::procs::executable(*pid).ok())
                .collect();
            let mut processes: Vec<String> = listed.into_iter().map(|(_, comm)| comm).collect();
            for v in [&mut processes, &mut executables] {
                v.sort();
                v.dedup();
            }
            filled.services.push(super::PooledService {
                container,
                processes,
                executables: Some(executables),
            });
        }
        Ok(())
    }

    /// Makes and starts environment `id`'s agent container, held for its claim (`held`): its
    /// work tree an empty directory, its task an empty file, its control directory holding the
    /// claim FIFO alone (all in the ledger first); then, once agent-wait is blocked on that
    /// FIFO (within [`HOLD_WAIT`]), notes in `filled` what the claim compares.
    fn hold_agent(
        &self,
        id: &str,
        paths: &RunPaths,
        ledger: &mut Ledger,
        filled: &mut Filled,
    ) -> Result<()> {
        use crate::render::plan::{CLAIM_FILE, CTL_DIR, TASK_FILE};
        ledger.record(Entry::Worktree {
            path: paths.worktree.clone(),
            private: true,
        })?;
        if let Some(parent) = paths.worktree.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::create_dir(&paths.worktree).with_context(|| {
            format!("creating the empty work tree {}", paths.worktree.display())
        })?;
        let task = paths.run_dir.join(TASK_FILE);
        std::fs::write(&task, b"").with_context(|| format!("creating {}", task.display()))?;
        let ctl = paths.run_dir.join(CTL_DIR);
        std::fs::create_dir_all(&ctl).with_context(|| format!("creating {}", ctl.display()))?;
        crate::run::claim_fifo::make_claim(&ctl.join(CLAIM_FILE))?;
        let claim = super::held::dev_ino(&ctl.join(CLAIM_FILE))
            .with_context(|| format!("reading {}", ctl.join(CLAIM_FILE).display()))?;
        let agent = RunNames::new(id).agent();
        let unit = crate::naming::container_unit(&agent);
        self.units
            .start(&unit, JobMode::Replace, self.start)
            .with_context(|| format!("starting {unit}"))?;
        let (init, upper) = crate::podman::Podman::new()
            .pid_and_upper_dir(&agent)
            .with_context(|| format!("looking at {agent}"))?;
        let end = std::time::Instant::now() + HOLD_WAIT;
        loop {
            let procs = super::held::processes(init)?;
            if let Ok(pid) = super::held::agent_wait_pid(init, &procs)
                && super::held::blocked_in_open(pid)?
            {
                let seen = super::held::look(init, &procs, Path::new(&upper))?;
                let odd = super::held::first_look_wrong(&seen.files);
                if !odd.is_empty() {
                    bail!(
                        "{agent} held more than podman makes for it: {} (written from outside \
                         while the fill looked?)",
                        odd.join(", ")
                    );
                }
                filled.agent = Some(super::held::HeldAgent {
                    container: agent,
                    mounts: seen.mounts,
                    files: seen.files,
                    upper,
                    claim,
                });
                return Ok(());
            }
            if std::time::Instant::now() >= end {
                bail!(
                    "{agent} was not held in `cyclix agent-wait --claim` within {} s (its                      processes: {procs:?}; `journalctl --user -u {unit}` says why)",
                    HOLD_WAIT.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Destroys environment `id` over the pool's ledger of it ([`destroy`]).
    #[must_use]
    pub fn destroy(&self, id: &str, state_file: &Path) -> Option<String> {
        destroy(
            self.state,
            self.units,
            self.host,
            self.lock_wait,
            id,
            state_file,
        )
    }
}

/// Destroys environment `id` of pool `state` over the pool's ledger of it: removes its
/// labelled objects, stops its units, removes its files and reservation (the teardown and
/// audit of a dead run, waiting up to `lock_wait` for podman's storage lock), then forgets its
/// ledger and its state file `state_file`. Needs no spec (`cyclix uninstall` destroys the pools of tenants whose
/// spec is gone). Returns what is left, or `None`.
#[must_use]
pub fn destroy(
    state: &PoolState,
    units: &(dyn UnitManager + Sync),
    host: &dyn RunHost,
    lock_wait: Duration,
    id: &str,
    state_file: &Path,
) -> Option<String> {
    let ledger_path = state.ledger_path(id);
    let entries = crate::run::ledger::read(&ledger_path);
    let Some((owner, entries)) = entries else {
        // No ledger: nothing was made (begin is before the ledger).
        let _ = PoolState::forget(state_file);
        return None;
    };
    let c = crate::run::converge::Converging {
        units,
        host,
        by: id,
        lock_wait,
        manager_started_ms: None,
        uid: crate::host::namespaces::host_uid(),
    };
    let (rec, done) = crate::run::converge::converge(&owner, entries, &c, lock_wait, None);
    if done {
        let _ = PoolState::forget(&ledger_path);
        let _ = PoolState::forget(state_file);
        None
    } else {
        Some(format!(
            "environment {id} is not fully destroyed: {}; left: {}",
            rec.causes.join("; "),
            rec.leftovers.join(", ")
        ))
    }
}
