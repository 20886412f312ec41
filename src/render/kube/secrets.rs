//! The run's Secrets WITH their values, for `cyclix export kube --with-secrets` only (written
//! mode 0600 below `DIR/secrets/`, never printed): the credential include file, mounted only
//! by the proxy, and the `agent.env`/`services[].env` values, taken one key per container.
//! Pure: the caller reads the values.

use serde_json::json;

use super::Manifest;
use super::shared::KubeNames;
use crate::naming::{RunNames, label};
use crate::spec::Spec;

/// The Secret manifests: `credentials` is squid's include file (with credentials), `env` the
/// variables' values.
#[must_use]
pub fn manifests(
    spec: &Spec,
    run_id: &str,
    credentials: Option<&str>,
    env: &[(String, String)],
) -> Vec<Manifest> {
    let names = KubeNames(RunNames::new(run_id));
    let meta = |name: String, role: &str| json!({ "name": name, "labels": { label::TENANT: spec.tenant, label::RUN: run_id, label::ROLE: role } });
    let mut out = Vec::new();
    if let Some(text) = credentials {
        out.push(Manifest {
            file: "secrets/credentials-secret.yaml".into(),
            object: json!({
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": meta(names.credentials(), "proxy"),
                "stringData": { super::shared::CREDENTIALS_KEY: text },
            }),
        });
    }
    if !env.is_empty() {
        let data: serde_json::Map<String, serde_json::Value> =
            env.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        out.push(Manifest {
            file: "secrets/env-secret.yaml".into(),
            object: json!({
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": meta(names.env_secret(), "agent"),
                "stringData": data,
            }),
        });
    }
    out
}
