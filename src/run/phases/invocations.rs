//! The sandbox that runs is the one the probes proved (issue 20, item 1). Before the probes,
//! the invocation of every unit of the run that is up (its `InvocationID` and main pid) is
//! noted; while the agent works, every leak-watch round compares, and so does the end of the
//! agent. A unit restarted (a new invocation: a new pod, network namespace or proxy the
//! probes never saw) or whose main process changed or is gone (the pod's infra container was
//! killed) fails the run closed, naming the unit and what changed. Every unit also has
//! `Restart=no` (render), so a restart needs someone to ask for it; this catches it anyway.

use crate::systemd::{UnitIdentity, UnitManager};

/// The invocations noted before the probes: (unit, identity).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Proven(Vec<(String, UnitIdentity)>);

/// Notes the invocation of each of `units` that has been started (a unit that never ran has
/// no invocation yet and is left out).
///
/// # Errors
/// A unit's invocation cannot be read (D-Bus): the run cannot vouch for its sandbox.
pub(crate) fn note(
    manager: &dyn UnitManager,
    units: &[&str],
) -> Result<Proven, crate::systemd::Error> {
    let mut out = Vec::new();
    for u in units {
        let id = manager.unit_identity(u)?;
        if !id.invocation_id.is_empty() {
            out.push(((*u).to_owned(), id));
        }
    }
    Ok(Proven(out))
}

/// What changed since [`note`], one finding per unit. `ended` are units whose main process
/// may be gone by now for a good reason — the agent once it exited, and its pod, which stops
/// with its last container (`--exit-policy=stop`, podman-pod-create(1)): for those only a new
/// invocation counts (one the manager unloaded after it ended has none). A unit whose
/// invocation cannot be read is a finding too (fail closed).
#[must_use]
pub(crate) fn changes(manager: &dyn UnitManager, proven: &Proven, ended: &[&str]) -> Vec<String> {
    proven
        .0
        .iter()
        .filter_map(|(unit, before)| match manager.unit_identity(unit) {
            Ok(now) => change(unit, before, &now, ended.contains(&unit.as_str())),
            Err(e) => Some(format!(
                "{unit}: its invocation cannot be read any more ({e}); the sandbox the probes proved cannot be vouched for"
            )),
        })
        .collect()
}

/// The finding for `unit` when `now` is not the invocation `before` (pure).
#[must_use]
pub(crate) fn change(
    unit: &str,
    before: &UnitIdentity,
    now: &UnitIdentity,
    ended: bool,
) -> Option<String> {
    // A unit that ended may have been unloaded since (no invocation any more): not a restart.
    let unloaded = ended && now.invocation_id.is_empty();
    if before.invocation_id != now.invocation_id && !unloaded {
        return Some(format!(
            "{unit} was started again after the probes (invocation {} -> {}): the sandbox that ran is not the one proven",
            short(&before.invocation_id),
            short(&now.invocation_id)
        ));
    }
    (!ended && before.main_pid != now.main_pid).then(|| {
        format!(
            "{unit}'s main process changed after the probes (pid {} -> {}{}): part of the proven sandbox is gone or replaced",
            before.main_pid,
            now.main_pid,
            if now.main_pid == 0 { ", none" } else { "" }
        )
    })
}

/// The first 12 hex digits of an invocation id (`-` for none).
fn short(id: &str) -> &str {
    if id.is_empty() {
        "-"
    } else {
        id.get(..12).unwrap_or(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::systemd::JobMode;
    use crate::systemd::fake::FakeUnitManager;
    use std::time::Duration;

    fn id(inv: &str, pid: u32) -> UnitIdentity {
        UnitIdentity {
            invocation_id: inv.to_owned(),
            main_pid: pid,
        }
    }

    #[test]
    fn a_new_invocation_or_main_process_is_a_finding() {
        let a = id("0123456789abcdef0123456789abcdef", 10);
        assert_eq!(change("u", &a, &a, false), None);
        let restarted = change("u", &a, &id("fedcba9876543210", 11), false).expect("finding");
        assert!(
            restarted.contains(
                "u was started again after the probes (invocation 0123456789ab -> fedcba987654)"
            ),
            "{restarted}"
        );
        let gone = change("u", &a, &id(&a.invocation_id, 0), false).expect("finding");
        assert!(gone.contains("pid 10 -> 0, none"), "{gone}");
        // An agent that exited has no main process: not a change.
        assert_eq!(change("u", &a, &id(&a.invocation_id, 0), true), None);
        assert!(change("u", &a, &id("other", 0), true).is_some());
        assert_eq!(
            change("u", &a, &id("", 0), true),
            None,
            "unloaded after it ended"
        );
    }

    #[test]
    fn a_unit_started_again_after_the_note_is_seen() {
        let m = FakeUnitManager::new();
        m.start("p.service", JobMode::Replace, Duration::from_secs(1))
            .expect("start");
        m.start("a.service", JobMode::Replace, Duration::from_secs(1))
            .expect("start");
        let proven = note(&m, &["p.service", "a.service"]).expect("note");
        assert!(changes(&m, &proven, &[]).is_empty());
        m.restart("p.service", JobMode::Replace, Duration::from_secs(1))
            .expect("restart");
        let found = changes(&m, &proven, &[]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("p.service was started again"),
            "{found:?}"
        );
    }
}
