//! A tenant's warm pool as the verbs use it (issue 16): the host a fill, a claim and a
//! destruction work through, the claim of `cyclix run` and its credential hand-over, and the
//! convergence of fillers and claims whose cyclix died (`run::pool`, `run::pool::env`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};

use super::clock::now_ms;
use super::tenant::{run_paths, unit_manager};
use crate::context::HostEnv;
use crate::render::Backend;
use crate::run::host::RealRunHost;
use crate::run::inputs::Environment;
use crate::run::pool::env::EnvHost;
use crate::run::pool::{self, Filled, PoolState};
use crate::spec::Spec;

/// How long a destruction waits for podman's storage lock.
const LOCK_WAIT: Duration = Duration::from_secs(30);
/// The deadline of one unit start of an environment.
const START: Duration = Duration::from_secs(60);

/// The pool state of `tenant`.
pub(crate) fn state_of(env: &HostEnv, tenant: &str) -> Result<PoolState> {
    Ok(PoolState::new(
        crate::layout::Runtime(env.runtime_dir()?.clone()).pool_dir(tenant),
    ))
}

/// Runs `f` with the environment host of `spec`.
pub(crate) fn with_env_host<T>(
    env: &HostEnv,
    spec: &Spec,
    f: impl FnOnce(&EnvHost<'_>) -> Result<T>,
) -> Result<T> {
    let runtime_dir = env.runtime_dir()?.clone();
    let state = state_of(env, &spec.tenant)?;
    let units = unit_manager(env)?;
    let host = RealRunHost::new();
    let tenant = spec.tenant.clone();
    let paths = move |id: &str| run_paths(env, &runtime_dir, &tenant, id);
    // The binary the agent container mounts, as a run of the environment mounts it (its
    // execute-only copy): the agent's file the fill installs is then the run's.
    let bin = crate::run::exec_only::copy_running_for(env.runtime_dir()?, spec.tier)?;
    let gvisor = super::tenant::run_gvisor(spec)?;
    let eh = EnvHost {
        state: &state,
        spec,
        paths: &paths,
        cyclix_bin: &bin,
        units: &units,
        host: &host,
        start: START,
        lock_wait: LOCK_WAIT,
        gvisor: gvisor.as_ref(),
    };
    f(&eh)
}

/// Whether process `pid` is alive (`/proc/PID` exists).
fn alive(pid: u32) -> bool {
    pid != 0 && Path::new(&format!("/proc/{pid}")).exists()
}

/// Destroys every `filling/` environment whose filler is dead; returns a notice for each.
pub(crate) fn converge_dead_fillers(eh: &EnvHost<'_>) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    for (id, path, f) in eh.state.filling()? {
        if f.as_ref().is_some_and(|f| alive(f.pid)) {
            continue;
        }
        let left = eh.destroy(&id, &path);
        notes.push(match left {
            None => {
                format!("pool: destroyed environment {id}, left half-made by a filler that died")
            }
            Some(l) => format!("pool: {l}"),
        });
    }
    Ok(notes)
}

/// Converges the environments claimed by runs that died before their record (a claim calls
/// it under the tenant lock: no run of the tenant is alive, so every `claimed/` one is a
/// dead run's). One still under the pool's ledger (its run died between the claim and taking
/// it over, perhaps after the hand-over put the credentials into its live proxy) is
/// destroyed; one a run took over is that run's, converged with its ledger, so only the
/// state file is forgotten.
///
/// # Errors
/// The pool's state cannot be listed or a state file removed.
fn converge_dead_claims(eh: &EnvHost<'_>) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    for (id, path) in eh.state.claimed()? {
        if !eh.state.ledger_path(&id).exists() {
            PoolState::forget(&path)?;
            continue;
        }
        notes.push(match eh.destroy(&id, &path) {
            None => format!(
                "pool: destroyed environment {id}, claimed by a run that died before taking it over"
            ),
            Some(l) => format!("pool: {l}"),
        });
    }
    Ok(notes)
}

/// The dead fillers' and dead claims' environments of `spec`'s pool destroyed, by a run that
/// holds the tenant lock (no other run of the tenant is alive); returns the notices. The
/// claim does it again (harmless): this is for a run that queues first.
///
/// # Errors
/// As [`with_env_host`]; the pool's state cannot be listed.
pub(crate) fn converge_dead_under_lock(env: &HostEnv, spec: &Spec) -> Result<Vec<String>> {
    with_env_host(env, spec, |eh| {
        let mut notes = converge_dead_fillers(eh)?;
        notes.extend(converge_dead_claims(eh)?);
        Ok(notes)
    })
}

/// [`converge_dead_claims`] from a cyclix process that is not a run of the tenant (the pool's
/// keeper, `cyclix pool fill|expire`): only while it can take the tenant lock at once (holder
/// [`crate::run::lock::CONVERGING`], which a starting run waits for): no run of the tenant is
/// alive then, so a `claimed/` environment still under the pool's ledger is a run's that died
/// between its claim and taking it over, perhaps with the credentials in its proxy. Returns
/// the notices and whether a claim is in progress (the lock is a live run's and an environment
/// it claimed is not taken over yet: look again soon, it may die in the hand-over).
///
/// # Errors
/// The runtime dir, the lock file or the pool's state cannot be used.
pub(crate) fn converge_dead_claims_unlocked(
    env: &HostEnv,
    eh: &EnvHost<'_>,
) -> Result<(Vec<String>, bool)> {
    use crate::run::lock::{self, Acquire, Holder};
    let path = lock::path(env.runtime_dir()?, &eh.spec.tenant);
    let holder = Holder {
        run_id: lock::CONVERGING.to_owned(),
        pid: std::process::id(),
        started_ms: super::clock::now_ms(),
    };
    match lock::try_acquire(&path, &holder)? {
        Acquire::Held(_lock) => Ok((converge_dead_claims(eh)?, false)),
        Acquire::Busy(_) => {
            let pending = eh
                .state
                .claimed()?
                .iter()
                .any(|(id, _)| eh.state.ledger_path(id).exists());
            Ok((Vec::new(), pending))
        }
    }
}

/// The bound of one look at a ready environment's unit (`run::pool::dead`): 5 s.
const LOOK: Duration = Duration::from_secs(5);

/// What [`destroy_dead`] did with a ready environment that is not (known to be) alive.
pub(crate) enum DeadNote {
    /// It was dead and is destroyed: the line that says so (for stdout).
    Destroyed(String),
    /// It was dead and is not fully destroyed: the error (for stderr).
    Left(String),
    /// A unit of it could not be read: it is kept, and the warning says why (for stderr).
    Unknown(String),
}

impl DeadNote {
    /// Prints the note: a destruction on stdout, the others on stderr.
    ///
    /// # Errors
    /// Stdout cannot be written.
    pub(crate) fn say(&self) -> Result<()> {
        match self {
            DeadNote::Destroyed(l) => crate::outln!("{l}"),
            DeadNote::Left(l) | DeadNote::Unknown(l) => crate::stderrln!("{l}"),
        }
        Ok(())
    }
}

/// Destroys every ready environment of `eh`'s pool that is dead (`run::pool::dead`: its proxy
/// unit or its pod unit is not `active`; one look at each over a connection of its own whose
/// calls are bounded by [`LOOK`]). Each is taken out of `ready/` into `expiring/` first (as
/// expiry does: no run can claim it meanwhile; one claimed first is left to its run's claim
/// check) and destroyed ([`EnvHost::destroy`]). One whose unit cannot be read is kept and
/// said. Returns a note for each that was not alive; for the pool's keeper and `cyclix pool
/// fill|expire`.
///
/// # Errors
/// The pool's state cannot be listed, or an environment cannot be moved out of `ready/`.
pub(crate) fn destroy_dead(env: &HostEnv, eh: &EnvHost<'_>) -> Result<Vec<DeadNote>> {
    use crate::run::pool::dead::{self, Look, Verdict};
    use crate::systemd::UnitManager as _;
    let tenant = &eh.spec.tenant;
    let ready = eh.state.ready_envs()?;
    if ready.is_empty() {
        return Ok(Vec::new());
    }
    let units = match unit_manager(env) {
        Ok(u) => u.with_call_timeout(LOOK),
        Err(e) => {
            return Ok(vec![DeadNote::Unknown(format!(
                "warning: pool {tenant}: its {} ready environment(s) are kept, not looked at: {e:#}",
                ready.len()
            ))]);
        }
    };
    let mut notes = Vec::new();
    for f in ready {
        let looks: Vec<_> = dead::units(&f.env)
            .into_iter()
            .map(|(what, unit)| {
                let look = match units.unit_status(&unit) {
                    Ok(s) => Look::Read(s.active_state, s.load_state),
                    Err(e) => Look::Unreadable(e.to_string()),
                };
                (what, unit, look)
            })
            .collect();
        let why = match dead::judge(&looks) {
            Verdict::Alive => continue,
            Verdict::Unknown(why) => {
                notes.push(DeadNote::Unknown(format!(
                    "warning: pool {tenant}: environment {} is kept, not known to be alive: {why}",
                    f.env
                )));
                continue;
            }
            Verdict::Dead(why) => why,
        };
        if !eh.state.take(&f.env)? {
            continue; // claimed meanwhile: its claim's check refuses it
        }
        notes.push(match eh.destroy(&f.env, &eh.state.expiring_path(&f.env)) {
            None => DeadNote::Destroyed(format!(
                "pool {tenant}: environment {} is dead ({why}) and destroyed",
                f.env
            )),
            Some(l) => DeadNote::Left(format!(
                "error: pool {tenant}: environment {} is dead ({why}); {l}",
                f.env
            )),
        });
    }
    Ok(notes)
}

/// What a run's claim decided: its run id and environment, the notices for its record, and
/// for a warm environment the pool's files the run takes over.
pub(crate) struct Claimed {
    /// The run id: the claimed environment's id, or a new one (cold).
    pub run_id: String,
    /// The environment (record, octet).
    pub environment: Environment,
    /// The environment's log key (warm).
    pub log_key: Option<String>,
    /// The environment's credential placeholders (warm).
    pub placeholders: Option<Vec<String>>,
    /// The environment's proxy credential file, empty from the fill (warm, with credentials):
    /// [`hand_credentials`] writes it; with the group the fill gave it.
    pub credentials_file: Option<(PathBuf, u32)>,
    /// Notices for the record (a refused environment, what was wrong with it).
    pub notices: Vec<String>,
    /// Warm: the claimed state file (`claimed/ENV@ENV`) and the pool's ledger of it.
    pub files: Option<(PathBuf, PathBuf)>,
}

/// The claim of a run of `spec` (holding the tenant lock, before its ledger; environments
/// claimed by the tenant's dead runs are converged first): the oldest
/// ready environment that passes the check against its fill ([`EnvHost::check`]); one that
/// does not is destroyed and named in a notice, and the next one is tried. Cold (`run_id`, the
/// id the run holds its tenant lock under, and `why_cold`) when the tenant cannot have a warm
/// environment or none passes: a cold run keeps its id, so the lock, a refusal naming the
/// holder and the record agree (a new id here made `already running run X` name a run whose
/// record is Y).
///
/// The claim is timed as the record's first phase, `claim` (`Environment::claim`), when
/// the tenant can have a warm environment.
///
/// # Errors
/// The pool's state or the user manager cannot be reached.
pub(crate) fn claim(env: &HostEnv, spec: &Spec, backend: Backend, run_id: &str) -> Result<Claimed> {
    let start_ms = now_ms();
    let mut c = claim_untimed(env, spec, backend, run_id)?;
    if pool::why_cold(spec, backend).is_none() {
        c.environment.claim.push(crate::run::record::Phase {
            name: "claim".into(),
            start_ms,
            end_ms: now_ms(),
            outcome: "ok".into(),
        });
    }
    Ok(c)
}

fn claim_untimed(env: &HostEnv, spec: &Spec, backend: Backend, run_id: &str) -> Result<Claimed> {
    let cold = |why: &str, notices: Vec<String>| Claimed {
        notices,
        ..cold_because(run_id, why)
    };
    if let Some(why) = pool::why_cold(spec, backend) {
        return Ok(cold(why, Vec::new()));
    }
    with_env_host(env, spec, |eh| {
        let mut notices = converge_dead_fillers(eh)?;
        notices.extend(converge_dead_claims(eh)?);
        let podman = crate::podman::Podman::new();
        while let Some(c) = eh.state.claim_own()? {
            let wrong = eh.check(&c.filled, &podman);
            if wrong.is_empty() {
                return Ok(warm(eh, c.filled, c.path, notices));
            }
            let id = c.filled.env.clone();
            let left = eh.destroy(&id, &c.path);
            notices.push(format!(
                "pool: environment {id} refused at the claim and destroyed: {}{}",
                wrong.join("; "),
                left.map(|l| format!("; {l}")).unwrap_or_default()
            ));
        }
        let why = if notices.iter().any(|n| n.contains("refused at the claim")) {
            "none ready that passed the claim's check (see the notices)"
        } else {
            pool::NONE_READY
        };
        Ok(cold(why, notices))
    })
}

/// What the host says about a fill that failed, for its error: podman's storage lock held (its
/// holder named: podman's calls wait for it until their deadlines), or `$XDG_RUNTIME_DIR` full
/// (the Quadlet generator and conmon write there: a unit then reads as not found or masked).
/// Empty when neither.
pub(crate) fn fill_failure_note(env: &HostEnv) -> String {
    let mut notes = Vec::new();
    let graphroot = crate::host::storage_conf::of(env);
    if let Ok(h) = crate::run::storage_lock::holders(&graphroot)
        && !h.is_empty()
    {
        notes.push(format!(
            "podman's storage lock is held: {}; podman calls wait for it",
            crate::run::storage_lock::describe(&h)
        ));
    }
    if let Ok(rt) = env.runtime_dir()
        && let Ok(v) = nix::sys::statvfs::statvfs(rt.as_path())
    {
        let avail = v.blocks_available().saturating_mul(v.fragment_size());
        if avail < crate::run::space::FULL_BELOW {
            notes.push(format!(
                "runtime dir full (avail {}) at {}: the Quadlet generator and conmon could not \
                 write there; free space in it",
                crate::limits::bytes(avail),
                rt.display()
            ));
        }
    }
    if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join("; "))
    }
}

/// A cold environment for `run_id` that did not claim for `why` (the record says so).
pub(crate) fn cold_because(run_id: &str, why: &str) -> Claimed {
    Claimed {
        environment: Environment {
            record: pool::cold(run_id, why),
            octet: None,
            claim: Vec::new(),
        },
        run_id: run_id.to_string(),
        log_key: None,
        placeholders: None,
        credentials_file: None,
        notices: Vec::new(),
        files: None,
    }
}

/// The environment of a run given `--run-id` (it never claims one: the pool's ids are fixed
/// at fill time): `None` when the tenant cannot have a warm one anyway (the record then says
/// why from the spec).
pub(crate) fn named(run_id: &str, spec: &Spec, backend: Backend) -> Option<Claimed> {
    pool::why_cold(spec, backend).is_none().then(|| {
        cold_because(
            run_id,
            "`--run-id` names the run: it makes its own environment",
        )
    })
}

fn warm(eh: &EnvHost<'_>, filled: Filled, path: PathBuf, notices: Vec<String>) -> Claimed {
    let ledger = eh.state.ledger_path(&filled.env);
    Claimed {
        run_id: filled.env.clone(),
        environment: Environment {
            record: pool::warm(&filled, now_ms()),
            octet: Some(filled.octet),
            claim: Vec::new(),
        },
        log_key: Some(filled.log_key),
        credentials_file: (!filled.credentials_file.is_empty()).then(|| {
            (
                PathBuf::from(&filled.credentials_file),
                filled.credentials_gid,
            )
        }),
        placeholders: Some(filled.placeholders),
        notices,
        files: Some((path, ledger)),
    }
}

/// Hands claimed environment `inputs.run_id`'s proxy the run's credentials: the header lines
/// (`credential_include`, the cold path's rendering) into its credential file `file`, then
/// squid reloaded (`run::pool::credfile`). On a failure the environment is destroyed (its
/// state file `claimed`), so a failed hand-over leaks nothing, and the error returned.
///
/// # Errors
/// The lines cannot be rendered or written, or squid did not reload.
pub(crate) fn hand_credentials(
    env: &HostEnv,
    inputs: &crate::run::inputs::RunInputs,
    (file, gid): (&Path, u32),
    claimed: &Path,
) -> Result<()> {
    let id = inputs.run_id.as_str();
    let done = crate::run::phases::prepare::credential_include(&inputs.spec, &inputs.secrets)
        .and_then(|include| {
            let conf = inputs
                .paths
                .run_dir
                .join(crate::render::plan::PROXY_CONF_FILE);
            let text = std::fs::read_to_string(&conf)
                .with_context(|| format!("reading the proxy's {}", conf.display()))?;
            pool::credfile::HandOver {
                env: id,
                path: file,
                include: &include,
                ports: text.lines().filter(|l| l.starts_with("http_port ")).count(),
                owner: (crate::host::namespaces::host_uid(), gid),
            }
            .run(&crate::podman::Podman::new())
        });
    let Err(e) = done else { return Ok(()) };
    let left = with_env_host(env, &inputs.spec, |eh| Ok(eh.destroy(id, claimed)))?;
    anyhow::bail!(
        "pool: handing the run's credentials to environment {id}'s proxy failed, the environment is destroyed: {e:#}{}",
        left.map(|l| format!("; {l}")).unwrap_or_default()
    )
}
