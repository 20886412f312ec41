//! The credential file of a warm environment's proxy (issue 16). A cold run hands squid its
//! credential header lines as a podman secret, fixed when the proxy container is created; a
//! pooled proxy is created by the fill, before any credential exists, so it bind-mounts
//! [`PROXY_CREDENTIALS_FILE`] from the environment's run dir (in `$XDG_RUNTIME_DIR`, a tmpfs)
//! read-only at the include path instead (`render::RunContext::credentials_file`).
//!
//! The fill makes the file **empty** (no secret in anything pooled), mode 0640, its group the
//! host gid that squid's group (`proxy`, 13) maps to, so squid reads it and no other host user
//! does. The claim's check refuses a file that is not exactly that (`wrong`). The run that
//! claims the environment writes the lines ([`crate::render::proxy::credentials::include_file`]
//! through `run::phases::prepare::credential_include`, the cold path's one rendering) into
//! it, then reloads squid (`SIGHUP`) and waits until squid has reopened every port after
//! re-reading its configuration, before anything of the run (its probes included) uses the
//! proxy. The values travel from the tenant's env file to this file only: never in argv, a
//! unit file, a log or a record.

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

use crate::podman::Podman;
use crate::render::proxy::credentials::PROXY_UID;

pub use crate::render::plan::PROXY_CREDENTIALS_FILE;

/// The mode of the credential file: the user writes it, squid's group reads it.
pub const MODE: u32 = 0o640;

/// How long a claim waits for squid to reload its credentials.
pub const RELOAD_DEADLINE: Duration = Duration::from_secs(15);

/// What squid prints (to its cache log, the unit's journal) for each port it listens on,
/// at start and again after each reconfiguration (`Accepting [SSL bumped |reverse-proxy ]HTTP
/// Socket connections at …`, squid 6.13): the line starts with [`ACCEPTING`] and holds this.
pub const SOCKET: &str = "HTTP Socket connections at";

/// The word squid's port line starts with (after its timestamp).
pub const ACCEPTING: &str = "| Accepting ";

/// Makes the empty credential file `path` (at fill): mode [`MODE`], group squid's
/// ([`PROXY_UID`] inside the containers' user namespace).
///
/// # Errors
/// `path` exists already, or it cannot be made or its group set.
pub fn make(path: &Path, podman: &Podman) -> Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(MODE)
        .open(path)
        .with_context(|| format!("creating the proxy's credential file {}", path.display()))?;
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(MODE))
        .with_context(|| format!("setting the mode of {}", path.display()))?;
    podman.unshare_chgrp(PROXY_UID, path, crate::podman::PODMAN_QUERY_DEADLINE)?;
    Ok(())
}

/// What is wrong with credential file `path` compared with what a fill makes (a regular
/// file of `uid`, mode [`MODE`], empty), or `None`.
#[must_use]
pub fn wrong(path: &Path, uid: u32) -> Option<String> {
    let p = path.display();
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => {
            return Some(format!(
                "the proxy's credential file {p} cannot be read ({e})"
            ));
        }
    };
    if !m.file_type().is_file() {
        return Some(format!(
            "the proxy's credential file {p} is not a regular file"
        ));
    }
    if m.uid() != uid || m.mode() & 0o7777 != MODE {
        return Some(format!(
            "the proxy's credential file {p} has owner {} and mode {:o}, the fill left {uid} and {MODE:o}",
            m.uid(),
            m.mode() & 0o7777
        ));
    }
    (m.len() != 0).then(|| {
        format!(
            "the proxy's credential file {p} holds {} bytes, the fill left it empty",
            m.len()
        )
    })
}

/// Whether squid reloaded: `lines` (its unit's journal now) hold at least `ports` more
/// [`ACCEPTING`] lines than the `before` it held when the reload was asked for. Pure.
#[must_use]
pub fn reloaded(lines: &[String], before: usize, ports: usize) -> bool {
    accepting(lines) >= before.saturating_add(ports)
}

/// How many [`ACCEPTING`] lines `lines` hold.
#[must_use]
pub fn accepting(lines: &[String]) -> usize {
    lines
        .iter()
        .filter(|l| l.contains(ACCEPTING) && l.contains(SOCKET))
        .count()
}

/// What the claim hands the proxy of environment `env`: the credential lines into `path`.
pub struct HandOver<'a> {
    /// The environment (run) id.
    pub env: &'a str,
    /// The credential file (`Filled::credentials_file`).
    pub path: &'a Path,
    /// The include file's text (`run::phases::prepare::credential_include`).
    pub include: &'a str,
    /// How many ports squid listens on (the forward port and one per credential).
    pub ports: usize,
}

impl HandOver<'_> {
    /// Writes the lines into the file (never creating it: the fill made it), sends squid
    /// `SIGHUP` and waits (at most [`RELOAD_DEADLINE`]) until its journal shows every port
    /// reopened.
    ///
    /// # Errors
    /// The file cannot be written, the signal not sent, or squid did not reload in time.
    pub fn run(&self, podman: &Podman) -> Result<()> {
        let n = crate::naming::RunNames::new(self.env);
        let (container, unit) = (n.proxy(), crate::naming::container_unit(&n.proxy()));
        let before = accepting(&crate::journal::unit_messages(&unit)?);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(self.path)
            .with_context(|| {
                format!(
                    "opening the proxy's credential file {}",
                    self.path.display()
                )
            })?;
        f.write_all(self.include.as_bytes())
            .and_then(|()| f.sync_all())
            .with_context(|| {
                format!(
                    "writing the proxy's credential file {}",
                    self.path.display()
                )
            })?;
        drop(f);
        podman.kill_signal(&container, "HUP", crate::podman::PODMAN_QUERY_DEADLINE)?;
        let start = Instant::now();
        loop {
            let lines = crate::journal::unit_messages(&unit)?;
            if reloaded(&lines, before, self.ports) {
                return Ok(());
            }
            if start.elapsed() >= RELOAD_DEADLINE {
                bail!(
                    "the proxy {container} did not reload its credentials within {} s (its journal: `journalctl --user -u {unit}`); fix: see why squid did not reconfigure",
                    RELOAD_DEADLINE.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(40));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reloaded_only_once_every_port_reopened() {
        let l = |n: usize| -> Vec<String> {
            (0..n)
                .map(|i| format!("2026/12/02 13:22:16| Accepting reverse-proxy HTTP Socket connections at conn{i} local=[::]:3129"))
                .chain(std::iter::once("Reconfiguring Squid Cache".to_string()))
                .collect()
        };
        assert!(!reloaded(&l(2), 2, 2));
        assert!(!reloaded(&l(3), 2, 2));
        assert!(reloaded(&l(4), 2, 2));
        assert_eq!(accepting(&l(5)), 5);
    }

    #[test]
    fn a_file_not_as_the_fill_left_it_is_wrong_and_one_as_left_is_not() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join(PROXY_CREDENTIALS_FILE);
        let uid = std::fs::metadata(d.path()).expect("meta").uid();
        assert!(wrong(&p, uid).is_some_and(|w| w.contains("cannot be read")));
        std::fs::write(&p, b"").expect("write");
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(MODE))
            .expect("mode");
        assert_eq!(
            wrong(&p, uid),
            None,
            "positive control: as the fill makes it"
        );
        std::fs::write(&p, b"request_header_add x-api-key \"k\" cred0_port\n").expect("write");
        assert!(wrong(&p, uid).is_some_and(|w| w.contains("the fill left it empty")));
        std::fs::write(&p, b"").expect("write");
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .expect("mode");
        assert!(wrong(&p, uid).is_some_and(|w| w.contains("mode 644")));
        std::fs::remove_file(&p).expect("rm");
        std::os::unix::fs::symlink("/etc/hostname", &p).expect("symlink");
        assert!(wrong(&p, uid).is_some_and(|w| w.contains("not a regular file")));
    }
}
