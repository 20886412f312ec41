//! Filesystems (P13–P18): read-only root, scratch space, the project, the user's git dir and
//! the mount allowlist.

use super::kernel::MASKED_PATHS;
use super::{Attempt, Judged, all_errno, judged};
use crate::probe::Context;

/// One line of `/proc/self/mountinfo`, the fields the probes use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The mount point (field 5).
    pub point: String,
    /// The root of the mount within its filesystem (field 4): for a bind mount, the source.
    pub root: String,
    /// Per-mount options (field 6), e.g. `ro,nosuid,nodev`.
    pub opts: Vec<String>,
    /// The filesystem type.
    pub fstype: String,
}

impl Mount {
    /// Has this per-mount option.
    #[must_use]
    pub fn has(&self, opt: &str) -> bool {
        self.opts.iter().any(|o| o == opt)
    }
}

/// The last mount at `point` (the one that is visible).
#[must_use]
pub fn mount_at<'a>(mounts: &'a [Mount], point: &str) -> Option<&'a Mount> {
    mounts.iter().rev().find(|m| m.point == point)
}

/// P13: `/`, `/sys` and `/sys/fs/cgroup` are mounted read-only. Under the `gvisor` profile
/// `/sys/fs/cgroup` may be missing (bookworm's runsc 0.0~20221219 mounts no cgroupfs: nothing
/// of the host's cgroup tree is there to write).
#[must_use]
pub fn p13(mounts: &[Mount], profile: crate::probe::Profile) -> Judged {
    let items: Vec<(String, String)> = ["/", "/sys", "/sys/fs/cgroup"]
        .iter()
        .map(|p| {
            let s = match mount_at(mounts, p) {
                Some(m) if m.has("ro") => "ro".to_string(),
                Some(_) => "rw".to_string(),
                None => "missing".to_string(),
            };
            ((*p).to_string(), s)
        })
        .collect();
    judged(
        "/ ro, /sys ro, /sys/fs/cgroup ro",
        items
            .iter()
            .map(|(p, s)| format!("{p} {s}"))
            .collect::<Vec<_>>()
            .join(", "),
        items.iter().all(|(p, s)| {
            s == "ro"
                || (profile == crate::probe::Profile::Gvisor
                    && p == "/sys/fs/cgroup"
                    && s == "missing")
        }),
        "",
    )
}

/// P14: creating files on the root filesystem. Under the `gvisor` profile `EACCES` is gVisor's
/// answer for its read-only root's top directory and is accepted too.
#[must_use]
pub fn p14(items: &[(String, Attempt)], profile: crate::probe::Profile) -> Judged {
    if profile == crate::probe::Profile::Gvisor {
        return all_errno(
            "EROFS (or gVisor's EACCES) for /probe-root-* and /usr/probe-*",
            items,
            &[libc::EROFS, libc::EACCES],
        );
    }
    all_errno(
        "EROFS for /probe-root-* and /usr/probe-*",
        items,
        &[libc::EROFS],
    )
}

/// One scratch directory as seen by P15.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScratchObs {
    /// The directory.
    pub path: String,
    /// Creating, writing and removing a file there.
    pub write: Attempt,
    /// Its mount (if it is a mount point).
    pub mount: Option<Mount>,
}

/// P15: `/tmp`, `/var/tmp`, `/run`, `/dev/shm` writable (positive control for P14) and mounted
/// `nosuid,nodev`. An agent that is not root (`own_euid` ≠ 0, a preset's uid) may find `/run`
/// (root's tmpfs, mode 0755) not writable: a place it cannot write holds nothing it planted;
/// `/tmp` must still be writable, so the positive control stands.
#[must_use]
pub fn p15(items: &[ScratchObs], own_euid: u32) -> Judged {
    let mut bad = Vec::new();
    for s in items {
        let denied_ok =
            own_euid != 0 && s.path == "/run" && s.write == Attempt::Errno(libc::EACCES);
        if s.write != Attempt::Ok && !denied_ok {
            bad.push(format!("{}: write {}", s.path, s.write.text()));
        }
        match &s.mount {
            Some(m) if m.has("nosuid") && m.has("nodev") => {}
            Some(m) => bad.push(format!("{}: mounted {}", s.path, m.opts.join(","))),
            None => bad.push(format!("{}: not a separate mount", s.path)),
        }
    }
    judged(
        "writable, nosuid,nodev: /tmp /var/tmp /run /dev/shm",
        items
            .iter()
            .map(|s| {
                format!(
                    "{}={}[{}]",
                    s.path,
                    s.write.text(),
                    s.mount.as_ref().map_or(String::new(), |m| m.opts.join(","))
                )
            })
            .collect::<Vec<_>>()
            .join(" "),
        items.len() == 4 && bad.is_empty(),
        bad.join("; "),
    )
}

/// What P16 saw in the project directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectObs {
    /// Create, rename, delete of `.probe-*`.
    pub cycle: Attempt,
    /// The created file's owner uid (inside).
    pub owner: Option<u32>,
    /// Our effective uid.
    pub own_euid: u32,
    /// The host uid our uid maps to (from `uid_map`).
    pub host_uid_of_owner: Option<u32>,
    /// The project's mount.
    pub mount: Option<Mount>,
}

/// P16: the project is writable, files belong to the agent uid that maps to the invoking host
/// user, and the project mount and the writable git common dir mount carry `nosuid,nodev`
/// (§2 P16; a setuid file planted there would otherwise be runnable by other host users as the
/// invoking user, and by later sandboxes that mount the same tree).
#[must_use]
pub fn p16(o: &ProjectObs, ctx: &Context) -> Judged {
    let mut why = Vec::new();
    if o.cycle != Attempt::Ok {
        why.push(format!("create/rename/delete: {}", o.cycle.text()));
    }
    if o.owner != Some(o.own_euid) {
        why.push(format!("owner {:?} is not our uid {}", o.owner, o.own_euid));
    }
    if o.host_uid_of_owner != Some(ctx.parent_uid()) {
        why.push(format!(
            "owner maps to uid {:?} of the parent namespace, not {} (the host user)",
            o.host_uid_of_owner,
            ctx.parent_uid()
        ));
    }
    if ctx.agent_uid.is_some_and(|u| u != o.own_euid) {
        why.push(format!(
            "we run as uid {}, not the preset's uid {:?}",
            o.own_euid, ctx.agent_uid
        ));
    }
    match &o.mount {
        Some(m) if m.has("nosuid") && m.has("nodev") => {}
        Some(m) => why.push(format!(
            "{} is mounted without nosuid,nodev ({})",
            ctx.workdir,
            m.opts.join(",")
        )),
        None => why.push(format!("{} is not a mount point", ctx.workdir)),
    }
    judged(
        format!(
            "create/rename/delete ok; owner maps to host uid {}; project nosuid,nodev",
            ctx.host_uid
        ),
        format!(
            "cycle={} owner={:?}->{:?} opts={}",
            o.cycle.text(),
            o.owner,
            o.host_uid_of_owner,
            o.mount.as_ref().map_or("-".into(), |m| m.opts.join(","))
        ),
        why.is_empty(),
        why.join("; "),
    )
}

/// P17: the user repository's git dir — its host path, its `config` and `hooks`, and the
/// repository around it — does not exist in the sandbox (each must be `ENOENT`), plus the
/// positive control (a write in the private repository's own `.git`).
///
/// Policy (issue 11): the agent commits into a private repository of the run; nothing of the
/// user's repository is mounted, so nothing host git reads can be written from here. Files
/// the host may run later (`.bashrc`, `.mcp.json`, `Makefile`, `.github/`) are the agent's
/// product, imported as data and held from delivery when they are automation files.
#[must_use]
pub fn p17(items: &[(String, Attempt)], control: &Attempt) -> Judged {
    let mut j = all_errno(
        "ENOENT for the user's git dir, its config and hooks, and its repository; a write in /work/.git ok",
        items,
        &[libc::ENOENT],
    );
    j.got = format!("{} control={}", j.got, control.text());
    if *control != Attempt::Ok {
        j.pass = false;
        j.detail = format!(
            "positive control failed: a write in the private repository's .git gave {}",
            control.text()
        );
    } else if j.pass {
        j.detail = "policy: the agent's repository is its own; the user's is not mounted".into();
    }
    j
}

/// Mount points every agent container has (podman 5.4, `--read-only`, `--init`, rootless):
/// the base set of §2 P18 plus the device-node binds and masks podman adds.
pub const BASE_MOUNTS: &[&str] = &[
    "/",
    "/proc",
    "/dev",
    "/dev/pts",
    "/dev/mqueue",
    "/dev/shm",
    "/sys",
    "/sys/fs/cgroup",
    "/tmp",
    "/var/tmp",
    "/run",
    "/etc/hosts",
    "/etc/hostname",
    "/etc/resolv.conf",
    "/run/.containerenv",
    "/run/podman-init",
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
    "/dev/console",
    // read-only and masked paths (podman defaults)
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/proc/asound",
    "/proc/interrupts",
];

/// Whether `root` (a mount's root within its filesystem) is `source` or a trailing part of it,
/// component-wise: a bind from a separate `/home` file system shows `/u/datasets/x` for
/// `/home/u/datasets/x`.
fn root_of(root: &str, source: &str) -> bool {
    let r: Vec<&str> = root.split('/').filter(|c| !c.is_empty()).collect();
    let s: Vec<&str> = source.split('/').filter(|c| !c.is_empty()).collect();
    !r.is_empty() && s.ends_with(&r)
}

/// Why mount `m` exposes the host (P18), naming the mount: a root below `/home/`, `/root` or
/// `/run/user/` that is not a declared `mounts:` entry's source at its target, or a declared
/// read-only entry that is writable.
fn host_path_leak(m: &Mount, ctx: &Context) -> Option<String> {
    let at = format!("{} <- {}", m.point, m.root);
    let host_root = m.root.starts_with("/home/")
        || m.root.starts_with("/run/user/")
        || m.root.starts_with("/root");
    match ctx.declared_mounts.iter().find(|d| d.target == m.point) {
        Some(d) if host_root && !root_of(&m.root, &d.source) => Some(format!(
            "{at} (the spec declares `{}` at {}, not this)",
            d.source, d.target
        )),
        Some(d) if d.read_only && !m.has("ro") => {
            Some(format!("{at} is writable (the spec declares it read_only)"))
        }
        None if host_root => Some(format!("{at} (not a declared mount)")),
        Some(_) | None => None,
    }
}

/// Mount points podman adds under `keep-id` (a preset's uid, issue 14), measured on podman
/// 5.4: `/sys` becomes a read-only tmpfs with these read-only sysfs subtrees bound in (a
/// nested user namespace cannot mount a fresh sysfs), and `/etc/passwd`, `/etc/group` name
/// the uid from the container's own `userdata` directory. P18 accepts them only read-only
/// and, for the two files, only from `.../userdata/`.
pub const KEEP_ID_MOUNTS: &[&str] = &[
    "/sys/block",
    "/sys/bus",
    "/sys/class",
    "/sys/dev",
    "/sys/devices",
    "/sys/kernel",
    "/etc/passwd",
    "/etc/group",
];

/// Whether `m` is one of [`KEEP_ID_MOUNTS`] as podman makes it.
fn keep_id_mount(m: &Mount) -> bool {
    let from_userdata = |f: &str| {
        m.root.starts_with("/storage/overlay-containers/")
            && m.root.ends_with(&format!("/userdata/{f}"))
    };
    KEEP_ID_MOUNTS.contains(&m.point.as_str())
        && m.has("ro")
        && match m.point.as_str() {
            "/etc/passwd" => from_userdata("passwd"),
            "/etc/group" => from_userdata("group"),
            _ => m.fstype == "sysfs" || m.fstype == "tmpfs",
        }
}

/// Paths podman < 5 masks that podman 5.4 does not: podman 4.3.1 (Debian 12) masks
/// `/sys/dev/block` with a size-0 read-only tmpfs (measured on the bookworm testbed). A mask
/// hides more, so P18 accepts it, but only in that form ([`podman4_mask`]).
pub const PODMAN4_MASKS: &[&str] = &["/sys/dev/block"];

/// Whether `m` is one of [`PODMAN4_MASKS`] as podman 4.3 makes it: a read-only tmpfs.
fn podman4_mask(m: &Mount) -> bool {
    PODMAN4_MASKS.contains(&m.point.as_str()) && m.fstype == "tmpfs" && m.has("ro")
}

/// P18: every mount point is expected; none exposes a host home or runtime dir it should not.
/// Under keep-id (`ctx.agent_uid`) podman's own [`KEEP_ID_MOUNTS`] are expected too.
#[must_use]
pub fn p18(mounts: &[Mount], ctx: &Context) -> Judged {
    let mut allowed: Vec<String> = BASE_MOUNTS.iter().map(|s| (*s).to_string()).collect();
    allowed.extend(MASKED_PATHS.iter().map(|s| (*s).to_string()));
    allowed.push(ctx.workdir.clone());
    allowed.extend(ctx.expected_binds.iter().cloned());
    let extra: Vec<String> = mounts
        .iter()
        .filter(|m| !allowed.contains(&m.point))
        .filter(|m| !(ctx.agent_uid.is_some() && keep_id_mount(m)))
        .filter(|m| !podman4_mask(m))
        // gVisor mounts its own cgroupfs (cpu, memory, pids, …) below /sys/fs/cgroup.
        .filter(|m| {
            !(ctx.profile == crate::probe::Profile::Gvisor
                && m.point.starts_with("/sys/fs/cgroup/")
                && m.fstype == "cgroup")
        })
        .map(|m| format!("{} (from {})", m.point, m.root))
        .collect();
    let declared = |p: &str| p == ctx.workdir;
    let leaks: Vec<String> = mounts
        .iter()
        .filter(|m| !declared(&m.point))
        .filter_map(|m| host_path_leak(m, ctx))
        .collect();
    let has_root = mounts.iter().any(|m| m.point == "/");
    let mut why = Vec::new();
    if !has_root {
        why.push("mountinfo unreadable or has no / (positive control)".to_string());
    }
    if !extra.is_empty() {
        why.push(format!("unexpected mounts: {}", extra.join(", ")));
    }
    if !leaks.is_empty() {
        why.push(format!("host home/runtime paths: {}", leaks.join("; ")));
    }
    judged(
        "only the base set, the project and context.expected_binds",
        if leaks.is_empty() {
            format!("{} mounts, {} unexpected", mounts.len(), extra.len())
        } else {
            format!(
                "{} mounts, {} unexpected, host paths: {}",
                mounts.len(),
                extra.len(),
                leaks.join("; ")
            )
        },
        why.is_empty(),
        why.join("; "),
    )
}
