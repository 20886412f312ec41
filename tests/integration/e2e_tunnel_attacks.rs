//! Attack review of issue 13's tunnel claim ("a CONNECT to an allowlisted name must carry TLS
//! whose SNI equals the CONNECT host exactly; anything else is cut"), by a security tester
//! playing the agent. One run of a script agent through the run's own proxy
//! (`allowed.example`, ports 80 and 443); each test has its positive control in the same run.
//!
//! - Plain HTTP, no CONNECT: a `POST http://allowed.example:443/` reached the SSH-like service
//!   there and squid relayed its bytes as `HTTP/0.9` (`X-Transformed-From: HTTP/0.9`). Now the
//!   answer is withheld (`http_reply_access deny`, reason `not_http`). Control: plain HTTP to
//!   port 80 works.
//! - The SNI helper read one line per lookup and squid does not escape a newline in
//!   `%ssl::>sni`: SNI `allowed.example\nelsewhere.example` was spliced. Now every lookup ends
//!   in a fixed field the split line lacks. Controls: SNI `allowed.example` is spliced, SNI
//!   `elsewhere.example` is cut.
//! - Known and open (the next planner's): the peek looks at the client's first flight only, so
//!   a `CONNECT allowed.example:80` that sends a real `ClientHello` and then plain HTTP is
//!   spliced to the plain server there (`prefix` below records what came back). Closing it
//!   needs `ssl_bump peek` at step 2 (the server's hello), which squid 6.13 only accepts with
//!   the bump machinery configured (measured: "could not create TLS server context ... null
//!   ssl ctx" with `generate-host-certificates=off`).

use std::sync::OnceLock;

use crate::common::run::{prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

/// The agent: each attack with a 5 s deadline, results in `attack13.json` (committed).
/// `spliced` = the server's first byte was a TLS record (0x16 handshake or 0x15 alert), `cut` =
/// the proxy closed without a byte.
const AGENT: &str = r#"import json, os, socket, struct, time
proxy = os.environ["HTTPS_PROXY"].removeprefix("http://").rstrip("/")
PH, PP = proxy.rsplit(":", 1)[0], int(proxy.rsplit(":", 1)[1])

def hello(sni):
    names = b"\x00" + struct.pack(">H", len(sni)) + sni
    sn = struct.pack(">H", len(names)) + names
    ext = b"\x00\x00" + struct.pack(">H", len(sn)) + sn
    ext += b"\x00\x0a\x00\x06\x00\x04\x00\x1d\x00\x17" + b"\x00\x0d\x00\x08\x00\x06\x04\x03\x08\x04\x04\x01"
    cs = b"\xc0\x2f\xc0\x2b\xc0\x30\x00\x9c\x00\x2f"
    body = b"\x03\x03" + os.urandom(32) + b"\x00" + struct.pack(">H", len(cs)) + cs + b"\x01\x00" + struct.pack(">H", len(ext)) + ext
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs

def drain(s):
    out = b""
    try:
        while len(out) < 4096:
            b = s.recv(4096)
            if not b:
                break
            out += b
    except OSError:
        pass
    return out

def tunnel(target, first, then=b""):
    s = socket.create_connection((PH, PP), timeout=5)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = s.recv(1)
        if not b:
            break
        head += b
    s.sendall(first)
    if then:
        time.sleep(0.7)  # the ClientHello alone in its segment: squid peeks at it, then splices
        try:
            s.sendall(then)
        except OSError:
            pass
    got = drain(s)
    s.close()
    return got

def tls(got):
    return "spliced" if got[:1] in (b"\x16", b"\x15") else ("cut" if not got else "other")

def plain(req):
    s = socket.create_connection((PH, PP), timeout=5)
    s.sendall(req)
    got = drain(s)
    s.close()
    return got.decode("latin-1")

A = b"allowed.example"
out = {}
out["prefix"] = tunnel("allowed.example:80", hello(A), b"\r\nGET / HTTP/1.0\r\n\r\n").decode("latin-1")[:200]
out["prefix_ctl"] = tunnel("allowed.example:80", b"GET / HTTP/1.0\r\n\r\n").decode("latin-1")[:200]
out["http09"] = plain(b"POST http://allowed.example:443/ HTTP/1.1\r\nHost: allowed.example:443\r\nContent-Length: 18\r\nConnection: close\r\n\r\nSSH-2.0-smuggled\r\n")[:600]
out["http_ctl"] = plain(b"GET http://allowed.example/ HTTP/1.1\r\nHost: allowed.example\r\nConnection: close\r\n\r\n")[:600]
out["sni_nl"] = tls(tunnel("allowed.example:443", hello(A + b"\nelsewhere.example")))
out["sni_eq"] = tls(tunnel("allowed.example:443", hello(A)))
out["sni_other"] = tls(tunnel("allowed.example:443", hello(b"elsewhere.example")))
json.dump(out, open("attack13.json", "w"))
"#;

/// The agent's results, from one run shared by the tests below.
fn results() -> &'static serde_json::Value {
    &run().0
}

/// The agent's results and the proxy's journal lines of that run (every priority: squid's
/// cache log too), from one run shared by the tests below.
fn run() -> &'static (serde_json::Value, String) {
    static R: OnceLock<(serde_json::Value, String)> = OnceLock::new();
    R.get_or_init(|| {
        let _shared = crate::common::testbed::shared();
        let tb = prepared();
        let name = "e2e-tunnel-attacks";
        Tenant::new(name)
            .agent_cmd(
                r#"[sh, -c, "python3 attack13.py && git add attack13.json && git commit -qm attack13"]"#,
            )
            .egress_allow(&["allowed.example"], &[80, 443])
            .file("attack13.py", AGENT)
            .write(tb);
        let out = start(tb, name);
        let rec = record(tb, name);
        let branch = rec["branch"]
            .as_str()
            .unwrap_or_else(|| panic!("the agent ran: {rec:#}\n{out:?}"));
        let json = expect_success(
            &tb.user_sh(&format!(
                "cd ~/src/{name} && git show {branch}:attack13.json"
            )),
            "read the agent's results",
        );
        let proxy = expect_success(
            &tb.user_sh(&format!(
                "journalctl --user -t cyclix-{}-proxy -o cat --no-pager",
                rec["run_id"].as_str().expect("run id")
            )),
            "the proxy's journal",
        );
        (serde_json::from_str(&json).expect("attack13.json"), proxy)
    })
}

fn s<'a>(r: &'a serde_json::Value, k: &str) -> &'a str {
    r[k].as_str().unwrap_or_default()
}

/// Plain HTTP to a non-HTTP service on an allowed port
/// gets that service's bytes back as HTTP/0.9.
#[test]
fn plain_http_to_a_non_http_service_gets_none_of_its_bytes() {
    let r = results();
    assert!(
        s(r, "http_ctl").contains("hello-from-allowed.example"),
        "control: plain HTTP to allowed.example:80 works: {r:#}"
    );
    assert!(
        !s(r, "http09").contains("SSH-2.0-testbed-outside"),
        "the SSH-like service on allowed.example:443 answered a plain-HTTP request \
         (squid relayed it as HTTP/0.9), no CONNECT needed: {r:#}"
    );
}

/// An SNI that is the CONNECT host, a newline and more
/// is spliced.
#[test]
fn an_sni_with_a_newline_is_cut() {
    let r = results();
    assert_eq!(s(r, "sni_eq"), "spliced", "control: {r:#}");
    assert_eq!(s(r, "sni_other"), "cut", "control: {r:#}");
    assert_eq!(
        s(r, "sni_nl"),
        "cut",
        "SNI `allowed.example\\nelsewhere.example` was spliced (the helper saw only the \
         first line): {r:#}"
    );
    // Cut before the helper sees it (`sni_bad`): a split lookup line made the helper answer
    // twice, its answers then out of step with squid's questions (attack review 16 saw
    // `helperHandleRead: unexpected read from external_acl_type` 12 times in one run).
    let proxy = &run().1;
    assert!(
        proxy.contains("cyclix-end") || proxy.contains("\"sni\":"),
        "control: the proxy's lines were read: {proxy:.400}"
    );
    assert!(
        !proxy.contains("helperHandleRead: unexpected")
            && !proxy.contains("unexpected reply on channel"),
        "the SNI helper's answers went out of step: {proxy}"
    );
}
