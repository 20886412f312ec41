//! `cyclix demo setup`: lays out the embedded demo tenant (project repository, task, spec).

use anyhow::{Context as _, Result};

use super::tenant::tenant_spec_path;
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::git::Git;

/// `cyclix demo setup`: lays out the embedded demo tenant (project repository, task, spec).
/// Idempotent: an existing project is kept.
///
/// # Errors
/// I/O or git failures.
pub fn run(env: &HostEnv) -> Result<Outcome> {
    let base = env.layout().demo_dir();
    let project = base.join("project");
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    std::fs::write(base.join("task.md"), crate::demo::TASK).context("writing the demo task")?;
    if project.join(".git").exists() {
        crate::outln!("demo project exists: {}", project.display());
    } else {
        Git::init_repo(
            &project,
            crate::demo::project_files(),
            "demo project: calc with a failing test",
        )?;
        crate::outln!("created demo project {}", project.display());
    }
    let spec = tenant_spec_path(env, "demo");
    std::fs::create_dir_all(spec.parent().context("invariant: spec path has a parent")?)?;
    if spec.exists() {
        // Never overwrite a spec the user may have edited.
        crate::outln!("demo spec exists (kept): {}", spec.display());
    } else {
        std::fs::write(&spec, crate::demo::TENANT_YAML)
            .with_context(|| format!("writing {}", spec.display()))?;
        crate::outln!("wrote {}", spec.display());
    }
    Ok(Outcome::Ok)
}
