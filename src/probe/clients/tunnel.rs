//! Tunnels through the proxy (N17): `CONNECT host:port`, then the first bytes an attacker (or
//! an honest TLS client) would send, and what came back before the deadline. Also the fixed
//! TLS `ClientHello` template those first bytes are made from.
//!
//! The `ClientHello` is a byte template with only the SNI filled in: it is never meant to
//! complete a handshake (a fixed "random" and a fixed X25519 key share nobody holds the private
//! half of), so no TLS library and no crypto are needed. It is complete enough that a TLS 1.3
//! server answers it with its `ServerHello` (not a `HelloRetryRequest` or an alert): squid
//! peeks at that answer before it splices (issue 31), and the positive control looks for a TLS
//! record back. A TLS crate (rustls) would bring a crypto provider into the probe binary for a
//! handshake nobody completes.

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::{NET_TIMEOUT, io_attempt};
use crate::probe::Context;
use crate::probe::clients::http::parse_reply;
use crate::probe::verdict::Attempt;
use crate::probe::verdict::proxy::{Reply, Tunnel};

/// How long to wait, after the first bytes went into an established tunnel, for an answer or
/// the proxy's close (ms). Measured: squid closes a cut tunnel at once (< 10 ms).
const TUNNEL_READ_MS: u64 = 1200;

/// The first line an SSH client sends (RFC 4253 §4.2): what rides a tunnel in field report B31.
pub const SSH_BANNER: &[u8] = b"SSH-2.0-cyclix-probe\r\n";

/// A minimal TLS 1.2/1.3 `ClientHello` (one record) naming `sni` (RFC 8446 §4.1.2, RFC 6066 §3):
/// legacy version 0x0303, a fixed random, no session id, six cipher suites, and the extensions
/// `server_name`, `supported_groups`, `ec_point_formats`, `signature_algorithms`,
/// `supported_versions`, `key_share` (X25519, fixed bytes) and `renegotiation_info`. `sni` longer than 255 bytes is cut (DNS names are at most 253).
#[must_use]
pub fn client_hello(sni: &str) -> Vec<u8> {
    let name = &sni.as_bytes()[..sni.len().min(255)];
    let n = u16::try_from(name.len()).unwrap_or(255);
    let mut ext = Vec::new();
    // server_name: list length, type host_name (0), name length, name.
    ext.extend_from_slice(&[0x00, 0x00]);
    ext.extend_from_slice(&(n + 5).to_be_bytes());
    ext.extend_from_slice(&(n + 3).to_be_bytes());
    ext.push(0);
    ext.extend_from_slice(&n.to_be_bytes());
    ext.extend_from_slice(name);
    ext.extend_from_slice(&[
        0x00, 0x0a, 0x00, 0x06, 0x00, 0x04, 0x00, 0x1d, 0x00, 0x17, // groups x25519, P-256
        0x00, 0x0b, 0x00, 0x02, 0x01, 0x00, // ec_point_formats: uncompressed
        0x00, 0x0d, 0x00, 0x08, 0x00, 0x06, 0x04, 0x03, 0x08, 0x04, 0x04, 0x01, // sig algs
        0x00, 0x2b, 0x00, 0x05, 0x04, 0x03, 0x04, 0x03, 0x03, // versions 1.3, 1.2
        0xff, 0x01, 0x00, 0x01, 0x00, // renegotiation_info: empty (a new connection)
    ]);
    // key_share: one X25519 share (group 0x001d, 32 bytes): any 32 bytes are a public key.
    ext.extend_from_slice(&[0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20]);
    ext.extend((0..32u8).map(|i| i.wrapping_mul(29) ^ 0xa5)); // fixed, not secret
    let mut body = vec![0x03, 0x03];
    body.extend((0..32u8).map(|i| i.wrapping_mul(37) ^ 0x5a)); // fixed, not secret
    body.push(0); // session id: none
    body.extend_from_slice(&[
        0x00, 0x0c, 0x13, 0x01, 0x13, 0x02, 0xc0, 0x2f, 0xc0, 0x2b, 0xc0, 0x30, 0xc0, 0x2c,
    ]);
    body.extend_from_slice(&[0x01, 0x00]); // compression: null
    body.extend_from_slice(&u16::try_from(ext.len()).unwrap_or(0).to_be_bytes());
    body.extend_from_slice(&ext);
    let blen = u32::try_from(body.len()).unwrap_or(0).to_be_bytes();
    let mut hs = vec![0x01, blen[1], blen[2], blen[3]];
    hs.extend_from_slice(&body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend_from_slice(&u16::try_from(hs.len()).unwrap_or(0).to_be_bytes());
    record.extend_from_slice(&hs);
    record
}

/// `CONNECT target` through the proxy; when it answers 200, sends `first` into the tunnel and
/// reads what comes back for at most [`TUNNEL_READ_MS`] (up to 64 bytes).
pub(crate) fn tunnel(ctx: &Context, target: &str, first: &[u8]) -> Tunnel {
    let Some((host, port)) = ctx.proxy_addr() else {
        return Tunnel::NotEstablished(Reply::Failed(Attempt::Missing(format!(
            "proxy address in {}",
            ctx.proxy_url
        ))));
    };
    let Ok(ip) = host.parse::<IpAddr>() else {
        return Tunnel::NotEstablished(Reply::Failed(Attempt::Missing(format!(
            "proxy host {host} is not an IP address"
        ))));
    };
    let fail = |e: std::io::Error| Tunnel::NotEstablished(Reply::Failed(io_attempt::<()>(Err(e))));
    let mut s = match TcpStream::connect_timeout(&SocketAddr::new(ip, port), NET_TIMEOUT) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let _ = s.set_read_timeout(Some(NET_TIMEOUT));
    let _ = s.set_write_timeout(Some(NET_TIMEOUT));
    let req =
        format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nUser-Agent: cyclix-probe\r\n\r\n");
    if let Err(e) = s.write_all(req.as_bytes()) {
        return fail(e);
    }
    // The head, byte by byte: nothing of the tunnel's own bytes may be read as part of it.
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        match s.read(&mut b) {
            Ok(0) => break,
            Ok(_) => head.push(b[0]),
            Err(e) if head.is_empty() => return fail(e),
            Err(_) => break,
        }
    }
    let reply = parse_reply(&head, head.windows(4).position(|w| w == b"\r\n\r\n"));
    if !matches!(reply, Reply::Status { code: 200, .. }) || !head.ends_with(b"\r\n\r\n") {
        return Tunnel::NotEstablished(reply);
    }
    let start = Instant::now();
    if s.write_all(first).is_err() {
        return Tunnel::Cut {
            ms: elapsed_ms(start),
        };
    }
    let deadline = start + Duration::from_millis(TUNNEL_READ_MS);
    let mut got = Vec::new();
    let mut chunk = [0u8; 64];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                got.extend_from_slice(&chunk[..n]);
                if got.len() >= 64 {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
                ) =>
            {
                if got.is_empty() {
                    return Tunnel::Timeout;
                }
                break;
            }
            Err(_) => break, // reset: closed
        }
    }
    if got.is_empty() {
        Tunnel::Cut {
            ms: elapsed_ms(start),
        }
    } else {
        got.truncate(64);
        Tunnel::Answered { first: got }
    }
}

fn elapsed_ms(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the template back as a TLS parser would: every length field covers exactly what
    /// follows, and the `server_name` extension carries the name.
    #[test]
    fn the_client_hello_is_well_formed_and_names_the_host() {
        for sni in ["allowed.example", "a", &"x".repeat(253)] {
            let r = client_hello(sni);
            assert_eq!(&r[..3], &[0x16, 0x03, 0x01]);
            let rec_len = usize::from(u16::from_be_bytes([r[3], r[4]]));
            assert_eq!(rec_len, r.len() - 5);
            let hs = &r[5..];
            assert_eq!(hs[0], 0x01, "handshake type client_hello");
            let hs_len = usize::from(hs[1]) << 16 | usize::from(hs[2]) << 8 | usize::from(hs[3]);
            assert_eq!(hs_len, hs.len() - 4);
            let body = &hs[4..];
            assert_eq!(&body[..2], &[0x03, 0x03]);
            let mut i = 2 + 32;
            i += 1 + usize::from(body[i]); // session id
            i += 2 + usize::from(u16::from_be_bytes([body[i], body[i + 1]])); // suites
            i += 1 + usize::from(body[i]); // compression
            let ext_len = usize::from(u16::from_be_bytes([body[i], body[i + 1]]));
            let exts = &body[i + 2..];
            assert_eq!(ext_len, exts.len());
            let mut j = 0;
            let mut names = Vec::new();
            while j < exts.len() {
                let ty = u16::from_be_bytes([exts[j], exts[j + 1]]);
                let len = usize::from(u16::from_be_bytes([exts[j + 2], exts[j + 3]]));
                let data = &exts[j + 4..j + 4 + len];
                if ty == 0 {
                    let n = usize::from(u16::from_be_bytes([data[3], data[4]]));
                    assert_eq!(data[2], 0, "host_name");
                    assert_eq!(usize::from(u16::from_be_bytes([data[0], data[1]])), n + 3);
                    names.push(String::from_utf8(data[5..5 + n].to_vec()).expect("utf8"));
                }
                j += 4 + len;
            }
            assert_eq!(j, exts.len());
            assert_eq!(names, vec![sni.to_string()]);
        }
    }
}
