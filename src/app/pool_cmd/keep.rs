//! `cyclix pool keep TENANT` (`cyclix-pool@TENANT.service`, issue 16): the long-running keeper
//! of a tenant's warm pool. Each round it converges environments of fillers that died,
//! destroys the ready ones that are dead (`pool_ops::destroy_dead`), reads the tenant timer's
//! next elapse, decides (`run::pool::keeper::decide`: expire, fill one, or
//! wait until a deadline), acts, and writes what it does to `keeper.json` in the pool's
//! directory (`cyclix status`, `cyclix check`). It waits on an inotify event of the pool's
//! `ready/` (a claim renames `ready/ENV` away) with the decision's deadline as timeout.
//!
//! A failed fill (destroyed by the fill itself, nothing half-made) is retried after a bounded
//! backoff and its error is in the state file. SIGTERM or SIGINT: a fill in progress is
//! finished (or destroyed when it fails), then the keeper exits 0. A keeper killed by SIGKILL is
//! restarted by its unit (`Restart=on-failure`) and the new one converges the half-made
//! environment its predecessor left in `filling/` (its pid is dead).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, Result};

use super::super::clock::{new_run_id, now_ms};
use super::super::pool_ops::{
    DeadNote, converge_dead_claims_unlocked, converge_dead_fillers, destroy_dead, with_env_host,
};

/// How soon the keeper looks again while a run's claim is being handed over (it may die
/// there, leaving the credentials in the claimed proxy): 2 s, in ms.
const CLAIM_RECHECK_MS: u128 = 2_000;
use super::super::tenant::{random_log_key, random_placeholders, runnable_spec};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::run::pool;
use crate::run::pool::env::EnvHost;
use crate::run::pool::keeper::{self, Decision, Facts, KeeperState, Schedule};
use crate::systemd::{ActiveState, UnitManager};

/// What wakes the keeper before its deadline.
enum Wake {
    /// Something entered or left the pool's `ready/`.
    Pool,
    /// SIGTERM or SIGINT.
    Term,
}

/// The debug-build-only override of `pool.max_idle` in ms (the spec's minimum is 1 min; an
/// e2e test sets it in a drop-in of the keeper's unit to see an expiry without waiting).
const MAX_IDLE_ENV: &str = "CYCLIX_POOL_MAX_IDLE_MS";

/// `pool.max_idle` in ms, or the debug builds' override ([`MAX_IDLE_ENV`]).
fn max_idle_ms(spec_s: u64) -> u128 {
    let spec = u128::from(spec_s) * 1000;
    if !cfg!(debug_assertions) {
        return spec;
    }
    std::env::var(MAX_IDLE_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(spec)
}

/// `cyclix pool keep TENANT`: keeps the pool until SIGTERM (exit 0).
///
/// # Errors
/// No runtime dir, the pool's directory cannot be watched, the signal handler cannot be
/// installed, or the state file cannot be written.
pub fn keep(env: &HostEnv, tenant: &str) -> Result<Outcome> {
    let dir = crate::layout::Runtime(env.runtime_dir()?.clone()).pool_dir(tenant);
    let (tx, rx) = mpsc::channel();
    let term = watch_signals(tx.clone())?;
    watch_ready(&dir.join("ready"), tx)?;
    let mut k = Keeper {
        tenant: tenant.to_string(),
        dir,
        term,
        st: KeeperState {
            pid: std::process::id(),
            ..KeeperState::default()
        },
    };
    crate::outln!("pool {tenant}: keeper started (pid {})", k.st.pid);
    let mut metrics = MetricsPace::default();
    while !k.term.load(Ordering::SeqCst) {
        let wake_ms = k.round(env)?;
        metrics.after_pass(env, &k);
        let wait = Duration::from_millis(
            u64::try_from(wake_ms.saturating_sub(now_ms())).unwrap_or(u64::MAX),
        );
        if matches!(wait_for(&rx, wait)?, Some(Wake::Term)) {
            break;
        }
    }
    k.st.state = "stopped".into();
    k.st.updated_ms = now_ms();
    k.st.write(&k.dir)?;
    metrics.after_pass(env, &k);
    crate::outln!("pool {tenant}: keeper stopped (SIGTERM)");
    Ok(Outcome::Ok)
}

/// Waits up to `wait` for a wake; `None` on the timeout. Wakes that queued meanwhile are
/// taken together (a claim and an expiry are one round).
fn wait_for(rx: &Receiver<Wake>, wait: Duration) -> Result<Option<Wake>> {
    let first = match rx.recv_timeout(wait) {
        Ok(w) => w,
        Err(RecvTimeoutError::Timeout) => return Ok(None),
        Err(RecvTimeoutError::Disconnected) => {
            anyhow::bail!("the keeper's event threads ended (inotify or signals)")
        }
    };
    let mut term = matches!(first, Wake::Term);
    while let Ok(w) = rx.try_recv() {
        term |= matches!(w, Wake::Term);
    }
    Ok(Some(if term { Wake::Term } else { Wake::Pool }))
}

/// Installs the SIGTERM/SIGINT handling: a flag a fill in progress leaves alone (it is
/// finished first) and a wake of the wait.
fn watch_signals(tx: Sender<Wake>) -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let term = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
        .context("installing the SIGTERM/SIGINT handler")?;
    let flag = term.clone();
    std::thread::Builder::new()
        .name("keeper-signals".into())
        .spawn(move || {
            for _ in signals.forever() {
                flag.store(true, Ordering::SeqCst);
                if tx.send(Wake::Term).is_err() {
                    break;
                }
            }
        })
        .context("starting the signal thread")?;
    Ok(term)
}

/// Watches `ready` (created if needed) with inotify: an environment renamed into or out of it
/// (a fill, a claim, an expiry) or removed wakes the keeper.
fn watch_ready(ready: &Path, tx: Sender<Wake>) -> Result<()> {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    std::fs::create_dir_all(ready).with_context(|| format!("creating {}", ready.display()))?;
    let ino = Inotify::init(InitFlags::IN_CLOEXEC).context("inotify_init")?;
    ino.add_watch(
        ready,
        AddWatchFlags::IN_MOVED_FROM | AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_DELETE,
    )
    .with_context(|| format!("watching {}", ready.display()))?;
    std::thread::Builder::new()
        .name("keeper-inotify".into())
        .spawn(move || {
            loop {
                match ino.read_events() {
                    Ok(_) => {
                        if tx.send(Wake::Pool).is_err() {
                            break;
                        }
                    }
                    Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => {
                        crate::stderrln!("error: the pool's inotify watch failed: {e}");
                        break;
                    }
                }
            }
        })
        .context("starting the inotify thread")?;
    Ok(())
}

/// How often the keeper writes the metrics file (issue 32 item 4): after a pass that changed
/// what the pool holds or what the keeper says, and at least once a minute while it passes
/// (a pass while a claim is handed over comes every 2 s; each write reads every run record).
#[derive(Default)]
struct MetricsPace {
    /// What the last write showed: the pool's counts and the keeper's state, failures,
    /// fills and expiries.
    last: Option<(crate::run::pool::Counts, String, usize, u32, u64, u64)>,
    /// When it wrote, ms since the epoch.
    at_ms: u128,
}

impl MetricsPace {
    /// The interval at which an unchanged pool is written again: 60 s.
    const EVERY_MS: u128 = 60_000;

    /// Writes the metrics after a pass of `k` when due; a failure is said on stderr (the
    /// keeper goes on).
    fn after_pass(&mut self, env: &HostEnv, k: &Keeper) {
        let counts = pool::PoolState::new(k.dir.clone())
            .counts()
            .unwrap_or_default();
        let now = (
            counts,
            k.st.state.clone(),
            k.st.want,
            k.st.failures,
            k.st.filled,
            k.st.expired,
        );
        let t = now_ms();
        if self.last.as_ref() == Some(&now) && t.saturating_sub(self.at_ms) < Self::EVERY_MS {
            return;
        }
        super::super::metrics::write_after(env, &format!("a pass of {}'s pool keeper", k.tenant));
        self.last = Some(now);
        self.at_ms = t;
    }
}

/// The keeper's state between rounds.
struct Keeper {
    tenant: String,
    dir: PathBuf,
    term: Arc<AtomicBool>,
    st: KeeperState,
}

impl Keeper {
    /// One round: load the spec, converge, then expire and fill until the decision is to wait;
    /// returns when to wake at the latest (ms since the epoch).
    fn round(&mut self, env: &HostEnv) -> Result<u128> {
        let tenant = self.tenant.clone();
        let loaded = runnable_spec(env, &tenant, None, None, &|_| None)?;
        let Some((spec, backend)) = loaded else {
            return self.blocked("the tenant's spec does not load or cannot run (the lines above in the keeper's log say why)");
        };
        if let Some(why) = pool::why_cold(&spec, backend) {
            return self.blocked(&format!(
                "its runs cannot claim a pooled environment: {why}"
            ));
        }
        let Some(p) = spec.pool.clone() else {
            return self.blocked("the tenant has no pool");
        };
        if self.st.state == "blocked" {
            // The spec is fine again: what blocked the pool is over.
            self.st.failures = 0;
            self.st.last_error.clear();
            self.st.retry_at_ms = None;
        }
        with_env_host(env, &spec, |eh| {
            for n in converge_dead_fillers(eh)? {
                crate::stderrln!("{n}");
            }
            // A run that died in its hand-over leaves the credentials in a claimed proxy: the
            // keeper converges it, and looks again within CLAIM_RECHECK while a claim is
            // still being handed over.
            let (notes, claim_pending) = converge_dead_claims_unlocked(env, eh)?;
            for n in notes {
                crate::stderrln!("{n}");
            }
            // A ready environment whose proxy or pod died (the user manager restarted, which
            // restarts the keeper too; its proxy killed) is destroyed; the loop refills.
            for n in destroy_dead(env, eh)? {
                n.say()?;
                if matches!(n, DeadNote::Destroyed(_)) {
                    self.st.dead += 1;
                }
            }
            loop {
                let now = now_ms();
                let schedule = schedule(eh.units, &tenant);
                let ready = eh.state.ready_envs()?;
                let facts = Facts {
                    now_ms: now,
                    size: p.size as usize,
                    ready_ms: ready.iter().map(|f| f.ready_ms).collect(),
                    filling: eh.state.counts()?.filling,
                    max_idle_ms: max_idle_ms(p.max_idle_s),
                    warm_before_ms: u128::from(p.warm_before_s) * 1000,
                    schedule,
                    retry_at_ms: self.st.retry_at_ms,
                };
                let d = keeper::decide(&facts);
                self.note(&d, schedule, now)?;
                if self.term.load(Ordering::SeqCst) {
                    return Ok(now);
                }
                if d.expire {
                    self.expire(eh, now, facts.max_idle_ms)?;
                } else if d.fill {
                    self.fill(env, eh)?;
                } else if claim_pending {
                    return Ok(d.wake_ms.min(now + CLAIM_RECHECK_MS));
                } else {
                    return Ok(d.wake_ms);
                }
            }
        })
    }

    /// Writes the decision down (`keeper.json`).
    fn note(&mut self, d: &Decision, schedule: Schedule, now: u128) -> Result<()> {
        let st = &mut self.st;
        st.updated_ms = now;
        st.want = d.want;
        st.warm_from_ms = d.warm_from_ms;
        st.next_elapse_ms = match schedule {
            Schedule::Next(t) => Some(t),
            _ => None,
        };
        st.next_wake_ms = d.wake_ms;
        st.state = if d.fill {
            "filling"
        } else if st.failures > 0 {
            "retrying"
        } else if d.want == 0 && d.warm_from_ms.is_some() || schedule == Schedule::Pending {
            "waiting"
        } else {
            "full"
        }
        .into();
        st.write(&self.dir)
    }

    /// The tenant cannot have a pool now (`why`): written down; read again after a backoff
    /// (the spec may be fixed meanwhile).
    fn blocked(&mut self, why: &str) -> Result<u128> {
        let now = now_ms();
        if self.st.last_error != why {
            crate::stderrln!("error: pool {}: {why}", self.tenant);
            self.st.failures = 0;
        }
        self.st.failures = self.st.failures.saturating_add(1);
        self.st.state = "blocked".into();
        self.st.last_error = why.to_string();
        self.st.last_error_ms = now;
        let wake = now + keeper::backoff_ms(self.st.failures);
        self.st.retry_at_ms = Some(wake);
        self.st.next_wake_ms = wake;
        self.st.updated_ms = now;
        self.st.write(&self.dir)?;
        Ok(wake)
    }

    /// Destroys every ready environment idle `max_idle_ms` or longer at `now`.
    fn expire(&mut self, eh: &EnvHost<'_>, now: u128, max_idle_ms: u128) -> Result<()> {
        for f in eh.state.take_expired(now, max_idle_ms)? {
            let idle_s = now.saturating_sub(f.ready_ms) / 1000;
            match eh.destroy(&f.env, &eh.state.expiring_path(&f.env)) {
                None => {
                    self.st.expired += 1;
                    crate::outln!(
                        "pool {}: environment {} expired (idle {idle_s} s) and destroyed",
                        self.tenant,
                        f.env
                    );
                }
                Some(l) => crate::stderrln!("error: pool {}: {l}", self.tenant),
            }
        }
        Ok(())
    }

    /// Fills one environment; a failure (the fill destroyed what it made) is written down
    /// with the time of the next attempt.
    fn fill(&mut self, env: &HostEnv, eh: &EnvHost<'_>) -> Result<()> {
        let id = new_run_id(SystemTime::now(), std::process::id());
        let res = eh.fill(
            &id,
            &random_log_key()?,
            &random_placeholders(eh.spec)?,
            now_ms,
        );
        let now = now_ms();
        match res {
            Ok(f) => {
                crate::outln!(
                    "pool {}: environment {} ready ({} ms)",
                    self.tenant,
                    f.env,
                    f.ready_ms.saturating_sub(f.began_ms)
                );
                self.st.filled += 1;
                self.st.failures = 0;
                self.st.retry_at_ms = None;
                self.st.last_error.clear();
            }
            Err(e) => {
                self.st.failures = self.st.failures.saturating_add(1);
                let retry = now + keeper::backoff_ms(self.st.failures);
                let note = super::super::pool_ops::fill_failure_note(env);
                crate::stderrln!(
                    "error: pool {}: filling environment {id}: {e:#}{note} (failure {} in a row; next attempt at {})",
                    self.tenant,
                    self.st.failures,
                    super::super::clock::utc_timestamp(retry)
                );
                self.st.last_error = format!("filling environment {id}: {e:#}{note}");
                self.st.last_error_ms = now;
                self.st.retry_at_ms = Some(retry);
            }
        }
        self.st.updated_ms = now;
        self.st.write(&self.dir)
    }
}

/// The tenant's schedule: its timer's next elapse when the timer is active (`None` when it
/// is not, e.g. no `schedule:`, paused, never installed). A manager that cannot be asked
/// counts as [`Schedule::Pending`]: nothing is filled until it answers.
fn schedule(units: &dyn UnitManager, tenant: &str) -> Schedule {
    let timer = crate::naming::run_timer(tenant);
    // A timer that is not loaded is not active: asking its state first would load the template
    // instance of a tenant without `schedule:`, which systemd refuses in the journal each time
    // ("Timer unit lacks value setting"). `timer_next_elapse` does not load it.
    let next = match units.timer_next_elapse(&timer) {
        Err(crate::systemd::Error::NoSuchUnit { .. }) => return Schedule::None,
        other => other,
    };
    match units.unit_status(&timer) {
        Ok(s) if s.active_state == ActiveState::Active => {}
        Ok(_) => return Schedule::None,
        Err(e) => {
            crate::stderrln!("warning: pool {tenant}: reading {timer}: {e}");
            return Schedule::Pending;
        }
    }
    match next {
        Ok(n) => n.realtime_us.map_or(Schedule::Pending, |us| {
            Schedule::Next(u128::from(us / 1000))
        }),
        Err(e) => {
            crate::stderrln!("warning: pool {tenant}: reading {timer}'s next elapse: {e}");
            Schedule::Pending
        }
    }
}
