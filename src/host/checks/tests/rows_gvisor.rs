//! Table rows and tests of the `gvisor` check: runsc found or not, wanted by a tenant or not,
//! and the throwaway container's proof (its kernel must not be the host's).

use super::*;

/// A tenant whose spec has `tier: gvisor`.
fn gvisor_tenant() -> TenantFacts {
    tenant("sealed", &spec_yaml("sealed", "", "tier: gvisor\n"))
}

const MISSING: &str = "runsc is not on $PATH, /usr/bin or /usr/sbin (Debian: `apt install runsc`)";

/// The `gvisor` check's rows.
#[allow(clippy::too_many_lines)] // one row per case
pub(super) fn gvisor_rows() -> Vec<Row> {
    vec![
        (
            "runsc missing, no tenant asks for tier gvisor",
            |f| {
                f.gvisor = Err(MISSING.into());
                f.gvisor_proof = None;
            },
            "gvisor",
            Status::Pass,
            "tier gvisor is unavailable (runsc is not on $PATH",
        ),
        (
            "runsc missing, a tenant asks for tier gvisor",
            |f| {
                f.gvisor = Err(MISSING.into());
                f.gvisor_proof = None;
                f.tenants = vec![gvisor_tenant()];
            },
            "gvisor",
            Status::Fail,
            "`sudo apt install runsc`",
        ),
        (
            "the container on runsc failed",
            |f| {
                f.gvisor_proof = Some(Ok(GvisorProof {
                    run: step(
                        126,
                        "Error: OCI runtime error: runsc: creating container: cannot run with \
                         network enabled in root network namespace",
                        300,
                    ),
                    kernel: String::new(),
                    ..proof("")
                }));
            },
            "gvisor",
            Status::Fail,
            "cannot run with network enabled in root network namespace",
        ),
        (
            "podman killed at the deadline",
            |f| {
                f.gvisor_proof = Some(Ok(GvisorProof {
                    run: StepFacts {
                        exit: None,
                        output: "`podman run ...` did not finish within 60000 ms and was killed"
                            .into(),
                        elapsed_ms: 60_000,
                    },
                    kernel: String::new(),
                    ..proof("")
                }));
            },
            "gvisor",
            Status::Fail,
            "(no exit status): `podman run ...` did not finish",
        ),
        (
            "the container printed nothing",
            |f| f.gvisor_proof = Some(Ok(proof(""))),
            "gvisor",
            Status::Fail,
            "printed no kernel release",
        ),
        (
            "the proof could not run",
            |f| {
                f.gvisor_proof = Some(Err("none of the probe images is present".into()));
            },
            "gvisor",
            Status::Fail,
            "could not run: none of the probe images is present",
        ),
        (
            "the proof left its container",
            |f| {
                f.gvisor_proof = Some(Ok(GvisorProof {
                    leftovers: vec!["container 0123abcd".into()],
                    ..proof("4.4.0")
                }));
            },
            "gvisor",
            Status::Fail,
            "podman rm -f $(podman ps -aq --filter label=io.cyclix.check=def)",
        ),
        (
            "--quick: runsc found, no container",
            |f| {
                f.quick = true;
                f.gvisor_proof = None;
            },
            "gvisor",
            Status::Pass,
            "--quick: no throwaway container run on it",
        ),
        (
            "podman missing: runsc found, no container",
            |f| f.gvisor_proof = None,
            "gvisor",
            Status::Skip,
            "podman is not on $PATH",
        ),
        (
            "ignore-cgroups said in the PASS",
            |f| {
                f.gvisor = Ok(runsc(&[
                    crate::tier::runsc::NETWORK_HOST,
                    crate::tier::runsc::HOST_FIFO_OPEN,
                    crate::tier::runsc::IGNORE_CGROUPS,
                ]));
            },
            "gvisor",
            Status::Pass,
            "sets no cgroup limits: the user manager delegates no memory/pids controller",
        ),
    ]
}

fn gvisor_check(f: &CheckFacts) -> Check {
    checks(f, &CheckOptions::default())
        .into_iter()
        .find(|c| c.id == "gvisor")
        .expect("a gvisor check")
}

#[test]
fn the_pass_names_runsc_its_flags_and_both_kernels() {
    let c = gvisor_check(&good());
    assert_eq!(c.status, Status::Pass, "{c:?}");
    assert_eq!(
        c.found,
        "runsc 0.0~20240729.0 (/usr/bin/runsc; runtime flags network=host, host-fifo=open): a \
         throwaway container ran on gVisor's kernel (uname -r 4.4.0, the host's \
         6.12.48+deb13-amd64; docker.io/library/busybox:latest, label io.cyclix.check=def, \
         450 ms, nothing left)"
    );
    assert!(
        !c.found.contains("cgroup"),
        "memory and pids delegated: {c:?}"
    );
}

/// Positive control: the same proof with the host's own release is not gVisor, however the
/// container exited.
#[test]
fn a_container_that_reports_the_hosts_kernel_fails_the_check() {
    let mut f = good();
    f.gvisor_proof = Some(Ok(proof("6.12.48+deb13-amd64")));
    let c = gvisor_check(&f);
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        c.found.contains(
            "ran on the HOST's kernel, not gVisor's (uname -r 6.12.48+deb13-amd64, \
             the host's 6.12.48+deb13-amd64)"
        ),
        "{c:?}"
    );
    let fix = c.fix.as_deref().unwrap_or_default();
    assert!(
        fix.contains("`/usr/bin/runsc --version`")
            && fix.contains(
                "podman run --rm --runtime=/usr/bin/runsc --runtime-flag=network=host \
                 --annotation=io.kubernetes.cri-o.ContainerType=sandbox \
                 --network=none --read-only --cap-drop=all --security-opt=no-new-privileges \
                 --init --pull=never docker.io/library/busybox:latest uname -r"
            ),
        "{fix}"
    );
    // No tenant uses the tier: removing runsc is a way out too.
    assert!(fix.contains("`sudo apt remove runsc`"), "{fix}");
    // A tenant does: then it is not offered.
    f.tenants = vec![gvisor_tenant()];
    let c = gvisor_check(&f);
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        !c.fix.as_deref().unwrap_or_default().contains("apt remove"),
        "{c:?}"
    );
}

/// runsc missing fails only where a spec asks for the tier: the host check and that tenant's
/// spec check (the tier gate's refusal), nothing else.
#[test]
fn runsc_missing_fails_the_gvisor_check_and_the_tenant_that_asks_for_it() {
    let mut f = good();
    f.gvisor = Err(MISSING.into());
    f.gvisor_proof = None;
    f.tenants.push(gvisor_tenant());
    let failed: Vec<String> = checks(&f, &CheckOptions::default())
        .into_iter()
        .filter(|c| c.status == Status::Fail)
        .map(|c| c.id)
        .collect();
    assert_eq!(failed, ["gvisor", "spec:sealed"]);
    let c = gvisor_check(&f);
    assert!(
        c.found.contains("tenant(s) sealed ask for it") && c.found.contains(MISSING),
        "{c:?}"
    );
    // Without that tenant: every check passes.
    f.tenants.pop();
    assert!(
        checks(&f, &CheckOptions::default())
            .iter()
            .all(|c| c.status == Status::Pass),
        "an unused tier is no failure"
    );
}
