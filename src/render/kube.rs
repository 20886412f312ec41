//! The Kubernetes backend (`cyclix export kube`, issue 17): the run plan's topology as plain
//! Kubernetes objects, one manifest per object, serialised by `serde-saphyr` from
//! `serde_json` values (no text templates). Pure: every host fact arrives in the plan and
//! [`KubeOptions`].
//!
//! What one run becomes (object names carry the run id, `cyclix-RUN-…`):
//! - [`agent`]: the agent as a Job's Pod (hardened securityContext, no service-account token,
//!   `runtimeClassName` from `agent.runtime_class`), the repository cloned from a bundle by an
//!   init container into the run's PersistentVolumeClaim, the services as native sidecars on
//!   the Pod's localhost, the probe suite in front of the agent (`agent-wait --probe`), and the
//!   run's ConfigMap (task, context, probe context).
//! - [`proxy`]: the egress proxy as a Deployment + Service, squid's configuration in a
//!   ConfigMap, the credential include file in a Secret mounted only there.
//! - [`policy`]: NetworkPolicies (the agent may reach only the proxy's ports; the gate and the
//!   collector nothing; the proxy only public addresses on the allowed ports, and DNS).
//! - [`gate`]: the gate as a Job on a clean export of the run branch, and the collector Job
//!   that hands the run's commits to the runner as a bundle.
//! - [`schedule`]: the CronJob, the runner's ServiceAccount with least RBAC, the tenant
//!   spec's ConfigMap.
//! - [`limits`]: what Kubernetes does not enforce the way Podman does.

pub mod agent;
pub mod gate;
pub mod limits;
pub mod policy;
pub mod proxy;
pub mod schedule;
pub mod secrets;
mod shared;

pub use shared::{KubeNames, NO_NETWORK_LABEL};

use serde_json::Value;

use super::RenderError;
use super::plan::RunPlan;
use crate::spec::Spec;

/// The oldest Kubernetes version the export targets: native sidecars (an init container with
/// `restartPolicy: Always`) are on by default from 1.29.
pub const MIN_K8S: (u32, u32) = (1, 29);
/// The newest Kubernetes version the export is validated against (kubernetes-validate 1.37.0).
pub const MAX_K8S: (u32, u32) = (1, 37);
/// The Kubernetes version `--k8s-version` defaults to.
pub const DEFAULT_K8S: &str = "1.33";

/// Facts the export needs beyond the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeOptions {
    /// The Kubernetes version targeted (`MAJOR.MINOR`, [`MIN_K8S`]–[`MAX_K8S`]).
    pub k8s_version: String,
    /// The runner image: the cyclix binary at `/usr/local/bin/cyclix` plus git, coreutils, sh
    /// and base64 (`images/runner/Containerfile`). It copies cyclix into the agent Pod, clones
    /// the bundle, exports the gate's tree and bundles the run's commits.
    pub runner_image: String,
    /// The task text (`task.text`, or the file's content read by the caller).
    pub task: String,
    /// The CIDR squid accepts clients from (`acl agents src`): the cluster's Pod CIDR, or
    /// `0.0.0.0/0` to leave it to the proxy's ingress NetworkPolicy.
    pub pod_cidr: String,
    /// The size of the run's work volume (a PVC request, e.g. `4Gi`).
    pub work_size: String,
    /// The tenant spec as written (the tenant ConfigMap the CronJob's runner reads).
    pub spec_text: String,
}

/// One manifest: a file name (`agent-job.yaml`) and the object.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The file name below the output directory (`run/…` or `schedule/…`).
    pub file: String,
    /// The Kubernetes object.
    pub object: Value,
}

impl Manifest {
    /// The object's `kind`.
    #[must_use]
    pub fn kind(&self) -> &str {
        self.object["kind"].as_str().unwrap_or_default()
    }

    /// The object's `metadata.name`.
    #[must_use]
    pub fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// The object as YAML.
    ///
    /// # Errors
    /// [`RenderError`] when the serialiser fails (it does not for JSON values).
    pub fn yaml(&self) -> Result<String, RenderError> {
        serde_saphyr::to_string(&self.object).map_err(|e| RenderError {
            key: self.file.clone(),
            message: format!("serialising the manifest: {e}"),
        })
    }
}

/// What `cyclix export kube` writes and says.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeExport {
    /// The objects, in apply order (the proxy before the agent: the agent's environment takes
    /// the proxy Service's address, which exists only for Pods created after the Service).
    pub manifests: Vec<Manifest>,
    /// The Secrets the export does not write (values never go into manifests on disk): name,
    /// key, and where the value comes from.
    pub secrets: Vec<SecretNeed>,
    /// The plan's warnings (less the Podman-only notice about `agent.runtime_class`).
    pub warnings: Vec<String>,
    /// What Kubernetes does not enforce the way Podman does ([`limits::NOT_ENFORCED`], and
    /// the proxy's client range when it is left open).
    pub not_enforced: Vec<String>,
}

/// A Secret the run needs that the export names but does not fill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretNeed {
    /// The Secret's name (`cyclix-RUN-credentials`).
    pub name: String,
    /// Its keys.
    pub keys: Vec<String>,
    /// Who mounts it (`proxy`, `agent`, `service db`).
    pub mounted_by: Vec<String>,
    /// What each key holds.
    pub holds: String,
}

/// Parses `MAJOR.MINOR` (a patch is allowed and ignored) and checks the supported range.
///
/// # Errors
/// [`RenderError`] naming `--k8s-version` for another form or a version out of range.
pub fn parse_version(v: &str) -> Result<(u32, u32), RenderError> {
    let bad = || RenderError {
        key: "--k8s-version".into(),
        message: format!(
            "`{}` is not a supported Kubernetes version; use {}.{}–{}.{}, e.g. {DEFAULT_K8S}",
            v.escape_debug(),
            MIN_K8S.0,
            MIN_K8S.1,
            MAX_K8S.0,
            MAX_K8S.1
        ),
    };
    let v2 = v.strip_prefix('v').unwrap_or(v);
    let mut parts = v2.split('.');
    let major = parts
        .next()
        .and_then(|p| p.parse::<u32>().ok())
        .ok_or_else(bad)?;
    let minor = parts
        .next()
        .and_then(|p| p.parse::<u32>().ok())
        .ok_or_else(bad)?;
    if parts.next().is_some_and(|p| p.parse::<u32>().is_err()) || parts.next().is_some() {
        return Err(bad());
    }
    if (major, minor) < MIN_K8S || (major, minor) > MAX_K8S {
        return Err(bad());
    }
    Ok((major, minor))
}

/// Renders one run of `spec` as Kubernetes objects.
///
/// # Errors
/// [`RenderError`] for a plan that is not tier `container`, a spec feature without a
/// Kubernetes equivalent (host `mounts:`, `egress.ca_certs`), an unsupported version, or an
/// unusable `pod_cidr`.
pub fn render(spec: &Spec, plan: &RunPlan, opts: &KubeOptions) -> Result<KubeExport, RenderError> {
    parse_version(&opts.k8s_version)?;
    shared::check_supported(spec, plan, opts)?;
    let mut manifests = proxy::manifests(spec, plan, opts)?;
    manifests.extend(policy::manifests(spec, plan));
    manifests.extend(agent::manifests(spec, plan, opts)?);
    manifests.extend(gate::manifests(spec, plan, opts));
    manifests.extend(schedule::manifests(spec, &opts.spec_text, opts)?);
    let secrets = shared::secret_needs(spec, plan);
    let warnings: Vec<String> = plan
        .warnings
        .iter()
        .filter(|w| !w.starts_with(super::plan::RUNTIME_CLASS_NOTICE))
        .cloned()
        .collect();
    let mut not_enforced: Vec<String> = limits::NOT_ENFORCED
        .iter()
        .map(|s| (*s).to_string())
        .collect();
    if opts.pod_cidr == "0.0.0.0/0" {
        not_enforced.push("the proxy accepts clients from any address (--pod-cidr 0.0.0.0/0): only its ingress NetworkPolicy keeps other Pods out; pass the cluster's Pod CIDR to have squid refuse them too".into());
    }
    Ok(KubeExport {
        manifests,
        secrets,
        warnings,
        not_enforced,
    })
}

#[cfg(test)]
mod tests;
