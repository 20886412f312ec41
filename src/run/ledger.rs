//! The ledger of one run: everything it created (or was about to create), on disk as it grows,
//! so that teardown, the convergence of a run whose cyclix died (security-cases §3, "SIGKILL
//! of toolkit mid-teardown") and `cyclix leftovers` all read the same list.
//!
//! On disk it is `RUN.running` beside the run's record ([`crate::layout::RunFiles::marker`]):
//! present while the run lives, removed once its record is written. Format: JSON lines, one
//! [`Entry`] per line, the first a [`Entry::Run`] (who, since when, which repository).
//!
//! Why append-only lines, not an atomic rewrite: an append is one `write(2)` of one short
//! line, so a SIGKILL leaves either the whole line or none (the reader also skips a torn last
//! line, as a power loss could leave one); a rewrite would copy the whole list at each of a
//! run's few dozen entries and needs a rename per entry. Every append is flushed to disk
//! (`fdatasync`) BEFORE the thing it names is created, and a fail point `ledger.KIND` follows
//! it ([`crate::failpoint`]): whatever instant cyclix dies at, the ledger names everything
//! that might exist (an entry whose thing never came into being costs only an idempotent
//! removal). A ledger in memory only ([`Ledger::in_memory`]) serves the twin's sides.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use crate::layout::RunFiles;

/// One thing a run created, as its ledger names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Entry {
    /// The first line: whose run this is.
    Run {
        /// Tenant.
        tenant: String,
        /// Run id.
        run_id: String,
        /// The cyclix process that runs it.
        pid: u32,
        /// Start, in ms since the Unix epoch (`u64`: serde's tagged enums carry no `u128`).
        started_ms: u64,
        /// The user's repository.
        repo: PathBuf,
    },
    /// The run's state directory (`$XDG_RUNTIME_DIR/cyclix/runs/RUN`).
    RunDir {
        /// Its path.
        path: PathBuf,
    },
    /// Reservation files of this run may be in `dir` (`…/cyclix/{subnets,ports}`); each
    /// holds the run id ([`super::reserve`]).
    Reservations {
        /// The reservations directory.
        dir: PathBuf,
    },
    /// A tripwire file in the user's home ([`super::tripwire::paths`]).
    Tripwire {
        /// Its path.
        path: PathBuf,
    },
    /// The escape sentinel process (`argv[0]` `name`, [`super::tripwire::sentinel_name`]).
    Sentinel {
        /// Its `argv[0]`.
        name: String,
    },
    /// The run's work tree.
    Worktree {
        /// Its path.
        path: PathBuf,
        /// The run's private repository (tier `container`): removed as plain files, never
        /// with git; else a linked worktree of the repository, removed with git.
        private: bool,
    },
    /// A gate's clean checkout beside the private repository (`RUN.gate`, and with
    /// `gate.protected` the base's, `RUN.gate-base`).
    GateTree {
        /// Its path.
        path: PathBuf,
    },
    /// The run branch in the user's repository: deleted at teardown only while it still
    /// points at `base` (no commits).
    Branch {
        /// Its full ref (`refs/heads/cyclix/TENANT/RUN`).
        refname: String,
        /// The commit it is created at.
        base: String,
    },
    /// A podman secret of the run.
    Secret {
        /// Its name (`cyclix-RUN-VAR`).
        name: String,
    },
    /// A rendered file (Quadlet or unit file, the proxy's config).
    File {
        /// Its path.
        path: PathBuf,
    },
    /// A systemd unit of the run.
    Unit {
        /// Its name.
        name: String,
    },
    /// podman objects labelled `io.cyclix.run=RUN` may exist (removed and audited by label).
    Podman,
    /// A staging directory beside the record: the import's (`RUN.import`) or the gate's
    /// packed objects (`RUN.gate-objects`).
    ImportDir {
        /// Its path.
        path: PathBuf,
    },
}

/// The kinds of [`Entry`], as their fail points name them (`ledger.KIND`), in the order a run
/// of tier `container` first appends them.
pub const KINDS: &[&str] = &[
    "run",
    "run-dir",
    "reservations",
    "tripwire",
    "sentinel",
    "worktree",
    "podman",
    "secret",
    "file",
    "unit",
    "import-dir",
    "branch",
    "gate-tree",
];

impl Entry {
    /// The kind's name (`run-dir`, `secret`, …: the `kind` field on disk).
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Entry::Run { .. } => "run",
            Entry::RunDir { .. } => "run-dir",
            Entry::Reservations { .. } => "reservations",
            Entry::Tripwire { .. } => "tripwire",
            Entry::Sentinel { .. } => "sentinel",
            Entry::Worktree { .. } => "worktree",
            Entry::GateTree { .. } => "gate-tree",
            Entry::Branch { .. } => "branch",
            Entry::Secret { .. } => "secret",
            Entry::File { .. } => "file",
            Entry::Unit { .. } => "unit",
            Entry::Podman => "podman",
            Entry::ImportDir { .. } => "import-dir",
        }
    }
}

/// Who a ledger belongs to (its first line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Tenant.
    pub tenant: String,
    /// Run id.
    pub run_id: String,
    /// The cyclix process that ran it.
    pub pid: u32,
    /// Start, in ms since the Unix epoch.
    pub started_ms: u64,
    /// The user's repository.
    pub repo: PathBuf,
}

/// What a run created: in memory, and (unless [`Ledger::in_memory`]) on disk.
#[derive(Debug)]
pub struct Ledger {
    file: Option<std::fs::File>,
    entries: Vec<Entry>,
}

impl Ledger {
    /// Starts the ledger of `owner`'s run at `path` (`RUN.running`), durable before it
    /// returns.
    ///
    /// # Errors
    /// The file exists already (a run with this id), or I/O failures.
    pub fn create(path: &Path, owner: &Owner) -> Result<Ledger> {
        let dir = path
            .parent()
            .context("invariant: a ledger has a directory")?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let file = std::fs::File::options()
            .append(true)
            .create_new(true)
            .open(path)
            .with_context(|| format!("creating {}", path.display()))?;
        // The directory entry too, once: a ledger that vanished with a crash names nothing.
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("syncing {}", dir.display()))?;
        let mut l = Ledger {
            file: Some(file),
            entries: Vec::new(),
        };
        l.record(Entry::Run {
            tenant: owner.tenant.clone(),
            run_id: owner.run_id.clone(),
            pid: owner.pid,
            started_ms: owner.started_ms,
            repo: owner.repo.clone(),
        })?;
        Ok(l)
    }

    /// A ledger kept in memory only (the twin's sides, tests).
    #[must_use]
    pub fn in_memory() -> Ledger {
        Ledger {
            file: None,
            entries: Vec::new(),
        }
    }

    /// A ledger read back from disk, for the teardown of a dead run (appends go nowhere).
    #[must_use]
    pub fn of(entries: Vec<Entry>) -> Ledger {
        Ledger {
            file: None,
            entries,
        }
    }

    /// Appends `e`, on disk and flushed (`fdatasync`) before it returns; then passes the fail
    /// point `ledger.KIND`. Call it BEFORE creating the thing `e` names.
    ///
    /// # Errors
    /// The write or the flush failed (then the thing must not be created).
    pub fn record(&mut self, e: Entry) -> Result<()> {
        if let Some(f) = &mut self.file {
            let mut line = serde_json::to_vec(&e).context("serialising a ledger entry")?;
            line.push(b'\n');
            f.write_all(&line)
                .and_then(|()| f.sync_data())
                .context("appending to the run's ledger")?;
        }
        let kind = e.kind();
        self.entries.push(e);
        crate::failpoint::kill_point(&format!("ledger.{kind}"));
        Ok(())
    }

    /// Every entry, in the order appended.
    #[must_use]
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether an entry equal to `e` is there.
    #[must_use]
    pub fn has(&self, e: &Entry) -> bool {
        self.entries.contains(e)
    }

    /// Whether the run may have podman objects ([`Entry::Podman`]).
    #[must_use]
    pub fn podman(&self) -> bool {
        self.has(&Entry::Podman)
    }

    /// The work tree, if one was (about to be) made: its path and whether it is private.
    #[must_use]
    pub fn worktree(&self) -> Option<(&Path, bool)> {
        self.entries.iter().find_map(|e| match e {
            Entry::Worktree { path, private } => Some((path.as_path(), *private)),
            _ => None,
        })
    }

    /// The gates' trees (`RUN.gate`, and with `gate.protected` `RUN.gate-base`) that were
    /// (about to be) made, each once.
    pub fn gate_trees(&self) -> impl Iterator<Item = &Path> {
        let mut seen: Vec<&Path> = Vec::new();
        self.entries.iter().filter_map(move |e| match e {
            Entry::GateTree { path } if !seen.contains(&path.as_path()) => {
                seen.push(path.as_path());
                Some(path.as_path())
            }
            _ => None,
        })
    }

    /// The run branch and its base, if it was (about to be) created.
    #[must_use]
    pub fn branch(&self) -> Option<(&str, &str)> {
        self.entries.iter().find_map(|e| match e {
            Entry::Branch { refname, base } => Some((refname.as_str(), base.as_str())),
            _ => None,
        })
    }

    /// The paths of the entries `pick` selects.
    pub fn paths<'a>(
        &'a self,
        pick: impl Fn(&'a Entry) -> Option<&'a PathBuf> + 'a,
    ) -> impl Iterator<Item = &'a PathBuf> + 'a {
        self.entries.iter().filter_map(pick)
    }

    /// The rendered files.
    pub fn files(&self) -> impl Iterator<Item = &PathBuf> + '_ {
        self.paths(|e| match e {
            Entry::File { path } => Some(path),
            _ => None,
        })
    }

    /// The names of the entries `pick` selects.
    pub fn names<'a>(
        &'a self,
        pick: impl Fn(&'a Entry) -> Option<&'a String> + 'a,
    ) -> impl Iterator<Item = &'a String> + 'a {
        self.entries.iter().filter_map(pick)
    }

    /// The units.
    pub fn units(&self) -> impl Iterator<Item = &String> + '_ {
        self.names(|e| match e {
            Entry::Unit { name } => Some(name),
            _ => None,
        })
    }
}

/// A run's ledger read back: its owner and its entries (the first line excluded). A line cut
/// short (the last one, by a crash) is skipped. `None`: not a ledger.
#[must_use]
pub fn read(path: &Path) -> Option<(Owner, Vec<Entry>)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut lines = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Entry>(l).ok());
    let Some(Entry::Run {
        tenant,
        run_id,
        pid,
        started_ms,
        repo,
    }) = lines.next()
    else {
        return None;
    };
    let owner = Owner {
        tenant,
        run_id,
        pid,
        started_ms,
        repo,
    };
    Some((owner, lines.collect()))
}

/// The ledgers in a tenant's records directory, by run id (call while holding the tenant
/// lock: then each is of a run whose cyclix is gone).
#[must_use]
pub fn all(tenant_dir: &Path) -> Vec<(Owner, Vec<Entry>)> {
    let Ok(rd) = std::fs::read_dir(tenant_dir) else {
        return Vec::new();
    };
    let mut v: Vec<(Owner, Vec<Entry>)> = rd
        .filter_map(Result::ok)
        .filter(|e| {
            crate::layout::parse_run_file(&e.file_name().to_string_lossy())
                .is_some_and(|(_, kind)| kind == "running")
        })
        .filter_map(|e| read(&e.path()))
        .collect();
    v.sort_by(|a, b| a.0.run_id.cmp(&b.0.run_id));
    v
}

/// The phase (or `teardown/STEP`) the run was last in, from its phase note (`None` if it
/// never noted one).
#[must_use]
pub fn last_phase(tenant_dir: &Path, run_id: &str) -> Option<String> {
    std::fs::read_to_string(RunFiles::new(tenant_dir, run_id).phase())
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Removes the ledger, the phase note and the import's staging dir (if cyclix died during
/// the import) once the run's record is written. Best effort: a ledger left names only what
/// is gone, and the next run converges it to the same record.
pub fn remove(tenant_dir: &Path, run_id: &str) {
    let f = RunFiles::new(tenant_dir, run_id);
    let _ = std::fs::remove_file(f.phase());
    let _ = std::fs::remove_file(f.marker());
    let _ = std::fs::remove_dir_all(f.import_dir());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Owner {
        Owner {
            tenant: "acme".into(),
            run_id: "r1".into(),
            pid: 42,
            started_ms: 7,
            repo: "/repo".into(),
        }
    }

    #[test]
    fn a_ledger_reads_back_as_it_was_appended_and_a_torn_line_is_skipped() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = RunFiles::new(dir.path(), "r1").marker();
        let mut l = Ledger::create(&path, &owner()).expect("create");
        let entries = vec![
            Entry::RunDir {
                path: "/run/r1".into(),
            },
            Entry::Worktree {
                path: "/w/r1".into(),
                private: true,
            },
            Entry::Podman,
            Entry::Secret {
                name: "cyclix-r1-K".into(),
            },
            Entry::Branch {
                refname: "refs/heads/cyclix/acme/r1".into(),
                base: "abc".into(),
            },
        ];
        for e in &entries {
            l.record(e.clone()).expect("append");
        }
        assert!(
            Ledger::create(&path, &owner()).is_err(),
            "one ledger per run"
        );
        let mut f = std::fs::File::options()
            .append(true)
            .open(&path)
            .expect("open");
        f.write_all(b"{\"kind\":\"fi").expect("torn");
        let (o, got) = read(&path).expect("read");
        assert_eq!(o, owner());
        assert_eq!(got, entries);
        assert_eq!(all(dir.path()).len(), 1);
        let back = Ledger::of(got);
        assert_eq!(back.worktree(), Some((Path::new("/w/r1"), true)));
        assert_eq!(back.branch(), Some(("refs/heads/cyclix/acme/r1", "abc")));
        assert!(back.podman());
        std::fs::write(RunFiles::new(dir.path(), "r1").phase(), "teardown/files\n").expect("n");
        assert_eq!(
            last_phase(dir.path(), "r1").as_deref(),
            Some("teardown/files")
        );
        remove(dir.path(), "r1");
        assert!(all(dir.path()).is_empty());
        assert_eq!(last_phase(dir.path(), "r1"), None);
    }

    #[test]
    fn every_kind_has_its_name_and_a_fail_point() {
        let all = [
            Entry::Run {
                tenant: String::new(),
                run_id: String::new(),
                pid: 0,
                started_ms: 0,
                repo: PathBuf::new(),
            },
            Entry::RunDir {
                path: PathBuf::new(),
            },
            Entry::Reservations {
                dir: PathBuf::new(),
            },
            Entry::Tripwire {
                path: PathBuf::new(),
            },
            Entry::Sentinel {
                name: String::new(),
            },
            Entry::Worktree {
                path: PathBuf::new(),
                private: false,
            },
            Entry::Podman,
            Entry::Secret {
                name: String::new(),
            },
            Entry::File {
                path: PathBuf::new(),
            },
            Entry::Unit {
                name: String::new(),
            },
            Entry::ImportDir {
                path: PathBuf::new(),
            },
            Entry::Branch {
                refname: String::new(),
                base: String::new(),
            },
            Entry::GateTree {
                path: PathBuf::new(),
            },
        ];
        let kinds: Vec<&str> = all.iter().map(Entry::kind).collect();
        assert_eq!(kinds, KINDS);
        for e in &all {
            let v = serde_json::to_value(e).expect("json");
            assert_eq!(v["kind"], e.kind());
        }
    }
}
