//! A tunnel is what it says (issue 13, field report B31) on the real stack: through the run's
//! own proxy, a `CONNECT` to an allowlisted name that carries an SSH banner, or TLS naming
//! another host, is cut at once and logged with its reason, while a real TLS client to the same
//! name gets its page (positive control). The same attack against the same configuration
//! without the tunnel rules gets the outside server's SSH banner back, and probe N17 refuses
//! that run (positive control of the attack test). A spec allowing two ports of one host
//! (`[80, 8080]`) runs with every probe passing (N9 derives the denied ports from the spec).
//!
//! The testbed's `allowed.example:443` (`testbed/fixtures/outside_tls.py`) answers a TLS
//! `ClientHello` with TLS (test CA) and `hello-from-allowed.example-tls`, any other first byte
//! with `SSH-2.0-testbed-outside` and an echo.

use crate::common::run::{demo_setup, run_with_proxy_dropin};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};
use crate::e2e_boundary::assert_all_probes_pass;

/// The agent: three tunnels through `$HTTPS_PROXY`, their results in `tunnel.json`
/// (committed). Each read waits for the proxy's own end of the tunnel (close, reset, or
/// the page) with a cap of 120 s that is reported as `timeout`, never taken for a cut.
/// `ca.pem` is the testbed's CA, committed next to it.
const ATTACK: &str = r#"import json, os, socket, ssl, time, urllib.request
proxy = os.environ["HTTPS_PROXY"].removeprefix("http://").rstrip("/")
host, port = proxy.rsplit(":", 1)

def tunnel(target):
    s = socket.create_connection((host, int(port)), timeout=120)
    s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = s.recv(1)
        if not b:
            break
        head += b
    return s, head.split(b"\r\n")[0].decode()

def drain(s, t0):
    got = b""
    try:
        while len(got) < 256:
            b = s.recv(256)
            if not b:
                return got, "closed", time.monotonic() - t0
            got += b
    except socket.timeout:
        return got, "timeout", time.monotonic() - t0
    except OSError as e:
        return got, type(e).__name__, time.monotonic() - t0
    return got, "open", time.monotonic() - t0

out = {}
s, status = tunnel("allowed.example:443")
t0 = time.monotonic()
s.sendall(b"SSH-2.0-OpenSSH_9.6 e2e-attacker\r\n")
got, end, secs = drain(s, t0)
out["ssh"] = {"connect": status, "got": got.decode("latin-1"), "end": end, "secs": secs}

s, status = tunnel("allowed.example:443")
ctx = ssl.create_default_context(cafile="ca.pem")
ctx.check_hostname = False
t0 = time.monotonic()
try:
    ctx.wrap_socket(s, server_hostname="elsewhere.example").do_handshake()
    out["sni"] = {"connect": status, "end": "handshake completed", "secs": time.monotonic() - t0}
except Exception as e:
    out["sni"] = {"connect": status, "end": type(e).__name__ + ": " + str(e), "secs": time.monotonic() - t0}

ctx = ssl.create_default_context(cafile="ca.pem")
try:
    body = urllib.request.urlopen("https://allowed.example/", context=ctx, timeout=120).read().decode()
    out["tls"] = {"body": body}
except Exception as e:
    out["tls"] = {"error": type(e).__name__ + ": " + str(e)}
json.dump(out, open("tunnel.json", "w"))
"#;

/// The latest record of run `id` of tenant `name`.
fn run_record(tb: &Testbed, name: &str, id: &str) -> serde_json::Value {
    let text = expect_success(
        &tb.user_sh(&format!("cat ~/.local/state/cyclix/runs/{name}/{id}.json")),
        "read the run record",
    );
    serde_json::from_str(&text).expect("record JSON")
}

fn decisions(rec: &serde_json::Value) -> Vec<serde_json::Value> {
    rec["egress_decisions"]
        .as_array()
        .expect("egress_decisions")
        .clone()
}

#[test]
fn a_tunnel_carries_tls_for_its_own_name_or_is_cut() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    demo_setup(tb);
    let ca = expect_success(
        &tb.root_sh("cat /srv/testbed-ca.pem"),
        "read the testbed CA",
    );
    let name = "t-tunnel";
    Tenant::new(name)
        .agent_cmd(
            r#"[sh, -c, "python3 attack.py && git add tunnel.json && git commit -qm tunnels"]"#,
        )
        .egress_allow(&["allowed.example"], &[80, 443])
        .file("attack.py", ATTACK)
        .file("ca.pem", &ca)
        .write(tb);
    let id = "t-tunnel-1";
    let out = tb.user(&[&tb.cyclix_bin(), "run", name, "--run-id", id]);
    let rec = run_record(tb, name, id);
    assert_eq!(
        rec["result"], "gate_failed",
        "the agent ran: {rec:#}\n{out:?}"
    );
    // Every probe passed before the agent, N17 among them (443 allowed: with its control).
    assert_all_probes_pass(&rec);
    let branch = rec["branch"].as_str().expect("branch");
    let json = expect_success(
        &tb.user_sh(&format!("cd ~/src/{name} && git show {branch}:tunnel.json")),
        "read the agent's results",
    );
    let r: serde_json::Value = serde_json::from_str(&json).expect("tunnel.json");

    // (a) Non-TLS bytes to an allowlisted name: the tunnel was established, then cut by the
    // proxy (closed or reset, not the agent's 120 s cap), and not one byte of the server came
    // back; the record below gives the proxy's reason (`not_tls`).
    let ssh = &r["ssh"];
    assert_eq!(
        ssh["connect"], "HTTP/1.1 200 Connection established",
        "{r:#}"
    );
    assert_eq!(ssh["got"], "", "a byte came back through the tunnel: {r:#}");
    assert!(
        ssh["end"] == "closed" || ssh["end"] == "ConnectionResetError",
        "the tunnel was not cut: {r:#}"
    );
    // (b) TLS naming another host: cut during the handshake (not by the agent's cap), the
    // record's reason `sni_mismatch` below.
    let sni = &r["sni"];
    assert_eq!(
        sni["connect"], "HTTP/1.1 200 Connection established",
        "{r:#}"
    );
    assert!(
        sni["end"].as_str().is_some_and(|e| !e.contains("completed")
            && !e.contains("timed out")
            && !e.starts_with("TimeoutError")),
        "{r:#}"
    );
    // (c) Positive control: a real TLS client (Python's ssl, verifying the test CA and the
    // name) through the proxy to the same name gets the TLS page.
    assert!(
        r["tls"]["body"]
            .as_str()
            .is_some_and(|b| b.contains("hello-from-allowed.example-tls")),
        "the honest TLS client failed: {r:#}"
    );

    // The decision log says why: the agent's cuts, and its honest tunnel as allowlisted.
    let d = decisions(&rec);
    let tunnels = |reason: &str| {
        d.iter()
            .filter(|x| x["method"] == "CONNECT" && x["port"] == "443" && x["reason"] == reason)
            .cloned()
            .collect::<Vec<_>>()
    };
    let not_tls = tunnels("not_tls");
    // One from probe N17, one from the agent.
    assert!(not_tls.len() >= 2, "{d:#?}");
    assert!(
        not_tls.iter().all(|x| x["err"] == "ERR_PROTOCOL_UNKNOWN"),
        "{not_tls:#?}"
    );
    assert!(
        tunnels("sni_mismatch")
            .iter()
            .any(|x| x["sni"] == "elsewhere.example"),
        "the agent's other SNI is logged with the SNI seen: {d:#?}"
    );
    assert!(
        d.iter().any(|x| x["squid"] == "TCP_TUNNEL"
            && x["reason"] == "allowlisted"
            && x["sni"] == "allowed.example"),
        "{d:#?}"
    );
    // `cyclix status` says so too.
    let text = expect_success(
        &tb.user(&[&tb.cyclix_bin(), "status", name]),
        "cyclix status",
    );
    assert!(
        text.contains("tunnels cut: not TLS, or TLS naming another host"),
        "{text}"
    );
}

#[test]
fn without_the_tunnel_rules_the_ssh_banner_comes_back_and_n17_refuses_the_run() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    demo_setup(tb);
    let name = "t-tunnel-weak";
    let id = "t-tunnel-weak-1";
    Tenant::new(name)
        .agent_cmd(r#"[sh, -c, "touch AGENT-RAN && git add -A && git commit -qm ran"]"#)
        .egress_allow(&["allowed.example"], &[80, 443])
        .write(tb);
    // The run's own rendered squid.conf, minus the tunnel rules and the port's ssl-bump: what
    // cyclix ran before issue 13 (a drop-in, as an attacker with the Quadlet dir could write).
    let weaken = "[Container]\nEntrypoint=/bin/sh\nExec=-c \"sed -e '/^ssl/d' -e '/^on_unsupported_protocol/d' -e 's/ ssl-bump.*//' /etc/cyclix/squid.conf > /dev/shm/weak.conf && exec /usr/sbin/squid-openssl -N -f /dev/shm/weak.conf\"";
    let out = run_with_proxy_dropin(tb, name, id, weaken);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rec = run_record(tb, name, id);
    assert!(stderr.contains("rc=1"), "cyclix run must exit 1: {stderr}");
    assert_eq!(rec["result"], "probe_refused", "{rec:#}");
    assert!(rec["agent_exit"].is_null(), "the agent ran: {rec:#}");
    let n17 = rec["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .find(|p| p["id"] == "N17")
        .cloned()
        .expect("an N17 line");
    assert_eq!(n17["verdict"], "FAIL", "{n17:#}");
    // The attack succeeded against the weakened proxy: the outside server's banner came back
    // through the tunnel, and so did its TLS answer to another SNI.
    assert!(
        n17["got"]
            .as_str()
            .is_some_and(|g| g.contains("SSH-2.0-testbed-outside")),
        "{n17:#}"
    );
    assert!(rec["refusal"].to_string().contains("N17"), "{rec:#}");
    // Only N17 (and nothing else) sees the weakening.
    let failed: Vec<&str> = rec["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .filter(|p| p["verdict"] != "PASS")
        .filter_map(|p| p["id"].as_str())
        .collect();
    assert_eq!(failed, ["N17"], "{rec:#}");
}

#[test]
fn a_spec_allowing_80_and_8080_runs_with_every_probe_passing() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    demo_setup(tb);
    let name = "t-ports";
    let id = "t-ports-1";
    // Plain HTTP to 8080 only (issue 31): port 80 is CONNECT + TLS only in this spec, so the
    // probes' positive controls use 8080 for plain HTTP and a CONNECT on 80.
    Tenant::new(name)
        .agent_cmd(r#"[sh, -c, "curl -s -o /dev/null -w '%{http_code}' http://allowed.example:8080/ > alt.txt; curl -s -o /dev/null -w '%{http_code}' http://allowed.example/ > plain80.txt; git add -A && git commit -qm ports"]"#)
        .extra_yaml("egress:\n  allow: [allowed.example]\n  ports: [80, 8080]\n  http_ports: [8080]")
        .write(tb);
    let out = tb.user(&[&tb.cyclix_bin(), "run", name, "--run-id", id]);
    let rec = run_record(tb, name, id);
    assert_eq!(
        rec["result"], "gate_failed",
        "the agent ran: {rec:#}\n{out:?}"
    );
    assert_all_probes_pass(&rec);
    let n9 = rec["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .find(|p| p["id"] == "N9")
        .cloned()
        .expect("N9");
    let got = n9["got"].as_str().unwrap_or_default();
    assert!(
        !got.contains(":8080=") && got.contains("allowed.example:22=407"),
        "N9 tries only ports the spec does not allow: {n9:#}"
    );
    let branch = rec["branch"].as_str().expect("branch");
    let alt = expect_success(
        &tb.user_sh(&format!("cd ~/src/{name} && git show {branch}:alt.txt")),
        "read the agent's result",
    );
    assert_eq!(alt, "200", "plain HTTP to the port http_ports lists works");
    let plain80 = expect_success(
        &tb.user_sh(&format!("cd ~/src/{name} && git show {branch}:plain80.txt")),
        "read the agent's result",
    );
    assert_eq!(
        plain80, "403",
        "plain HTTP to a port http_ports does not list is refused"
    );
    assert!(
        rec["egress_decisions"].as_array().is_some_and(|a| a
            .iter()
            .any(|d| d["by"] == "agent" && d["port"] == "80" && d["reason"] == "port_not_http")),
        "{rec:#}"
    );
}
