//! DNS (N7): raw queries to the run's resolver.

use crate::probe::Context;
use crate::probe::clients::dns::{dns_query, resolver};
use crate::probe::clients::udp;
use crate::probe::verdict::dns as v;
use crate::probe::verdict::dns::Dns;
use crate::probe::verdict::{Attempt, Judged};

/// N7.
#[must_use]
pub fn n7(ctx: &Context) -> Judged {
    let hosts = std::fs::read_to_string("/etc/hosts")
        .map(|t| hosts_addrs(&t, &ctx.proxy_name))
        .unwrap_or_default();
    let Some(server) = resolver() else {
        let f = Dns::Failed(Attempt::Missing("no nameserver in /etc/resolv.conf".into()));
        return v::n7(&f, &f, &hosts, &udp("8.8.8.8:53"), ctx);
    };
    let ctl = dns_query(server, &ctx.proxy_name);
    let ext = dns_query(server, "example.com");
    v::n7(&ctl, &ext, &hosts, &udp("8.8.8.8:53"), ctx)
}

/// The addresses an `/etc/hosts` text gives `name` (`ADDRESS NAME…` lines, `#` comments), in
/// file order.
#[must_use]
pub fn hosts_addrs(text: &str, name: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split('#').next()?.split_whitespace();
            let addr = w.next()?;
            w.any(|n| n == name).then(|| addr.to_string())
        })
        .collect()
}
