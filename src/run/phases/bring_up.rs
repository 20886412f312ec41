//! Bring-up: the run's host facts for the renderer, then install (the rendered files), reload
//! (+ confirm every unit is loaded, B01) and start (the proxy, the services and the held-back
//! agent unit).

use std::path::Path;

use crate::run::seam::{RunHost, RunJournal};
#[cfg(test)]
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};

use super::super::inputs::RunPaths;
use super::super::ledger::{Entry, Ledger};
use super::super::state::now_ms;
use super::collect::log_tail;
use crate::render::{self, Dest, RunContext};
use crate::systemd::{JobMode, LoadState, UnitManager};
use crate::tier::Tier;

mod load;
pub(crate) use load::{generate, load, load_units};

/// What bring-up (the renderer's host facts, install, start) needs of the run's inputs.
pub(crate) struct BringUp<'a> {
    /// The run id.
    pub(crate) run_id: &'a str,
    /// Where the run's files go.
    pub(crate) paths: &'a RunPaths,
    /// Absolute path of the cyclix binary, mounted into the agent container.
    pub(crate) cyclix_bin: &'a Path,
    /// The run's tier (tier `container`: the agent unit starts here too).
    pub(crate) tier: Tier,
    /// The spec's services (their health checks, for a service that never became healthy).
    pub(crate) services: &'a [crate::spec::Service],
    /// The deadline of one unit start (`Deadlines::start`).
    pub(crate) start: Duration,
    /// Secret values by variable name (redacted from a failed service's log lines).
    pub(crate) secrets: &'a [(String, Vec<u8>)],
    /// The run's credential placeholders (`RunInputs::placeholders`).
    pub(crate) placeholders: &'a [String],
    /// The proxy access log's key (`RunInputs::log_key`).
    pub(crate) log_key: &'a str,
    /// The run claimed a warm environment: its files (checked at the claim) are installed
    /// already and must be exactly what this run renders.
    pub(crate) pooled: bool,
    /// `Some(the pool's max_idle)` when the claimed environment's agent container was started
    /// by its fill (`render::RunContext::claim_wait_s`).
    pub(crate) claim_wait_s: Option<u64>,
    /// gVisor's runsc for the agent and the gate (tier `gvisor`: `RunInputs::gvisor`).
    pub(crate) gvisor: Option<&'a crate::tier::runsc::OciRuntime>,
}

/// Whose files [`place`] and [`generate`] write: a run, or a pooled environment its fill makes.
pub(crate) struct Target<'a> {
    /// The run (or environment) id.
    pub(crate) id: &'a str,
    /// Where its files go.
    pub(crate) paths: &'a RunPaths,
    /// A run that claimed a warm environment: its existing files are kept or replaced.
    pub(crate) pooled: bool,
}

impl BringUp<'_> {
    /// Whose files this bring-up writes.
    pub(crate) fn target(&self) -> Target<'_> {
        Target {
            id: self.run_id,
            paths: self.paths,
            pooled: self.pooled,
        }
    }
}

/// The run's host facts for the renderer.
pub(crate) fn run_context(inp: &BringUp<'_>, octet: u8, service_ports: Vec<u16>) -> RunContext {
    RunContext {
        run_id: inp.run_id.to_string(),
        worktree: inp.paths.worktree.display().to_string(),
        run_dir: inp.paths.run_dir.display().to_string(),
        subnet_octet: octet,
        proxy_image: crate::images::PROXY_IMAGE.to_string(),
        cyclix_bin: inp.cyclix_bin.display().to_string(),
        service_ports,
        placeholders: inp.placeholders.to_vec(),
        setup_binds: Vec::new(),
        log_key: inp.log_key.to_string(),
        credentials_file: inp.pooled,
        claim_wait_s: inp.claim_wait_s,
        gvisor: inp.gvisor.cloned(),
    }
}

/// The install phase: writes the rendered files (never over an existing one; a claimed warm
/// environment's own files are kept when identical), recording each for teardown. Returns
/// the names of the Quadlet files it wrote (all of them on a cold run; on a warm one those it
/// replaced), whose units [`load`] generates anew.
pub(crate) fn install(
    inp: &BringUp<'_>,
    rendered: &render::Rendered,
    ledger: &mut Ledger,
) -> Result<Vec<String>> {
    let mut written = Vec::new();
    // The files the fill installed without starting them: the agent's, the gate's and the
    // services' it did not start (`warm::poolable`: a built image's tag gets its digest here).
    let own = crate::run::warm::replaced_by_the_run(inp.run_id, inp.services);
    for f in &rendered.files {
        let dir = match f.dest {
            Dest::Quadlet => &inp.paths.quadlet_dir,
            Dest::RuntimeUnits => &inp.paths.units_dir,
            Dest::RunDir => &inp.paths.run_dir,
            Dest::UserConfig => continue,
        };
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(&f.name);
        // A drop-in (`UNIT.d/NAME.conf`) needs its directory; it goes with its last file
        // at teardown.
        if let Some(parent) = path.parent().filter(|p| *p != dir.as_path()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        let replaceable = f.dest == Dest::Quadlet && own.contains(&f.name);
        let wrote = place(
            &inp.target(),
            ledger,
            &path,
            f.contents.as_bytes(),
            replaceable,
        )?;
        if wrote && f.dest == Dest::Quadlet {
            tracing::debug!(path = %path.display(), "installed a Quadlet file");
            written.push(f.name.clone());
        }
    }
    Ok(written)
}

/// Writes one file of the run at `path` (recorded for teardown) and says whether it wrote it.
/// A claimed environment's file (`t.pooled`, `path` exists) is kept when it holds
/// `contents`, rewritten when it is `replaceable` (one the fill installed unstarted, which this
/// run renders otherwise: setup binds, say), and refused otherwise. A cold run never writes
/// over an existing file ([`install_file`]).
///
/// # Errors
/// The claimed environment's file differs and is not replaceable, the file exists on a cold
/// run, or I/O failures.
pub(crate) fn place(
    t: &Target<'_>,
    ledger: &mut Ledger,
    path: &Path,
    contents: &[u8],
    replaceable: bool,
) -> Result<bool> {
    if !(t.pooled && path.exists()) {
        install_file(ledger, path, contents, t.id)?;
        return Ok(true);
    }
    let on_disk = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    ledger.record(Entry::File {
        path: path.to_path_buf(),
    })?;
    if on_disk == contents {
        return Ok(false);
    }
    if !replaceable {
        bail!(
            "{} of the claimed environment differs from what this run renders",
            path.display()
        );
    }
    tracing::debug!(path = %path.display(), "replacing the claimed environment's file");
    write_readable(path, contents)?;
    Ok(true)
}

/// Installs one rendered file of run (or pooled environment) `id` at `path`, which must not
/// exist: its directory made, the file recorded in `ledger` before it is written (whole,
/// [`crate::atomic`]), then mode `0644`: unit files and the proxy's config hold no secret, and
/// the proxy reads its config as its own (mapped) user (`0600` gave "Permission denied").
/// Used by the install phase and by the pool's fill.
///
/// # Errors
/// The file exists already (another run with the id is installed), or I/O failures.
pub(crate) fn install_file(
    ledger: &mut Ledger,
    path: &Path,
    contents: &[u8],
    id: &str,
) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if path.exists() {
        bail!(
            "{} exists already: another run with the id {id} is installed",
            path.display()
        );
    }
    ledger.record(Entry::File {
        path: path.to_path_buf(),
    })?;
    write_readable(path, contents)
}

/// Writes `path` whole ([`crate::atomic`]), then sets mode `0644` whatever the umask (see
/// [`install_file`]).
fn write_readable(path: &Path, contents: &[u8]) -> Result<()> {
    crate::atomic::write(path, contents)?;
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .with_context(|| format!("setting the mode of {}", path.display()))
}

/// Whether every unit of the run is loaded as its files are now, with no daemon-reload: each
/// is `loaded` (the manager loads a unit file it has not seen when it is first asked for it)
/// and none has `NeedDaemonReload` (loaded from an older file). The units are read side by
/// side ([`load`]).
///
/// # Errors
/// The manager cannot be asked.
pub(crate) fn loaded_as_installed(
    units: &(dyn UnitManager + Sync),
    names: &render::plan::UnitNames,
) -> Result<bool> {
    let current = |u: &String| -> Result<bool> {
        let (load, changed) = units.load_current(u)?;
        Ok(load == LoadState::Loaded && !changed)
    };
    std::thread::scope(|s| {
        let looks: Vec<_> = names
            .all
            .iter()
            .map(|u| s.spawn(move || current(u)))
            .collect();
        let mut all = true;
        for h in looks {
            all &= h
                .join()
                .map_err(|_| anyhow!("reading a unit's state panicked"))??;
        }
        Ok(all)
    })
}

/// Records the run's units in its ledger, before the reload loads them.
pub(crate) fn record_units(ledger: &mut Ledger, names: &render::plan::UnitNames) -> Result<()> {
    for u in &names.all {
        ledger.record(Entry::Unit { name: u.clone() })?;
    }
    Ok(())
}

/// Reload, then confirm every unit of the run is loaded (B01).
pub(crate) fn reload_and_confirm(
    units: &dyn UnitManager,
    names: &render::plan::UnitNames,
) -> Result<()> {
    units.reload()?;
    for u in &names.all {
        let state = units.load_unit(u)?;
        if state != LoadState::Loaded {
            bail!(
                "unit {u} is {state} after the reload: the manager found no valid file for \
                 it (`journalctl --user -p warning` says why; `cyclix check` checks the host)"
            );
        }
    }
    Ok(())
}

/// The start phase: the proxy (and what it pulls in) and, for tier `container`, the agent
/// unit. The agent unit starts as a job of its own next to the proxy's (systemd runs
/// independent jobs in parallel; the agent's `cyclix agent-wait` holds it until the probes
/// pass): about 200 ms of bring-up on the testbed (bench/run, issue 7). Returns when the
/// agent unit's start job finished (ms since the Unix epoch; `None` for the host tiers).
pub(crate) fn start_units(
    inp: &BringUp<'_>,
    units: &(dyn UnitManager + Sync),
    host: &dyn RunHost,
    names: &render::plan::UnitNames,
) -> Result<Option<u128>> {
    let container = inp.tier.is_sandboxed();
    std::thread::scope(|s| {
        let agent =
            container.then(|| s.spawn(|| units.start(&names.agent, JobMode::Replace, inp.start)));
        let mut infra: Result<()> = Ok(());
        for u in &names.infra {
            let service = names.services.iter().find(|s| &s.unit == u);
            // A service's start job lasts until its health check passed: wait as long as its
            // unit's own TimeoutStartSec= (plus slack), so systemd's verdict comes first.
            let deadline = service.map_or(inp.start, |s| {
                inp.start.max(Duration::from_secs(s.start_timeout_s + 15))
            });
            if let Err(e) = units.start(u, JobMode::Replace, deadline) {
                infra = Err(match service {
                    Some(svc) => service_failed(inp, svc, host, &e.into()),
                    None => e.into(),
                });
                break;
            }
        }
        let mut ready = None;
        if let Some(h) = agent {
            h.join()
                .map_err(|_| anyhow!("starting {} panicked", names.agent))??;
            if inp.claim_wait_s.is_some() {
                // Held since the fill (or just made): its wait for the go begins now.
                wake_held(&inp.paths.run_dir, inp.start)?;
            }
            ready = Some(now_ms());
        }
        infra?;
        Ok(ready)
    })
}

/// Wakes the claimed environment's agent container (`run::claim_fifo::wake`) in run dir
/// `run_dir`, trying again until `deadline` while its agent-wait has not reached the claim
/// FIFO yet (a container the run just made).
///
/// # Errors
/// agent-wait did not wait on the FIFO within `deadline`, or the FIFO is unusable.
fn wake_held(run_dir: &Path, deadline: Duration) -> Result<()> {
    let fifo = run_dir
        .join(render::plan::CTL_DIR)
        .join(render::plan::CLAIM_FILE);
    let end = std::time::Instant::now() + deadline;
    loop {
        match crate::run::claim_fifo::wake(&fifo) {
            Ok(()) => return Ok(()),
            Err(e) if std::time::Instant::now() >= end => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// The error of a service whose start job failed: the service, what it was waiting for, the
/// last lines it printed, and the fix.
pub(crate) fn service_failed(
    inp: &BringUp<'_>,
    svc: &render::plan::ServicePlan,
    host: &dyn RunJournal,
    cause: &anyhow::Error,
) -> anyhow::Error {
    use std::fmt::Write as _;
    let health = inp
        .services
        .iter()
        .find(|s| s.name == svc.name)
        .and_then(|s| s.health.as_ref());
    let mut msg = match health {
        Some(h) => format!(
            "service `{}` ({}) never became healthy: its health check `{}` did not pass \
             (every {} s, timeout {} s, {} retries, start period {} s: at most {} s)",
            svc.name,
            svc.unit,
            shell_words(svc.health.as_deref().unwrap_or_default()),
            h.interval_s,
            h.timeout_s,
            h.retries,
            h.start_period_s,
            h.budget_s()
        ),
        None => format!("service `{}` ({}) did not start", svc.name, svc.unit),
    };
    let _ = write!(msg, " [{cause:#}]");
    if let Ok(journal) = host.unit_journal(&svc.unit) {
        let secrets: Vec<&[u8]> = inp.secrets.iter().map(|(_, v)| v.as_slice()).collect();
        let tail = log_tail(&journal, &secrets);
        let tail: Vec<&String> = tail.iter().rev().take(5).rev().collect();
        if !tail.is_empty() {
            msg.push_str("; it printed: ");
            msg.push_str(
                &tail
                    .iter()
                    .map(|l| l.as_str())
                    .collect::<Vec<_>>()
                    .join(" | "),
            );
        }
    }
    let _ = write!(
        msg,
        "; fix: see `journalctl --user -u {}`; check `{}.image` and `{}.command`{}",
        svc.unit,
        svc.key,
        svc.key,
        if health.is_some() {
            format!(
                ", that `{k}.health.command` passes once the service is up (it runs inside the service container, with PGPORT/CYCLIX_PORT set), or raise `{k}.health.retries`",
                k = svc.key
            )
        } else {
            String::new()
        }
    );
    anyhow!(msg)
}

/// An argv for people, as a shell would take it: plain words as they are, others in single
/// quotes.
pub(crate) fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./:=@%+-,".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests;
