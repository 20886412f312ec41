//! What every manifest of the Kubernetes backend shares: object names, labels, metadata, the
//! hardened security context, the translation of a plan container, and the checks of what
//! the backend cannot carry. Pure.

use serde_json::{Value, json};

use super::{KubeOptions, SecretNeed};
use crate::naming::{RunNames, label};
use crate::render::RenderError;
use crate::render::plan::{ContainerPlan, RunPlan};
use crate::spec::Spec;

/// The label every Pod of a run without network carries; the deny-all policy selects it.
pub const NO_NETWORK_LABEL: &str = "io.cyclix.network";

/// The uid (and gid, fsGroup) the run's Pods run as when the spec names none
/// (`agent.run_as`): non-root, so `runAsNonRoot` holds for any image.
pub const DEFAULT_UID: u32 = 1000;

/// Where the runner image keeps the cyclix binary.
pub const RUNNER_CYCLIX: &str = "/usr/local/bin/cyclix";

/// The object names of one run.
pub struct KubeNames<'a>(pub RunNames<'a>);

impl KubeNames<'_> {
    /// `cyclix-R-ROLE`.
    #[must_use]
    pub fn role(&self, role: &str) -> String {
        self.0.role(role)
    }
    /// The proxy's Service (and Deployment): `cyclix-R-proxy`.
    #[must_use]
    pub fn proxy(&self) -> String {
        self.0.proxy()
    }
    /// The environment variable the kubelet sets from the proxy Service in Pods created after
    /// it (`CYCLIX_R_PROXY_SERVICE_HOST`).
    #[must_use]
    pub fn proxy_host_var(&self) -> String {
        format!(
            "{}_SERVICE_HOST",
            self.proxy().to_ascii_uppercase().replace('-', "_")
        )
    }
    /// The run's ConfigMap (task, context, probe context): `cyclix-R-run`.
    #[must_use]
    pub fn run_config(&self) -> String {
        self.role("run")
    }
    /// The ConfigMap holding the repository bundle (made by the runner): `cyclix-R-repo`.
    #[must_use]
    pub fn repo_bundle(&self) -> String {
        self.role("repo")
    }
    /// The run's work volume: `cyclix-R-work`.
    #[must_use]
    pub fn work(&self) -> String {
        self.role("work")
    }
    /// The proxy's credential Secret: `cyclix-R-credentials`.
    #[must_use]
    pub fn credentials(&self) -> String {
        self.role("credentials")
    }
    /// The Secret of the variables named by `agent.env` and `services[].env`: `cyclix-R-env`.
    #[must_use]
    pub fn env_secret(&self) -> String {
        self.role("env")
    }
}

/// The run's labels for `role` as a JSON map.
pub fn labels(plan: &RunPlan, role: &str) -> Value {
    json!({
        label::TENANT: plan.tenant,
        label::RUN: plan.run_id,
        label::ROLE: role,
    })
}

/// The selector of one role's Pods of the run.
pub fn selector(plan: &RunPlan, role: &str) -> Value {
    json!({ "matchLabels": { label::RUN: plan.run_id, label::ROLE: role } })
}

/// `metadata` of an object of the run.
pub fn meta(plan: &RunPlan, name: &str, role: &str) -> Value {
    json!({ "name": name, "labels": labels(plan, role) })
}

/// The Pod-level security context: non-root uid/gid (and fsGroup, so volumes are writable),
/// `RuntimeDefault` seccomp.
pub fn pod_security(uid: u32) -> Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": { "type": "RuntimeDefault" },
    })
}

/// The container-level security context every container of the run gets.
pub fn container_security() -> Value {
    json!({
        "runAsNonRoot": true,
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "privileged": false,
        "capabilities": { "drop": ["ALL"] },
        "seccompProfile": { "type": "RuntimeDefault" },
    })
}

/// The Pod spec fields every Pod of the run shares: no service-account token, no host
/// namespaces, no restarts.
pub fn pod_base(uid: u32) -> serde_json::Map<String, Value> {
    let v = json!({
        "restartPolicy": "Never",
        "automountServiceAccountToken": false,
        "hostNetwork": false,
        "hostPID": false,
        "hostIPC": false,
        "shareProcessNamespace": false,
        "securityContext": pod_security(uid),
    });
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// `resources.limits` (and equal requests) from a plan container; `None` without limits.
pub fn resources(c: &ContainerPlan) -> Option<Value> {
    let mut limits = serde_json::Map::new();
    if let Some(m) = c.memory_bytes {
        limits.insert("memory".into(), json!(m.to_string()));
    }
    if let Some(cpu) = c.cpu_millis {
        limits.insert("cpu".into(), json!(format!("{cpu}m")));
    }
    (!limits.is_empty()).then(|| json!({ "limits": limits, "requests": limits }))
}

/// The image pull policy: `Never` for a local image (it must be on the node), `IfNotPresent`
/// for one pinned by digest.
pub fn pull_policy(c: &ContainerPlan) -> &'static str {
    if c.pull_never {
        "Never"
    } else {
        "IfNotPresent"
    }
}

/// A plan environment as Kubernetes `env`, each value's proxy address replaced by the proxy
/// Service's variable (`$(CYCLIX_R_PROXY_SERVICE_HOST)`, expanded by the kubelet), and `$` in
/// values escaped as `$$` (so the kubelet expands nothing else).
pub fn env(plan: &RunPlan, names: &KubeNames, vars: &[(String, String)]) -> Vec<Value> {
    let host = format!("$({})", names.proxy_host_var());
    vars.iter()
        .map(|(k, v)| {
            let v = v.replace('$', "$$").replace(&plan.proxy_ip, &host);
            json!({ "name": k, "value": v })
        })
        .collect()
}

/// `env` entries taking each of `vars` from the run's env Secret (one key each).
pub fn secret_env(names: &KubeNames, vars: &[(String, String)]) -> Vec<Value> {
    vars.iter()
        .map(|(_, var)| {
            json!({
                "name": var,
                "valueFrom": { "secretKeyRef": { "name": names.env_secret(), "key": var } },
            })
        })
        .collect()
}

/// A plan container's argv split the Kubernetes way: all of it as `command` (the image's
/// entrypoint is never used with an explicit argv), nothing for an empty argv.
pub fn command(c: &ContainerPlan) -> Option<Value> {
    (!c.exec.is_empty()).then(|| json!(c.exec))
}

/// The plan container `role` of the run.
pub fn container<'a>(plan: &'a RunPlan, stem: &str) -> Result<&'a ContainerPlan, RenderError> {
    plan.containers
        .iter()
        .find(|c| c.stem == stem)
        .ok_or_else(|| RenderError {
            key: "plan".into(),
            message: format!("the run plan has no container `{stem}`"),
        })
}

/// What the backend cannot carry, refused with the key and a fix.
pub fn check_supported(spec: &Spec, plan: &RunPlan, opts: &KubeOptions) -> Result<(), RenderError> {
    let refuse = |key: &str, message: &str| {
        Err(RenderError {
            key: key.into(),
            message: message.into(),
        })
    };
    if plan.tier == crate::tier::Tier::Gvisor {
        return refuse(
            "tier",
            "`gvisor` has no Kubernetes form yet: the Pod's probe profile is Kubernetes', not gVisor's, so its proof would not hold; on a cluster, a gVisor RuntimeClass is the cluster's: set `tier: container` and `agent.runtime_class: gvisor` (the agent Pod's runtimeClassName)",
        );
    }
    if !plan.tier.is_sandboxed() {
        return refuse(
            "tier",
            "only tier `container` has a Kubernetes form (the other tiers run on the host); set `tier: container`",
        );
    }
    if !spec.mounts.is_empty() {
        return refuse(
            "mounts",
            "host bind mounts have no Kubernetes equivalent here (a hostPath would open the node); remove `mounts:` for the export",
        );
    }
    if !spec.gate.protected.is_empty() {
        return refuse(
            "gate.protected",
            "the Kubernetes gate runs the agent's tree as it is: protected paths and the base's test inventory are not carried there yet (docs/gate.md); remove `gate.protected` for the export, or run with `cyclix run`",
        );
    }
    if !spec.egress.ca_certs.is_empty() {
        return refuse(
            "egress.ca_certs",
            "the proxy's extra CA files are host paths; remove `egress.ca_certs` for the export",
        );
    }
    if !opts.pod_cidr.contains('/')
        || !opts
            .pod_cidr
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'.' || b == b':' || b == b'/')
    {
        return refuse(
            "--pod-cidr",
            "not a CIDR; give the cluster's Pod CIDR (e.g. 10.244.0.0/16) or 0.0.0.0/0",
        );
    }
    let size = opts.work_size.as_str();
    let digits = size.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    if !matches!(&size[digits.len()..], "Mi" | "Gi" | "Ti")
        || digits.is_empty()
        || digits.starts_with('0')
        || !digits.bytes().all(|b| b.is_ascii_digit())
    {
        return refuse(
            "--work-size",
            "not a volume size; give a number with Mi, Gi or Ti, e.g. 4Gi",
        );
    }
    Ok(())
}

/// The Secrets the run needs and the export does not write.
pub fn secret_needs(spec: &Spec, plan: &RunPlan) -> Vec<SecretNeed> {
    let names = KubeNames(RunNames::new(&plan.run_id));
    let mut out = Vec::new();
    if !spec.agent.credentials.is_empty() {
        out.push(SecretNeed {
            name: names.credentials(),
            keys: vec![CREDENTIALS_KEY.to_string()],
            mounted_by: vec!["proxy".into()],
            holds: format!(
                "squid's credential header lines for {} (`cyclix export kube --with-secrets` writes them from the environment, as `cyclix run` reads it)",
                spec.agent
                    .credentials
                    .iter()
                    .map(|c| c.env.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    let mut keys: Vec<String> = spec.agent.env.clone();
    let mut by = Vec::new();
    if !spec.agent.env.is_empty() {
        by.push("agent".to_string());
    }
    for s in &spec.services {
        if !s.env.is_empty() {
            by.push(format!("service {}", s.name));
            keys.extend(s.env.iter().cloned());
        }
    }
    if !keys.is_empty() {
        out.push(SecretNeed {
            name: names.env_secret(),
            keys,
            mounted_by: by,
            holds:
                "the value of each variable, one key each; each container takes only its own keys"
                    .into(),
        });
    }
    out
}

/// `metadata` of a tenant-wide object (not of one run).
pub fn meta_tenant(tenant: &str, name: &str) -> Value {
    json!({ "name": name, "labels": { label::TENANT: tenant, label::ROLE: "runner" } })
}

/// The credential Secret's one key: squid's include file.
pub const CREDENTIALS_KEY: &str = "credentials.conf";
