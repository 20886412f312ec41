//! The outcome test (without `--quick`): a throwaway network and container that must reach
//! nothing outside, labelled `io.cyclix.check=<nonce>`, removed, and the removal verified.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::{CHECK_LABEL, Fact, OUTSIDE_ADDRESS, PROBE_IMAGES, SLOW_DEADLINE};
use crate::podman::Podman;
use crate::process;

/// One container of the outcome test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFacts {
    /// Exit status of `podman run` (`None`: killed by a signal).
    pub exit: Option<i32>,
    /// stdout + stderr, trimmed to 500 bytes.
    pub output: String,
    /// Wall time in ms.
    pub elapsed_ms: u64,
}

/// The outcome test: a throwaway container on a fresh internal network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeFacts {
    /// The label value of every object created.
    pub nonce: String,
    /// The image used.
    pub image: String,
    /// The internal network created.
    pub network: String,
    /// Positive control: the container runs `true` on the network.
    pub control: StepFacts,
    /// The probe: a connection to [`OUTSIDE_ADDRESS`]:80 from the network.
    pub probe: StepFacts,
    /// Objects labelled with the nonce still present after the cleanup (must be empty).
    pub leftovers: Vec<String>,
    /// A cleanup step that failed.
    pub cleanup_error: Option<String>,
    /// Wall time of the whole test in ms.
    pub elapsed_ms: u64,
}

pub(super) fn nonce() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| {
        d.subsec_nanos() ^ u32::try_from(d.as_secs() & 0xffff_ffff).unwrap_or(0)
    });
    format!("{nanos:08x}{:04x}", std::process::id() & 0xffff)
}

pub(super) fn ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

pub(super) fn trim_output(out: &process::Output) -> String {
    let mut s = format!("{}{}", out.stdout, out.stderr).trim().to_string();
    if s.len() > 500 {
        let mut cut = 500;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

/// The probe run in the container: Python where the image has it, else `wget` (busybox).
/// Prints `connected` only if a TCP connection to [`OUTSIDE_ADDRESS`]:80 succeeded, and
/// `no probe tool` when the image has neither.
pub(super) fn probe_script() -> String {
    format!(
        "if command -v python3 >/dev/null 2>&1; then exec python3 -c 'import socket; \
         s=socket.socket(); s.settimeout(5); s.connect((\"{OUTSIDE_ADDRESS}\", 80)); \
         print(\"connected\")'; elif command -v wget >/dev/null 2>&1; then \
         wget -T 5 -q -O /dev/null http://{OUTSIDE_ADDRESS}/ && echo connected; \
         else echo 'no probe tool (python3, wget)'; exit 3; fi"
    )
}

/// The image the check's throwaway containers use: the first of [`PROBE_IMAGES`] present
/// (the outcome test's and the gVisor proof's choice alike).
pub(super) fn probe_image(podman: &Podman) -> Fact<&'static str> {
    PROBE_IMAGES
        .iter()
        .copied()
        .find(|i| podman.image_exists(i).unwrap_or(false))
        .ok_or_else(|| {
            format!(
                "none of the probe images is present ({}); run `cyclix images build` or \
                 `podman pull docker.io/library/busybox:latest`",
                PROBE_IMAGES.join(", ")
            )
        })
}

/// The outcome test: creates internal network `cyclix-check-NONCE`, runs a container that
/// must start and run `true` (positive control) and one that must fail to reach
/// [`OUTSIDE_ADDRESS`] fast, then removes everything labelled `io.cyclix.check=NONCE` and
/// lists what is still there.
pub(super) fn outcome_test(podman: &Podman) -> Fact<OutcomeFacts> {
    let started = Instant::now();
    let image = probe_image(podman)?;
    let nonce = nonce();
    let network = crate::naming::check_network(&nonce);
    let labels = [(CHECK_LABEL, nonce.as_str())];
    podman
        .network_create_internal(&network, &labels)
        .map_err(|e| e.to_string())?;
    let step = |argv: &[&str]| -> Fact<StepFacts> {
        let t = Instant::now();
        let out = podman
            .run_rm(
                &labels,
                &["--network", &network],
                image,
                argv,
                SLOW_DEADLINE,
            )
            .map_err(|e| e.to_string())?;
        Ok(StepFacts {
            exit: out.status.code(),
            output: trim_output(&out),
            elapsed_ms: ms(t),
        })
    };
    let script = probe_script();
    let control = step(&["true"]);
    let probe = step(&["sh", "-c", &script]);
    let label = format!("{CHECK_LABEL}={nonce}");
    let mut cleanup_error = None;
    let mut note = |r: crate::podman::Result<()>| {
        if let Err(e) = r {
            cleanup_error.get_or_insert(e.to_string());
        }
    };
    if let Ok(cs) = podman.containers(&label) {
        note(podman.rm_containers(&cs.into_iter().map(|c| c.id).collect::<Vec<_>>()));
    }
    note(podman.rm_networks(std::slice::from_ref(&network)));
    let mut leftovers = Vec::new();
    match podman.containers(&label) {
        Ok(cs) => leftovers.extend(cs.into_iter().map(|c| format!("container {}", c.id))),
        Err(e) => leftovers.push(format!("cannot list containers: {e}")),
    }
    match podman.networks(&label) {
        Ok(ns) => leftovers.extend(ns.into_iter().map(|n| format!("network {}", n.name))),
        Err(e) => leftovers.push(format!("cannot list networks: {e}")),
    }
    match podman.volumes(&label) {
        Ok(vs) => leftovers.extend(vs.into_iter().map(|v| format!("volume {}", v.name))),
        Err(e) => leftovers.push(format!("cannot list volumes: {e}")),
    }
    Ok(OutcomeFacts {
        nonce,
        image: image.to_string(),
        network,
        control: control?,
        probe: probe?,
        leftovers,
        cleanup_error,
        elapsed_ms: ms(started),
    })
}
