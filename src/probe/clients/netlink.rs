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
    let len = u32::try_from(16 + payload.len()).unwrap_or(0);
    let mut m = Vec::new();
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&msg_type.to_ne_bytes());
    m.extend_from_slice(&(0x1u16 | 0x4 | 0x200 | 0x400).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(payload);
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
        Ok(n) if n >= 20 && u16::from_ne_bytes([buf[4], buf[5]]) == 2 => {
            let err = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
            if err == 0 {
                Attempt::Ok
            } else {
                Attempt::Errno(-err)
            }
        }
        Ok(_) => Attempt::Missing("unexpected netlink answer".into()),
        Err(nix::errno::Errno::EAGAIN) => Attempt::Timeout,
        Err(e) => Attempt::Errno(e as i32),
    }
}
