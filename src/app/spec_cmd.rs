//! `cyclix spec validate FILE [--json]`: loads and validates a spec, and proves both backends
//! can carry it.

use std::path::Path;

use anyhow::Result;

use super::print_out;
use super::run_context::default_run_context;
use super::spec_file::{load_spec_with_notes, report_spec_error};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::render::{self, Backend};
use crate::spec::SpecError;

/// Validates `file`: prints its shallow-walk notes, then its diagnostics (a finding) or
/// `FILE: ok (...)` (or the validated spec as JSON).
///
/// # Errors
/// I/O failures (an unreadable file, stdout closed).
pub fn run(env: &HostEnv, file: &Path, json: bool) -> Result<Outcome> {
    let (loaded, notes) = load_spec_with_notes(file, env)?;
    for note in notes {
        crate::stderrln!("{}: note: {note}", file.display());
    }
    let spec = match loaded {
        Ok(s) => s,
        Err(e) => return report_spec_error(&e, json),
    };
    // In the tenants directory the file name is the tenant, as `run` and `check` read it.
    let in_tenants = file
        .parent()
        .and_then(|d| std::fs::canonicalize(d).ok())
        .is_some_and(|d| std::fs::canonicalize(env.layout().tenants_dir()).ok() == Some(d));
    let stem = file.file_stem().map(|s| s.to_string_lossy().into_owned());
    if in_tenants && stem.as_deref() != Some(spec.tenant.as_str()) {
        let err = SpecError::single(
            &file.display().to_string(),
            format!(
                "the spec names tenant `{}`, but its file is {}.yaml: `cyclix run` and `cyclix check` would refuse it",
                spec.tenant,
                stem.unwrap_or_default()
            ),
            format!(
                "rename the file to {}.yaml, or set `tenant:` to the file's name",
                spec.tenant
            ),
        );
        return report_spec_error(&err, json);
    }
    // Elsewhere the file is a draft: say where it must go, so the copy is not refused later.
    if !in_tenants && stem.as_deref() != Some(spec.tenant.as_str()) {
        crate::stderrln!(
            "{}: note: the spec names tenant `{}`: installed, it must be {}/{}.yaml (the tenants directory reads the tenant from the file name and refuses a mismatch; `--spec FILE` takes any name)",
            file.display(),
            spec.tenant,
            env.layout().tenants_dir().display(),
            spec.tenant
        );
    }
    if let Ok(text) = std::fs::read_to_string(file) {
        for change in crate::spec::host_changes(&text) {
            crate::stderrln!("{}:{change}", file.display());
        }
    }
    // A spec is only valid if both backends can carry it (Quadlet refuses some argv words).
    let run = default_run_context(
        &spec,
        "validate",
        env,
        None,
        None,
        None,
        "/usr/local/bin/cyclix",
    );
    for backend in [Backend::Quadlet, Backend::Plain] {
        if let Err(e) = render::render(&spec, &run, backend) {
            let err = SpecError::single(
                &file.display().to_string(),
                format!("{e} (while rendering for the {backend:?} backend)"),
                "change the value so the unit can carry it",
            );
            return report_spec_error(&err, json);
        }
    }
    if json {
        print_out(&format!("{}\n", serde_json::to_string_pretty(&spec)?))?;
    } else {
        print_out(&format!(
            "{}: ok (tenant {}, tier {})\n",
            file.display(),
            spec.tenant,
            spec.tier
        ))?;
    }
    Ok(Outcome::Ok)
}
