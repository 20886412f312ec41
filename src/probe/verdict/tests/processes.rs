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
                ..o
            },
            &c
        )
        .pass
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
