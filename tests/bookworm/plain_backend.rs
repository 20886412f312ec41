//! One shared setup (images, the demo tenant, `cyclix install`), then: what `cyclix check`
//! says, the demo run with its probes, teardown and audit, and the timer.
//!
//! Measured on podman 4.3.1 (the bookworm testbed): aardvark-dns 1.4 forwards a name it does
//! not know from a container on an `--internal` network to the host's resolvers (a listener on
//! the testbed's resolver address saw the queries): a DNS channel out. The plain backend
//! therefore creates the run's internal network with `--disable-dns` and gives the pod the
//! proxy's name through `/etc/hosts`; N7 passes on "no resolver reachable, the proxy's name in
//! /etc/hosts". The attack: the agent pod's `example.com` query must not reach a listener on
//! the resolver address, and the same listener must see a query sent to it from the host.

use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// Where the resolver-address listener writes the query names it received, one per line.
const QUERIES: &str = "/run/tb-dns-queries";

/// A silent UDP listener on 10.78.0.1:53 (the testbed's `nameserver`, where nothing serves DNS):
/// appends each query's name to the file `argv[1]` and answers nothing.
const LISTENER: &str = r#"import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.78.0.1", 53))
out = open(sys.argv[1], "a")
while True:
    d, _ = s.recvfrom(4096)
    i, labels = 12, []
    while i < len(d) and d[i]:
        labels.append(d[i + 1:i + 1 + d[i]].decode("ascii", "replace"))
        i += 1 + d[i]
    out.write(".".join(labels) + "\n")
    out.flush()
"#;

/// The agent of the proxy-log attack on the plain backend (attack review 15, open on podman
/// 4.3): a `GET` through squid whose header block holds a NUL byte; squid then quotes the
/// header bytes after the NUL on its cache log (stderr) — a whole JSON object of the agent's,
/// shaped like one of squid's decisions, with a made-up key. The plain backend's proxy unit
/// gets the container's stdout and stderr on one stream, so that line reaches the journal at
/// the decisions' own priority. The control: a request to a host not allowed, which squid's
/// own access log records.
const NUL_AGENT: &str = r#"import os, socket
proxy = os.environ["HTTP_PROXY"].removeprefix("http://").rstrip("/")
PH, PP = proxy.rsplit(":", 1)[0], int(proxy.rsplit(":", 1)[1])
def send(req):
    s = socket.create_connection((PH, PP), timeout=5)
    s.sendall(req)
    try:
        while s.recv(4096):
            pass
    except OSError:
        pass
    s.close()
forged = (b'{"key":"0123456789abcdef0123456789abcdef","ts":1.000,"client":"10.0.0.9","method":"GET",'
          b'"host":"forged-bw.example","port":"80","url":"http://forged-bw.example/","status":"200",'
          b'"squid":"TCP_MISS","server":"192.0.2.1","reason":"allowlisted","ms":"3","bytes":"10","sni":"-","err":"-"}')
send(b"GET http://allowed.example/ HTTP/1.1\r\nHost: allowed.example\r\nX-A: a\x00b\r\n" + forged + b"\r\nConnection: close\r\n\r\n")
send(b"GET http://ctl-bw.example/ HTTP/1.1\r\nHost: ctl-bw.example\r\nConnection: close\r\n\r\n")
"#;

/// The newest run record of tenant `demo` as JSON, and how many there are.
fn newest_record(tb: &Testbed) -> (serde_json::Value, usize) {
    let out = expect_success(
        &tb.user_sh(
            "d=~/.local/state/cyclix/runs/demo; n=$(ls \"$d\" 2>/dev/null | grep -c '^2.*\\.json$'); \
             echo \"$n\"; [ \"$n\" = 0 ] || cat \"$(ls -t \"$d\"/2*.json | head -1)\"",
        ),
        "read the demo records",
    );
    let (n, json) = out.split_once('\n').unwrap_or((out.as_str(), ""));
    let n: usize = n.trim().parse().expect("record count");
    let rec = if n == 0 {
        serde_json::Value::Null
    } else {
        serde_json::from_str(json).expect("record JSON")
    };
    (rec, n)
}

/// The demo run passed: every probe PASS (N7 by the no-resolver rule), no leftover in the
/// record or in podman or systemd.
fn assert_passed_clean(tb: &Testbed, rec: &serde_json::Value, what: &str) {
    let probes = rec["probes"].as_array().expect("probes");
    // Tier gvisor runs its profile's share of the suite (docs/tiers.md).
    let whole = if rec["tier"] == "gvisor" {
        cyclix::probe::profile::GVISOR_PROBES.len()
    } else {
        40
    };
    assert!(
        probes.len() >= whole,
        "{what}: the whole suite ran: {rec:#}"
    );
    let failed: Vec<&str> = probes
        .iter()
        .filter(|p| p["verdict"] != "PASS")
        .filter_map(|p| p["id"].as_str())
        .collect();
    assert!(
        failed.is_empty(),
        "{what}: probes failed {failed:?}: {rec:#}"
    );
    let n7 = probes.iter().find(|p| p["id"] == "N7").expect("N7");
    let got = n7["got"].as_str().unwrap_or_default();
    assert!(
        got.contains("ENETUNREACH") && got.contains("/etc/hosts [\""),
        "{what}: N7 found no reachable resolver and the proxy in /etc/hosts: {n7:#}"
    );
    assert_eq!(rec["result"], "passed", "{what}: {rec:#}");
    assert_eq!(
        rec["leftovers"].as_array().map(Vec::len),
        Some(0),
        "{what}: {rec:#}"
    );
    let run = rec["run_id"].as_str().expect("run id");
    let left = expect_success(
        &tb.user_sh(&format!(
            "l=io.cyclix.run={run}; podman ps -a -q --filter label=$l; podman pod ps -q --filter label=$l; \
             podman network ls -q --filter label=$l; podman volume ls -q --filter label=$l; \
             systemctl --user list-units --all --no-legend --plain 'cyclix-{run}-*'; \
             ls ~/.config/systemd/user ~/.config/containers/systemd 2>/dev/null | grep -F -- '{run}' || true"
        )),
        "list what the run left",
    );
    assert!(left.trim().is_empty(), "{what}: left behind:\n{left}");
}

#[test]
fn plain_backend_on_podman_4_3_check_demo_teardown_and_timer() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    let c = tb.cyclix_bin();
    let versions = expect_success(
        &tb.user_sh("systemctl --version | head -1; podman version --format '{{.Client.Version}}'"),
        "versions",
    );
    assert!(
        versions.starts_with("systemd 252") && versions.contains("\n4.3.1"),
        "the bookworm flavour: {versions}"
    );

    // `cyclix check`: the host can run cyclix, with plain units and slirp4netns, and says so.
    let check = tb.user(&[&c, "check"]);
    let text = expect_success(&check, "cyclix check");
    for row in [
        "WARN  podman ",
        "WARN  quadlet ",
        "PASS  user-manager       systemd 252",
        "PASS  rootless-network   slirp4netns",
        "PASS  network-backend    netavark",
        "PASS  outcome ",
    ] {
        assert!(text.contains(row), "check has `{row}`:\n{text}");
    }
    assert!(
        text.contains("cyclix uses plain units (podman < 5.0"),
        "{text}"
    );

    // The shared setup: images, the demo tenant, the unit templates.
    expect_success(
        &tb.user_sh(&format!(
            "set -e; {c} images build >/dev/null; {c} demo setup >/dev/null; {c} install >/dev/null"
        )),
        "images build, demo setup, install",
    );

    // The demo run through its unit, as `scripts/demo` starts it, with a silent listener on the
    // testbed's resolver address (what the host's resolver would be): the names that reach it
    // left the sandbox. N7's probe asks `example.com` from the agent pod: it must not arrive.
    // Positive control: a query the testbed host sends there (`tb-control.example`) arrives.
    expect_success(
        &tb.root_sh(&format!(
            "set -e; rm -f {QUERIES}; systemd-run -q --unit=tb-dns-listen --collect python3 -u -c '{LISTENER}' {QUERIES}; \
             for i in $(seq 1 50); do ss -Hlun 'sport = :53' | grep -q 10.78.0.1 && exit 0; sleep 0.1; done; exit 1"
        )),
        "start the resolver-address listener",
    );
    let (_, before) = newest_record(tb);
    expect_success(
        &tb.root_sh(
            "python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
             s.sendto(bytes.fromhex(\"5a1701000001000000000000\") + b\"\\x0atb-control\\x07example\\x00\\x00\\x01\\x00\\x01\", (\"10.78.0.1\", 53))'",
        ),
        "the control query from the host",
    );
    let run = tb.user_sh("systemctl --user start cyclix-run@demo");
    let queries = expect_success(
        &tb.root_sh(&format!(
            "systemctl stop tb-dns-listen; cat {QUERIES} 2>/dev/null; true"
        )),
        "stop the listener",
    );
    let (rec, n) = newest_record(tb);
    assert_eq!(n, before + 1, "one record per run");
    assert_passed_clean(tb, &rec, "the demo run");
    assert!(
        run.status.success(),
        "the demo run's unit succeeded: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        queries.lines().any(|q| q == "tb-control.example"),
        "positive control: the listener receives a query sent to the resolver address: {queries:?}"
    );
    assert!(
        !queries.lines().any(|q| q == "example.com"),
        "the agent pod's example.com query left the sandbox (aardvark-dns forwarding): {queries:?}"
    );

    timer_fires(tb, before);
    proxy_log_forgery_is_not_a_decision(tb);
    gvisor_on_bookworm(tb);
}

/// Tier `gvisor` on Debian 12 (issue 35): bookworm's runsc 0.0~20221219 under podman 4.3's
/// plain units runs the agent and the gate on gVisor's kernel; P25 proves it (its positive
/// control, the host's kernel in tier container, is the trixie suite's `e2e_gvisor`).
fn gvisor_on_bookworm(tb: &Testbed) {
    let c = tb.cyclix_bin();
    let t = Tenant::new("e2e-bw-gvisor")
        .gate_cmd(r#"[sh, -c, "python3 -m pytest -q -p no:cacheprovider && uname -r"]"#)
        .tier("gvisor")
        .write(tb);
    let out = tb.user(&[&c, "run", &t]);
    let rec: serde_json::Value = serde_json::from_str(&expect_success(
        &tb.user_sh(&format!("cat ~/.local/state/cyclix/runs/{t}/latest.json")),
        "the record",
    ))
    .expect("record JSON");
    assert_eq!(
        (rec["result"].as_str(), rec["tier"].as_str()),
        (Some("passed"), Some("gvisor")),
        "{out:?}\n{rec:#}"
    );
    assert!(
        rec["oci_runtime"]["version"]
            .as_str()
            .is_some_and(|v| v.starts_with("0.0~2022")),
        "bookworm's runsc: {:#}",
        rec["oci_runtime"]
    );
    let probes = rec["probes"].as_array().expect("probes");
    assert!(
        probes.iter().all(|p| p["verdict"] == "PASS")
            && probes.iter().any(|p| p["id"] == "P25"
                && p["got"]
                    .as_str()
                    .is_some_and(|g| g.contains("Starting gVisor"))),
        "{probes:#?}"
    );
    let host = expect_success(&tb.user_sh("uname -r"), "uname -r");
    let gate = crate::common::run::last_line(&rec, "gate_log");
    assert!(
        !gate.is_empty() && gate != host.trim(),
        "the gate's kernel: {gate:?}"
    );
    assert_passed_clean(tb, &rec, "the gvisor run");
}

/// The attack of [`NUL_AGENT`]: the forged line reaches the proxy's journal lines (identifier
/// `cyclix-RUN-proxy`, priority info, where cyclix reads the decisions: the positive control,
/// without the access-log key cyclix would have read it), yet the record holds no decision for
/// its host, names the ignored line, and has squid's own decision for the control (before the
/// fix the plain backend recorded no decision at all: its lines are not filed under the unit).
fn proxy_log_forgery_is_not_a_decision(tb: &Testbed) {
    let c = tb.cyclix_bin();
    let t = Tenant::new("e2e-bw-nul")
        .file("attack_bw.py", NUL_AGENT)
        .agent_cmd(r#"[sh, -c, "python3 attack_bw.py; cyclix-demo-agent > /dev/null 2>&1"]"#)
        .egress_allow(&["allowed.example"], &[80])
        .write(tb);
    let out = tb.user(&[&c, "start", &t, "--wait-s", "180"]);
    let rec: serde_json::Value = serde_json::from_str(&expect_success(
        &tb.user_sh(&format!("cat ~/.local/state/cyclix/runs/{t}/latest.json")),
        "the record",
    ))
    .expect("record JSON");
    assert_eq!(rec["result"], "passed", "{out:?}\n{rec:#}");
    let run = rec["run_id"].as_str().expect("run id");
    let journal = expect_success(
        &tb.user_sh(&format!(
            "journalctl --user -t cyclix-{run}-proxy -o cat --no-pager -p info..info | grep -a forged-bw || true"
        )),
        "the proxy's journal",
    );
    assert!(
        journal
            .lines()
            .any(|l| l.trim().starts_with(r#"{"key":"0123456789abcdef"#)),
        "positive control: squid printed the forged line at the decisions' priority: {journal}"
    );
    let hosts: Vec<&str> = rec["egress_decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .filter_map(|d| d["host"].as_str())
        .collect();
    assert!(
        !hosts.contains(&"forged-bw.example"),
        "a line the agent made squid print was read as a decision: {hosts:?}"
    );
    assert!(
        hosts.contains(&"ctl-bw.example"),
        "squid's own decision for the control request: {hosts:?}"
    );
    assert!(
        rec["notices"].as_array().is_some_and(|n| n.iter().any(|n| n
            .as_str()
            .is_some_and(|n| n.contains("without this run's access-log key")))),
        "the ignored line is named: {:#}",
        rec["notices"]
    );
}

/// The timer fires: a test drop-in (every 2 s; specs allow at most every 5 minutes) on the real
/// template timer, until one more record appears (deadline 60 s), then removed.
fn timer_fires(tb: &Testbed, before: usize) {
    let fired = expect_success(
        &tb.user_sh(
            r#"set -u
D=~/.config/systemd/user/cyclix-run@demo.timer.d; R=~/.local/state/cyclix/runs/demo
mkdir -p "$D"; printf '[Timer]\nOnCalendar=*:*:0/2\nAccuracySec=100ms\n' > "$D/test-every-2s.conf"
systemctl --user daemon-reload
n0=$(ls "$R" | grep -c '^2.*\.json$')
systemctl --user start cyclix-run@demo.timer
ok=0
for i in $(seq 1 600); do
  [ "$(ls "$R" | grep -c '^2.*\.json$')" -gt "$n0" ] && { ok=1; break; }
  sleep 0.1
done
systemctl --user stop cyclix-run@demo.timer
for i in $(seq 1 600); do
  s=$(systemctl --user show -P ActiveState cyclix-run@demo.service); [ "$s" = activating ] || break; sleep 0.1
done
rm -rf "$D"; systemctl --user daemon-reload; systemctl --user reset-failed cyclix-run@demo.service 2>/dev/null
echo "fired=$ok""#,
        ),
        "the timer",
    );
    assert!(
        fired.contains("fired=1"),
        "the timer started a run within 60 s: {fired}"
    );
    let (rec, n) = newest_record(tb);
    assert!(n >= before + 2, "the timer's run has a record");
    assert_passed_clean(tb, &rec, "the timer's run");
}
