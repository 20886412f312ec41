//! The egress proxy's configuration (`squid.conf` for squid 6.13) and its decision log.
//!
//! Owns: turning a validated [`Egress`] policy plus the run's agent subnet into the complete
//! squid configuration the proxy container runs with (`squid -N -f /etc/cyclix/squid.conf`), the
//! decision reasons written into squid's JSON-lines access log, and parsing one such log line
//! back ([`parse_decision`]). Pure: no file system, no environment, no processes.
//!
//! Every directive and its order comes from the measurements in
//! `shared/research/proxy-facts.md` (squid 6.13-2+deb13u4, Debian trixie) and was re-checked
//! with `squid -k parse` and live requests against squid 6.13. The rules that must hold:
//! - `dstdomain -n`: without `-n` squid reverse-resolves IP-literal URLs and a PTR record can
//!   make `http://203.0.113.10/` match an allowlisted name (measured: 200, "allowlisted").
//! - The name checks come before the `dst` check, so a denied name never costs a DNS lookup
//!   (measured: the wrong order made every denied name wait 30 s for DNS).
//! - `pid_filename none`, `pinger_enable off`, stdio logs: squid runs on a read-only root.
//! - `shutdown_lifetime 1 seconds`: `podman stop` takes about 3 s instead of 10 s + SIGKILL.
//!
//! Squid never follows redirects: a 3xx from an allowed origin is passed to the client, and the
//! client's follow-up request to the `Location` host is a new request, checked on its own
//! (security case N14). Nothing here needs to be configured for that.
//!
//! Other behaviour measured against squid 6.13 with the rendered configuration:
//! - Host smuggling (security case N13): a plain request for `http://allowed.example/` with
//!   `Host: 10.78.0.1` reaches the origin with `Host: allowed.example`; squid decides on the
//!   URI and rewrites Host from it.
//! - An allowlisted name that does not resolve gets 503 after `dns_timeout` (5.0 s), logged
//!   with reason `allowlisted` (the policy allowed it; the status tells the failure).
//! - Squid adds `Cache-Control: max-age=259200` to forwarded plain-HTTP requests.
//!
//! Tunnels (issue 13, field report B31, probe N17; issue 31): an allowed `CONNECT` must carry a
//! TLS `ClientHello` whose SNI names the CONNECT host (case and a trailing dot aside), and the
//! server must answer it with TLS before the tunnel is spliced; another SNI (domain fronting),
//! no SNI, bytes that are not TLS (SSH over port 443), or a server that does not answer TLS (a
//! line service or a plain HTTP server behind an allowed port) are cut, logged `sni_mismatch`
//! / `not_tls` / `server_not_tls`, and the server gets at most the `ClientHello`. Squid peeks
//! at both hellos (`ssl_bump peek` at steps 1 and 2, then `splice` or `terminate`): nothing is
//! decrypted; the run's own CA (made when the proxy starts, trusted by nothing) only signs the
//! certificate of squid's error answer (module `tunnel`). Because the forward port is then an
//! `ssl-bump` port, a refused `CONNECT` is answered 407 (squid would otherwise answer 200 and
//! bump it to deliver the 403 inside TLS). Report-only mode keeps a plain forward port and does
//! not check tunnels (see `tunnel::render_tunnel_rules`).
//! Still not covered (accepted, documented risk): what flows inside a spliced tunnel after
//! both hellos is encrypted and stays unseen, so an HTTP `Host` inside it that names another
//! site of the same front (CDN domain fronting with an honest SNI), and a server on the allowed
//! name that speaks TLS and then something else, are the allowed server's business; only
//! decrypting would see them, which cyclix does not do. The mitigation is the allowlist:
//! narrow names of the services themselves, never a CDN's shared front.

pub mod credentials;
mod decision;
mod lines;
mod squid;
mod tunnel;

pub use decision::{
    Decision, DenyReason, Outcome, ProxyDecision, REASON_ALLOWLISTED, REASON_CREDENTIAL,
    WOULD_DENY_PREFIX, parse_decision, settle, settled_reason,
};
pub use squid::squid_conf;
pub use tunnel::{RUN_CA, SNI_EQ_HELPER};

use crate::spec::Egress;

/// What the proxy configuration is rendered from.
#[derive(Debug, Clone, Copy)]
pub struct ProxyPlan<'a> {
    /// The run's egress policy (validated: hosts lowercase punycode, ports 1–65535).
    pub egress: &'a Egress,
    /// The run's internal network in CIDR form (e.g. `10.89.7.0/24`); the only clients the proxy
    /// serves (`acl agents src`). Squid listens on every interface, the egress network too, so
    /// this ACL is what keeps other clients out. A value with characters outside
    /// `[0-9a-fA-F.:/]` is not rendered: every client is then refused (fail closed).
    pub agent_subnet: &'a str,
    /// The TCP port squid listens on (`http_port`), normally 3128.
    pub listen_port: u16,
    /// `agent.credentials`: each gets a reverse-proxy port ([`credentials`]).
    pub credentials: &'a [crate::spec::Credential],
    /// The run's placeholder of each credential, in the same order (`credentials::placeholder`).
    pub placeholders: &'a [String],
    /// How many `egress.ca_certs` files are mounted at `credentials::ca_path(0..N)`.
    pub ca_files: usize,
    /// The run's access-log key ([`crate::render::RunContext::log_key`], validated hex), the
    /// first field of every decision line.
    pub log_key: &'a str,
}

/// Destination ranges the proxy never connects to, in any mode (`acl to_private dst`).
///
/// `dst` is checked after name resolution: it matches when *any* address of the name is in a
/// range, and squid then connects with that same resolved address, so an allowlisted name that
/// resolves to a private address is refused (DNS rebinding; security cases N5, N11).
///
/// Each entry was accepted by `squid -k parse` (6.13) without a warning. Squid keeps IPv4
/// addresses as v4-mapped IPv6 internally, so the IPv4 entries also cover `::ffff:a.b.c.d`; the
/// v4-mapped prefix `::ffff:0:0/96` itself must NOT be listed: squid reads it as `0.0.0.0/0`
/// and it would match every IPv4 destination (measured: "(B) '0.0.0.0/8' is a subnetwork of
/// (A) '0.0.0.0/0'").
pub const PRIVATE_RANGES: &[&str] = &[
    // IPv4: "this network", RFC 1918, CGNAT (also Alibaba's metadata 100.100.100.200),
    // loopback, link-local (cloud metadata 169.254.169.254), IETF protocol assignments,
    // benchmarking, multicast, reserved and broadcast.
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
    // IPv6: unspecified, loopback and the deprecated IPv4-compatible block (::a.b.c.d) in one,
    // NAT64 (well-known and local-use), discard, Teredo, 6to4, unique-local (also
    // fd00:ec2::254), site-local, link-local, multicast.
    "::/96",
    "64:ff9b::/96",
    "64:ff9b:1::/48",
    "100::/64",
    "2001::/32",
    "2002::/16",
    "fc00::/7",
    "fec0::/10",
    "fe80::/10",
    "ff00::/8",
];
