//! `cyclix export kube TENANT ...`: one run of TENANT as Kubernetes manifests, printed as one
//! YAML stream or written one per file below `--out DIR` (nothing is applied). The notices —
//! what Kubernetes does not enforce the way Podman does, and the Secrets the run needs — go
//! to stderr. Secret values are written only with `--with-secrets`, only below `DIR/secrets/`
//! (mode 0600), never printed.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::SystemTime;

use anyhow::{Context as _, Result};

use super::render_cmd::default_run_context;
use super::spec_file::{read_spec_text, report_spec_error, spec_context};
use crate::cli::KubeArgs;
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::render::kube::{self, KubeOptions};
use crate::spec::{self, Task};

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

pub(crate) struct RenderArgs<'a> {
    /// The tenant.
    pub tenant: &'a str,
    /// The spec file (default: the tenant's; `demo` without one: the embedded demo).
    pub spec: Option<&'a Path>,
    /// The run id (default: a new one).
    pub run_id: Option<&'a str>,
    /// `--k8s-version`.
    pub k8s_version: &'a str,
    /// `--runner-image`.
    pub runner_image: &'a str,
    /// `--pod-cidr`.
    pub pod_cidr: &'a str,
    /// `--work-size`.
    pub work_size: &'a str,
}

/// One run of a tenant rendered for Kubernetes.
pub(crate) struct Rendered {
    /// The spec.
    pub spec: spec::Spec,
    /// The run id the objects carry.
    pub run_id: String,
    /// The objects and notices.
    pub export: kube::KubeExport,
}

/// Reads the spec and renders one run (`cyclix export kube` and `cyclix kube-run` share it).
/// `Err(outcome)`: a finding, already reported on stderr.
///
/// # Errors
/// I/O failures reading the spec or the task.
pub(crate) fn render(
    env: &HostEnv,
    args: &RenderArgs<'_>,
) -> Result<std::result::Result<Rendered, Outcome>> {
    super::tenant::check_name(args.tenant)?;
    let path = args.spec.map_or_else(
        || super::tenant::tenant_spec_path(env, args.tenant),
        Path::to_path_buf,
    );
    let embedded_demo = args.spec.is_none() && args.tenant == "demo" && !path.exists();
    let (text, file) = if embedded_demo {
        (
            crate::demo::TENANT_YAML.to_string(),
            "<embedded demo tenant.yaml>".to_string(),
        )
    } else {
        match read_spec_text(&path)? {
            Ok(t) => (t, path.display().to_string()),
            Err(e) => return report_spec_error(&e, false).map(Err),
        }
    };
    let spec = match spec::parse(&text, &spec_context(&file, env)) {
        Ok(s) => s,
        Err(e) => return report_spec_error(&e, false).map(Err),
    };
    if spec.tenant != args.tenant {
        crate::stderrln!(
            "error: {file}: tenant: the spec is tenant `{}`, not `{}`; export the tenant it names",
            spec.tenant,
            args.tenant
        );
        return Ok(Err(Outcome::Findings));
    }
    let run_id = match args.run_id {
        Some(r) => r.to_string(),
        None => super::clock::new_run_id(SystemTime::now(), std::process::id()),
    };
    if let Err(m) = spec::validate::run_id(&run_id) {
        crate::stderrln!("error: --run-id `{run_id}`: {m}");
        return Ok(Err(Outcome::Findings));
    }
    let task = match (&spec.task, embedded_demo) {
        (Task::File(f), true) if !Path::new(f).exists() => crate::demo::TASK.to_string(),
        _ => match super::tenant::task_text(&spec) {
            Some(t) => t,
            None => return Ok(Err(Outcome::Findings)),
        },
    };
    let mut ctx = default_run_context(
        &spec,
        &run_id,
        env,
        None,
        None,
        None,
        crate::render::plan::CYCLIX_BIN_PATH,
    );
    ctx.placeholders = super::tenant::random_placeholders(&spec)?;
    // A real run's: the agent, having read the source, must not know it.
    ctx.log_key = super::tenant::random_log_key()?;
    let opts = KubeOptions {
        k8s_version: args.k8s_version.to_string(),
        runner_image: args.runner_image.to_string(),
        task,
        pod_cidr: args.pod_cidr.to_string(),
        work_size: args.work_size.to_string(),
        spec_text: text,
    };
    match crate::render::plan::plan(&spec, &ctx).and_then(|plan| kube::render(&spec, &plan, &opts))
    {
        Ok(export) => Ok(Ok(Rendered {
            spec,
            run_id,
            export,
        })),
        Err(e) => {
            crate::stderrln!("error: {file}: cannot export the run: {e}");
            Ok(Err(Outcome::Findings))
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

/// The run's Secrets with their values, from the environment and the tenant's env file
/// (as `cyclix run` reads them).
///
/// # Errors
/// A value cannot be read or the credential include file cannot be made.
pub(crate) fn secret_manifests(
    env: &HostEnv,
    spec: &spec::Spec,
    run_id: &str,
) -> Result<Vec<kube::Manifest>> {
    let values = super::tenant::run_secrets(env, spec)?;
    let include = if spec.agent.credentials.is_empty() {
        None
    } else {
        Some(crate::run::phases::prepare::credential_include(
            spec, &values,
        )?)
    };
    let env_values: Vec<(String, String)> = values
        .iter()
        .filter(|(k, _)| !spec.agent.credentials.iter().any(|c| &c.env == k))
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect();
    Ok(kube::secrets::manifests(
        spec,
        run_id,
        include.as_deref(),
        &env_values,
    ))
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
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = root.join(name);
    let dir = path
        .parent()
        .context("invariant: manifests have a parent directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(".{}.tmp", name.replace('/', "_")));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("renaming into {}", path.display()))?;
    Ok(())
}
