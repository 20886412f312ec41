//! [`settle`]: the pure decision that turns "the job finished" plus "the unit's state" into an
//! outcome (field report B22).

use super::{ActiveState, Error, JobResult, Op, Settled, UnitStatus};

/// Decides what a finished job means, from its `JobRemoved` result (`None` if the signal was
/// lost) and the unit's state read afterwards (B22). Pure.
///
/// | op | job result | unit state | outcome |
/// |---|---|---|---|
/// | start/restart | `skipped` | any | `StartSkipped` |
/// | any | not `done` | any | `JobFailed` |
/// | start/restart | `done`/lost | condition failed, not active | `StartSkipped` |
/// | start/restart | `done`/lost | active, reloading, refreshing | `Active` |
/// | start/restart | `done`/lost | inactive, `Result=success` | `Exited` |
/// | start/restart | `done`/lost | anything else (failed, activating/auto-restart, ...) | `JobFailed` |
/// | stop | `done`/lost | inactive, failed | `Stopped` |
/// | stop | `done`/lost | anything else | `JobFailed` |
///
/// `op` is one of [`Op::Start`], [`Op::Restart`], [`Op::Stop`]; other ops are treated as stop.
///
/// # Errors
/// [`Error::StartSkipped`] or [`Error::JobFailed`] as in the table.
pub fn settle(
    unit: &str,
    op: Op,
    job: Option<&JobResult>,
    status: &UnitStatus,
) -> Result<Settled, Error> {
    let starting = matches!(op, Op::Start | Op::Restart);
    let failed = |result: JobResult| Error::JobFailed {
        unit: unit.to_owned(),
        op,
        result,
        state: status.summary(),
    };
    match job {
        Some(JobResult::Skipped) if starting => {
            return Err(Error::StartSkipped {
                unit: unit.to_owned(),
            });
        }
        Some(result) if *result != JobResult::Done => return Err(failed(result.clone())),
        _ => {}
    }
    let job_result = job.cloned().unwrap_or(JobResult::Done);
    let state = &status.active_state;
    if starting {
        let running = matches!(
            state,
            ActiveState::Active | ActiveState::Reloading | ActiveState::Refreshing
        );
        if status.condition_failed && !running {
            return Err(Error::StartSkipped {
                unit: unit.to_owned(),
            });
        }
        if running {
            return Ok(Settled::Active);
        }
        if *state == ActiveState::Inactive && status.result.as_deref() == Some("success") {
            return Ok(Settled::Exited);
        }
        return Err(failed(job_result));
    }
    if matches!(state, ActiveState::Inactive | ActiveState::Failed) {
        Ok(Settled::Stopped)
    } else {
        Err(failed(job_result))
    }
}
