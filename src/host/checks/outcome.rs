//! The verdict of the outcome test: a container on a run's internal network reaches nothing.

use super::{Check, FAST_FAIL_MS, INSTALL_PODMAN};
use crate::host::facts::CheckFacts;

pub(super) fn outcome(f: &CheckFacts) -> Check {
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
        crate::host::facts::CHECK_LABEL,
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
                crate::host::facts::OUTSIDE_ADDRESS,
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
                crate::host::facts::OUTSIDE_ADDRESS,
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
                crate::host::facts::CHECK_LABEL,
                crate::host::facts::CHECK_LABEL,
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
            crate::host::facts::OUTSIDE_ADDRESS,
            p.elapsed_ms,
            o.elapsed_ms
        ),
    )
}
