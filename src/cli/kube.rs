//! The Kubernetes verbs' arguments: `cyclix export kube` and `cyclix kube-run`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `cyclix export ...`
#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// Render one run of TENANT as Kubernetes manifests (agent Job, proxy Deployment +
    /// Service, NetworkPolicies, gate and collector Jobs, the runner's CronJob and RBAC);
    /// docs/kubernetes.md says what a cluster must provide.
    Kube(KubeArgs),
}

/// Where `cyclix kube-run` creates the run's objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClusterKind {
    /// A Kubernetes cluster through `kubectl` (in-cluster or a kubeconfig).
    Kubectl,
    /// This host through `podman kube play` (single-host: no Services, no NetworkPolicy).
    Podman,
}

/// What both Kubernetes verbs render one run from (`#[command(flatten)]`).
#[derive(Debug, Args)]
pub struct KubeRender {
    /// The tenant (`~/.config/cyclix/tenants/TENANT.yaml`; `demo` without a file: the
    /// embedded demo tenant).
    pub tenant: String,
    /// Use this spec file instead (the CronJob: the tenant ConfigMap's file).
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// The run id the object names carry [default: a new one].
    #[arg(long)]
    pub run_id: Option<String>,
    /// The Kubernetes version targeted (1.29–1.37).
    #[arg(long, default_value = crate::render::kube::DEFAULT_K8S)]
    pub k8s_version: String,
    /// The runner image (cyclix at /usr/local/bin/cyclix, git, sh, base64).
    #[arg(long, default_value = "localhost/cyclix-runner:latest")]
    pub runner_image: String,
    /// The cluster's Pod CIDR, the only clients squid serves (`0.0.0.0/0`: any, and the
    /// proxy's ingress NetworkPolicy alone keeps other Pods out).
    #[arg(long, default_value = "0.0.0.0/0")]
    pub pod_cidr: String,
    /// The size of the run's work volume (a PersistentVolumeClaim request).
    #[arg(long, default_value = "4Gi")]
    pub work_size: String,
}

/// `cyclix kube-run TENANT ...`
#[derive(Debug, Args)]
pub struct KubeRunArgs {
    /// The tenant, its spec and the run's rendering.
    #[command(flatten)]
    pub render: KubeRender,
    /// The user's repository as the runner reaches it [default: the spec's `repo.path`]: the
    /// run's bundle is made from it and the run branch imported into it.
    #[arg(long)]
    pub repo: Option<PathBuf>,
    /// Where the objects are created.
    #[arg(long, value_enum, default_value = "kubectl")]
    pub cluster: ClusterKind,
    /// The namespace (kubectl) [default: the kubeconfig's, or the runner Pod's own].
    #[arg(long)]
    pub namespace: Option<String>,
}

/// `cyclix export kube TENANT ...`
#[derive(Debug, Args)]
pub struct KubeArgs {
    /// The tenant, its spec and the run's rendering.
    #[command(flatten)]
    pub render: KubeRender,
    /// Write one manifest per file below this directory (`run/`, `schedule/`) [default: all
    /// of them to stdout as one YAML stream].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write the run's Secrets (credential header lines, `agent.env` values) with their
    /// VALUES, read from the environment and the tenant's env file as `cyclix run` reads
    /// them, to `--out DIR/secrets/` (mode 0600). Without it no value is written anywhere.
    #[arg(long, requires = "out")]
    pub with_secrets: bool,
}
