//! Facts read over D-Bus through the systemd seam: the manager version, linger, and system
//! units.

use std::path::PathBuf;

use super::{DBUS_DEADLINE, Fact, GatherInput};
use crate::systemd::{UnitManager, ZbusUnitManager};

pub(super) struct DbusSide {
    pub(super) manager_version: Fact<String>,
    pub(super) manager_env: Fact<Vec<String>>,
    pub(super) linger: Fact<bool>,
    pub(super) network_online: Fact<String>,
    pub(super) user_unit: Option<Fact<String>>,
}

impl DbusSide {
    /// Every fact failed with `e`.
    pub(super) fn failed(e: &str) -> Self {
        DbusSide {
            manager_version: Err(e.to_string()),
            manager_env: Err(e.to_string()),
            linger: Err(e.to_string()),
            network_online: Err(e.to_string()),
            user_unit: None,
        }
    }
}

pub(super) fn dbus_side(input: &GatherInput<'_>, uid: u32) -> DbusSide {
    let lock = crate::layout::Runtime(
        input
            .env
            .runtime_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from("/nonexistent")),
    )
    .systemd_lock();
    match ZbusUnitManager::session(lock) {
        Ok(m) => dbus_facts(&m.with_call_timeout(DBUS_DEADLINE), uid),
        Err(e) => {
            // logind and the system manager live on the system bus, reachable without the
            // user's bus: linger is the usual fix for a missing user manager (B08, B09).
            let system = ZbusUnitManager::system(PathBuf::from("/nonexistent/cyclix.lock"))
                .map(|m| m.with_call_timeout(DBUS_DEADLINE));
            let (linger, network_online, user_unit) = match &system {
                Ok(m) => {
                    let d = dbus_facts(m, uid);
                    // Why the user manager is gone: the system manager's unit of it
                    // (`failed`: it died, e.g. a SIGKILL of `systemd --user`; issue 20).
                    let unit = m
                        .system_unit_active_state(&format!("user@{uid}.service"))
                        .map(|s| s.as_str().to_string())
                        .map_err(|e| e.to_string());
                    (d.linger, d.network_online, unit)
                }
                Err(se) => (
                    Err(se.to_string()),
                    Err(se.to_string()),
                    Err(se.to_string()),
                ),
            };
            DbusSide {
                manager_version: Err(e.to_string()),
                manager_env: Err(e.to_string()),
                linger,
                network_online,
                user_unit: Some(user_unit),
            }
        }
    }
}

pub(super) fn dbus_facts(m: &dyn UnitManager, uid: u32) -> DbusSide {
    DbusSide {
        manager_version: m.manager_version().map_err(|e| e.to_string()),
        manager_env: m.manager_environment_names().map_err(|e| e.to_string()),
        linger: m.user_linger(uid).map_err(|e| e.to_string()),
        network_online: m
            .system_unit_active_state("network-online.target")
            .map(|s| s.as_str().to_string())
            .map_err(|e| e.to_string()),
        user_unit: None,
    }
}
