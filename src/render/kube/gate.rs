//! The gate and the collector on Kubernetes, both Pods without any network (the deny-all
//! policy selects their `io.cyclix.network: none` label):
//! - the gate Job judges a clean export of the run branch's tip (an init step clones it from
//!   the work volume, read-only, and strips its `.git`), as the Podman gate judges `WORKTREE.gate`;
//! - the collector Job writes one part of the run branch's git bundle, base64 on its standard
//!   output, which the runner reads (`kubectl logs`); for a bundle larger than one part the
//!   runner makes one more collector Job per part ([`collect_part_job`]), each making the same
//!   bundle again (git makes it byte for byte the same: one pack thread) and printing its own
//!   part, so no log outgrows the kubelet's rotation (10 MiB by default). The runner checks
//!   every part against the size and SHA-256 each collector prints and imports the joined
//!   bundle as `cyclix run` imports a run's commits; delivery happens outside the cluster's
//!   Pods, as on Podman. Pure.

use serde_json::{Value, json};

use super::agent::{BUNDLE_DIR, BUNDLE_KEY, agent_uid, repo_part_mount, repo_part_volume};
use super::shared::{
    KubeNames, NO_NETWORK_LABEL, RUNNER_CYCLIX, container_security, labels, meta, pod_base,
};
use super::{KubeOptions, Manifest};
use crate::naming::RunNames;
use crate::render::plan::{RunPlan, WORKDIR};
use crate::spec::Spec;

/// Where the work volume appears, read-only, in the export and collect steps.
pub const REPO_PATH: &str = "/repo";

/// Extra seconds the gate Job may run beyond the gate's own timeout (the export step).
pub const EXPORT_SLACK_S: u64 = 120;

/// How long the collector may take, in seconds.
pub const COLLECT_S: u64 = 300;

/// The first line of the collector's log: `cyclix-collect N`; with N = 0 it goes on
/// `SIZE SHA256` (of the whole bundle) and the next line is the part in base64.
pub const COLLECT_MARK: &str = "cyclix-collect";

/// The bytes of the bundle one collector prints: in base64 8 MiB, under the kubelet's
/// default `containerLogMaxSize` (10 MiB), past which a log is rotated and `kubectl logs`
/// gives only its newest file.
pub const COLLECT_PART: u64 = 6 * 1024 * 1024;

/// The collector's script (`$1`: the run branch, `$2`: the part, `$3`: the part's size in
/// bytes): the base is the run branch's tip in the header of the runner's own bundle (part 0
/// of `cyclix-R-repo`, which the agent cannot change), the bundle is
/// `BASE..refs/heads/BRANCH`, git runs with one pack thread (the same bytes in every part's
/// collector) and the program-starting keys neutralised as in `cyclix run`'s export container
/// (`run::import`). It always exits 0: its first line says what it found (0 a bundle, then its
/// size and SHA-256, 3 the branch is gone, 4 no commits, 5 the runner's bundle unreadable, 6
/// git could not bundle the agent's repository); with 0 the next line is part `$2` in base64.
/// No `$(…)`: the kubelet expands `$(NAME)` in commands.
#[must_use]
pub fn collect_script() -> String {
    let cfg = crate::git::hardened::EXPORT_CONFIG
        .iter()
        .map(|kv| format!("-c {kv}"))
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "set -u; m={COLLECT_MARK}; \
git bundle list-heads {BUNDLE_DIR}/0/{BUNDLE_KEY} \"refs/heads/$1\" > /tmp/heads 2>/dev/null && read base rest < /tmp/heads || {{ echo \"$m 5\"; exit 0; }}; \
git {cfg} rev-parse --verify --quiet \"refs/heads/$1^{{commit}}\" > /tmp/tip 2>/dev/null && read tip < /tmp/tip || {{ echo \"$m 3\"; exit 0; }}; \
[ \"$tip\" = \"$base\" ] && {{ echo \"$m 4\"; exit 0; }}; \
git {cfg} -c pack.threads=1 bundle create --quiet /tmp/run.bundle \"$base..refs/heads/$1\" 2>/dev/null || {{ echo \"$m 6\"; exit 0; }}; \
wc -c < /tmp/run.bundle > /tmp/size && read size < /tmp/size && sha256sum /tmp/run.bundle > /tmp/sum && read sum rest < /tmp/sum || {{ echo \"$m 6\"; exit 0; }}; \
echo \"$m 0 $size $sum\"; dd if=/tmp/run.bundle bs=\"$3\" skip=\"$2\" count=1 2>/dev/null | base64 -w0"
    )
}

/// The collector Job of part `part` (≥ 1) of the run's bundle: the rendered collector Job
/// `collect` (part 0) under the name `cyclix-R-collect-PART`, printing that part.
///
/// # Errors
/// `collect` is not the collector Job of [`manifests`] (its command is not the script's).
pub fn collect_part_job(collect: &Value, names: &KubeNames, part: usize) -> Result<Value, String> {
    let mut job = collect.clone();
    job["metadata"]["name"] = json!(names.role(&format!("collect-{part}")));
    let command = job["spec"]["template"]["spec"]["containers"][0]["command"]
        .as_array_mut()
        .filter(|c| c.len() == 7 && c[3] == "collect")
        .ok_or("the collector Job's command is not the collector's script")?;
    command[5] = json!(part.to_string());
    Ok(job)
}

/// The collector's environment: the repository read as committed (no replace refs or
/// grafts), `HOME` in `/tmp`.
fn collect_env() -> Vec<Value> {
    [
        ("HOME", "/tmp"),
        ("GIT_DIR", "/repo/.git"),
        ("GIT_WORK_TREE", REPO_PATH),
        ("GIT_NO_REPLACE_OBJECTS", "1"),
        crate::git::hardened::EXPORT_ENV[0],
        ("GIT_GRAFT_FILE", "/dev/null"),
        ("GIT_CONFIG_NOSYSTEM", "1"),
    ]
    .iter()
    .map(|(k, v)| json!({ "name": k, "value": v }))
    .collect()
}

fn no_network_labels(plan: &RunPlan, role: &str) -> Value {
    let mut l = labels(plan, role);
    l[NO_NETWORK_LABEL] = json!("none");
    l
}

fn job(
    plan: &RunPlan,
    name: &str,
    role: &str,
    deadline_s: u64,
    pod: serde_json::Map<String, Value>,
) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(plan, name, role),
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline_s,
            "template": {
                "metadata": { "labels": no_network_labels(plan, role) },
                "spec": Value::Object(pod),
            },
        },
    })
}

/// `step` (a [`runner_step`]) with one more environment variable.
fn with_env(mut step: Value, (k, v): (&str, &str)) -> Value {
    if let Some(env) = step["env"].as_array_mut() {
        env.push(json!({ "name": k, "value": v }));
    }
    step
}

fn runner_step(opts: &KubeOptions, name: &str, command: Value, mounts: Value) -> Value {
    let mut v = json!({
        "name": name,
        "image": opts.runner_image,
        "imagePullPolicy": "IfNotPresent",
        "env": [{ "name": "HOME", "value": "/tmp" }],
        "securityContext": container_security(),
    });
    v["command"] = command;
    v["volumeMounts"] = mounts;
    v
}

/// What the gate's export step and the collector share: the work volume read-only at
/// [`REPO_PATH`] and a memory `/tmp`, as mounts and volumes.
struct ReadOnlyWork {
    repo_ro: Value,
    tmp: Value,
    work_volume: Value,
    tmp_volume: Value,
}

impl ReadOnlyWork {
    fn new(names: &KubeNames) -> Self {
        Self {
            repo_ro: json!({ "name": "work", "mountPath": REPO_PATH, "readOnly": true }),
            tmp: json!({ "name": "tmp", "mountPath": "/tmp" }),
            work_volume: json!({ "name": "work", "persistentVolumeClaim": { "claimName": names.work(), "readOnly": true } }),
            tmp_volume: json!({ "name": "tmp", "emptyDir": { "medium": "Memory", "sizeLimit": "1Gi" } }),
        }
    }
}

/// The gate Job and the collector Job.
#[must_use]
pub fn manifests(spec: &Spec, plan: &RunPlan, opts: &KubeOptions) -> Vec<Manifest> {
    let names = KubeNames(RunNames::new(&plan.run_id));
    let branch = crate::naming::branch(&plan.tenant, &plan.run_id);
    let ReadOnlyWork {
        repo_ro,
        tmp,
        work_volume,
        tmp_volume,
    } = ReadOnlyWork::new(&names);

    let mut gate_pod = pod_base(agent_uid(spec));
    gate_pod.insert("enableServiceLinks".into(), json!(false));
    gate_pod.insert(
        "initContainers".into(),
        json!([
            with_env(
                runner_step(
                    opts,
                    "export",
                    json!([
                        "git",
                        "-c",
                        "safe.directory=*",
                        // Only the local path is a source: no transport the agent's repository
                        // names can start a program (see `git::hardened::EXPORT_CONFIG`).
                        "-c",
                        "protocol.allow=never",
                        "-c",
                        "protocol.file.allow=always",
                        "-c",
                        "core.hooksPath=/dev/null",
                        // Every object through index-pack, its content checked against its
                        // id: a local clone copies the agent's object store as it lies (a
                        // hand-made pack index or multi-pack-index naming clean content under
                        // the id of other content showed the gate a tree the collector's
                        // bundle did not hold — the second attack review of issue 34).
                        "-c",
                        "transfer.fsckObjects=true",
                        "clone",
                        "--quiet",
                        "--no-local",
                        "--branch",
                        branch,
                        "--",
                        REPO_PATH,
                        "/tree"
                    ]),
                    json!([repo_ro, { "name": "tree", "mountPath": "/tree" }, tmp]),
                ),
                crate::git::hardened::EXPORT_ENV[0],
            ),
            runner_step(
                opts,
                "strip-git",
                json!(["rm", "-rf", "--", "/tree/.git"]),
                json!([{ "name": "tree", "mountPath": "/tree" }]),
            ),
        ]),
    );
    let gate_env: Vec<Value> = crate::render::plan::fresh::fresh_env()
        .into_iter()
        .chain([
            ("CYCLIX_TENANT".to_string(), plan.tenant.clone()),
            ("CYCLIX_RUN".to_string(), plan.run_id.clone()),
        ])
        .map(|(k, v)| json!({ "name": k, "value": v.replace('$', "$$") }))
        .collect();
    let gate_image = spec.gate.image.reference();
    gate_pod.insert(
        "containers".into(),
        json!([{
            "name": "gate",
            "image": gate_image,
            "imagePullPolicy": if crate::render::plan::budgets::is_local(&spec.gate.image) { "Never" } else { "IfNotPresent" },
            "command": spec.gate.command,
            "workingDir": WORKDIR,
            "env": gate_env,
            "securityContext": container_security(),
            "volumeMounts": [{ "name": "tree", "mountPath": WORKDIR, "readOnly": true }, tmp],
        }]),
    );
    gate_pod.insert(
        "volumes".into(),
        json!([work_volume, tmp_volume, { "name": "tree", "emptyDir": {} }]),
    );

    let collect = collect_job(spec, plan, opts, &names, &branch);
    debug_assert!(RUNNER_CYCLIX.starts_with('/'));
    vec![
        Manifest {
            file: "run/gate-job.yaml".into(),
            object: job(
                plan,
                &names.role("gate"),
                "gate",
                spec.gate.timeout_s + EXPORT_SLACK_S,
                gate_pod,
            ),
        },
        Manifest {
            file: "run/collect-job.yaml".into(),
            object: collect,
        },
    ]
}

/// The collector Job (part 0; [`collect_part_job`] makes the others).
fn collect_job(
    spec: &Spec,
    plan: &RunPlan,
    opts: &KubeOptions,
    names: &KubeNames,
    branch: &str,
) -> Value {
    let ReadOnlyWork {
        repo_ro,
        tmp,
        work_volume,
        tmp_volume,
    } = ReadOnlyWork::new(names);
    let mut collect_pod = pod_base(agent_uid(spec));
    collect_pod.insert("enableServiceLinks".into(), json!(false));
    let mut collect = runner_step(
        opts,
        "collect",
        // argv, not text: the branch is `$1` of a fixed script.
        json!([
            "sh",
            "-c",
            collect_script(),
            "collect",
            branch,
            "0",
            COLLECT_PART.to_string()
        ]),
        json!([repo_ro, tmp, repo_part_mount(0)]),
    );
    collect["env"] = json!(collect_env());
    collect_pod.insert("containers".into(), json!([collect]));
    let collect_volumes = json!([work_volume, tmp_volume, repo_part_volume(names, 0)]);
    collect_pod.insert("volumes".into(), collect_volumes);
    job(
        plan,
        &names.role("collect"),
        "collect",
        COLLECT_S,
        collect_pod,
    )
}
