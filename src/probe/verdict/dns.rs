//! DNS (N7): the run's resolver answers only the run's names.

use super::{Attempt, Judged, judged};
use crate::probe::Context;

/// One DNS answer as seen by N7.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dns {
    /// A reply: its rcode and the IPv4 addresses in the answer section.
    Reply {
        /// RCODE (0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN, 5 REFUSED).
        rcode: u8,
        /// A records.
        addrs: Vec<String>,
    },
    /// No reply.
    Failed(Attempt),
}

impl Dns {
    fn text(&self) -> String {
        match self {
            Dns::Reply { rcode, addrs } => format!("rcode {rcode} {addrs:?}"),
            Dns::Failed(a) => a.text(),
        }
    }
}

/// N7: the run's resolver answers the proxy's name (control) and refuses to resolve an
/// external name (an error rcode, no addresses, within 1 s); direct DNS is unreachable.
///
/// Policy (measured on the testbed, aardvark-dns 1.14): an external name on an internal
/// network gets an error rcode at once; a timeout is a FAIL.
///
/// Or, the plain backend's shape (podman < 5, `--disable-dns` on the internal network:
/// aardvark-dns 1.4 forwards unknown names from an internal network to the host's resolvers,
/// issue 18): the resolver in `resolv.conf` is unreachable (both queries `ENETUNREACH`, no
/// route out) and `hosts`, the addresses `/etc/hosts` gives the proxy's name, hold the
/// proxy's address (the control: the run's names still resolve, from the hosts file).
#[must_use]
pub fn n7(
    control: &Dns,
    external: &Dns,
    hosts: &[String],
    direct: &Attempt,
    ctx: &Context,
) -> Judged {
    let proxy_ip = ctx.proxy_ip();
    let unreachable = |d: &Dns| matches!(d, Dns::Failed(a) if a.is_errno(&[libc::ENETUNREACH]));
    let no_resolver = unreachable(control) && unreachable(external);
    let mut why = Vec::new();
    if no_resolver {
        if !hosts
            .iter()
            .any(|a| Some(a.as_str()) == proxy_ip.as_deref())
        {
            why.push(format!(
                "positive control failed: no resolver is reachable and /etc/hosts gives {} {hosts:?}, not {proxy_ip:?}",
                ctx.proxy_name
            ));
        }
    } else {
        match control {
            Dns::Reply { rcode: 0, addrs }
                if addrs
                    .iter()
                    .any(|a| Some(a.as_str()) == proxy_ip.as_deref()) => {}
            _ => why.push(format!(
                "positive control failed: {} did not resolve to {proxy_ip:?}",
                ctx.proxy_name
            )),
        }
        match external {
            Dns::Reply { rcode, addrs } if *rcode != 0 && addrs.is_empty() => {}
            Dns::Reply { rcode: 0, addrs } if addrs.is_empty() => {}
            other => why.push(format!("external name: {}", other.text())),
        }
    }
    if !direct.is_errno(&[libc::ENETUNREACH]) {
        why.push(format!("direct DNS to 8.8.8.8: {}", direct.text()));
    }
    judged(
        "control resolves to the proxy; example.com refused (error rcode, no address, < 1 s), or no resolver reachable (ENETUNREACH) and the proxy's name in /etc/hosts; 8.8.8.8:53 ENETUNREACH",
        format!(
            "control {}; example.com {}; /etc/hosts {hosts:?}; direct {}",
            control.text(),
            external.text(),
            direct.text()
        ),
        why.is_empty(),
        why.join("; "),
    )
}
