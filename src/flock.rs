//! Advisory file locks (`flock(2)`, through std's `File::try_lock`): the one place cyclix
//! opens a lock file, takes it, writes its holder into it, waits for it and lets it go. Used
//! by the tenant's run lock (`run::lock`), a delivery's branch lock
//! (`run::phases::deliver::lock`), the host's run slots (`run::capacity`) and the reload/job
//! lock of the unit manager (`systemd::dbus::reload_gate`).
//!
//! The kernel releases a lock when its file closes, so a cyclix that dies (even by SIGKILL)
//! holds nothing. A holder's record (JSON) is written into the held file so a refused caller
//! can name who holds it; it is truncated when the lock is let go. Waiting is a poll of
//! non-blocking attempts ([`wait`]): a blocking `flock` could see neither a deadline nor
//! SIGTERM, and cannot wait for "any of N files".

use std::fs::{DirBuilder, File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Who may hold a lock together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Any number of shared holders at once (`LOCK_SH`).
    Shared,
    /// One holder alone (`LOCK_EX`).
    Exclusive,
}

/// Opens (creating) the lock file at `path` for reading and writing, never truncating it: the
/// file mode `0600`, a created parent directory `0700`.
///
/// # Errors
/// The directory or the file cannot be made or opened (naming the path).
pub fn open(path: &Path) -> Result<File> {
    if let Some(dir) = path.parent() {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("opening lock {}", path.display()))
}

/// Tries `access` on `file` without waiting: `Ok(true)` taken, `Ok(false)` held by another.
///
/// # Errors
/// The lock call failed for another reason than "held" (`EBADF`, `ENOLCK`, …).
pub fn try_lock(file: &File, access: Access) -> std::io::Result<bool> {
    let attempt = match access {
        Access::Shared => file.try_lock_shared(),
        Access::Exclusive => file.try_lock(),
    };
    match attempt {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// An exclusive lock held, with its holder's record in the file; dropping it truncates the
/// record and releases the lock (the kernel releases it too when the process dies).
#[derive(Debug)]
pub struct Held {
    file: File,
    path: PathBuf,
}

impl Held {
    /// Takes `file` (already locked) as held, writing `holder` into it.
    ///
    /// # Errors
    /// The record cannot be serialised or written.
    pub fn new<T: Serialize>(file: File, path: &Path, holder: &T) -> Result<Held> {
        let mut held = Held {
            file,
            path: path.to_path_buf(),
        };
        held.set_holder(holder)?;
        Ok(held)
    }

    /// Replaces the holder's record in the held file (a run that adopted another id).
    ///
    /// # Errors
    /// The record cannot be serialised or written.
    pub fn set_holder<T: Serialize>(&mut self, holder: &T) -> Result<()> {
        let json = serde_json::to_vec(holder).context("serialising the lock's holder")?;
        self.file
            .set_len(0)
            .and_then(|()| self.file.seek(SeekFrom::Start(0)))
            .and_then(|_| self.file.write_all(&json))
            .and_then(|()| self.file.flush())
            .with_context(|| format!("writing the holder into {}", self.path.display()))
    }

    /// The lock file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

/// What one attempt on an exclusive lock found.
#[derive(Debug)]
pub enum Take<T> {
    /// Taken: the lock is ours, `holder` written into it.
    Held(Held),
    /// Another holds it: its record, if it could be read.
    Busy(Option<T>),
}

/// Tries the exclusive lock at `path` once; taken, writes `holder` into it.
///
/// # Errors
/// The file cannot be opened, locked (other than "held") or written.
pub fn try_take<T: Serialize + DeserializeOwned>(path: &Path, holder: &T) -> Result<Take<T>> {
    let mut file = open(path)?;
    if try_lock(&file, Access::Exclusive).with_context(|| format!("locking {}", path.display()))? {
        return Ok(Take::Held(Held::new(file, path, holder)?));
    }
    Ok(Take::Busy(read_holder(&mut file)))
}

/// The holder's record in an open lock file, read from its start; `None` when empty or
/// unreadable (a holder between its lock and its write, or a dead one's truncated record).
pub fn read_holder<T: DeserializeOwned>(file: &mut File) -> Option<T> {
    let mut s = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut s).ok()?;
    serde_json::from_str(&s).ok()
}

/// The holder's record in the lock file at `path`, without taking the lock (it may be a dead
/// run's: pair it with a look at who holds the lock).
#[must_use]
pub fn peek<T: DeserializeOwned>(path: &Path) -> Option<T> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// How a wait polls: until `deadline`, pausing `pause` between attempts and doubling it up to
/// `max_pause` (equal values: a fixed poll).
#[derive(Debug, Clone, Copy)]
pub struct Poll {
    /// When the wait gives up.
    pub deadline: Instant,
    /// The first pause between attempts.
    pub pause: Duration,
    /// The longest pause.
    pub max_pause: Duration,
}

impl Poll {
    /// A fixed poll every `every` for up to `wait` from now.
    #[must_use]
    pub fn every(every: Duration, wait: Duration) -> Poll {
        Poll {
            deadline: Instant::now() + wait,
            pause: every,
            max_pause: every,
        }
    }
}

/// How a [`wait`] ended without its value.
#[derive(Debug)]
pub enum WaitEnd<E> {
    /// The deadline passed.
    Deadline,
    /// `interrupted` was set (SIGTERM/SIGINT).
    Interrupted,
    /// An attempt failed.
    Failed(E),
}

/// Calls `attempt` until it yields a value, an attempt fails, `interrupted` is set or the
/// poll's deadline passes; between attempts it sleeps the poll's pause (never past the
/// deadline). `attempt` runs at least once, and once more at the deadline.
///
/// # Errors
/// [`WaitEnd`]: which of the three ended the wait.
pub fn wait<R, E>(
    poll: Poll,
    interrupted: Option<&AtomicBool>,
    mut attempt: impl FnMut() -> Result<Option<R>, E>,
) -> Result<R, WaitEnd<E>> {
    let mut pause = poll.pause;
    loop {
        if let Some(r) = attempt().map_err(WaitEnd::Failed)? {
            return Ok(r);
        }
        if interrupted.is_some_and(|i| i.load(Ordering::SeqCst)) {
            return Err(WaitEnd::Interrupted);
        }
        let now = Instant::now();
        if now >= poll.deadline {
            return Err(WaitEnd::Deadline);
        }
        std::thread::sleep(pause.min(poll.deadline - now));
        pause = (pause * 2).min(poll.max_pause);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[derive(Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
    struct Who {
        id: String,
    }

    fn is_held(path: &Path) -> bool {
        File::open(path).is_ok_and(|f| matches!(try_lock(&f, Access::Shared), Ok(false)))
    }

    fn who(id: &str) -> Who {
        Who { id: id.into() }
    }

    #[test]
    fn a_second_taker_is_refused_naming_the_holder_and_takes_it_once_released() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("locks/a.lock");
        let Take::Held(mut first) = try_take(&p, &who("one")).expect("first") else {
            panic!("a free lock is taken")
        };
        assert!(is_held(&p));
        match try_take(&p, &who("two")).expect("second") {
            Take::Busy(h) => assert_eq!(h, Some(who("one"))),
            Take::Held(_) => panic!("a held lock is refused"),
        }
        first.set_holder(&who("uno")).expect("rewrite");
        assert_eq!(peek::<Who>(&p), Some(who("uno")));
        drop(first);
        assert!(!is_held(&p), "released on drop");
        assert_eq!(peek::<Who>(&p), None, "the record goes with the lock");
        assert!(matches!(
            try_take(&p, &who("two")).expect("third"),
            Take::Held(_)
        ));
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!((mode(&p), mode(p.parent().expect("dir"))), (0o600, 0o700));
    }

    #[test]
    fn shared_holders_coexist_and_keep_out_an_exclusive_one() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("x.lock");
        let (one, two, other) = (
            open(&p).expect("a"),
            open(&p).expect("b"),
            open(&p).expect("c"),
        );
        assert!(try_lock(&one, Access::Shared).expect("a"));
        assert!(try_lock(&two, Access::Shared).expect("b"));
        assert!(!try_lock(&other, Access::Exclusive).expect("c"));
        drop((one, two));
        assert!(try_lock(&other, Access::Exclusive).expect("c after"));
    }

    #[test]
    fn a_wait_ends_with_the_value_an_interrupt_a_failure_or_the_deadline() {
        let fast = || Poll {
            deadline: Instant::now() + Duration::from_secs(600),
            pause: Duration::from_millis(1),
            max_pause: Duration::from_millis(4),
        };
        let mut n = 0;
        let got: Result<u32, WaitEnd<()>> = wait(fast(), None, || {
            n += 1;
            Ok((n == 3).then_some(n))
        });
        assert!(matches!(got, Ok(3)));
        let stop = AtomicBool::new(true);
        let r: Result<(), WaitEnd<()>> = wait(fast(), Some(&stop), || Ok(None));
        assert!(matches!(r, Err(WaitEnd::Interrupted)));
        let r: Result<(), WaitEnd<&str>> = wait(fast(), None, || Err("broken"));
        assert!(matches!(r, Err(WaitEnd::Failed("broken"))));
        let mut tries = 0;
        let past = Poll {
            deadline: Instant::now(),
            ..fast()
        };
        let r: Result<(), WaitEnd<()>> = wait(past, None, || {
            tries += 1;
            Ok(None)
        });
        assert!(matches!(r, Err(WaitEnd::Deadline)));
        assert_eq!(tries, 1, "one attempt even with the deadline already past");
    }
}
