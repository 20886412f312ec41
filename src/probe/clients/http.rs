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
    let text = String::from_utf8_lossy(&buf).into_owned();
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

pub(crate) fn get(ctx: &Context, url: &str) -> Reply {
    let host = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or("")
        .to_string();
    http(ctx, &format!("GET {url}"), &host)
}

pub(crate) fn connect(ctx: &Context, target: &str) -> Reply {
    http(ctx, &format!("CONNECT {target}"), target)
}
