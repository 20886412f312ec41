//! A minimal HTTP/1.1 client to the run's proxy: one request line and `Host`, the reply head
//! and the first bytes of the body, with deadlines.

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

use super::{NET_TIMEOUT, io_attempt};
use crate::probe::Context;
use crate::probe::verdict::Attempt;
use crate::probe::verdict::proxy::Reply;

/// Sends one raw HTTP/1.1 request line (+ `Host`) to the proxy and reads the reply head.
pub(crate) fn http(ctx: &Context, request_line: &str, host_header: &str) -> Reply {
    let Some((host, port)) = ctx.proxy_addr() else {
        return Reply::Failed(Attempt::Missing(format!(
            "proxy address in {}",
            ctx.proxy_url
        )));
    };
    let Ok(ip) = host.parse::<IpAddr>() else {
        return Reply::Failed(Attempt::Missing(format!(
            "proxy host {host} is not an IP address"
        )));
    };
    let mut stream = match TcpStream::connect_timeout(&SocketAddr::new(ip, port), NET_TIMEOUT) {
        Ok(s) => s,
        Err(e) => return Reply::Failed(io_attempt::<()>(Err(e))),
    };
    // A report-only proxy forwards would-be denials and answers unreachable targets after its
    // 1 s connect budget (measured 1.46 s for CONNECT 1.1.1.1:443): wait a little longer then.
    let read_ms = if ctx.report_only { 1900 } else { 1400 };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(read_ms)));
    let _ = stream.set_write_timeout(Some(NET_TIMEOUT));
    let req = format!(
        "{request_line} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: cyclix-probe\r\nConnection: close\r\n\r\n"
    );
    if let Err(e) = stream.write_all(req.as_bytes()) {
        return Reply::Failed(io_attempt::<()>(Err(e)));
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    let head_end = loop {
        match stream.read(&mut chunk) {
            Ok(0) => break buf.windows(4).position(|w| w == b"\r\n\r\n"),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    // Read a little of the body if it is already there (CONNECT has none).
                    if !request_line.starts_with("CONNECT") && buf.len() < i + 4 + 64 {
                        let _ = stream.set_read_timeout(Some(Duration::from_millis(300)));
                        if let Ok(n) = stream.read(&mut chunk) {
                            buf.extend_from_slice(&chunk[..n]);
                        }
                    }
                    break Some(i);
                }
                if buf.len() > 16 * 1024 {
                    break None;
                }
            }
            Err(e) => {
                if buf.is_empty() {
                    return Reply::Failed(io_attempt::<()>(Err(e)));
                }
                break buf.windows(4).position(|w| w == b"\r\n\r\n");
            }
        }
    };
    parse_reply(&buf, head_end)
}

/// The reply as read: the status code from the status line, the `X-Squid-Error` and
/// `Location` headers (names matched without case) and the first 256 characters of the body;
/// `head_end` is where the head's `\r\n\r\n` starts, `None` when it never came (all of
/// `buf` is then the head). No status code: [`Attempt::Missing`] quoting the first 80
/// characters.
#[must_use]
pub fn parse_reply(buf: &[u8], head_end: Option<usize>) -> Reply {
    let text = String::from_utf8_lossy(buf).into_owned();
    let head = head_end.map_or(text.as_str(), |i| &text[..i.min(text.len())]);
    let mut lines = head.split("\r\n");
    let code = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok());
    let Some(code) = code else {
        return Reply::Failed(Attempt::Missing(format!(
            "no status line in {:?}",
            text.chars().take(80).collect::<String>()
        )));
    };
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let body = head_end.map_or(String::new(), |i| {
        text.get(i + 4..).unwrap_or("").chars().take(256).collect()
    });
    Reply::Status {
        code,
        error_header: header("X-Squid-Error"),
        location: header("Location"),
        body,
    }
}

/// `GET URL` through the proxy, with the URL's host (and port) as `Host`.
pub(crate) fn get(ctx: &Context, url: &str) -> Reply {
    http(ctx, &format!("GET {url}"), host_of(url))
}

/// The `host[:port]` of an `http://` URL (the text up to the first `/` without the scheme).
#[must_use]
pub fn host_of(url: &str) -> &str {
    url.trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or("")
}

/// `CONNECT TARGET` through the proxy.
pub(crate) fn connect(ctx: &Context, target: &str) -> Reply {
    http(ctx, &format!("CONNECT {target}"), target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Reply {
        let b = text.as_bytes();
        parse_reply(b, b.windows(4).position(|w| w == b"\r\n\r\n"))
    }

    #[test]
    fn a_squid_deny_gives_its_code_and_error_header() {
        let r = parse(
            "HTTP/1.1 403 Forbidden\r\nServer: squid\r\nX-Squid-Error: ERR_ACCESS_DENIED 0\r\n\r\n<html>denied",
        );
        assert_eq!(
            r,
            Reply::Status {
                code: 403,
                error_header: Some("ERR_ACCESS_DENIED 0".into()),
                location: None,
                body: "<html>denied".into(),
            }
        );
        assert!(r.is_deny());
    }

    #[test]
    fn headers_match_without_case_and_the_body_is_cut() {
        let long = "x".repeat(300);
        let r = parse(&format!(
            "HTTP/1.1 302 Found\r\nlocation:  http://denied.example/ \r\nx-squid-error: E\r\n\r\n{long}"
        ));
        let Reply::Status {
            code,
            error_header,
            location,
            body,
        } = r
        else {
            panic!("a status line: {r:?}")
        };
        assert_eq!(code, 302);
        assert_eq!(location.as_deref(), Some("http://denied.example/"));
        assert_eq!(error_header.as_deref(), Some("E"));
        assert_eq!(body.len(), 256);
        // The status line only (a CONNECT answer cut before the blank line).
        assert_eq!(
            parse_reply(b"HTTP/1.1 200 Connection established\r\n", None),
            Reply::Status {
                code: 200,
                error_header: None,
                location: None,
                body: String::new(),
            }
        );
    }

    #[test]
    fn no_status_code_is_missing() {
        for bad in ["", "garbage", "HTTP/1.1\r\n\r\n", "HTTP/1.1 abc OK\r\n\r\n"] {
            assert!(
                matches!(parse(bad), Reply::Failed(Attempt::Missing(ref m)) if m.starts_with("no status line in")),
                "{bad:?}"
            );
        }
        let Reply::Failed(Attempt::Missing(m)) = parse(&"y".repeat(500)) else {
            panic!("no status line")
        };
        assert_eq!(m, format!("no status line in {:?}", "y".repeat(80)));
        // Bytes that are not UTF-8 in the body are replaced, not a failure.
        let mut b = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        b.extend_from_slice(&[0xff, b'o', b'k']);
        assert!(matches!(
            parse_reply(&b, Some(15)),
            Reply::Status { code: 200, ref body, .. } if body == "\u{fffd}ok"
        ));
    }

    #[test]
    fn the_host_of_a_url() {
        assert_eq!(host_of("http://allowed.example/"), "allowed.example");
        assert_eq!(host_of("http://10.213.7.2:3128/x/y"), "10.213.7.2:3128");
        assert_eq!(host_of("http://h"), "h");
        assert_eq!(
            host_of("denied.example/path"),
            "denied.example",
            "no scheme"
        );
        assert_eq!(host_of(""), "");
    }
}
