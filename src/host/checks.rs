//! The verdicts of `cyclix check`: PURE functions over [`HostFacts`] (no I/O, no environment,
//! no clock). [`checks`] returns one [`Check`] per check, in a fixed order, each with a stable
//! id, a [`Status`], what was found and, unless it passed, the exact fix.
//!
//! Field reports (../shared/research/field-reports.md): B01 (the Quadlet generator and the
//! podman floor), B07 (the network-online stall), B08 (linger), B09 (runtime dir, user bus,
//! cgroup manager and delegation), B10 (sub-ids, newuidmap/newgidmap).
//!
//! Floors: podman 4.3 runs cyclix with plain units; 5.0 with Quadlet (`.pod` units, B01).
//! Since 5.3 user Quadlet units wait for the system's `network-online.target` (B07).

use serde::Serialize;

use super::facts::{HostFacts, IdMapper, ImageFact, SubIds, TenantFacts};
use crate::spec::{Spec, mount_guard};
use crate::tier::{self, Runtime, Tier};

/// The lowest podman cyclix runs on (plain units): 4.3.
pub const PODMAN_FLOOR: (u32, u32) = (4, 3);
/// The lowest podman cyclix uses Quadlet with: 5.0.
pub const QUADLET_FLOOR: (u32, u32) = (5, 0);
/// The podman version whose user Quadlet units wait for `network-online.target`: 5.3 (B07).
pub const NETWORK_ONLINE_WAIT_SINCE: (u32, u32) = (5, 3);
/// The sub-id range rootless podman needs for common images: 65536 ids.
pub const SUBID_MIN: u64 = 65_536;
/// The controllers resource limits need in the user manager's cgroup.
pub const LIMIT_CONTROLLERS: [&str; 3] = ["cpu", "memory", "pids"];
/// A probe slower than this did not fail fast (ENETUNREACH is immediate): 3000 ms.
pub const FAST_FAIL_MS: u64 = 3000;

/// The verdict of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Pass,
    /// Works, with a caveat worth fixing.
    Warn,
    /// cyclix cannot run correctly here until this is fixed.
    Fail,
    /// Not checked; `found` says why.
    Skip,
}

impl Status {
    /// `pass`, `warn`, `fail` or `skip`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Stable id (`podman`, `subuid`, ..., `spec:TENANT`, `images:TENANT`).
    pub id: String,
    /// The verdict.
    pub status: Status,
    /// What was found (for `skip`: why it was skipped).
    pub found: String,
    /// The exact fix; `None` when the check passed or was skipped.
    pub fix: Option<String>,
}

impl Check {
    fn new(id: &str, status: Status, found: impl Into<String>, fix: Option<String>) -> Check {
        Check {
            id: id.to_string(),
            status,
            found: found.into(),
            fix,
        }
    }
    fn pass(id: &str, found: impl Into<String>) -> Check {
        Check::new(id, Status::Pass, found, None)
    }
    fn warn(id: &str, found: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(id, Status::Warn, found, Some(fix.into()))
    }
    fn fail(id: &str, found: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(id, Status::Fail, found, Some(fix.into()))
    }
    fn skip(id: &str, why: impl Into<String>) -> Check {
        Check::new(id, Status::Skip, why, None)
    }
}

/// Options of `cyclix check`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckOptions {
    /// `--tenant T`: the facts hold only T, and T must exist.
    pub tenant: Option<String>,
}

/// Every check, in a fixed order.
#[must_use]
pub fn checks(f: &HostFacts, o: &CheckOptions) -> Vec<Check> {
    let mut v = vec![
        podman(f),
        quadlet(f),
        rootless(f),
        runtime_dir(f),
        user_manager(f),
        linger(f),
        subids(f, &f.subuid, "subuid", "--add-subuids"),
        subids(f, &f.subgid, "subgid", "--add-subgids"),
        id_mapper(&f.newuidmap, "cap_setuid"),
        id_mapper(&f.newgidmap, "cap_setgid"),
        cgroup_v2(f),
        cgroup_delegation(f),
        oci_runtime(f),
        network_backend(f),
        rootless_network(f),
        storage_driver(f),
        podman_info(f),
        network_online(f),
    ];
    if let Some(t) = &o.tenant
        && !f.tenants.iter().any(|x| &x.name == t)
    {
        v.push(Check::fail(
            &format!("spec:{t}"),
            format!("no spec for tenant `{t}`"),
            format!(
                "write ~/.config/cyclix/tenants/{t}.yaml (README, \"Spec reference\"), or \
                 `cyclix demo setup` for the demo tenant"
            ),
        ));
    }
    for t in &f.tenants {
        v.push(spec(f, t));
        v.push(images(f, t));
    }
    v.push(outcome(f));
    v
}

/// `major.minor.patch` from `5.4.2`, `4.3.1-dev`, `5.0.0-rc1` (missing parts are 0).
#[must_use]
pub fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let mut nums = v.trim().split(['.', '-', '+', '~']).map(|p| {
        p.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
    });
    let major = nums.next()?.parse().ok()?;
    let minor = nums.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    let patch = nums.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    Some((major, minor, patch))
}

fn at_least(v: Option<(u32, u32, u32)>, floor: (u32, u32)) -> bool {
    v.is_some_and(|(a, b, _)| (a, b) >= floor)
}

fn podman_version(f: &HostFacts) -> Option<(u32, u32, u32)> {
    match &f.podman.version {
        Some(Ok(v)) => parse_version(v),
        _ => None,
    }
}

const INSTALL_PODMAN: &str = "install podman ≥ 5.0 and put it on $PATH (Debian 13/Ubuntu 24.04: \
     `sudo apt install podman`; Fedora: `sudo dnf install podman`)";

fn podman(f: &HostFacts) -> Check {
    const ID: &str = "podman";
    let Some(path) = &f.podman.path else {
        return Check::fail(ID, "podman is not on $PATH", INSTALL_PODMAN);
    };
    match &f.podman.version {
        None => Check::fail(ID, format!("{path}: not run"), INSTALL_PODMAN),
        // podman keeps state in $XDG_RUNTIME_DIR: with someone else's there even `--version`
        // fails (testbed: "mkdir /run/user/1000/libpod: permission denied"). That is the
        // runtime-dir failure, reported once, there.
        Some(Err(e))
            if runtime_dir(f).status == Status::Fail
                && f.runtime_dir
                    .value
                    .as_deref()
                    .is_some_and(|v| e.contains(v)) =>
        {
            Check::skip(
                ID,
                format!(
                    "{path}: not checked: `podman --version` fails because of $XDG_RUNTIME_DIR \
                     (see runtime-dir): {e}"
                ),
            )
        }
        Some(Err(e)) => Check::fail(
            ID,
            format!("{path}: `podman --version` failed: {e}"),
            format!("repair or reinstall podman ({INSTALL_PODMAN})"),
        ),
        Some(Ok(v)) => {
            let parsed = parse_version(v);
            if at_least(parsed, QUADLET_FLOOR) {
                let how = if f.podman.version_cached {
                    " (remembered for this exact binary)"
                } else {
                    ""
                };
                Check::pass(ID, format!("{path}: podman {v}{how}"))
            } else if at_least(parsed, PODMAN_FLOOR) {
                Check::warn(
                    ID,
                    format!(
                        "{path}: podman {v}: cyclix uses plain units (podman < 5.0 has no usable \
                         Quadlet `.pod`); it loses Quadlet's own translation of the unit files \
                         (network/pod dependencies, --sdnotify, --cgroups=split) that newer \
                         podman keeps current"
                    ),
                    format!("upgrade to podman ≥ 5.0 for the Quadlet backend ({INSTALL_PODMAN})"),
                )
            } else {
                Check::fail(
                    ID,
                    format!(
                        "{path}: podman {v} is older than cyclix's floor {}.{}",
                        PODMAN_FLOOR.0, PODMAN_FLOOR.1
                    ),
                    format!("upgrade podman: {INSTALL_PODMAN}"),
                )
            }
        }
    }
}

fn quadlet(f: &HostFacts) -> Check {
    const ID: &str = "quadlet";
    let wants_quadlet = at_least(podman_version(f), QUADLET_FLOOR);
    let searched = f.quadlet.searched.join(", ");
    match (&f.quadlet.generator, &f.quadlet.version) {
        (Some(g), Some(Ok(v))) => match &f.quadlet.dryrun {
            None => Check::pass(ID, format!("{g} (quadlet {v})")),
            Some(Ok(true)) => Check::pass(
                ID,
                format!(
                    "{g} (quadlet {v}); a user dry run turned probe.container into probe.service"
                ),
            ),
            Some(Ok(false)) => Check::fail(
                ID,
                format!(
                    "{g} (quadlet {v}) ran, but a user dry run generated no probe.service from probe.container (B01)"
                ),
                "run `QUADLET_UNIT_DIRS=DIR quadlet -dryrun -user` on a directory with a .container \
                 file to see why; reinstall podman if it prints nothing",
            ),
            Some(Err(e)) => Check::fail(
                ID,
                format!("{g} (quadlet {v}): the user dry run failed: {e}"),
                "reinstall podman's Quadlet (Debian: `sudo apt install --reinstall podman`)",
            ),
        },
        (Some(g), Some(Err(e))) => Check::fail(
            ID,
            format!("{g} is present but `{g} -version` failed: {e}"),
            "reinstall podman's Quadlet (Debian: `sudo apt install --reinstall podman`)",
        ),
        (Some(g), None) => Check::fail(ID, format!("{g}: not run"), "rerun `cyclix check`"),
        (None, _) if wants_quadlet => Check::fail(
            ID,
            format!(
                "no podman-user-generator in {searched}: the user manager generates no units \
                 from Quadlet files, so every run would fail with \"unit not found\" (B01)"
            ),
            "install podman's Quadlet generator as a user generator: \
             `sudo ln -s /usr/libexec/podman/quadlet /usr/lib/systemd/user-generators/podman-user-generator` \
             (where your distribution installs `quadlet`), then `systemctl --user daemon-reload`",
        ),
        (None, _) => Check::warn(
            ID,
            format!(
                "no podman-user-generator in {searched}: cyclix uses plain units (podman commands \
                 in .service files); it loses Quadlet's translation that podman keeps current"
            ),
            "upgrade to podman ≥ 5.0, which ships the Quadlet user generator",
        ),
    }
}

fn rootless(f: &HostFacts) -> Check {
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

fn runtime_dir(f: &HostFacts) -> Check {
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

fn user_manager(f: &HostFacts) -> Check {
    const ID: &str = "user-manager";
    match &f.manager_version {
        Ok(v) => Check::pass(ID, format!("systemd {v} (user manager over the user bus)")),
        Err(e) => Check::fail(
            ID,
            format!("the user manager is not reachable: {e}"),
            format!(
                "start a user manager: log in through a real session or `loginctl enable-linger \
                 {}`; check that $XDG_RUNTIME_DIR/bus exists (B09)",
                f.user
            ),
        ),
    }
}

fn scheduled_tenants(f: &HostFacts) -> Vec<&str> {
    f.tenants
        .iter()
        .filter(|t| t.spec.as_ref().is_ok_and(|s| s.schedule.is_some()))
        .map(|t| t.name.as_str())
        .collect()
}

fn linger(f: &HostFacts) -> Check {
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

fn owns(entry_owner: &str, f: &HostFacts) -> bool {
    entry_owner == f.user || entry_owner == f.uid.to_string()
}

/// A range start for the fix: the first 65536-aligned id at or above 100000 past every range.
fn free_start(ids: &[super::facts::SubIdEntry]) -> u64 {
    let end = ids.iter().map(|e| e.start + e.count).max().unwrap_or(0);
    end.max(100_000).div_ceil(SUBID_MIN) * SUBID_MIN
}

fn subids(f: &HostFacts, s: &SubIds, id: &str, flag: &str) -> Check {
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

fn id_mapper(m: &IdMapper, cap: &str) -> Check {
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

fn cgroup_v2(f: &HostFacts) -> Check {
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
fn asked_controllers(f: &HostFacts) -> Vec<(&str, &'static str)> {
    let mut v = Vec::new();
    for t in &f.tenants {
        if let Ok(s) = &t.spec {
            // The same list `cyclix run` refuses on (run::limits).
            for n in crate::run::limits::needed(&s.agent.resources) {
                v.push((t.name.as_str(), n.controller));
            }
        }
    }
    v
}

const DELEGATE_FIX: &str = crate::run::limits::DELEGATE_FIX;

fn cgroup_delegation(f: &HostFacts) -> Check {
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
        // `cyclix run` refuses these tenants (run::limits): a limit is never silently dropped.
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

fn oci_runtime(f: &HostFacts) -> Check {
    const ID: &str = "oci-runtime";
    if let Some(Ok(info)) = &f.info
        && !info.oci_runtime.is_empty()
    {
        return Check::pass(
            ID,
            format!(
                "{} ({}), as podman uses it",
                info.oci_runtime, info.oci_runtime_path
            ),
        );
    }
    match f.oci_runtimes.first() {
        Some(r) => Check::pass(ID, r.clone()),
        None => Check::fail(
            ID,
            "neither crun nor runc is installed",
            "install crun: Debian/Ubuntu `sudo apt install crun`; Fedora `sudo dnf install crun`",
        ),
    }
}

fn network_backend(f: &HostFacts) -> Check {
    const ID: &str = "network-backend";
    let fix = "install netavark and aardvark-dns: Debian/Ubuntu `sudo apt install netavark \
               aardvark-dns`; Fedora `sudo dnf install netavark aardvark-dns`; then `podman \
               system reset` if podman used CNI before";
    if let Some(Ok(info)) = &f.info
        && !info.network_backend.is_empty()
        && info.network_backend != "netavark"
    {
        return Check::fail(
            ID,
            format!(
                "podman uses the {} network backend: internal networks do not resolve names \
                 the way cyclix needs (B15)",
                info.network_backend
            ),
            fix,
        );
    }
    match (&f.netavark, &f.aardvark_dns) {
        (Some(n), Some(a)) => Check::pass(ID, format!("netavark {n}, aardvark-dns {a}")),
        (n, a) => Check::fail(
            ID,
            format!(
                "missing: {}",
                [("netavark", n), ("aardvark-dns", a)]
                    .iter()
                    .filter(|(_, p)| p.is_none())
                    .map(|(name, _)| *name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            fix,
        ),
    }
}

fn rootless_network(f: &HostFacts) -> Check {
    const ID: &str = "rootless-network";
    match (&f.pasta, &f.slirp4netns) {
        (Some(p), _) => Check::pass(ID, format!("pasta {p}")),
        (None, Some(s)) => Check::pass(ID, format!("slirp4netns {s} (no pasta)")),
        (None, None) => Check::fail(
            ID,
            "neither pasta nor slirp4netns is installed: rootless containers get no network",
            "install pasta: Debian/Ubuntu `sudo apt install passt`; Fedora `sudo dnf install \
             passt`",
        ),
    }
}

fn storage_driver(f: &HostFacts) -> Check {
    const ID: &str = "storage-driver";
    let s = &f.storage;
    match s.driver.as_deref() {
        Some(d @ ("overlay" | "btrfs" | "zfs")) => Check::pass(
            ID,
            format!("{d} (from {}), store {}", s.source, s.graphroot),
        ),
        Some(d) => Check::warn(
            ID,
            format!(
                "{d} (from {}): every layer is a full copy, slow and disk-hungry",
                s.source
            ),
            "use overlay: set `driver = \"overlay\"` in ~/.config/containers/storage.conf, then \
             `podman system reset` (removes all local images and containers)",
        ),
        None => Check::pass(
            ID,
            format!(
                "{}; podman will pick overlay if the file system supports it",
                s.source
            ),
        ),
    }
}

fn podman_info(f: &HostFacts) -> Check {
    const ID: &str = "podman-info";
    match &f.info {
        None if f.quick => Check::skip(ID, "--quick: `podman info` not run"),
        None => Check::skip(ID, "podman is not on $PATH"),
        Some(Err(e)) => Check::fail(
            ID,
            format!("`podman info` failed: {e}"),
            "run `podman info` to see podman's own error; `podman system migrate` repairs \
             storage after a sub-id change",
        ),
        Some(Ok(i)) => {
            let summary = format!(
                "podman {}, rootless={}, cgroup {} manager {}, {} network, {} storage",
                i.version,
                i.rootless,
                i.cgroup_version,
                i.cgroup_manager,
                i.network_backend,
                i.graph_driver
            );
            if !i.rootless {
                Check::fail(
                    ID,
                    summary,
                    "run cyclix (and podman) as an unprivileged user",
                )
            } else if i.cgroup_manager != "systemd" {
                Check::warn(
                    ID,
                    format!(
                        "{summary}: without a systemd user session podman falls back to \
                             cgroupfs and limits are ignored (B09)"
                    ),
                    format!(
                        "log in through a real session or `loginctl enable-linger {}`; remove \
                         `cgroup_manager = \"cgroupfs\"` from containers.conf if set",
                        f.user
                    ),
                )
            } else {
                Check::pass(ID, summary)
            }
        }
    }
}

fn network_online(f: &HostFacts) -> Check {
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

/// Whether a rootless runtime is usable, from the facts (the tier gate's injected fact).
#[must_use]
pub fn runtime(f: &HostFacts) -> Runtime {
    if f.podman.path.is_none() {
        return Runtime::Unusable("podman is not on $PATH".into());
    }
    if !at_least(podman_version(f), PODMAN_FLOOR) {
        return Runtime::Unusable(format!(
            "podman is missing or older than {}.{}",
            PODMAN_FLOOR.0, PODMAN_FLOOR.1
        ));
    }
    if f.uid == 0 {
        return Runtime::Unusable("running as root".into());
    }
    if let Some(Err(e)) = &f.info {
        return Runtime::Unusable(format!("`podman info` failed: {e}"));
    }
    match &f.outcome {
        Some(Err(e)) => Runtime::Unusable(format!("the outcome test could not run: {e}")),
        Some(Ok(o)) if o.control.exit != Some(0) => {
            Runtime::Unusable(format!("a container did not start: {}", o.control.output))
        }
        _ => Runtime::Usable,
    }
}

fn spec(f: &HostFacts, t: &TenantFacts) -> Check {
    let id = format!("spec:{}", t.name);
    let s = match &t.spec {
        Ok(s) => s,
        Err(e) => {
            return Check::fail(
                &id,
                format!("{} is invalid:\n{}", t.file, e.trim_end()),
                format!(
                    "fix the spec; `cyclix spec validate {}` lists every problem",
                    t.file
                ),
            );
        }
    };
    if let Some(fail) = mounts_in_podman_storage(f, t, s) {
        return fail;
    }
    match tier::gate(s.tier, s.legacy_worktree_isolation, &runtime(f)) {
        Err(refusal) => Check::fail(&id, format!("{}: {refusal}", t.file), {
            "make a container runtime usable (the failed checks above), or set `tier: \
             worktree` explicitly if version isolation is enough"
                .to_string()
        }),
        Ok(Tier::Container) => Check::pass(&id, format!("{}: valid, tier container", t.file)),
        Ok(other) => Check::warn(
            &id,
            format!(
                "{}: valid, tier {other}: {}; `cyclix run` implements only tier container",
                t.file,
                other.facts().summary
            ),
            "set `tier: container`",
        ),
    }
}

/// Podman's storage as this host has it: `podman info`'s graph root, run root and volume
/// path, else (`--quick`, podman missing) the graph root from `storage.conf` or the default.
#[must_use]
pub fn podman_storage(f: &HostFacts) -> Vec<mount_guard::Protected> {
    match &f.info {
        Some(Ok(i)) if !i.graph_root.is_empty() => {
            mount_guard::podman_paths(&i.graph_root, &i.run_root, &i.volume_path)
        }
        _ => mount_guard::podman_paths(&f.storage.graphroot, "", ""),
    }
}

/// FAIL `spec:T` when a mount source is, contains or lies inside podman's storage: what
/// `spec validate` cannot know (the real paths come from `podman info`).
fn mounts_in_podman_storage(f: &HostFacts, t: &TenantFacts, s: &Spec) -> Option<Check> {
    let found = mount_guard::refusals(s, &podman_storage(f));
    let fix = found.first()?.hint.clone().unwrap_or_default();
    let text = crate::spec::SpecError {
        file: t.file.clone(),
        diagnostics: found,
    }
    .to_string();
    Some(Check::fail(&format!("spec:{}", t.name), text, fix))
}

fn image_fix(i: &ImageFact) -> String {
    if i.reference == crate::images::PROXY_IMAGE || i.reference == crate::images::AGENT_PYTHON_IMAGE
    {
        "`cyclix images build`".to_string()
    } else if i.reference.starts_with("localhost/") {
        format!("build it: `podman build -t {} ...`", i.reference)
    } else {
        format!("`podman pull {}`", i.reference)
    }
}

fn images(f: &HostFacts, t: &TenantFacts) -> Check {
    let id = format!("images:{}", t.name);
    if t.spec.is_err() {
        return Check::skip(&id, "the spec is invalid");
    }
    if t.images.is_empty() {
        return Check::skip(&id, "the tenant's tier runs no containers");
    }
    let how = if f.quick {
        "image store"
    } else {
        "podman image exists"
    };
    let mut missing = Vec::new();
    let mut unknown = Vec::new();
    let mut unpinned = Vec::new();
    let mut fixes = Vec::new();
    for i in &t.images {
        match &i.present {
            Ok(true) => {}
            Ok(false) => {
                missing.push(format!("{} {}", i.role, i.reference));
                let fix = image_fix(i);
                if !fixes.contains(&fix) {
                    fixes.push(fix);
                }
            }
            Err(e) => unknown.push(format!("{} {}: {e}", i.role, i.reference)),
        }
        // The proxy is cyclix's own locally built image: pinned by cyclix, not by the spec.
        if !i.pinned && i.role != "proxy" {
            unpinned.push(format!("{} {}", i.role, i.reference));
        }
    }
    if !missing.is_empty() {
        return Check::fail(
            &id,
            format!("not in local storage ({how}): {}", missing.join(", ")),
            fixes.join("; "),
        );
    }
    if !unknown.is_empty() {
        return Check::fail(
            &id,
            format!("cannot tell whether present: {}", unknown.join("; ")),
            "run `podman images` to see podman's error",
        );
    }
    let mut refs: Vec<&str> = Vec::new();
    for i in &t.images {
        if !refs.contains(&i.reference.as_str()) {
            refs.push(&i.reference);
        }
    }
    let all = refs.join(", ");
    if unpinned.is_empty() {
        Check::pass(&id, format!("present and pinned: {all}"))
    } else {
        Check::warn(
            &id,
            format!(
                "present; not pinned by digest (unpinned_local_image opt-out): {}",
                unpinned.join(", ")
            ),
            "pin each image by digest (`podman image inspect --format '{{.Digest}}' REF`, then \
             `REF@sha256:...` in the spec) and drop `unpinned_local_image`",
        )
    }
}

fn outcome(f: &HostFacts) -> Check {
    const ID: &str = "outcome";
    let o = match &f.outcome {
        None if f.quick => return Check::skip(ID, "--quick"),
        // Skipped only with --quick: without podman the proof is missing, which is a failure.
        None => {
            return Check::fail(ID, "cannot run: podman is not on $PATH", INSTALL_PODMAN);
        }
        Some(Err(e)) => {
            return Check::fail(
                ID,
                format!("the outcome test could not run: {e}"),
                "fix the failed checks above, then rerun `cyclix check`",
            );
        }
        Some(Ok(o)) => o,
    };
    let what = format!(
        "{} on internal network {} (label {}={})",
        o.image,
        o.network,
        super::facts::CHECK_LABEL,
        o.nonce
    );
    if o.control.exit != Some(0) {
        return Check::fail(
            ID,
            format!(
                "{what}: a container running `true` failed (exit {:?}): {}",
                o.control.exit, o.control.output
            ),
            "run `podman run --rm IMAGE true` to see podman's error; the failed checks above \
             name the usual causes (sub-ids, newuidmap, cgroups, pasta)",
        );
    }
    let p = &o.probe;
    let out = p.output.to_lowercase();
    if p.exit == Some(0) || out.contains("connected") {
        return Check::fail(
            ID,
            format!(
                "{what}: the container reached {}: {}",
                super::facts::OUTSIDE_ADDRESS,
                p.output
            ),
            "an --internal network must have no route out: check netavark's firewall driver \
             (`podman info --format '{{.Host.NetworkBackendInfo}}'`) and that no \
             containers.conf option adds networks",
        );
    }
    if out.contains("no probe tool") {
        return Check::fail(
            ID,
            format!("{what}: the image has neither python3 nor wget to probe with"),
            "make a busybox image available: `podman pull docker.io/library/busybox:latest`",
        );
    }
    if !out.contains("unreachable") || p.elapsed_ms > FAST_FAIL_MS {
        return Check::fail(
            ID,
            format!(
                "{what}: the connection to {} did not fail fast with \"network unreachable\" \
                 ({} ms): {}",
                super::facts::OUTSIDE_ADDRESS,
                p.elapsed_ms,
                p.output
            ),
            "an --internal network must reject at once (ENETUNREACH), never drop (B17); check \
             the network backend (netavark) and its firewall driver",
        );
    }
    if !o.leftovers.is_empty() || o.cleanup_error.is_some() {
        return Check::fail(
            ID,
            format!(
                "{what}: left behind after removal: {}{}",
                o.leftovers.join(", "),
                o.cleanup_error
                    .as_deref()
                    .map_or_else(String::new, |e| format!(" (cleanup: {e})"))
            ),
            format!(
                "remove them: `podman rm -f $(podman ps -aq --filter label={}={n}); podman \
                 network rm -f $(podman network ls -q --filter label={}={n})`",
                super::facts::CHECK_LABEL,
                super::facts::CHECK_LABEL,
                n = o.nonce
            ),
        );
    }
    Check::pass(
        ID,
        format!(
            "{what}: started and ran `true` ({} ms); {}:80 unreachable in {} ms; nothing left \
             ({} ms in all)",
            o.control.elapsed_ms,
            super::facts::OUTSIDE_ADDRESS,
            p.elapsed_ms,
            o.elapsed_ms
        ),
    )
}

#[cfg(test)]
#[path = "checks_tests.rs"]
mod tests;
