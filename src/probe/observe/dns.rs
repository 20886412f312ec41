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
    let Some(server) = resolver() else {
        let f = Dns::Failed(Attempt::Missing("no nameserver in /etc/resolv.conf".into()));
        return v::n7(&f, &f, &udp("8.8.8.8:53"), ctx);
    };
    let ctl = dns_query(server, &ctx.proxy_name);
    let ext = dns_query(server, "example.com");
    v::n7(&ctl, &ext, &udp("8.8.8.8:53"), ctx)
}
