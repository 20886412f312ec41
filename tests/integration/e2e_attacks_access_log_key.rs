//! Attack review 16: the proxy's per-run access-log key (squid.conf's `logformat`; the collect
//! phase keeps only journal lines with it), attacked by an agent that has read the source. One
//! run, shared; each attack has its control in the same run.
//!
//! - Learn the key: squid's cache manager (`config`, `menu`, by IP, by name, `cache_object:`)
//!   and its error pages; every byte squid sent back is kept. Held: all refused, no answer
//!   holds the key (control: the key is on squid's journal lines, the answers were kept).
//! - See the proxy's processes (their `/proc/PID/root` reaches squid.conf). Held: the agent's
//!   container lists only its own (control: it lists `attack16.py`).
//! - Hide a request from the record by making squid's genuine decision line for it unreadable.
//!   Broke, fixed: squid's `%"` quoting escapes only `"`, `\`, CR, LF and TAB, so a control byte
//!   in a tunnel's SNI reached the line raw and serde refused it; and a URL of 8.1 KiB made a
//!   line conmon cut into two journal entries (8,192 bytes, then the rest). Both requests were
//!   in no record, not even counted (measured before the fix: 0 decisions each). Now control
//!   characters are read as escapes and a cut line is joined (`collect::decisions`). Control:
//!   an ordinary refused request and a tunnel whose SNI is not the CONNECT host. A control byte
//!   in a URL: squid refuses the request (400), a decision of its own without the URL.

use std::sync::OnceLock;

use crate::common::run::{prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

/// The agent: every request with a 5 s deadline; what squid answered is kept (latin-1) in
/// `attack16.json` (committed).
const AGENT: &str = r#"import json, os, socket, struct
proxy = os.environ["HTTP_PROXY"].removeprefix("http://").rstrip("/")
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
        while len(out) < 65536:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError:
        pass
    return out

def send(req):
    s = socket.create_connection((PH, PP), timeout=5)
    s.sendall(req)
    got = drain(s)
    s.close()
    return got.decode("latin-1")

def tunnel(target, first):
    s = socket.create_connection((PH, PP), timeout=5)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = s.recv(1)
        if not b:
            break
        head += b
    s.sendall(first)
    got = drain(s)
    s.close()
    return (head + got).decode("latin-1")

def get(url, host):
    return send(b"GET " + url + b" HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n")

out = {}
out["mgr_config"] = get(f"http://{PH}:{PP}/squid-internal-mgr/config".encode(), f"{PH}:{PP}".encode())
out["mgr_menu"] = get(f"http://{PH}:{PP}/squid-internal-mgr/menu".encode(), f"{PH}:{PP}".encode())
out["mgr_obj"] = send(b"GET cache_object://localhost/config HTTP/1.0\r\n\r\n")
out["mgr_origin"] = send(b"GET /squid-internal-mgr/config HTTP/1.1\r\nHost: cyclix-egress\r\nConnection: close\r\n\r\n")
out["ctl"] = get(b"http://a16-ctl.example/", b"a16-ctl.example")
out["sni_ctl"] = tunnel("allowed.example:443", hello(b"a16-sni-ctl.example"))
out["sni_hidden"] = tunnel("allowed.example:443", hello(b"a16-sni-hidden.example\x01"))
out["url_hidden"] = get(b"http://a16-url-hidden.example/\x01x", b"a16-url-hidden.example")
out["long"] = get(b"http://a16-long.example/" + b"a" * 8100, b"a16-long.example")
procs = []
for p in os.listdir("/proc"):
    try:
        procs.append(open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ").decode("latin-1"))
    except OSError:
        pass
out["procs"] = procs
json.dump(out, open("attack16.json", "w"))
"#;

/// The run's record, the agent's results and the proxy's journal lines (its syslog
/// identifier, priority info: what the collect phase reads), from one run.
fn run() -> &'static (serde_json::Value, serde_json::Value, String) {
    static R: OnceLock<(serde_json::Value, serde_json::Value, String)> = OnceLock::new();
    R.get_or_init(|| {
        let _shared = crate::common::testbed::shared();
        let tb = prepared();
        let t = "e2e-a16";
        Tenant::new(t)
            .agent_cmd(
                r#"[sh, -c, "python3 attack16.py && git add attack16.json && git commit -qm attack16"]"#,
            )
            .egress_allow(&["allowed.example"], &[80, 443])
            .file("attack16.py", AGENT)
            .write(tb);
        let out = start(tb, t);
        let rec = record(tb, t);
        let (Some(run_id), Some(branch)) = (rec["run_id"].as_str(), rec["branch"].as_str()) else {
            panic!("the agent ran: {rec:#}\n{out:?}");
        };
        let json = expect_success(
            &tb.user_sh(&format!("cd ~/src/{t} && git show {branch}:attack16.json")),
            "read the agent's results",
        );
        let proxy = expect_success(
            &tb.user_sh(&format!(
                "journalctl --user --identifier=cyclix-{run_id}-proxy --priority=info..info -o cat --no-pager | cat -v"
            )),
            "the proxy's journal",
        );
        (rec, serde_json::from_str(&json).expect("attack16.json"), proxy)
    })
}

/// The decisions in the record whose text holds `marker`.
fn decided<'a>(rec: &'a serde_json::Value, marker: &str) -> Vec<&'a serde_json::Value> {
    rec["egress_decisions"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|d| d.to_string().contains(marker))
                .collect()
        })
        .unwrap_or_default()
}

/// squid's cache manager (`config`, `menu`), its error pages: none holds the access-log key.
#[test]
fn the_access_log_key_is_in_no_answer_squid_gives_the_agent() {
    let (_, got, proxy) = run();
    // Positive control: the key is on squid's lines, and the agent kept squid's answers.
    let key = proxy
        .lines()
        .find_map(|l| l.strip_prefix(r#"{"key":""#))
        .and_then(|r| r.get(..32))
        .unwrap_or_else(|| panic!("the proxy's lines carry a key: {proxy}"));
    assert!(
        got["ctl"].as_str().unwrap_or_default().contains(" 403 "),
        "control: the agent kept squid's answer to a refused request: {got:#}"
    );
    let leaked: Vec<&String> = got
        .as_object()
        .map(|o| {
            o.keys()
                .filter(|k| o[*k].to_string().contains(key))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        leaked.is_empty(),
        "squid's answers to {leaked:?} hold the access-log key {key}: {got:#}"
    );
}

/// The agent's container sees no process of the proxy's (whose command line names its config,
/// and whose `/proc/PID/root` would reach it).
#[test]
fn the_agent_sees_no_proxy_process() {
    let (_, got, _) = run();
    let procs: Vec<&str> = got["procs"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p.as_str()).collect())
        .unwrap_or_default();
    assert!(
        procs.iter().any(|p| p.contains("attack16.py")),
        "control: the agent lists its own processes: {procs:?}"
    );
    assert!(
        !procs.iter().any(|p| p.contains("squid")),
        "the agent sees the proxy's processes: {procs:?}"
    );
}

/// A control byte in a tunnel's SNI (squid quotes it raw), a URL whose log line conmon splits.
#[test]
fn a_decision_line_the_agent_made_unreadable_is_still_in_the_record() {
    let (rec, _, proxy) = run();
    for ctl in ["a16-ctl.example", "a16-sni-ctl.example"] {
        let d = decided(rec, ctl);
        assert!(
            d.len() == 1 && d[0]["by"] == "agent",
            "control: {ctl} is one decision, by the agent: {d:?}\n{proxy}"
        );
    }
    // squid refuses a control byte in a URL: a decision without the URL, not a hidden one.
    assert!(
        !proxy.contains("a16-url-hidden")
            && rec["egress_decisions"].as_array().is_some_and(|a| a
                .iter()
                .any(|d| d["url"] == "error:invalid-request" && d["by"] == "agent")),
        "the request with a control byte in its URL is an invalid-request decision: {:#}",
        rec["egress_decisions"]
    );
    let mut hidden = Vec::new();
    for marker in ["a16-sni-hidden", "a16-long"] {
        // Positive control: squid logged a line for the request.
        assert!(
            proxy.contains(marker),
            "squid logged the request to {marker}: {proxy}"
        );
        let d = decided(rec, marker);
        if !(d.len() == 1 && d[0]["by"] == "agent") {
            hidden.push(format!("{marker}: {} decision(s)", d.len()));
        }
    }
    assert!(
        hidden.is_empty(),
        "squid logged the agent's requests, and the record has not one decision each for \
         {hidden:?}; notices {:#}\nthe proxy's lines:\n{proxy}",
        rec["notices"]
    );
}
