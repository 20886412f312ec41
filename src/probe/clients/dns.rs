//! A minimal DNS client: the resolver from `/etc/resolv.conf`, one A query over UDP with a 1 s
//! deadline, the reply's rcode and A records.

use std::net::{IpAddr, SocketAddr, UdpSocket};

use super::{NET_TIMEOUT, io_attempt};
use crate::probe::verdict::Attempt;
use crate::probe::verdict::dns::Dns;

pub(crate) fn resolver() -> Option<IpAddr> {
    std::fs::read_to_string("/etc/resolv.conf")
        .ok()?
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("nameserver")).then(|| w.next()?.parse().ok())?
        })
}

/// A minimal DNS A query over UDP with a 1 s deadline (rcode + A records).
pub(crate) fn dns_query(server: IpAddr, name: &str) -> Dns {
    let mut q: Vec<u8> = vec![0x5a, 0x17, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.trim_end_matches('.').split('.') {
        let Ok(n) = u8::try_from(label.len()) else {
            return Dns::Failed(Attempt::Missing(format!("label in {name}")));
        };
        q.push(n);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    let bind = if server.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let s = match UdpSocket::bind(bind) {
        Ok(s) => s,
        Err(e) => return Dns::Failed(io_attempt::<()>(Err(e))),
    };
    let _ = s.set_read_timeout(Some(NET_TIMEOUT));
    if let Err(e) = s
        .connect(SocketAddr::new(server, 53))
        .and_then(|()| s.send(&q))
    {
        return Dns::Failed(io_attempt::<()>(Err(e)));
    }
    let mut buf = [0u8; 1500];
    let n = match s.recv(&mut buf) {
        Ok(n) => n,
        Err(e) => return Dns::Failed(io_attempt::<()>(Err(e))),
    };
    parse_dns(&buf[..n], q.len())
}

/// Parses the rcode and the A records of a reply to our single-question query.
#[must_use]
pub fn parse_dns(b: &[u8], question_end: usize) -> Dns {
    if b.len() < 12 {
        return Dns::Failed(Attempt::Missing("short DNS reply".into()));
    }
    let rcode = b[3] & 0x0f;
    let ancount = usize::from(u16::from_be_bytes([b[6], b[7]]));
    let mut i = question_end;
    let mut addrs = Vec::new();
    for _ in 0..ancount {
        // name: a pointer (2 bytes) or labels
        while i < b.len() {
            if b[i] & 0xc0 == 0xc0 {
                i += 2;
                break;
            }
            if b[i] == 0 {
                i += 1;
                break;
            }
            i += 1 + usize::from(b[i]);
        }
        if i + 10 > b.len() {
            break;
        }
        let typ = u16::from_be_bytes([b[i], b[i + 1]]);
        let len = usize::from(u16::from_be_bytes([b[i + 8], b[i + 9]]));
        i += 10;
        if typ == 1 && len == 4 && i + 4 <= b.len() {
            addrs.push(format!("{}.{}.{}.{}", b[i], b[i + 1], b[i + 2], b[i + 3]));
        }
        i += len;
    }
    Dns::Reply { rcode, addrs }
}
