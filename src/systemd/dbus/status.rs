//! Reading a unit's state: `Unit` properties, plus `Service` or `Timer` ones by unit type.

use futures_lite::future;
use zbus::proxy::CacheProperties;
use zbus::zvariant::OwnedObjectPath;

use super::proxies::{ServiceProxy, TimerProxy, UnitProxy};
use super::{Call, ZbusUnitManager};
use crate::systemd::{
    ActiveState, Error, ExecMainCode, LoadState, UnitIdentity, UnitStatus, unit_type,
};

impl ZbusUnitManager {
    /// Reads the unit's state at `path`.
    pub(super) async fn read_status_at(
        &self,
        call: &Call<'_>,
        path: OwnedObjectPath,
    ) -> Result<UnitStatus, Error> {
        const PHASE: &str = "reading unit properties";
        let unit = call.run(PHASE, self.unit_proxy(path.clone())).await?;
        // The properties are read concurrently: each Get is a round trip to the manager, and
        // ten in a row were most of a job's wall time (bench/run, issue 7).
        let ((load, active), ((sub, reload), ((cond, cond_ts), job))) = Box::pin(future::zip(
            future::zip(
                call.run(PHASE, unit.load_state()),
                call.run(PHASE, unit.active_state()),
            ),
            future::zip(
                future::zip(
                    call.run(PHASE, unit.sub_state()),
                    call.run(PHASE, unit.need_daemon_reload()),
                ),
                future::zip(
                    future::zip(
                        call.run(PHASE, unit.condition_result()),
                        call.run(PHASE, unit.condition_timestamp()),
                    ),
                    call.run(PHASE, unit.job()),
                ),
            ),
        ))
        .await;
        let mut status = UnitStatus {
            active_state: ActiveState::parse(&active?),
            sub_state: sub?,
            need_daemon_reload: reload?,
            condition_failed: !cond? && cond_ts? != 0,
            job_pending: job?.0 != 0,
            ..UnitStatus::not_found()
        };
        status.load_state = LoadState::parse(&load?);
        if status.load_state != LoadState::Loaded {
            return Ok(status);
        }
        if unit_type(call.unit) == Some("service") {
            let service = call.run(PHASE, self.service_proxy(path)).await?;
            let ((result, code), (main_status, service_type)) = Box::pin(future::zip(
                future::zip(
                    call.run(PHASE, service.result()),
                    call.run(PHASE, service.exec_main_code()),
                ),
                future::zip(
                    call.run(PHASE, service.exec_main_status()),
                    call.run(PHASE, service.service_type()),
                ),
            ))
            .await;
            status.result = Some(result?);
            let code = ExecMainCode::from_raw(code?);
            status.exec_main_code = code;
            if code.is_some() {
                status.exec_main_status = Some(main_status?);
            }
            status.service_type = Some(service_type?);
        } else if unit_type(call.unit) == Some("timer") {
            let timer = call.run(PHASE, self.timer_proxy(path)).await?;
            status.result = Some(call.run(PHASE, timer.result()).await?);
        }
        Ok(status)
    }

    pub(super) async fn timer_proxy(&self, path: OwnedObjectPath) -> zbus::Result<TimerProxy<'_>> {
        TimerProxy::builder(&self.conn)
            .path(path)?
            .cache_properties(CacheProperties::No)
            .build()
            .await
    }

    /// `LoadUnit(unit)` (loads it if it is not) and a proxy on the unit's object, both within
    /// `call`'s deadline (`load_unit`, `load_current`).
    pub(super) async fn loaded_unit(
        &self,
        call: &super::Call<'_>,
        unit: &str,
    ) -> Result<UnitProxy<'_>, super::Error> {
        let manager = self.manager(call).await?;
        let path = call
            .run("loading the unit", manager.load_unit(unit))
            .await?;
        call.run("reading the load state", self.unit_proxy(path))
            .await
    }

    pub(super) async fn unit_proxy(&self, path: OwnedObjectPath) -> zbus::Result<UnitProxy<'_>> {
        UnitProxy::builder(&self.conn)
            .path(path)?
            .cache_properties(CacheProperties::No)
            .build()
            .await
    }

    pub(super) async fn service_proxy(
        &self,
        path: OwnedObjectPath,
    ) -> zbus::Result<ServiceProxy<'_>> {
        ServiceProxy::builder(&self.conn)
            .path(path)?
            .cache_properties(CacheProperties::No)
            .build()
            .await
    }

    /// Loads the unit and reads its `InvocationID` and (a service's) `MainPID`.
    pub(super) async fn read_identity(&self, call: &Call<'_>) -> Result<UnitIdentity, Error> {
        const PHASE: &str = "reading the unit's invocation";
        let manager = self.manager(call).await?;
        let path = call
            .run("loading the unit", manager.load_unit(call.unit))
            .await?;
        let unit = call.run(PHASE, self.unit_proxy(path.clone())).await?;
        let id = call.run(PHASE, unit.invocation_id()).await?;
        let main_pid = if unit_type(call.unit) == Some("service") {
            let service = call.run(PHASE, self.service_proxy(path)).await?;
            call.run(PHASE, service.main_pid()).await?
        } else {
            0
        };
        Ok(UnitIdentity {
            invocation_id: id.iter().fold(String::with_capacity(32), |mut s, b| {
                use std::fmt::Write as _;
                let _ = write!(s, "{b:02x}");
                s
            }),
            main_pid,
        })
    }

    /// Loads the unit and reads its state.
    pub(super) async fn read_status(&self, call: &Call<'_>) -> Result<UnitStatus, Error> {
        let manager = self.manager(call).await?;
        let path = call
            .run("loading the unit", manager.load_unit(call.unit))
            .await?;
        self.read_status_at(call, path).await
    }
}
