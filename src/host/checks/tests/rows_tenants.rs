//! Table rows of the tenant checks: spec and tier gate, images, the outcome test.

use super::*;

/// Spec and tier gate, images, outcome.
#[allow(clippy::too_many_lines)] // one row per case
pub(super) fn tenant_rows() -> Vec<Row> {
    vec![
        // spec + tier gate
        (
            "invalid spec",
            |f| f.tenants = vec![tenant("bad", "tenant: bad\nbogus: 1\n")],
            "spec:bad",
            Status::Fail,
            "cyclix spec validate",
        ),
        (
            "container tier without runtime is a FAIL",
            |f| f.podman = PodmanFacts::default(),
            "spec:acme",
            Status::Fail,
            "tier `container` is configured but no usable container runtime",
        ),
        (
            "container tier when no container starts",
            |f| {
                if let Some(Ok(o)) = &mut f.outcome {
                    o.control = step(126, "crun: permission denied", 50);
                }
            },
            "spec:acme",
            Status::Fail,
            "a container did not start",
        ),
        (
            "worktree tier without runtime is allowed",
            |f| {
                f.podman = PodmanFacts::default();
                f.tenants = vec![tenant("wt", &spec_yaml("wt", "", "tier: worktree\n"))];
            },
            "spec:wt",
            Status::Warn,
            "tier worktree",
        ),
        // the gate
        (
            "a gate without protected paths runs the agent's own tests",
            |f| f.tenants = vec![tenant("acme", &spec_yaml("acme", "", ""))],
            "gate:acme",
            Status::Warn,
            "the gate runs the agent's own tests",
        ),
        (
            "protected paths without a results file cannot be counted",
            |f| {
                let yaml = guarded_yaml("acme").replace(
                    "[sh, -c, 'pytest --junitxml=\"$CYCLIX_RESULTS\"']",
                    "[pytest]",
                );
                f.tenants = vec![tenant("acme", &yaml)];
            },
            "gate:acme",
            Status::Warn,
            "does not name $CYCLIX_RESULTS",
        ),
        // images
        (
            "image missing",
            |f| f.tenants[0].images[0].present = Ok(false),
            "images:acme",
            Status::Fail,
            "podman pull ghcr.io/acme/agent@sha256:",
        ),
        (
            "proxy image missing",
            |f| {
                let last = f.tenants[0].images.len() - 1;
                f.tenants[0].images[last].present = Ok(false);
            },
            "images:acme",
            Status::Fail,
            "cyclix images build",
        ),
        (
            "image presence unknown",
            |f| f.tenants[0].images[0].present = Err("podman failed".into()),
            "images:acme",
            Status::Fail,
            "podman failed",
        ),
        (
            "unpinned local image",
            |f| {
                f.tenants[0].images[0].pinned = false;
            },
            "images:acme",
            Status::Warn,
            "not pinned",
        ),
        (
            "tier without containers",
            |f| f.tenants = vec![tenant("wt", &spec_yaml("wt", "", "tier: worktree\n"))],
            "images:wt",
            Status::Skip,
            "no containers",
        ),
        // pool
        (
            "a pool cannot refill",
            |f| f.tenants = vec![pooled("inactive", None)],
            "pool:pl",
            Status::Warn,
            "pool of size 2 cannot refill: its keeper cyclix-pool@pl.service is inactive",
        ),
        // outcome
        (
            "outcome skipped in quick mode",
            |f| {
                f.quick = true;
                f.outcome = None;
            },
            "outcome",
            Status::Skip,
            "--quick",
        ),
        (
            "outcome could not run",
            |f| f.outcome = Some(Err("no probe image".into())),
            "outcome",
            Status::Fail,
            "no probe image",
        ),
        (
            "outcome: container does not start",
            |f| {
                if let Some(Ok(o)) = &mut f.outcome {
                    o.control = step(126, "OCI runtime error", 40);
                }
            },
            "outcome",
            Status::Fail,
            "OCI runtime error",
        ),
        (
            "outcome: reached outside",
            |f| {
                if let Some(Ok(o)) = &mut f.outcome {
                    o.probe = step(0, "connected", 30);
                }
            },
            "outcome",
            Status::Fail,
            "reached 192.0.2.1",
        ),
        (
            "outcome: dropped, not rejected",
            |f| {
                if let Some(Ok(o)) = &mut f.outcome {
                    o.probe = step(1, "wget: download timed out", 5000);
                }
            },
            "outcome",
            Status::Fail,
            "did not fail fast",
        ),
        (
            "outcome: leftovers",
            |f| {
                if let Some(Ok(o)) = &mut f.outcome {
                    o.leftovers = vec!["network cyclix-check-abc".into()];
                }
            },
            "outcome",
            Status::Fail,
            "podman network rm",
        ),
        (
            "outcome without podman is a failure, not a skip",
            |f| {
                f.podman = PodmanFacts::default();
                f.info = None;
                f.outcome = None;
            },
            "outcome",
            Status::Fail,
            "cannot run: podman is not on $PATH",
        ),
        (
            "outcome: no probe tool in the image",
            |f| {
                if let Some(Ok(o)) = &mut f.outcome {
                    o.probe = step(3, "no probe tool (python3, wget)", 40);
                }
            },
            "outcome",
            Status::Fail,
            "podman pull docker.io/library/busybox:latest",
        ),
        (
            "runtime dir with a trailing slash",
            |f| f.runtime_dir.value = Some("/run/user/1000/".into()),
            "runtime-dir",
            Status::Pass,
            "/run/user/1000/",
        ),
        (
            "podman version from the cache",
            |f| f.podman.version_cached = true,
            "podman",
            Status::Pass,
            "remembered for this exact binary",
        ),
    ]
}

/// Tenant `pl` with a pool of size 2 whose keeper's unit is `active` and wrote `note`.
fn pooled(
    active: &str,
    note: Option<crate::host::facts::KeeperNote>,
) -> crate::host::facts::TenantFacts {
    let mut t = tenant("pl", &spec_yaml("pl", "", "pool: { size: 2 }\n"));
    t.keeper = Some(crate::host::facts::KeeperFact {
        active: Ok(active.to_string()),
        note: Ok(note),
    });
    t
}

/// A running keeper passes; one whose fills fail, or that cannot be asked, warns with a fix.
#[test]
fn a_pool_passes_while_its_keeper_refills_it() {
    use crate::host::facts::KeeperNote;
    let note = |state: &str, failures: u32| KeeperNote {
        state: state.into(),
        failures,
        last_error: if failures > 0 {
            "boom".into()
        } else {
            String::new()
        },
        line: format!("{state} line"),
    };
    let check = |t| {
        let mut f = good();
        f.tenants = vec![t];
        checks(&f, &CheckOptions::default())
            .into_iter()
            .find(|c| c.id == "pool:pl")
            .expect("a pool check")
    };
    let c = check(pooled("active", Some(note("full", 0))));
    assert_eq!(c.status, Status::Pass, "{c:#?}");
    assert!(
        c.found
            .contains("kept by cyclix-pool@pl.service: full line"),
        "{c:#?}"
    );
    let c = check(pooled("active", Some(note("retrying", 2))));
    assert_eq!(c.status, Status::Warn, "{c:#?}");
    assert!(
        c.found
            .contains("cannot refill: cyclix-pool@pl.service retrying line"),
        "{c:#?}"
    );
    assert!(
        c.fix
            .as_deref()
            .unwrap_or("")
            .contains("cyclix pool fill pl"),
        "{c:#?}"
    );
    let c = check(pooled("failed", Some(note("full", 0))));
    assert_eq!(c.status, Status::Warn, "{c:#?}");
    assert!(
        c.fix
            .as_deref()
            .unwrap_or("")
            .contains("cyclix install --tenant pl"),
        "{c:#?}"
    );
    let mut t = pooled("active", None);
    t.keeper = Some(crate::host::facts::KeeperFact {
        active: Err("no bus".into()),
        note: Ok(None),
    });
    let c = check(t);
    assert_eq!(c.status, Status::Warn, "{c:#?}");
    assert!(c.found.contains("cannot be read: no bus"), "{c:#?}");
}

/// No pool (or `size: 0`): no `pool:` check at all (the control of the row "a pool cannot
/// refill").
#[test]
fn a_tenant_without_a_pool_has_no_pool_check() {
    for tail in ["", "pool: { size: 0 }\n"] {
        let mut f = good();
        f.tenants = vec![tenant("pl", &spec_yaml("pl", "", tail))];
        let c = checks(&f, &CheckOptions::default());
        assert!(c.iter().any(|c| c.id == "spec:pl"), "{c:#?}");
        assert!(!c.iter().any(|c| c.id == "pool:pl"), "{tail:?}: {c:#?}");
    }
}
