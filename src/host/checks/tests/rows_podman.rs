//! Table rows of the podman checks: the binary, Quadlet (B01), runtime, network, storage, `podman info`.

use super::*;

/// podman and Quadlet (B01).
#[allow(clippy::too_many_lines)] // one row per case
pub(super) fn podman_rows() -> Vec<Row> {
    vec![
        // podman
        (
            "podman missing",
            |f| {
                f.podman = PodmanFacts::default();
            },
            "podman",
            Status::Fail,
            "not on $PATH",
        ),
        (
            "podman --version fails",
            |f| f.podman.version = Some(Err("boom".into())),
            "podman",
            Status::Fail,
            "boom",
        ),
        (
            "podman 4.2 is below the floor",
            |f| f.podman.version = Some(Ok("4.2.0".into())),
            "podman",
            Status::Fail,
            "older than cyclix's floor 4.3",
        ),
        (
            "podman 4.3 runs plain units",
            |f| f.podman.version = Some(Ok("4.3.1".into())),
            "podman",
            Status::Warn,
            "plain units",
        ),
        (
            "podman 5.0.0-rc1 is Quadlet",
            |f| f.podman.version = Some(Ok("5.0.0-rc1".into())),
            "podman",
            Status::Pass,
            "5.0.0-rc1",
        ),
        (
            "B09 podman blocked by a foreign runtime dir",
            |f| {
                f.runtime_dir.value = Some("/run/user/0".into());
                f.podman.version = Some(Err(
                    "Failed to obtain podman configuration: mkdir /run/user/0/libpod: permission denied".into(),
                ));
            },
            "podman",
            Status::Skip,
            "see runtime-dir",
        ),
        // quadlet (B01)
        (
            "B01 generator missing with podman 5",
            |f| {
                f.quadlet.generator = None;
                f.quadlet.version = None;
            },
            "quadlet",
            Status::Fail,
            "/usr/lib/systemd/user-generators",
        ),
        (
            "generator missing with podman 4.3",
            |f| {
                f.quadlet.generator = None;
                f.quadlet.version = None;
                f.podman.version = Some(Ok("4.3.1".into()));
            },
            "quadlet",
            Status::Warn,
            "plain units",
        ),
        (
            "B01 generator emits no unit",
            |f| f.quadlet.dryrun = Some(Ok(false)),
            "quadlet",
            Status::Fail,
            "no probe.service",
        ),
        (
            "generator dry run fails",
            |f| f.quadlet.dryrun = Some(Err("exit 1".into())),
            "quadlet",
            Status::Fail,
            "dry run failed",
        ),
        (
            "generator broken",
            |f| f.quadlet.version = Some(Err("exec format error".into())),
            "quadlet",
            Status::Fail,
            "exec format error",
        ),
    ]
}

/// Runtime, network, storage, and `podman info` (B09).
#[allow(clippy::too_many_lines)] // one row per case
pub(super) fn runtime_rows() -> Vec<Row> {
    vec![
        // runtime, network, storage
        (
            "no OCI runtime (quick)",
            |f| {
                f.oci_runtimes.clear();
                f.info = None;
                f.quick = true;
            },
            "oci-runtime",
            Status::Fail,
            "apt install crun",
        ),
        (
            "runc only (quick)",
            |f| {
                f.oci_runtimes = vec!["/usr/bin/runc".into()];
                f.info = None;
                f.quick = true;
            },
            "oci-runtime",
            Status::Pass,
            "runc",
        ),
        (
            "no aardvark-dns",
            |f| f.aardvark_dns = None,
            "network-backend",
            Status::Fail,
            "missing: aardvark-dns",
        ),
        (
            "CNI backend",
            |f| {
                if let Some(Ok(i)) = &mut f.info {
                    i.network_backend = "cni".into();
                }
            },
            "network-backend",
            Status::Fail,
            "cni",
        ),
        (
            "slirp4netns only",
            |f| {
                f.pasta = None;
                f.slirp4netns = Some("/usr/bin/slirp4netns".into());
            },
            "rootless-network",
            Status::Pass,
            "slirp4netns",
        ),
        (
            "no rootless network",
            |f| f.pasta = None,
            "rootless-network",
            Status::Fail,
            "apt install passt",
        ),
        (
            "vfs storage",
            |f| f.storage.driver = Some("vfs".into()),
            "storage-driver",
            Status::Warn,
            "driver = \"overlay\"",
        ),
        // podman info (B09)
        (
            "podman info skipped in quick mode",
            |f| {
                f.quick = true;
                f.info = None;
            },
            "podman-info",
            Status::Skip,
            "--quick",
        ),
        (
            "podman info fails",
            |f| f.info = Some(Err("cannot set up namespace".into())),
            "podman-info",
            Status::Fail,
            "cannot set up namespace",
        ),
        (
            "B09 cgroupfs manager",
            |f| {
                if let Some(Ok(i)) = &mut f.info {
                    i.cgroup_manager = "cgroupfs".into();
                }
            },
            "podman-info",
            Status::Warn,
            "cgroupfs",
        ),
    ]
}
