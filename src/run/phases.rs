//! The phases of a run, each over the parts of the run it needs: prepare, bring-up (render,
//! install, reload, start), probe, agent (and gate), collect, teardown and audit (plus
//! `run::import_phase` and `run::delivery`). `run::lifecycle::execute` composes them for
//! `cyclix run`, `run::twin` for each side of a twin run; teardown and the audit also serve
//! the convergence of a run whose cyclix died (`run::converge`), over its ledger.

pub(crate) mod agent;
pub(crate) mod audit;
pub(crate) mod bring_up;
pub(crate) mod collect;
pub(crate) mod gate;
pub(crate) mod invocations;
pub(crate) mod prepare;
pub(crate) mod probe;
pub(crate) mod teardown;

use std::path::Path;

/// Notes `what` (a phase, `teardown/STEP`) in the progress file, then passes the fail point
/// of that name (`crate::failpoint`). Best effort: the note is for convergence's record only.
pub(crate) fn reached(progress: Option<&Path>, point: &str, what: &str) {
    if let Some(p) = progress {
        let tmp = p.with_extension("phase.tmp");
        if std::fs::write(&tmp, what).is_ok() {
            let _ = std::fs::rename(&tmp, p);
        }
    }
    crate::failpoint::kill_point(point);
}
