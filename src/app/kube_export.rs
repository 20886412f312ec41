//! One run of a tenant rendered as Kubernetes manifests, as `export kube` writes them and
//! `kube-run` applies them: the run's plan, the options, the secrets' manifests.

use std::path::Path;
use std::time::SystemTime;

use anyhow::Result;

use super::run_context::default_run_context;
use super::spec_file::{read_spec_text, report_spec_error, spec_context};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::render::kube;
use crate::render::kube::KubeOptions;
use crate::spec;
use crate::spec::Task;

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
    /// The options they were rendered with (`kube-run` renders the repository's parts).
    pub opts: KubeOptions,
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
            opts,
        })),
        Err(e) => {
            crate::stderrln!("error: {file}: cannot export the run: {e}");
            Ok(Err(Outcome::Findings))
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
