//! Checks of podman and Quadlet: the version floors, the generator, the OCI runtime, the
//! network backend, rootless networking, the storage driver, `podman info`; and the runtime
//! (Quadlet or plain units) and podman's storage paths derived from the facts.

use super::{
    Check, PODMAN_FLOOR, QUADLET_FLOOR, Status, at_least, parse_version, podman_version,
    runtime_dir,
};
use crate::host::facts::CheckFacts;
use crate::spec::mount_guard;
use crate::tier::Runtime;

pub(super) const INSTALL_PODMAN: &str = "install podman ≥ 5.0 and put it on $PATH (Debian 13/Ubuntu 24.04: \
     `sudo apt install podman`; Fedora: `sudo dnf install podman`)";

pub(super) fn podman(f: &CheckFacts) -> Check {
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

pub(super) fn quadlet(f: &CheckFacts) -> Check {
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

pub(super) fn oci_runtime(f: &CheckFacts) -> Check {
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

pub(super) fn network_backend(f: &CheckFacts) -> Check {
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

pub(super) fn rootless_network(f: &CheckFacts) -> Check {
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

pub(super) fn storage_driver(f: &CheckFacts) -> Check {
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

pub(super) fn podman_info(f: &CheckFacts) -> Check {
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

/// Whether a rootless runtime is usable, from the facts (the tier gate's injected fact).
#[must_use]
pub fn runtime(f: &CheckFacts) -> Runtime {
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

/// Podman's storage as this host has it: `podman info`'s graph root, run root and volume
/// path, else (`--quick`, podman missing) the graph root from `storage.conf` or the default.
#[must_use]
pub fn podman_storage(f: &CheckFacts) -> Vec<mount_guard::Protected> {
    match &f.info {
        Some(Ok(i)) if !i.graph_root.is_empty() => {
            mount_guard::podman_paths(&i.graph_root, &i.run_root, &i.volume_path)
        }
        _ => mount_guard::podman_paths(&f.storage.graphroot, "", ""),
    }
}

/// The host programs cyclix runs itself ([`crate::host::facts::HOST_TOOLS`]): every one must
/// be on `$PATH`, else a run (git) or a build (setpriv, nsenter) fails part-way.
pub(super) fn host_tools(f: &CheckFacts) -> Check {
    const ID: &str = "host-tools";
    let missing: Vec<&str> = f
        .host_tools
        .iter()
        .filter(|(_, p)| p.is_none())
        .map(|(n, _)| *n)
        .collect();
    if missing.is_empty() {
        let found: Vec<String> = f
            .host_tools
            .iter()
            .map(|(n, p)| format!("{n} {}", p.as_deref().unwrap_or("-")))
            .collect();
        return Check::pass(ID, found.join(", "));
    }
    Check::fail(
        ID,
        format!(
            "not on $PATH: {} (git makes each run's private repository, imports and delivers; \
             setpriv and nsenter run a build in its holder's network namespace)",
            missing.join(", ")
        ),
        "install them: `sudo apt install git util-linux` (Debian, Ubuntu), or your \
         distribution's git and util-linux packages",
    )
}
