//! Podman's storage locks, seen from outside podman: who holds them, and a bounded wait for
//! them before a run creates anything (security-cases §3 "podman storage lock held").
//!
//! Rootless podman 5 (containers/storage) serialises every command on POSIX record locks
//! (`fcntl(F_SETLKW)`) on files below its graph root: `storage.lock`, then
//! `overlay-containers/containers.lock`, `overlay-images/images.lock`,
//! `overlay-layers/layers.lock`, and `networks/netavark.lock` for network changes. A process
//! that holds one of them and does not let go (a stopped `podman`, a hung build, any program
//! locking the file) makes every podman call wait forever: measured on the testbed, `podman
//! ps`, `network ls`, `network create` all hang while `storage.lock` is held. `podman system
//! locks` does not see these (it reports libpod's shared-memory locks only) and `lslocks`
//! truncates paths, so cyclix reads `/proc/locks` itself: each line names the lock's type,
//! mode, the holder's pid and the file as `MAJOR:MINOR:INODE` (hex, hex, decimal), which is
//! matched against `stat` of the lock files. Lines with `->` are processes waiting for the
//! lock, not holders.
//!
//! The parsers and the wait loop are pure (the probe is a closure); [`holders`] is the one
//! function that reads the file system. cyclix never signals a holder: it did not start it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The lock files below podman's graph root that block podman commands, most global first.
pub const STORAGE_LOCKS: &[&str] = &[
    "storage.lock",
    "overlay-containers/containers.lock",
    "overlay-images/images.lock",
    "overlay-layers/layers.lock",
    "networks/netavark.lock",
];

/// Default bound on the wait for a free storage lock before a run creates anything (60 s,
/// security-cases §3); `cyclix run --storage-lock-wait` overrides it.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// One held (or awaited) lock from `/proc/locks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockEntry {
    /// `POSIX`, `FLOCK`, `OFDLCK`, `LEASE`, ...
    pub kind: String,
    /// `READ` or `WRITE`.
    pub mode: String,
    /// The holder's pid; `None` for OFD locks (`-1`: they belong to an open file, not a process).
    pub pid: Option<u32>,
    /// The file's device and inode.
    pub file: FileId,
    /// A process waiting for the lock (`->` lines), not a holder.
    pub waiting: bool,
}

/// A file's identity as `/proc/locks` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
    /// Inode number.
    pub inode: u64,
}

impl FileId {
    /// From `st_dev` and `st_ino` (Linux's `dev_t` encoding, as glibc's `major()`/`minor()`).
    #[must_use]
    pub fn from_stat(dev: u64, inode: u64) -> Self {
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        FileId {
            major: u32::try_from(major).unwrap_or(u32::MAX),
            minor: u32::try_from(minor).unwrap_or(u32::MAX),
            inode,
        }
    }
}

/// Parses `/proc/locks` (proc(5)); lines it cannot read are skipped.
#[must_use]
pub fn parse_proc_locks(text: &str) -> Vec<LockEntry> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace().skip(1).peekable(); // "N:"
            let waiting = words.peek() == Some(&"->");
            if waiting {
                words.next();
            }
            let kind = words.next()?.to_string();
            let _advisory = words.next()?;
            let mode = words.next()?.to_string();
            let pid: i64 = words.next()?.parse().ok()?;
            let mut id = words.next()?.split(':');
            let major = u32::from_str_radix(id.next()?, 16).ok()?;
            let minor = u32::from_str_radix(id.next()?, 16).ok()?;
            let inode = id.next()?.parse().ok()?;
            Some(LockEntry {
                kind,
                mode,
                pid: u32::try_from(pid).ok().filter(|p| *p > 0),
                file: FileId {
                    major,
                    minor,
                    inode,
                },
                waiting,
            })
        })
        .collect()
}

/// A process (or an open file) holding one of podman's storage locks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// The lock file.
    pub lock: PathBuf,
    /// `POSIX`, `FLOCK` or `OFDLCK`.
    pub kind: String,
    /// `READ` or `WRITE`.
    pub mode: String,
    /// The holder's pid, if the kernel names one (not for OFD locks).
    pub pid: Option<u32>,
    /// The holder's command line (`/proc/PID/cmdline`, words joined by spaces, at most 200
    /// characters), if it could be read.
    pub command: Option<String>,
}

/// The holders among `entries` of the `files` (path and identity), leaving out `own_pid`,
/// waiters and `flock(2)` locks: containers/storage takes `fcntl` record locks (POSIX, or OFD
/// in newer versions), and on Linux a `flock` lock does not conflict with them (flock(2),
/// fcntl(2) "Open file description locks"), so a `flock` holder never blocks podman. Pure.
#[must_use]
pub fn holders_among(
    files: &[(PathBuf, FileId)],
    entries: &[LockEntry],
    own_pid: u32,
) -> Vec<Holder> {
    let mut out = Vec::new();
    for (path, id) in files {
        for e in entries {
            if e.waiting || e.file != *id || e.pid == Some(own_pid) || e.kind == "FLOCK" {
                continue;
            }
            out.push(Holder {
                lock: path.clone(),
                kind: e.kind.clone(),
                mode: e.mode.clone(),
                pid: e.pid,
                command: None,
            });
        }
    }
    out
}

/// One line per holder: `/path/storage.lock (POSIX WRITE lock) held by pid 1549
/// (`python3 hold.py`)`.
#[must_use]
pub fn describe(holders: &[Holder]) -> String {
    holders
        .iter()
        .map(|h| {
            let who = match (h.pid, &h.command) {
                (Some(p), Some(c)) => format!("pid {p} (`{c}`)"),
                (Some(p), None) => format!("pid {p} (command line unreadable)"),
                (None, _) => "an open file description (OFD lock: no pid; `lsof` or `fuser` on the file names it)".to_string(),
            };
            format!(
                "{} ({} {} lock) held by {who}",
                h.lock.display(),
                h.kind,
                h.mode
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why the wait ended without the lock.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// Still held when the bound ran out.
    #[error(
        "podman's storage lock is busy: {} for more than {} s; podman cannot create the run's \
         objects, so nothing was created and the agent did not start. cyclix never stops a \
         process it did not start: if the holder is stuck (e.g. a stopped or hung podman), end \
         it yourself (`kill PID`), or wait for it, then run again (inspect: `cat /proc/locks`, \
         `lslocks`)",
        describe(.holders),
        .waited.as_secs()
    )]
    Busy {
        /// Who held it at the last look.
        holders: Vec<Holder>,
        /// How long cyclix waited.
        waited: Duration,
    },
    /// SIGTERM or SIGINT while waiting.
    #[error("interrupted (SIGTERM or SIGINT) while waiting for podman's storage lock")]
    Interrupted,
    /// The holders could not be read.
    #[error("cannot tell who holds podman's storage lock: {0:#}")]
    Probe(anyhow::Error),
}

/// Waits until `look` reports no holder, at most `bound`, looking every `poll`; returns how
/// long it waited. A holder seen once is normal (another podman command); only one that
/// stays for the whole bound is an error.
///
/// # Errors
/// [`WaitError`].
pub fn wait_free(
    mut look: impl FnMut() -> anyhow::Result<Vec<Holder>>,
    bound: Duration,
    poll: Duration,
    interrupted: impl Fn() -> bool,
) -> Result<Duration, WaitError> {
    let t0 = Instant::now();
    loop {
        let holders = look().map_err(WaitError::Probe)?;
        if holders.is_empty() {
            return Ok(t0.elapsed());
        }
        if interrupted() {
            return Err(WaitError::Interrupted);
        }
        if t0.elapsed() >= bound {
            return Err(WaitError::Busy {
                holders,
                waited: t0.elapsed(),
            });
        }
        std::thread::sleep(
            poll.min(bound.saturating_sub(t0.elapsed()))
                .max(Duration::from_millis(1)),
        );
    }
}

/// Who holds podman's storage locks below `graphroot` right now (not this process), with
/// their command lines. Lock files that do not exist are skipped.
///
/// # Errors
/// `/proc/locks` cannot be read.
pub fn holders(graphroot: &Path) -> anyhow::Result<Vec<Holder>> {
    use std::os::unix::fs::MetadataExt as _;
    let files: Vec<(PathBuf, FileId)> = STORAGE_LOCKS
        .iter()
        .filter_map(|rel| {
            let p = graphroot.join(rel);
            let m = std::fs::metadata(&p).ok()?;
            Some((p, FileId::from_stat(m.dev(), m.ino())))
        })
        .collect();
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string("/proc/locks")
        .map_err(|e| anyhow::anyhow!("reading /proc/locks: {e}"))?;
    let mut found = holders_among(&files, &parse_proc_locks(&text), std::process::id());
    for h in &mut found {
        h.command = h.pid.and_then(|p| {
            let raw = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let words: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|w| !w.is_empty())
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect();
            let mut s = words.join(" ");
            if s.chars().count() > 200 {
                s = s.chars().take(200).collect::<String>() + "…";
            }
            (!s.is_empty()).then_some(s)
        });
    }
    Ok(found)
}

/// [`holders`] without cyclix's own child processes (its podman calls wait on the lock like
/// anyone's) and, with `run`, without the processes of that run's units: the pod unit's own
/// `podman pod rm` at teardown was named as a stuck holder (issue 20 item 7). Structural: by
/// the holder's parent pid (`/proc/PID/stat`) and its cgroup (`/proc/PID/cgroup`), not by its
/// command line, which any process can choose.
///
/// # Errors
/// `/proc/locks` cannot be read.
pub fn holders_outside(graphroot: &Path, run: Option<&str>) -> anyhow::Result<Vec<Holder>> {
    let own = std::process::id();
    Ok(holders(graphroot)?
        .into_iter()
        .filter(|h| {
            let Some(pid) = h.pid else { return true };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
            !is_runs_own(&stat, &cgroup, own, run)
        })
        .collect())
}

/// Whether a process with `/proc/PID/stat` text `stat` and `/proc/PID/cgroup` text `cgroup`
/// is cyclix's own child (parent pid `own`) or, with `run`, lives in a unit of that run (a
/// cgroup path component `cyclix-RUN-….service`, or `cyclix-RUN.…`). Pure.
#[must_use]
pub fn is_runs_own(stat: &str, cgroup: &str, own: u32, run: Option<&str>) -> bool {
    // stat: `PID (COMM) STATE PPID …`; COMM may hold spaces and parens: split after the last ')'.
    let ppid = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|p| p.parse::<u32>().ok());
    if ppid == Some(own) {
        return true;
    }
    let Some(run) = run else { return false };
    let names = crate::naming::RunNames::new(run);
    cgroup
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .flat_map(|path| path.split('/'))
        .any(|part| names.owns(part))
}

/// The processes (or open files) holding any lock on `path` right now, from `/proc/locks`;
/// empty when the file does not exist. Taking no lock, it cannot disturb the holder.
///
/// # Errors
/// `/proc/locks` cannot be read.
pub fn file_lock_holders(path: &Path) -> anyhow::Result<Vec<LockEntry>> {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(m) = std::fs::metadata(path) else {
        return Ok(Vec::new());
    };
    let id = FileId::from_stat(m.dev(), m.ino());
    let text = std::fs::read_to_string("/proc/locks")
        .map_err(|e| anyhow::anyhow!("reading /proc/locks: {e}"))?;
    Ok(parse_proc_locks(&text)
        .into_iter()
        .filter(|e| e.file == id && !e.waiting)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured on the testbed (podman 5.4.2): a python holding storage.lock with lockf,
    // `podman ps` waiting for it, and cargo's OFD locks on other files.
    const PROC_LOCKS: &str = "1: POSIX  ADVISORY  WRITE 1549 00:31:9 0 EOF
1: -> POSIX  ADVISORY  WRITE 1553 00:31:9 0 EOF
2: OFDLCK ADVISORY  READ -1 fe:00:780494 0 EOF
3: FLOCK  ADVISORY  WRITE 77 00:31:12 0 EOF
garbage line
";

    #[test]
    fn proc_locks_lines_parse_into_holders_and_waiters() {
        let e = parse_proc_locks(PROC_LOCKS);
        assert_eq!(e.len(), 4);
        assert_eq!(
            e[0],
            LockEntry {
                kind: "POSIX".into(),
                mode: "WRITE".into(),
                pid: Some(1549),
                file: FileId {
                    major: 0,
                    minor: 0x31,
                    inode: 9
                },
                waiting: false,
            }
        );
        assert!(e[1].waiting && e[1].pid == Some(1553));
        assert_eq!((e[2].pid, e[2].file.major), (None, 0xfe));
    }

    #[test]
    fn holders_are_matched_by_device_and_inode_without_waiters_or_ourselves() {
        let files = vec![
            (
                PathBuf::from("/g/storage.lock"),
                FileId {
                    major: 0,
                    minor: 0x31,
                    inode: 9,
                },
            ),
            (
                PathBuf::from("/g/networks/netavark.lock"),
                FileId {
                    major: 0,
                    minor: 0x31,
                    inode: 12,
                },
            ),
        ];
        let e = parse_proc_locks(PROC_LOCKS);
        let h = holders_among(&files, &e, 4242);
        // pid 77's lock on netavark.lock is a flock(2) lock: it never blocks podman's fcntl
        // locks, so it is not a holder (a newcomer's `flock storage.lock sleep 60` was taken
        // for one and refused a run podman could have made).
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!(
            (h[0].lock.to_str(), h[0].pid),
            (Some("/g/storage.lock"), Some(1549))
        );
        assert!(
            holders_among(&files, &e, 1549)
                .iter()
                .all(|h| h.pid != Some(1549))
        );
        let mut named = h[0].clone();
        named.command = Some("python3 hold.py".into());
        assert_eq!(
            describe(&[named]),
            "/g/storage.lock (POSIX WRITE lock) held by pid 1549 (`python3 hold.py`)"
        );
    }

    #[test]
    fn the_dev_t_encoding_matches_glibc() {
        // makedev(0xfe, 0) and makedev(0, 0x31), and a large minor.
        assert_eq!(
            FileId::from_stat(0xfe00, 1),
            FileId {
                major: 0xfe,
                minor: 0,
                inode: 1
            }
        );
        assert_eq!(
            FileId::from_stat(0x31, 9),
            FileId {
                major: 0,
                minor: 0x31,
                inode: 9
            }
        );
        assert_eq!(
            FileId::from_stat(0x0010_0103, 2),
            FileId {
                major: 1,
                minor: 0x103,
                inode: 2
            }
        );
    }

    #[test]
    fn the_runs_own_processes_are_not_stuck_holders() {
        let child = "812 (podman) S 4242 812 1 0 -1";
        let other = "900 (my (odd) tool) S 77 900 1 0 -1";
        assert!(
            is_runs_own(child, "", 4242, None),
            "cyclix's own podman call"
        );
        assert!(!is_runs_own(other, "", 4242, None));
        let pod =
            "0::/user.slice/user-1000.slice/user@1000.service/app.slice/cyclix-r9-pod.service\n";
        assert!(
            is_runs_own(other, pod, 4242, Some("r9")),
            "the pod unit's podman pod rm"
        );
        assert!(
            !is_runs_own(other, pod, 4242, Some("r1")),
            "another run's is a holder"
        );
        assert!(!is_runs_own(other, pod, 4242, None));
        let shell = "0::/user.slice/user-1000.slice/session-3.scope\n";
        assert!(!is_runs_own(other, shell, 4242, Some("r9")));
    }

    fn holder() -> Holder {
        Holder {
            lock: "/g/storage.lock".into(),
            kind: "POSIX".into(),
            mode: "WRITE".into(),
            pid: Some(1549),
            command: Some("podman build .".into()),
        }
    }

    #[test]
    fn a_brief_holder_is_waited_out_a_stuck_one_is_named_after_the_bound() {
        let mut n = 0;
        let waited = wait_free(
            || {
                n += 1;
                Ok(if n < 3 { vec![holder()] } else { Vec::new() })
            },
            Duration::from_secs(5),
            Duration::from_millis(1),
            || false,
        )
        .expect("free after two looks");
        assert_eq!(n, 3, "freed at the third look, not at the bound");
        let _ = waited;
        let t0 = Instant::now();
        let err = wait_free(
            || Ok(vec![holder()]),
            Duration::from_millis(50),
            Duration::from_millis(5),
            || false,
        )
        .expect_err("stuck");
        // Never before the bound; when after it is the machine's load.
        assert!(t0.elapsed() >= Duration::from_millis(50));
        let msg = err.to_string();
        for want in [
            "/g/storage.lock",
            "pid 1549",
            "`podman build .`",
            "nothing was created",
            "never stops a process",
        ] {
            assert!(msg.contains(want), "`{want}` missing: {msg}");
        }
        assert!(matches!(
            wait_free(
                || Ok(vec![holder()]),
                Duration::from_secs(5),
                Duration::from_millis(1),
                || true
            ),
            Err(WaitError::Interrupted)
        ));
    }
}
