//! The network without the proxy (N1–N4, N6, N15): routes, direct connections, the host,
//! raw sockets and netlink.

use std::collections::BTreeMap;

use super::{Attempt, Judged, all_errno, judged, list};
use crate::probe::{Context, Profile};

/// What N1 saw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteObs {
    /// Interfaces with their IPv4 addresses (`eth0` → `["10.213.7.3"]`).
    pub ifaces: BTreeMap<String, Vec<String>>,
    /// Default routes found (v4 and v6, excluding the kernel's reject route on `lo`).
    pub defaults: Vec<String>,
    /// `/proc/net/route` was readable (positive control).
    pub read_ok: bool,
}

/// Parses `a.b.c.d/len` and tests membership.
#[must_use]
pub fn in_subnet(ip: &str, cidr: &str) -> bool {
    let Some((net, len)) = cidr.split_once('/') else {
        return false;
    };
    let (Ok(ip), Ok(net), Ok(len)) = (
        ip.parse::<core::net::Ipv4Addr>(),
        net.parse::<core::net::Ipv4Addr>(),
        len.parse::<u32>(),
    ) else {
        return false;
    };
    if len > 32 {
        return false;
    }
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    u32::from(ip) & mask == u32::from(net) & mask
}

/// N1: only `lo` and one interface in the run's subnet; no default route.
#[must_use]
pub fn n1(o: &RouteObs, ctx: &Context) -> Judged {
    let mut why = Vec::new();
    if !o.read_ok {
        why.push("/proc/net/route unreadable".to_string());
    }
    let others: Vec<(&String, &Vec<String>)> = o
        .ifaces
        .iter()
        .filter(|(n, _)| n.as_str() != "lo")
        .collect();
    if others.len() != 1 {
        why.push(format!(
            "want exactly one non-lo interface, got {}",
            others.len()
        ));
    }
    for (n, ips) in &others {
        if ips.is_empty() || !ips.iter().all(|i| in_subnet(i, &ctx.subnet)) {
            why.push(format!("{n} {ips:?} not in {}", ctx.subnet));
        }
    }
    if !o.defaults.is_empty() {
        why.push(format!("default routes: {:?}", o.defaults));
    }
    judged(
        format!("lo + one interface in {}; no default route", ctx.subnet),
        format!("ifaces {:?}; defaults {:?}", o.ifaces, o.defaults),
        why.is_empty(),
        why.join("; "),
    )
}

/// N2: direct TCP/UDP to public addresses → `ENETUNREACH`.
#[must_use]
pub fn n2(items: &[(String, Attempt)], profile: Profile) -> Judged {
    direct("ENETUNREACH for each", items, profile)
}

/// The errnos a Kubernetes NetworkPolicy's REJECT-style denial may answer with (Calico and
/// Cilium reject with `EPERM` from eBPF, iptables REJECT with `ECONNREFUSED`/`EHOSTUNREACH`).
const KUBE_REFUSALS: &[i32] = &[
    libc::ENETUNREACH,
    libc::EHOSTUNREACH,
    libc::ECONNREFUSED,
    libc::EPERM,
];

/// A direct-connection verdict: Podman needs `ENETUNREACH` (the internal network has no
/// route); the Kubernetes profile also takes a refusal or no answer within the probes' short
/// deadline (a drop; `probe::profile`).
fn direct(expect: &str, items: &[(String, Attempt)], profile: Profile) -> Judged {
    if !profile.drop_counts_as_denied() {
        return all_errno(expect, items, &[libc::ENETUNREACH]);
    }
    let mut j = all_errno(
        "refused (ENETUNREACH, EHOSTUNREACH, ECONNREFUSED, EPERM) or dropped (no answer within the deadline) for each",
        items,
        KUBE_REFUSALS,
    );
    let bad: Vec<&str> = items
        .iter()
        .filter(|(_, a)| !(a.is_errno(KUBE_REFUSALS) || *a == Attempt::Timeout))
        .map(|(l, _)| l.as_str())
        .collect();
    j.pass = !items.is_empty() && bad.is_empty();
    j.detail = if j.pass {
        "profile kubernetes: a drop within the deadline counts as denied".to_string()
    } else if items.is_empty() {
        "no attempt was made".to_string()
    } else {
        format!("reached or wrong answer: {}", bad.join(", "))
    };
    j
}

/// N3: direct IPv6 → `ENETUNREACH`; no global IPv6 address.
#[must_use]
pub fn n3(items: &[(String, Attempt)], global_v6: &[String]) -> Judged {
    let mut j = all_errno(
        "ENETUNREACH; no global IPv6 address",
        items,
        &[libc::ENETUNREACH],
    );
    j.got = format!("{} global_v6={global_v6:?}", j.got);
    if !global_v6.is_empty() {
        j.pass = false;
        j.detail = format!("global IPv6 addresses: {global_v6:?}");
    }
    j
}

/// N4: direct connections to cloud metadata endpoints → `ENETUNREACH`.
#[must_use]
pub fn n4(items: &[(String, Attempt)], profile: Profile) -> Judged {
    direct("ENETUNREACH for each", items, profile)
}

/// N6: the gateway and `host.containers.internal` refuse fast on service ports; the control is
/// a TCP connect to the proxy.
#[must_use]
pub fn n6(items: &[(String, Attempt)], control: &Attempt) -> Judged {
    let mut j = all_errno(
        "ECONNREFUSED, EHOSTUNREACH or ENETUNREACH for each; proxy connect ok",
        items,
        &[libc::ECONNREFUSED, libc::EHOSTUNREACH, libc::ENETUNREACH],
    );
    j.got = format!("{} control={}", j.got, control.text());
    if *control != Attempt::Ok {
        j.pass = false;
        j.detail = format!("positive control failed: proxy connect {}", control.text());
    }
    j
}

/// N15: raw sockets and link/route changes → `EPERM`; ICMP to the outside fails.
///
/// Under the `gvisor` profile a route or link change may be refused with `EACCES` (gVisor's
/// netlink answer in `network=host` mode), and a raw or packet socket with `EAFNOSUPPORT`
/// (bookworm's gVisor 0.0~20221219 has none at all).
#[must_use]
pub fn n15(items: &[(String, Attempt)], profile: Profile) -> Judged {
    let gvisor = profile == Profile::Gvisor;
    let bad: Vec<&str> = items
        .iter()
        .filter(|(l, a)| {
            let none_in_gvisor = gvisor && a.is_errno(&[libc::EAFNOSUPPORT]);
            if l.starts_with("ping") {
                !none_in_gvisor && !a.is_errno(&[libc::ENETUNREACH, libc::EACCES, libc::EPERM])
            } else if gvisor && l.starts_with("RTM_") {
                !a.is_errno(&[libc::EPERM, libc::EACCES])
            } else {
                !none_in_gvisor && !a.is_errno(&[libc::EPERM])
            }
        })
        .map(|(l, _)| l.as_str())
        .collect();
    judged(
        "AF_PACKET, SOCK_RAW, RTM_NEWROUTE, RTM_NEWLINK: EPERM; ping fails",
        list(items),
        !items.is_empty() && bad.is_empty(),
        if bad.is_empty() {
            String::new()
        } else {
            format!("wrong answer: {}", bad.join(", "))
        },
    )
}
