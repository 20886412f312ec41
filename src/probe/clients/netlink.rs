//! rtnetlink requests (a route, a link change) and the kernel's ACK or error.

use nix::sys::socket::{AddressFamily, SockFlag, SockProtocol, SockType, socket};

use crate::probe::verdict::Attempt;

/// `rtmsg` for `ip route add 192.0.2.0/24 dev lo`: family, `dst_len`, `src_len`, tos, table,
/// protocol, scope, type, flags.
pub(crate) fn route_msg() -> Vec<u8> {
    let mut m = vec![
        u8::try_from(libc::AF_INET).unwrap_or(2),
        24,
        0,
        0,
        libc::RT_TABLE_MAIN,
        libc::RTPROT_BOOT,
        libc::RT_SCOPE_LINK,
        libc::RTN_UNICAST,
    ];
    m.extend_from_slice(&0u32.to_ne_bytes());
    // RTA_DST 192.0.2.0
    m.extend_from_slice(&8u16.to_ne_bytes());
    m.extend_from_slice(&1u16.to_ne_bytes());
    m.extend_from_slice(&[192, 0, 2, 0]);
    // RTA_OIF 1 (lo)
    m.extend_from_slice(&8u16.to_ne_bytes());
    m.extend_from_slice(&4u16.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m
}

/// `ifinfomsg` for `ip link set IFACE down` on the first non-lo interface.
pub(crate) fn link_msg() -> Vec<u8> {
    let idx = nix::net::if_::if_nameindex()
        .ok()
        .and_then(|l| {
            l.iter()
                .find(|i| i.name().to_bytes() != b"lo")
                .map(nix::net::if_::Interface::index)
        })
        .unwrap_or(2);
    let mut m = vec![u8::try_from(libc::AF_UNSPEC).unwrap_or(0), 0];
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(&i32::try_from(idx).unwrap_or(2).to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // flags: not IFF_UP
    m.extend_from_slice(&1u32.to_ne_bytes()); // change: IFF_UP
    m
}

/// Sends one rtnetlink request (`NLM_F_REQUEST|NLM_F_ACK|NLM_F_CREATE|NLM_F_EXCL`) and returns
/// the kernel's answer: `Ok` for an ACK, `Errno` for an error message.
pub(crate) fn rtnetlink(msg_type: u16, payload: &[u8]) -> Attempt {
    use nix::sys::socket::{MsgFlags, NetlinkAddr, recv, sendto};
    use std::os::fd::AsRawFd as _;
    let fd = match socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    ) {
        Ok(fd) => fd,
        Err(e) => return Attempt::Errno(e as i32),
    };
    let m = request(msg_type, payload);
    if let Err(e) = sendto(
        fd.as_raw_fd(),
        &m,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    ) {
        return Attempt::Errno(e as i32);
    }
    let _ = nix::sys::socket::setsockopt(
        &fd,
        nix::sys::socket::sockopt::ReceiveTimeout,
        &nix::sys::time::TimeVal::new(1, 0),
    );
    let mut buf = [0u8; 4096];
    match recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty()) {
        Ok(n) => parse_ack(&buf[..n]),
        Err(nix::errno::Errno::EAGAIN) => Attempt::Timeout,
        Err(e) => Attempt::Errno(e as i32),
    }
}

/// One rtnetlink message: the `nlmsghdr` (length, `msg_type`, flags
/// `NLM_F_REQUEST|NLM_F_ACK|NLM_F_CREATE|NLM_F_EXCL`, sequence 1, port 0) and `payload`.
#[must_use]
pub fn request(msg_type: u16, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(16 + payload.len()).unwrap_or(0);
    let mut m = Vec::new();
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&msg_type.to_ne_bytes());
    m.extend_from_slice(&(0x1u16 | 0x4 | 0x200 | 0x400).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(payload);
    m
}

/// The kernel's answer to a request: an `NLMSG_ERROR` message (type 2) with error 0 is an ACK
/// ([`Attempt::Ok`]), with `-errno` an [`Attempt::Errno`]; anything else (shorter than the
/// header plus the error field, another type) is [`Attempt::Missing`].
#[must_use]
pub fn parse_ack(answer: &[u8]) -> Attempt {
    match answer {
        [
            _,
            _,
            _,
            _,
            t0,
            t1,
            _,
            _,
            _,
            _,
            _,
            _,
            _,
            _,
            _,
            _,
            e0,
            e1,
            e2,
            e3,
            ..,
        ] if u16::from_ne_bytes([*t0, *t1]) == 2 => {
            let err = i32::from_ne_bytes([*e0, *e1, *e2, *e3]);
            if err == 0 {
                Attempt::Ok
            } else {
                Attempt::Errno(err.wrapping_neg())
            }
        }
        _ => Attempt::Missing("unexpected netlink answer".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer: `nlmsghdr` of type `typ`, then `err`, then the echoed request header.
    fn answer(typ: u16, err: i32) -> Vec<u8> {
        let mut a = 36u32.to_ne_bytes().to_vec();
        a.extend_from_slice(&typ.to_ne_bytes());
        a.extend_from_slice(&[0; 10]);
        a.extend_from_slice(&err.to_ne_bytes());
        a.extend_from_slice(&[0; 16]);
        a
    }

    #[test]
    fn acks_and_errors() {
        assert_eq!(parse_ack(&answer(2, 0)), Attempt::Ok);
        assert_eq!(
            parse_ack(&answer(2, -libc::EPERM)),
            Attempt::Errno(libc::EPERM)
        );
        assert_eq!(
            parse_ack(&answer(2, -libc::EEXIST)[..20]),
            Attempt::Errno(libc::EEXIST)
        );
        assert_eq!(
            parse_ack(&answer(2, i32::MIN)),
            Attempt::Errno(i32::MIN),
            "no overflow"
        );
    }

    #[test]
    fn anything_else_is_unexpected() {
        let unexpected = Attempt::Missing("unexpected netlink answer".into());
        assert_eq!(parse_ack(&answer(24, 0)), unexpected, "not NLMSG_ERROR");
        assert_eq!(parse_ack(&answer(2, 0)[..19]), unexpected, "too short");
        assert_eq!(parse_ack(&[]), unexpected);
    }

    #[test]
    fn the_request_header_and_the_route_message() {
        let r = route_msg();
        assert_eq!(r.len(), 12 + 8 + 8, "rtmsg, RTA_DST, RTA_OIF");
        assert_eq!(r[..2], [2, 24], "AF_INET, /24");
        assert_eq!(r[16..20], [192, 0, 2, 0]);
        let m = request(24, &r);
        assert_eq!(m.len(), 16 + r.len());
        assert_eq!(m[..4], u32::try_from(m.len()).expect("small").to_ne_bytes());
        assert_eq!(m[4..6], 24u16.to_ne_bytes());
        assert_eq!(m[6..8], 0x605u16.to_ne_bytes(), "REQUEST|ACK|EXCL|CREATE");
        assert_eq!(m[8..12], 1u32.to_ne_bytes(), "sequence 1");
        assert_eq!(m[16..], r[..]);
        assert_eq!(request(16, &[]).len(), 16);
    }
}
