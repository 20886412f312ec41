//! Attacks on the proxy's tunnel and plain-HTTP rules (issues 13 and 31), by a script agent
//! playing the attacker through the run's own proxy (`allowed.example`, ports 80, 443 and
//! 2525). Each test has its positive control: in the same run, or in a run whose proxy is
//! weakened to the rule that was there before.
//!
//! - A tunnel was judged by its first client flight only: `CONNECT allowed.example:2525`, a
//!   genuine `ClientHello` naming `allowed.example`, then plain text reached the junk-tolerant
//!   line service there (the testbed's `allowed.example:2525`), both ways. Now squid splices
//!   only after the server answered TLS (`ssl_bump peek` at step 2): the service gets the
//!   `ClientHello` and nothing after it, the agent gets nothing of the service's, and the record
//!   says `server_not_tls`. Control: the same run with squid splicing at step 2 (its rule
//!   before issue 31) puts the text into the service's log and its answers into the agent's
//!   hands. The same against the plain HTTP server on `allowed.example:80`.
//! - Plain HTTP to a port that does not speak HTTP (`POST http://allowed.example:2525/`) put
//!   its body into the service and the summary counted it denied. Now plain HTTP goes only to
//!   `egress.http_ports` (default 80): refused before a byte leaves (`port_not_http`, the
//!   service's log has none of it). Control: plain HTTP to port 80 works in the same run.
//! - The SNI helper compared byte for byte: a valid upper-case SNI was cut. Now case and one
//!   trailing dot do not matter; another name is still cut, and so is an SNI with a newline
//!   (the helper read one line per lookup: issue 13's attack review). Control: the exact SNI is
//!   spliced.
//!
//! Whether a tunnel was spliced is told by the certificate that came back: the testbed's
//! servers' (issuer "cyclix testbed CA", sent in clear under TLS 1.2), squid's own error answer
//! (the run's CA, "cyclix egress proxy"), or nothing (cut).

use std::sync::OnceLock;

use crate::common::run::{prepared, record, run_with_proxy_dropin, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// The agent: each attack read until the other side's own end (the proxy's close or reset, the
/// server's answer), capped at 120 s; a read that hits the cap is reported as a timeout, never
/// taken for a cut. Results in `attack.json` (committed). `marker` is random per run: the line
/// service's log is searched for it.
const AGENT: &str = r#"import json, os, socket, ssl, struct, time
proxy = os.environ["HTTPS_PROXY"].removeprefix("http://").rstrip("/")
PH, PP = proxy.rsplit(":", 1)[0], int(proxy.rsplit(":", 1)[1])
marker = "EXFIL-" + os.urandom(8).hex()

def genuine_hello(name):
    # A real ClientHello, as Python's TLS stack writes it (the handshake is never finished).
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()

def hello(sni):
    # A TLS 1.2 ClientHello naming `sni` byte for byte (any case, a dot, a newline).
    names = b"\x00" + struct.pack(">H", len(sni)) + sni
    sn = struct.pack(">H", len(names)) + names
    ext = b"\x00\x00" + struct.pack(">H", len(sn)) + sn
    ext += b"\x00\x0a\x00\x06\x00\x04\x00\x1d\x00\x17" + b"\x00\x0d\x00\x08\x00\x06\x04\x03\x08\x04\x04\x01"
    ext += b"\xff\x01\x00\x01\x00"
    cs = b"\xc0\x2f\xc0\x2b\xc0\x30\x00\x9c\x00\x2f"
    body = b"\x03\x03" + os.urandom(32) + b"\x00" + struct.pack(">H", len(cs)) + cs + b"\x01\x00" + struct.pack(">H", len(ext)) + ext
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs

def drain(s):
    # Until the other side closes, 8 KiB, the line service's answer to PING (a tunnel it
    # answers stays open), or the testbed CA's name in a server's certificate (a spliced TLS
    # server waits for the client's next flight). With how it ended.
    out = b""
    try:
        while len(out) < 8192 and b"+PONG" not in out and b"cyclix testbed CA" not in out:
            b = s.recv(4096)
            if not b:
                return out, "closed"
            out += b
    except socket.timeout:
        return out, "timeout"
    except OSError as e:
        return out, type(e).__name__
    return out, "answered"

def tunnel(target, first, then=b""):
    s = socket.create_connection((PH, PP), timeout=120)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = s.recv(1)
        if not b:
            break
        head += b
    s.sendall(first)
    early = b""
    if then:
        # The ClientHello alone in its segment: squid peeks at it first. What came back before
        # the text is read now: a server that answers and closes (busybox httpd's 400) would
        # reset the connection when the text arrives, and its answer would be lost unread.
        # Something always comes back, or the tunnel ends: both servers answer the hello (it
        # has newline bytes: the line service's "-ERR", httpd's 400), and squid splices that
        # answer, or ends the client's side, or gives up on a silent server (connect_timeout,
        # 10 s). So the text goes after the first answer or the end (120 s cap).
        try:
            early = s.recv(4096)
        except OSError:
            pass
        try:
            s.sendall(then)
        except OSError:
            pass
    got, end = drain(s)
    s.close()
    return early + got, end

def who(r):
    got, end = r
    if b"cyclix testbed CA" in got:
        return "spliced"
    if b"cyclix egress proxy" in got:
        return "proxy"
    if got:
        return "other"
    # Nothing came back: a cut is the proxy ending the tunnel, not the agent's cap.
    return "silent until the 120 s cap" if end == "timeout" else "cut"

def plain(req):
    s = socket.create_connection((PH, PP), timeout=120)
    s.sendall(req)
    got, _ = drain(s)
    s.close()
    return got.decode("latin-1")

A = b"allowed.example"
out = {"marker": marker}
# Until the proxy closes: a server that stays silent after the hello (no newline in it) keeps
# squid waiting for its answer until connect_timeout (10 s), and the tunnel's line is logged
# when squid gives up, which must be before the run reads the proxy's log.
line, out["line_end"] = tunnel("allowed.example:2525", genuine_hello("allowed.example"), f"\r\nPING\r\n{marker}-line\r\n".encode())
out["line"] = line.decode("latin-1")[:300]
# Judged on everything that came back (the text above is cut for the report: a ClientHello
# with many newline bytes gets as many "-ERR" lines before the "+PONG").
out["line_pong"] = b"+PONG" in line
out["line_answered"] = b"+PONG" in line or b"-ERR" in line
out["line_first"] = line[:1].hex()
http, out["http_end"] = tunnel("allowed.example:80", genuine_hello("allowed.example"), f"GET /{marker}-http HTTP/1.0\r\nHost: allowed.example\r\n\r\n".encode())
out["http"] = http.decode("latin-1")[:300]
out["http_answered"] = b"HTTP/1." in http
out["http_first"] = http[:1].hex()
body = f"PING\r\n{marker}-post\r\n"
out["post"] = plain(f"POST http://allowed.example:2525/ HTTP/1.1\r\nHost: allowed.example:2525\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}".encode())[:600]
out["http_ctl"] = plain(b"GET http://allowed.example/ HTTP/1.1\r\nHost: allowed.example\r\nConnection: close\r\n\r\n")[:600]
out["sni_eq"] = who(tunnel("allowed.example:443", hello(A)))
out["sni_upper"] = who(tunnel("allowed.example:443", hello(b"ALLOWED.Example")))
out["sni_dot"] = who(tunnel("allowed.example:443", hello(A + b".")))
out["sni_other"] = who(tunnel("allowed.example:443", hello(b"elsewhere.example")))
out["sni_nl"] = who(tunnel("allowed.example:443", hello(A + b"\nelsewhere.example")))
json.dump(out, open("attack.json", "w"))
"#;

/// The egress of both runs: the line service's port besides 80 and 443; plain HTTP to 80
/// only (the default, written out).
const EGRESS: &str =
    "egress:\n  allow: [allowed.example]\n  ports: [80, 443, 2525]\n  http_ports: [80]";

/// One run's outcome: the agent's results, the record, the proxy's journal (every priority:
/// squid's cache log too) and the line service's log lines that name the run's marker.
struct Run {
    results: serde_json::Value,
    record: serde_json::Value,
    proxy: String,
    line_log: String,
}

fn read_run(tb: &Testbed, name: &str, rec: serde_json::Value) -> Run {
    let branch = rec["branch"]
        .as_str()
        .unwrap_or_else(|| panic!("the agent ran: {rec:#}"));
    let json = expect_success(
        &tb.user_sh(&format!("cd ~/src/{name} && git show {branch}:attack.json")),
        "read the agent's results",
    );
    let results: serde_json::Value = serde_json::from_str(&json).expect("attack.json");
    let proxy = expect_success(
        &tb.user_sh(&format!(
            "journalctl --user -t cyclix-{}-proxy -o cat --no-pager",
            rec["run_id"].as_str().expect("run id")
        )),
        "the proxy's journal",
    );
    let marker = results["marker"].as_str().expect("marker").to_owned();
    let line_log = expect_success(
        &tb.root_sh(&format!(
            "grep -F '{marker}' /run/testbed-line/received.jsonl || true"
        )),
        "the line service's log",
    );
    Run {
        results,
        record: rec,
        proxy,
        line_log,
    }
}

/// Writes tenant `name`: the attacking agent, [`EGRESS`], in tier `tier`.
fn attacker(tb: &Testbed, name: &str, tier: &str) {
    Tenant::new(name)
        .agent_cmd(
            r#"[sh, -c, "python3 attack.py && git add attack.json && git commit -qm attack"]"#,
        )
        .extra_yaml(EGRESS)
        .tier(tier)
        .file("attack.py", AGENT)
        .write(tb);
}

/// The run with the proxy as cyclix renders it, shared by the tests below.
fn guarded() -> &'static Run {
    static R: OnceLock<Run> = OnceLock::new();
    R.get_or_init(|| {
        let _shared = crate::common::testbed::shared();
        let tb = prepared();
        let name = "e2e-tunnel-attacks";
        attacker(tb, name, "container");
        let out = start(tb, name);
        let rec = record(tb, name);
        assert!(rec["branch"].is_string(), "{rec:#}\n{out:?}");
        read_run(tb, name, rec)
    })
}

/// The control: the same agent, the proxy splicing after the client's hello alone (the rule
/// before issue 31), as an attacker with the Quadlet directory could make it with a drop-in.
fn weakened() -> &'static Run {
    static R: OnceLock<Run> = OnceLock::new();
    R.get_or_init(|| {
        let _shared = crate::common::testbed::shared();
        let tb = prepared();
        let name = "e2e-tunnel-weak";
        let id = "e2e-tunnel-weak-1";
        attacker(tb, name, "container");
        let out = run_with_proxy_dropin(tb, name, id, WEAKEN);
        let text = expect_success(
            &tb.user_sh(&format!(
                "cat ~/.local/state/cyclix/runs/{name}/{id}.json 2>/dev/null || cat ~/.local/state/cyclix/runs/{name}/latest.json"
            )),
            "read the weakened run's record",
        );
        let rec: serde_json::Value = serde_json::from_str(&text).expect("record");
        assert!(rec["branch"].is_string(), "{rec:#}\n{out:?}");
        read_run(tb, name, rec)
    })
}

/// The proxy drop-in of the controls: squid splices after the client's hello alone.
const WEAKEN: &str = "[Container]\nEntrypoint=/bin/sh\nExec=-c \"sed -e 's/^ssl_bump peek step2 sni_ok$/ssl_bump splice sni_ok/' -e '/^ssl_bump splice step3$/d' /etc/cyclix/squid.conf > /tmp/weak.conf && grep -q '^ssl_bump splice sni_ok$' /tmp/weak.conf && exec /usr/local/libexec/cyclix-proxy-start /tmp/weak.conf\"";

fn s<'a>(r: &'a serde_json::Value, k: &str) -> &'a str {
    r[k].as_str().unwrap_or_default()
}

/// The record's decisions of the agent for `port` with `method`.
fn decisions<'a>(
    rec: &'a serde_json::Value,
    method: &str,
    port: &str,
) -> Vec<&'a serde_json::Value> {
    rec["egress_decisions"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|d| d["by"] == "agent" && d["method"] == method && d["port"] == port)
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_genuine_client_hello_then_plain_text_reaches_no_line_service_and_no_http_server() {
    let control = weakened();
    // Control: splicing after the client's hello alone, the text reached the line service and
    // its answers came back; the plain HTTP server answered too.
    assert!(
        control.line_log.contains("-line"),
        "control: the line service got the text after the hello: {}\n{:#}",
        control.line_log,
        control.results
    );
    assert_eq!(
        control.results["line_pong"], true,
        "control: {:#}",
        control.results
    );
    // The plain HTTP server keeps no log, and its answer may be lost to the reset it sends
    // when the text arrives after it closed: the proxy's own line shows it spliced.
    let spliced = decisions(&control.record, "CONNECT", "80");
    assert!(
        spliced
            .iter()
            .any(|d| d["squid"] == "TCP_TUNNEL" && d["server"] == "203.0.113.10"),
        "control: the tunnel to the plain HTTP server was spliced: {spliced:#?}"
    );
    let r = guarded();
    assert!(
        !r.line_log.contains("-line"),
        "the line service got the text after the ClientHello: {}",
        r.line_log
    );
    for (k, answered, first) in [
        ("line", "line_answered", "line_first"),
        ("http", "http_answered", "http_first"),
    ] {
        assert_eq!(
            r.results[answered], false,
            "{k}: the service's answer came back: {:#}",
            r.results
        );
        // Squid ends the client's side with its own TLS error (under the run's CA), or
        // closes: a TLS record (handshake or alert) or nothing.
        assert!(
            ["16", "15", ""].contains(&s(&r.results, first)),
            "{k}: {:#}",
            r.results
        );
    }
    // The record names it, and the summary counts the cut tunnels.
    for port in ["2525", "80"] {
        let d = decisions(&r.record, "CONNECT", port);
        assert!(
            d.iter().any(|d| d["reason"] == "server_not_tls"),
            "CONNECT :{port} recorded as {d:#?}"
        );
    }
    assert!(r.proxy.contains("ERR_SECURE_CONNECT_FAIL"), "{}", r.proxy);
    // `cyclix status` counts what left: the two tunnels whose servers got the client's first
    // flight as sent with the answer withheld (never "denied"), the refused POST and the two
    // tunnels cut for their SNI as denied.
    let tb = Testbed::get();
    let text = expect_success(
        &tb.user(&[&tb.cyclix_bin(), "status", "e2e-tunnel-attacks"]),
        "cyclix status",
    );
    assert!(
        text.contains(
            "3 denied (2 tunnels cut: not TLS, or TLS naming another host), 2 sent with the \
             answer withheld"
        ),
        "{text}"
    );
}

#[test]
fn plain_http_to_a_port_that_is_not_an_http_port_is_refused_before_a_byte_leaves() {
    let r = guarded();
    assert!(
        s(&r.results, "http_ctl").contains("hello-from-allowed.example"),
        "control: plain HTTP to allowed.example:80 works: {:#}",
        r.results
    );
    assert!(
        s(&r.results, "post").starts_with("HTTP/1.1 403")
            && s(&r.results, "post").contains("X-Squid-Error"),
        "the proxy's own 403: {:#}",
        r.results
    );
    assert!(
        !r.line_log.contains("-post"),
        "the POST's body reached the line service: {}",
        r.line_log
    );
    let d = decisions(&r.record, "POST", "2525");
    assert!(
        !d.is_empty() && d.iter().all(|d| d["reason"] == "port_not_http"),
        "{d:#?}"
    );
}

#[test]
fn sni_case_and_a_trailing_dot_are_the_same_name_another_name_and_a_newline_are_cut() {
    let r = &guarded().results;
    assert_eq!(s(r, "sni_eq"), "spliced", "control: {r:#}");
    assert_eq!(s(r, "sni_upper"), "spliced", "upper-case SNI: {r:#}");
    assert_eq!(s(r, "sni_dot"), "spliced", "trailing-dot SNI: {r:#}");
    assert_eq!(s(r, "sni_other"), "cut", "another SNI: {r:#}");
    assert_eq!(
        s(r, "sni_nl"),
        "cut",
        "SNI `allowed.example\\nelsewhere.example` was spliced (the helper saw only the \
         first line): {r:#}"
    );
    // Cut before the helper sees it (`sni_bad`): a split lookup line made the helper answer
    // twice, its answers then out of step with squid's questions (attack review 16 saw
    // `helperHandleRead: unexpected read from external_acl_type` 12 times in one run).
    let proxy = &guarded().proxy;
    assert!(
        proxy.contains("\"sni\":"),
        "control: the proxy's lines were read: {proxy:.400}"
    );
    assert!(
        !proxy.contains("helperHandleRead: unexpected")
            && !proxy.contains("unexpected reply on channel"),
        "the SNI helper's answers went out of step: {proxy}"
    );
}

/// The same attacker in tier `gvisor` (issue 35): the agent's sockets are the pod network
/// namespace's through gVisor's `network=host`, so the proxy must judge them the same. The
/// control is the same agent under gVisor with the proxy weakened as in [`weakened`].
#[test]
fn under_gvisor_the_tunnel_and_plain_http_rules_hold_the_same() {
    let tb = prepared();
    let run = |name: &str, weak: bool| {
        let _shared = crate::common::testbed::shared();
        attacker(tb, name, "gvisor");
        let rec = if weak {
            let id = format!("{name}-1");
            let out = run_with_proxy_dropin(tb, name, &id, WEAKEN);
            let text = expect_success(
                &tb.user_sh(&format!("cat ~/.local/state/cyclix/runs/{name}/{id}.json")),
                "read the weakened run's record",
            );
            let rec: serde_json::Value = serde_json::from_str(&text).expect("record");
            assert!(rec["branch"].is_string(), "{rec:#}\n{out:?}");
            rec
        } else {
            let out = start(tb, name);
            let rec = record(tb, name);
            assert!(rec["branch"].is_string(), "{rec:#}\n{out:?}");
            rec
        };
        assert_eq!(rec["tier"], "gvisor", "{rec:#}");
        read_run(tb, name, rec)
    };
    let control = run("e2e-tunnel-gv-weak", true);
    assert!(
        control.line_log.contains("-line") && control.results["line_pong"] == true,
        "control under gVisor: the line service got the text after the hello and answered: \
         {}\n{:#}",
        control.line_log,
        control.results
    );
    let r = run("e2e-tunnel-gv", false);
    assert!(
        !r.line_log.contains("-line") && !r.line_log.contains("-post"),
        "under gVisor the line service got the text after the ClientHello or the POST: {}",
        r.line_log
    );
    assert_eq!(r.results["line_answered"], false, "{:#}", r.results);
    assert_eq!(r.results["http_answered"], false, "{:#}", r.results);
    for port in ["2525", "80"] {
        let d = decisions(&r.record, "CONNECT", port);
        assert!(
            d.iter().any(|d| d["reason"] == "server_not_tls"),
            "CONNECT :{port} recorded as {d:#?}"
        );
    }
    let post = decisions(&r.record, "POST", "2525");
    assert!(
        !post.is_empty() && post.iter().all(|d| d["reason"] == "port_not_http"),
        "{post:#?}"
    );
    for (k, want) in [
        ("sni_eq", "spliced"),
        ("sni_upper", "spliced"),
        ("sni_other", "cut"),
        ("sni_nl", "cut"),
    ] {
        assert_eq!(s(&r.results, k), want, "{k} under gVisor: {:#}", r.results);
    }
}
