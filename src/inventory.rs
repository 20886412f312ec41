//! A typed leftover: something of a run that exists on the host (or that a run left behind),
//! shared by the audit (`run::phases::audit`), convergence (`run::converge`) and
//! `cyclix leftovers`. Pure.
//!
//! Its [`Display`](std::fmt::Display) is the text the run record's `leftovers` hold (e.g.
//! `container cyclix-RUN-agent (exited)`, `unit X still active (running)`, `file PATH`,
//! `run dir PATH`); [`Kind::token`] is the `kind` of `cyclix leftovers` (JSON schema
//! `cyclix-leftovers/1`).

use std::fmt;

use serde::Serialize;

/// What a leftover is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A podman container (detail: its state).
    Container,
    /// A podman pod.
    Pod,
    /// A podman network.
    Network,
    /// A podman volume.
    Volume,
    /// A podman secret (`cyclix-RUN-VAR`).
    Secret,
    /// A systemd unit still loaded after teardown (detail: its state).
    Unit,
    /// A rendered Quadlet or unit file.
    UnitFile,
    /// A process named after the run (conmon, the escape sentinel, B11): `PID (COMM): CMDLINE`.
    Process,
    /// A cgroup named after one of the run's units: `PATH (N processes)`.
    Cgroup,
    /// The run's work tree (or, for `cyclix leftovers`, its gate's tree).
    Worktree,
    /// The gate's clean checkout beside the work tree (the audit).
    GateTree,
    /// The run's state directory.
    RunDir,
    /// A subnet reservation file.
    SubnetReservation,
    /// A port reservation file.
    PortReservation,
    /// A planted tripwire file in the user's home.
    Tripwire,
    /// A run's ledger (`RUN.running`).
    Marker,
    /// Anything else the audit found, as a sentence (a half-done merge, a moved ref, a failed
    /// listing): the name is the whole text.
    Finding,
}

impl Kind {
    /// The `kind` of `cyclix leftovers` (`container`, `unit-file`, `run-dir`, …).
    #[must_use]
    pub fn token(self) -> &'static str {
        match self {
            Kind::Container => "container",
            Kind::Pod => "pod",
            Kind::Network => "network",
            Kind::Volume => "volume",
            Kind::Secret => "secret",
            Kind::Unit => "unit",
            Kind::UnitFile => "unit-file",
            Kind::Process => "process",
            Kind::Cgroup => "cgroup",
            Kind::Worktree => "worktree",
            Kind::GateTree => "gate-tree",
            Kind::RunDir => "run-dir",
            Kind::SubnetReservation => "subnet-reservation",
            Kind::PortReservation => "port-reservation",
            Kind::Tripwire => "tripwire",
            Kind::Marker => "marker",
            Kind::Finding => "finding",
        }
    }

    /// The words a record's leftover text starts with (`file`, `run dir`, `gate tree`, …);
    /// `None` for a [`Kind::Finding`] (its name is the whole text).
    fn words(self) -> Option<&'static str> {
        Some(match self {
            Kind::UnitFile => "file",
            Kind::GateTree => "gate tree",
            Kind::RunDir => "run dir",
            Kind::SubnetReservation => "subnet reservation",
            Kind::PortReservation => "port reservation",
            Kind::Finding => return None,
            k => k.token(),
        })
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.token())
    }
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.token())
    }
}

/// One thing of a run left on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Leftover {
    /// What it is.
    pub kind: Kind,
    /// Its name or path (for a [`Kind::Finding`], the whole sentence).
    pub name: String,
    /// The run id it belongs to, when it can be told.
    pub run: Option<String>,
    /// What state it is in, for the record's text (a container's `exited`, a unit's
    /// `active (running)`); not part of `cyclix leftovers`' JSON.
    #[serde(skip)]
    pub detail: Option<String>,
}

impl Leftover {
    /// A leftover of `kind` named `name`, of run `run` if known.
    #[must_use]
    pub fn new(kind: Kind, name: impl Into<String>, run: Option<&str>) -> Self {
        Leftover {
            kind,
            name: name.into(),
            run: run.map(str::to_string),
            detail: None,
        }
    }

    /// A finding told as a sentence (`text` is printed as it is).
    #[must_use]
    pub fn finding(text: impl Into<String>) -> Self {
        Leftover::new(Kind::Finding, text, None)
    }

    /// With `detail` (see [`Leftover::detail`]).
    #[must_use]
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}

impl fmt::Display for Leftover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(words) = self.kind.words() else {
            return f.write_str(&self.name);
        };
        write!(f, "{words} {}", self.name)?;
        match (&self.detail, self.kind) {
            (Some(d), Kind::Unit) => write!(f, " still {d}"),
            (Some(d), _) => write!(f, " ({d})"),
            (None, _) => Ok(()),
        }
    }
}

/// The record's texts of `left`, in order.
#[must_use]
pub fn texts(left: &[Leftover]) -> Vec<String> {
    left.iter().map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_read_as_the_records_always_said() {
        let run = Some("r1");
        for (l, text) in [
            (
                Leftover::new(Kind::Container, "cyclix-r1-agent", run).with_detail("exited"),
                "container cyclix-r1-agent (exited)",
            ),
            (Leftover::new(Kind::Pod, "cyclix-r1", run), "pod cyclix-r1"),
            (
                Leftover::new(Kind::Secret, "cyclix-r1-K", run),
                "secret cyclix-r1-K",
            ),
            (
                Leftover::new(Kind::Unit, "cyclix-r1-agent.service", run)
                    .with_detail("active (running)"),
                "unit cyclix-r1-agent.service still active (running)",
            ),
            (
                Leftover::new(Kind::UnitFile, "/q/x.pod", run),
                "file /q/x.pod",
            ),
            (
                Leftover::new(Kind::Worktree, "/w/r1", run),
                "worktree /w/r1",
            ),
            (
                Leftover::new(Kind::GateTree, "/w/r1.gate", run),
                "gate tree /w/r1.gate",
            ),
            (Leftover::new(Kind::RunDir, "/d/r1", run), "run dir /d/r1"),
            (
                Leftover::new(Kind::Process, "7 (conmon): conmon -n cyclix-r1-agent", run),
                "process 7 (conmon): conmon -n cyclix-r1-agent",
            ),
            (
                Leftover::new(Kind::Cgroup, "/sys/fs/cgroup/x (2 processes)", run),
                "cgroup /sys/fs/cgroup/x (2 processes)",
            ),
            (
                Leftover::finding("inventory failed: boom"),
                "inventory failed: boom",
            ),
        ] {
            assert_eq!(l.to_string(), text);
        }
        assert_eq!(Kind::UnitFile.token(), "unit-file");
        assert_eq!(Kind::SubnetReservation.to_string(), "subnet-reservation");
    }

    #[test]
    fn the_json_names_kind_name_and_run_only() {
        let l = Leftover::new(Kind::RunDir, "/d/r1", Some("r1")).with_detail("x");
        assert_eq!(
            serde_json::to_value(&l).expect("json"),
            serde_json::json!({"kind": "run-dir", "name": "/d/r1", "run": "r1"})
        );
    }
}
