//! Sockets (P19): no engine, bus or agent socket reachable.

use super::{Judged, judged};

/// What P19 saw.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SocketObs {
    /// Socket files found by the walk (outside `/proc` and `/sys`).
    pub found: Vec<String>,
    /// The walk found the probe's own socket (positive control).
    pub control_found: bool,
    /// The walk finished within its budget.
    pub complete: bool,
    /// Paths in `/proc/net/unix`.
    pub net_unix: Vec<String>,
    /// Socket-ish variables set in our environment (`SSH_AUTH_SOCK`, `DBUS_SESSION_BUS_ADDRESS`, ...).
    pub env: Vec<String>,
}

/// Names that mark a dangerous socket (engine sockets, the user and system bus, ssh agents).
pub const BAD_SOCKET_MARKS: &[&str] = &[
    "docker.sock",
    "podman.sock",
    "containerd.sock",
    "/bus",
    "system_bus_socket",
    "/systemd/",
    "/run/user/",
    "ssh-",
    "agent.",
    "crio.sock",
];

/// P19: no engine, bus or agent socket is reachable.
#[must_use]
pub fn p19(o: &SocketObs) -> Judged {
    let bad = |p: &str| BAD_SOCKET_MARKS.iter().any(|m| p.contains(m)) || p.ends_with("/bus");
    let hits: Vec<&String> = o
        .found
        .iter()
        .chain(o.net_unix.iter())
        .filter(|p| bad(p))
        .collect();
    let mut why = Vec::new();
    if !o.control_found {
        why.push(
            "positive control failed: the walk did not find the probe's own socket".to_string(),
        );
    }
    if !o.complete {
        why.push("the file walk did not finish within its budget".into());
    }
    if !hits.is_empty() {
        why.push(format!("dangerous sockets: {hits:?}"));
    }
    if !o.env.is_empty() {
        why.push(format!("socket variables in env: {:?}", o.env));
    }
    judged(
        "no docker/podman/containerd socket, no user or system bus, no SSH agent",
        format!(
            "{} sockets {:?}; /proc/net/unix {:?}",
            o.found.len(),
            o.found,
            o.net_unix
        ),
        why.is_empty(),
        why.join("; "),
    )
}
