//! What a run holds while it runs, at the bottom of `run/` (phases and compositions use it,
//! it uses neither): the run's state ([`RunState`]: its ledger and what it saw on the way),
//! the phase recorder ([`Recorder`]) and the clock ([`now_ms`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, anyhow};

use super::ledger::Ledger;
use super::record::Phase;
use super::tripwire::Tripwires;

/// Milliseconds since the Unix epoch (0 before it).
pub(crate) fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Records each phase's timing and outcome; a phase that fails adds `phase NAME` to the error.
pub(crate) struct Recorder {
    pub(crate) phases: Vec<Phase>,
    interrupted: Option<Arc<AtomicBool>>,
    progress: Option<PathBuf>,
}

impl Recorder {
    /// A recorder whose phases (except `teardown` and `audit`) fail once `interrupted` is set;
    /// each phase is noted in `progress` (for convergence) when given.
    pub(crate) fn new(interrupted: Option<Arc<AtomicBool>>, progress: Option<PathBuf>) -> Self {
        Recorder {
            phases: Vec::new(),
            interrupted,
            progress,
        }
    }

    /// Runs `f` as phase `name` ([`Recorder::begin`], then `f` unless the run was
    /// interrupted, then [`Recorder::end`]).
    ///
    /// # Errors
    /// `f`'s error, or the interruption's, with `phase NAME` added.
    pub(crate) fn phase<T>(&mut self, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let (begun, stopped) = self.begin(name);
        let r = match stopped {
            Some(e) => Err(e),
            None => f(),
        };
        self.end(begun, r)
    }

    /// Starts phase `name`: logs it (every line logged until [`Recorder::end`] carries the
    /// journal field `CYCLIX_PHASE`, issue 18, item 4), notes it in the progress file and
    /// marks its start. The second value is the error the phase ends with instead of running
    /// when the run was interrupted (`teardown` and `audit` always run). For a caller whose
    /// phase needs the caller itself (`kube-run`); others use [`Recorder::phase`].
    pub(crate) fn begin(&self, name: &str) -> (Begun, Option<anyhow::Error>) {
        let span = tracing::info_span!("phase", cyclix_phase = name).entered();
        tracing::info!("phase {name} started");
        reached(self.progress.as_deref(), &format!("phase.{name}"), name);
        let start_ms = now_ms();
        let interrupted = !matches!(name, "teardown" | "audit")
            && self
                .interrupted
                .as_ref()
                .is_some_and(|i| i.load(Ordering::SeqCst));
        let stopped = interrupted.then(|| {
            anyhow!("stopped by a person (SIGTERM or SIGINT) before this phase began; tearing down")
        });
        let begun = Begun {
            name: name.to_owned(),
            start_ms,
            _span: span,
        };
        (begun, stopped)
    }

    /// Ends the phase `begun` with `r`: its timing and outcome recorded.
    ///
    /// # Errors
    /// `r`'s error with `phase NAME` added.
    pub(crate) fn end<T>(&mut self, begun: Begun, r: Result<T>) -> Result<T> {
        let name = begun.name;
        let outcome = match &r {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("{e:#}"),
        };
        tracing::info!("phase {name}: {outcome}");
        self.phases.push(Phase {
            name: name.clone(),
            start_ms: begun.start_ms,
            end_ms: now_ms(),
            outcome,
        });
        r.with_context(|| format!("phase {name}"))
    }
}

/// A phase begun ([`Recorder::begin`]): its name, its start and the log span it holds open.
pub(crate) struct Begun {
    name: String,
    start_ms: u128,
    _span: tracing::span::EnteredSpan,
}

/// What a run holds while it runs: its ledger (everything it created, on disk as it grows)
/// and what it saw on the way, for the audit and the record.
#[derive(Debug)]
pub(crate) struct RunState {
    /// What the run created ([`Ledger`]); teardown undoes exactly that (plus a by-label sweep).
    pub(crate) ledger: Ledger,
    /// The planted tripwires (and the sentinel's handle), once planted.
    pub(crate) tripwires: Option<Tripwires>,
    /// The repository's refs before the run (for the audit's ref check; host tiers).
    pub(crate) refs_before: Option<Vec<(String, String)>>,
    /// The user's repository before the run (tier `container`: compared after the import).
    pub(crate) repo_before: Option<super::repo_state::RepoState>,
    /// The run branch (in the ledger before it is made) exists: made with the worktree (host
    /// tiers) or by the import (tier `container`).
    pub(crate) branch_made: bool,
    /// Set by teardown: a git operation was half done in the worktree when it was removed.
    pub(crate) in_progress: Option<String>,
    /// Notices for the record found on the way (e.g. a wait for podman's storage lock).
    pub(crate) notices: Vec<String>,
    /// The run's slot under the host's `max_runs`, held until the run's state is dropped
    /// (after teardown and the audit).
    pub(crate) slot: Option<super::capacity::Slot>,
}

impl RunState {
    /// A run that has created nothing yet but its ledger.
    pub(crate) fn new(ledger: Ledger) -> Self {
        RunState {
            ledger,
            tripwires: None,
            refs_before: None,
            repo_before: None,
            branch_made: false,
            in_progress: None,
            notices: Vec::new(),
            slot: None,
        }
    }

    /// Whether the run's work tree is its private repository (tier `container`).
    pub(crate) fn private_tree(&self) -> bool {
        self.ledger.worktree().is_some_and(|(_, private)| private)
    }
}

/// Notes `what` (a phase, `teardown/STEP`) in the progress file, then passes the fail point
/// of that name (`crate::failpoint`). Best effort: the note is for convergence's record only.
pub(crate) fn reached(progress: Option<&Path>, point: &str, what: &str) {
    if let Some(p) = progress {
        let _ = crate::atomic::replace(p, what.as_bytes());
    }
    crate::failpoint::kill_point(point);
}
