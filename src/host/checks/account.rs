//! Checks of the user account and its session: rootless, the runtime dir, the user manager,
//! linger (B08), sub-ids and the id mappers (B10), and the network-online stall (B07).

use super::{Check, NETWORK_ONLINE_WAIT_SINCE, SUBID_MIN, at_least, podman_version};
use crate::host::facts::{CheckFacts, IdMapper, SubIds};

pub(super) fn rootless(f: &CheckFacts) -> Check {
    const ID: &str = "rootless";
    if f.uid == 0 {
        Check::fail(
            ID,
            "running as root: cyclix runs agents rootless, under the user's systemd manager",
            "run cyclix as an unprivileged user (`machinectl shell USER@` for a full session)",
        )
    } else if f.uid == u32::MAX {
        Check::fail(
            ID,
            "cannot read the uid from /proc/self/status",
            "mount /proc (cyclix reads /proc/self/status)",
        )
    } else {
        Check::pass(ID, format!("uid {} ({})", f.uid, f.user))
    }
}

pub(super) fn runtime_dir(f: &CheckFacts) -> Check {
    const ID: &str = "runtime-dir";
    let want = format!("/run/user/{}", f.uid);
    let fix = format!(
        "log in through a real session (ssh, or `machinectl shell {}@`), not `su`/`sudo -u`, \
         so that pam_systemd sets XDG_RUNTIME_DIR={want}; for a service, `loginctl \
         enable-linger {}` and `export XDG_RUNTIME_DIR={want}` (B09)",
        f.user, f.user
    );
    let rd = &f.runtime_dir;
    let Some(value) = &rd.value else {
        return Check::fail(ID, "$XDG_RUNTIME_DIR is unset", fix);
    };
    if value.trim_end_matches('/') != want {
        let owner = rd
            .owner
            .map_or_else(String::new, |o| format!(" (owned by uid {o})"));
        return Check::fail(
            ID,
            format!("$XDG_RUNTIME_DIR is {value}{owner}, not {want}"),
            fix,
        );
    }
    if !rd.is_dir {
        return Check::fail(ID, format!("{value} does not exist"), fix);
    }
    match rd.owner {
        Some(o) if o == f.uid => {
            let mode = rd.mode.unwrap_or(0);
            if mode.trailing_zeros() >= 6 {
                Check::pass(ID, format!("{value}, owned by uid {o}, mode {mode:o}"))
            } else {
                Check::warn(
                    ID,
                    format!("{value} has mode {mode:o}: other users can enter it"),
                    format!("chmod 0700 {value}"),
                )
            }
        }
        other => Check::fail(
            ID,
            format!(
                "{value} is owned by uid {}, not {}",
                other.map_or_else(|| "?".to_string(), |o| o.to_string()),
                f.uid
            ),
            fix,
        ),
    }
}

pub(super) fn user_manager(f: &CheckFacts) -> Check {
    const ID: &str = "user-manager";
    match &f.manager_version {
        Ok(v) => Check::pass(ID, format!("systemd {v} (user manager over the user bus)")),
        Err(e) => match f.user_unit.as_ref().and_then(|u| u.as_deref().ok()) {
            // Measured on the testbed: after `kill -KILL` of `systemd --user` the unit is
            // `failed` (result `signal`), the bus socket refuses connections, and logind's
            // linger does not start it again; every timer, run and container is gone with it.
            Some(state @ ("failed" | "inactive")) => Check::fail(
                ID,
                format!(
                    "the user manager is not reachable ({e}): user@{uid}.service is {state}{}; \
                     linger does not restart a user manager that died, so no timer fires and \
                     no run starts; a run it stopped mid-way is converged by the tenant's \
                     next run",
                    if state == "failed" {
                        " (it died, e.g. killed)"
                    } else {
                        ""
                    },
                    uid = f.uid
                ),
                format!(
                    "as root: `systemctl start user@{uid}.service` (or log in again; `loginctl \
                     enable-linger {user}` starts it at boot); then, if podman says so, `podman \
                     system migrate` as {user}",
                    uid = f.uid,
                    user = f.user
                ),
            ),
            _ => Check::fail(
                ID,
                format!("the user manager is not reachable: {e}"),
                format!(
                    "start a user manager: log in through a real session or `loginctl \
                     enable-linger {}`; check that $XDG_RUNTIME_DIR/bus exists (B09)",
                    f.user
                ),
            ),
        },
    }
}

pub(super) fn scheduled_tenants(f: &CheckFacts) -> Vec<&str> {
    f.tenants
        .iter()
        .filter(|t| t.spec.as_ref().is_ok_and(|s| s.schedule.is_some()))
        .map(|t| t.name.as_str())
        .collect()
}

pub(super) fn linger(f: &CheckFacts) -> Check {
    const ID: &str = "linger";
    let fix = format!(
        "`loginctl enable-linger {}` (may need an admin: `sudo loginctl enable-linger {}`); \
         cyclix never changes it itself (B08)",
        f.user, f.user
    );
    let scheduled = scheduled_tenants(f);
    match &f.linger {
        Ok(true) => Check::pass(ID, format!("linger enabled for {}", f.user)),
        Ok(false) if !scheduled.is_empty() => Check::fail(
            ID,
            format!(
                "linger is off for {} and tenants {} are scheduled: their timers do not fire \
                 while you are logged out, and runs die at logout",
                f.user,
                scheduled.join(", ")
            ),
            fix,
        ),
        Ok(false) => Check::warn(
            ID,
            format!(
                "linger is off for {}: runs are session-bound (they die when your last session \
                 ends)",
                f.user
            ),
            fix,
        ),
        Err(e) if !scheduled.is_empty() => Check::fail(
            ID,
            format!(
                "cannot read linger ({e}) and tenants {} are scheduled",
                scheduled.join(", ")
            ),
            fix,
        ),
        Err(e) => Check::warn(ID, format!("cannot read linger: {e}"), fix),
    }
}

pub(super) fn owns(entry_owner: &str, f: &CheckFacts) -> bool {
    entry_owner == f.user || entry_owner == f.uid.to_string()
}

/// A range start for the fix: the first 65536-aligned id at or above 100000 past every range.
pub(super) fn free_start(ids: &[crate::host::facts::SubIdEntry]) -> u64 {
    let end = ids.iter().map(|e| e.start + e.count).max().unwrap_or(0);
    end.max(100_000).div_ceil(SUBID_MIN) * SUBID_MIN
}

pub(super) fn subids(f: &CheckFacts, s: &SubIds, id: &str, flag: &str) -> Check {
    let entries = match &s.entries {
        Ok(e) => e,
        Err(e) => {
            return Check::fail(
                id,
                e.clone(),
                format!(
                    "create {} with a range for {}: `sudo usermod {flag} 100000-165535 {}`",
                    s.file, f.user, f.user
                ),
            );
        }
    };
    let mine: Vec<_> = entries.iter().filter(|e| owns(&e.owner, f)).collect();
    let start = free_start(entries);
    let fix = format!(
        "`sudo usermod {flag} {start}-{} {}` (a free range of {SUBID_MIN} ids), then \
         `podman system migrate` (B10)",
        start + SUBID_MIN - 1,
        f.user
    );
    if mine.is_empty() {
        return Check::fail(
            id,
            format!(
                "{} has no line for {}: podman falls back to a single id and images with files \
                 of other owners fail",
                s.file, f.user
            ),
            fix,
        );
    }
    for m in &mine {
        for other in entries.iter().filter(|e| !owns(&e.owner, f)) {
            if m.start < other.start + other.count && other.start < m.start + m.count {
                return Check::fail(
                    id,
                    format!(
                        "{}: {}'s range {}-{} overlaps {}'s range {}-{}: their containers \
                         share file ownership",
                        s.file,
                        f.user,
                        m.start,
                        m.start + m.count - 1,
                        other.owner,
                        other.start,
                        other.start + other.count - 1
                    ),
                    format!(
                        "give {} a range of its own: remove the overlapping line from {} and run \
                         {fix}",
                        f.user, s.file
                    ),
                );
            }
        }
    }
    // B10: podman's own view. One line (`0 UID 1`) means it mapped a single id.
    if id == "subuid"
        && let Some(Ok(map)) = &f.uid_map
        && map.iter().filter(|l| !l.is_empty()).count() <= 1
    {
        return Check::fail(
            id,
            format!(
                "{} has a line for {}, but `podman unshare cat /proc/self/uid_map` maps a single \
                 id: {}",
                s.file,
                f.user,
                map.join(" | ")
            ),
            "`podman system migrate` (podman reads sub-ids when its user namespace is first \
             created), then rerun `cyclix check`",
        );
    }
    let total: u64 = mine.iter().map(|e| e.count).sum();
    let ranges = mine
        .iter()
        .map(|e| format!("{}-{}", e.start, e.start + e.count - 1))
        .collect::<Vec<_>>()
        .join(", ");
    if total < SUBID_MIN {
        return Check::fail(
            id,
            format!(
                "{}: {} has {total} ids ({ranges}), fewer than {SUBID_MIN}: images with ids \
                 above {} fail to unpack",
                s.file,
                f.user,
                total.saturating_sub(1)
            ),
            fix,
        );
    }
    Check::pass(
        id,
        format!("{}: {} has {total} ids ({ranges})", s.file, f.user),
    )
}

pub(super) fn id_mapper(m: &IdMapper, cap: &str) -> Check {
    let id = m.name.as_str();
    let fix = format!(
        "reinstall it so that it is setuid root or carries {cap}: Debian/Ubuntu `sudo apt \
         install --reinstall uidmap`; Fedora `sudo dnf reinstall shadow-utils`; or \
         `sudo setcap {cap}=ep {}` (B10)",
        m.path.as_deref().unwrap_or("/usr/bin/NAME")
    );
    let Some(path) = &m.path else {
        return Check::fail(
            id,
            format!("{id} is not on $PATH: rootless podman cannot map sub-ids"),
            "install it: Debian/Ubuntu `sudo apt install uidmap`; Fedora `sudo dnf install \
             shadow-utils`",
        );
    };
    if m.setuid_root {
        return Check::pass(id, format!("{path} (setuid root)"));
    }
    match &m.caps {
        Some(Ok(c)) if c.contains(cap) => Check::pass(id, format!("{path} ({c})")),
        Some(Ok(c)) => Check::fail(
            id,
            format!(
                "{path} is neither setuid root nor has {cap} (file capabilities: {}): rootless \
                 podman cannot set up its user namespace",
                if c.is_empty() { "none" } else { c }
            ),
            fix,
        ),
        Some(Err(e)) => Check::fail(
            id,
            format!("{path} is not setuid root and its capabilities are unknown: {e}"),
            fix,
        ),
        None => Check::fail(id, format!("{path}: capabilities not read"), fix),
    }
}

pub(super) fn network_online(f: &CheckFacts) -> Check {
    const ID: &str = "network-online";
    let v = podman_version(f);
    if !at_least(v, NETWORK_ONLINE_WAIT_SINCE) || f.quadlet.generator.is_none() {
        return Check::skip(
            ID,
            "only user Quadlet units of podman ≥ 5.3 wait for network-online.target",
        );
    }
    match f.network_online.as_deref() {
        Ok("active") => Check::pass(ID, "the system's network-online.target is active"),
        Ok(state) => Check::warn(
            ID,
            format!(
                "the system's network-online.target is {state}: every user Quadlet unit without \
                 `DefaultDependencies=false` waits up to 90 s in \
                 podman-user-wait-network-online.service (cyclix's per-run units opt out; B07)"
            ),
            "have the system reach network-online.target at boot: `sudo systemctl enable \
             systemd-networkd-wait-online.service` (systemd-networkd) or `sudo systemctl enable \
             NetworkManager-wait-online.service` (NetworkManager)",
        ),
        Err(e) => Check::warn(
            ID,
            format!("cannot read network-online.target: {e}"),
            "check `systemctl is-active network-online.target`; it must be active (B07)",
        ),
    }
}
