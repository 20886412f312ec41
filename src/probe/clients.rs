//! The low-level clients the observations use: an attempt's result as an [`Attempt`], direct
//! TCP and UDP with a deadline (`NET_TIMEOUT`), HTTP/1.1 to the proxy ([`http`]), DNS
//! ([`dns`]) and rtnetlink ([`netlink`]). Effectful; the pure reply parsers are unit-tested.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use crate::probe::verdict::Attempt;

/// Deadline of one network attempt (below the probe's 2 s).
pub const NET_TIMEOUT: Duration = Duration::from_secs(1);

pub mod dns;
pub mod http;
pub mod netlink;
pub mod tunnel;

pub(crate) fn io_attempt<T>(r: std::io::Result<T>) -> Attempt {
    match r {
        Ok(_) => Attempt::Ok,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) =>
        {
            Attempt::Timeout
        }
        Err(e) => e
            .raw_os_error()
            .map_or_else(|| Attempt::Missing(e.to_string()), Attempt::Errno),
    }
}

#[allow(clippy::needless_pass_by_value)] // takes the call's result as returned
pub(crate) fn nix_attempt<T>(r: nix::Result<T>) -> Attempt {
    match r {
        Ok(_) => Attempt::Ok,
        Err(e) => Attempt::Errno(e as i32),
    }
}

pub(crate) fn tcp(addr: &str) -> Attempt {
    match addr.parse::<SocketAddr>() {
        Ok(a) => io_attempt(TcpStream::connect_timeout(&a, NET_TIMEOUT)),
        Err(e) => Attempt::Missing(format!("address {addr}: {e}")),
    }
}

pub(crate) fn udp(addr: &str) -> Attempt {
    let Ok(a) = addr.parse::<SocketAddr>() else {
        return Attempt::Missing(addr.into());
    };
    let bind = if a.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    match UdpSocket::bind(bind) {
        Ok(s) => io_attempt(s.connect(a).and_then(|()| s.send(b"probe"))),
        Err(e) => io_attempt::<()>(Err(e)),
    }
}
