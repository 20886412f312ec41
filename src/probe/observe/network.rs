//! The network without the proxy (N1–N4, N6, N15): interfaces and routes, direct TCP/UDP,
//! the gateway and the host, raw sockets and rtnetlink.

use std::net::UdpSocket;

use nix::sys::socket::{AddressFamily, SockFlag, SockProtocol, SockType, socket};

use crate::probe::Context;
use crate::probe::clients::netlink::{link_msg, route_msg, rtnetlink};
use crate::probe::clients::{io_attempt, nix_attempt, tcp, udp};
use crate::probe::verdict::network as v;
use crate::probe::verdict::{Attempt, Judged};

/// N1.
#[must_use]
pub fn n1(ctx: &Context) -> Judged {
    let mut o = v::RouteObs::default();
    if let Ok(ifs) = nix::ifaddrs::getifaddrs() {
        for i in ifs {
            let e = o.ifaces.entry(i.interface_name.clone()).or_default();
            if let Some(a) = i.address.as_ref().and_then(|a| a.as_sockaddr_in()) {
                e.push(a.ip().to_string());
            }
        }
    }
    match std::fs::read_to_string("/proc/net/route") {
        Ok(t) => {
            o.read_ok = true;
            o.defaults = default_routes_v4(&t);
        }
        Err(_) => o.read_ok = false,
    }
    o.defaults.extend(default_routes_v6(
        &std::fs::read_to_string("/proc/net/ipv6_route").unwrap_or_default(),
    ));
    v::n1(&o, ctx)
}

/// The default routes in a `/proc/net/route` text (a header line, then `Iface Destination
/// Gateway Flags RefCnt Use Metric Mask …`): destination and mask `00000000`, as
/// `v4 via GATEWAY dev IFACE` (the gateway in the file's hex).
#[must_use]
pub fn default_routes_v4(route: &str) -> Vec<String> {
    route
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 7 && f[1] == "00000000" && f[7] == "00000000")
                .then(|| format!("v4 via {} dev {}", f[2], f[0]))
        })
        .collect()
}

/// The default routes in a `/proc/net/ipv6_route` text (no header: destination, its length,
/// …, flags (field 9), device (field 10)): `::/0` without `RTF_REJECT` (0x0200) and not on
/// `lo` (the kernel's own reject route), as `v6 dev DEV`.
#[must_use]
pub fn default_routes_v6(ipv6_route: &str) -> Vec<String> {
    ipv6_route
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() > 9 && f[0].bytes().all(|b| b == b'0') && f[1] == "00" {
                let flags = u32::from_str_radix(f[8], 16).unwrap_or(0);
                (flags & 0x0200 == 0 && f[9] != "lo").then(|| format!("v6 dev {}", f[9]))
            } else {
                None
            }
        })
        .collect()
}

/// One attempt of a probe, to run on its own thread.
type Try = Box<dyn FnOnce() -> Attempt + Send>;

/// Each of `attempts` on its own thread, all at once. Where a policy drops what it denies
/// (the Kubernetes profile counts that as denied), each attempt waits its full
/// [`crate::probe::clients::NET_TIMEOUT`]; one after another, N4's five connections took 5 s
/// against the probe's 2 s deadline on a real cluster (issue 34), all at once they take 1 s.
fn at_once(attempts: Vec<(String, Try)>) -> Vec<(String, Attempt)> {
    std::thread::scope(|s| {
        let running: Vec<_> = attempts
            .into_iter()
            .map(|(name, f)| (name, s.spawn(f)))
            .collect();
        running
            .into_iter()
            .map(|(name, h)| {
                let got = h
                    .join()
                    .unwrap_or_else(|_| Attempt::Missing("the attempt's thread failed".into()));
                (name, got)
            })
            .collect()
    })
}

/// A TCP connection to `addr` as a [`Try`] named `tcp ADDR`.
fn tcp_try(addr: &'static str) -> (String, Try) {
    (format!("tcp {addr}"), Box::new(move || tcp(addr)))
}

/// N2.
#[must_use]
pub fn n2(ctx: &Context) -> Judged {
    let mut attempts = vec![tcp_try("1.1.1.1:443"), tcp_try("8.8.8.8:53")];
    if ctx.profile.drop_counts_as_denied() {
        // A Pod has a route, so a UDP send always succeeds locally: what counts is whether a
        // public resolver answers (a reply FAILs; none within the deadline is a drop).
        for server in ["8.8.8.8", "1.1.1.1"] {
            let ask: Try = Box::new(move || {
                match crate::probe::clients::dns::dns_query(
                    server
                        .parse()
                        .unwrap_or(std::net::IpAddr::from([8, 8, 8, 8])),
                    "example.com",
                ) {
                    crate::probe::verdict::dns::Dns::Reply { .. } => Attempt::Ok,
                    crate::probe::verdict::dns::Dns::Failed(a) => a,
                }
            });
            attempts.push((format!("dns {server}:53"), ask));
        }
    }
    let mut items = at_once(attempts);
    if !ctx.profile.drop_counts_as_denied() {
        items.push(("udp 8.8.8.8:53".to_string(), udp("8.8.8.8:53")));
        items.push(("udp 8.8.8.8:443".to_string(), udp("8.8.8.8:443")));
    }
    v::n2(&items, ctx.profile)
}

/// N3.
#[must_use]
pub fn n3(_: &Context) -> Judged {
    let items = vec![(
        "tcp [2606:4700:4700::1111]:443".to_string(),
        tcp("[2606:4700:4700::1111]:443"),
    )];
    let global: Vec<String> = nix::ifaddrs::getifaddrs()
        .map(|ifs| {
            ifs.filter_map(|i| {
                i.address
                    .and_then(|a| a.as_sockaddr_in6().map(nix::sys::socket::SockaddrIn6::ip))
            })
            .filter(|ip| {
                let s = ip.segments();
                !(ip.is_loopback() || s[0] & 0xffc0 == 0xfe80 || s[0] & 0xfe00 == 0xfc00)
            })
            .map(|ip| ip.to_string())
            .collect()
        })
        .unwrap_or_default();
    v::n3(&items, &global)
}

/// N4.
#[must_use]
pub fn n4(ctx: &Context) -> Judged {
    let items = at_once(
        [
            "169.254.169.254:80",
            "100.100.100.200:80",
            "100.96.0.96:80",
            "100.80.80.80:80",
            "[fd00:ec2::254]:80",
        ]
        .into_iter()
        .map(tcp_try)
        .collect(),
    );
    v::n4(&items, ctx.profile)
}

/// N6.
#[must_use]
pub fn n6(ctx: &Context) -> Judged {
    // Podman writes the name into the container's /etc/hosts (containers.conf `host_containers_internal_ip`);
    // read there, not through getaddrinfo, whose NSS modules a static glibc binary would load
    // from the image (`run::exec_only`).
    let hci = std::fs::read_to_string("/etc/hosts")
        .ok()
        .and_then(|t| hosts_ipv4(&t, "host.containers.internal"));
    let mut items = Vec::new();
    let mut targets = vec![ctx.gateway_ip.clone()];
    match &hci {
        Some(ip) => targets.push(ip.clone()),
        None => items.push((
            "host.containers.internal".to_string(),
            Attempt::Missing("not resolvable".into()),
        )),
    }
    for t in &targets {
        for port in [22, 80, 443, 2375, 5432, 6379, 10250] {
            items.push((format!("{t}:{port}"), tcp(&format!("{t}:{port}"))));
        }
    }
    let ctl = ctx
        .proxy_addr()
        .map_or(Attempt::Missing("proxy address".into()), |(h, p)| {
            tcp(&format!("{h}:{p}"))
        });
    v::n6(&items, &ctl)
}

/// The first IPv4 address `/etc/hosts` text `hosts` gives for `name` (hosts(5): an address,
/// then names; `#` starts a comment; names match without regard to case). Pure.
#[must_use]
pub fn hosts_ipv4(hosts: &str, name: &str) -> Option<String> {
    hosts.lines().find_map(|line| {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        let ip = fields.next()?.parse::<std::net::Ipv4Addr>().ok()?;
        fields
            .any(|n| n.eq_ignore_ascii_case(name))
            .then(|| ip.to_string())
    })
}

/// N15: raw sockets, a route and a link change over rtnetlink, ICMP.
#[must_use]
pub fn n15(ctx: &Context) -> Judged {
    let mut items = vec![
        (
            "AF_PACKET".to_string(),
            nix_attempt(socket(
                AddressFamily::Packet,
                SockType::Raw,
                SockFlag::SOCK_CLOEXEC,
                None,
            )),
        ),
        (
            "SOCK_RAW icmp".to_string(),
            nix_attempt(socket(
                AddressFamily::Inet,
                SockType::Raw,
                SockFlag::SOCK_CLOEXEC,
                SockProtocol::Icmp,
            )),
        ),
    ];
    items.push(("RTM_NEWROUTE".to_string(), rtnetlink(24, &route_msg())));
    items.push((
        "RTM_NEWLINK eth0 down".to_string(),
        rtnetlink(16, &link_msg()),
    ));
    let ping = match socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::Icmp,
    ) {
        Ok(fd) => {
            let s = UdpSocket::from(fd);
            io_attempt(s.send_to(&[8, 0, 0xf7, 0xff, 0, 0, 0, 0], "1.1.1.1:0"))
        }
        Err(e) => Attempt::Errno(e as i32),
    };
    items.push(("ping 1.1.1.1".to_string(), ping));
    v::n15(&items, ctx.profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE_HEAD: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n";

    #[test]
    fn the_host_name_is_read_from_etc_hosts() {
        let hosts = "127.0.0.1\tlocalhost\n::1 localhost\n# 10.9.9.9 host.containers.internal\n\
                     fd00::1 host.containers.internal\n\
                     10.213.4.1  HOST.containers.internal host.docker.internal # podman\n\
                     10.0.0.7 host.containers.internal\n";
        assert_eq!(
            hosts_ipv4(hosts, "host.containers.internal").as_deref(),
            Some("10.213.4.1"),
            "the first IPv4 line naming it, case aside; comments and IPv6 skipped"
        );
        assert_eq!(
            hosts_ipv4(hosts, "host.containers"),
            None,
            "whole names only"
        );
        assert_eq!(hosts_ipv4("", "host.containers.internal"), None);
        assert_eq!(
            hosts_ipv4(
                "not-an-ip host.containers.internal\n",
                "host.containers.internal"
            ),
            None
        );
    }

    #[test]
    fn v4_default_routes() {
        let inside =
            format!("{ROUTE_HEAD}eth0\t0007D50A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n");
        assert!(
            default_routes_v4(&inside).is_empty(),
            "only the subnet route"
        );
        let host = format!(
            "{ROUTE_HEAD}eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
             eth0\t0000A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n"
        );
        assert_eq!(default_routes_v4(&host), ["v4 via 0100A8C0 dev eth0"]);
        // The header alone, an empty file, short and odd lines.
        assert!(default_routes_v4(ROUTE_HEAD).is_empty());
        assert!(default_routes_v4("").is_empty());
        assert!(default_routes_v4(&format!("{ROUTE_HEAD}eth0 00000000 x\n")).is_empty());
        assert!(
            default_routes_v4("eth0\t00000000\t0100A8C0\t3\t0\t0\t0\t00000000\n").is_empty(),
            "the first line is the header"
        );
    }

    #[test]
    fn v6_default_routes_without_the_kernels_reject_route() {
        let zero = "00000000000000000000000000000000";
        let reject =
            format!("{zero} 00 {zero} 00 {zero} ffffffff 00000001 00000000 00200200       lo\n");
        assert!(default_routes_v6(&reject).is_empty(), "RTF_REJECT on lo");
        let real = format!(
            "{zero} 00 {zero} 00 fe800000000000000000000000000001 00000400 00000001 00000000 00450003     eth0\n"
        );
        assert_eq!(default_routes_v6(&real), ["v6 dev eth0"]);
        let local = format!(
            "fe800000000000000000000000000000 40 {zero} 00 {zero} 00000100 00000001 00000000 00000001     eth0\n"
        );
        assert!(default_routes_v6(&local).is_empty(), "not ::/0");
        // Unparsable flags count as none; short lines are skipped.
        let odd = format!("{zero} 00 {zero} 00 {zero} 0 1 0 zz eth1\n{zero} 00 short\n");
        assert_eq!(default_routes_v6(&odd), ["v6 dev eth1"]);
        assert!(default_routes_v6("").is_empty());
    }

    #[test]
    fn the_attempts_of_a_probe_overlap_and_keep_their_order() {
        use std::sync::{Arc, Barrier};
        // Each attempt waits at a barrier for all the others: only attempts that run at once
        // get past it (one after another, the first would wait for ever: the barrier's own
        // timeout-free wait makes the overlap the test's condition, no clock involved).
        let n = 5;
        let barrier = Arc::new(Barrier::new(n));
        let attempts: Vec<(String, Try)> = (0..n)
            .map(|i| {
                let b = Arc::clone(&barrier);
                let f: Try = Box::new(move || {
                    b.wait();
                    if i % 2 == 0 {
                        Attempt::Ok
                    } else {
                        Attempt::Errno(111)
                    }
                });
                (format!("a{i}"), f)
            })
            .collect();
        let got = at_once(attempts);
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a0", "a1", "a2", "a3", "a4"]);
        assert!(matches!(got[0].1, Attempt::Ok) && matches!(got[1].1, Attempt::Errno(111)));
    }
}
