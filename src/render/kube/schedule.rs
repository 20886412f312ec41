//! Scheduling on Kubernetes: the cluster fires the schedule, cyclix does not become a
//! controller. A CronJob (`concurrencyPolicy: Forbid`: one run of a tenant at a time, a
//! missed trigger is skipped as `cyclix tick` skips one) runs the runner image with the
//! tenant's spec from a ConfigMap, as a ServiceAccount whose Role grants the least it needs to
//! create one run's objects, wait for them, read the collector's log and delete them. Pure.

use serde_json::{Value, json};

use super::shared::{DEFAULT_UID, container_security, meta_tenant, pod_security};
use super::{KubeOptions, Manifest};
use crate::render::RenderError;
use crate::spec::Spec;

/// The tenant spec's key in the tenant ConfigMap.
pub const SPEC_KEY: &str = "tenant.yaml";

/// Where the runner finds the spec.
pub const SPEC_DIR: &str = "/etc/cyclix/tenant";

/// The runner's command in the runner image (then the tenant and its options).
pub const RUNNER_ENTRY: [&str; 2] = [super::shared::RUNNER_CYCLIX, "kube-run"];

/// The runner's rights: `(group, resources, verbs)`. Creating one run's objects, reading
/// them (`get`; `list` and `watch` for `kubectl wait` and the label-selected delete and
/// audit), deleting them, reading the collector's log, and reading the namespace's events
/// (what the cluster says when it will not run a Pod: `cluster::stuck`). Secrets only by name (`create`,
/// `get`, `delete`): a `list` would hand over every Secret's value in the namespace. No
/// `update`, `patch`, `escalate`, `bind`, `impersonate`, no `pods/exec`, nothing
/// cluster-wide.
pub const RUNNER_RULES: &[(&str, &[&str], &[&str])] = &[
    (
        "",
        &["configmaps", "services", "persistentvolumeclaims"],
        &["create", "get", "list", "watch", "delete"],
    ),
    ("", &["secrets"], &["create", "get", "delete"]),
    ("", &["pods"], &["get", "list", "watch"]),
    ("", &["pods/log"], &["get"]),
    ("", &["events"], &["get", "list", "watch"]),
    (
        "apps",
        &["deployments"],
        &["create", "get", "list", "watch", "delete"],
    ),
    (
        "batch",
        &["jobs"],
        &["create", "get", "list", "watch", "delete"],
    ),
    (
        "networking.k8s.io",
        &["networkpolicies"],
        &["create", "get", "list", "watch", "delete"],
    ),
];

/// The claim the runner finds the user's repository on (`cyclix-TENANT-repo`, made by you:
/// the CronJob mounts it at [`REPO_DIR`]).
#[must_use]
pub fn repo_claim(tenant: &str) -> String {
    format!("cyclix-{tenant}-repo")
}

/// Where the runner's Pod mounts the repository claim.
pub const REPO_DIR: &str = "/var/lib/cyclix/repo";

/// The Secret the runner takes the run's secret values from as its environment
/// (`cyclix-TENANT-secrets`, optional, made by you; the runner makes the run's own Secrets
/// from it).
#[must_use]
pub fn runner_secret(tenant: &str) -> String {
    format!("cyclix-{tenant}-secrets")
}

/// The first five fields of a cron line for `schedule.on_calendar`, for the subset that has
/// one: the shorthands `hourly`, `daily`, `weekly`, `monthly`, `yearly`/`annually`, and
/// `[WEEKDAYS] *-*-* HOURS:MINUTES[:00]` with numbers, lists, `a..b` ranges, `*` and `a/n`.
///
/// # Errors
/// [`RenderError`] naming `schedule.on_calendar` for anything else, with the form to use.
pub fn cron(on_calendar: &str) -> Result<String, RenderError> {
    let bad = || RenderError {
        key: "schedule.on_calendar".into(),
        message: format!(
            "`{}` has no CronJob form; for `cyclix export kube` use a shorthand (hourly, daily, weekly, monthly, yearly) or `[Mon..Fri] *-*-* HH:MM` with numbers, lists, ranges or steps",
            on_calendar.escape_debug()
        ),
    };
    match on_calendar.trim().to_ascii_lowercase().as_str() {
        "hourly" => return Ok("0 * * * *".into()),
        "daily" => return Ok("0 0 * * *".into()),
        "weekly" => return Ok("0 0 * * 1".into()),
        "monthly" => return Ok("0 0 1 * *".into()),
        "yearly" | "annually" => return Ok("0 0 1 1 *".into()),
        _ => {}
    }
    let mut tokens: Vec<&str> = on_calendar.split_whitespace().collect();
    let weekdays = if tokens
        .first()
        .is_some_and(|t| crate::spec::rules::calendar::is_weekday_spec(t))
    {
        weekday_field(tokens.remove(0)).ok_or_else(bad)?
    } else {
        "*".to_string()
    };
    let time = match tokens.as_slice() {
        ["*-*-*", t] | [t] => *t,
        _ => return Err(bad()),
    };
    let mut parts = time.split(':');
    let (Some(h), Some(m)) = (parts.next(), parts.next()) else {
        return Err(bad());
    };
    if parts.next().is_some_and(|s| s != "00" && s != "0") || parts.next().is_some() {
        return Err(bad());
    }
    let hour = field(h, 23).ok_or_else(bad)?;
    let minute = field(m, 59).ok_or_else(bad)?;
    Ok(format!("{minute} {hour} * * {weekdays}"))
}

/// One numeric field: `*`, `N`, `a..b`, `a/n`, `*/n`, comma lists of those; values ≤ `max`.
fn field(f: &str, max: u32) -> Option<String> {
    let num = |s: &str| s.parse::<u32>().ok().filter(|n| *n <= max);
    f.split(',')
        .map(|item| {
            if item == "*" {
                return Some("*".to_string());
            }
            if let Some((a, n)) = item.split_once('/') {
                let start = if a == "*" {
                    "*".to_string()
                } else {
                    num(a)?.to_string()
                };
                let step = n.parse::<u32>().ok().filter(|n| (1..=max).contains(n))?;
                return Some(format!("{start}/{step}"));
            }
            if let Some((a, b)) = item.split_once("..") {
                let (a, b) = (num(a)?, num(b)?);
                return (a <= b).then(|| format!("{a}-{b}"));
            }
            num(item).map(|n| n.to_string())
        })
        .collect::<Option<Vec<_>>>()
        .map(|v| v.join(","))
}

/// A weekday spec (`Mon`, `Mon..Fri`, `Sat,Sun`) as cron's day-of-week field.
fn weekday_field(t: &str) -> Option<String> {
    const DAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    let day = |s: &str| {
        let l = s.to_ascii_lowercase();
        DAYS.iter().position(|d| l.starts_with(d))
    };
    t.split(',')
        .map(|item| match item.split_once("..") {
            Some((a, b)) => Some(format!("{}-{}", day(a)?, day(b)?)),
            None => day(item).map(|d| d.to_string()),
        })
        .collect::<Option<Vec<_>>>()
        .map(|v| v.join(","))
}

/// The runner's ServiceAccount, Role, RoleBinding, the tenant ConfigMap and (with a
/// `schedule:`) the CronJob. `spec_text` is the tenant spec as written.
///
/// # Errors
/// [`RenderError`] for a calendar expression without a cron form.
pub fn manifests(
    spec: &Spec,
    spec_text: &str,
    opts: &KubeOptions,
) -> Result<Vec<Manifest>, RenderError> {
    let t = &spec.tenant;
    let name = format!("cyclix-{t}-runner");
    let config_name = format!("cyclix-{t}-spec");
    let rules: Vec<Value> = RUNNER_RULES
        .iter()
        .map(|(g, r, v)| json!({ "apiGroups": [g], "resources": r, "verbs": v }))
        .collect();
    let mut out = vec![
        Manifest {
            file: "schedule/runner-serviceaccount.yaml".into(),
            object: json!({
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": meta_tenant(t, &name),
                "automountServiceAccountToken": false,
            }),
        },
        Manifest {
            file: "schedule/runner-role.yaml".into(),
            object: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": meta_tenant(t, &name),
                "rules": rules,
            }),
        },
        Manifest {
            file: "schedule/runner-rolebinding.yaml".into(),
            object: json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": meta_tenant(t, &name),
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name },
                "subjects": [{ "kind": "ServiceAccount", "name": name }],
            }),
        },
        Manifest {
            file: "schedule/tenant-configmap.yaml".into(),
            object: json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": meta_tenant(t, &config_name),
                "data": { SPEC_KEY: spec_text },
            }),
        },
    ];
    let Some(s) = &spec.schedule else {
        return Ok(out);
    };
    let pod = json!({
        "serviceAccountName": name,
        // The runner talks to the API server: its token is mounted (only in this Pod).
        "automountServiceAccountToken": true,
        "restartPolicy": "Never",
        // SIGTERM makes the runner delete the run's objects (at most 180 s) before it exits.
        "terminationGracePeriodSeconds": 300,
        "enableServiceLinks": false,
        "securityContext": pod_security(DEFAULT_UID),
        "containers": [{
            "name": "runner",
            "image": opts.runner_image,
            "imagePullPolicy": "IfNotPresent",
            "command": [RUNNER_ENTRY[0], RUNNER_ENTRY[1], t, "--spec", format!("{SPEC_DIR}/{SPEC_KEY}"), "--repo", REPO_DIR, "--cluster", "kubectl", "--runner-image", opts.runner_image, "--k8s-version", opts.k8s_version, "--pod-cidr", opts.pod_cidr, "--work-size", opts.work_size],
            "env": [{ "name": "HOME", "value": "/tmp" }],
            // The run's secret values, as the runner's environment (never in an argument).
            "envFrom": [{ "secretRef": { "name": runner_secret(t), "optional": true } }],
            "securityContext": container_security(),
            "volumeMounts": [
                { "name": "spec", "mountPath": SPEC_DIR, "readOnly": true },
                { "name": "repo", "mountPath": REPO_DIR },
                { "name": "tmp", "mountPath": "/tmp" },
            ],
        }],
        "volumes": [
            { "name": "spec", "configMap": { "name": config_name } },
            { "name": "repo", "persistentVolumeClaim": { "claimName": repo_claim(t) } },
            { "name": "tmp", "emptyDir": { "medium": "Memory", "sizeLimit": "1Gi" } },
        ],
    });
    let mut job = json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": meta_tenant(t, &format!("cyclix-{t}")),
        "spec": {
            "schedule": cron(&s.on_calendar)?,
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": { "spec": {
                "backoffLimit": 0,
                "template": { "metadata": { "labels": { crate::naming::label::TENANT: t, crate::naming::label::ROLE: "runner" } }, "spec": pod },
            } },
        },
    });
    if !s.persistent {
        // Without catch-up a trigger missed by more than a minute is dropped.
        job["spec"]["startingDeadlineSeconds"] = json!(60);
    }
    out.push(Manifest {
        file: "schedule/cronjob.yaml".into(),
        object: job,
    });
    Ok(out)
}
