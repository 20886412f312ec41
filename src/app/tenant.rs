//! One tenant as the verbs see it: where its spec is, its run unit, its spec loaded and made
//! runnable on this host (tier gate, preflight, enforceable limits), its task text, and the
//! inputs of one of its runs resolved from the host. Shared by `run`, `twin`, `install`,
//! `start`, `stop`, `status`, `logs`, `tick` and `check`.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use crate::context::{HostEnv, path_str, secret_value};
use crate::git::Git;
use crate::podman::Podman;
use crate::render::Backend;
use crate::run::lifecycle::{Deadlines, RunInputs, RunPaths};
use crate::run::record;
use crate::spec::{Spec, Task};
use crate::systemd::ZbusUnitManager;
use crate::tier::{self, Runtime};

/// `~/.config/cyclix/tenants/TENANT.yaml`.
#[must_use]
pub fn tenant_spec_path(env: &HostEnv, tenant: &str) -> PathBuf {
    env.layout().tenant_spec(tenant)
}

/// The real user manager over the session bus, its reload/job lock at
/// `$XDG_RUNTIME_DIR/cyclix/systemd.lock`.
///
/// # Errors
/// `$XDG_RUNTIME_DIR` is unset or the user bus cannot be reached.
pub(crate) fn unit_manager(env: &HostEnv) -> Result<ZbusUnitManager> {
    let lock = env.runtime()?.systemd_lock();
    ZbusUnitManager::session(lock).context("connecting to the systemd user manager")
}

/// Refuses a tenant name that `spec::validate::tenant_name` rejects, naming it.
///
/// # Errors
/// The name is not a tenant name.
pub fn check_name(tenant: &str) -> Result<()> {
    crate::spec::validate::tenant_name(tenant)
        .map_err(|m| crate::exit::input(format!("tenant `{tenant}`: {m}")))
}

/// The run unit of `tenant` (`cyclix-run@TENANT.service`), once its name is valid and its spec
/// exists.
///
/// # Errors
/// An invalid tenant name, or no spec at [`tenant_spec_path`].
pub(crate) fn run_unit(env: &HostEnv, tenant: &str) -> Result<String> {
    check_name(tenant)?;
    let spec = tenant_spec_path(env, tenant);
    if !spec.exists() {
        return Err(crate::exit::input(format!(
            "no tenant `{tenant}`: {} does not exist; write its spec (docs/spec.md) or run `cyclix demo setup` for the demo tenant",
            spec.display()
        )));
    }
    Ok(crate::naming::run_service(tenant))
}

/// A tenant a history verb (`logs`, `runs`) may name: one with a spec, or one whose records
/// outlived its spec; anything else is a mistyped name, refused as `status` refuses it.
///
/// # Errors
/// An invalid name, or neither a spec nor records of `tenant`.
pub(crate) fn known_tenant(env: &HostEnv, tenant: &str) -> Result<()> {
    check_name(tenant)?;
    if record::tenant_dir(&env.state_home, tenant).is_dir() {
        return Ok(());
    }
    run_unit(env, tenant).map(drop)
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
            "error: no spec for tenant `{tenant}` at {}; write one (see docs/spec.md) or run `cyclix demo setup` for the demo tenant",
            path.display()
        )));
    }
    Ok(super::spec_file::load_spec(&path, env)?.map_err(|e| e.to_string()))
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
            // The `error:` line first: `cyclix status` shows a failed start's error lines and
            // the lines after them (the diagnostics) from the journal.
            crate::stderrln!("error: the spec does not validate:\n{e}");
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
    // The runtime's version and the local images' presence are independent looks, each a
    // podman process: side by side (issue 33: they are on every run's path to its agent).
    // A thread that cannot be made (a task limit) costs the overlap, never a check.
    let (runtime, detected, images) = std::thread::scope(|s| {
        let images = std::thread::Builder::new().spawn_scoped(s, || local_image_looks(&spec, env));
        let (runtime, detected) = probe_runtime();
        let images = match images {
            Ok(h) => h.join().ok().flatten(),
            Err(_) => local_image_looks(&spec, env),
        };
        (runtime, detected, images)
    });
    let backend = force_backend.unwrap_or(detected);
    let gvisor = gvisor_fact(&spec);
    spec.tier = match tier::gate(spec.tier, spec.legacy_worktree_isolation, &runtime, &gvisor) {
        Ok(t) => t,
        Err(refusal) => {
            crate::stderrln!("error: {refusal}");
            return Ok(None);
        }
    };
    let file = spec_path.map_or_else(|| tenant_spec_path(env, tenant), Path::to_path_buf);
    if let Some(problem) = refuse(&spec)
        .or_else(|| preflight(&spec, &file.display().to_string(), env, images))
        .or_else(|| unenforceable_limits(&spec))
    {
        crate::stderrln!("error: {problem}");
        return Ok(None);
    }
    Ok(Some((spec, backend)))
}

/// The runsc a run of `spec` renders its agent and gate with: `Some` for tier `gvisor` (the
/// look the tier gate made, `host::facts::gvisor::look`), `None` for the other tiers.
///
/// # Errors
/// Tier `gvisor` and runsc is not usable (the gate refused that already; this keeps a run
/// from ever rendering without it).
pub(crate) fn run_gvisor(spec: &Spec) -> Result<Option<crate::tier::runsc::OciRuntime>> {
    if tier::floor(spec.tier, spec.legacy_worktree_isolation) != tier::Tier::Gvisor {
        return Ok(None);
    }
    crate::host::facts::gvisor::look()
        .map(Some)
        .map_err(|reason| anyhow::anyhow!(tier::TierRefusal::GvisorUnusable { reason }))
}

/// The tier gate's fact about gVisor's `runsc`, looked up only for a spec whose tier is
/// `gvisor` (`host::facts::gvisor::look`, once per process; the gate reads it for no other tier).
pub(crate) fn gvisor_fact(spec: &Spec) -> Runtime {
    if tier::floor(spec.tier, spec.legacy_worktree_isolation) != tier::Tier::Gvisor {
        return Runtime::Unusable("not looked up: the tier is not gvisor".into());
    }
    match crate::host::facts::gvisor::look() {
        Ok(_) => Runtime::Usable,
        Err(reason) => Runtime::Unusable(reason),
    }
}

/// Whether Podman's Quadlet user generator is in a directory the user manager scans (and not
/// masked there).
fn quadlet_generator_installed() -> bool {
    crate::host::facts::find_generator().is_some()
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

/// User-fixable problems found right before a run, so they are findings (exit 1) that name
/// the spec key, not cyclix failures: a mount source that is (now) a symlink, or that is,
/// contains or lies inside a protected path or a git directory (the deep walk, podman's real
/// storage: `host::mount_scan::run_refusal`), a repository that is not one, a base ref that
/// does not exist.
fn preflight(
    spec: &Spec,
    file: &str,
    env: &HostEnv,
    images: Option<Vec<ImageLook>>,
) -> Option<String> {
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
    if let Some(missing) = images.and_then(|l| missing_local_image(spec, l)) {
        return Some(missing);
    }
    if let Err(e) = Git::new(&spec.repo.path).rev_parse_commit(&spec.repo.base) {
        return Some(format!(
            "repo: {e:#}\n  fix: `repo.path` must be a git work tree and `repo.base` a branch, tag or commit in it"
        ));
    }
    None
}

/// One image a container run needs, looked up in podman's local storage: the spec key that
/// names it, its reference, and whether it is there (`podman image exists`; its failure).
type ImageLook = (String, String, std::result::Result<bool, String>);

/// The images of `spec`'s container run that are not built by the run itself (agent, gate,
/// the egress proxy, services), each looked up once (the agent's and the gate's are often the
/// same) and all side by side: each look is a podman process, about 30 ms on the testbed.
/// `None` while someone holds podman's storage lock: `podman image exists` would wait for it,
/// and the run's own bounded wait (prepare) is the one that names the holder.
fn local_image_looks(spec: &Spec, env: &HostEnv) -> Option<Vec<ImageLook>> {
    let graphroot = crate::host::storage_conf::of(env);
    let lock_free = crate::run::storage_lock::holders(&graphroot).is_ok_and(|h| h.is_empty());
    if !lock_free {
        return None;
    }
    let podman = Podman::new();
    let mut wanted: Vec<(String, String)> = vec![
        (
            "agent.image".into(),
            spec.agent.image.reference().to_owned(),
        ),
        ("gate.image".into(), spec.gate.image.reference().to_owned()),
        (
            "(the egress proxy)".into(),
            crate::images::PROXY_IMAGE.to_string(),
        ),
    ];
    wanted.extend(spec.services.iter().enumerate().map(|(i, s)| {
        (
            format!("services[{i}].image"),
            s.image.reference().to_owned(),
        )
    }));
    // An image built from the project's files is made by the run itself (phase `build`).
    let built: Vec<&str> = std::iter::once(&spec.agent.image)
        .chain(std::iter::once(&spec.gate.image))
        .chain(spec.services.iter().map(|s| &s.image))
        .filter(|i| i.build().is_some())
        .map(crate::spec::Image::reference)
        .collect();
    wanted.retain(|(_, image)| !built.contains(&image.as_str()));
    let mut seen = std::collections::HashSet::new();
    wanted.retain(|(_, image)| seen.insert(image.clone()));
    Some(std::thread::scope(|s| {
        let looks: Vec<_> = wanted
            .into_iter()
            .map(|(key, image)| {
                let podman = &podman;
                let look = move || {
                    let exists = podman.image_exists(&image).map_err(|e| format!("{e:#}"));
                    (key, image, exists)
                };
                // No thread (a task limit): the look runs here, one after the other.
                std::thread::Builder::new()
                    .spawn_scoped(s, look.clone())
                    .map_err(|_| look)
            })
            .collect();
        looks
            .into_iter()
            .filter_map(|h| match h {
                Ok(h) => h.join().ok(),
                Err(look) => Some(look()),
            })
            .collect()
    }))
}

/// The first image of a container run that only local storage can hold (`localhost/...`:
/// podman cannot pull it) and that is not there (`looks`: [`local_image_looks`]), named with
/// its key and the fix (issue 19, item 6: such a run used to fail in its start phase with
/// "status 125"). Images pinned by digest from a registry are pulled at start
/// (`--pull=missing`) and not checked here. An image whose presence cannot be read is left to
/// the start phase.
fn missing_local_image(spec: &Spec, looks: Vec<ImageLook>) -> Option<String> {
    if !spec.tier.is_sandboxed() {
        return None;
    }
    let preset = spec
        .agent
        .preset
        .as_ref()
        .and_then(|p| crate::agents::find(&p.name));
    looks.into_iter().find_map(|(key, image, exists)| {
        // A podman that asks for `system migrate` (after the user manager died) is named
        // with the fix; any other failure is left to the start phase.
        if let Err(e) = &exists
            && let Some(fix) = crate::run::converge::podman_fix(e)
        {
            return Some(format!("podman cannot look up {key} `{image}`: {e}; {fix}"));
        }
        (image.starts_with("localhost/") && matches!(exists, Ok(false)))
            .then(|| match preset.filter(|p| p.image == image) {
                Some(p) => format!(
                    "{key}: `{image}` (preset {}) is not built; fix: `cyclix images build --preset {}` builds it from {} (fetched once by `scripts/fetch-agent-packages {}`)",
                    p.name, p.name, p.package, p.name
                ),
                None => format!(
                    "{key}: `{image}` is not in podman's local storage and cannot be pulled; fix: `cyclix images build` builds cyclix's own images, `podman build -t {image} ...` your own"
                ),
            })
    })
}

/// Why the spec's `agent.resources` cannot be enforced here (a controller not delegated to the
/// user manager), or `None`. Such a run is refused before anything exists (`limits`).
fn unenforceable_limits(spec: &Spec) -> Option<String> {
    let r = &spec.agent.resources;
    if crate::limits::needed(r).is_empty() {
        return None;
    }
    let cg = crate::host::facts::cgroup_facts(crate::host::namespaces::host_uid());
    crate::limits::refusal(r, cg.delegated.as_deref().map_err(String::as_str), &cg.file)
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

/// The task of `spec` as text (`task.file` read by [`read_task_file`]), or `None` after
/// printing why it cannot be read (a finding, exit 1).
pub(crate) fn task_text(spec: &Spec) -> Option<String> {
    match &spec.task {
        Task::Text(t) => Some(t.clone()),
        Task::File(f) => match read_task_file(f) {
            Ok(t) => Some(t),
            Err(problem) => {
                crate::stderrln!("error: task.file: {problem}");
                None
            }
        },
    }
}

/// The directories Podman's Quadlet generator scans whole for the user running cyclix, in its
/// order (podman-systemd.unit(5), "Quadlet files for non-root users"); the last one of its
/// list, [`QUADLET_ADMIN_DIR`], it scans without the other users' subdirectories
/// (`RunPaths::quadlet_admin_dir`).
fn quadlet_user_dirs(env: &HostEnv, runtime_dir: &Path) -> Vec<PathBuf> {
    let uid = nix::unistd::getuid();
    vec![
        runtime_dir.join("containers/systemd"),
        env.config_home.join("containers/systemd"),
        Path::new(QUADLET_ADMIN_DIR).join(uid.to_string()),
    ]
}

/// The admin's Quadlet directory for every user (podman-systemd.unit(5)); its subdirectories
/// named by a uid are that user's only.
const QUADLET_ADMIN_DIR: &str = "/etc/containers/systemd/users";

/// Where run `run_id` of `tenant` keeps its files.
pub(crate) fn run_paths(env: &HostEnv, runtime_dir: &Path, tenant: &str, run_id: &str) -> RunPaths {
    let run_dir = runtime_dir.join("cyclix/runs").join(run_id);
    RunPaths {
        quadlet_dir: run_dir.join("quadlet"),
        quadlet_user_dirs: quadlet_user_dirs(env, runtime_dir),
        quadlet_admin_dir: Some(PathBuf::from(QUADLET_ADMIN_DIR)),
        units_dir: runtime_dir.join("systemd/user"),
        run_dir,
        worktree: env
            .data_home
            .join("cyclix/worktrees")
            .join(tenant)
            .join(run_id),
        records_dir: Some(record::tenant_dir(&env.state_home, tenant)),
    }
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
    let file_vars = tenant_env_file(env, tenant);
    let secrets = secret_values(&spec, tenant, &file_vars)?;
    // Refused before anything exists: a value the proxy's header line cannot carry.
    crate::run::phases::prepare::credential_include(&spec, &secrets)?;
    let placeholders = random_placeholders(&spec)?;
    let handed: Vec<String> = secrets.iter().map(|(k, _)| k.clone()).collect();
    let mut watched = crate::run::boundary::watch_list(&crate::context::all_env(), &handed);
    watched.extend(crate::run::boundary::credential_watch(
        secrets
            .iter()
            .filter(|(k, _)| spec.agent.credentials.iter().any(|c| &c.env == k)),
    ));
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
        kernel: nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let probe_context = crate::run::boundary::probe_context(&spec, &watched, &host);
    let gvisor = run_gvisor(&spec)?;
    let spec_tier = spec.tier;
    Ok(RunInputs {
        paths: run_paths(env, runtime_dir, tenant, &run_id),
        spec,
        run_id,
        backend,
        task,
        secrets,
        placeholders,
        log_key: random_log_key()?,
        deadlines: Deadlines::default(),
        notices: env_file_notice(env, tenant).into_iter().collect(),
        // The agent container mounts an execute-only copy: its probes are non-dumpable from
        // their first instruction (`run::exec_only`).
        cyclix_bin: crate::run::exec_only::copy_running_for(runtime_dir, spec_tier)?,
        probe_context,
        watched,
        tripwire_dir: env.home.clone(),
        probe_sockets: host.sockets.clone(),
        interrupted: interrupt_flag()?,
        progress: None,
        overridden: crate::run::inputs::Override::default(),
        capacity: None,
        queued: None,
        environment: None,
        gvisor,
    })
}

/// The secret values a run of `spec` hands out (as [`run_inputs`] resolves them), for
/// redacting what a verb prints of the sandbox's output (`cyclix drill`'s evidence).
///
/// # Errors
/// A variable the spec names is set nowhere.
pub(crate) fn run_secrets(env: &HostEnv, spec: &Spec) -> Result<Vec<(String, Vec<u8>)>> {
    secret_values(spec, &spec.tenant, &tenant_env_file(env, &spec.tenant))
}

/// The values of the variables `spec` names that are set (cyclix's environment, then the
/// tenant's env file), each on its own: one set nowhere is skipped, not a reason to redact
/// nothing (`cyclix logs` redacts what it decodes with them; attack review of issue 32).
pub(crate) fn known_secret_values(env: &HostEnv, spec: &Spec) -> Vec<Vec<u8>> {
    let file_vars = tenant_env_file(env, &spec.tenant);
    named_variables(spec)
        .into_iter()
        .filter_map(|n| tenant_value(&n.name, &file_vars))
        .collect()
}

/// The tenant's env file as the run unit's `EnvironmentFile=` reads it (`envfile`); empty
/// when there is none or it cannot be read (a run then names the variable that is missing).
fn tenant_env_file(env: &HostEnv, tenant: &str) -> Vec<(String, Vec<u8>)> {
    std::fs::read_to_string(env.layout().tenant_env(tenant))
        .map(|t| crate::envfile::parse(&t))
        .unwrap_or_default()
}

/// The value of `name`: cyclix's own environment first (under the run unit it already holds
/// the env file's assignments), then the tenant's env file, so a verb run from a shell
/// resolves it the same way the unit does (issue 19, item 4).
fn tenant_value(name: &str, file_vars: &[(String, Vec<u8>)]) -> Option<Vec<u8>> {
    secret_value(name).or_else(|| crate::envfile::get(file_vars, name).map(<[u8]>::to_vec))
}

/// One variable a spec names: the key that names it (`agent.env`, `services[db].env`,
/// `agent.credentials[0].env`), the spec line when known, the variable.
struct Named {
    key: String,
    line: Option<usize>,
    name: String,
}

/// Every variable `spec` names, in the order a run reads them: `agent.env`, each service's
/// `env`, each credential's `env`. The one list [`secret_values`] and [`env_needs`] walk.
fn named_variables(spec: &Spec) -> Vec<Named> {
    let named = |key: String, line: Option<usize>, name: &str| Named {
        key,
        line,
        name: name.to_string(),
    };
    let mut v: Vec<Named> = spec
        .agent
        .env
        .iter()
        .map(|n| named("agent.env".into(), None, n))
        .collect();
    for s in &spec.services {
        v.extend(
            s.env
                .iter()
                .map(|n| named(format!("services[{}].env", s.name), None, n)),
        );
    }
    for (i, c) in spec.agent.credentials.iter().enumerate() {
        v.push(named(
            format!("agent.credentials[{i}].env"),
            Some(c.line),
            &c.env,
        ));
    }
    v
}

/// The values of the variables the spec names ([`named_variables`]), from cyclix's
/// environment or the tenant's env file ([`tenant_value`]).
fn secret_values(
    spec: &Spec,
    tenant: &str,
    file_vars: &[(String, Vec<u8>)],
) -> Result<Vec<(String, Vec<u8>)>> {
    let mut secrets = Vec::new();
    for n in named_variables(spec) {
        let Some(v) = tenant_value(&n.name, file_vars) else {
            return Err(crate::exit::input(format!(
                "{} names `{}` but it is not set in cyclix's environment; set it for the user manager \
                 (`systemctl --user set-environment {}=...` or ~/.config/cyclix/tenants/{tenant}.env, mode 0600)",
                spec.at(n.line.unwrap_or(0), &n.key),
                n.name,
                n.name
            )));
        };
        secrets.push((n.name, v));
    }
    Ok(secrets)
}

/// The variables `spec` names ([`named_variables`]) and where each is set: the tenant's env
/// file, this process's environment. `cyclix check` adds the user manager's environment block
/// and judges (`host::checks`, `env:TENANT`). Presence only: no value is kept.
pub(crate) fn env_needs(env: &HostEnv, spec: &Spec) -> Vec<crate::host::facts::EnvNeed> {
    let file_vars = tenant_env_file(env, &spec.tenant);
    named_variables(spec)
        .into_iter()
        .map(|n| crate::host::facts::EnvNeed {
            in_file: crate::envfile::get(&file_vars, &n.name).is_some(),
            in_shell: secret_value(&n.name).is_some(),
            key: n.key,
            line: n.line,
            name: n.name,
        })
        .collect()
}

/// A run's proxy access-log key (`render::RunContext::log_key`): 32 random hex digits.
///
/// # Errors
/// `/dev/urandom` cannot be read.
pub(crate) fn random_log_key() -> Result<String> {
    random_hex16()
}

/// A run's credential placeholders, one per `agent.credentials` entry, random per run.
///
/// # Errors
/// `/dev/urandom` cannot be read.
pub(crate) fn random_placeholders(spec: &Spec) -> Result<Vec<String>> {
    spec.agent
        .credentials
        .iter()
        .map(|c| {
            random_hex16()
                .map(|h| crate::render::proxy::credentials::placeholder(&c.placeholder_prefix, &h))
        })
        .collect()
}

/// 16 random bytes from the kernel (`/dev/urandom`) as 32 lowercase hex digits: a
/// placeholder's unguessable part.
fn random_hex16() -> Result<String> {
    use std::fmt::Write as _;
    use std::io::Read as _;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom for a credential placeholder")?;
    Ok(b.iter().fold(String::with_capacity(32), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    }))
}

/// A loud notice when the tenant's env file (its secret values) is readable by others: the
/// docs/spec.md asks for mode 0600.
fn env_file_notice(env: &HostEnv, tenant: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = env.layout().tenant_env(tenant);
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

/// A flag SIGTERM and SIGINT set (`cyclix stop`, `systemctl --user stop`, Ctrl-C), so a run
/// stops at its next check and still tears down; the default action (dying on the spot and
/// leaving the run behind) is replaced.
pub(crate) fn interrupt_flag() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, flag.clone())
            .context("installing the SIGTERM/SIGINT handler")?;
    }
    Ok(flag)
}

#[cfg(test)]
mod tests;
