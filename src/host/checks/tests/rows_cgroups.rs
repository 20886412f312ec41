//! Table rows of the cgroup checks (B09).

use super::*;

/// cgroups v2 and delegation (B09).
#[allow(clippy::too_many_lines)] // one row per case
pub(super) fn cgroup_rows() -> Vec<Row> {
    vec![
        // cgroups (B09)
        (
            "cgroup v1",
            |f| f.cgroup.fs_type = Some("tmpfs".into()),
            "cgroup-v2",
            Status::Fail,
            "systemd.unified_cgroup_hierarchy=1",
        ),
        (
            "B09 limits asked, nothing delegated",
            |f| {
                f.cgroup.delegated = Ok(vec![]);
                f.tenants = vec![tenant(
                    "big",
                    &spec_yaml("big", "  resources: { memory: 2G, pids: 512 }\n", ""),
                )];
            },
            "cgroup-delegation",
            Status::Fail,
            "big: memory, big: pids",
        ),
        (
            "nothing delegated, no limits asked",
            |f| f.cgroup.delegated = Ok(vec![]),
            "cgroup-delegation",
            Status::Pass,
            "none (not cpu, memory, pids",
        ),
        (
            "delegation unreadable",
            |f| f.cgroup.delegated = Err("no such file".into()),
            "cgroup-delegation",
            Status::Warn,
            "Delegate=",
        ),
    ]
}
