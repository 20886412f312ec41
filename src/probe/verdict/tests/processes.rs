//! The processes verdicts (P20, P21): passing and failing fixtures.

use std::collections::BTreeMap;

use super::*;
use crate::probe::verdict::processes::*;

#[test]
fn p20_p21_namespaces_and_cgroups() {
    let c = ctx();
    let mine: BTreeMap<String, u64> = PRIVATE_NS
        .iter()
        .enumerate()
        .map(|(i, n)| ((*n).to_string(), 4_026_532_000 + i as u64))
        .collect();
    let o = NsObs {
        ns: mine.clone(),
        pids: 3,
        init_comm: Some("podman-init".into()),
    };
    assert!(p20(&o, &c).pass);
    let mut shared = mine;
    shared.insert("net".into(), c.host_namespaces["net"]);
    assert!(
        !p20(
            &NsObs {
                ns: shared,
                ..o.clone()
            },
            &c
        )
        .pass
    );
    assert!(
        !p20(
            &NsObs {
                pids: 200,
                ..o.clone()
            },
            &c
        )
        .pass
    );
    assert!(
        !p20(
            &NsObs {
                init_comm: Some("sleep".into()),
                ..o.clone()
            },
            &c
        )
        .pass
    );
    // While the agent works (`make -j`), the count is the spec's pids limit or none at all;
    // the namespaces still decide.
    let busy = NsObs {
        pids: 200,
        ..o.clone()
    };
    let mut watch = c.clone();
    watch.watch = true;
    assert!(p20(&busy, &watch).pass, "{:?}", p20(&busy, &watch));
    watch.limits.pids = Some(100);
    assert!(
        !p20(&busy, &watch).pass,
        "agent.resources.pids is the limit"
    );
    watch.limits.pids = None;
    let mut leaked = busy.ns.clone();
    leaked.insert("pid".into(), c.host_namespaces["pid"]);
    assert!(
        !p20(&NsObs { ns: leaked, ..busy }, &watch).pass,
        "positive control: the host's pid namespace fails the watch too"
    );

    let measured = CgroupObs {
        lines: vec!["1:cpu:/".into(), "0::/".into()],
        ..Default::default()
    };
    assert!(p21(&measured, &c).pass, "no limits configured");
    assert!(
        !p21(
            &CgroupObs {
                lines: vec!["0::/user.slice/x".into()],
                ..Default::default()
            },
            &c
        )
        .pass
    );
    let limited = Context {
        limits: Limits {
            memory_bytes: Some(1 << 30),
            pids: Some(512),
            cpu_millis: Some(1500),
        },
        ..c
    };
    assert!(
        !p21(&measured, &limited).pass,
        "configured but no controller"
    );
    let enforced = CgroupObs {
        memory_max: Some("1073741824".into()),
        pids_max: Some("512".into()),
        cpu_max: Some("150000 100000".into()),
        ..measured
    };
    assert!(p21(&enforced, &limited).pass);
}

#[test]
fn w0_under_gvisor_requires_no_tracer_and_the_podman_profile_still_a_non_dumpable_exec() {
    use crate::probe::Profile;
    use crate::probe::verdict::processes::{WatchGuardObs, w0};
    let readable = WatchGuardObs {
        dumpable: Ok(1),
        tracer: Some(0),
        tracer_after: Some(0),
    };
    assert!(w0(&readable, Profile::Gvisor).pass);
    // Positive control: the same dumpable start fails under podman (the execute-only binary
    // must have marked it), and a tracer fails both.
    assert!(!w0(&readable, Profile::Podman).pass);
    let traced = WatchGuardObs {
        tracer_after: Some(42),
        ..readable
    };
    assert!(!w0(&traced, Profile::Gvisor).pass);
    let exec_only = WatchGuardObs {
        dumpable: Ok(0),
        ..readable
    };
    assert!(w0(&exec_only, Profile::Podman).pass);
}
