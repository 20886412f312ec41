//! The agent on Kubernetes: the run's ConfigMap (task, context, probe context), its work
//! volume, and the agent Job whose Pod clones the repository from the runner's bundle, runs
//! the services as native sidecars on its localhost, and runs the probe suite in front of the
//! agent (`cyclix agent-wait --probe`): the agent starts only when every probe passed. Pure.

use serde_json::{Value, json};

use super::shared::{
    self, DEFAULT_UID, KubeNames, RUNNER_CYCLIX, container_security, labels, meta, pod_base,
    pull_policy, resources,
};
use super::{KubeOptions, Manifest};
use crate::naming::RunNames;
use crate::render::RenderError;
use crate::render::plan::{
    AGENT_WAIT_S, CONTEXT_FILE, CONTEXT_PATH, CTL_PATH, CYCLIX_BIN_PATH, ContainerPlan,
    PROBE_CONTEXT_FILE, RunPlan, TASK_FILE, TASK_PATH, WORKDIR,
};
use crate::spec::Spec;

/// The repository bundle's key in each of the run's repository ConfigMaps (`cyclix-R-repo`,
/// `cyclix-R-repo-1`, …), each holding one part of the bundle the runner made.
pub const BUNDLE_KEY: &str = "repo.bundle";

/// Where the parts appear in the clone step and the collector: part `I` at
/// `/cyclix/repo/I/repo.bundle`.
pub const BUNDLE_DIR: &str = "/cyclix/repo";

/// The most bytes of the bundle one ConfigMap carries: Kubernetes refuses a ConfigMap over
/// 1 MiB (the bytes of all keys and values; `binaryData` counts the decoded bytes), 8 KiB
/// are left for the key and the object's metadata.
pub const REPO_PART_MAX: u64 = 1024 * 1024 - 8 * 1024;

/// Where the clone step joins the parts into one bundle (an `emptyDir` on the node's disk,
/// as large as the work volume).
pub const JOIN_DIR: &str = "/cyclix/join";

/// The clone step: join the parts (`$2…`, in order) into one bundle, `git init` (which,
/// unlike `git clone`, works in a volume whose root holds a file system's `lost+found`), fetch
/// the run branch from the bundle, drop the joined file, check the branch out. The branch is
/// `$1` of this fixed script, never part of its text. No `subPath` on the work volume:
/// `podman kube play` resolves every mount when it creates the Pod, before any init step ran.
pub const CLONE_SCRIPT: &str = "set -e; b=$1; shift; cat -- \"$@\" > /cyclix/join/repo.bundle; git init -q /work; git -C /work fetch -q /cyclix/join/repo.bundle \"$b:$b\"; rm -f /cyclix/join/repo.bundle; git -C /work checkout -q \"$b\"";

/// git's `safe.directory` for the work volume, as environment (git reads `GIT_CONFIG_COUNT`
/// pairs as command-line configuration, the kind `safe.directory` honours): a volume's root
/// is usually root's, `fsGroup` changes only its group, and git then refuses the repository at
/// `/work` as not the user's own ("dubious ownership") — in the clone step and in the agent's
/// own git calls. Seen on a real cluster with hostPath volumes (issue 34).
#[must_use]
pub fn work_safe_env() -> Vec<Value> {
    [
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "safe.directory"),
        ("GIT_CONFIG_VALUE_0", WORKDIR),
    ]
    .iter()
    .map(|(k, v)| json!({ "name": k, "value": v }))
    .collect()
}

/// The ConfigMap that holds part `i` of the repository bundle: `cyclix-R-repo` for the
/// first (the name `kubectl create configmap` is told in docs/kubernetes.md), then
/// `cyclix-R-repo-I`.
#[must_use]
pub fn repo_part(names: &KubeNames, i: usize) -> String {
    if i == 0 {
        names.repo_bundle()
    } else {
        format!("{}-{i}", names.repo_bundle())
    }
}

/// The Pod volume of part `i` (`bundle-I`, the ConfigMap [`repo_part`]).
#[must_use]
pub fn repo_part_volume(names: &KubeNames, i: usize) -> Value {
    json!({ "name": format!("bundle-{i}"), "configMap": { "name": repo_part(names, i) } })
}

/// The mount of part `i`, read-only, at `/cyclix/repo/I`.
#[must_use]
pub fn repo_part_mount(i: usize) -> Value {
    json!({ "name": format!("bundle-{i}"), "mountPath": format!("{BUNDLE_DIR}/{i}"), "readOnly": true })
}

/// How many ConfigMaps a bundle of `len` bytes takes (at least one).
#[must_use]
pub fn repo_parts(len: u64) -> usize {
    usize::try_from(len.div_ceil(REPO_PART_MAX).max(1)).unwrap_or(usize::MAX)
}

/// What `agent-wait --probe` replaces in a probe context's `no_proxy_allowed` with the proxy
/// Service's address (known only in the Pod).
pub const PROXY_HOST_MARKER: &str = "cyclix:proxy-host";

/// The probe profile the agent Pod's suite runs with (`probe::Profile::Kubernetes` as the
/// context names it; a unit test reads the context back as a `probe::Context`).
pub const PROBE_PROFILE: &str = "kubernetes";

/// Extra seconds the agent Job may run beyond the agent's own budget: the clone, the
/// sidecars' start and the probe suite.
pub const START_SLACK_S: u64 = 300;

/// The uid the agent (and so every container of its Pod) runs as.
#[must_use]
pub fn agent_uid(spec: &Spec) -> u32 {
    spec.agent.run_as.unwrap_or(DEFAULT_UID)
}

/// The probe context the agent Pod's suite judges against (profile `kubernetes`):
/// [`crate::probe::Context::for_spec`] with the Pod's uid and, with credentials, the proxy
/// Service's address (known only in the Pod) allowed in `NO_PROXY`.
#[must_use]
pub fn probe_context(spec: &Spec) -> crate::probe::Context {
    let mut c = crate::probe::Context::for_spec(spec);
    c.profile = crate::probe::Profile::Kubernetes;
    c.host_uid = agent_uid(spec);
    // `work_safe_env`'s pair names a git setting, not a secret (P22 reads `KEY` as one).
    c.allowed_env_names.push("GIT_CONFIG_KEY_0".to_string());
    if !spec.agent.credentials.is_empty() {
        c.no_proxy_allowed.push(PROXY_HOST_MARKER.to_string());
    }
    c
}

/// The context file (`/cyclix/context.json`) with `proxy` null: on Kubernetes the proxy's
/// address is known only in the Pod, where `$HTTP_PROXY` holds it.
fn context_file(plan: &RunPlan) -> String {
    let mut v: Value = serde_json::from_str(&crate::render::plan::context_json(plan))
        .unwrap_or_else(|_| json!({}));
    v["proxy"] = Value::Null;
    let mut text = serde_json::to_string_pretty(&v).unwrap_or_default();
    text.push('\n');
    text
}

/// The run's ConfigMap, work volume and agent Job.
///
/// # Errors
/// [`RenderError`] when the plan lacks the agent or a service container.
pub fn manifests(
    spec: &Spec,
    plan: &RunPlan,
    opts: &KubeOptions,
) -> Result<Vec<Manifest>, RenderError> {
    let names = KubeNames(RunNames::new(&plan.run_id));
    let run_config = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(plan, &names.run_config(), "agent"),
        "data": {
            TASK_FILE: opts.task,
            CONTEXT_FILE: context_file(plan),
            PROBE_CONTEXT_FILE: format!("{}\n", serde_json::to_string_pretty(&probe_context(spec)).unwrap_or_default()),
        },
    });
    let work = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta(plan, &names.work(), "agent"),
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": { "requests": { "storage": opts.work_size } },
        },
    });
    let agent = shared::container(plan, &RunNames::new(&plan.run_id).agent())?;
    let branch = crate::naming::branch(&plan.tenant, &plan.run_id);
    let mut init = vec![cyclix_bin_step(opts), clone_step(&branch, opts, 1)];
    for s in &plan.units.services {
        let stem = RunNames::new(&plan.run_id).service(&s.name);
        init.push(sidecar(plan, &names, shared::container(plan, &stem)?, s));
    }
    let mut pod = pod_base(agent_uid(spec));
    pod.insert("enableServiceLinks".into(), json!(true));
    // No resolver: the agent needs none (the proxy resolves), and a name it tries fails at
    // once on the Pod's own loopback.
    pod.insert("dnsPolicy".into(), json!("None"));
    pod.insert("dnsConfig".into(), json!({ "nameservers": ["127.0.0.1"] }));
    if let Some(rc) = &spec.agent.runtime_class {
        pod.insert("runtimeClassName".into(), json!(rc));
    }
    pod.insert("initContainers".into(), json!(init));
    pod.insert(
        "containers".into(),
        json!([agent_container(plan, &names, agent)]),
    );
    pod.insert("volumes".into(), json!(volumes(plan, &names, opts)));
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(plan, &names.role("agent"), "agent"),
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": agent.runtime_max_s.unwrap_or(spec.agent.timeout_s) + AGENT_WAIT_S + START_SLACK_S,
            "template": {
                "metadata": { "labels": labels(plan, "agent") },
                "spec": pod,
            },
        },
    });
    Ok(vec![
        Manifest {
            file: "run/run-configmap.yaml".into(),
            object: run_config,
        },
        Manifest {
            file: "run/work-pvc.yaml".into(),
            object: work,
        },
        Manifest {
            file: "run/agent-job.yaml".into(),
            object: job,
        },
    ])
}

/// The init step that copies the cyclix binary from the runner image into the Pod (the probes
/// and `agent-wait` run from it, read-only).
fn cyclix_bin_step(opts: &KubeOptions) -> Value {
    json!({
        "name": "cyclix-bin",
        "image": opts.runner_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["cp", RUNNER_CYCLIX, "/cyclix-bin/cyclix"],
        "securityContext": container_security(),
        "volumeMounts": [{ "name": "cyclix-bin", "mountPath": "/cyclix-bin" }],
    })
}

/// The init step that clones the run branch from the runner's bundle, in `parts` parts,
/// into the work volume.
fn clone_step(branch: &str, opts: &KubeOptions, parts: usize) -> Value {
    let mut command = vec![
        "sh".to_string(),
        "-c".into(),
        CLONE_SCRIPT.into(),
        "clone".into(),
        branch.to_string(),
    ];
    let mut mounts = vec![
        json!({ "name": "work", "mountPath": WORKDIR }),
        json!({ "name": "bundle-join", "mountPath": JOIN_DIR }),
        json!({ "name": "tmp-repo", "mountPath": "/tmp" }),
    ];
    let mut env = vec![json!({ "name": "HOME", "value": "/tmp" })];
    env.extend(work_safe_env());
    for i in 0..parts {
        command.push(format!("{BUNDLE_DIR}/{i}/{BUNDLE_KEY}"));
        mounts.push(repo_part_mount(i));
    }
    json!({
        "name": "repo",
        "image": opts.runner_image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "env": env,
        "securityContext": container_security(),
        "volumeMounts": mounts,
    })
}

/// Makes the agent Job `job` (as [`manifests`] rendered it, for one part) take the bundle in
/// `parts` ConfigMaps ([`repo_part`]): its volumes and its clone step. `cyclix kube-run` calls
/// it once it knows the bundle's size.
///
/// # Errors
/// `job` is not an agent Job of [`manifests`] (no clone step), naming what is missing.
pub fn set_repo_parts(
    job: &mut Value,
    names: &KubeNames,
    branch: &str,
    opts: &KubeOptions,
    parts: usize,
) -> Result<(), String> {
    let pod = &mut job["spec"]["template"]["spec"];
    let init = pod["initContainers"]
        .as_array_mut()
        .ok_or("the agent Job has no init containers")?;
    let step = init
        .iter_mut()
        .find(|c| c["name"] == "repo")
        .ok_or("the agent Job has no `repo` init container")?;
    *step = clone_step(branch, opts, parts);
    let volumes = pod["volumes"]
        .as_array_mut()
        .ok_or("the agent Job's Pod has no volumes")?;
    volumes.retain(|v| {
        !v["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("bundle-") && n != "bundle-join")
    });
    volumes.extend((0..parts).map(|i| repo_part_volume(names, i)));
    Ok(())
}

/// A service as a native sidecar (an init container that keeps running): on the Pod's
/// localhost like in the Podman pod; its health check becomes a startup probe, so the agent
/// starts only once it passed.
fn sidecar(
    plan: &RunPlan,
    names: &KubeNames,
    c: &ContainerPlan,
    s: &crate::render::plan::ServicePlan,
) -> Value {
    let mut env = shared::env(plan, names, &c.env);
    env.extend(shared::secret_env(names, &c.secrets));
    let mut mounts = vec![json!({ "name": format!("tmp-svc-{}", s.name), "mountPath": "/tmp" })];
    if let Some(target) = c.volumes.first().map(|v| v.target.clone()) {
        mounts.push(json!({ "name": format!("svc-{}-data", s.name), "mountPath": target }));
    }
    if s.worktree {
        mounts.push(json!({ "name": "work", "mountPath": WORKDIR, "readOnly": true }));
    }
    let mut v = json!({
        "name": format!("svc-{}", s.name),
        "image": c.image,
        "imagePullPolicy": pull_policy(c),
        "restartPolicy": "Always",
        "env": env,
        "securityContext": container_security(),
        "volumeMounts": mounts,
    });
    if let Some(cmd) = shared::command(c) {
        v["command"] = cmd;
    }
    if let Some(w) = &c.workdir {
        v["workingDir"] = json!(w);
    }
    if let Some(h) = &c.health {
        v["startupProbe"] = json!({
            "exec": { "command": h.command },
            "periodSeconds": h.interval_s,
            "timeoutSeconds": h.timeout_s,
            "failureThreshold": h.retries,
            "initialDelaySeconds": h.start_period_s,
        });
    }
    v
}

/// The agent's argv: the plan's, with `agent-wait --go FILE --report FIFO` replaced by
/// `agent-wait --probe CONTEXT` (the suite runs in the Pod itself and gates the agent there;
/// nothing on a host reads a report, creates a go file or hands variables over: the
/// `--handover FIFO --vars A,B` words go too).
fn agent_argv(c: &ContainerPlan) -> Vec<String> {
    let mut argv = c.exec.clone();
    if argv.get(2).map(String::as_str) == Some("--go") && argv.len() > 3 {
        argv[2] = "--probe".into();
        argv[3] = format!("{CTL_PATH}/{PROBE_CONTEXT_FILE}");
        if argv.get(4).map(String::as_str) == Some("--report") && argv.len() > 5 {
            argv.drain(4..6);
        }
    }
    // Only among the wrapper's own words (before `--`): the agent's argv is the spec's.
    let wrapper = argv.iter().position(|w| w == "--").unwrap_or(argv.len());
    if let Some(i) = argv[..wrapper].iter().position(|w| w == "--handover")
        && argv.get(i + 2).map(String::as_str) == Some("--vars")
        && i + 3 < wrapper
    {
        argv.drain(i..i + 4);
    }
    argv
}

fn agent_container(plan: &RunPlan, names: &KubeNames, c: &ContainerPlan) -> Value {
    // First: a variable of the spec's own of the same name comes later and wins.
    let mut env = work_safe_env();
    env.extend(shared::env(plan, names, &c.env));
    // The Pod gates itself (no host hands anything over): the agent's variables come from the
    // run's Secret.
    let handed: Vec<(String, String)> = c
        .handed_over
        .iter()
        .map(|v| (String::new(), v.clone()))
        .collect();
    env.extend(shared::secret_env(names, &handed));
    let mut v = json!({
        "name": "agent",
        "image": c.image,
        "imagePullPolicy": pull_policy(c),
        "command": agent_argv(c),
        "workingDir": WORKDIR,
        "env": env,
        "securityContext": container_security(),
        "volumeMounts": [
            { "name": "work", "mountPath": WORKDIR },
            { "name": "cyclix-bin", "mountPath": "/cyclix/bin", "readOnly": true },
            { "name": "run", "mountPath": TASK_PATH, "subPath": TASK_FILE, "readOnly": true },
            { "name": "run", "mountPath": CONTEXT_PATH, "subPath": CONTEXT_FILE, "readOnly": true },
            { "name": "run", "mountPath": format!("{CTL_PATH}/{PROBE_CONTEXT_FILE}"), "subPath": PROBE_CONTEXT_FILE, "readOnly": true },
            { "name": "tmp", "mountPath": "/tmp" },
        ],
    });
    debug_assert!(CYCLIX_BIN_PATH.starts_with("/cyclix/bin/"));
    if let Some(r) = resources(c) {
        v["resources"] = r;
    }
    v
}

fn volumes(plan: &RunPlan, names: &KubeNames, opts: &KubeOptions) -> Vec<Value> {
    let mut v = vec![
        json!({ "name": "work", "persistentVolumeClaim": { "claimName": names.work() } }),
        repo_part_volume(names, 0),
        // On the node's disk: the joined bundle is as large as the repository.
        json!({ "name": "bundle-join", "emptyDir": { "sizeLimit": opts.work_size } }),
        json!({ "name": "run", "configMap": { "name": names.run_config() } }),
        // On disk, not `medium: Memory`: `podman kube play` gives each container its own tmpfs
        // for a memory emptyDir, so the binary copied by the init step would not be shared.
        json!({ "name": "cyclix-bin", "emptyDir": { "sizeLimit": "256Mi" } }),
        json!({ "name": "tmp", "emptyDir": { "medium": "Memory", "sizeLimit": "1Gi" } }),
        json!({ "name": "tmp-repo", "emptyDir": { "medium": "Memory", "sizeLimit": "64Mi" } }),
    ];
    for s in &plan.units.services {
        v.push(json!({ "name": format!("tmp-svc-{}", s.name), "emptyDir": { "medium": "Memory", "sizeLimit": "1Gi" } }));
        if s.volume.is_some() {
            v.push(json!({ "name": format!("svc-{}-data", s.name), "emptyDir": {} }));
        }
    }
    v
}
