//! The dns verdicts (N7): passing and failing fixtures.

use super::*;
use crate::probe::verdict::dns::*;

#[test]
fn n7_the_resolver_answers_only_the_runs_names() {
    let c = ctx();
    let ctl = Dns::Reply {
        rcode: 0,
        addrs: vec!["10.213.7.2".into()],
    };
    let nx = Dns::Reply {
        rcode: 3,
        addrs: vec![],
    };
    assert!(n7(&ctl, &nx, &[], &E(libc::ENETUNREACH), &c).pass);
    assert!(
        !n7(
            &ctl,
            &Dns::Reply {
                rcode: 0,
                addrs: vec!["93.184.216.34".into()]
            },
            &[],
            &E(libc::ENETUNREACH),
            &c
        )
        .pass,
        "forwarded"
    );
    assert!(
        !n7(
            &ctl,
            &Dns::Failed(Attempt::Timeout),
            &[],
            &E(libc::ENETUNREACH),
            &c
        )
        .pass,
        "dropped"
    );
}

#[test]
fn n7_no_reachable_resolver_needs_the_proxy_in_etc_hosts() {
    let c = ctx();
    let unreach = Dns::Failed(E(libc::ENETUNREACH));
    let proxy = ["10.213.7.2".to_string()];
    assert!(n7(&unreach, &unreach, &proxy, &E(libc::ENETUNREACH), &c).pass);
    assert!(
        !n7(&unreach, &unreach, &[], &E(libc::ENETUNREACH), &c).pass,
        "the control: the proxy's name must resolve from /etc/hosts"
    );
    assert!(
        !n7(
            &unreach,
            &unreach,
            &["10.0.0.9".into()],
            &E(libc::ENETUNREACH),
            &c
        )
        .pass,
        "another address"
    );
    let timeout = Dns::Failed(Attempt::Timeout);
    assert!(
        !n7(&timeout, &timeout, &proxy, &E(libc::ENETUNREACH), &c).pass,
        "a resolver that drops is no proof there is none"
    );
    assert!(
        !n7(&unreach, &unreach, &proxy, &Attempt::Timeout, &c).pass,
        "direct DNS still ENETUNREACH"
    );
    let nx = Dns::Reply {
        rcode: 3,
        addrs: vec![],
    };
    assert!(
        !n7(&nx, &unreach, &proxy, &E(libc::ENETUNREACH), &c).pass,
        "a reachable resolver that does not know the proxy fails the control"
    );
}

#[test]
fn hosts_addrs_reads_address_name_lines() {
    use crate::probe::observe::dns::hosts_addrs;
    let t = "127.0.0.1 localhost\n# 10.9.9.9 cyclix-r-proxy\n10.213.7.2\tcyclix-r-proxy other # c\n10.1.1.1 cyclix-r-proxy-x\n";
    assert_eq!(hosts_addrs(t, "cyclix-r-proxy"), ["10.213.7.2"]);
    assert!(hosts_addrs(t, "nope").is_empty());
}
