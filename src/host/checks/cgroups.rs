//! Checks of cgroups (B09): v2, and the controllers delegated to the user manager.

use super::{Check, LIMIT_CONTROLLERS};
use crate::host::facts::CheckFacts;

pub(super) fn cgroup_v2(f: &CheckFacts) -> Check {
    const ID: &str = "cgroup-v2";
    match f.cgroup.fs_type.as_deref() {
        Some("cgroup2") => Check::pass(ID, "/sys/fs/cgroup is cgroup2 (unified)"),
        other => Check::fail(
            ID,
            format!(
                "/sys/fs/cgroup is {} (cgroup v1 or hybrid): rootless podman cannot use the \
                 systemd cgroup manager or enforce limits",
                other.unwrap_or("not mounted")
            ),
            "boot with the unified hierarchy: add `systemd.unified_cgroup_hierarchy=1` to the \
             kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then `sudo \
             update-grub` and reboot)",
        ),
    }
}

/// Which limit controllers each tenant's spec asks for: (tenant, controller).
pub(super) fn asked_controllers(f: &CheckFacts) -> Vec<(&str, &'static str)> {
    let mut v = Vec::new();
    for t in &f.tenants {
        if let Ok(s) = &t.spec {
            // The same list `cyclix run` refuses on (limits).
            for n in crate::limits::needed(&s.agent.resources) {
                v.push((t.name.as_str(), n.controller));
            }
        }
    }
    v
}

pub(super) const DELEGATE_FIX: &str = crate::limits::DELEGATE_FIX;

pub(super) fn cgroup_delegation(f: &CheckFacts) -> Check {
    const ID: &str = "cgroup-delegation";
    let asked = asked_controllers(f);
    let delegated = match &f.cgroup.delegated {
        Ok(d) => d,
        Err(e) if asked.is_empty() => {
            return Check::warn(ID, format!("cannot read: {e}"), DELEGATE_FIX);
        }
        Err(e) => {
            return Check::warn(
                ID,
                format!("cannot read ({e}); specs ask for limits that may not be enforced"),
                DELEGATE_FIX,
            );
        }
    };
    let missing: Vec<&str> = LIMIT_CONTROLLERS
        .iter()
        .copied()
        .filter(|c| !delegated.iter().any(|d| d == c))
        .collect();
    let shown = if delegated.is_empty() {
        "none".to_string()
    } else {
        delegated.join(" ")
    };
    let unenforced: Vec<String> = asked
        .iter()
        .filter(|(_, c)| missing.contains(c))
        .map(|(t, c)| format!("{t}: {c}"))
        .collect();
    if !unenforced.is_empty() {
        // `cyclix run` refuses these tenants (limits): a limit is never silently dropped.
        return Check::fail(
            ID,
            format!(
                "delegated to the user manager: {shown}; limits that cannot be enforced: {} \
                 (`cyclix run` refuses these tenants)",
                unenforced.join(", ")
            ),
            DELEGATE_FIX,
        );
    }
    if missing.is_empty() {
        Check::pass(ID, format!("delegated to the user manager: {shown}"))
    } else {
        Check::pass(
            ID,
            format!(
                "delegated to the user manager: {shown} (not {}: no spec asks for those limits)",
                missing.join(", ")
            ),
        )
    }
}
