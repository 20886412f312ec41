//! The agent's container: what it sees (the work tree, the task, the context file, the
//! control directory, the cyclix binary, the spec's mounts), its environment (the proxy, the
//! services) and the wrapper that holds it back until the boundary is proven. Pure.

use super::budgets::{is_local, start_timeout};
use super::services::ServicePlan;
use super::topology::{Bind, ContainerPlan, Net, PROXY_PORT, WORKDIR};
use super::{RenderError, RunContext, RunPlan, labels, mount_path, tmpfs_tmp};
use crate::naming::RunNames;
use crate::spec::{Credential, Spec};
use crate::tier::Tier;

/// The task's file name in the run directory.
pub const TASK_FILE: &str = "task.md";

/// The agent's context file's name in the run directory (JSON, see [`context_json`]).
pub const CONTEXT_FILE: &str = "context.json";

/// Where the context file appears in the agent container (read-only); also in
/// `$CYCLIX_CONTEXT`.
pub const CONTEXT_PATH: &str = "/cyclix/context.json";

/// Where the task appears in the agent container (read-only); also in `$CYCLIX_TASK`.
pub const TASK_PATH: &str = "/cyclix/task.md";

/// Where the host's cyclix binary appears in the agent container (read-only): it runs the
/// boundary probes (`cyclix probe`) and holds the agent back until they pass
/// (`cyclix agent-wait`).
pub const CYCLIX_BIN_PATH: &str = "/cyclix/bin/cyclix";

/// The control directory's name in the run directory; mounted read-only at [`CTL_PATH`].
pub const CTL_DIR: &str = "ctl";

/// Where the control directory appears in the agent container.
pub const CTL_PATH: &str = "/cyclix/ctl";

/// The file cyclix creates in the control directory once every probe passed.
pub const GO_FILE: &str = "go";

/// The file cyclix creates in the control directory when the boundary was refused.
pub const REFUSED_FILE: &str = "refused";

/// The probe context's file name in the control directory.
pub const PROBE_CONTEXT_FILE: &str = "probe.json";

/// The FIFO in the control directory through which the held-back `cyclix agent-wait
/// --report` hands the host its probe report (issue 16): agent-wait runs the suite when the
/// host opens the FIFO's read end, before the agent's command exists, and the host reads the
/// report and removes the FIFO before the go file. A FIFO opens for writing on the read-only
/// mount (no data reaches the file system), and with no reader left nothing written to it
/// later is read by anyone.
pub const REPORT_FILE: &str = "report";

/// Where tier `gvisor`'s report directory (`layout::report_tree`, `WORKTREE.report`) appears
/// in the agent container, bound read-write: gVisor's kernel refuses to open a FIFO for
/// writing on a read-only mount ("Read-only file system", unlike Linux; seen with runsc
/// 0.0~20240729), so there the FIFO cannot be in the read-only control directory. The
/// directory holds the FIFO only; the host unlinks it at agent-wait's hello, as in the control
/// directory. What the agent may write into the directory later is read by nothing; it is on
/// the private repository's disk (not the runtime directory's tmpfs) and removed as plain
/// files at teardown (attack review of issue 35).
pub const REPORT_DIR_PATH: &str = "/cyclix/report.d";

/// The host path of the run's report FIFO: `RUN_DIR/ctl/report`, or under tier `gvisor`
/// `WORKTREE.report/report` (`layout::report_tree`). Pure.
#[must_use]
pub fn report_fifo(
    run_dir: &std::path::Path,
    worktree: &std::path::Path,
    tier: Tier,
) -> std::path::PathBuf {
    if tier == Tier::Gvisor {
        crate::layout::report_tree(worktree).join(REPORT_FILE)
    } else {
        run_dir.join(CTL_DIR).join(REPORT_FILE)
    }
}

/// Where the agent's `cyclix agent-wait --report` opens [`report_fifo`] in its container.
fn report_fifo_path(tier: Tier) -> String {
    if tier == Tier::Gvisor {
        format!("{REPORT_DIR_PATH}/{REPORT_FILE}")
    } else {
        format!("{CTL_PATH}/{REPORT_FILE}")
    }
}

/// How long the agent container waits for the go file before it gives up, in seconds.
pub const AGENT_WAIT_S: u64 = 300;

/// The FIFO in the control directory through which the host hands the agent's variables
/// (`agent.env`) to the held-back `cyclix agent-wait --handover` at the go (`run::handover`):
/// they are never fixed when the container is created.
pub const HANDOVER_FILE: &str = "handover";

/// The FIFO in the control directory on which a pooled agent container's `cyclix agent-wait
/// --claim` waits, blocked in `open(2)` and costing nothing, until the run that claims its
/// environment opens it for writing (issue 33): only then does its wait for the go begin.
pub const CLAIM_FILE: &str = "claim";

pub(super) fn agent_container(
    spec: &Spec,
    run: &RunContext,
    agent_binds: Vec<Bind>,
    agent_env: Vec<(String, String)>,
) -> ContainerPlan {
    let r = &run.run_id;
    ContainerPlan {
        stem: RunNames::new(r).agent(),
        description: format!("cyclix run {r} (tenant {}): agent", spec.tenant),
        image: spec.agent.image.reference().to_string(),
        pull_never: is_local(&spec.agent.image),
        net: Net::Pod,
        binds: agent_binds,
        tmpfs: vec![tmpfs_tmp()],
        env: agent_env,
        secret_files: Vec::new(),
        secrets: Vec::new(),
        handed_over: spec.agent.env.clone(),
        exec: agent_exec(spec, run.claim_wait_s.is_some()),
        exec_key: "agent.command".into(),
        exec_key_offset: agent_wrapper_words(spec, run.claim_wait_s.is_some()),
        replaces_entrypoint: true,
        workdir: Some(WORKDIR.into()),
        labels: labels(spec, run, "agent"),
        memory_bytes: spec.agent.resources.memory_bytes,
        cpu_millis: spec.agent.resources.cpu_millis,
        pids: spec.agent.resources.pids,
        // The unit's clock starts with the container: the probes and the baseline run first;
        // a pooled one's also runs while it waits for its claim (at most `max_idle`: a claim
        // refuses an older one) and for its go (the claiming run counts the agent's own time
        // and arms its deadline: `run::phases::agent`).
        runtime_max_s: Some(
            spec.agent.timeout_s
                + baseline_s(spec)
                + run.claim_wait_s.map_or(0, |w| w + AGENT_WAIT_S),
        ),
        start_timeout_s: start_timeout(&spec.agent.image),
        stop_signal: None,
        volumes: Vec::new(),
        health: None,
        user: spec.agent.run_as.map(|u| format!("{u}:{u}")),
        log_file: Some(format!(
            "{}/{}",
            run.run_dir,
            super::topology::AGENT_OUTPUT_FILE
        )),
        oci_runtime: run.gvisor.clone().filter(|_| spec.tier == Tier::Gvisor),
    }
}

/// The agent's environment: the proxy variables, the fresh home and telemetry switches
/// ([`super::fresh`]), the task and context, the
/// services' addresses, and per credential its placeholder (`$ENV`) and base URL
/// (`$BASE_URL_ENV` = `http://PROXY:PORT` of the credential's port). With credentials,
/// `NO_PROXY` also lists the proxy's address, so a CLI sends its base-URL requests to the
/// credential port itself rather than through the forward port.
pub(super) fn agent_env(
    proxy_ip: &str,
    task_env: Vec<(String, String)>,
    services: &[ServicePlan],
    credentials: &[(&Credential, &str)],
) -> Vec<(String, String)> {
    let proxy_url = format!("http://{proxy_ip}:{PROXY_PORT}");
    let mut agent_env: Vec<(String, String)> = Vec::new();
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        agent_env.push((k.into(), proxy_url.clone()));
    }
    let no_proxy = if credentials.is_empty() {
        "localhost,127.0.0.1,::1".to_string()
    } else {
        format!("localhost,127.0.0.1,::1,{proxy_ip}")
    };
    for k in ["NO_PROXY", "no_proxy"] {
        agent_env.push((k.into(), no_proxy.clone()));
    }
    for (i, (c, placeholder)) in credentials.iter().enumerate() {
        agent_env.push((c.env.clone(), (*placeholder).to_string()));
        agent_env.push((
            c.base_url_env.clone(),
            format!(
                "http://{proxy_ip}:{}{}",
                crate::render::proxy::credentials::port_of(i),
                c.base_url_path
            ),
        ));
    }
    agent_env.extend(super::fresh::fresh_env());
    agent_env.extend(task_env);
    agent_env.push(("CYCLIX_CONTEXT".into(), CONTEXT_PATH.into()));
    for s in services {
        agent_env.push((s.env_var.clone(), format!("{}:{}", s.host, s.port)));
        agent_env.push((format!("{}_PORT", s.env_var), s.port.to_string()));
        agent_env.push((format!("{}_DATABASE", s.env_var), s.database.clone()));
    }

    agent_env
}

pub(super) fn agent_binds(spec: &Spec, run: &RunContext) -> Result<Vec<Bind>, RenderError> {
    // The work tree is the run's private repository (its `.git` inside): nothing of the
    // user's repository is mounted (issue 11; `git::private`).
    let mut agent_binds = vec![Bind {
        source: run.worktree.clone(),
        target: WORKDIR.into(),
        read_only: false,
    }];
    // The setup paths, read-only over the work tree's own bind (podman mounts a parent before
    // what lies below it): a plain write to one gets EROFS (issue 15, item 2).
    for (i, p) in run.setup_binds.iter().enumerate() {
        let source = format!("{}/{p}", run.worktree);
        mount_path(&format!("run.setup_binds[{i}]"), &source)?;
        agent_binds.push(Bind {
            source,
            target: format!("{WORKDIR}/{p}"),
            read_only: true,
        });
    }
    agent_binds.push(Bind {
        source: run.cyclix_bin.clone(),
        target: CYCLIX_BIN_PATH.into(),
        read_only: true,
    });
    agent_binds.push(Bind {
        source: format!("{}/{CTL_DIR}", run.run_dir),
        target: CTL_PATH.into(),
        read_only: true,
    });
    if spec.tier == Tier::Gvisor {
        agent_binds.push(Bind {
            source: crate::layout::report_tree(std::path::Path::new(&run.worktree))
                .to_string_lossy()
                .into_owned(),
            target: REPORT_DIR_PATH.into(),
            read_only: false,
        });
    }
    agent_binds.push(Bind {
        source: format!("{}/{TASK_FILE}", run.run_dir),
        target: TASK_PATH.into(),
        read_only: true,
    });
    agent_binds.push(Bind {
        source: format!("{}/{CONTEXT_FILE}", run.run_dir),
        target: CONTEXT_PATH.into(),
        read_only: true,
    });
    for (i, m) in spec.mounts.iter().enumerate() {
        mount_path(&format!("mounts[{i}].source"), &m.source)?;
        mount_path(&format!("mounts[{i}].target"), &m.target)?;
        agent_binds.push(Bind {
            source: m.source.clone(),
            target: m.target.clone(),
            read_only: m.read_only,
        });
    }

    Ok(agent_binds)
}

/// The baseline's budget in seconds (0 without one): the agent waits that much longer for its
/// go, and its unit may run that much longer.
fn baseline_s(spec: &Spec) -> u64 {
    spec.baseline.as_ref().map_or(0, |b| b.timeout_s)
}

/// Number of words `agent_exec` puts before the spec's argv.
const AGENT_WRAPPER_WORDS: usize = 9;

/// The wrapper's words for `spec`: two more (`--stdin PATH`) when the task goes to stdin,
/// four more (`--handover FIFO --vars A,B`) when the agent has variables, two more
/// (`--claim FIFO`) when the container is `pooled`.
fn agent_wrapper_words(spec: &Spec, pooled: bool) -> usize {
    AGENT_WRAPPER_WORDS
        + if pooled { 2 } else { 0 }
        + if spec.agent.task_on_stdin { 2 } else { 0 }
        + if spec.agent.env.is_empty() { 0 } else { 4 }
}

/// The agent's argv behind the wrapper that holds it back until the boundary is proven:
/// `cyclix agent-wait --go /cyclix/ctl/go --report /cyclix/ctl/report --timeout-s N
/// [--claim /cyclix/ctl/claim] [--handover /cyclix/ctl/handover --vars A,B] [--stdin PATH] --
/// ARGV...` (N: [`AGENT_WAIT_S`] plus the baseline's timeout, counted from the claim when the
/// container is `pooled`; the variables' names only, never a value).
fn agent_exec(spec: &Spec, pooled: bool) -> Vec<String> {
    let mut v = vec![
        CYCLIX_BIN_PATH.to_string(),
        "agent-wait".into(),
        "--go".into(),
        format!("{CTL_PATH}/{GO_FILE}"),
        "--report".into(),
        report_fifo_path(spec.tier),
        "--timeout-s".into(),
        (AGENT_WAIT_S + baseline_s(spec)).to_string(),
    ];
    if pooled {
        v.extend(["--claim".to_string(), format!("{CTL_PATH}/{CLAIM_FILE}")]);
    }
    if !spec.agent.env.is_empty() {
        v.extend([
            "--handover".to_string(),
            format!("{CTL_PATH}/{HANDOVER_FILE}"),
            "--vars".to_string(),
            spec.agent.env.join(","),
        ]);
    }
    if spec.agent.task_on_stdin {
        v.extend(["--stdin".to_string(), TASK_PATH.to_string()]);
    }
    v.push("--".into());
    debug_assert_eq!(v.len(), agent_wrapper_words(spec, pooled));
    v.extend(spec.agent.command.iter().cloned());
    v
}

/// The agent's context file (`/cyclix/context.json`, `$CYCLIX_CONTEXT`): what the run gives
/// the agent, as JSON (schema `cyclix-context/1`):
///
/// ```text
/// {"schema": "cyclix-context/1", "tenant": T, "run": R, "task": PATH, "workdir": PATH,
///  "proxy": URL or null, "services": [{"name", "host", "port", "address": "HOST:PORT",
///  "database", "env"}]}
/// ```
///
/// Fields only ever get added.
#[must_use]
pub fn context_json(plan: &RunPlan) -> String {
    let container = plan.tier.is_sandboxed();
    let services: Vec<serde_json::Value> = plan
        .units
        .services
        .iter()
        .map(|s| {
            let mut v = serde_json::json!({
                "name": s.name,
                "host": s.host,
                "port": s.port,
                "address": format!("{}:{}", s.host, s.port),
                "database": s.database,
                "env": s.env_var,
            });
            // The project's own app: where it runs the work tree from.
            if s.worktree {
                v["worktree"] = WORKDIR.into();
            }
            v
        })
        .collect();
    // The host tiers' agent runs on the host: the paths are the host's.
    let host = plan.host_services.first();
    let task = host
        .and_then(|h| h.env.iter().find(|(k, _)| k == "CYCLIX_TASK"))
        .map_or(TASK_PATH, |(_, v)| v.as_str());
    let workdir = host.map_or(WORKDIR, |h| h.workdir.as_str());
    let v = serde_json::json!({
        "schema": "cyclix-context/1",
        "tenant": plan.tenant,
        "run": plan.run_id,
        "task": task,
        "workdir": workdir,
        "proxy": container.then(|| format!("http://{}:{PROXY_PORT}", plan.proxy_ip)),
        "services": services,
    });
    let mut text = serde_json::to_string_pretty(&v).unwrap_or_default();
    text.push('\n');
    text
}
