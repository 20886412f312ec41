//! The egress proxy (N5, N8–N14, N16, N17): requests through the proxy with their positive
//! control, chosen for deny-all and report-only runs; the proxy variables.

use std::collections::BTreeMap;

use crate::probe::Context;
use crate::probe::clients::http::{connect, get, http};
use crate::probe::clients::tunnel::{SSH_BANNER, client_hello, tunnel};
use crate::probe::verdict::Judged;
use crate::probe::verdict::proxy as v;
use crate::probe::verdict::proxy::{Reply, Tunnel};

fn allowed_url(ctx: &Context) -> String {
    if ctx.allowed_port == 80 {
        format!("http://{}/", ctx.allowed_host)
    } else {
        format!("http://{}:{}/", ctx.allowed_host, ctx.allowed_port)
    }
}

/// A deny-all run (empty allowlist): no allowed host exists for positive controls.
fn deny_all(ctx: &Context) -> bool {
    ctx.allowed_host.is_empty()
}

fn control(ctx: &Context) -> Reply {
    if deny_all(ctx) {
        get(ctx, &format!("http://{}/", ctx.denied_host))
    } else {
        allowed(ctx, &ctx.allowed_host)
    }
}

/// A request the proxy must let through to `host` (a form of the allowed host) on the allowed
/// port: `GET http://host/` on a port that takes plain HTTP (`egress.http_ports`, default 80);
/// on any other port a `CONNECT host:port`, answered `200 Connection established` by the proxy
/// itself once its policy allows it (plain HTTP there is refused: issue 31).
fn allowed(ctx: &Context, host: &str) -> Reply {
    if ctx.takes_plain_http(ctx.allowed_port) {
        get(ctx, &format!("http://{host}/"))
    } else {
        connect(ctx, &format!("{host}:{}", ctx.allowed_port))
    }
}

fn denies(ctx: &Context, reqs: &[(String, Reply)]) -> Judged {
    if ctx.report_only {
        // Report-only (stated loudly in the run's record): name, port and IP-literal checks are
        // logged as `would_deny` instead of enforced; every request must still be ANSWERED by
        // the proxy at once (a status line, never a drop). The private-range and client checks
        // stay enforced: N5 and N11 keep the strict verdict.
        return v::report_only_answers(reqs);
    }
    enforced(ctx, reqs)
}

/// The strict verdict even in report-only runs (private and metadata targets stay denied).
fn strict_denies(ctx: &Context, reqs: &[(String, Reply)]) -> Judged {
    if ctx.report_only {
        // Names are not checked before resolution in report-only: an unresolvable metadata
        // name gets the proxy's own 503. Either way the proxy must not forward it.
        return v::proxy_not_forwarded(reqs);
    }
    enforced(ctx, reqs)
}

/// An enforcing run: every request denied, with the control of a deny-all run or of an
/// allowed host.
fn enforced(ctx: &Context, reqs: &[(String, Reply)]) -> Judged {
    if deny_all(ctx) {
        v::proxy_denies_all(reqs, &control(ctx))
    } else {
        v::proxy_denies(reqs, &control(ctx))
    }
}

/// N5.
#[must_use]
pub fn n5(ctx: &Context) -> Judged {
    let items: Vec<(String, Reply)> = [
        "169.254.169.254:80",
        "metadata.google.internal:80",
        "100.100.100.200:80",
    ]
    .iter()
    .map(|t| (format!("CONNECT {t}"), connect(ctx, t)))
    .collect();
    strict_denies(ctx, &items)
}

/// N8.
#[must_use]
pub fn n8(ctx: &Context) -> Judged {
    if deny_all(ctx) {
        let d = &ctx.denied_host;
        return v::n8_deny_all(
            &get(ctx, &format!("http://{d}/")),
            &connect(ctx, &format!("{d}:443")),
        );
    }
    let g = control(ctx);
    let target = format!("{}:{}", ctx.allowed_host, ctx.allowed_port);
    let c = connect(ctx, &target);
    v::n8(&g, &c, &target)
}

/// N9: the denied host (on an allowed port) and two ports of the allowed host that the spec
/// does not allow (derived from `egress.ports`, so `ports: [80, 8080]` is tested on others).
#[must_use]
pub fn n9(ctx: &Context) -> Judged {
    // A deny-all run has no allowed port: try the usual TLS port on the denied host.
    let p = if deny_all(ctx) { 443 } else { ctx.allowed_port };
    let mut items = vec![
        (
            format!("CONNECT {}:{p}", ctx.denied_host),
            connect(ctx, &format!("{}:{p}", ctx.denied_host)),
        ),
        (
            format!("GET http://{}/", ctx.denied_host),
            get(ctx, &format!("http://{}/", ctx.denied_host)),
        ),
    ];
    if !deny_all(ctx) {
        for port in ctx.denied_ports(2) {
            items.push((
                format!("CONNECT {}:{port}", ctx.allowed_host),
                connect(ctx, &format!("{}:{port}", ctx.allowed_host)),
            ));
        }
    }
    denies(ctx, &items)
}

/// N10.
#[must_use]
pub fn n10(ctx: &Context) -> Judged {
    let items: Vec<(String, Reply)> = [
        "1.1.1.1:443",
        "[::ffff:10.0.0.1]:443",
        "[64:ff9b::a00:1]:443",
        "[2002:a00:1::1]:443",
        "127.1:443",
        "0x7f000001:443",
        "2130706433:443",
        "0177.0.0.1:443",
    ]
    .iter()
    // Report-only forwards a public IP literal by design (logged as would_deny); the encodings
    // of private and loopback addresses must still never be forwarded.
    .filter(|t| !(ctx.report_only && **t == "1.1.1.1:443"))
    .map(|t| (format!("CONNECT {t}"), connect(ctx, t)))
    .collect();
    if ctx.report_only {
        strict_denies(ctx, &items)
    } else {
        denies(ctx, &items)
    }
}

/// N11.
#[must_use]
pub fn n11(ctx: &Context) -> Judged {
    let mut items = Vec::new();
    if let Some((h, p)) = ctx.proxy_addr() {
        items.push((
            format!("CONNECT {h}:{p}"),
            connect(ctx, &format!("{h}:{p}")),
        ));
        items.push((
            format!("GET http://{h}:{p}/"),
            get(ctx, &format!("http://{h}:{p}/")),
        ));
    }
    for r in &ctx.rebind_hosts {
        items.push((
            format!("GET http://{r}/"),
            get(ctx, &format!("http://{r}/")),
        ));
    }
    strict_denies(ctx, &items)
}

/// N12: name-matching edge cases against an exact allowlist entry: subdomains, look-alike
/// suffixes and prefixes are denied; case and a trailing dot are the same name (allowed).
#[must_use]
pub fn n12(ctx: &Context) -> Judged {
    if deny_all(ctx) {
        // No allowlist entry to mis-match: every look-alike of the denied host is denied.
        let d = &ctx.denied_host;
        let items: Vec<(String, Reply)> = [
            format!("sub.{d}"),
            d.to_ascii_uppercase(),
            format!("{d}."),
            format!("x{d}"),
        ]
        .iter()
        .map(|h| {
            (
                format!("GET http://{h}/"),
                get(ctx, &format!("http://{h}/")),
            )
        })
        .collect();
        return denies(ctx, &items);
    }
    let a = &ctx.allowed_host;
    let p = ctx.allowed_port;
    let port = if p == 80 {
        String::new()
    } else {
        format!(":{p}")
    };
    let lookalikes = [
        format!("sub.{a}"),
        format!("evil-{a}"),
        format!("{a}.evil.net"),
        format!("x{a}"),
    ];
    // Report-only forwards look-alikes (each may cost the proxy's 1 s DNS budget): one is
    // enough to show the proxy answers; the matching itself is unit-tested in render::proxy.
    let n = if ctx.report_only { 1 } else { lookalikes.len() };
    let deny: Vec<(String, Reply)> = lookalikes[..n]
        .iter()
        .map(|h| {
            (
                format!("GET http://{h}{port}/"),
                get(ctx, &format!("http://{h}{port}/")),
            )
        })
        .collect();
    let mut j = denies(ctx, &deny);
    let upper = allowed(ctx, &a.to_ascii_uppercase());
    let dotted = allowed(ctx, &format!("{a}."));
    j.expect
        .push_str("; UPPER-CASE and trailing-dot forms of the allowed host: 200");
    j.got = format!("{} upper={} dot={}", j.got, upper.text(), dotted.text());
    for (what, r) in [("upper-case", &upper), ("trailing dot", &dotted)] {
        if !matches!(r, Reply::Status { code: 200, .. }) {
            j.pass = false;
            j.detail = format!(
                "{} {what} form of the allowed host gave {}",
                j.detail,
                r.text()
            )
            .trim()
            .to_string();
        }
    }
    j
}

/// N13.
#[must_use]
pub fn n13(ctx: &Context) -> Judged {
    let url = if deny_all(ctx) {
        format!("http://{}/", ctx.denied_host)
    } else {
        allowed_url(ctx)
    };
    let r = http(ctx, &format!("GET {url}"), "10.0.0.1");
    // A deny-all run has no allowlisted host: the request goes to the denied one.
    let target = if deny_all(ctx) {
        String::new()
    } else {
        format!("{}:{}", ctx.allowed_host, ctx.allowed_port)
    };
    v::n13(&r, &ctx.allowed_marker, &target)
}

/// N14.
#[must_use]
pub fn n14(ctx: &Context) -> Judged {
    let redirect = ctx.redirect_url.as_ref().map(|u| get(ctx, u));
    let target = match &redirect {
        Some(Reply::Status {
            location: Some(l), ..
        }) => l.clone(),
        _ => format!("http://{}/", ctx.denied_host),
    };
    let follow_up = get(ctx, &target);
    if ctx.report_only {
        return v::report_only_answers(&[(format!("GET {target}"), follow_up)]);
    }
    v::n14(redirect.as_ref(), &follow_up)
}

/// N16.
#[must_use]
pub fn n16(ctx: &Context) -> Judged {
    let env: BTreeMap<String, String> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "NO_PROXY",
        "no_proxy",
    ]
    .iter()
    .filter_map(|k| Some(((*k).to_string(), std::env::var(k).ok()?)))
    .collect();
    v::n16(&env, ctx)
}

/// N17: through an allowed `CONNECT`, an SSH banner and a `ClientHello` naming another host are
/// cut; the honest `ClientHello` is the positive control when the port is 443. The three tunnels
/// run at once so the probe stays well inside its deadline.
#[must_use]
pub fn n17(ctx: &Context) -> Judged {
    if deny_all(ctx) {
        return v::n17_deny_all(&connect(ctx, &format!("{}:443", ctx.denied_host)));
    }
    let port = if ctx.allowed_ports().contains(&443) {
        443
    } else {
        ctx.allowed_port
    };
    let target = format!("{}:{port}", ctx.allowed_host);
    let (ssh, other, control) = std::thread::scope(|s| {
        let ssh = s.spawn(|| tunnel(ctx, &target, SSH_BANNER));
        let other = s.spawn(|| tunnel(ctx, &target, &client_hello(&ctx.denied_host)));
        let control = (port == 443)
            .then(|| s.spawn(|| tunnel(ctx, &target, &client_hello(&ctx.allowed_host))));
        let join = |h: std::thread::ScopedJoinHandle<'_, Tunnel>| {
            h.join().unwrap_or(Tunnel::NotEstablished(Reply::Failed(
                crate::probe::verdict::Attempt::Missing("the tunnel thread panicked".into()),
            )))
        };
        (join(ssh), join(other), control.map(join))
    });
    v::n17(&ssh, &other, control.as_ref(), ctx.report_only)
}
