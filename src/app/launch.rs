//! A run launched, as `cyclix run` and `cyclix drill` start it: the tenant lock, a claimed
//! warm environment or a cold one, the convergence of the tenant's runs whose cyclix died,
//! the lifecycle, and the record written.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Result, bail};

use super::clock::{new_run_id, now_ms, utc_timestamp};
use super::tenant::{self, run_inputs, runnable_spec, tenant_spec_path, unit_manager};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::render::Backend;
use crate::run::host::RealRunHost;
use crate::run::inputs::Override;
use crate::run::lifecycle::RunInputs;
use crate::run::lock::{Acquire, Holder};
use crate::run::{converge, lifecycle, lock, record};

/// How `cyclix run` was asked to run (its flags).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunOpts<'a> {
    /// `--spec`.
    pub spec_path: Option<&'a Path>,
    /// `--run-id`.
    pub run_id: Option<&'a str>,
    /// `--backend`.
    pub force_backend: Option<Backend>,
    /// `--storage-lock-wait`.
    pub storage_lock_wait: Duration,
}

/// One run of `tenant` as `cyclix run` makes it, with `over` replacing what it names (the
/// drill's seam: the task text, the escape, the model), in this process (whose canary
/// [`crate::run::canary::ensure`] made). Returns the outcome and, when the lifecycle ran,
/// its record.
///
/// # Errors
/// As [`run`].
pub(crate) fn run_with(
    env: &HostEnv,
    tenant: &str,
    opts: &RunOpts<'_>,
    over: Override,
) -> Result<(Outcome, Option<record::RunRecord>)> {
    let RunOpts {
        spec_path,
        run_id,
        force_backend,
        storage_lock_wait,
    } = *opts;
    let runtime_dir = env.runtime_dir()?.clone();
    let Some((mut spec, backend)) =
        runnable_spec(env, tenant, spec_path, force_backend, &|_| None)?
    else {
        return Ok((Outcome::Findings, None));
    };
    if over.drill.is_some() {
        // A drill run's work is the escape it was asked to try: it is never delivered.
        spec.delivery = None;
    }
    if let Some(m) = &over.model
        && let Err(e) = crate::spec::apply_model(&mut spec.agent, m)
    {
        crate::stderrln!("error: {e}");
        return Ok((Outcome::Findings, None));
    }
    let run_id = match run_id {
        Some(id) => {
            if let Err(m) = crate::spec::validate::run_id(id) {
                crate::stderrln!("error: --run-id `{id}`: {m}");
                return Ok((Outcome::Findings, None));
            }
            id.to_string()
        }
        None => new_run_id(SystemTime::now(), std::process::id()),
    };
    let holder = Holder {
        run_id: run_id.clone(),
        pid: std::process::id(),
        started_ms: now_ms(),
    };
    let Some(mut lock) = take_tenant_lock(&runtime_dir, tenant, &holder)? else {
        return Ok((Outcome::Findings, None));
    };
    let file = spec_path.map_or_else(|| tenant_spec_path(env, tenant), Path::to_path_buf);
    let mut converged = converge_first(env, tenant, &run_id, storage_lock_wait, &file)?;
    // The host-wide limit (`max_runs`): a config that does not validate refuses the run
    // before anything of it exists.
    let capacity = match super::host_config::load(env) {
        Ok(l) => l.request(&runtime_dir, &crate::layout::records_root(&env.state_home)),
        Err(e) => {
            crate::stderrln!("error: {e}");
            return Ok((Outcome::Findings, None));
        }
    };
    let task = match over.task.clone() {
        Some(t) => t,
        None => match tenant::task_text(&spec) {
            Some(t) => t,
            None => return Ok((Outcome::Findings, None)),
        },
    };
    let (queued, claimed, interrupted) = queue_then_claim(
        env,
        &spec,
        backend,
        &capacity,
        &run_id,
        opts.run_id.is_some(),
        &mut converged,
    )?;
    let run_id = claimed.as_ref().map_or(run_id, |c| c.run_id.clone());
    lock.set_holder(&Holder {
        run_id: run_id.clone(),
        ..holder
    })?;
    let released = claimed
        .as_ref()
        .and_then(|c| c.files.clone().map(|f| (c.run_id.clone(), f.0)));
    let mut inputs = match run_inputs(env, &runtime_dir, spec.clone(), run_id, backend, task) {
        Ok(i) => i,
        Err(e) => return Err(release_claim(env, &spec, released.as_ref(), e)),
    };
    inputs.deadlines.storage_lock = storage_lock_wait;
    let pool_files = match claimed {
        Some(c) => take_claim(env, &mut inputs, c)?,
        None => None,
    };
    // `over.model` is in the spec's preset (above) and in the record's `model`.
    inputs.overridden = over;
    inputs.capacity = Some(capacity);
    inputs.queued = Some(queued);
    inputs.interrupted = interrupted;
    inputs.notices.splice(0..0, converged);
    let out = execute_run(env, tenant, inputs, backend, &file, pool_files.as_ref());
    drop(lock);
    out
}

/// The tenant lock for `holder`, or `None` (said on stderr, naming the holder and how to stop
/// it) when a run of the tenant holds it. A holder that is not a run but a cyclix process
/// converging the tenant's dead claims ([`lock::CONVERGING`]) is waited for, up to
/// [`lock::CONVERGING_WAIT`].
fn take_tenant_lock(
    runtime_dir: &Path,
    tenant: &str,
    holder: &Holder,
) -> Result<Option<crate::flock::Held>> {
    /// How long a holder may stay nameless before it is taken for a run: 2 s.
    const NAMELESS_WAIT: Duration = Duration::from_secs(2);
    let path = lock::path(runtime_dir, tenant);
    let first = std::time::Instant::now();
    let end = first + lock::CONVERGING_WAIT;
    loop {
        match lock::try_acquire(&path, holder)? {
            Acquire::Held(l) => return Ok(Some(l)),
            Acquire::Busy(Some(h))
                if h.run_id == lock::CONVERGING && std::time::Instant::now() < end =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            Acquire::Busy(Some(h)) => {
                crate::stderrln!(
                    "error: tenant {tenant} is already running run {} (pid {}, started {}); \
                     wait for it, or stop it: `cyclix stop {tenant}`",
                    h.run_id,
                    h.pid,
                    utc_timestamp(h.started_ms),
                );
                return Ok(None);
            }
            // A holder between its lock and writing its name, or between emptying it and its
            // unlock: looked at again for a moment.
            Acquire::Busy(None) if std::time::Instant::now() < end.min(first + NAMELESS_WAIT) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Acquire::Busy(None) => {
                crate::stderrln!("error: tenant {tenant} is already running (lock held)");
                return Ok(None);
            }
        }
    }
}

/// The host-wide limit first (issue 36 item 4): the run waits for its slot holding nothing but
/// its tenant lock, then claims a warm environment (a run given `--run-id` makes its own, a
/// run without a slot claims nothing: it ends in `queue`); the slot file then names the id the
/// run adopted. Returns the queue phase (with the slot), the claim, and the SIGTERM/SIGINT flag
/// the wait watched (the run's from here on); what it converged of the pool first goes into
/// `notices`.
fn queue_then_claim(
    env: &HostEnv,
    spec: &crate::spec::Spec,
    backend: Backend,
    capacity: &crate::run::capacity::Request,
    run_id: &str,
    named: bool,
    notices: &mut Vec<String>,
) -> Result<(
    crate::run::capacity::Queued,
    Option<super::pool_ops::Claimed>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
)> {
    let interrupted = super::tenant::interrupt_flag()?;
    if crate::run::pool::why_cold(spec, backend).is_none() {
        // A dead claim's key must not wait in its proxy while this run queues.
        notices.extend(super::pool_ops::converge_dead_under_lock(env, spec)?);
    }
    let records = record::tenant_dir(&env.state_home, &spec.tenant);
    // A tenant's first run has no records dir yet: its queue note needs one (a run killed
    // while it waits is recorded from it, and `status` reads it).
    if let Err(e) = std::fs::create_dir_all(&records) {
        bail!(
            "creating the tenant's records dir {}: {e}",
            records.display()
        );
    }
    let note = crate::layout::RunFiles::new(&records, run_id).phase();
    let (mut queued, mut slot) =
        crate::run::lifecycle::queue_ahead(capacity, &spec.tenant, run_id, &note, &interrupted);
    let claimed = if slot.is_none() {
        None
    } else if named {
        super::pool_ops::named(run_id, spec, backend)
    } else if let Some(holder) = storage_lock_holder(env) {
        // The claim's look at the environment (podman) would wait on podman's storage lock
        // unbounded: cold, whose prepare waits bounded and names the holder.
        Some(super::pool_ops::cold_because(
            run_id,
            &format!(
                "podman's storage lock is held ({holder}): no claim, the cold path waits for it bounded"
            ),
        ))
    } else {
        Some(super::pool_ops::claim(env, spec, backend, run_id)?)
    };
    if claimed.as_ref().is_some_and(|c| c.run_id != run_id) {
        // The run is its environment's id from here: the note under the old id goes.
        let _ = std::fs::remove_file(&note);
    }
    if let Some(s) = slot.as_mut() {
        s.set_occupant(&crate::run::capacity::Occupant {
            tenant: spec.tenant.clone(),
            run_id: claimed
                .as_ref()
                .map_or_else(|| run_id.to_owned(), |c| c.run_id.clone()),
            pid: std::process::id(),
            since_ms: u64::try_from(queued.phase.start_ms).unwrap_or(u64::MAX),
        })?;
    }
    queued.slot = slot.map(std::sync::Arc::new);
    Ok((queued, claimed, interrupted))
}

/// Who holds podman's storage lock, when someone holds it for all of [`CLAIM_LOCK_WAIT`] (a
/// holder seen for a moment is another podman command, and is waited out).
fn storage_lock_holder(env: &HostEnv) -> Option<String> {
    let graphroot = crate::host::storage_conf::of(env);
    match crate::run::storage_lock::wait_free(
        || crate::run::storage_lock::holders(&graphroot),
        CLAIM_LOCK_WAIT,
        Duration::from_millis(100),
        || false,
    ) {
        Err(crate::run::storage_lock::WaitError::Busy { holders, .. }) => {
            Some(crate::run::storage_lock::describe(&holders))
        }
        _ => None,
    }
}

/// How long a claim waits for podman's storage lock before the run goes cold (whose prepare
/// then waits `--storage-lock-wait` and names the holder): 10 s.
const CLAIM_LOCK_WAIT: Duration = Duration::from_secs(10);

/// A run whose inputs failed after it claimed a warm environment (a variable set nowhere, a
/// value the proxy's header line cannot carry): the environment is destroyed, not left in
/// `claimed/` with no run (where `leftovers` would call it pooled forever). Returns `e`, with
/// what the destruction left when it left something.
fn release_claim(
    env: &HostEnv,
    spec: &crate::spec::Spec,
    released: Option<&(String, PathBuf)>,
    e: anyhow::Error,
) -> anyhow::Error {
    // Warm: the environment's id (the run's) and its state file `claimed/ENV@ENV`.
    let Some((id, claimed)) = released else {
        return e;
    };
    match super::pool_ops::with_env_host(env, spec, |eh| Ok(eh.destroy(id, claimed))) {
        Ok(None) => e,
        Ok(Some(left)) => e.context(format!("the claimed environment {id} is destroyed; {left}")),
        Err(d) => e.context(format!("destroying the claimed environment {id}: {d:#}")),
    }
}

/// Applies claim `c` to `inputs` (its log key, placeholders, notices, environment; a warm
/// one's proxy gets the credentials) and returns its pool files.
fn take_claim(
    env: &HostEnv,
    inputs: &mut RunInputs,
    mut c: super::pool_ops::Claimed,
) -> Result<Option<(PathBuf, PathBuf)>> {
    if let Some(k) = c.log_key {
        inputs.log_key = k;
    }
    if let Some(p) = c.placeholders {
        inputs.placeholders = p;
    }
    if let (Some((file, gid)), Some((claimed, _))) = (&c.credentials_file, &c.files) {
        let start_ms = now_ms();
        super::pool_ops::hand_credentials(env, inputs, (file, *gid), claimed)?;
        crate::failpoint::kill_point("claim.handed");
        c.environment.claim.push(crate::run::record::Phase {
            name: "credentials".into(),
            start_ms,
            end_ms: now_ms(),
            outcome: "ok".into(),
        });
    }
    inputs.notices.extend(c.notices);
    inputs.environment = Some(c.environment);
    Ok(c.files)
}

/// The run's host (podman, git, the file system) for the spec at `spec_file`.
fn run_host(env: &HostEnv, spec_file: &Path) -> RealRunHost {
    RealRunHost::new()
        .with_graphroot(crate::host::storage_conf::of(env))
        .with_mount_guard(spec_file.display().to_string(), env.clone())
        .with_output_to_journal(crate::context::journal_stream())
}

/// Finishes the teardown of every run of `tenant` whose cyclix died (we hold the tenant lock: a
/// ledger of another run means its cyclix died mid-run), before this run queues for a slot (a
/// dead run's slot stays taken until then, `run::capacity`) or claims anything. `run_id` is the
/// id this run has now (a warm run adopts its environment's id after). Returns the notices.
fn converge_first(
    env: &HostEnv,
    tenant: &str,
    run_id: &str,
    storage_lock_wait: Duration,
    spec_file: &Path,
) -> Result<Vec<String>> {
    let units = unit_manager(env)?;
    let host = run_host(env, spec_file);
    let records = record::tenant_dir(&env.state_home, tenant);
    let fallback = crate::layout::Runtime(env.runtime_dir()?.clone()).fallback_records(tenant);
    let mut converged = converge::restore_fallback(&records, &fallback);
    let uid = crate::host::namespaces::host_uid();
    converged.extend(converge::converge_tenant(
        &records,
        &converge::Converging {
            units: &units,
            host: &host,
            by: run_id,
            lock_wait: storage_lock_wait,
            manager_started_ms: crate::run::procs::user_manager_started_ms(Path::new("/proc"), uid),
            uid,
        },
    )?);
    Ok(converged)
}

/// Leaves this run's marker, executes it, writes its record and prints the summary (the
/// tenant's dead runs were converged first: [`converge_first`]).
fn execute_run(
    env: &HostEnv,
    tenant: &str,
    inputs: RunInputs,
    backend: Backend,
    spec_file: &Path,
    pool_files: Option<&(PathBuf, PathBuf)>,
) -> Result<(Outcome, Option<record::RunRecord>)> {
    let units = unit_manager(env)?;
    let host = run_host(env, spec_file);
    let records = record::tenant_dir(&env.state_home, tenant);
    let mut inputs = inputs;
    let files = crate::layout::RunFiles::new(&records, &inputs.run_id);
    inputs.progress = Some(files.phase());
    let ledger = crate::run::ledger::Ledger::create(
        &files.marker(),
        &crate::run::ledger::Owner {
            tenant: tenant.to_string(),
            run_id: inputs.run_id.clone(),
            pid: std::process::id(),
            started_ms: u64::try_from(now_ms()).unwrap_or(u64::MAX),
            repo: PathBuf::from(&inputs.spec.repo.path),
        },
    )?;
    let mut ledger = ledger;
    if let Some((_, pool_ledger)) = pool_files {
        // The claimed environment's objects are this run's now: its ledger names them before
        // the pool forgets them, so a run that dies from here on is converged with them.
        take_over(&mut ledger, pool_ledger)?;
    }
    crate::stderrln!(
        "cyclix: run {} of tenant {tenant} starting ({backend:?} units)",
        inputs.run_id
    );
    let drill = inputs.overridden.drill.is_some();
    let rec = lifecycle::execute(&inputs, ledger, &units, &host);
    // A record the state dir cannot take goes to the runtime dir (the next run moves it
    // back); the summary is printed either way, so the result reaches the journal.
    let fallback = crate::layout::Runtime(env.runtime_dir()?.clone()).fallback_records(tenant);
    let path = match record::write(&records, &rec) {
        Ok(p) => p,
        Err(e) => {
            let p = anyhow::Context::with_context(record::write(&fallback, &rec), || {
                format!(
                    "{}; and the runtime dir cannot take it either",
                    record::summary(&rec)
                )
            })?;
            crate::stderrln!(
                "cyclix: the run record could not be written to {} ({e:#}); it is at {} instead \
                 (a tmpfs: the tenant's next run moves it back; free space in the state dir)",
                records.display(),
                p.display()
            );
            p
        }
    };
    crate::failpoint::kill_point("record.written");
    crate::run::ledger::remove(&records, &rec.run_id);
    if let Some((state_file, _)) = pool_files {
        // The environment served its one run and was torn down with it.
        crate::run::pool::PoolState::forget(state_file)?;
    }
    // The metrics count the record just written (issue 32 item 4); a failure to write them
    // is said and changes nothing of the run's result.
    super::metrics::write_after(env, &format!("run {} of {tenant}", rec.run_id));
    let summary = format!("{}  record: {}", record::summary(&rec), path.display());
    if drill {
        // The drill's stdout is its own table (or JSON): a drill run's summary goes to stderr.
        crate::stderrln!("{summary}");
    } else {
        crate::outln!("{summary}");
    }
    Ok(match Outcome::from_code(rec.result.exit_code()) {
        Some(o) => (o, Some(rec)),
        None => bail!(
            "run {} failed in phase {}",
            rec.run_id,
            rec.failed_phase.as_deref().unwrap_or("?")
        ),
    })
}

/// Appends every entry of the pool's ledger of a claimed environment (but its `run` line) to
/// the run's `ledger`, then removes the pool's.
fn take_over(ledger: &mut crate::run::ledger::Ledger, pool_ledger: &Path) -> Result<()> {
    let Some((_, entries)) = crate::run::ledger::read(pool_ledger) else {
        bail!(
            "the claimed environment's ledger {} cannot be read",
            pool_ledger.display()
        );
    };
    for e in entries {
        if !matches!(e, crate::run::ledger::Entry::Run { .. }) {
            ledger.record(e)?;
        }
    }
    crate::run::pool::PoolState::forget(pool_ledger)
}
