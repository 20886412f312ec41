//! `cyclix export kube TENANT ...`: one run of TENANT as Kubernetes manifests, printed as one
//! YAML stream or written one per file below `--out DIR` (nothing is applied). The notices —
//! what Kubernetes does not enforce the way Podman does, and the Secrets the run needs — go
//! to stderr. Secret values are written only with `--with-secrets`, only below `DIR/secrets/`
//! (mode 0600), never printed.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result};

use super::kube_export::{RenderArgs, render, secret_manifests};
use crate::cli::KubeArgs;
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::render::kube::{self};
use crate::spec::{self};

/// Renders and prints or writes the export.
///
/// # Errors
/// I/O failures; an invalid spec, run id or a spec the export cannot carry is a finding.
pub fn run(env: &HostEnv, args: &KubeArgs) -> Result<Outcome> {
    let r = match render(env, &args.render.render_args())? {
        Ok(r) => r,
        Err(outcome) => return Ok(outcome),
    };
    let (spec, run_id, export) = (r.spec, r.run_id, r.export);
    let mut docs = Vec::new();
    for m in &export.manifests {
        docs.push((m, m.yaml().map_err(|e| anyhow::anyhow!("{e}"))?));
    }
    if let Some(out) = &args.out {
        for (m, yaml) in &docs {
            write_file(out, &m.file, yaml, 0o644)?;
        }
        if args.with_secrets {
            write_secrets(env, &spec, &run_id, out)?;
        }
        crate::stderrln!("wrote {} manifests below {}", docs.len(), out.display());
    } else {
        let mut s = String::new();
        for (m, yaml) in &docs {
            let _ = write!(s, "---\n# {}\n{yaml}", m.file);
        }
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(s.as_bytes())
            .and_then(|()| stdout.flush())
            .context("writing to stdout")?;
    }
    print_notices(&export, args.with_secrets);
    Ok(Outcome::Ok)
}

/// What [`render`] takes: the tenant, its spec file and the export's options.
impl crate::cli::KubeRender {
    /// The borrowed form [`render`] takes.
    pub(crate) fn render_args(&self) -> RenderArgs<'_> {
        RenderArgs {
            tenant: &self.tenant,
            spec: self.spec.as_deref(),
            run_id: self.run_id.as_deref(),
            k8s_version: &self.k8s_version,
            runner_image: &self.runner_image,
            pod_cidr: &self.pod_cidr,
            work_size: &self.work_size,
        }
    }
}

fn print_notices(export: &kube::KubeExport, with_secrets: bool) {
    for w in &export.warnings {
        crate::stderrln!("warning: {w}");
    }
    crate::stderrln!("What Kubernetes does not enforce the way Podman does:");
    for n in &export.not_enforced {
        crate::stderrln!("  - {n}");
    }
    crate::stderrln!("  - {}", crate::probe::Profile::Kubernetes.statement());
    for s in &export.secrets {
        if with_secrets {
            crate::stderrln!(
                "Secret {} (keys {}) written to secrets/ with its values (mode 0600): apply it, then delete the file",
                s.name,
                s.keys.join(", ")
            );
        } else {
            crate::stderrln!(
                "Secret {} is not written (no value goes to disk): keys {}, mounted by {} only; it holds {}. Create it before the run, e.g. `cyclix export kube TENANT --run-id RUN --out DIR --with-secrets` then `kubectl apply -f DIR/secrets/ && rm -r DIR/secrets`",
                s.name,
                s.keys.join(", "),
                s.mounted_by.join(", "),
                s.holds
            );
        }
    }
}

/// Writes the run's Secrets with their values below `out/secrets/` (mode 0600).
fn write_secrets(env: &HostEnv, spec: &spec::Spec, run_id: &str, out: &Path) -> Result<()> {
    for m in secret_manifests(env, spec, run_id)? {
        let yaml = m.yaml().map_err(|e| anyhow::anyhow!("{e}"))?;
        write_file(out, &m.file, &yaml, 0o600)?;
    }
    Ok(())
}

/// Writes `root/name` atomically with `mode` (temp file created with that mode, then renamed).
fn write_file(root: &Path, name: &str, text: &str, mode: u32) -> Result<()> {
    crate::atomic::write_creating(&root.join(name), text.as_bytes(), mode)
}
