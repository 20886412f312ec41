//! The run lifecycle (`cyclix run TENANT`): prepare → render → install → reload → start →
//! agent → gate → collect → teardown → audit → record. See DESIGN.md "Lifecycle".
//!
//! Three floors; a file imports only its own floor or a lower one, and no files form an
//! import circle (the architecture test `run_floors` holds both, with planted controls):
//!
//! 1. the run's state and record and the adapters: [`state`] (`RunState`, `Recorder`,
//!    `now_ms`), [`record`] and its parts, [`ledger`], [`seam`] (the ports `RunGit`,
//!    `RunPodman`, `RunJournal`, `RunProcs`), [`inputs`], the host helpers;
//! 2. the phases ([`phases`]): each takes a narrow view of its inputs and the ports it uses,
//!    and returns a report of facts; none names `RunRecord`;
//! 3. the compositions: [`lifecycle`] (it runs the phases over one `Recorder` and folds
//!    their reports into the record, `lifecycle/fold.rs`), [`twin`], [`pool`], [`converge`].
//!
//! A new record field: the field in `record.rs`, the fact in its phase's report, one fold
//! line in `lifecycle/fold.rs`. A new phase: `phases/NAME.rs`, its `mod` line in
//! `phases.rs`, its call (and fold) in `lifecycle.rs`, its name in `failpoint::PHASES`.

pub mod boundary;
pub mod canary;
pub mod capacity;
pub mod claim_fifo;
pub mod converge;
pub mod exec_only;
pub(crate) mod gate_cache;
pub mod handover;
pub mod host;
pub mod import;
pub mod inputs;
pub mod ledger;
pub mod lifecycle;
pub mod lock;
pub mod output;
pub(crate) mod phases;
pub mod pool;
pub mod procs;
pub mod record;
pub mod repo_state;
pub mod report_fifo;
pub mod reserve;
pub mod seam;
pub mod space;
pub(crate) mod state;
pub mod storage_lock;
pub mod tick;
pub mod tripwire;
pub mod twin;
pub(crate) mod warm;
