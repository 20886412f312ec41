//! The reads over the SYSTEM bus (logind's `Linger`, a system unit's state) that `cyclix
//! check` makes; the trait impl in `dbus.rs` delegates here.

#[allow(clippy::wildcard_imports)]
use super::*;

impl ZbusUnitManager {
    /// [`UnitManager::user_linger`] over the system bus (logind).
    pub(super) fn linger_of(&self, call: &Call<'_>, uid: u32) -> Result<bool, Error> {
        let conn = self.system_bus(call)?;
        async_io::block_on(async {
            let login = call
                .run(
                    "creating the logind proxy",
                    LoginProxy::builder(&conn)
                        .cache_properties(CacheProperties::No)
                        .build(),
                )
                .await?;
            let path = match within(call.deadline, login.get_user(uid)).await {
                None => {
                    return Err(call
                        .deadline_error("asking logind for the user", STATE_NOT_READ.to_owned()));
                }
                Some(Err(zbus::Error::MethodError(name, _, _)))
                    if name.as_str() == NO_SUCH_USER =>
                {
                    return Ok(false);
                }
                Some(result) => result.map_err(|err| call.map_err(err))?,
            };
            let user = call
                .run("creating the logind user proxy", async {
                    LoginUserProxy::builder(&conn)
                        .path(path)?
                        .cache_properties(CacheProperties::No)
                        .build()
                        .await
                })
                .await?;
            call.run("reading Linger", user.linger()).await
        })
    }

    /// [`UnitManager::system_unit_active_state`] over the system bus.
    pub(super) fn system_state_of(
        &self,
        call: &Call<'_>,
        unit: &str,
    ) -> Result<ActiveState, Error> {
        let conn = self.system_bus(call)?;
        async_io::block_on(async {
            let manager = call
                .run(
                    "creating the system manager proxy",
                    ManagerProxy::builder(&conn)
                        .cache_properties(CacheProperties::No)
                        .build(),
                )
                .await?;
            // GetUnit, not LoadUnit: a unit nobody pulled in is not loaded, i.e. inactive.
            let path = match call
                .run("looking the unit up", manager.get_unit(unit))
                .await
            {
                Ok(path) => path,
                Err(Error::NoSuchUnit { .. }) => return Ok(ActiveState::Inactive),
                Err(err) => return Err(err),
            };
            let proxy = call
                .run("reading the unit state", async {
                    UnitProxy::builder(&conn)
                        .path(path)?
                        .cache_properties(CacheProperties::No)
                        .build()
                        .await
                })
                .await?;
            let state = call
                .run("reading the unit state", proxy.active_state())
                .await?;
            Ok(ActiveState::parse(&state))
        })
    }
}
