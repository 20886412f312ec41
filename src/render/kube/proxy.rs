//! The egress proxy on Kubernetes: squid's rendered configuration in a ConfigMap, a
//! Deployment of one replica that mounts it (and, with credentials, the credential Secret —
//! the only Pod that mounts it), and a ClusterIP Service whose address the agent gets through
//! the kubelet's service variables. Pure.

use super::shared::CREDENTIALS_KEY;
use serde_json::{Value, json};

use super::shared::{
    KubeNames, container_security, labels, meta, pod_security, pull_policy, selector,
};
use super::{KubeOptions, Manifest};
use crate::naming::RunNames;
use crate::render::RenderError;
use crate::render::plan::{PROXY_CONF_FILE, PROXY_CONF_PATH, PROXY_PORT, RunPlan};
use crate::render::proxy::credentials::{self, CREDENTIALS_INCLUDE_PATH, PROXY_UID};
use crate::spec::Spec;

/// The ports the proxy serves: the forward port, then one per credential.
#[must_use]
pub fn ports(spec: &Spec) -> Vec<u16> {
    std::iter::once(PROXY_PORT)
        .chain((0..spec.agent.credentials.len()).map(credentials::port_of))
        .collect()
}

/// squid's configuration for the export: as the Podman run's, with `pod_cidr` as the client
/// range.
fn squid_conf(spec: &Spec, plan: &RunPlan, opts: &KubeOptions) -> String {
    crate::render::proxy::squid_conf(&crate::render::proxy::ProxyPlan {
        egress: &spec.egress,
        agent_subnet: &opts.pod_cidr,
        listen_port: PROXY_PORT,
        credentials: &spec.agent.credentials,
        placeholders: &plan.placeholders,
        ca_files: 0,
        log_key: &plan.log_key,
    })
}

/// The proxy's ConfigMap, Deployment and Service.
///
/// # Errors
/// [`RenderError`] when the plan has no proxy container.
pub fn manifests(
    spec: &Spec,
    plan: &RunPlan,
    opts: &KubeOptions,
) -> Result<Vec<Manifest>, RenderError> {
    let names = KubeNames(RunNames::new(&plan.run_id));
    let name = names.proxy();
    let c = super::shared::container(plan, &name)?;
    let conf_map = names.role("proxy-conf");
    let config = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta(plan, &conf_map, "proxy"),
        "data": { PROXY_CONF_FILE: squid_conf(spec, plan, opts) },
    });
    let mut mounts = vec![
        json!({ "name": "conf", "mountPath": PROXY_CONF_PATH, "subPath": PROXY_CONF_FILE, "readOnly": true }),
        json!({ "name": "tmp", "mountPath": "/tmp" }),
    ];
    let mut volumes = vec![
        json!({ "name": "conf", "configMap": { "name": conf_map } }),
        json!({ "name": "tmp", "emptyDir": { "medium": "Memory", "sizeLimit": "64Mi" } }),
    ];
    if !spec.agent.credentials.is_empty() {
        mounts.push(json!({
            "name": "credentials", "mountPath": CREDENTIALS_INCLUDE_PATH,
            "subPath": CREDENTIALS_KEY, "readOnly": true,
        }));
        // 0444, not the Podman backend's 0400 for uid 13: `podman kube play` ignores fsGroup
        // and makes the file root's, so squid could not read a 0400 or 0440 file there. Only
        // squid runs in this Pod, and no other Pod mounts the Secret.
        volumes.push(json!({
            "name": "credentials",
            "secret": { "secretName": names.credentials(), "defaultMode": 0o444 },
        }));
    }
    let container_ports: Vec<Value> = ports(spec)
        .iter()
        .enumerate()
        .map(|(i, p)| json!({ "name": port_name(i), "containerPort": p, "protocol": "TCP" }))
        .collect();
    let mut pod_sc = pod_security(PROXY_UID);
    pod_sc["fsGroup"] = json!(PROXY_UID);
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(plan, &name, "proxy"),
        "spec": {
            "replicas": 1,
            "selector": selector(plan, "proxy"),
            "template": {
                "metadata": { "labels": labels(plan, "proxy") },
                "spec": {
                    "automountServiceAccountToken": false,
                    "enableServiceLinks": false,
                    "hostNetwork": false, "hostPID": false, "hostIPC": false,
                    "securityContext": pod_sc,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "proxy",
                        "image": c.image,
                        "imagePullPolicy": pull_policy(c),
                        "ports": container_ports,
                        "securityContext": container_security(),
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    });
    let service_ports: Vec<Value> = ports(spec)
        .iter()
        .enumerate()
        .map(
            |(i, p)| json!({ "name": port_name(i), "port": p, "targetPort": p, "protocol": "TCP" }),
        )
        .collect();
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(plan, &name, "proxy"),
        "spec": {
            "type": "ClusterIP",
            "selector": { crate::naming::label::RUN: plan.run_id, crate::naming::label::ROLE: "proxy" },
            "ports": service_ports,
        },
    });
    Ok(vec![
        Manifest {
            file: "run/proxy-configmap.yaml".into(),
            object: config,
        },
        Manifest {
            file: "run/proxy-service.yaml".into(),
            object: service,
        },
        Manifest {
            file: "run/proxy-deployment.yaml".into(),
            object: deployment,
        },
    ])
}

/// A port's name: `forward`, then `cred0`, `cred1`, …
fn port_name(i: usize) -> String {
    if i == 0 {
        "forward".into()
    } else {
        format!("cred{}", i - 1)
    }
}
