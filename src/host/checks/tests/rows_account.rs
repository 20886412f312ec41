//! Table rows of the account checks: rootless, runtime dir, user manager, linger, sub-ids, id mappers, network-online.

use super::*;

/// Rootless, runtime dir and user manager (B09), linger (B08), sub-ids and id mappers (B10).
#[allow(clippy::too_many_lines)] // one row per case
pub(super) fn account_rows() -> Vec<Row> {
    vec![
        // rootless
        (
            "root",
            |f| f.uid = 0,
            "rootless",
            Status::Fail,
            "unprivileged user",
        ),
        (
            "uid unreadable",
            |f| f.uid = u32::MAX,
            "rootless",
            Status::Fail,
            "/proc/self/status",
        ),
        // runtime dir (B09)
        (
            "B09 runtime dir unset",
            |f| f.runtime_dir.value = None,
            "runtime-dir",
            Status::Fail,
            "unset",
        ),
        (
            "B09 runtime dir of root (su)",
            |f| {
                f.runtime_dir.value = Some("/run/user/0".into());
                f.runtime_dir.owner = Some(0);
            },
            "runtime-dir",
            Status::Fail,
            "/run/user/0 (owned by uid 0), not /run/user/1000",
        ),
        (
            "runtime dir missing",
            |f| {
                f.runtime_dir.is_dir = false;
                f.runtime_dir.owner = None;
            },
            "runtime-dir",
            Status::Fail,
            "does not exist",
        ),
        (
            "runtime dir owned by another",
            |f| f.runtime_dir.owner = Some(1001),
            "runtime-dir",
            Status::Fail,
            "owned by uid 1001",
        ),
        (
            "runtime dir open to others",
            |f| f.runtime_dir.mode = Some(0o755),
            "runtime-dir",
            Status::Warn,
            "chmod 0700",
        ),
        // user manager (B09)
        (
            "B09 user bus unreachable",
            |f| f.manager_version = Err("no such file".into()),
            "user-manager",
            Status::Fail,
            "loginctl enable-linger cyx",
        ),
        (
            "issue 20: the user manager died (user@UID.service failed)",
            |f| {
                f.manager_version = Err("connection refused".into());
                f.user_unit = Some(Ok("failed".into()));
            },
            "user-manager",
            Status::Fail,
            "`systemctl start user@1000.service`",
        ),
        // linger (B08)
        (
            "B08 no linger, scheduled tenant",
            |f| {
                f.linger = Ok(false);
                f.tenants = vec![tenant(
                    "nightly",
                    &spec_yaml(
                        "nightly",
                        "",
                        "schedule: { on_calendar: \"*-*-* 02:00:00\" }\n",
                    ),
                )];
            },
            "linger",
            Status::Fail,
            "loginctl enable-linger cyx",
        ),
        (
            "no linger, on-demand tenants only",
            |f| f.linger = Ok(false),
            "linger",
            Status::Warn,
            "session-bound",
        ),
        (
            "linger unreadable, scheduled tenant",
            |f| {
                f.linger = Err("no system bus".into());
                f.tenants = vec![tenant(
                    "nightly",
                    &spec_yaml("nightly", "", "schedule: { on_calendar: daily }\n"),
                )];
            },
            "linger",
            Status::Fail,
            "no system bus",
        ),
        (
            "linger unreadable",
            |f| f.linger = Err("no system bus".into()),
            "linger",
            Status::Warn,
            "no system bus",
        ),
        // sub-ids (B10)
        (
            "B10 no subuid line",
            |f| f.subuid = subids(&[("other", 100_000, 65_536)], "/etc/subuid"),
            "subuid",
            Status::Fail,
            "sudo usermod --add-subuids 196608-262143 cyx",
        ),
        (
            "B10 subgid range too small",
            |f| f.subgid = subids(&[("cyx", 200_000, 1000)], "/etc/subgid"),
            "subgid",
            Status::Fail,
            "1000 ids",
        ),
        (
            "B10 podman maps a single id",
            |f| f.uid_map = Some(Ok(vec!["0 1000 1".into()])),
            "subuid",
            Status::Fail,
            "podman system migrate",
        ),
        (
            "subuid by numeric uid",
            |f| f.subuid = subids(&[("1000", 200_000, 65_536)], "/etc/subuid"),
            "subuid",
            Status::Pass,
            "65536 ids",
        ),
        (
            "subuid split in two ranges",
            |f| {
                f.subuid = subids(
                    &[("cyx", 200_000, 32_768), ("cyx", 300_000, 32_768)],
                    "/etc/subuid",
                );
            },
            "subuid",
            Status::Pass,
            "65536 ids",
        ),
        (
            "subuid overlaps another user",
            |f| {
                f.subuid = subids(
                    &[("cyx", 200_000, 65_536), ("tst", 250_000, 65_536)],
                    "/etc/subuid",
                );
            },
            "subuid",
            Status::Fail,
            "overlaps tst's range 250000-315535",
        ),
        (
            "subgid file missing",
            |f| {
                f.subgid = SubIds {
                    file: "/etc/subgid".into(),
                    entries: Err("reading /etc/subgid: No such file".into()),
                }
            },
            "subgid",
            Status::Fail,
            "--add-subgids",
        ),
        // newuidmap / newgidmap (B10)
        (
            "B10 newuidmap without setuid or caps",
            |f| {
                f.newuidmap.setuid_root = false;
                f.newuidmap.caps = Some(Ok(String::new()));
            },
            "newuidmap",
            Status::Fail,
            "neither setuid root nor has cap_setuid",
        ),
        (
            "newuidmap with file caps",
            |f| {
                f.newuidmap.setuid_root = false;
                f.newuidmap.caps = Some(Ok("cap_setuid=ep".into()));
            },
            "newuidmap",
            Status::Pass,
            "cap_setuid=ep",
        ),
        (
            "newgidmap with the wrong cap",
            |f| {
                f.newgidmap.setuid_root = false;
                f.newgidmap.caps = Some(Ok("cap_setuid=ep".into()));
            },
            "newgidmap",
            Status::Fail,
            "cap_setgid",
        ),
        (
            "newgidmap caps unreadable",
            |f| {
                f.newgidmap.setuid_root = false;
                f.newgidmap.caps = Some(Err("getcap is not installed".into()));
            },
            "newgidmap",
            Status::Fail,
            "getcap is not installed",
        ),
        (
            "newgidmap missing",
            |f| {
                f.newgidmap.path = None;
                f.newgidmap.setuid_root = false;
            },
            "newgidmap",
            Status::Fail,
            "apt install uidmap",
        ),
    ]
}

/// The network-online stall (B07).
#[allow(clippy::too_many_lines)] // one row per case
pub(super) fn network_online_rows() -> Vec<Row> {
    vec![
        // network-online (B07)
        (
            "B07 network-online inactive",
            |f| f.network_online = Ok("inactive".into()),
            "network-online",
            Status::Warn,
            "systemd-networkd-wait-online",
        ),
        (
            "network-online irrelevant before 5.3",
            |f| {
                f.network_online = Ok("inactive".into());
                f.podman.version = Some(Ok("5.2.0".into()));
            },
            "network-online",
            Status::Skip,
            "5.3",
        ),
    ]
}
