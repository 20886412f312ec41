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
    assert!(n7(&ctl, &nx, &E(libc::ENETUNREACH), &c).pass);
    assert!(
        !n7(
            &ctl,
            &Dns::Reply {
                rcode: 0,
                addrs: vec!["93.184.216.34".into()]
            },
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
            &E(libc::ENETUNREACH),
            &c
        )
        .pass,
        "dropped"
    );
}
