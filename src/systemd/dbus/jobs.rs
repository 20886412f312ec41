//! Queueing a start/stop/restart job and waiting for it (steps 2–5 of the `dbus` module docs).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures_lite::StreamExt;
use zbus::zvariant::OwnedObjectPath;

use super::proxies::{JobRemovedStream, ManagerProxy};
use super::reload_gate::Access;
use super::{
    ALREADY_SUBSCRIBED, Call, FALLBACK_READ_BUDGET, STATE_NOT_READ, ZbusUnitManager, within,
};

/// How long a poll that finds the job gone waits for its `JobRemoved`, which systemd sends
/// right after clearing `Unit.Job`, before it settles the job from the unit's state.
const VANISH_GRACE: Duration = Duration::from_millis(500);
use crate::systemd::{Error, JobMode, JobOutcome, JobResult, Op, settle};

impl ZbusUnitManager {
    pub(super) async fn subscribe(
        &self,
        call: &Call<'_>,
        manager: &ManagerProxy<'_>,
    ) -> Result<(), Error> {
        if self.subscribed.load(Ordering::Acquire) {
            return Ok(());
        }
        match within(call.deadline, manager.subscribe()).await {
            None => {
                Err(call
                    .deadline_error("subscribing to manager signals", STATE_NOT_READ.to_owned()))
            }
            Some(Ok(())) => {
                self.subscribed.store(true, Ordering::Release);
                Ok(())
            }
            Some(Err(zbus::Error::MethodError(name, _, _)))
                if name.as_str() == ALREADY_SUBSCRIBED =>
            {
                self.subscribed.store(true, Ordering::Release);
                Ok(())
            }
            Some(Err(err)) => Err(call.map_err(err)),
        }
    }

    /// loaded has no job.
    pub(super) async fn job_still_queued(
        &self,
        call: &Call<'_>,
        manager: &ManagerProxy<'_>,
        job: &OwnedObjectPath,
    ) -> Result<bool, Error> {
        let path = match call
            .run("looking up the unit", manager.get_unit(call.unit))
            .await
        {
            Ok(path) => path,
            Err(Error::NoSuchUnit { .. }) => return Ok(false),
            Err(err) => return Err(err),
        };
        let unit = call
            .run("reading the unit's job", self.unit_proxy(path))
            .await?;
        let (_, current) = call.run("reading the unit's job", unit.job()).await?;
        Ok(current == *job)
    }

    /// The result of `job` if its `JobRemoved` arrives by `until` (other jobs' signals are
    /// skipped); `Ok(None)` when none came.
    async fn job_removed_by(
        call: &Call<'_>,
        removed: &mut JobRemovedStream,
        job: &OwnedObjectPath,
        until: Instant,
    ) -> Result<Option<JobResult>, Error> {
        while let Some(Some(signal)) = within(until, removed.next()).await {
            let args = signal.args().map_err(|err| call.map_err(err))?;
            if *args.job() == **job {
                return Ok(Some(JobResult::parse(args.result())));
            }
        }
        Ok(None)
    }

    /// Waits for `JobRemoved` of `job`. `Ok(None)`: the job vanished without a signal.
    pub(super) async fn wait_for_job(
        &self,
        call: &Call<'_>,
        manager: &ManagerProxy<'_>,
        removed: &mut JobRemovedStream,
        job: &OwnedObjectPath,
    ) -> Result<Option<JobResult>, Error> {
        loop {
            let now = Instant::now();
            if now >= call.deadline {
                break;
            }
            let tick = (now + self.poll_interval).min(call.deadline);
            match within(tick, removed.next()).await {
                Some(Some(signal)) => {
                    let args = signal.args().map_err(|err| call.map_err(err))?;
                    if *args.job() == **job {
                        return Ok(Some(JobResult::parse(args.result())));
                    }
                    tracing::trace!(other = %args.job(), unit = args.unit(), "JobRemoved of another job");
                }
                Some(None) => {
                    return Err(Error::BusUnavailable {
                        address: self.address.clone(),
                        message: "connection closed while waiting for the job".to_owned(),
                    });
                }
                None => {
                    if Instant::now() < call.deadline
                        && !self.job_still_queued(call, manager, job).await?
                    {
                        // systemd clears `Unit.Job` just before it sends `JobRemoved`: a poll
                        // between the two must not outrun the signal already on its way
                        // (seen under load: a failed job read as vanished).
                        let grace = Instant::now() + VANISH_GRACE;
                        if let Some(result) =
                            Self::job_removed_by(call, removed, job, grace).await?
                        {
                            return Ok(Some(result));
                        }
                        tracing::warn!(%job, "job vanished without JobRemoved; reading unit state");
                        return Ok(None);
                    }
                }
            }
        }
        // Deadline: look once more, with a small budget, before giving up (B21).
        let fallback = Call {
            deadline: Instant::now() + FALLBACK_READ_BUDGET,
            ..*call
        };
        match self.job_still_queued(&fallback, manager, job).await {
            Ok(false) => Ok(None),
            Ok(true) => {
                let state = match self.read_status(&fallback).await {
                    Ok(status) => format!("{} with its job still queued", status.summary()),
                    Err(err) => format!("unknown ({err})"),
                };
                Err(call.deadline_error("waiting for the job to finish", state))
            }
            Err(err) => {
                Err(call
                    .deadline_error("waiting for the job to finish", format!("unknown ({err})")))
            }
        }
    }

    /// Queues a start/stop/restart job and waits for it (steps 2–5 of the module docs).
    pub(super) async fn job(&self, call: &Call<'_>, mode: JobMode) -> Result<JobOutcome, Error> {
        let manager = self.manager(call).await?;
        self.subscribe(call, &manager).await?;
        // The stream exists before the job is queued (B21a).
        let mut removed = call
            .run("subscribing to JobRemoved", manager.receive_job_removed())
            .await?;
        // Hold a reference so the manager does not unload the unit the moment the job ends
        // (an inactive oneshot is garbage-collected at once, and a freshly loaded copy reads
        // Result=success, ExecMainCode=0, ConditionResult=no: seen on systemd 257).
        let path = call
            .run("loading the unit", manager.load_unit(call.unit))
            .await?;
        let unit = call
            .run("loading the unit", self.unit_proxy(path.clone()))
            .await?;
        let held = match call.run("referencing the unit", unit.hold()).await {
            Ok(()) => true,
            Err(err) => {
                tracing::warn!(%err, "cannot reference the unit; its state may be read after unloading");
                false
            }
        };
        let outcome = self
            .queue_and_wait(call, mode, &manager, &mut removed, path)
            .await;
        if held {
            let release = Instant::now() + FALLBACK_READ_BUDGET;
            if let Some(Err(err)) = within(release, unit.release()).await {
                tracing::debug!(%err, "releasing the unit reference");
            }
        }
        outcome
    }

    pub(super) async fn queue_and_wait(
        &self,
        call: &Call<'_>,
        mode: JobMode,
        manager: &ManagerProxy<'_>,
        removed: &mut JobRemovedStream,
        path: OwnedObjectPath,
    ) -> Result<JobOutcome, Error> {
        let mode = mode.as_str();
        let job = {
            // cyclix's reloads are serialised against QUEUEING a job, not against waiting for
            // it: holding the lock through a long wait deadlocked `cyclix start` against the
            // run it started (the run reloads). A reload while a job runs is safe: systemd
            // replays JobRemoved after a reload (systemd#8803) and `wait_for_job` also polls
            // `Unit.Job` every second (B21).
            let _lock = self.lock(call, Access::Shared)?;
            call.run("queueing the job", async {
                match call.op {
                    Op::Start => manager.start_unit(call.unit, mode).await,
                    Op::Stop => manager.stop_unit(call.unit, mode).await,
                    _ => manager.restart_unit(call.unit, mode).await,
                }
            })
            .await?
        };
        tracing::debug!(%job, "job queued");
        let job_result = self.wait_for_job(call, manager, removed, &job).await?;
        // The state read gets at least the fallback budget, even if the job took all the time.
        let read = Call {
            deadline: call.deadline.max(Instant::now() + FALLBACK_READ_BUDGET),
            ..*call
        };
        let status = self.read_status_at(&read, path).await?;
        let settled = settle(call.unit, call.op, job_result.as_ref(), &status)?;
        tracing::debug!(?settled, elapsed_ms = call.elapsed_ms(), "job finished");
        Ok(JobOutcome {
            unit: call.unit.to_owned(),
            op: call.op,
            job_result,
            settled,
            status,
            elapsed_ms: call.elapsed_ms(),
        })
    }
}
