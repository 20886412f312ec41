//! Which tenants' timers `cyclix install` keeps, installs or removes (issue 19, item 2): the
//! installed timers converge on the specs. Pure: the caller lists the specs, the installed
//! timers and the paused tenants; this decides.

use std::collections::BTreeSet;
use std::path::Path;

/// What a tenant's spec says about its timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecState {
    /// The spec loads and has a `schedule`.
    Scheduled,
    /// The spec loads and has no `schedule`.
    Unscheduled,
    /// The spec does not load: its installed timer (if any) is left as it was.
    Broken,
}

/// Why an installed timer is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// The spec no longer has a `schedule`.
    NoSchedule,
    /// The spec file is gone.
    NoSpec,
    /// The tenant is paused (`cyclix pause`).
    Paused,
}

impl Removal {
    /// The reason as `cyclix install` prints it.
    #[must_use]
    pub fn text(self) -> &'static str {
        match self {
            Self::NoSchedule => "its spec has no `schedule` any more",
            Self::NoSpec => "its spec is gone",
            Self::Paused => "the tenant is paused (`cyclix resume TENANT` to undo)",
        }
    }
}

/// The decisions of one `cyclix install`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TimerPlan {
    /// Tenants whose timer is (re)installed, enabled and started.
    pub install: Vec<String>,
    /// Tenants whose timer is stopped, disabled and its drop-in removed, with the reason.
    pub remove: Vec<(String, Removal)>,
    /// Scheduled tenants that are paused and had no timer installed: reported only.
    pub paused: Vec<String>,
    /// Tenants whose spec does not load and who have a timer installed: left as it was.
    pub left: Vec<String>,
}

/// Decides, for the tenants in `specs` (name, state) — or only `only` — and every tenant with
/// an `installed` timer (a drop-in or an enablement link), what `install` does. A tenant in
/// `paused` never gets a timer.
#[must_use]
pub fn plan(
    specs: &[(String, SpecState)],
    installed: &BTreeSet<String>,
    paused: &BTreeSet<String>,
    only: Option<&str>,
) -> TimerPlan {
    let mut out = TimerPlan::default();
    let wanted = |t: &str| only.is_none_or(|o| o == t);
    for (t, state) in specs.iter().filter(|(t, _)| wanted(t)) {
        let has_timer = installed.contains(t);
        match (state, paused.contains(t)) {
            (SpecState::Broken, _) => {
                if has_timer {
                    out.left.push(t.clone());
                }
            }
            (SpecState::Scheduled, false) => out.install.push(t.clone()),
            (SpecState::Scheduled, true) if has_timer => {
                out.remove.push((t.clone(), Removal::Paused));
            }
            (SpecState::Scheduled, true) => out.paused.push(t.clone()),
            (SpecState::Unscheduled, p) if has_timer => out.remove.push((
                t.clone(),
                if p {
                    Removal::Paused
                } else {
                    Removal::NoSchedule
                },
            )),
            (SpecState::Unscheduled, _) => {}
        }
    }
    for t in installed.iter().filter(|t| wanted(t)) {
        if !specs.iter().any(|(s, _)| s == t) {
            out.remove.push((t.clone(), Removal::NoSpec));
        }
    }
    out
}

/// The tenants with a timer installed in the user unit directory `unit_dir`: a drop-in
/// directory `cyclix-run@T.timer.d/` or an enablement link
/// `timers.target.wants/cyclix-run@T.timer` (what `systemctl --user enable` creates for a
/// template's instance, systemd.unit(5) "[Install] Section Options"). A missing directory is
/// an empty set.
#[must_use]
pub fn installed(unit_dir: &Path) -> BTreeSet<String> {
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = BTreeSet::new();
    for n in names(unit_dir) {
        if let Some(t) = tenant_of_timer(n.strip_suffix(".d").unwrap_or("")) {
            out.insert(t.to_owned());
        }
    }
    for n in names(&unit_dir.join("timers.target.wants")) {
        if let Some(t) = tenant_of_timer(&n) {
            out.insert(t.to_owned());
        }
    }
    out
}

/// `T` of `cyclix-run@T.timer` when `T` is a valid tenant name.
fn tenant_of_timer(unit: &str) -> Option<&str> {
    unit.strip_prefix("cyclix-run@")
        .and_then(|r| r.strip_suffix(".timer"))
        .filter(|t| crate::spec::validate::tenant_name(t).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(xs: &[&str]) -> BTreeSet<String> {
        xs.iter().map(|s| (*s).to_owned()).collect()
    }

    fn specs(xs: &[(&str, SpecState)]) -> Vec<(String, SpecState)> {
        xs.iter().map(|(t, s)| ((*t).to_owned(), *s)).collect()
    }

    #[test]
    fn timers_follow_the_specs() {
        let p = plan(
            &specs(&[
                ("a", SpecState::Scheduled),
                ("b", SpecState::Unscheduled),
                ("c", SpecState::Broken),
                ("d", SpecState::Unscheduled),
            ]),
            &set(&["b", "c", "gone"]),
            &set(&[]),
            None,
        );
        assert_eq!(p.install, ["a"]);
        assert_eq!(
            p.remove,
            [
                ("b".to_owned(), Removal::NoSchedule),
                ("gone".to_owned(), Removal::NoSpec)
            ]
        );
        assert_eq!(p.left, ["c"]);
        assert!(p.paused.is_empty());
    }

    #[test]
    fn a_paused_tenant_gets_no_timer_and_loses_the_one_it_had() {
        let p = plan(
            &specs(&[("a", SpecState::Scheduled), ("b", SpecState::Scheduled)]),
            &set(&["a"]),
            &set(&["a", "b"]),
            None,
        );
        assert!(p.install.is_empty());
        assert_eq!(p.remove, [("a".to_owned(), Removal::Paused)]);
        assert_eq!(p.paused, ["b"]);
    }

    #[test]
    fn only_limits_every_decision_to_one_tenant() {
        let p = plan(
            &specs(&[("a", SpecState::Unscheduled), ("b", SpecState::Scheduled)]),
            &set(&["a", "gone"]),
            &set(&[]),
            Some("b"),
        );
        assert_eq!(p.install, ["b"]);
        assert!(p.remove.is_empty());
    }

    #[test]
    fn installed_reads_drop_ins_and_enablement_links() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(d.path().join("cyclix-run@a.timer.d")).expect("test file");
        std::fs::create_dir_all(d.path().join("timers.target.wants")).expect("test file");
        std::fs::write(d.path().join("timers.target.wants/cyclix-run@b.timer"), "")
            .expect("test file");
        std::fs::write(d.path().join("timers.target.wants/other.timer"), "").expect("test file");
        std::fs::create_dir_all(d.path().join("cyclix-run@..timer.d")).expect("test file");
        assert_eq!(installed(d.path()), set(&["a", "b"]));
        assert!(installed(&d.path().join("missing")).is_empty());
    }
}
