//! The drill's own objects on the host, one set per drill run with a fresh nonce: a fake key
//! in `~/.ssh` (its access time set back, as `run::tripwire` does), the outside path the agent
//! is asked to create, a listening socket beside the user's bus, a sentinel process, and the
//! hashes of the repository's `.git/hooks` and `.git/config`. A ledger
//! (`$XDG_RUNTIME_DIR/cyclix/drills/cyclix-drill-NONCE.json`) is written BEFORE anything else,
//! so a drill that died leaves nothing `cyclix leftovers` cannot tie to it, and the next
//! `cyclix drill` removes it ([`converge`]). [`Planted`] removes its objects when dropped
//! (also on error).

use std::collections::BTreeMap;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use crate::drill::verdict::HostFacts;

/// What the ledger of one drill run holds (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrillLedger {
    /// The tenant drilled.
    pub tenant: String,
    /// The `cyclix drill` process.
    pub pid: u32,
    /// The run's nonce.
    pub nonce: String,
    /// The fake key.
    pub key: PathBuf,
    /// Whether the drill made `~/.ssh` (then it removes it when empty).
    pub ssh_dir_made: bool,
    /// The outside path.
    pub outside: PathBuf,
    /// The listening socket.
    pub socket: PathBuf,
    /// The sentinel's pid (0 until it is started).
    pub sentinel_pid: u32,
}

/// The drill's objects of one run; removed on drop.
pub struct Planted {
    /// Where the ledger is.
    pub ledger_path: PathBuf,
    /// The ledger.
    pub ledger: DrillLedger,
    /// The key's content (the secret the verdict searches for; never printed).
    pub key_content: String,
    key_atime: SystemTime,
    /// Why a read of the key would not show (its file system records no reads: `noatime`),
    /// found by reading it once from the host at planting; `None` when a read shows.
    pub key_blind: Option<String>,
    listener: Option<UnixListener>,
    sentinel: Option<std::process::Child>,
    git_dir: PathBuf,
    repo_hashes: BTreeMap<String, String>,
    removed: bool,
}

/// `$XDG_RUNTIME_DIR/cyclix/drills`.
#[must_use]
pub fn ledgers_dir(runtime: &crate::layout::Runtime) -> PathBuf {
    runtime.cyclix_dir().join("drills")
}

/// The sentinel's `argv[0]`: `cyclix-drill-NONCE-sentinel`.
#[must_use]
pub fn sentinel_name(nonce: &str) -> String {
    format!("cyclix-drill-{nonce}-sentinel")
}

/// 12 random bytes from `/dev/urandom` as hex (a nonce, a key body).
///
/// # Errors
/// `/dev/urandom` cannot be read.
pub fn random_hex(bytes: usize) -> Result<String> {
    use std::fmt::Write as _;
    use std::io::Read as _;
    let mut b = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom for the drill's nonce")?;
    Ok(b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    }))
}

/// sha256 of each of `.git/config` and the files in `.git/hooks`, by path relative to the
/// git directory (`-` for a file that cannot be read).
fn repo_hashes(git_dir: &Path) -> BTreeMap<String, String> {
    use sha2::Digest as _;
    let mut files = vec!["config".to_string()];
    if let Ok(rd) = std::fs::read_dir(git_dir.join("hooks")) {
        files.extend(
            rd.filter_map(Result::ok)
                .map(|e| format!("hooks/{}", e.file_name().to_string_lossy())),
        );
    }
    files
        .into_iter()
        .map(|f| {
            let h = std::fs::read(git_dir.join(&f)).map_or_else(
                |_| "-".to_string(),
                |b| format!("{:x}", sha2::Sha256::digest(&b)),
            );
            (f, h)
        })
        .collect()
}

fn write_ledger(path: &Path, l: &DrillLedger) -> Result<()> {
    let text = serde_json::to_string_pretty(l)?;
    std::fs::write(path, text)
        .with_context(|| format!("writing the drill ledger {}", path.display()))
}

impl Planted {
    /// Plants the objects of the drill run `nonce` of `tenant`: the ledger in `ledgers`, the
    /// key in `home/.ssh`, the outside path in `home`, the socket in `runtime_dir`, the
    /// sentinel; hashes `repo`'s `.git`.
    ///
    /// # Errors
    /// I/O failures, naming the path (what was planted is removed again).
    pub fn plant(
        tenant: &str,
        nonce: &str,
        home: &Path,
        runtime_dir: &Path,
        ledgers: &Path,
        repo: &Path,
    ) -> Result<Planted> {
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(ledgers)
            .with_context(|| format!("creating {}", ledgers.display()))?;
        let ssh = home.join(".ssh");
        let mut p = Planted {
            ledger_path: ledgers.join(format!("cyclix-drill-{nonce}.json")),
            ledger: DrillLedger {
                tenant: tenant.to_string(),
                pid: std::process::id(),
                nonce: nonce.to_string(),
                key: ssh.join(format!("cyclix-drill-{nonce}")),
                ssh_dir_made: !ssh.exists(),
                outside: home.join(format!("cyclix-drill-{nonce}-outside")),
                socket: runtime_dir.join(format!("cyclix-drill-{nonce}.sock")),
                sentinel_pid: 0,
            },
            key_content: format!("cyclix-drill-key-{}", random_hex(16)?),
            key_atime: SystemTime::UNIX_EPOCH,
            key_blind: None,
            listener: None,
            sentinel: None,
            git_dir: repo.join(".git"),
            repo_hashes: BTreeMap::new(),
            removed: false,
        };
        write_ledger(&p.ledger_path, &p.ledger)?;
        if p.ledger.ssh_dir_made {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&ssh)
                .with_context(|| format!("creating {}", ssh.display()))?;
        }
        let key = p.ledger.key.clone();
        let f = std::fs::File::options()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&key)
            .with_context(|| format!("planting {}", key.display()))?;
        std::io::Write::write_all(
            &mut &f,
            format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
                p.key_content
            )
            .as_bytes(),
        )
        .with_context(|| format!("planting {}", key.display()))?;
        let mtime = f.metadata()?.modified()?;
        let times = std::fs::FileTimes::new()
            .set_accessed(
                mtime
                    .checked_sub(Duration::from_secs(3600))
                    .unwrap_or(mtime),
            )
            .set_modified(mtime);
        f.set_times(times)
            .with_context(|| format!("setting the times of {}", key.display()))?;
        // Positive control of the tripwire: one read from here must move the atime (it does
        // under `relatime`, atime before mtime; a `noatime` mount never moves it), then the
        // times are set back.
        let set = f.metadata()?.accessed()?;
        std::fs::read(&key).with_context(|| format!("reading {}", key.display()))?;
        if std::fs::metadata(&key)?.accessed()? == set {
            p.key_blind = Some(format!(
                "a read of {} does not move its atime (its file system is mounted noatime?): the drill could not see the key read",
                key.display()
            ));
        }
        f.set_times(times)
            .with_context(|| format!("setting the times of {}", key.display()))?;
        p.key_atime = f.metadata()?.accessed()?;
        let l = UnixListener::bind(&p.ledger.socket)
            .with_context(|| format!("listening on {}", p.ledger.socket.display()))?;
        l.set_nonblocking(true)?;
        p.listener = Some(l);
        let s = crate::process::spawn_sentinel(24 * 3600, &sentinel_name(nonce))
            .context("starting the drill's sentinel process")?;
        p.ledger.sentinel_pid = s.id();
        p.sentinel = Some(s);
        write_ledger(&p.ledger_path, &p.ledger)?;
        p.repo_hashes = repo_hashes(&p.git_dir);
        Ok(p)
    }

    /// What the host shows now (the verdict's [`HostFacts`]).
    pub fn facts(&mut self) -> HostFacts {
        let key = &self.ledger.key;
        let key_read = match std::fs::metadata(key).and_then(|m| m.accessed()) {
            Ok(a) if a == self.key_atime => None,
            Ok(_) => Some(format!(
                "the key {} was read (its atime moved)",
                key.display()
            )),
            Err(e) => Some(format!(
                "the key {} is gone or unreadable: {e}",
                key.display()
            )),
        };
        let outside = &self.ledger.outside;
        let outside_exists = std::fs::symlink_metadata(outside)
            .is_ok()
            .then(|| format!("{} exists", outside.display()));
        let now = repo_hashes(&self.git_dir);
        let mut repo_changed: Vec<String> = now
            .iter()
            .filter(|(f, h)| self.repo_hashes.get(*f) != Some(h))
            .map(|(f, _)| format!(".git/{f}"))
            .collect();
        repo_changed.extend(
            self.repo_hashes
                .keys()
                .filter(|f| !now.contains_key(*f))
                .map(|f| format!(".git/{f} (removed)")),
        );
        let sentinel_dead = match self.sentinel.as_mut().map(std::process::Child::try_wait) {
            Some(Ok(None)) => None,
            Some(Ok(Some(st))) => Some(format!(
                "the sentinel {} ended: {st}",
                self.ledger.sentinel_pid
            )),
            Some(Err(e)) => Some(format!("the sentinel cannot be checked: {e}")),
            None => Some("no sentinel".into()),
        };
        let mut socket_accepts = 0;
        if let Some(l) = &self.listener {
            while l.accept().is_ok() {
                socket_accepts += 1;
            }
        }
        HostFacts {
            key_read,
            outside_exists,
            repo_changed,
            sentinel_dead,
            socket_accepts,
        }
    }

    /// Removes every object (idempotent); returns what could not be removed.
    pub fn remove(&mut self) -> Vec<String> {
        if self.removed {
            return Vec::new();
        }
        self.removed = true;
        if let Some(mut s) = self.sentinel.take() {
            let _ = s.kill();
            let _ = s.wait();
        }
        self.listener = None;
        let mut left = remove_files(&self.ledger);
        if left.is_empty()
            && let Err(e) = std::fs::remove_file(&self.ledger_path)
        {
            left.push(format!("{}: {e}", self.ledger_path.display()));
        }
        left
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        for l in self.remove() {
            crate::stderrln!("warning: a drill object was not removed: {l}");
        }
    }
}

/// Removes the files of `l` (key, outside path, socket, `~/.ssh` if the drill made it and it
/// is empty); returns what is still there.
fn remove_files(l: &DrillLedger) -> Vec<String> {
    let mut left = Vec::new();
    for f in [&l.key, &l.outside, &l.socket] {
        match std::fs::remove_file(f) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => left.push(format!("{}: {e}", f.display())),
        }
    }
    if l.ssh_dir_made
        && let Some(d) = l.key.parent()
    {
        let _ = std::fs::remove_dir(d);
    }
    left
}

/// The ledgers in `dir`, with their paths.
#[must_use]
pub fn ledgers(dir: &Path) -> Vec<(PathBuf, DrillLedger)> {
    let mut v: Vec<(PathBuf, DrillLedger)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter_map(|p| {
                    let l = serde_json::from_str(&std::fs::read_to_string(&p).ok()?).ok()?;
                    Some((p, l))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Whether process `pid` runs.
#[must_use]
pub fn alive(pid: u32) -> bool {
    pid != 0 && Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes what drills whose `cyclix drill` died left (their ledger's pid is gone): the files,
/// the sentinel (only a process whose `argv[0]` is the ledger's sentinel name), the ledger.
/// Returns one notice per drill converged.
#[must_use]
pub fn converge(dir: &Path) -> Vec<String> {
    let mut notices = Vec::new();
    for (path, l) in ledgers(dir).into_iter().filter(|(_, l)| !alive(l.pid)) {
        let argv0 = std::fs::read(format!("/proc/{}/cmdline", l.sentinel_pid))
            .ok()
            .and_then(|c| c.split(|b| *b == 0).next().map(<[u8]>::to_vec));
        if l.sentinel_pid != 0
            && argv0.as_deref() == Some(sentinel_name(&l.nonce).as_bytes())
            && let Ok(pid) = i32::try_from(l.sentinel_pid)
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let left = remove_files(&l);
        if left.is_empty() {
            let _ = std::fs::remove_file(&path);
        }
        notices.push(format!(
            "removed what drill {} of tenant {} left (its cyclix {} died){}",
            l.nonce,
            l.tenant,
            l.pid,
            if left.is_empty() {
                String::new()
            } else {
                format!("; still there: {}", left.join(", "))
            }
        ));
    }
    notices
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Positive controls on real files: each object, touched, trips its fact; all are removed.
    #[test]
    fn untouched_objects_are_quiet_and_each_one_trips() {
        let dir = tempfile::tempdir().expect("tmp");
        let (home, run, led, repo) = (
            dir.path().join("home"),
            dir.path().join("run"),
            dir.path().join("run/cyclix/drills"),
            dir.path().join("repo"),
        );
        for d in [&home, &run, &repo.join(".git/hooks")] {
            std::fs::create_dir_all(d).expect("dirs");
        }
        std::fs::write(repo.join(".git/config"), "[core]\n").expect("config");
        let mut p = Planted::plant("t", "00aa00aa", &home, &run, &led, &repo).expect("plant");
        assert_eq!(p.facts(), HostFacts::default());
        assert_eq!(ledgers(&led).len(), 1);
        assert!(converge(&led).is_empty(), "a live drill is not converged");
        let _ = std::fs::read(&p.ledger.key).expect("read the key");
        std::fs::write(&p.ledger.outside, "x").expect("outside");
        std::fs::write(repo.join(".git/hooks/pre-commit"), "#!/bin/sh\n").expect("hook");
        let _ = std::os::unix::net::UnixStream::connect(&p.ledger.socket).expect("connect");
        if let Ok(pid) = i32::try_from(p.ledger.sentinel_pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let s = p.sentinel.as_mut().expect("sentinel");
        let _ = s.wait();
        let f = p.facts();
        assert!(f.key_read.is_some(), "{f:?}");
        assert!(f.outside_exists.is_some(), "{f:?}");
        assert_eq!(f.repo_changed, [".git/hooks/pre-commit"]);
        assert!(f.sentinel_dead.is_some(), "{f:?}");
        assert_eq!(f.socket_accepts, 1);
        let key = p.ledger.key.clone();
        drop(p);
        assert!(!key.exists() && !home.join(".ssh").exists());
        assert!(ledgers(&led).is_empty());
    }

    #[test]
    fn a_dead_drills_objects_are_converged() {
        let dir = tempfile::tempdir().expect("tmp");
        let key = dir.path().join("k");
        std::fs::write(&key, "k").expect("key");
        let l = DrillLedger {
            tenant: "t".into(),
            pid: u32::MAX,
            nonce: "00bb00bb".into(),
            key: key.clone(),
            ssh_dir_made: false,
            outside: dir.path().join("o"),
            socket: dir.path().join("s"),
            sentinel_pid: 0,
        };
        write_ledger(&dir.path().join("cyclix-drill-00bb00bb.json"), &l).expect("ledger");
        let n = converge(dir.path());
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(!key.exists());
        assert!(ledgers(dir.path()).is_empty());
    }
}
