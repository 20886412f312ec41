//! The lifecycle verbs: `run`, `images build`, `demo setup`, `install`, `start`, `stop`,
//! `status`, `logs`. Each wires the adapters to the pure core and prints to stdout.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};

use crate::context::{HostEnv, current_exe, path_str, secret_value};
use crate::exit::Outcome;
use crate::git::Git;
use crate::images;
use crate::podman::Podman;
use crate::render::{self, Backend};
use crate::run::lifecycle::{self, Deadlines, RunInputs, RunPaths};
use crate::run::lock::{self, Acquire, Holder};
use crate::run::{converge, host::RealRunHost, record};
use crate::spec::{Spec, Task};
use crate::systemd::{ActiveState, JobMode, UnitManager, ZbusUnitManager};
use crate::tier::{self, Runtime};

/// `~/.config/cyclix/tenants/TENANT.yaml`.
#[must_use]
pub fn tenant_spec_path(env: &HostEnv, tenant: &str) -> PathBuf {
    env.config_home
        .join("cyclix/tenants")
        .join(format!("{tenant}.yaml"))
}

pub(crate) fn unit_manager(env: &HostEnv) -> Result<ZbusUnitManager> {
    let lock = env.runtime_dir()?.join("cyclix/systemd.lock");
    ZbusUnitManager::session(lock).context("connecting to the systemd user manager")
}

fn load_tenant(
    env: &HostEnv,
    tenant: &str,
    spec: Option<&Path>,
) -> Result<std::result::Result<Spec, String>> {
    let path = spec.map_or_else(|| tenant_spec_path(env, tenant), Path::to_path_buf);
    if !path.exists() {
        // A user's mistake, not cyclix failing: a finding (exit 1).
        return Ok(Err(format!(
            "error: no spec for tenant `{tenant}` at {}; write one (see README, \"Spec reference\") or run `cyclix demo setup` for the demo tenant",
            path.display()
        )));
    }
    Ok(super::load_spec(&path, env)?.map_err(|e| e.to_string()))
}

/// A new run id: `YYYYMMDDtHHMMSS-xxxx` (UTC, 4 hex digits from the clock's nanoseconds and
/// the pid), 20 characters, valid for `spec::validate::run_id`.
#[must_use]
pub fn new_run_id(now: SystemTime, pid: u32) -> String {
    let d = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(i64::try_from(days).unwrap_or(0));
    let tag = (d.subsec_nanos() ^ pid.rotate_left(16)) & 0xffff;
    format!(
        "{y:04}{m:02}{day:02}t{:02}{:02}{:02}-{tag:04x}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A loud notice when the tenant's env file (its secret values) is readable by others: the
/// README asks for mode 0600.
fn env_file_notice(env: &HostEnv, tenant: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = env
        .config_home
        .join("cyclix/tenants")
        .join(format!("{tenant}.env"));
    let mode = std::fs::metadata(&path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        let n = format!(
            "{} holds secret values but has mode {mode:04o}: others on this host can read them; `chmod 600 {}`",
            path.display(),
            path.display()
        );
        crate::stderrln!("warning: {n}");
        n
    })
}

/// A timer's next elapse for people: the calendar time in UTC, or "on the manager's monotonic
/// clock in N s" for monotonic triggers.
fn elapse_text(n: crate::systemd::NextElapse) -> String {
    match (n.realtime_us, n.monotonic_us) {
        (Some(us), _) => utc_timestamp(u128::from(us / 1000)),
        (None, Some(us)) => format!("at {} s on the manager's monotonic clock", us / 1_000_000),
        (None, None) => "never".to_string(),
    }
}

/// `YYYY-MM-DD HH:MM:SS UTC` for a time in ms since the Unix epoch.
#[must_use]
pub fn utc_timestamp(ms: u128) -> String {
    let secs = u64::try_from(ms / 1000).unwrap_or(0);
    let (y, m, d) = civil_from_days(i64::try_from(secs / 86_400).unwrap_or(0));
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

pub(crate) fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Whether Podman's Quadlet user generator is in a directory the user manager scans.
fn quadlet_generator_installed() -> bool {
    use crate::host::facts::{QUADLET_GENERATOR, USER_GENERATOR_DIRS};
    USER_GENERATOR_DIRS
        .iter()
        .any(|d| Path::new(d).join(QUADLET_GENERATOR).exists())
}

/// Whether a rootless container runtime is usable, and which unit flavour it takes: the fact
/// the tier gate decides on (never defaulted).
fn probe_runtime() -> (Runtime, Backend) {
    match Podman::new().version() {
        Ok(v) => {
            let major: u32 = v
                .split('.')
                .next()
                .and_then(|m| m.parse().ok())
                .unwrap_or(0);
            (
                Runtime::Usable,
                // Quadlet only where its user generator is installed too (B01): podman 5
                // without it gets the plain units, which carry the same topology.
                if major >= 5 && quadlet_generator_installed() {
                    Backend::Quadlet
                } else {
                    Backend::Plain
                },
            )
        }
        Err(e) => (Runtime::Unusable(e.to_string()), Backend::Plain),
    }
}

/// The tenant's spec as a run gets it, or `None` after printing why not (a finding, exit 1):
/// loaded (no spec: a finding naming the path), its `tenant` matching, its tier through the
/// tier gate (the configured tier, raised by the legacy flag, never lowered), the verb's own
/// refusal of the granted spec (`refuse`: `twin` needs tier `container`), the preflight
/// (mount sources, repository, base ref) and the resource limits this host can enforce; with
/// the unit backend to use (`force_backend`, else detected). Shared by `run` and `twin`.
///
/// # Errors
/// Failures of cyclix itself (an unreadable spec).
pub(crate) fn runnable_spec(
    env: &HostEnv,
    tenant: &str,
    spec_path: Option<&Path>,
    force_backend: Option<Backend>,
    refuse: &dyn Fn(&Spec) -> Option<String>,
) -> Result<Option<(Spec, Backend)>> {
    let mut spec = match load_tenant(env, tenant, spec_path)? {
        Ok(s) => s,
        Err(e) => {
            crate::stderrln!("{e}");
            return Ok(None);
        }
    };
    if spec.tenant != tenant {
        crate::stderrln!(
            "error: the spec names tenant `{}`, not `{tenant}`",
            spec.tenant
        );
        return Ok(None);
    }
    let (runtime, detected) = probe_runtime();
    let backend = force_backend.unwrap_or(detected);
    spec.tier = match tier::gate(spec.tier, spec.legacy_worktree_isolation, &runtime) {
        Ok(t) => t,
        Err(refusal) => {
            crate::stderrln!("error: {refusal}");
            return Ok(None);
        }
    };
    let file = spec_path.map_or_else(|| tenant_spec_path(env, tenant), Path::to_path_buf);
    if let Some(problem) = refuse(&spec)
        .or_else(|| preflight(&spec, &file.display().to_string(), env))
        .or_else(|| unenforceable_limits(&spec))
    {
        crate::stderrln!("error: {problem}");
        return Ok(None);
    }
    Ok(Some((spec, backend)))
}

/// `cyclix run TENANT`: one run, end to end. Exit status 0 gate passed, 1 gate or agent failed
/// (or the spec/tier was refused), 2 cyclix failed.
///
/// # Errors
/// Failures of cyclix before the lifecycle starts (no runtime dir, unreadable spec).
pub fn run(
    tenant: &str,
    spec_path: Option<&Path>,
    run_id: Option<&str>,
    force_backend: Option<Backend>,
    storage_lock_wait: Duration,
) -> Result<Outcome> {
    let env = HostEnv::from_env()?;
    let runtime_dir = env.runtime_dir()?.clone();
    let Some((spec, backend)) = runnable_spec(&env, tenant, spec_path, force_backend, &|_| None)?
    else {
        return Ok(Outcome::Findings);
    };
    let run_id = match run_id {
        Some(id) => {
            if let Err(m) = crate::spec::validate::run_id(id) {
                crate::stderrln!("error: --run-id `{id}`: {m}");
                return Ok(Outcome::Findings);
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
    let _lock = match lock::try_acquire(&lock::path(&runtime_dir, tenant), &holder)? {
        Acquire::Held(l) => l,
        Acquire::Busy(h) => {
            if let Some(h) = h {
                crate::stderrln!(
                    "error: tenant {tenant} is already running run {} (pid {}, started {}); \
                     wait for it, or stop it: `cyclix stop {tenant}` when it runs as \
                     cyclix-run@{tenant}.service, else `kill -TERM {}` (it still tears down)",
                    h.run_id,
                    h.pid,
                    utc_timestamp(h.started_ms),
                    h.pid
                );
            } else {
                crate::stderrln!("error: tenant {tenant} is already running (lock held)");
            }
            return Ok(Outcome::Findings);
        }
    };
    let task = match &spec.task {
        Task::Text(t) => t.clone(),
        Task::File(f) => match read_task_file(f) {
            Ok(t) => t,
            Err(problem) => {
                crate::stderrln!("error: task.file: {problem}");
                return Ok(Outcome::Findings);
            }
        },
    };
    let mut inputs = run_inputs(&env, &runtime_dir, spec, run_id, backend, task)?;
    inputs.deadlines.storage_lock = storage_lock_wait;
    let file = spec_path.map_or_else(|| tenant_spec_path(&env, tenant), Path::to_path_buf);
    converge_and_execute(&env, tenant, inputs, backend, &file)
}

/// A flag SIGTERM and SIGINT set (`cyclix stop`, `systemctl --user stop`, Ctrl-C), so a run
/// stops at its next check and still tears down; the default action (dying on the spot and
/// leaving the run behind) is replaced.
fn interrupt_flag() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, flag.clone())
            .context("installing the SIGTERM/SIGINT handler")?;
    }
    Ok(flag)
}

/// Everything the lifecycle needs for one run, resolved from the host: paths, secret values,
/// the leak watch's list, the probe context.
pub(crate) fn run_inputs(
    env: &HostEnv,
    runtime_dir: &Path,
    spec: Spec,
    run_id: String,
    backend: Backend,
    task: String,
) -> Result<RunInputs> {
    let tenant = spec.tenant.clone();
    let tenant = tenant.as_str();
    let secrets = secret_values(&spec, tenant)?;
    let handed: Vec<String> = secrets.iter().map(|(k, _)| k.clone()).collect();
    let watched = crate::run::boundary::watch_list(&crate::context::all_env(), &handed);
    let host = crate::run::boundary::HostFacts {
        namespaces: crate::host::namespaces::host_namespaces(),
        uid: crate::host::namespaces::host_uid(),
        lsm: crate::host::namespaces::host_lsm(),
        sockets: vec![
            path_str(&runtime_dir.join("bus")),
            path_str(&runtime_dir.join("podman/podman.sock")),
            "/run/podman/podman.sock".to_string(),
            "/var/run/docker.sock".to_string(),
        ],
    };
    let probe_context = crate::run::boundary::probe_context(&spec, &watched, &host);
    Ok(RunInputs {
        paths: RunPaths {
            quadlet_dir: runtime_dir.join("containers/systemd"),
            units_dir: runtime_dir.join("systemd/user"),
            run_dir: runtime_dir.join("cyclix/runs").join(&run_id),
            worktree: env
                .data_home
                .join("cyclix/worktrees")
                .join(tenant)
                .join(&run_id),
            records_dir: Some(record::tenant_dir(&env.state_home, tenant)),
        },
        spec,
        run_id,
        backend,
        task,
        secrets,
        deadlines: Deadlines::default(),
        notices: env_file_notice(env, tenant).into_iter().collect(),
        cyclix_bin: current_exe()?,
        probe_context,
        watched,
        tripwire_dir: env.home.clone(),
        probe_sockets: host.sockets.clone(),
        interrupted: interrupt_flag()?,
        progress: None,
    })
}

/// Finishes the teardown of any run of `tenant` whose cyclix died (the tenant lock is held),
/// leaves this run's marker, executes it, writes its record and prints the summary.
fn converge_and_execute(
    env: &HostEnv,
    tenant: &str,
    inputs: RunInputs,
    backend: Backend,
    spec_file: &Path,
) -> Result<Outcome> {
    let units = unit_manager(env)?;
    let host = RealRunHost::new()
        .with_graphroot(crate::run::storage_lock::graphroot(
            &env.home,
            &env.config_home,
            &env.data_home,
            crate::host::namespaces::host_uid(),
        ))
        .with_mount_guard(spec_file.display().to_string(), env.clone());
    let records = record::tenant_dir(&env.state_home, tenant);
    // We hold the tenant lock: a ledger of another run means its cyclix died mid-run.
    let mut inputs = inputs;
    let converged = converge::converge_tenant(&records, &units, &host, &inputs.run_id)?;
    inputs.notices.extend(converged);
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
    crate::stderrln!(
        "cyclix: run {} of tenant {tenant} starting ({backend:?} units)",
        inputs.run_id
    );
    let rec = lifecycle::execute(&inputs, ledger, &units, &host);
    let path = record::write(&records, &rec)?;
    crate::failpoint::kill_point("record.written");
    crate::run::ledger::remove(&records, &rec.run_id);
    print!("{}", record::summary(&rec));
    println!("  record: {}", path.display());
    Ok(match rec.result.exit_code() {
        0 => Outcome::Ok,
        1 => Outcome::Findings,
        _ => bail!(
            "run {} failed in phase {}",
            rec.run_id,
            rec.failed_phase.as_deref().unwrap_or("?")
        ),
    })
}

/// The largest task file cyclix reads, in bytes (1 MiB): a prompt, not a data set.
pub const MAX_TASK_BYTES: u64 = 1024 * 1024;

/// Reads `task.file`: a regular file (not a FIFO or device, which would hang), at most
/// [`MAX_TASK_BYTES`], UTF-8. The error names the problem and the fix.
pub(crate) fn read_task_file(path: &str) -> std::result::Result<String, String> {
    use std::io::Read as _;
    let meta =
        std::fs::metadata(path).map_err(|e| format!("`{path}`: {e}; fix the path in the spec"))?;
    if !meta.is_file() {
        return Err(format!(
            "`{path}` is not a regular file; point `task.file` at a text file"
        ));
    }
    if meta.len() > MAX_TASK_BYTES {
        return Err(format!(
            "`{path}` is {} bytes, more than {MAX_TASK_BYTES}; a task is a prompt",
            meta.len()
        ));
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_TASK_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| format!("`{path}`: {e}; save it as UTF-8 text"))?;
    Ok(text)
}

/// User-fixable problems found right before a run, so they are findings (exit 1) that name
/// the spec key, not cyclix failures: a mount source that is (now) a symlink, or that is,
/// contains or lies inside a protected path or a git directory (the deep walk, podman's real
/// storage: `host::mount_scan::run_refusal`), a repository that is not one, a base ref that
/// does not exist.
fn preflight(spec: &Spec, file: &str, env: &HostEnv) -> Option<String> {
    for (i, m) in spec.mounts.iter().enumerate() {
        if let Err(e) = crate::host::paths::reject_symlinks(Path::new(&m.source)) {
            return Some(format!(
                "mounts[{i}].source (checked right before the run): {e}"
            ));
        }
    }
    if let Some(refusal) = crate::host::mount_scan::run_refusal(spec, file, env) {
        return Some(format!("refused before the run:\n{refusal}"));
    }
    if let Err(e) = Git::new(&spec.repo.path).rev_parse_commit(&spec.repo.base) {
        return Some(format!(
            "repo: {e:#}\n  fix: `repo.path` must be a git work tree and `repo.base` a branch, tag or commit in it"
        ));
    }
    None
}

/// Why the spec's `agent.resources` cannot be enforced here (a controller not delegated to the
/// user manager), or `None`. Such a run is refused before anything exists (`run::limits`).
fn unenforceable_limits(spec: &Spec) -> Option<String> {
    let r = &spec.agent.resources;
    if crate::run::limits::needed(r).is_empty() {
        return None;
    }
    let cg = crate::host::facts::cgroup_facts(crate::host::namespaces::host_uid());
    crate::run::limits::refusal(r, cg.delegated.as_deref().map_err(String::as_str), &cg.file)
}

/// The values of the variables the spec names (agent and services), from cyclix's own
/// environment.
fn secret_values(spec: &Spec, tenant: &str) -> Result<Vec<(String, Vec<u8>)>> {
    let mut secrets = Vec::new();
    for name in spec
        .agent
        .env
        .iter()
        .chain(spec.services.iter().flat_map(|s| s.env.iter()))
    {
        let Some(v) = secret_value(name) else {
            bail!(
                "agent.env names `{name}` but it is not set in cyclix's environment; set it for the user manager \
                 (`systemctl --user set-environment {name}=...` or ~/.config/cyclix/tenants/{tenant}.env, mode 0600)"
            );
        };
        secrets.push((name.clone(), v));
    }
    Ok(secrets)
}

/// The files `cyclix images build` needs, embedded: (path in the build context, contents).
const IMAGE_CONTEXT: &[(&str, &str)] = &[
    (
        "Containerfile.python",
        include_str!("../../Containerfile.python"),
    ),
    (
        "images/agent/cyclix-demo-agent",
        include_str!("../../images/agent/cyclix-demo-agent"),
    ),
    (
        "images/proxy/Containerfile",
        include_str!("../../images/proxy/Containerfile"),
    ),
    (
        "images/postgres/Containerfile",
        include_str!("../../images/postgres/Containerfile"),
    ),
    (
        "images/git/Containerfile",
        include_str!("../../images/git/Containerfile"),
    ),
    (
        "images/postgres/cyclix-postgres-entrypoint",
        include_str!("../../images/postgres/cyclix-postgres-entrypoint"),
    ),
];

/// Deadline for one image build.
pub const BUILD_DEADLINE: Duration = Duration::from_secs(900);

/// `cyclix images build`: builds the proxy, the Python agent and the `PostgreSQL` service image
/// from the embedded Containerfiles (offline when the base image is local).
///
/// # Errors
/// I/O or podman failures.
pub fn images_build() -> Result<Outcome> {
    let dir = tempfile::tempdir().context("creating a build context")?;
    for (rel, text) in IMAGE_CONTEXT {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(
            p.parent()
                .context("invariant: context files have a parent")?,
        )?;
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
    }
    let exe = dir.path().join("images/agent/cyclix-demo-agent");
    std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let podman = Podman::new();
    for (tag, file, ctx) in [
        (
            images::PROXY_IMAGE,
            "images/proxy/Containerfile",
            "images/proxy",
        ),
        (images::AGENT_PYTHON_IMAGE, "Containerfile.python", "."),
        (
            images::POSTGRES_IMAGE,
            "images/postgres/Containerfile",
            "images/postgres",
        ),
        (images::GIT_IMAGE, "images/git/Containerfile", "images/git"),
    ] {
        let id = podman.build(
            tag,
            &dir.path().join(file),
            &dir.path().join(ctx),
            BUILD_DEADLINE,
        )?;
        println!("built {tag} ({})", id.get(..12).unwrap_or(&id));
    }
    Ok(Outcome::Ok)
}

/// `cyclix demo setup`: lays out the embedded demo tenant (project repository, task, spec).
/// Idempotent: an existing project is kept.
///
/// # Errors
/// I/O or git failures.
pub fn demo_setup() -> Result<Outcome> {
    let env = HostEnv::from_env()?;
    let base = env.data_home.join("cyclix/demo");
    let project = base.join("project");
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    std::fs::write(base.join("task.md"), crate::demo::TASK).context("writing the demo task")?;
    if project.join(".git").exists() {
        println!("demo project exists: {}", project.display());
    } else {
        Git::init_repo(
            &project,
            crate::demo::project_files(),
            "demo project: calc with a failing test",
        )?;
        println!("created demo project {}", project.display());
    }
    let spec = tenant_spec_path(&env, "demo");
    std::fs::create_dir_all(spec.parent().context("invariant: spec path has a parent")?)?;
    if spec.exists() {
        // Never overwrite a spec the user may have edited.
        println!("demo spec exists (kept): {}", spec.display());
    } else {
        std::fs::write(&spec, crate::demo::TENANT_YAML)
            .with_context(|| format!("writing {}", spec.display()))?;
        println!("wrote {}", spec.display());
    }
    Ok(Outcome::Ok)
}

/// `cyclix install`: writes the unit templates (with this binary's absolute path) to
/// `~/.config/systemd/user/`, a timer drop-in for every tenant with a schedule (or only for
/// `only`), reloads,
/// enables and starts those timers, and fails if a timer has no next elapse (B25).
///
/// # Errors
/// I/O or D-Bus failures.
pub fn install(only: Option<&str>) -> Result<Outcome> {
    let env = HostEnv::from_env()?;
    let unit_dir = env.config_home.join("systemd/user");
    let bin = path_str(&current_exe()?);
    let mut files = render::units::templates(&bin).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut timers = Vec::new();
    let tenants_dir = env.config_home.join("cyclix/tenants");
    let mut specs: Vec<PathBuf> = match std::fs::read_dir(&tenants_dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect(),
        Err(_) => Vec::new(),
    };
    specs.sort();
    if let Some(t) = only {
        specs.retain(|p| p.file_stem().is_some_and(|s| s == t));
        if specs.is_empty() {
            bail!(
                "no spec for tenant `{t}` at {}",
                tenant_spec_path(&env, t).display()
            );
        }
    }
    // One bad spec must not keep the other tenants' timers from being installed: report it,
    // go on, and exit 1 at the end.
    let mut ok = true;
    for p in &specs {
        match super::load_spec(p, &env)? {
            Ok(spec) => {
                if let Some(d) =
                    render::units::timer_dropin(&spec).map_err(|e| anyhow::anyhow!("{e}"))?
                {
                    files.push(d);
                    timers.push(format!("cyclix-run@{}.timer", spec.tenant));
                }
            }
            Err(e) => {
                crate::stderrln!("{e}\n  (its timer is not installed; the other tenants are)");
                ok = false;
            }
        }
    }
    for f in &files {
        let path = unit_dir.join(&f.name);
        std::fs::create_dir_all(path.parent().context("invariant: unit path has a parent")?)?;
        record::atomic_write(&path, f.contents.as_bytes())?;
        println!("wrote {}", path.display());
    }
    let units = unit_manager(&env)?;
    units.reload()?;
    if timers.is_empty() {
        println!(
            "no tenant has a schedule; start runs with `systemctl --user start cyclix-run@TENANT`"
        );
        return Ok(if ok { Outcome::Ok } else { Outcome::Findings });
    }
    let names: Vec<&str> = timers.iter().map(String::as_str).collect();
    units.enable_unit_files(&names)?;
    for t in &timers {
        units.start(t, JobMode::Replace, Duration::from_secs(30))?;
        let next = units.timer_next_elapse(t)?;
        let service = t.replace(".timer", ".service");
        let fired = units.unit_status(&service)?;
        if !next.is_scheduled()
            && matches!(
                fired.active_state,
                ActiveState::Activating | ActiveState::Active
            )
        {
            // Persistent=true catching up a missed run fires at once; the next elapse is only
            // computed when that run ends.
            println!(
                "{t} fired at once (a missed run caught up, Persistent=true); {service} is {}",
                fired.summary()
            );
        } else if next.is_scheduled() {
            println!("enabled {t}: next elapse {}", elapse_text(next));
        } else {
            crate::stderrln!(
                "error: {t} has no next elapse: it would never fire (check its OnCalendar=); disabled it again"
            );
            // Never leave an enabled timer that cannot fire looking healthy (B25).
            let _ = units.stop(t, JobMode::Replace, Duration::from_secs(30));
            let _ = units.disable_unit_files(&[t.as_str()]);
            ok = false;
        }
    }
    Ok(if ok { Outcome::Ok } else { Outcome::Findings })
}

pub(crate) fn run_unit(tenant: &str) -> Result<String> {
    crate::spec::validate::tenant_name(tenant)
        .map_err(|m| anyhow::anyhow!("tenant `{tenant}`: {m}"))?;
    let env = HostEnv::from_env()?;
    let spec = tenant_spec_path(&env, tenant);
    if !spec.exists() {
        bail!(
            "no tenant `{tenant}`: {} does not exist; write its spec (README, \"Spec reference\") or run `cyclix demo setup` for the demo tenant",
            spec.display()
        );
    }
    Ok(format!("cyclix-run@{tenant}.service"))
}
/// `cyclix start TENANT`: `StartUnit cyclix-run@TENANT.service`, waiting up to `wait` for the
/// run to finish (it is a oneshot), then prints the run's summary.
///
/// # Errors
/// D-Bus failures.
pub fn start(tenant: &str, wait: Duration) -> Result<Outcome> {
    let env = HostEnv::from_env()?;
    let unit = run_unit(tenant)?;
    let units = unit_manager(&env)?;
    let r = units.start(&unit, JobMode::Replace, wait);
    if let Some(rec) = record::latest(&env.state_home, tenant)? {
        print!("{}", record::summary(&rec));
    }
    match r {
        Ok(_) => Ok(Outcome::Ok),
        Err(e) => {
            crate::stderrln!("error: {e}");
            Ok(Outcome::Findings)
        }
    }
}

/// `cyclix stop TENANT`: stops a running run (its teardown runs on SIGTERM).
///
/// # Errors
/// D-Bus failures.
pub fn stop(tenant: &str) -> Result<Outcome> {
    let env = HostEnv::from_env()?;
    let unit = run_unit(tenant)?;
    let o = unit_manager(&env)?.stop(&unit, JobMode::Replace, Duration::from_secs(150))?;
    println!("stopped {unit}: {}", o.status.summary());
    Ok(Outcome::Ok)
}

/// `cyclix status TENANT`: the run unit's state, the timer's next elapse and the last record.
///
/// # Errors
/// D-Bus or record read failures.
pub fn status(tenant: &str, json: bool) -> Result<Outcome> {
    let env = HostEnv::from_env()?;
    let unit = run_unit(tenant)?;
    let units = unit_manager(&env)?;
    let st = units.unit_status(&unit)?;
    let timer = format!("cyclix-run@{tenant}.timer");
    let next = units.timer_next_elapse(&timer).ok();
    // A damaged record must not hide the unit's state.
    let last = record::latest(&env.state_home, tenant).unwrap_or_else(|e| {
        crate::stderrln!("warning: the last run record cannot be read: {e:#}");
        None
    });
    let (skips, unreadable) = crate::run::tick::read(&record::tenant_dir(&env.state_home, tenant))
        .unwrap_or_else(|e| {
            crate::stderrln!("warning: the skipped triggers cannot be read: {e:#}");
            (Vec::new(), 0)
        });
    if json {
        let v = serde_json::json!({"unit": unit, "status": st, "timer_next_elapse": next,
            "skips": {"count": skips.len(), "last": skips.last(), "unreadable_lines": unreadable},
            "last_run": last});
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(Outcome::Ok);
    }
    println!("{unit}: {}", st.summary());
    match next {
        Some(n) if n.is_scheduled() => println!("{timer}: next elapse {}", elapse_text(n)),
        _ => println!("{timer}: not scheduled"),
    }
    if let Some(s) = skips.last() {
        println!(
            "{timer}: {} trigger(s) skipped while a run was active; last: {}",
            skips.len(),
            super::tick_cmd::skip_line(s)
        );
    }
    match last {
        Some(r) => print!("last {}", record::summary(&r)),
        None => println!("no run recorded yet"),
    }
    Ok(Outcome::Ok)
}

/// `cyclix logs TENANT`: the run unit's journal (what `cyclix run` printed, with timestamps).
///
/// # Errors
/// journalctl failures.
pub fn logs(tenant: &str, lines: u32) -> Result<Outcome> {
    let unit = run_unit(tenant)?;
    let n = lines.to_string();
    let out = crate::process::run(
        "journalctl",
        &[
            "--user",
            "--unit",
            &unit,
            "--no-pager",
            "--lines",
            &n,
            "--output",
            "short-iso",
        ],
        None,
        Duration::from_secs(30),
        " (is journalctl installed?)",
    )?;
    print!("{}", out.stdout);
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_valid_sortable_and_dated() {
        let t = UNIX_EPOCH + Duration::from_secs(1_796_039_172); // 2026-11-30T11:46:12Z
        let id = new_run_id(t, 4242);
        assert!(id.starts_with("20261130t114612-"), "{id}");
        assert_eq!(id.len(), 20);
        crate::spec::validate::run_id(&id).expect("valid run id");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(utc_timestamp(1_796_039_172_123), "2026-11-30 11:46:12 UTC");
    }
}
