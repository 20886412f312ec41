//! The sockets verdicts (P19): passing and failing fixtures.

use super::*;
use crate::probe::verdict::sockets::*;

#[test]
fn p19_sockets() {
    let ok = SocketObs {
        control_found: true,
        complete: true,
        ..Default::default()
    };
    assert!(p19(&ok).pass);
    for found in [
        "/run/podman/podman.sock",
        "/var/run/docker.sock",
        "/run/user/1000/bus",
        "/run/dbus/system_bus_socket",
    ] {
        assert!(
            !p19(&SocketObs {
                found: vec![found.into()],
                ..ok.clone()
            })
            .pass,
            "{found}"
        );
    }
    assert!(
        !p19(&SocketObs {
            net_unix: vec!["/run/user/1000/systemd/private".into()],
            ..ok.clone()
        })
        .pass
    );
    assert!(
        !p19(&SocketObs {
            env: vec!["SSH_AUTH_SOCK".into()],
            ..ok.clone()
        })
        .pass
    );
    assert!(
        !p19(&SocketObs {
            complete: false,
            ..ok
        })
        .pass,
        "an unfinished walk proves nothing"
    );
}
