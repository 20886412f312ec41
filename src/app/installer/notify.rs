//! The notify parts of `cyclix install` (issue 18, item 6): the `cyclix-notify@.service`
//! template (the Debian package's when it is installed), and for each spec the run unit's drop-in `cyclix-run@TENANT.service.d/notify.conf`
//! (`OnFailure=`, and `OnSuccess=` with `notify.on_success`); a spec without `notify:` loses
//! its drop-in. A spec that does not load is left as it was (the timers' pass reports it).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use crate::context::HostEnv;
use crate::render;

/// Writes the template below `unit_dir` with `bin` as its binary (not with the Debian package
/// installed: its own template is used).
///
/// # Errors
/// I/O failures, naming the file.
pub fn install_template(unit_dir: &Path, bin: &str) -> Result<()> {
    let t = render::units::notify_template(bin).map_err(|e| anyhow::anyhow!("{e}"))?;
    let path = unit_dir.join(&t.name);
    crate::atomic::write(&path, t.contents.as_bytes())?;
    // Named as the other templates are (a newcomer's report: the plan said install writes
    // it, and no line said it had).
    crate::outln!("wrote {}", path.display());
    Ok(())
}

/// Writes the drop-ins of `specs` below `unit_dir`, removes stale drop-ins, and prints one
/// line per change.
///
/// # Errors
/// I/O failures, naming the file.
pub fn install(env: &HostEnv, unit_dir: &Path, specs: &[PathBuf]) -> Result<()> {
    for p in specs {
        let Ok(Ok(spec)) = super::super::spec_file::load_spec(p, env) else {
            continue;
        };
        let path = unit_dir.join(crate::naming::notify_dropin(&spec.tenant));
        match render::units::notify_dropin(&spec) {
            Some(d) => {
                let dir = path.parent().context("invariant: a drop-in has a parent")?;
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                crate::atomic::write(&path, d.contents.as_bytes())?;
                crate::outln!("wrote {} (notify: {})", path.display(), spec_command(&spec));
            }
            None => remove(&path)?,
        }
    }
    Ok(())
}

fn spec_command(spec: &crate::spec::Spec) -> String {
    spec.notify
        .as_ref()
        .map(|n| n.command.join(" "))
        .unwrap_or_default()
}

/// Removes a notify drop-in (and its directory when empty); nothing when absent.
///
/// # Errors
/// I/O failures other than "not found".
pub fn remove(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => {
            crate::outln!("removed {} (the spec has no `notify:`)", path.display());
            if let Some(dir) = path.parent() {
                let _ = std::fs::remove_dir(dir);
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", path.display())),
    }
}
