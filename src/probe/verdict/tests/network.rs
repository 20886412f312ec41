//! The network verdicts (N1–N4, N6, N15): passing and failing fixtures.

use super::*;
use crate::probe::Profile;
use crate::probe::verdict::network::*;

#[test]
fn n1_to_n4_routes_and_direct_connections() {
    let c = ctx();
    let mut o = RouteObs {
        read_ok: true,
        ..Default::default()
    };
    o.ifaces.insert("lo".into(), vec!["127.0.0.1".into()]);
    o.ifaces.insert("eth0".into(), vec!["10.213.7.3".into()]);
    assert!(n1(&o, &c).pass);
    assert!(
        !n1(
            &RouteObs {
                defaults: vec!["v4 via 0100D50A dev eth0".into()],
                ..o.clone()
            },
            &c
        )
        .pass
    );
    let mut two = o.clone();
    two.ifaces.insert("eth1".into(), vec!["10.89.0.5".into()]);
    assert!(!n1(&two, &c).pass);
    let mut wrong = o;
    wrong.ifaces.insert("eth0".into(), vec!["10.88.0.3".into()]);
    assert!(!n1(&wrong, &c).pass);

    let pm = Profile::Podman;
    assert!(n2(&items(&[("tcp 1.1.1.1:443", E(libc::ENETUNREACH))]), pm).pass);
    assert!(
        !n2(&items(&[("tcp 1.1.1.1:443", E(libc::ECONNREFUSED))]), pm).pass,
        "a route exists"
    );
    assert!(!n2(&items(&[("udp 8.8.8.8:53", Attempt::Ok)]), pm).pass);
    assert!(!n2(&items(&[("tcp 1.1.1.1:443", Attempt::Timeout)]), pm).pass);
    assert!(n3(&items(&[("v6", E(libc::ENETUNREACH))]), &[]).pass);
    assert!(
        !n3(
            &items(&[("v6", E(libc::ENETUNREACH))]),
            &["2001:db8::1".into()]
        )
        .pass
    );
    assert!(!n4(&items(&[("tcp 169.254.169.254:80", Attempt::Timeout)]), pm).pass);
    assert!(in_subnet("10.213.7.3", "10.213.7.0/24") && !in_subnet("10.213.8.3", "10.213.7.0/24"));
}

#[test]
fn n6_the_gateway_and_the_host_refuse() {
    assert!(
        n6(
            &items(&[
                ("gw:22", E(libc::ECONNREFUSED)),
                ("hci:22", E(libc::ENETUNREACH))
            ]),
            &Attempt::Ok
        )
        .pass
    );
    assert!(!n6(&items(&[("gw:22", Attempt::Ok)]), &Attempt::Ok).pass);
    assert!(!n6(&items(&[("gw:22", Attempt::Timeout)]), &Attempt::Ok).pass);
}

#[test]
fn n15_raw_sockets_and_netlink() {
    let measured = items(&[
        ("AF_PACKET", E(libc::EPERM)),
        ("SOCK_RAW icmp", E(libc::EPERM)),
        ("RTM_NEWROUTE", E(libc::EPERM)),
        ("ping 1.1.1.1", E(libc::ENETUNREACH)),
    ]);
    assert!(n15(&measured, crate::probe::Profile::Podman).pass);
    assert!(
        !n15(
            &items(&[("AF_PACKET", Attempt::Ok)]),
            crate::probe::Profile::Podman
        )
        .pass
    );
    assert!(
        !n15(
            &items(&[("ping 1.1.1.1", Attempt::Ok)]),
            crate::probe::Profile::Podman
        )
        .pass
    );
}

/// The Kubernetes profile: a drop within the deadline (timeout) or a policy's refusal counts
/// as denied for direct connections; an answer, or an attempt that could not be made, does not.
#[test]
fn the_kubernetes_profile_counts_a_drop_as_denied_and_nothing_else() {
    let k = Profile::Kubernetes;
    assert!(
        n2(
            &items(&[
                ("tcp 1.1.1.1:443", Attempt::Timeout),
                ("dns 8.8.8.8:53", Attempt::Timeout)
            ]),
            k
        )
        .pass
    );
    assert!(
        n2(
            &items(&[
                ("tcp 1.1.1.1:443", E(libc::EPERM)),
                ("tcp 8.8.8.8:53", E(libc::ECONNREFUSED))
            ]),
            k
        )
        .pass
    );
    assert!(
        !n2(&items(&[("tcp 1.1.1.1:443", Attempt::Ok)]), k).pass,
        "reached"
    );
    assert!(
        !n2(&items(&[("dns 8.8.8.8:53", Attempt::Ok)]), k).pass,
        "a resolver answered"
    );
    assert!(
        !n2(
            &items(&[("tcp 1.1.1.1:443", Attempt::Missing("x".into()))]),
            k
        )
        .pass
    );
    assert!(
        !n2(&items(&[("tcp 1.1.1.1:443", E(libc::EACCES))]), k).pass,
        "unknown errno"
    );
    assert!(!n2(&[], k).pass);
    assert!(n4(&items(&[("tcp 169.254.169.254:80", Attempt::Timeout)]), k).pass);
    assert!(
        n4(&items(&[("tcp 169.254.169.254:80", Attempt::Timeout)]), k)
            .detail
            .contains("profile kubernetes")
    );
}

/// B35 (field reports): `host.containers.internal` can be unreachable for the wrong reason (a
/// pasta bug drops the packets): a deny probe must not take a timeout for a refusal, and keeps
/// its positive control on the same path. On Podman every direct-connection verdict fails on
/// a timeout, and N6 fails when its control (the proxy) does not answer. (The Kubernetes
/// profile alone takes a drop within the deadline as denied: a NetworkPolicy drops by design,
/// `probe::profile`.)
#[test]
fn b35_a_timeout_is_never_an_unreachable_pass() {
    let t = |l: &str| items(&[(l, Attempt::Timeout)]);
    assert!(!n2(&t("tcp 1.1.1.1:443"), Profile::Podman).pass);
    assert!(!n4(&t("tcp 169.254.169.254:80"), Profile::Podman).pass);
    assert!(
        n2(&t("tcp 1.1.1.1:443"), Profile::Kubernetes).pass,
        "the one exception, stated above"
    );
    let refused = items(&[("hci:22", E(libc::ECONNREFUSED))]);
    assert!(n6(&refused, &Attempt::Ok).pass, "control: a refusal passes");
    let j = n6(&t("hci:22"), &Attempt::Ok);
    assert!(!j.pass && j.detail.contains("timeout"), "{}", j.detail);
    let j = n6(&refused, &Attempt::Timeout);
    assert!(
        !j.pass && j.detail.contains("positive control failed"),
        "{}",
        j.detail
    );
}

#[test]
fn n15_takes_gvisors_answers_only_under_its_profile() {
    use crate::probe::Profile;
    let gv = items(&[
        ("AF_PACKET", E(libc::EAFNOSUPPORT)),
        ("RTM_NEWROUTE", E(libc::EACCES)),
        ("ping 1.1.1.1", E(libc::EAFNOSUPPORT)),
    ]);
    assert!(n15(&gv, Profile::Gvisor).pass);
    assert!(!n15(&gv, Profile::Podman).pass);
    assert!(!n15(&items(&[("AF_PACKET", Attempt::Ok)]), Profile::Gvisor).pass);
}
