//! `cyclix render ...`: the units and files of one run, printed or written below a directory
//! (nothing is installed or started).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use super::print_out;
use super::run_context::default_run_context;
use super::spec_file::{load_spec, report_spec_error, spec_context};
use crate::cli::RenderArgs;
use crate::context::{HostEnv, current_exe, path_str};
use crate::exit::Outcome;
use crate::render::{self};
use crate::spec::{self};

/// Renders one run of `args.spec` (or the embedded demo) and prints or writes its files.
///
/// # Errors
/// I/O failures; an invalid spec, run id or unrenderable value is a finding.
pub fn run(env: &HostEnv, args: &RenderArgs) -> Result<Outcome> {
    let loaded = match &args.spec {
        Some(path) => load_spec(path, env)?,
        None => spec::parse(
            crate::demo::TENANT_YAML,
            &spec_context("<embedded demo tenant.yaml>", env),
        ),
    };
    let spec = match loaded {
        Ok(s) => s,
        Err(e) => return report_spec_error(&e, false),
    };
    if let Err(m) = spec::validate::run_id(&args.run_id) {
        crate::stderrln!("error: --run-id `{}`: {m}", args.run_id);
        return Ok(Outcome::Findings);
    }
    let bin = match &args.cyclix_bin {
        Some(b) => b.clone(),
        None => path_str(&current_exe()?),
    };
    let run = default_run_context(
        &spec,
        &args.run_id,
        env,
        args.worktree.as_deref(),
        args.run_dir.as_deref(),
        args.subnet_octet,
        &bin,
    );
    let mut rendered = match render::render(&spec, &run, args.backend) {
        Ok(r) => r,
        Err(e) => {
            crate::stderrln!("error: cannot render the run: {e}");
            return Ok(Outcome::Findings);
        }
    };
    let templates = match render::units::templates(&bin) {
        Ok(t) => t,
        Err(e) => {
            crate::stderrln!("error: {e}");
            return Ok(Outcome::Findings);
        }
    };
    rendered.files.extend(templates);
    match render::units::timer_dropin(&spec) {
        Ok(Some(d)) => rendered.files.push(d),
        Ok(None) => {}
        Err(e) => {
            crate::stderrln!("error: {e}");
            return Ok(Outcome::Findings);
        }
    }
    for w in &rendered.warnings {
        tracing::warn!("{w}");
    }
    if args.stdout {
        let mut s = String::new();
        for f in &rendered.files {
            let _ = write!(
                s,
                "# ==> {}/{} <==\n{}\n",
                f.dest.dir_name(),
                f.name,
                f.contents
            );
        }
        print_out(&s)?;
    } else if let Some(out) = &args.out {
        write_tree(out, &rendered.files)?;
        crate::stderrln!(
            "wrote {} files below {}",
            rendered.files.len(),
            out.display()
        );
    }
    Ok(Outcome::Ok)
}

/// Writes rendered files below `root/<dest>/<name>`, each atomically (temp file + rename).
///
/// # Errors
/// I/O failures, naming the file.
pub fn write_tree(root: &Path, files: &[render::RenderedFile]) -> Result<()> {
    for f in files {
        let path = root.join(f.dest.dir_name()).join(&f.name);
        // Rendered files are for reading and installing: 0644, as a plain write would make them.
        crate::atomic::write_creating(&path, f.contents.as_bytes(), 0o644)?;
    }
    Ok(())
}
