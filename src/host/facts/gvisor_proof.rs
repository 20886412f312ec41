//! The gVisor proof (without `--quick`, when `runsc` was found): one throwaway container run
//! the way a tier-`gvisor` run runs its agent (runsc's `--runtime` and every runtime flag,
//! no network, read-only, no capabilities, no new privileges, an init), printing the kernel
//! release it sees; labelled `io.cyclix.check=<nonce>` like the outcome test's objects,
//! `--rm`, removed by label if the client died, and the removal verified.

use std::time::Instant;

use super::outcome::{ms, nonce, probe_image, trim_output};
use super::{CHECK_LABEL, Fact, SLOW_DEADLINE, StepFacts};
use crate::podman::Podman;
use crate::tier::runsc::OciRuntime;

/// Where the host's kernel release is read (what `uname -r` prints on the host).
pub const HOST_RELEASE_FILE: &str = "/proc/sys/kernel/osrelease";

/// podman's options of the proof's container after runsc's own ([`OciRuntime::podman_args`]):
/// the hardening every cyclix container has, no network and no pull.
pub const PROOF_OPTIONS: [&str; 6] = [
    "--network=none",
    "--read-only",
    "--cap-drop=all",
    "--security-opt=no-new-privileges",
    "--init",
    "--pull=never",
];

/// The command the proof's container runs: the kernel release it sees.
pub const PROOF_COMMAND: [&str; 2] = ["uname", "-r"];

/// The gVisor proof: a throwaway container on runsc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GvisorProof {
    /// The label value (`io.cyclix.check=NONCE`) of the container.
    pub nonce: String,
    /// The image used (the outcome test's choice, [`super::PROBE_IMAGES`]).
    pub image: String,
    /// podman's options of the container: runsc's `--runtime=PATH` and `--runtime-flag=FLAG`s,
    /// then [`PROOF_OPTIONS`].
    pub options: Vec<String>,
    /// The container running [`PROOF_COMMAND`] (`exit: None` when podman was killed at the
    /// deadline or could not start; `output` then says why).
    pub run: StepFacts,
    /// What the container printed on stdout, trimmed: gVisor's kernel release (`4.4.0`).
    pub kernel: String,
    /// The host's kernel release ([`HOST_RELEASE_FILE`], trimmed).
    pub host_kernel: String,
    /// Containers labelled with the nonce still present after the cleanup (must be empty).
    pub leftovers: Vec<String>,
    /// A cleanup step that failed.
    pub cleanup_error: Option<String>,
}

/// Runs the gVisor proof with `podman` on `runsc`: `podman run --rm --label
/// io.cyclix.check=NONCE RUNSC_ARGS PROOF_OPTIONS -- IMAGE uname -r` within [`SLOW_DEADLINE`],
/// then removes whatever carries the label and lists what is still there.
///
/// # Errors
/// A sentence when it could not run at all: no probe image, the host's release unreadable.
pub(super) fn gvisor_proof(podman: &Podman, runsc: &OciRuntime) -> Fact<GvisorProof> {
    let image = probe_image(podman)?;
    let host_kernel = std::fs::read_to_string(HOST_RELEASE_FILE)
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("reading the host's kernel release {HOST_RELEASE_FILE}: {e}"))?;
    let nonce = nonce();
    let labels = [(CHECK_LABEL, nonce.as_str())];
    let options: Vec<String> = runsc
        .podman_args()
        .into_iter()
        .chain(PROOF_OPTIONS.iter().map(|o| (*o).to_string()))
        .collect();
    let args: Vec<&str> = options.iter().map(String::as_str).collect();
    let t = Instant::now();
    let (run, kernel) = match podman.run_rm(&labels, &args, image, &PROOF_COMMAND, SLOW_DEADLINE) {
        Ok(out) => (
            StepFacts {
                exit: out.status.code(),
                output: trim_output(&out),
                elapsed_ms: ms(t),
            },
            out.stdout.trim().to_string(),
        ),
        Err(e) => (
            StepFacts {
                exit: None,
                output: e.to_string(),
                elapsed_ms: ms(t),
            },
            String::new(),
        ),
    };
    // `--rm` removes it; a client killed at the deadline leaves it, found by its label.
    let label = format!("{CHECK_LABEL}={nonce}");
    let mut cleanup_error = None;
    if let Ok(cs) = podman.containers(&label)
        && !cs.is_empty()
        && let Err(e) = podman.rm_containers(&cs.into_iter().map(|c| c.id).collect::<Vec<_>>())
    {
        cleanup_error = Some(e.to_string());
    }
    let leftovers = match podman.containers(&label) {
        Ok(cs) => cs
            .into_iter()
            .map(|c| format!("container {}", c.id))
            .collect(),
        Err(e) => vec![format!("cannot list containers: {e}")],
    };
    Ok(GvisorProof {
        nonce,
        image: image.to_string(),
        options,
        run,
        kernel,
        host_kernel,
        leftovers,
        cleanup_error,
    })
}
