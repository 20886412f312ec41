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
//! re-reading its configuration (its `Reconfiguring` line, then its port lines), before
//! anything of the run (its probes included) uses the proxy. The values travel from the
//! tenant's env file to this file only: never in argv, a unit file, a log or a record.

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
/// Socket connections at …`, squid 6.13): the message starts with [`ACCEPTING`] and holds this.
pub const SOCKET: &str = "HTTP Socket connections at";

/// The word squid's port message starts with.
pub const ACCEPTING: &str = "Accepting ";

/// What squid's message starts with when a `SIGHUP` makes it re-read its configuration
/// (`Reconfiguring Squid Cache (version 6.13)...`), before it closes and reopens its ports.
pub const RECONFIGURING: &str = "Reconfiguring Squid Cache";

/// Makes the empty credential file `path` (at fill): mode [`MODE`], group squid's
/// ([`PROXY_UID`] inside the containers' user namespace). Returns that group's host gid (the
/// claim's check compares the file against it).
///
/// # Errors
/// `path` exists already, or it cannot be made or its group set.
pub fn make(path: &Path, podman: &Podman) -> Result<u32> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(MODE)
        .open(path)
        .with_context(|| format!("creating the proxy's credential file {}", path.display()))?;
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(MODE))
        .with_context(|| format!("setting the mode of {}", path.display()))?;
    podman.unshare_chgrp(PROXY_UID, path, crate::podman::PODMAN_QUERY_DEADLINE)?;
    let m = std::fs::symlink_metadata(path)
        .with_context(|| format!("reading the group of {}", path.display()))?;
    Ok(m.gid())
}

/// What is wrong with credential file `path` compared with what a fill makes (a regular
/// file of `uid` and group `gid` with one name, mode [`MODE`], empty), or `None`.
#[must_use]
pub fn wrong(path: &Path, uid: u32, gid: u32) -> Option<String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => wrong_meta(path, &m, uid, gid),
        Err(e) => Some(format!(
            "the proxy's credential file {} cannot be read ({e})",
            path.display()
        )),
    }
}

/// [`wrong`] of the file `path` whose metadata (not following a symlink) is `m`. A second
/// name (a hard link) would keep the key after the run dir is gone; another group would
/// let that group's users read it.
fn wrong_meta(path: &Path, m: &std::fs::Metadata, uid: u32, gid: u32) -> Option<String> {
    let p = path.display();
    if !m.file_type().is_file() {
        return Some(format!(
            "the proxy's credential file {p} is not a regular file"
        ));
    }
    if m.nlink() != 1 {
        return Some(format!(
            "the proxy's credential file {p} has {} names (hard links), the fill left one",
            m.nlink()
        ));
    }
    if m.uid() != uid || m.gid() != gid || m.mode() & 0o7777 != MODE {
        return Some(format!(
            "the proxy's credential file {p} has owner {}, group {} and mode {:o}, the fill left {uid}, {gid} and {MODE:o}",
            m.uid(),
            m.gid(),
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

/// Whether squid reloaded: after the first `before` of `lines` (its unit's journal now;
/// `before` lines it held when the reload was asked for), squid said [`RECONFIGURING`] and
/// then reopened `ports` ports. Port lines without a reconfiguration before them (a late
/// start's, a restarted squid's) do not count. Pure.
#[must_use]
pub fn reloaded(lines: &[String], before: usize, ports: usize) -> bool {
    let after = lines.get(before..).unwrap_or_default();
    after
        .iter()
        .position(|l| cache_log_message(l).is_some_and(|m| m.starts_with(RECONFIGURING)))
        .is_some_and(|at| accepting(&after[at..]) >= ports)
}

/// How many of `lines` are squid's port messages ([`ACCEPTING`] … [`SOCKET`]).
#[must_use]
pub fn accepting(lines: &[String]) -> usize {
    lines
        .iter()
        .filter_map(|l| cache_log_message(l))
        .filter(|m| m.starts_with(ACCEPTING) && m.contains(SOCKET))
        .count()
}

/// The message of a line squid wrote to its cache log (`YYYY/MM/DD HH:MM:SS| MESSAGE`), or
/// `None` for any other line (an access-log line, whose URL the agent writes; a continuation
/// line). Pure.
fn cache_log_message(line: &str) -> Option<&str> {
    let (stamp, rest) = line.split_at_checked(19)?;
    let stamped = stamp.bytes().enumerate().all(|(i, b)| match i {
        4 | 7 => b == b'/',
        10 => b == b' ',
        13 | 16 => b == b':',
        _ => b.is_ascii_digit(),
    });
    rest.strip_prefix("| ").filter(|_| stamped)
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
    /// The file's owner (the user) and group (squid's, `Filled::credentials_gid`).
    pub owner: (u32, u32),
}

impl HandOver<'_> {
    /// Writes the lines into the file (never creating it: the fill made it; never through a
    /// symlink, a FIFO or a file that is not as the fill left it, judged on the opened file,
    /// so a swap after the claim's check gets no key), sends squid `SIGHUP` and waits (at
    /// most [`RELOAD_DEADLINE`]) until its journal shows squid reconfigured and every port
    /// reopened ([`reloaded`]).
    ///
    /// # Errors
    /// The file cannot be written or is not as the fill left it, the signal not sent, or
    /// squid did not reload in time.
    pub fn run(&self, podman: &Podman) -> Result<()> {
        let n = crate::naming::RunNames::new(self.env);
        let (container, unit) = (n.proxy(), crate::naming::container_unit(&n.proxy()));
        let before = crate::journal::unit_messages(&unit)?.len();
        write_include(self.path, self.include, self.owner)?;
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

/// Writes `include` into the credential file `path` as the fill left it (owner `owner`,
/// [`wrong_meta`] judged on the opened file): never through a symlink (`O_NOFOLLOW`), never
/// blocking on a FIFO (`O_NONBLOCK`), never creating it.
///
/// # Errors
/// The file cannot be opened or written, or it is not as the fill left it.
fn write_include(path: &Path, include: &str, owner: (u32, u32)) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("opening the proxy's credential file {}", path.display()))?;
    let m = f
        .metadata()
        .with_context(|| format!("reading the proxy's credential file {}", path.display()))?;
    if let Some(w) = wrong_meta(path, &m, owner.0, owner.1) {
        bail!("{w}: no credential is written into it");
    }
    f.write_all(include.as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing the proxy's credential file {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_go_only_into_the_file_the_fill_left() {
        let d = tempfile::tempdir().expect("tmp");
        let meta = std::fs::metadata(d.path()).expect("meta");
        let owner = (meta.uid(), meta.gid());
        let p = d.path().join(PROXY_CREDENTIALS_FILE);
        let made = || {
            std::fs::write(&p, b"").expect("write");
            std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(MODE))
                .expect("mode");
        };
        let lines = "request_header_add x-api-key \"k\" cred0_port\n";
        // A second name: refused, nothing written through either.
        made();
        let link = d.path().join("second-name");
        std::fs::hard_link(&p, &link).expect("link");
        let e = write_include(&p, lines, owner).expect_err("a hard link");
        assert!(format!("{e:#}").contains("2 names"), "{e:#}");
        assert_eq!(std::fs::read(&link).expect("read"), b"");
        std::fs::remove_file(&link).expect("rm");
        // A symlink to a file as the fill makes one: not followed.
        std::fs::rename(&p, &link).expect("mv");
        std::os::unix::fs::symlink(&link, &p).expect("symlink");
        assert!(write_include(&p, lines, owner).is_err(), "a symlink");
        assert_eq!(std::fs::read(&link).expect("read"), b"");
        std::fs::remove_file(&p).expect("rm");
        // A FIFO: refused at once, not waited on.
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(MODE)).expect("fifo");
        assert!(write_include(&p, lines, owner).is_err(), "a FIFO");
        std::fs::remove_file(&p).expect("rm");
        // Positive control: the file as the fill left it takes the lines.
        made();
        write_include(&p, lines, owner).expect("as the fill left it");
        assert_eq!(std::fs::read_to_string(&p).expect("read"), lines);
    }

    #[test]
    fn reloaded_only_once_every_port_reopened_after_a_reconfiguration() {
        let port = |i: usize| {
            format!(
                "2026/12/02 13:22:16| Accepting reverse-proxy HTTP Socket connections at conn{i} local=[::]:3129"
            )
        };
        let start: Vec<String> = vec![port(1), "    listening port: 3128".into(), port(2)];
        let hup = "2026/12/02 13:22:17| Reconfiguring Squid Cache (version 6.13)...".to_string();
        let with =
            |extra: &[String]| -> Vec<String> { start.iter().chain(extra).cloned().collect() };
        assert_eq!(accepting(&start), 2);
        // The start's lines, arriving late, are no reload.
        assert!(!reloaded(&start, 0, 2));
        assert!(!reloaded(&with(&[port(3), port(4)]), 3, 2));
        // Nor are port lines an access-log line or another text carries.
        let forged = format!(r#"{{"key":"k","url":"http://x/{hup}"}}"#);
        let agent = format!("x{}", port(5));
        assert!(!reloaded(&with(&[forged, port(5), agent, port(6)]), 3, 2));
        // A reconfiguration before the ask is not this one.
        assert!(!reloaded(&with(&[hup.clone(), port(3), port(4)]), 4, 2));
        assert!(!reloaded(&with(&[hup.clone(), port(3)]), 3, 2));
        assert!(reloaded(&with(&[hup.clone(), port(3), port(4)]), 3, 2));
        // The journal shorter than before (rotated): not reloaded, the deadline decides.
        assert!(!reloaded(&start, 9, 2));
    }

    #[test]
    fn a_file_not_as_the_fill_left_it_is_wrong_and_one_as_left_is_not() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join(PROXY_CREDENTIALS_FILE);
        let meta = std::fs::metadata(d.path()).expect("meta");
        let (uid, gid) = (meta.uid(), meta.gid());
        let wrong = |p: &Path, uid: u32| wrong(p, uid, gid);
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
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(MODE))
            .expect("mode");
        assert!(
            super::wrong(&p, uid, gid.wrapping_add(1)).is_some_and(|w| w.contains("group")),
            "another group"
        );
        let link = d.path().join("second-name");
        std::fs::hard_link(&p, &link).expect("link");
        assert!(wrong(&p, uid).is_some_and(|w| w.contains("2 names")));
        std::fs::remove_file(&link).expect("rm");
        assert_eq!(wrong(&p, uid), None, "one name again");
        std::fs::remove_file(&p).expect("rm");
        std::os::unix::fs::symlink("/etc/hostname", &p).expect("symlink");
        assert!(wrong(&p, uid).is_some_and(|w| w.contains("not a regular file")));
    }
}
