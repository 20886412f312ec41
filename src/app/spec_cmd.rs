//! `cyclix spec validate FILE [--json]`: loads and validates a spec, and proves both backends
//! can carry it.

use std::path::Path;

use anyhow::Result;

use super::print_out;
use super::render_cmd::default_run_context;
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
