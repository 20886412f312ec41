//! Whether a ready environment is dead (issue 16): its proxy or its pod stopped while it waited
//! in `ready/` (the user manager died and restarted, `podman system migrate`, its proxy
//! killed). A dead one is never usable: the claim's check refuses it, and until then its
//! networks stay in aardvark-dns's configuration, where they break other runs' DNS. The pool's
//! keeper, `cyclix pool fill` and `cyclix pool expire` take each dead one out of `ready/` and
//! destroy it (`app::pool_ops::destroy_dead`). Pure: the adapter makes one look per unit
//! ([`units`]) and [`judge`] decides.

use crate::naming::{RunNames, container_unit, pod_unit};
use crate::systemd::{ActiveState, LoadState};

/// What one look at a unit of the environment found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Look {
    /// The unit's `ActiveState` and `LoadState` as the user manager reported them.
    Read(ActiveState, LoadState),
    /// The unit could not be read (the manager's error, its deadline passed, …).
    Unreadable(String),
}

/// What [`judge`] decided of a ready environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every unit looked at is `active`.
    Alive,
    /// A unit is not `active`: why, e.g. `its proxy unit cyclix-ENV-proxy.service is failed`.
    Dead(String),
    /// No unit read is dead, but one could not be read: what was not read and why. The
    /// environment is kept (the claim's check looks at it again).
    Unknown(String),
}

/// The units of environment `env` that run while it is ready, each with what it is: its
/// proxy's (`cyclix-ENV-proxy.service`) and its pod's (`cyclix-ENV-pod.service`).
#[must_use]
pub fn units(env: &str) -> [(&'static str, String); 2] {
    let n = RunNames::new(env);
    [
        ("proxy", container_unit(&n.proxy())),
        ("pod", pod_unit(&n.base())),
    ]
}

/// Judges a ready environment from one look at each of its units (`(what, unit, look)`, as
/// [`units`] names them): dead when a unit read is anything but `active` (`inactive`,
/// `failed`, `activating`, `deactivating`, `reloading`, …: a ready environment's units
/// were started by the fill and run until it is destroyed; nothing restarts them), naming each
/// such unit and its state (and its load state unless `loaded`); else unknown when one could
/// not be read (never dead for that); else alive.
#[must_use]
pub fn judge(looks: &[(&str, String, Look)]) -> Verdict {
    let mut dead = Vec::new();
    let mut unread = Vec::new();
    for (what, unit, look) in looks {
        match look {
            Look::Read(ActiveState::Active, _) => {}
            Look::Read(state, LoadState::Loaded) => {
                dead.push(format!("its {what} unit {unit} is {state}"));
            }
            Look::Read(state, load) => {
                dead.push(format!("its {what} unit {unit} is {state} ({load})"));
            }
            Look::Unreadable(e) => unread.push(format!("its {what} unit {unit} was not read: {e}")),
        }
    }
    if !dead.is_empty() {
        Verdict::Dead(dead.join("; "))
    } else if !unread.is_empty() {
        Verdict::Unknown(unread.join("; "))
    } else {
        Verdict::Alive
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENV: &str = "20261207t071400-ab12";

    fn read(s: &str) -> Look {
        Look::Read(ActiveState::parse(s), LoadState::Loaded)
    }

    /// The verdict on the proxy's and the pod's looks.
    fn on(proxy: Look, pod: Look) -> Verdict {
        let [(pw, pu), (dw, du)] = units(ENV);
        judge(&[(pw, pu, proxy), (dw, du, pod)])
    }

    #[test]
    fn the_units_are_the_proxys_and_the_pods() {
        assert_eq!(
            units(ENV),
            [
                ("proxy", format!("cyclix-{ENV}-proxy.service")),
                ("pod", format!("cyclix-{ENV}-pod.service")),
            ]
        );
    }

    #[test]
    fn both_active_is_alive() {
        assert_eq!(on(read("active"), read("active")), Verdict::Alive);
        assert_eq!(judge(&[]), Verdict::Alive);
    }

    #[test]
    fn a_unit_not_active_is_dead_and_named_with_its_state() {
        for state in [
            "inactive",
            "failed",
            "activating",
            "deactivating",
            "reloading",
        ] {
            assert_eq!(
                on(read(state), read("active")),
                Verdict::Dead(format!(
                    "its proxy unit cyclix-{ENV}-proxy.service is {state}"
                )),
                "{state}"
            );
            assert_eq!(
                on(read("active"), read(state)),
                Verdict::Dead(format!("its pod unit cyclix-{ENV}-pod.service is {state}")),
                "{state}"
            );
        }
    }

    #[test]
    fn both_dead_names_both() {
        assert_eq!(
            on(read("failed"), read("inactive")),
            Verdict::Dead(format!(
                "its proxy unit cyclix-{ENV}-proxy.service is failed; \
                 its pod unit cyclix-{ENV}-pod.service is inactive"
            ))
        );
    }

    #[test]
    fn a_unit_not_loaded_says_its_load_state() {
        let gone = Look::Read(ActiveState::Inactive, LoadState::NotFound);
        assert_eq!(
            on(gone, read("active")),
            Verdict::Dead(format!(
                "its proxy unit cyclix-{ENV}-proxy.service is inactive (not-found)"
            ))
        );
    }

    #[test]
    fn an_unreadable_unit_is_unknown_not_dead_and_said() {
        let unread = || Look::Unreadable("no answer within 5000 ms".into());
        assert_eq!(
            on(unread(), read("active")),
            Verdict::Unknown(format!(
                "its proxy unit cyclix-{ENV}-proxy.service was not read: no answer within 5000 ms"
            ))
        );
        assert!(matches!(on(unread(), unread()), Verdict::Unknown(_)));
    }

    #[test]
    fn a_dead_unit_wins_over_an_unreadable_one() {
        assert_eq!(
            on(Look::Unreadable("timeout".into()), read("failed")),
            Verdict::Dead(format!("its pod unit cyclix-{ENV}-pod.service is failed"))
        );
    }

    #[test]
    fn an_unknown_state_counts_as_not_active() {
        assert_eq!(
            on(read("frobnicating"), read("active")),
            Verdict::Dead(format!(
                "its proxy unit cyclix-{ENV}-proxy.service is frobnicating"
            ))
        );
    }
}
