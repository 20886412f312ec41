//! The phases of a run (floor 2 of `run/`: they use the state, the record's parts and the
//! adapters below them, never a composition above): prepare (with the delivery's start),
//! build, bring-up (render, install, reload, start), probe, baseline, agent, import, gate,
//! collect, setup's checks, deliver, teardown and audit. `run::lifecycle::execute` composes
//! them for `cyclix run`, `run::twin` for each side of a twin run; teardown and the audit also
//! serve the convergence of a run whose cyclix died (`run::converge`), over its ledger.

pub(crate) mod agent;
pub(crate) mod audit;
pub(crate) mod baseline;
pub(crate) mod bring_up;
pub(crate) mod build;
pub(crate) mod collect;
pub mod deliver;
pub(crate) mod gate;
pub(crate) mod import;
pub(crate) mod invocations;
pub(crate) mod prepare;
pub(crate) mod probe;
pub(crate) mod setup;
pub(crate) mod teardown;

pub(crate) use super::state::reached;
