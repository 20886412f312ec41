//! The only place that runs podman: version, images, builds, secrets, and the inventory and
//! removal of a run's objects by label.
//!
//! Every call goes through [`crate::process`] with a deadline ([`PODMAN_QUERY_DEADLINE`],
//! [`PODMAN_REMOVE_DEADLINE`], or the caller's for [`Podman::build`]). Output that cyclix reads
//! is JSON (`--format json`, or `--format '{{json .}}'` where podman 5.4 has no JSON mode) and
//! is parsed by the pure `parse_*` functions, which are tested against output captured from
//! podman 5.4.2 (`tests/fixtures/podman/`). Errors carry the argv, podman's stderr and what
//! cyclix was doing; a podman that cannot be started gets the hint "is podman installed?".
//!
//! Secret values travel on podman's stdin (`podman secret create NAME -`), never in argv.
//!
//! Removal is idempotent: removing what is already gone is success. Facts observed on podman
//! 5.4.2 (testbed): `rm -f -i`, `pod rm -f -i`, `network rm -f` and `volume rm -f` exit 0 for
//! missing names, also mixed with existing ones; `secret rm` exits 125 with `no such secret`
//! (its `--ignore` flag is missing from podman 4.3, so cyclix matches the message instead).
//! Nothing here reads the journal.
//!
//! Files: this one ([`Podman`], its errors, version and info), `podman/output.rs` (what cyclix
//! reads and its pure parsers), and one file per concern: `containers.rs`, `networks.rs`,
//! `images.rs`, `secrets.rs`, `inventory.rs` (listing and removal by label), `quadlet.rs`
//! (Podman's Quadlet generator over a run's files); `tests.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::process::{self, ProcessError};

mod build_net;
mod containers;
mod images;
mod inventory;
mod networks;
mod output;
pub mod quadlet;
mod secrets;

pub use build_net::BuildCall;
pub use output::{
    ContainerInfo, NetworkInfo, PodInfo, PodmanInfo, VolumeInfo, parse_container_names,
    parse_containers, parse_info, parse_network_containers, parse_networks, parse_pods,
    parse_secret_names, parse_top, parse_version, parse_version_line, parse_volumes,
};

/// Deadline of a podman query or a small change (version, ps, ls, exists, secret create/rm):
/// 30 s. Podman's first call after boot migrates storage and can take seconds.
pub const PODMAN_QUERY_DEADLINE: Duration = Duration::from_secs(30);

/// Deadline of one removal call (`rm`, `pod rm`, `network rm`, `volume rm`): 60 s. Removal uses
/// `--time 0`, so no call waits for a container's stop timeout.
pub const PODMAN_REMOVE_DEADLINE: Duration = Duration::from_secs(60);

const HINT: &str = " (is podman installed and on $PATH? `cyclix check` tells)";

/// Why a podman operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PodmanError {
    /// podman failed, timed out or could not be started.
    #[error("{action}: {source}")]
    Command {
        /// What cyclix was doing, naming the object ("creating secret cyclix-r1-KEY").
        action: String,
        /// The process failure (argv, status, stderr, hint).
        #[source]
        source: ProcessError,
    },
    /// podman's output did not have the shape podman 5.4 documents and prints.
    #[error(
        "{action}: cannot read podman's output ({detail}); `cyclix check` shows the podman \
         version in use"
    )]
    Output {
        /// What cyclix was doing.
        action: String,
        /// The parse failure.
        detail: String,
    },
    /// A name podman would read as an option.
    #[error("{what} `{name}` starts with `-`: use a name that starts with a letter or digit")]
    BadName {
        /// The kind of object.
        what: &'static str,
        /// The name.
        name: String,
    },
}

/// Result of this module.
pub type Result<T> = std::result::Result<T, PodmanError>;

/// Labels as podman prints them (`null` when there are none).
pub type Labels = BTreeMap<String, String>;

fn check_name(what: &'static str, name: &str) -> Result<()> {
    if name.starts_with('-') {
        Err(PodmanError::BadName {
            what,
            name: name.to_string(),
        })
    } else {
        Ok(())
    }
}

/// The podman command-line client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Podman {
    bin: String,
}

impl Default for Podman {
    fn default() -> Self {
        Self::new()
    }
}

impl Podman {
    /// `podman` from `$PATH`.
    #[must_use]
    pub fn new() -> Self {
        Self::with_bin("podman")
    }

    /// A given podman binary (a path or a name looked up in `$PATH`).
    #[must_use]
    pub fn with_bin(bin: impl Into<String>) -> Self {
        Self { bin: bin.into() }
    }

    /// The binary this client runs.
    #[must_use]
    pub fn bin(&self) -> &str {
        &self.bin
    }

    fn run(
        &self,
        args: &[&str],
        stdin: Option<&[u8]>,
        deadline: Duration,
        action: impl Fn() -> String,
    ) -> Result<process::Output> {
        process::run(&self.bin, args, stdin, deadline, HINT).map_err(|source| {
            PodmanError::Command {
                action: action(),
                source,
            }
        })
    }

    fn query<T>(
        &self,
        args: &[&str],
        action: &str,
        parse: impl Fn(&str) -> serde_json::Result<T>,
    ) -> Result<T> {
        let out = self.run(args, None, PODMAN_QUERY_DEADLINE, || action.to_string())?;
        parse(&out.stdout).map_err(|e| PodmanError::Output {
            action: action.to_string(),
            detail: e.to_string(),
        })
    }

    /// The client version (`podman version --format json` → `Client.Version`, e.g. `"5.4.2"`).
    ///
    /// # Errors
    /// [`PodmanError::Command`] (podman missing: the hint says so), [`PodmanError::Output`].
    pub fn version(&self) -> Result<String> {
        self.query(
            &["version", "--format", "json"],
            "reading the podman version",
            parse_version,
        )
    }

    /// The version `podman --version` prints (`"5.4.2"`): the cheapest way to ask podman,
    /// about 25 ms on the testbed against 130 ms for `podman info`. `deadline` bounds it.
    ///
    /// # Errors
    /// [`PodmanError::Command`] (podman missing: the hint says so), [`PodmanError::Output`].
    pub fn version_line(&self, deadline: Duration) -> Result<String> {
        let action = "reading the podman version (podman --version)";
        let out = self.run(&["--version"], None, deadline, || action.to_string())?;
        parse_version_line(&out.stdout).ok_or_else(|| PodmanError::Output {
            action: action.to_string(),
            detail: format!(
                "expected `podman version X.Y.Z`, got {:?}",
                out.stdout.trim()
            ),
        })
    }

    /// `podman info --format json`, parsed; `deadline` bounds it (the first call after boot can
    /// migrate storage and take seconds).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn info(&self, deadline: Duration) -> Result<PodmanInfo> {
        let action = "reading podman info";
        let out = self.run(&["info", "--format", "json"], None, deadline, || {
            action.to_string()
        })?;
        parse_info(&out.stdout).map_err(|e| PodmanError::Output {
            action: action.to_string(),
            detail: e.to_string(),
        })
    }

    /// The uid map of podman's rootless user namespace (`podman unshare cat
    /// /proc/self/uid_map`): one line means podman found no sub-uid range for the user (B10).
    ///
    /// # Errors
    /// [`PodmanError::Command`] (e.g. newuidmap cannot set the map up).
    pub fn unshare_uid_map(&self, deadline: Duration) -> Result<String> {
        let out = self.run(
            &["unshare", "cat", "/proc/self/uid_map"],
            None,
            deadline,
            || "reading podman's user namespace map (podman unshare)".to_string(),
        )?;
        Ok(out.stdout)
    }

    /// Sets the group of `path` to `gid` as podman's rootless user namespace maps it
    /// (`podman unshare chgrp -- GID PATH`): a file a container's user `gid` reads through its
    /// group bits.
    ///
    /// # Errors
    /// [`PodmanError::Command`].
    pub fn unshare_chgrp(
        &self,
        gid: u32,
        path: &std::path::Path,
        deadline: Duration,
    ) -> Result<()> {
        let (g, p) = (gid.to_string(), path.display().to_string());
        self.run(&["unshare", "chgrp", "--", &g, &p], None, deadline, || {
            format!("setting the group of {p} to the containers' {g} (podman unshare chgrp)")
        })?;
        Ok(())
    }

    /// Sends `signal` (`HUP`) to container `name`'s main process (`podman kill --signal`).
    ///
    /// # Errors
    /// [`PodmanError::Command`] (no such container, not running), [`PodmanError::BadName`].
    pub fn kill_signal(&self, name: &str, signal: &str, deadline: Duration) -> Result<()> {
        check_name("container name", name)?;
        self.run(
            &["kill", "--signal", signal, "--", name],
            None,
            deadline,
            || format!("sending SIG{signal} to container {name}"),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
