//! Issue 13, item 1: the API key stays outside the sandbox. One run whose agent (a script)
//! calls the testbed's TLS stand-in `api.example` through its base URL: the proxy adds the real
//! key (from the tenant's 0600 env file), strips the agent's own auth headers, refuses paths
//! and methods not listed and the placeholder on the forward port; the value has 0 hits in
//! every sandbox environment, readable file, argv, unit file, the journal and the records,
//! and each scan is shown to find it where it is. Plus the failure modes: an unset credential
//! and a missing CA file are refused before anything exists.

use crate::common::run::{inject_mid_run, leftovers, prepared, record, record_of};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// The agent: eight requests to the credential port, three through the forward proxy, its own
/// view of the variables; prints one `CRED {json}` line, then waits (bounded) for the test's
/// scans to finish (`/tmp/cred-go`, created from the host with `podman exec`).
const AGENT: &str = r#"import json, os, time, urllib.request, urllib.error
MARK = os.environ["CRED_MARK"]
base = os.environ["E2E_BASE_URL"]
ph = os.environ["E2E_API_KEY"]
def call(method, url, headers=None, body=b"{}"):
    req = urllib.request.Request(url, data=body if method in ("POST", "PUT") else None, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return [r.status, r.read().decode()[:300]]
    except urllib.error.HTTPError as e:
        return [e.code, e.read().decode(errors="replace")[:80]]
    except Exception as e:
        return [0, repr(e)[:120]]
out = {"placeholder": ph, "base": base, "no_proxy": os.environ.get("NO_PROXY", "")}
out["ok"] = call("POST", f"{base}/v1/messages?m={MARK}-ok", {"x-api-key": ph, "content-type": "application/json"})
out["own"] = call("POST", f"{base}/v1/messages?m={MARK}-own", {"x-api-key": f"agent-own-{MARK}", "Authorization": f"Bearer agent-own-{MARK}"})
out["get"] = call("GET", f"{base}/v1/models/m1?m={MARK}-get")
out["path"] = call("POST", f"{base}/v1/other?m={MARK}-path")
out["method"] = call("DELETE", f"{base}/v1/messages?m={MARK}-method")
out["dots"] = call("GET", f"{base}/v1/models/../../admin?m={MARK}-dots")
# Attacks on the credential port: used as a forward proxy for another host (absolute URL),
# and a CONNECT through it: the first still goes to api.example only, the second is refused.
via = urllib.request.build_opener(urllib.request.ProxyHandler({"http": base}))
try:
    with via.open(urllib.request.Request(f"http://denied.example/v1/messages?m={MARK}-abs", data=b"{}", method="POST"), timeout=20) as r:
        out["abs"] = [r.status, r.read().decode()[:300]]
except urllib.error.HTTPError as e:
    out["abs"] = [e.code, ""]
import http.client
c = http.client.HTTPConnection(base.split("//")[1].split(":")[0], int(base.rsplit(":", 1)[1]), timeout=20)
c.request("CONNECT", "denied.example:443")
out["connect"] = [c.getresponse().status, ""]
out["plain_control"] = call("GET", f"http://allowed.example/?m={MARK}-control")
out["plain_header"] = call("GET", f"http://allowed.example/?m={MARK}-hdr", {"x-api-key": ph})
out["plain_url"] = call("GET", f"http://allowed.example/{ph}?m={MARK}-url")
print("CRED " + json.dumps(out), flush=True)
# Wait for the test's scans (`/tmp/cred-go`) and for three rounds of the leak watch to end
# (its probes show here as `/cyclix/bin/cyclix probe`; the last one may end with the agent and
# not count), at most 60 s.
def probing():
    for d in os.listdir("/proc"):
        try:
            argv = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if argv[0] == b"/cyclix/bin/cyclix" and b"probe" in argv:
            return True
    return False
rounds, was = 0, False
for _ in range(1200):
    now = probing()
    if was and not now:
        rounds += 1
    was = now
    if os.path.exists("/tmp/cred-go") and rounds >= 3:
        break
    time.sleep(0.05)
print(f"WATCHED {rounds}", flush=True)
"#;

/// The agent of the leak test: one request through the base URL, printed as `NOCA STATUS`.
const NO_CA_AGENT: &str = r#"import os, urllib.request, urllib.error
try:
    with urllib.request.urlopen(urllib.request.Request(os.environ["E2E_BASE_URL"] + "/v1/messages", data=b"{}", method="POST"), timeout=20) as r:
        print(f"NOCA {r.status}", flush=True)
except urllib.error.HTTPError as e:
    print(f"NOCA {e.code}", flush=True)
except Exception as e:
    print(f"NOCA 0 {e!r}", flush=True)
"#;

/// Shell: the real value as a needle file for `grep -F -f` (never in an argv).
fn needle(t: &str) -> String {
    format!(
        "sed -n 's/^E2E_API_KEY=//p' ~/.config/cyclix/tenants/{t}.env > /tmp/cred-needle; [ -s /tmp/cred-needle ] || exit 9"
    )
}

/// The hits of the mid-run scans, from the host: `NAME=N` words.
fn field(out: &str, name: &str) -> i64 {
    out.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or(-1)
}

#[test]
#[allow(clippy::too_many_lines)] // one run, every claim and its positive control
fn the_key_stays_outside_and_the_proxy_adds_it_for_the_api_host_only() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-cred";
    let mark = format!(
        "mk{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    // The real value exists only in the tenant's env file (mode 0600), made in the testbed.
    crate::common::tenant::key_file(tb, t, "E2E_API_KEY");
    Tenant::new(t)
        .file("cred_agent.py", AGENT)
        .agent_cmd(&format!(
            "[sh, -c, \"CRED_MARK={mark} exec python3 /work/cred_agent.py\"]"
        ))
        .agent_key(
            "credentials:\n    - env: E2E_API_KEY\n      host: api.example\n      header: x-api-key\n      \
             paths: [/v1/messages, /v1/models/*]\n      methods: [POST, GET]",
        )
        .gate_cmd("[\"true\"]")
        .extra_yaml("egress:\n  allow: [allowed.example]\n  ports: [80]\n  ca_certs: [/srv/testbed-ca.pem]")
        .write(tb);
    // Mid-run, from the host: every process's environment and argv, and every file the agent
    // can read (grep inside the agent container, the needle on stdin), each with its control.
    let n = needle(t);
    let scan = expect_success(
        &tb.user_sh(&format!(
            r#"set -e; {n}
systemctl --user start --no-block cyclix-run@{t}.service
a=; for i in $(seq 1 600); do
  a=$(podman ps --filter label=io.cyclix.tenant={t} --filter label=io.cyclix.role=agent --format '{{{{.Names}}}}' | head -1)
  r=${{a#cyclix-}}; r=${{r%-agent}}
  [ -n "$a" ] && podman exec "$a" test -e /proc/1 2>/dev/null && grep -q '^agent| CRED ' ~/.local/state/cyclix/runs/{t}/$r.agent.log 2>/dev/null && break
  a=; [ "$(systemctl --user show -P ActiveState cyclix-run@{t}.service)" = activating ] || [ $i -lt 20 ] || break; sleep 0.1
done
[ -n "$a" ] || {{ echo "no agent output"; exit 3; }}
run=${{a#cyclix-}}; run=${{run%-agent}}; p=cyclix-$run-proxy
echo "run=$run"
# Environments of the sandbox's processes (the run's units' cgroups; they run as this user),
# and as control the same scan over cyclix's own run unit, which holds the value by design.
envscan() {{ n=0; hits=0
  for d in /proc/[0-9]*; do
    grep -q "$1" $d/cgroup 2>/dev/null || continue
    n=$((n+1)); tr '\0' '\n' < $d/environ 2>/dev/null | grep -qF -f /tmp/cred-needle && hits=$((hits+1))
  done; echo "$n $hits"; }}
set -- $(envscan "cyclix-$run-"); scanned=$1; envhits=$2
set -- $(envscan "cyclix-run@{t}.service"); envctl=$2
apid=$(podman inspect -f '{{{{.State.Pid}}}}' "$a")
agentenv=$(tr '\0' '\n' < /proc/$apid/environ | grep -c '^E2E_API_KEY=' || true)
# Control for argv: a host process holding the value in its argv is found.
bash -c 'exec -a "cyclix-plant-$(cat /tmp/cred-needle)" sleep 30' & ctl=$!
for i in $(seq 1 100); do grep -qF -f /tmp/cred-needle /proc/$ctl/cmdline 2>/dev/null && break; sleep 0.02; done
argvctl=$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' | grep -cF -f /tmp/cred-needle || true)
kill $ctl; wait $ctl 2>/dev/null || true
argvhits=$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' | grep -cF -f /tmp/cred-needle || true)
# Files the agent can read, from inside its container.
filehits=$(podman exec -i "$a" sh -c 'cat > /tmp/.n; grep -rlsF -f /tmp/.n /etc /tmp /run /home /work /cyclix 2>/dev/null | grep -v "^/tmp/.n$" | wc -l; rm -f /tmp/.n' < /tmp/cred-needle)
podman exec -i "$a" sh -c 'cat > /tmp/planted-value' < /tmp/cred-needle
filectl=$(podman exec -i "$a" sh -c 'cat > /tmp/.n; grep -rlsF -f /tmp/.n /etc /tmp /run /home /work /cyclix 2>/dev/null | grep -v "^/tmp/.n$" | wc -l; rm -f /tmp/.n /tmp/planted-value' < /tmp/cred-needle)
# The proxy alone holds it: its mounted include file (control for the scans above).
proxyfile=$(podman exec "$p" cat /etc/cyclix/credentials.conf | grep -cF -f /tmp/cred-needle || true)
proxyenv=$(podman exec "$p" cat /proc/1/environ | tr '\0' '\n' | grep -cF -f /tmp/cred-needle || true)
# The proxy's memory with the credential configuration, after its TLS requests (KiB, RSS),
# with the pod's infra container (the budget is 40 MiB for both).
rss=$(podman top "$p" rss | tail -n +2 | awk '{{s+=$1}} END {{print s+0}}')
infra=$(podman top "cyclix-$run-infra" rss 2>/dev/null | tail -n +2 | awk '{{s+=$1}} END {{print s+0}}')
podman exec "$a" touch /tmp/cred-go
for i in $(seq 1 900); do
  s=$(systemctl --user show -P ActiveState cyclix-run@{t}.service); [ "$s" = activating ] || break; sleep 0.1
done
systemctl --user reset-failed cyclix-run@{t}.service 2>/dev/null || true
echo "scanned=$scanned envhits=$envhits agentenv=$agentenv envctl=$envctl argvhits=$argvhits argvctl=$argvctl filehits=$filehits filectl=$filectl proxyfile=$proxyfile proxyenv=$proxyenv proxyrss=$rss infrarss=$infra"
"#
        )),
        "run with a credential and scan it from the host",
    );
    let rec = record(tb, t);
    assert_eq!(rec["result"], "passed", "{rec:#}\n{scan}");
    assert!(
        rec["watch_rounds"].as_u64().is_some_and(|n| n >= 2),
        "the leak watch (host-side environment scan, the real value watched) ran during the run: {}",
        rec["watch_rounds"]
    );
    for (name, want) in [
        ("envhits", 0),
        ("agentenv", 1),
        ("argvhits", 0),
        ("filehits", 0),
        ("filectl", 1),
        ("proxyfile", 1),
        ("proxyenv", 0),
    ] {
        assert_eq!(field(&scan, name), want, "{name}: {scan}");
    }
    let rss = field(&scan, "proxyrss") + field(&scan, "infrarss");
    eprintln!("proxy + infra RSS with a credential: {rss} KiB ({scan})");
    assert!(
        field(&scan, "proxyrss") > 0 && rss < 40 * 1024,
        "the proxy's memory budget (40 MiB with the infra container): {scan}"
    );
    assert!(field(&scan, "argvctl") >= 1, "argv control: {scan}");
    assert!(
        field(&scan, "envctl") >= 1,
        "environ control (cyclix's own unit): {scan}"
    );
    assert!(
        field(&scan, "scanned") >= 3,
        "environ scan of the sandbox: {scan}"
    );
    // What the agent saw and got.
    let line = rec["agent_log"]
        .as_array()
        .expect("agent log")
        .iter()
        .filter_map(|l| l.as_str())
        .find_map(|l| l.strip_prefix("CRED "))
        .unwrap_or_else(|| panic!("no CRED line: {rec:#}"));
    let got: serde_json::Value = serde_json::from_str(line).expect("agent json");
    let ph = got["placeholder"].as_str().expect("placeholder");
    let hex = ph
        .strip_prefix("cyclix-placeholder-")
        .expect("placeholder shape");
    assert!(
        hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
        "{ph}"
    );
    let base = got["base"].as_str().expect("base");
    assert!(
        base.starts_with("http://10.213.") && base.ends_with(".2:3129"),
        "{base}"
    );
    let proxy_ip = base.trim_start_matches("http://").trim_end_matches(":3129");
    assert!(
        got["no_proxy"]
            .as_str()
            .is_some_and(|n| n.split(',').any(|e| e == proxy_ip)),
        "{got}"
    );
    let status = |k: &str| got[k][0].as_i64().unwrap_or(-1);
    for k in ["ok", "own", "get", "abs"] {
        assert_eq!(status(k), 200, "{k}: {got}");
        assert!(
            got[k][1]
                .as_str()
                .is_some_and(|b| b.contains("\"stand_in\": \"api.example\"")),
            "{k}: {got}"
        );
    }
    // Squid refuses CONNECT on an accel port itself (405) before any access rule.
    assert!(
        matches!(status("connect"), 403 | 405),
        "CONNECT through the credential port: {got}"
    );
    for k in ["path", "method", "dots", "plain_header", "plain_url"] {
        assert_eq!(status(k), 403, "{k} must be refused: {got}");
    }
    assert_eq!(
        status("plain_control"),
        200,
        "control: the allowed host answers: {got}"
    );
    // The proxy's log: each refusal with its reason.
    let decisions = rec["egress_decisions"].as_array().expect("decisions");
    let reason = |needle: &str| {
        decisions
            .iter()
            .find(|d| {
                d["url"].as_str().is_some_and(|u| u.contains(needle))
                    || d["host"].as_str() == Some(needle)
            })
            .and_then(|d| d["reason"].as_str().map(str::to_owned))
    };
    assert_eq!(
        reason("/v1/other").as_deref(),
        Some("credential_path_not_allowed"),
        "{decisions:#?}"
    );
    assert_eq!(
        reason(ph).as_deref(),
        Some("placeholder_refused"),
        "{decisions:#?}"
    );
    assert!(
        decisions
            .iter()
            .filter(|d| d["reason"] == "placeholder_refused")
            .count()
            >= 2,
        "the header and the URL placeholder are refused and logged: {decisions:#?}"
    );
    assert!(
        decisions
            .iter()
            .any(|d| d["reason"] == "credential_method_not_allowed"),
        "{decisions:#?}"
    );
    assert!(
        decisions
            .iter()
            .filter(|d| d["reason"] == "credential_added")
            .count()
            >= 4,
        "{decisions:#?}"
    );
    // The stand-in: the real key exactly once per request, never the placeholder, never the
    // agent's own key or Authorization, no Surrogate-Capability; refused requests never came.
    let log = expect_success(
        &tb.root_sh(&format!(
            "grep -F '{mark}' /run/testbed-api/requests.jsonl || true"
        )),
        "the stand-in's requests",
    );
    let real = expect_success(
        &tb.user_sh(&format!(
            "sed -n 's/^E2E_API_KEY=//p' ~/.config/cyclix/tenants/{t}.env"
        )),
        "the key (for comparison in this process only)",
    );
    let real = real.trim();
    let reqs: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("stand-in json"))
        .collect();
    let paths: Vec<&str> = reqs.iter().filter_map(|r| r["path"].as_str()).collect();
    assert_eq!(
        reqs.len(),
        4,
        "only the allowed requests reached the host: {paths:?}"
    );
    assert!(
        reqs.iter().all(|r| r["headers"]
            .to_string()
            .contains("[\"Host\",\"api.example\"]")),
        "every request carried Host api.example (the absolute URL for denied.example too): {log}"
    );
    for r in &reqs {
        let headers = r["headers"].as_array().expect("headers");
        let named = |n: &str| {
            headers
                .iter()
                .filter(|h| h[0].as_str().is_some_and(|k| k.eq_ignore_ascii_case(n)))
                .filter_map(|h| h[1].as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            named("x-api-key"),
            [real],
            "the real key exactly once: {}",
            r["path"]
        );
        assert!(
            named("authorization").is_empty(),
            "the agent's Authorization is removed"
        );
        assert!(
            named("surrogate-capability").is_empty(),
            "squid's accel header is removed"
        );
        let text = r.to_string();
        assert!(
            !text.contains(ph),
            "the placeholder reached the host: {text}"
        );
        assert!(
            !text.contains("agent-own-"),
            "the agent's own key reached the host: {text}"
        );
    }
    // 0 hits after the run: records, unit files, run dirs, the user journal; control: the same
    // scan over the env file the user wrote finds it.
    let hits = expect_success(
        &tb.user_sh(&format!(
            "{n}
             files=$(grep -rlF -f /tmp/cred-needle ~/.local/state/cyclix $XDG_RUNTIME_DIR/containers $XDG_RUNTIME_DIR/systemd \
               $XDG_RUNTIME_DIR/cyclix ~/.config/systemd 2>/dev/null | wc -l)
             journal=$(journalctl --user -o cat | grep -cF -f /tmp/cred-needle || true)
             control=$(grep -rlF -f /tmp/cred-needle ~/.local/state/cyclix ~/.config/cyclix/tenants 2>/dev/null | wc -l)
             rm -f /tmp/cred-needle; echo \"files=$files journal=$journal control=$control\""
        )),
        "search for the key",
    );
    assert_eq!(hits.trim(), "files=0 journal=0 control=1", "the key leaked");
    let left = leftovers(tb, rec["run_id"].as_str().expect("id"), t);
    assert!(left.trim().is_empty(), "{left}");
    expect_success(
        &tb.user_sh(&format!("rm -f ~/.config/cyclix/tenants/{t}.env")),
        "remove the key",
    );
}

#[test]
fn an_unset_credential_or_a_missing_ca_file_is_refused_before_anything_exists() {
    let _shared = crate::common::testbed::shared();
    let tb: &Testbed = prepared();
    let c = tb.cyclix_bin();
    let t = Tenant::new("e2e-cred-unset")
        .agent_key("credentials:\n    - {env: E2E_UNSET_KEY, host: api.example, header: x-api-key, paths: [/v1/messages]}")
        .extra_yaml("egress:\n  allow: [allowed.example]\n  ca_certs: [/srv/testbed-ca.pem]")
        .write(tb);
    let out = tb.user(&[&c, "run", &t, "--run-id", "e2e-cred-unset-1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("agent.credentials[0].env names `E2E_UNSET_KEY` but it is not set"),
        "{err}"
    );
    assert!(
        err.contains(&format!("tenants/{t}.env")),
        "the fix names the env file: {err}"
    );
    let left = leftovers(tb, "e2e-cred-unset-1", &t);
    assert!(left.trim().is_empty(), "{left}");
    let t = Tenant::new("e2e-cred-noca")
        .agent_key("credentials:\n    - {env: E2E_UNSET_KEY, host: api.example, header: x-api-key, paths: [/v1/messages]}")
        .extra_yaml("egress:\n  allow: [allowed.example]\n  ca_certs: [/srv/no-such-ca.pem]")
        .write(tb);
    let out = tb.user(&[&c, "run", &t, "--run-id", "e2e-cred-noca-1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("egress.ca_certs[0]: CA file `/srv/no-such-ca.pem`")
            && err.contains("fix: point `egress.ca_certs` at an existing PEM file"),
        "{err}"
    );
    assert!(
        err.contains(&format!("{t}.yaml:")),
        "the file and line are named: {err}"
    );
    let left = leftovers(tb, "e2e-cred-noca-1", &t);
    assert!(left.trim().is_empty(), "{left}");
}

#[test]
fn the_leak_watch_stops_a_run_whose_sandbox_holds_the_real_value() {
    // Positive control of the leak watch for a credential: the value planted into a sandbox
    // process's environment (from the host, on stdin) is found by the host-side scan.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-cred-leak";
    crate::common::tenant::key_file(tb, t, "E2E_API_KEY");
    // No `ca_certs` here: the stand-in's certificate (test CA) must then fail the proxy's
    // verification against the system CAs (control for the verification the main test relies on).
    Tenant::new(t)
        .file("noca.py", NO_CA_AGENT)
        .agent_cmd(r#"[sh, -c, "python3 /work/noca.py; exec sleep 60"]"#)
        .agent_key("credentials:\n    - {env: E2E_API_KEY, host: api.example, header: x-api-key, paths: [/v1/messages]}")
        .extra_yaml("egress:\n  allow: [allowed.example]")
        .write(tb);
    let run = inject_mid_run(
        tb,
        t,
        &format!(
            "for i in $(seq 1 300); do podman exec \"$a\" test -e /cyclix/ctl/go 2>/dev/null && break; sleep 0.1; done
             sed -n 's/^E2E_API_KEY=//p' ~/.config/cyclix/tenants/{t}.env | podman exec -i \"$a\" sh -c 'read -r v; export LEAKED=\"$v\"; exec sleep 60' &"
        ),
    );
    let rec = record_of(tb, t, &run);
    assert_eq!(rec["result"], "leak_detected", "{rec:#}");
    let noca = rec["agent_log"]
        .as_array()
        .expect("agent log")
        .iter()
        .filter_map(|l| l.as_str())
        .find_map(|l| l.strip_prefix("NOCA "))
        .unwrap_or_else(|| panic!("no NOCA line: {rec:#}"));
    assert!(
        noca.starts_with("502") || noca.starts_with("503"),
        "a host whose certificate the proxy cannot verify gets no request: {noca}"
    );
    let refusal = rec["refusal"].to_string();
    assert!(
        refusal.contains("the value of host variable E2E_API_KEY (credential value) is in LEAKED"),
        "{refusal}"
    );
    let left = leftovers(tb, &run, t);
    assert!(left.trim().is_empty(), "{left}");
    expect_success(
        &tb.user_sh(&format!("rm -f ~/.config/cyclix/tenants/{t}.env")),
        "remove the key",
    );
}

/// The budget agent: eight POSTs at once through the credential's base URL, all with bodies of
/// one length (squid would answer same-key lookups from one helper answer: attack review of
/// issue 31), each with the run's mark in its path; prints `BUDGET [[status, body], ...]`.
const BUDGET_AGENT: &str = r#"import json, os, threading, urllib.request, urllib.error
MARK = os.environ["CRED_MARK"]
base = os.environ["E2E_BASE_URL"]
got = [None] * 8
go = threading.Barrier(8)
def one(i):
    req = urllib.request.Request(f"{base}/v1/messages?m={MARK}-{i}", data=b'{"n": 0}', method="POST", headers={"content-type": "application/json"})
    go.wait()
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            got[i] = [r.status, r.read().decode()[:200]]
    except urllib.error.HTTPError as e:
        got[i] = [e.code, e.read().decode(errors="replace")[:600]]
    except Exception as e:
        got[i] = [0, repr(e)[:200]]
ts = [threading.Thread(target=one, args=(i,)) for i in range(8)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("BUDGET " + json.dumps(sorted(got, key=lambda g: g[0])), flush=True)
"#;

/// Issue 31: a credential with `budget: { requests: 3 }` and eight requests at once: three reach
/// the API host with the key, five are refused by the proxy with 429 and the budget's page; the
/// API host's log shows exactly three; the record and the summary say so. Control in the same
/// run: three went out (the cap is not "refuse all").
#[test]
fn a_credential_budget_refuses_the_request_past_it_with_429_and_the_record_counts() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-cred-budget";
    let mark = format!(
        "bud{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    crate::common::tenant::key_file(tb, t, "E2E_API_KEY");
    Tenant::new(t)
        .file("budget_agent.py", BUDGET_AGENT)
        .agent_cmd(&format!(
            "[sh, -c, \"CRED_MARK={mark} exec python3 /work/budget_agent.py\"]"
        ))
        .agent_key(
            "credentials:\n    - env: E2E_API_KEY\n      host: api.example\n      header: x-api-key\n      \
             paths: [/v1/messages]\n      budget: {requests: 3}",
        )
        .gate_cmd("[\"true\"]")
        .extra_yaml("egress:\n  allow: [allowed.example]\n  ports: [80]\n  ca_certs: [/srv/testbed-ca.pem]")
        .write(tb);
    let out = crate::common::run::start(tb, t);
    let rec = record(tb, t);
    let line = rec["agent_log"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .filter_map(|l| l.as_str())
                .find_map(|l| l.split_once("BUDGET ").map(|(_, j)| j.to_owned()))
        })
        .unwrap_or_else(|| panic!("no BUDGET line: {rec:#}\n{out:?}"));
    let got: Vec<(u16, String)> = serde_json::from_str(&line).expect("BUDGET json");
    let codes: Vec<u16> = got.iter().map(|(c, _)| *c).collect();
    assert_eq!(codes, [200, 200, 200, 429, 429, 429, 429, 429], "{got:?}");
    assert!(
        got[3].1.contains("budget for this API credential is spent")
            && got[3].1.contains("budget of 3 requests is spent"),
        "the 429 says why: {}",
        got[3].1
    );
    let api = expect_success(
        &tb.root_sh(&format!(
            "grep -cF '{mark}-' /run/testbed-api/requests.jsonl || true"
        )),
        "the API host's log",
    );
    assert_eq!(api.trim(), "3", "the API host saw exactly three requests");
    let c = &rec["credentials"][0];
    assert_eq!(c["env"], "E2E_API_KEY", "{rec:#}");
    assert_eq!(
        (
            c["requests"].as_u64(),
            c["refused_over_budget"].as_u64(),
            c["budget_requests"].as_u64()
        ),
        (Some(3), Some(5), Some(3)),
        "{c:#}"
    );
    assert!(
        c["request_bytes"].as_u64().is_some_and(|b| b >= 3 * 8),
        "{c:#}"
    );
    let status = expect_success(&tb.user(&[&tb.cyclix_bin(), "status", t]), "cyclix status");
    assert!(
        status.contains("credential E2E_API_KEY (api.example): 3 requests")
            && status.contains("budget 3 requests: 5 refused over it"),
        "{status}"
    );
    expect_success(
        &tb.user_sh(&format!("rm -f ~/.config/cyclix/tenants/{t}.env")),
        "remove the key",
    );
}
