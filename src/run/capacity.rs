//! The host-wide limit on runs at once (`max_runs` in cyclix's own config,
//! `spec::host_config`; issue 16, item 4): a run takes one of `max_runs` slots before it
//! prepares anything, and a run over the limit waits its turn (bounded by `queue_timeout`)
//! instead of starting. The wait is the run's `queue` phase, so the record says how long it
//! waited.
//!
//! A slot is an advisory lock (`flock(2)`, as the tenant lock in `run::lock`) on
//! `$XDG_RUNTIME_DIR/cyclix/slots/N.lock`, N in `0..max_runs`: the kernel releases it when the
//! run's cyclix exits, even on SIGKILL. The lock file holds its occupant (tenant, run, pid,
//! since) for `cyclix status`, and that is how a run counts until its sandbox is gone: a slot
//! whose lock is free but whose occupant's cyclix died with the run's marker (`RUN.running`)
//! still there is taken by that dead run until its convergence removes the marker (the tenant's
//! next run converges it right after taking the tenant lock, before it queues). A waiting run leaves
//! `$XDG_RUNTIME_DIR/cyclix/queue/RUN.json` while it waits; waiters take free slots oldest first
//! (a waiter takes a slot only while fewer older live waiters exist than slots are free). A queue
//! file whose pid is gone is stale: ignored, and removed by the next waiter that sees it.
//!
//! Waiting is a poll (every [`POLL`]) of non-blocking lock attempts: flock cannot wait for "any
//! of N files", and a blocking wait could not see SIGTERM or the deadline.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use crate::flock::{self, Access, Poll, WaitEnd};

/// How often a waiting run looks for a free slot.
pub const POLL: Duration = Duration::from_millis(200);

/// Where the slots and the queue live (both under `$XDG_RUNTIME_DIR/cyclix`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dirs {
    /// `…/cyclix/slots`: `N.lock` per slot.
    pub slots: PathBuf,
    /// `…/cyclix/queue`: `RUN.json` per waiting run.
    pub queue: PathBuf,
}

impl Dirs {
    /// The dirs under `runtime_dir` (`$XDG_RUNTIME_DIR`).
    #[must_use]
    pub fn under(runtime_dir: &Path) -> Self {
        let c = crate::layout::Runtime(runtime_dir.to_path_buf()).cyclix_dir();
        Dirs {
            slots: c.join("slots"),
            queue: c.join("queue"),
        }
    }
}

/// What a run asks of the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The dirs of the slots and the queue.
    pub dirs: Dirs,
    /// The limit (`max_runs`, or its default from the core count).
    pub max_runs: u32,
    /// The runs' records root (`~/.local/state/cyclix/runs`): a slot whose last occupant died
    /// with its marker `TENANT/RUN.running` still there is not free (its sandbox is up until
    /// it is converged).
    pub records: PathBuf,
    /// How long the run waits for a slot (`queue_timeout`); zero fails at once when full.
    pub timeout: Duration,
    /// The config file that sets the limit (named in the timeout's fix).
    pub config: String,
}

/// Who holds a slot or waits for one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Occupant {
    /// The tenant.
    pub tenant: String,
    /// The run id.
    pub run_id: String,
    /// The run's cyclix process.
    pub pid: u32,
    /// Since when it holds the slot (or waits), ms since the Unix epoch.
    pub since_ms: u64,
}

/// A held slot: dropping it (or the process ending) frees it.
#[derive(Debug)]
pub struct Slot {
    lock: flock::Held,
    /// The slot's number, `0..max_runs`.
    pub index: u32,
}

impl Slot {
    /// Rewrites the occupant in the slot file (a run that adopted a claimed environment's id:
    /// its marker is under that id, and a dead run's slot is known by its marker).
    ///
    /// # Errors
    /// The slot file cannot be written.
    pub fn set_occupant(&mut self, occupant: &Occupant) -> Result<()> {
        self.lock.set_holder(occupant)
    }
}

/// A `queue` phase taken by the caller before the run's lifecycle (`cyclix run` queues before
/// it claims): the phase as it went, what the record keeps of it, and the slot (shared so the
/// run's inputs stay `Clone`; freed when the last copy goes).
#[derive(Debug, Clone)]
pub struct Queued {
    /// The phase `queue`: its start, end and outcome (`ok` or why no slot was had).
    pub phase: crate::run::record::Phase,
    /// The record's `queue` object and its notice, when a slot was taken.
    pub taken: Option<(crate::run::record::QueueRecord, Option<String>)>,
    /// The slot, when one was taken.
    pub slot: Option<std::sync::Arc<Slot>>,
}

/// A slot taken, with how the run got it.
#[derive(Debug)]
pub struct Taken {
    /// The slot.
    pub slot: Slot,
    /// How long the run waited, ms (0 when a slot was free at once).
    pub waited_ms: u64,
    /// How many runs held the slots when this one first looked, and how many waited before it.
    pub busy_at_start: usize,
    /// Older live waiters when this run first looked.
    pub ahead_at_start: usize,
}

/// Why a run did not get a slot.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// `queue_timeout` passed with every slot held.
    #[error(
        "waited {waited_s} s for a run slot and all {max_runs} stayed taken ({holders}); \
         raise `max_runs` or `queue_timeout` in {config}, or run fewer tenants at once"
    )]
    Timeout {
        /// Seconds waited.
        waited_s: u64,
        /// The limit.
        max_runs: u32,
        /// Who held the slots at the end, `tenant/run` each.
        holders: String,
        /// The config file to change.
        config: String,
    },
    /// SIGTERM/SIGINT while waiting.
    #[error("interrupted (SIGTERM or SIGINT) while waiting for a run slot")]
    Interrupted,
    /// The slot or queue files could not be used.
    #[error("{0:#}")]
    Io(anyhow::Error),
}

/// Removes the run's queue file when the wait ends, however it ends.
struct QueueEntry(PathBuf);

impl Drop for QueueEntry {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Takes a slot for `me`, waiting (oldest waiter first) up to `req.timeout`; `interrupted` is
/// looked at every [`POLL`].
///
/// # Errors
/// [`WaitError`]: the timeout, an interrupt, or the slot/queue files not usable.
pub fn acquire(req: &Request, me: &Occupant, interrupted: &AtomicBool) -> Result<Taken, WaitError> {
    let io = WaitError::Io;
    for d in [&req.dirs.slots, &req.dirs.queue] {
        std::fs::create_dir_all(d)
            .with_context(|| format!("creating {}", d.display()))
            .map_err(io)?;
    }
    let start = Instant::now();
    let mut entry: Option<QueueEntry> = None;
    let mut first: Option<(usize, usize)> = None;
    let taken = flock::wait(Poll::every(POLL, req.timeout), Some(interrupted), || {
        let ahead = older_waiters(&req.dirs.queue, me);
        let mut free = try_slots(&req.dirs.slots, req.max_runs, &req.records)?;
        let busy = usize::try_from(req.max_runs)
            .unwrap_or(usize::MAX)
            .saturating_sub(free.len());
        let (busy_at_start, ahead_at_start) = *first.get_or_insert((busy, ahead));
        if !free.is_empty() && ahead < free.len() {
            let (index, file, path) = free.swap_remove(0);
            drop(free); // the others go back at once
            return Ok(Some(Taken {
                slot: Slot {
                    lock: flock::Held::new(file, &path, me)?,
                    index,
                },
                waited_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
                busy_at_start,
                ahead_at_start,
            }));
        }
        drop(free);
        if entry.is_none() {
            let p = req.dirs.queue.join(format!("{}.json", me.run_id));
            write_atomic(&p, me)?;
            tracing::info!(
                "all {} run slots are taken ({ahead} run(s) waiting before this one): queued",
                req.max_runs
            );
            entry = Some(QueueEntry(p));
        }
        Ok(None)
    });
    match taken {
        Ok(t) => Ok(t),
        Err(WaitEnd::Failed(e)) => Err(WaitError::Io(e)),
        Err(WaitEnd::Interrupted) => Err(WaitError::Interrupted),
        Err(WaitEnd::Deadline) => {
            let holders = occupants(&req.dirs.slots)
                .iter()
                .map(|o| format!("{}/{}", o.tenant, o.run_id))
                .chain(dead_occupants(&req.dirs.slots, &req.records).iter().map(|o| {
                    format!(
                        "{}/{} (its cyclix died; its sandbox stays up until `cyclix run {}` \
                         converges it)",
                        o.tenant, o.run_id, o.tenant
                    )
                }))
                .collect::<Vec<_>>()
                .join(", ");
            Err(WaitError::Timeout {
                waited_s: start.elapsed().as_secs(),
                max_runs: req.max_runs,
                holders,
                config: req.config.clone(),
            })
        }
    }
}

/// The slots of `0..max_runs` that could be locked now and are not a dead run's (see
/// [`dead_run`]), each locked (dropping one frees it), with its number and path. (A run of the
/// dead run's own tenant converged it before it queued: `cyclix run` converges first.)
fn try_slots(dir: &Path, max_runs: u32, records: &Path) -> Result<Vec<(u32, File, PathBuf)>> {
    let mut free = Vec::new();
    for i in 0..max_runs {
        let p = dir.join(format!("{i}.lock"));
        let mut f = flock::open(&p)?;
        if flock::try_lock(&f, Access::Exclusive)
            .with_context(|| format!("locking run slot {}", p.display()))?
            && dead_run(&mut f, records).is_none()
        {
            free.push((i, f, p));
        }
    }
    Ok(free)
}

/// The last occupant of a slot file nobody holds, when it is a run whose cyclix died before
/// its sandbox was gone: the lock is free (its process is gone: a release empties the file)
/// and its marker `records/TENANT/RUN.running` is still there (convergence removes it once
/// nothing of the run is left). No pid is compared: a reused pid says nothing.
fn dead_run(file: &mut File, records: &Path) -> Option<Occupant> {
    let o = flock::read_holder::<Occupant>(file)?;
    let marker = crate::layout::RunFiles::new(&records.join(&o.tenant), &o.run_id).marker();
    marker.exists().then_some(o)
}

/// The slots' dead runs (see [`dead_run`]), by slot number.
fn dead_occupants(slots: &Path, records: &Path) -> Vec<Occupant> {
    slot_files(slots)
        .into_iter()
        .filter_map(|p| {
            let mut f = File::open(&p).ok()?;
            if !matches!(flock::try_lock(&f, Access::Shared), Ok(true)) {
                return None;
            }
            dead_run(&mut f, records)
        })
        .collect()
}

/// The slot files in `slots` (`N.lock`, whatever the limit), by slot number.
fn slot_files(slots: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(slots) else {
        return Vec::new();
    };
    let mut files: Vec<(u32, PathBuf)> = rd
        .flatten()
        .filter_map(|e| {
            let p = e.path();
            let n = p.file_stem()?.to_str()?.parse().ok()?;
            (p.extension()?.to_str()? == "lock").then_some((n, p))
        })
        .collect();
    files.sort();
    files.into_iter().map(|(_, p)| p).collect()
}

fn write_atomic(path: &Path, me: &Occupant) -> Result<()> {
    crate::atomic::replace(
        path,
        &serde_json::to_vec(me).context("serialising the queue entry")?,
    )
}

/// Whether `pid` is a live process (`/proc/PID` exists).
fn alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// The live waiters, oldest first (by `since_ms`, then run id). A file of a dead pid is
/// removed; a file that does not parse is skipped (it may be mid-write).
#[must_use]
pub fn waiters(queue: &Path) -> Vec<Occupant> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(queue) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        let Ok(o) = serde_json::from_str::<Occupant>(&text) else {
            continue;
        };
        if alive(o.pid) {
            out.push(o);
        } else {
            let _ = std::fs::remove_file(&p);
        }
    }
    out.sort_by(|a, b| (a.since_ms, &a.run_id).cmp(&(b.since_ms, &b.run_id)));
    out
}

fn older_waiters(queue: &Path, me: &Occupant) -> usize {
    waiters(queue)
        .iter()
        .filter(|o| o.run_id != me.run_id && (o.since_ms, &o.run_id) < (me.since_ms, &me.run_id))
        .count()
}

/// Who holds a slot now (any slot file in `slots`, whatever the limit), by slot number.
/// A slot file nobody holds is free, whatever it still says.
#[must_use]
pub fn occupants(slots: &Path) -> Vec<Occupant> {
    let mut held = Vec::new();
    for p in slot_files(slots) {
        let Ok(mut f) = File::open(&p) else {
            continue;
        };
        if matches!(flock::try_lock(&f, Access::Shared), Ok(false))
            && let Some(o) = flock::read_holder::<Occupant>(&mut f)
        {
            held.push(o);
        }
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me(run: &str, since: u64) -> Occupant {
        Occupant {
            tenant: "t".into(),
            run_id: run.into(),
            pid: std::process::id(),
            since_ms: since,
        }
    }

    fn req(dir: &Path, max: u32, timeout_ms: u64) -> Request {
        Request {
            dirs: Dirs {
                slots: dir.join("slots"),
                queue: dir.join("queue"),
            },
            max_runs: max,
            records: dir.join("runs"),
            timeout: Duration::from_millis(timeout_ms),
            config: "cfg.yaml".into(),
        }
    }

    #[test]
    fn slots_up_to_the_limit_then_a_timeout_naming_the_holders() {
        let dir = tempfile::tempdir().expect("tmp");
        let rq = req(dir.path(), 2, 0);
        // A slot file's lock goes with the last descriptor of it, and a process another test
        // forks holds a copy of every descriptor until its exec (close-on-exec): a slot just
        // tried and let go can look taken for that moment. So a slot that should be free is
        // waited for, as a run waits (POLL), never expected within 0 ms.
        let patient = req(dir.path(), 2, 60_000);
        let no = AtomicBool::new(false);
        let first = acquire(&patient, &me("a", 1), &no).expect("slot 1");
        let second = acquire(&patient, &me("b", 2), &no).expect("slot 2");
        assert_ne!(first.slot.index, second.slot.index);
        // At its first look: `first`'s slot, and for the fork's moment perhaps the one
        // `first` tried and let go (see above).
        assert!(
            matches!(second.busy_at_start, 1 | 2),
            "{}",
            second.busy_at_start
        );
        let err = acquire(&rq, &me("c", 3), &no).expect_err("full");
        let msg = err.to_string();
        assert!(
            matches!(err, WaitError::Timeout { max_runs: 2, .. }),
            "{msg}"
        );
        assert!(
            msg.contains("t/a") && msg.contains("t/b") && msg.contains("cfg.yaml"),
            "{msg}"
        );
        assert!(
            waiters(&rq.dirs.queue).is_empty(),
            "the queue entry went with the wait"
        );
        assert_eq!(occupants(&rq.dirs.slots).len(), 2);
        drop(first);
        let third = acquire(&patient, &me("c", 3), &no).expect("a freed slot");
        assert_eq!(occupants(&rq.dirs.slots).len(), 2);
        drop((second, third));
        let free = acquire(&patient, &me("d", 4), &no).expect("free");
        let again = acquire(&patient, &me("e", 5), &no).expect("free");
        assert_ne!(
            free.slot.index, again.slot.index,
            "both slots were free again"
        );
    }

    #[test]
    fn an_older_live_waiter_goes_first_and_a_dead_one_is_ignored() {
        let d = tempfile::tempdir().expect("tmp");
        let r = req(d.path(), 1, 0);
        let no = AtomicBool::new(false);
        std::fs::create_dir_all(&r.dirs.queue).expect("dir");
        write_atomic(&r.dirs.queue.join("old.json"), &me("old", 1)).expect("w");
        assert!(
            matches!(
                acquire(&r, &me("new", 5), &no),
                Err(WaitError::Timeout { .. })
            ),
            "the free slot is the older waiter's"
        );
        let mut dead = me("old", 1);
        dead.pid = u32::MAX - 1; // no such process
        write_atomic(&r.dirs.queue.join("old.json"), &dead).expect("w");
        // Patient: the slot the first look tried may look taken for a fork's moment.
        let t =
            acquire(&req(d.path(), 1, 60_000), &me("new", 5), &no).expect("a dead waiter is stale");
        assert_eq!(t.ahead_at_start, 0);
        assert!(
            !r.dirs.queue.join("old.json").exists(),
            "stale entry removed"
        );
    }

    #[test]
    fn a_dead_runs_slot_stays_taken_until_its_marker_is_gone() {
        let d = tempfile::tempdir().expect("tmp");
        let r = req(d.path(), 1, 0);
        let no = AtomicBool::new(false);
        // A run that took the slot and died (SIGKILL): its lock went with it, its file still
        // names it (a release empties the file; a SIGKILL cannot).
        let mut dead = me("killed", 1);
        dead.tenant = "other".into();
        dead.pid = u32::MAX - 1; // no such process
        let patient = req(d.path(), 1, 60_000);
        std::fs::create_dir_all(&r.dirs.slots).expect("dir");
        std::fs::write(
            r.dirs.slots.join("0.lock"),
            serde_json::to_vec(&dead).expect("json"),
        )
        .expect("slot file");
        let marker = crate::layout::RunFiles::new(&r.records.join("other"), "killed").marker();
        std::fs::create_dir_all(marker.parent().expect("dir")).expect("dir");
        std::fs::write(&marker, b"{}").expect("marker");
        let err = acquire(&r, &me("next", 2), &no).expect_err("the dead run's sandbox counts");
        assert!(
            err.to_string().contains("other/killed (its cyclix died"),
            "{err}"
        );
        // Converged (the marker removed): the slot is free.
        std::fs::remove_file(&marker).expect("rm");
        acquire(&patient, &me("next", 2), &no).expect("free once converged");
    }

    #[test]
    fn an_interrupt_ends_the_wait_and_a_wait_ends_when_a_slot_frees() {
        let d = tempfile::tempdir().expect("tmp");
        let r = req(d.path(), 1, 60_000);
        let no = AtomicBool::new(false);
        let held = acquire(&r, &me("a", 1), &no).expect("slot");
        let yes = AtomicBool::new(true);
        assert!(matches!(
            acquire(&r, &me("b", 2), &yes),
            Err(WaitError::Interrupted)
        ));
        let r2 = r.clone();
        let waiter = std::thread::spawn(move || {
            acquire(&r2, &me("b", 2), &AtomicBool::new(false)).map(|t| t.ahead_at_start)
        });
        // The waiter is queued once its file is there (its own mark); then the slot frees. A
        // waiter that ended without queueing fails the test at once, whatever the load.
        while waiters(&r.dirs.queue).is_empty() {
            assert!(!waiter.is_finished(), "the waiter ended without queueing");
            std::thread::yield_now();
        }
        drop(held);
        assert_eq!(waiter.join().expect("join").expect("got the slot"), 0);
    }
}
