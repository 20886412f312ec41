//! A minimal DNS client: the resolver from `/etc/resolv.conf`, one A query over UDP with a 1 s
//! deadline, the reply's rcode and A records.

use std::net::{IpAddr, SocketAddr, UdpSocket};

use super::{NET_TIMEOUT, io_attempt};
use crate::probe::verdict::Attempt;
use crate::probe::verdict::dns::Dns;

/// The run's resolver: the first `nameserver` of `/etc/resolv.conf` ([`parse_resolv_conf`]).
pub(crate) fn resolver() -> Option<IpAddr> {
    parse_resolv_conf(&std::fs::read_to_string("/etc/resolv.conf").ok()?)
}

/// The first `nameserver ADDRESS` line of a `resolv.conf` text whose address parses; `None`
/// when there is none.
#[must_use]
pub fn parse_resolv_conf(text: &str) -> Option<IpAddr> {
    text.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some("nameserver")).then(|| w.next()?.parse().ok())?
    })
}

/// Our query for `name`: id `0x5a17`, recursion desired, one question (A, IN); a trailing dot
/// is dropped.
///
/// # Errors
/// A label longer than 255 bytes: the text names `name`.
pub fn a_query(name: &str) -> Result<Vec<u8>, String> {
    let mut q: Vec<u8> = vec![0x5a, 0x17, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.trim_end_matches('.').split('.') {
        let Ok(n) = u8::try_from(label.len()) else {
            return Err(format!("label in {name}"));
        };
        q.push(n);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    Ok(q)
}

/// A minimal DNS A query over UDP with a 1 s deadline (rcode + A records).
pub(crate) fn dns_query(server: IpAddr, name: &str) -> Dns {
    let q = match a_query(name) {
        Ok(q) => q,
        Err(e) => return Dns::Failed(Attempt::Missing(e)),
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply to `a_query(name)`: header with `rcode` and the answers, the question echoed.
    fn reply(name: &str, rcode: u8, answers: &[Vec<u8>]) -> (Vec<u8>, usize) {
        let q = a_query(name).expect("a valid name");
        let mut b = q.clone();
        b[2] = 0x81;
        b[3] = 0x80 | rcode;
        b[6..8].copy_from_slice(&u16::try_from(answers.len()).expect("few").to_be_bytes());
        for a in answers {
            b.extend_from_slice(a);
        }
        (b, q.len())
    }

    /// One answer record: a name pointer to the question, `typ`, class IN, TTL 60, `data`.
    fn answer(typ: u16, data: &[u8]) -> Vec<u8> {
        let mut a = vec![0xc0, 0x0c];
        a.extend_from_slice(&typ.to_be_bytes());
        a.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
        a.extend_from_slice(&u16::try_from(data.len()).expect("short").to_be_bytes());
        a.extend_from_slice(data);
        a
    }

    #[test]
    fn the_query_has_one_question_for_the_name() {
        let q = a_query("cyclix-r-proxy.").expect("valid");
        assert_eq!(&q[..12], &[0x5a, 0x17, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&q[12..28], b"\x0ecyclix-r-proxy\0");
        assert_eq!(&q[28..], &[0, 1, 0, 1]);
        assert_eq!(a_query("a.bc").expect("valid")[12..18], *b"\x01a\x02bc\0");
        assert_eq!(
            a_query(&"x".repeat(300)),
            Err(format!("label in {}", "x".repeat(300)))
        );
    }

    #[test]
    fn a_records_are_read_and_other_records_skipped() {
        let (b, end) = reply(
            "example.com",
            0,
            &[
                answer(5, &[3, b'w', b'w', b'w', 0xc0, 0x0c]),
                answer(1, &[10, 213, 7, 2]),
                answer(1, &[10, 213, 7, 9]),
            ],
        );
        assert_eq!(
            parse_dns(&b, end),
            Dns::Reply {
                rcode: 0,
                addrs: vec!["10.213.7.2".into(), "10.213.7.9".into()]
            }
        );
        // An answer whose owner name is spelled out in labels instead of a pointer.
        let mut spelled = vec![1, b'a', 0];
        spelled.extend_from_slice(&answer(1, &[1, 2, 3, 4])[2..]);
        let (b, end) = reply("a", 0, &[spelled]);
        assert_eq!(
            parse_dns(&b, end),
            Dns::Reply {
                rcode: 0,
                addrs: vec!["1.2.3.4".into()]
            }
        );
    }

    #[test]
    fn error_rcodes_and_empty_answers() {
        let (b, end) = reply("example.com", 3, &[]);
        assert_eq!(
            parse_dns(&b, end),
            Dns::Reply {
                rcode: 3,
                addrs: vec![]
            }
        );
        // An A record of the wrong length is not an address.
        let (b, end) = reply("example.com", 0, &[answer(1, &[1, 2, 3])]);
        assert_eq!(
            parse_dns(&b, end),
            Dns::Reply {
                rcode: 0,
                addrs: vec![]
            }
        );
    }

    #[test]
    fn short_and_truncated_replies_do_not_panic() {
        assert_eq!(
            parse_dns(&[0x5a, 0x17, 0x81], 17),
            Dns::Failed(Attempt::Missing("short DNS reply".into()))
        );
        // ancount says 2, the bytes end inside the first record.
        let (mut b, end) = reply("example.com", 0, &[answer(1, &[10, 0, 0, 1])]);
        b[7] = 2;
        b.truncate(b.len() - 2);
        assert_eq!(
            parse_dns(&b, end),
            Dns::Reply {
                rcode: 0,
                addrs: vec![]
            }
        );
        // A question end beyond the reply, and a huge answer count.
        let (mut b, _) = reply("example.com", 0, &[]);
        b[6] = 0xff;
        b[7] = 0xff;
        assert_eq!(
            parse_dns(&b, 4096),
            Dns::Reply {
                rcode: 0,
                addrs: vec![]
            }
        );
    }

    #[test]
    fn the_resolver_is_the_first_parsable_nameserver() {
        let conf = "# generated\nsearch dns.podman\nnameserver bogus\nnameserver 10.213.7.1\nnameserver 10.213.7.9\n";
        assert_eq!(parse_resolv_conf(conf), "10.213.7.1".parse().ok());
        assert_eq!(
            parse_resolv_conf("nameserver fd00::1"),
            "fd00::1".parse().ok()
        );
        assert_eq!(parse_resolv_conf("options ndots:0\nnameserver\n"), None);
        assert_eq!(parse_resolv_conf(""), None);
        assert_eq!(parse_resolv_conf("#nameserver 1.1.1.1"), None);
    }
}
