//! Load: the run's units made from its Quadlet files and loaded with no daemon-reload
//! (issue 33: a reload costs 50-100 ms of every cold start, more under load, and is
//! serialised host-wide).
//!
//! The run's Quadlet files sit in its own directory (`RunPaths::quadlet_dir`), which no
//! generator scans. cyclix runs Podman's Quadlet generator, the one the user manager runs,
//! over that directory and then the directories the generator scans for the user (so drop-ins
//! placed there merge as they would on a reload), and installs the run's generated units into
//! the runtime unit directory. The manager loads a unit file it has not seen when it is first
//! asked for it (`LoadUnit`); only a unit that is loaded from an older file
//! (`NeedDaemonReload`, e.g. a claimed environment's file the run replaced) or that is not
//! loaded at all makes the reload run, as before. A reload by anyone else never regenerates a
//! run's units from its Quadlet files, and teardown needs none: a stopped unit whose file is
//! gone is garbage-collected by the manager.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use super::{
    BringUp, Target, install_file, loaded_as_installed, place, record_units, reload_and_confirm,
};
use crate::render::{self, Dest};
use crate::run::ledger::{Entry, Ledger};
use crate::run::seam::RunHost;
use crate::systemd::UnitManager;

/// The load phase: records the run's units in its ledger, generates the units of its Quadlet
/// files ([`generate`]; `written`: those the install wrote) and confirms every unit is loaded
/// as installed; only when one is not does the manager reload (and every unit is confirmed
/// loaded after it, B01). Returns whether it reloaded.
///
/// # Errors
/// The generator failed or made no unit of one of the run's Quadlet files, the manager cannot
/// be asked, or a unit is still not loaded after the reload.
pub(crate) fn load(
    inp: &BringUp<'_>,
    units: &(dyn UnitManager + Sync),
    host: &dyn RunHost,
    ledger: &mut Ledger,
    rendered: &render::Rendered,
    written: &[String],
) -> Result<bool> {
    let names = &rendered.units;
    record_units(ledger, names)?;
    // A claimed environment's agent container, held since its fill on the file this run
    // replaced (setup binds, an upgrade): it held nothing of a run; it goes, and the start
    // makes this run's.
    let agent_file =
        crate::naming::container_file(&crate::naming::RunNames::new(inp.run_id).agent());
    if inp.claim_wait_s.is_some() && written.contains(&agent_file) {
        tracing::debug!(
            "the claimed environment's agent file was replaced: stopping its held container"
        );
        units
            .stop(&names.agent, crate::systemd::JobMode::Replace, inp.start)
            .with_context(|| format!("stopping the held agent container {}", names.agent))?;
    }
    let quadlet: Vec<&str> = rendered
        .files
        .iter()
        .filter(|f| f.dest == Dest::Quadlet)
        .map(|f| f.name.as_str())
        .collect();
    generate(&inp.target(), host, &quadlet, written, ledger)?;
    crate::failpoint::kill_point("reload.confirm");
    load_units(units, names)
}

/// Confirms every unit of `names` is loaded as installed ([`loaded_as_installed`]: the
/// manager loads a new unit file when first asked); only when one is not does the manager
/// reload, and every unit is confirmed loaded after it ([`reload_and_confirm`]). Returns
/// whether it reloaded. Used by the load phase and the pool's fill.
///
/// # Errors
/// The manager cannot be asked, or a unit is still not loaded after the reload.
pub(crate) fn load_units(
    units: &(dyn UnitManager + Sync),
    names: &render::plan::UnitNames,
) -> Result<bool> {
    if loaded_as_installed(units, names)? {
        tracing::debug!("every unit loaded as installed: no reload");
        return Ok(false);
    }
    tracing::debug!("a unit is not loaded as installed: reloading");
    reload_and_confirm(units, names)?;
    Ok(true)
}

/// Generates the units of the Quadlet files `quadlet` (names in `t.paths.quadlet_dir`) with
/// Podman's generator ([`RunHost::generate_units`]) into a scratch directory in the run dir,
/// and installs each into the runtime unit directory, recorded for teardown. A claimed
/// environment's unit (`t.pooled`, installed by its fill, its digest checked at the claim) is
/// kept as it is unless its Quadlet file is among `written` (the run replaced it): the
/// generator's output is not byte-stable (it orders some options differently from one run to
/// the next), so a unit is never judged by comparing it with a new generation. The generator
/// is not run when every unit is kept. Returns the units installed or kept, with their
/// contents (the pool's fill notes their digests). Nothing to do without Quadlet files (the
/// plain backend).
///
/// # Errors
/// A file has no Quadlet unit name, the generator failed or made no unit of one of the files
/// (its words are in the error), a cold run's unit exists already, or I/O failures.
pub(crate) fn generate(
    t: &Target<'_>,
    host: &dyn RunHost,
    quadlet: &[&str],
    written: &[String],
    ledger: &mut Ledger,
) -> Result<Vec<(PathBuf, Vec<u8>)>> {
    let mut todo = Vec::new();
    let mut installed = Vec::new();
    for f in quadlet {
        let unit = crate::naming::unit_of_file(f)
            .filter(|u| u != f)
            .with_context(|| format!("{f} is not a Quadlet file cyclix knows the unit of"))?;
        let path = t.paths.units_dir.join(&unit);
        if t.pooled && path.exists() && !written.iter().any(|w| w == f) {
            let kept =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            ledger.record(Entry::File { path: path.clone() })?;
            installed.push((path, kept));
        } else {
            todo.push((unit, path));
        }
    }
    if todo.is_empty() {
        return Ok(installed);
    }
    let scratch = t.paths.run_dir.join("generated");
    fresh_dir(&scratch)?;
    let mut sources: Vec<&Path> = vec![t.paths.quadlet_dir.as_path()];
    sources.extend(t.paths.quadlet_user_dirs.iter().map(PathBuf::as_path));
    let admin = t.paths.run_dir.join("quadlet-admin");
    if let Some(dir) = t.paths.quadlet_admin_dir.as_deref().filter(|d| d.is_dir()) {
        fresh_dir(&admin)?;
        copy_for_every_user(dir, &admin)?;
        sources.push(&admin);
    }
    let said = host.generate_units(&sources, &scratch)?;
    for (unit, path) in todo {
        let Ok(contents) = std::fs::read(scratch.join(&unit)) else {
            bail!(
                "Quadlet's generator made no {unit} from {}{}; fix: correct the file it names \
                 (`cyclix check` checks the generator)",
                t.paths.quadlet_dir.display(),
                if said.is_empty() {
                    " (it said nothing)".to_string()
                } else {
                    format!(": it said: {said}")
                }
            );
        };
        if t.pooled && path.exists() {
            // The claimed environment's unit of a file the run replaced.
            place(t, ledger, &path, &contents, true)?;
        } else {
            install_file(ledger, &path, &contents, t.id)?;
        }
        tracing::debug!(path = %path.display(), "installed a generated unit");
        installed.push((path, contents));
    }
    for dir in [&scratch, &admin] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        }
    }
    Ok(installed)
}

/// How deep [`copy_for_every_user`] follows the admin's directory (a link loop ends here).
const ADMIN_DEPTH: usize = 8;

/// Copies the admin's Quadlet directory for every user `from` into `to`, without its
/// subdirectories named by a uid: what Podman's generator reads of it in user mode (its
/// "non-numeric filter"; podman-systemd.unit(5)). Links are followed; what is neither a file
/// nor a directory, and a directory this user cannot read, are left out (as the generator
/// skips them).
///
/// # Errors
/// A directory or a file cannot be written, or a readable file cannot be copied.
pub(crate) fn copy_for_every_user(from: &Path, to: &Path) -> Result<()> {
    copy_tree(from, to, 0)
}

/// [`copy_for_every_user`] at `depth` (0: the admin's directory itself).
fn copy_tree(from: &Path, to: &Path, depth: usize) -> Result<()> {
    if depth > ADMIN_DEPTH {
        return Ok(());
    }
    // A directory this user cannot read is one the generator cannot read either: skipped.
    let Ok(entries) = std::fs::read_dir(from) else {
        tracing::debug!(dir = %from.display(), "cannot read the directory: skipped");
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let path = entry.path();
        // `metadata` follows a link, as the generator does.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let dest = to.join(&name);
        if meta.is_dir() {
            let by_uid = name
                .to_str()
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if depth == 0 && by_uid {
                continue;
            }
            std::fs::create_dir_all(&dest)
                .with_context(|| format!("creating {}", dest.display()))?;
            copy_tree(&path, &dest, depth + 1)?;
        } else if meta.is_file() {
            std::fs::copy(&path, &dest)
                .with_context(|| format!("copying {} to {}", path.display(), dest.display()))?;
        }
    }
    Ok(())
}

/// Makes `dir` exist and empty (a scratch directory left by a killed run is removed first).
fn fresh_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}
