//! A tunnel is what it says (issue 13, field report B31; issue 31): every `CONNECT` the access
//! rules allowed must carry TLS from both ends. The client's `ClientHello` must name the CONNECT
//! host (SNI, compared without regard to case and with a trailing dot removed: the external ACL
//! `sni_eq`), and the server must answer it with a TLS `ServerHello` before squid splices (a
//! blind tunnel). Squid's own `ssl_bump` does it without decrypting anything: it peeks at the
//! `ClientHello` (step 1), cuts another SNI (`terminate`), sends the client's hello to the
//! server and peeks at the server's answer (step 2), and splices only then (step 3). A server
//! that does not answer TLS (a line service, a plain HTTP server, a silent one) is never
//! spliced: it gets the client's first flight (the `ClientHello`, and TLS records sent in the
//! same write, at most squid's first read) and nothing after it; squid ends the client's side with its error inside TLS under a
//! certificate it mints with the run's own CA (`images/proxy/cyclix-proxy-start`: made when the
//! proxy starts, on its private `/tmp`, trusted by nothing). Bytes that are not TLS at all hit
//! `on_unsupported_protocol`, which closes the connection. Pure.
//!
//! Measured against squid 6.13 (`squid-openssl`, Debian trixie) with this configuration: a real
//! TLS client whose SNI is the CONNECT host gets its tunnel (`TCP_TUNNEL`, reason
//! `allowlisted`), upper-case SNI too; another SNI or none is closed at once (reason
//! `sni_mismatch`); an SSH banner after `200 Connection established` is closed at once
//! (`not_tls`); a `ClientHello` then plain text to a plain HTTP server or to a server that says
//! nothing gets squid's TLS error back and the server gets the `ClientHello` only
//! (`ERR_SECURE_CONNECT_FAIL`, recorded `server_not_tls`; a silent server after
//! `connect_timeout`). Squid 6.13 refuses a step-2 peek without the bump machinery (measured:
//! "could not create TLS server context ... null ssl ctx" with `generate-host-certificates=off`).

use std::fmt::Write as _;

use super::DenyReason;

/// The ACL that ends each `CONNECT` copy of a deny line; `deny_info` keys the 407 on it.
const REFUSED_CONNECT: &str = "r_connect_407";

/// The run's CA, made by the proxy image's entrypoint when the proxy starts
/// (`images/proxy/cyclix-proxy-start`): key and certificate in one file on the container's
/// private `/tmp`, readable by squid's user only. Squid mints with it the certificate of the
/// error it answers a tunnel with when the server did not answer TLS; nothing trusts it.
pub const RUN_CA: &str = "/tmp/cyclix-ca/ca.pem";

/// Where squid's certificate generator keeps what it minted (made by the same entrypoint).
pub const RUN_CA_CERTS: &str = "/tmp/cyclix-ca/certs";

/// Squid's certificate generator, shipped by Debian's `squid-openssl`: started only when
/// squid first mints (`startup=0`: a tunnel it cut after the server's answer), so a run whose
/// tunnels all pass does not pay its memory (about 7 MiB; the proxy's budget is 40 MiB).
pub const CERTGEN: &str = "/usr/lib/squid/security_file_certgen";

/// The external ACL helper shipped in the proxy image (`images/proxy/cyclix-sni-eq`): reads
/// `HOST SNI` per line, answers `OK` when both are the same non-empty text, else `ERR`.
pub const SNI_EQ_HELPER: &str = "/usr/local/libexec/cyclix-sni-eq";

/// The fixed argument of the `sni_ok` ACL: squid writes it as the last field of every lookup
/// line and the helper answers `OK` only when a line is exactly `HOST HOST cyclix-end`. Squid
/// does not escape a newline in `%ssl::>sni` (attack review of issue 13: the SNI
/// `allowed.example\n…` made the first half-line `HOST HOST`), so a split line cannot pass.
pub const SNI_EQ_END: &str = "cyclix-end";

/// The `sni_bad` ACL's regex (`ssl::server_name_regex`, squid.conf.documented): a server name
/// holding any byte outside a DNS name's `[-A-Za-z0-9.]`.
pub const SNI_BAD: &str = "[^-A-Za-z0-9.]";

/// The forward port: plain HTTP proxying and `CONNECT`, with every tunnel peeked at from both
/// ends; in report-only mode a plain port (see [`render_tunnel_rules`] for why).
pub(super) fn render_tunnel_port(out: &mut String, listen_port: u16, report_only: bool) {
    if report_only {
        let _ = writeln!(out, "http_port {listen_port}");
    } else {
        let _ = writeln!(
            out,
            "http_port {listen_port} ssl-bump tls-cert={RUN_CA} generate-host-certificates=on dynamic_cert_mem_cache_size=4MB\n\
             sslcrtd_program {CERTGEN} -s {RUN_CA_CERTS} -M 4MB\n\
             sslcrtd_children 1 startup=0 idle=1"
        );
    }
}

/// The ACLs of the tunnel rules (none in report-only mode).
pub(super) fn render_tunnel_acls(out: &mut String, report_only: bool) {
    if report_only {
        return;
    }
    out.push_str(
        "# Tunnels: the ClientHello's SNI must name the CONNECT host (ttl=0: asked every time), and\n\
         # the server must answer TLS before the tunnel is spliced.\n\
         acl step1 at_step SslBump1\n\
         acl step2 at_step SslBump2\n\
         acl step3 at_step SslBump3\n",
    );
    let _ = writeln!(
        out,
        "external_acl_type sni_eq ttl=0 negative_ttl=0 children-max=2 children-startup=1 %>rd %ssl::>sni {SNI_EQ_HELPER}\n\
         # The fixed last field: a line the SNI split (a newline in it) never ends with it.\n\
         acl sni_ok external sni_eq {SNI_EQ_END}\n\
         # An SNI with a byte no host name has (a newline splits the helper's line and puts its\n\
         # answers out of step: attack review 16) is cut before the helper sees it.\n\
         acl sni_bad ssl::server_name_regex {SNI_BAD}\n\
         # A plain-HTTP answer squid had to turn into HTTP/0.9 is not HTTP: withheld.\n\
         acl http09 rep_header X-Transformed-From -i ^HTTP/0\\.9\n\
         # A refused CONNECT is answered 407 at once (squid would bump it to deliver a 403).\n\
         acl {REFUSED_CONNECT} annotate_transaction refused=connect\n\
         deny_info 407:ERR_ACCESS_DENIED {REFUSED_CONNECT}"
    );
}

/// The tunnel rules: peek at the `ClientHello` (step 1); cut an SNI with a byte no host name
/// has, then one that does not name the CONNECT host; peek at the server's answer (step 2);
/// splice (step 3); close non-TLS bytes. Squid evaluates these only for a `CONNECT` that
/// `http_access` allowed. The server's certificate is not judged (`sslproxy_cert_error` allows
/// its errors for tunnels): a spliced tunnel is the client's TLS, and the client checks it; the
/// credential ports' peers are not tunnels and keep squid's checks.
///
/// Report-only mode renders none of it (a plain forward port, tunnels unchecked and not
/// logged as `would_deny:*`): on an `ssl-bump` port squid answers `200` to every `CONNECT` it
/// lets through before it resolves or connects anything, so the names report-only lets
/// through would get `200`-then-close instead of squid's own fast 503, and its probes (N5,
/// N10, N11: "answered by the proxy, never forwarded") could no longer tell the proxy's
/// answer from a forwarded one (measured: `CONNECT metadata.google.internal:80` got 200).
pub(super) fn render_tunnel_rules(out: &mut String, report_only: bool) {
    if report_only {
        out.push_str(
            "\n# REPORT-ONLY: tunnels are not peeked at (no ssl-bump): their content is unchecked.\n",
        );
        return;
    }
    out.push_str("\n# Tunnels: nothing is decrypted; peek at both hellos, then splice or cut.\n");
    let _ = writeln!(
        out,
        "ssl_bump peek step1\nssl_bump terminate sni_bad {sni}\nssl_bump peek step2 sni_ok\nssl_bump splice step3\nssl_bump terminate all {sni}\non_unsupported_protocol respond all {not_tls}\n\
         # A spliced tunnel is the client's TLS: the client judges the server's certificate.\n\
         sslproxy_cert_error allow connect_m\nsslproxy_cert_error deny all\n\
         # Plain HTTP to a service that is not HTTP (e.g. an SSH-like service on a port that\n\
         # `egress.http_ports` lists): squid would relay its bytes as HTTP/0.9; the answer is\n\
         # withheld (403; recorded as sent, its answer withheld).\n\
         http_reply_access deny http09 {not_http}\nhttp_reply_access allow all",
        sni = DenyReason::SniMismatch.acl(),
        not_tls = DenyReason::NotTls.acl(),
        not_http = DenyReason::NotHttp.acl(),
    );
}

/// Gives every `http_access deny` line a `CONNECT` copy just before it, ending in the ACL
/// whose `deny_info` answers 407, so a refused `CONNECT` gets its answer at once.
///
/// Why: on an `ssl-bump` port squid answers a `CONNECT` that `http_access` denied with
/// `200 Connection established`, then bumps the client to deliver the error inside TLS
/// (presenting the port's certificate) and waits for a `ClientHello`; a tool that sends none
/// hangs (measured on squid 6.13: `CONNECT denied.example:443` got 200, then nothing for
/// 3 s). The one denial squid never delays is a 407 ("Do not bump during authentication",
/// `ClientRequestContext::sslBumpAccessCheck`), so refused tunnels are answered 407 with
/// squid's `ERR_ACCESS_DENIED` page and `X-Squid-Error`, and no `Proxy-Authenticate`
/// (no authentication is configured; measured: curl and Python fail at once). The reason is
/// logged as before; plain HTTP denials stay 403. Report-only lines (`!all`) never match and
/// are not copied. Run last, over the whole configuration, so every deny line is covered,
/// whichever section rendered it.
pub(super) fn answer_refused_connects_at_once(conf: &str) -> String {
    let mut out = String::with_capacity(conf.len() + 1024);
    for line in conf.lines() {
        if let Some(conds) = line.strip_prefix("http_access deny ")
            && !conds.split_whitespace().any(|c| c == "!all")
        {
            let _ = writeln!(out, "http_access deny connect_m {conds} {REFUSED_CONNECT}");
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(report_only: bool) -> Vec<String> {
        let mut out = String::new();
        render_tunnel_acls(&mut out, report_only);
        render_tunnel_rules(&mut out, report_only);
        out.lines()
            .filter(|l| l.starts_with("ssl_bump") || l.starts_with("on_unsupported_protocol"))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn enforcing_peeks_splices_a_matching_sni_and_cuts_the_rest() {
        assert_eq!(
            rules(false),
            [
                "ssl_bump peek step1",
                "ssl_bump terminate sni_bad r_sni",
                "ssl_bump peek step2 sni_ok",
                "ssl_bump splice step3",
                "ssl_bump terminate all r_sni",
                "on_unsupported_protocol respond all r_not_tls",
            ]
        );
        let mut acls = String::new();
        render_tunnel_acls(&mut acls, false);
        assert!(acls.contains(
            "external_acl_type sni_eq ttl=0 negative_ttl=0 children-max=2 children-startup=1 %>rd %ssl::>sni /usr/local/libexec/cyclix-sni-eq\n"
        ));
        assert!(!acls.contains("would_deny"));
        assert!(acls.contains("deny_info 407:ERR_ACCESS_DENIED r_connect_407\n"));
    }

    #[test]
    fn report_only_renders_a_plain_port_and_no_tunnel_rules() {
        assert!(rules(true).is_empty());
        let mut port = String::new();
        render_tunnel_port(&mut port, 3128, true);
        assert_eq!(port, "http_port 3128\n");
        let mut acls = String::new();
        render_tunnel_acls(&mut acls, true);
        assert!(acls.is_empty());
    }

    #[test]
    fn every_deny_line_gets_a_connect_copy_answered_407() {
        let conf = "acl a src all\nhttp_access deny !agents r_client\nhttp_access deny x rw_x !all\nhttp_access allow a r_ok\nhttp_access deny all r_no_rule\n";
        assert_eq!(
            answer_refused_connects_at_once(conf),
            "acl a src all\n\
             http_access deny connect_m !agents r_client r_connect_407\n\
             http_access deny !agents r_client\n\
             http_access deny x rw_x !all\n\
             http_access allow a r_ok\n\
             http_access deny connect_m all r_no_rule r_connect_407\n\
             http_access deny all r_no_rule\n"
        );
    }

    /// The paths the configuration names are the ones the proxy image has and its entrypoint
    /// makes.
    #[test]
    fn the_image_ships_the_helper_and_its_entrypoint_makes_the_runs_ca() {
        let containerfile = include_str!("../../../images/proxy/Containerfile");
        assert!(containerfile.contains(&format!("COPY cyclix-sni-eq {SNI_EQ_HELPER}\n")));
        assert!(containerfile.contains("ENTRYPOINT [\"/usr/local/libexec/cyclix-proxy-start\"]"));
        let helper = include_str!("../../../images/proxy/cyclix-sni-eq");
        assert!(helper.starts_with("#!/bin/sh\n"));
        let start = include_str!("../../../images/proxy/cyclix-proxy-start");
        let dir = RUN_CA
            .strip_suffix("/ca.pem")
            .expect("RUN_CA is DIR/ca.pem");
        assert!(start.contains(&format!("dir={dir}\n")));
        assert!(start.contains("-keyout \"$dir/ca.pem\""));
        assert!(start.contains(&format!("{CERTGEN} -c -s \"$dir/certs\"")));
        assert_eq!(RUN_CA_CERTS, format!("{dir}/certs"));
    }
}
