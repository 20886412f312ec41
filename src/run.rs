//! The run lifecycle (`cyclix run TENANT`): prepare → render → install → reload → start →
//! agent → gate → collect → teardown → audit → record. See DESIGN.md "Lifecycle".

pub mod boundary;
pub mod canary;
pub mod capacity;
pub mod converge;
pub mod exec_only;
pub(crate) mod gate_cache;
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
