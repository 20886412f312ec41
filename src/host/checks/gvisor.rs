//! The verdict on tier `gvisor`: gVisor's `runsc` found, its runtime flags, and the proof
//! that a throwaway container run with them sees gVisor's kernel, not the host's.

use super::Check;
use crate::host::facts::{CHECK_LABEL, CheckFacts, GvisorProof, PROOF_COMMAND};
use crate::tier::runsc::{IGNORE_CGROUPS, OciRuntime};
use crate::tier::{self, Tier};

const ID: &str = "gvisor";

/// The fix when runsc is missing.
const INSTALL_RUNSC: &str = "install gVisor's runsc: `sudo apt install runsc` (Debian 13, \
     Ubuntu 24.04; elsewhere gVisor's release from https://gvisor.dev/docs/user_guide/install/ \
     on $PATH), then rerun `cyclix check`";

/// The tenants whose spec asks for tier `gvisor` (after the legacy floor, as the tier gate
/// decides).
fn gvisor_tenants(f: &CheckFacts) -> Vec<&str> {
    f.tenants
        .iter()
        .filter(|t| {
            t.spec
                .as_ref()
                .is_ok_and(|s| tier::floor(s.tier, s.legacy_worktree_isolation) == Tier::Gvisor)
        })
        .map(|t| t.name.as_str())
        .collect()
}

pub(super) fn gvisor(f: &CheckFacts) -> Check {
    let runsc = match &f.gvisor {
        Ok(r) => r,
        Err(e) => return unavailable(f, e),
    };
    let what = runsc.describe();
    let proof = match &f.gvisor_proof {
        // runsc found and its version read; the container is the full check's.
        None if f.quick => {
            return Check::pass(
                ID,
                format!("{what}; --quick: no throwaway container run on it"),
            );
        }
        None => {
            return Check::skip(
                ID,
                format!("{what}; podman is not on $PATH: no throwaway container run on it"),
            );
        }
        Some(Err(e)) => {
            return Check::fail(
                ID,
                format!("{what}: the throwaway container could not run: {e}"),
                "fix the failed checks above (podman, images, outcome), then rerun `cyclix \
                 check`",
            );
        }
        Some(Ok(p)) => p,
    };
    proved(f, runsc, proof)
}

/// runsc is not usable (`e` says why): FAIL when a tenant asks for the tier, else PASS.
fn unavailable(f: &CheckFacts, e: &str) -> Check {
    let wanting = gvisor_tenants(f);
    if wanting.is_empty() {
        // An optional tier nobody asked for: PASS, saying it is unavailable (as
        // `cgroup-delegation` passes naming the controllers no spec needs). Not WARN ("works,
        // with a caveat worth fixing": nothing here needs fixing), not SKIP (it was looked at:
        // runsc is not there).
        return Check::pass(
            ID,
            format!("tier gvisor is unavailable ({e}); no tenant's spec asks for it"),
        );
    }
    Check::fail(
        ID,
        format!(
            "{e}: tier gvisor is unavailable, and tenant(s) {} ask for it (`cyclix run` refuses \
             them)",
            wanting.join(", ")
        ),
        format!(
            "{INSTALL_RUNSC}; or set `tier: container` in their spec if sharing the host's \
             kernel is acceptable"
        ),
    )
}

/// The verdict on the proof's container: it ran, printed a release, not the host's, and left
/// nothing.
fn proved(f: &CheckFacts, runsc: &OciRuntime, proof: &GvisorProof) -> Check {
    let what = runsc.describe();
    let by_hand = by_hand(proof);
    if proof.run.exit != Some(0) {
        return Check::fail(
            ID,
            format!(
                "{what}: a throwaway container on runsc failed ({}): {}",
                proof
                    .run
                    .exit
                    .map_or_else(|| "no exit status".to_string(), |c| format!("exit {c}")),
                proof.run.output
            ),
            format!(
                "run it by hand to see runsc's own error: `{by_hand}` (runsc's logs: add \
                 `--runtime-flag=debug --runtime-flag=debug-log=/tmp/runsc/`); reinstall runsc \
                 (`sudo apt install --reinstall runsc`) if it is broken{}",
                unused_fix(f)
            ),
        );
    }
    if proof.kernel.is_empty() {
        return Check::fail(
            ID,
            format!(
                "{what}: the throwaway container printed no kernel release: {}",
                proof.run.output
            ),
            format!("run it by hand: `{by_hand}`{}", unused_fix(f)),
        );
    }
    if proof.kernel == proof.host_kernel {
        // The host's own kernel answered: whatever ran the container, it was not gVisor.
        return Check::fail(
            ID,
            format!(
                "{what}: the throwaway container ran on the HOST's kernel, not gVisor's (uname \
                 -r {}, the host's {}): what ran it is not gVisor",
                proof.kernel, proof.host_kernel
            ),
            format!(
                "make sure {} is gVisor's runsc (`{} --version`) and that podman honours \
                 `--runtime` (containers.conf `[engine]`, a wrapper named podman); `{by_hand}` \
                 must print a release other than {}{}",
                runsc.path,
                runsc.path,
                proof.host_kernel,
                unused_fix(f)
            ),
        );
    }
    if !proof.leftovers.is_empty() || proof.cleanup_error.is_some() {
        return Check::fail(
            ID,
            format!(
                "{what}: left behind after removal: {}{}",
                proof.leftovers.join(", "),
                proof
                    .cleanup_error
                    .as_deref()
                    .map_or_else(String::new, |e| format!(" (cleanup: {e})"))
            ),
            format!(
                "remove them: `podman rm -f $(podman ps -aq --filter label={CHECK_LABEL}={})`",
                proof.nonce
            ),
        );
    }
    let mut found = format!(
        "{what}: a throwaway container ran on gVisor's kernel (uname -r {}, the host's {}; {}, \
         label {CHECK_LABEL}={}, {} ms, nothing left)",
        proof.kernel, proof.host_kernel, proof.image, proof.nonce, proof.run.elapsed_ms
    );
    if ignores_cgroups(runsc) {
        found.push_str(
            "; runsc runs with ignore-cgroups and sets no cgroup limits: the user manager \
             delegates no memory/pids controller (cgroup-delegation)",
        );
    }
    Check::pass(ID, found)
}

fn ignores_cgroups(r: &OciRuntime) -> bool {
    r.flags.iter().any(|f| f == IGNORE_CGROUPS)
}

/// The proof's command line, for a person to rerun.
fn by_hand(p: &GvisorProof) -> String {
    format!(
        "podman run --rm {} {} {}",
        p.options.join(" "),
        p.image,
        PROOF_COMMAND.join(" ")
    )
}

/// The other way out of a failed proof when no tenant uses the tier.
fn unused_fix(f: &CheckFacts) -> &'static str {
    if gvisor_tenants(f).is_empty() {
        "; no tenant uses tier gvisor: removing runsc (`sudo apt remove runsc`) also clears this"
    } else {
        ""
    }
}
