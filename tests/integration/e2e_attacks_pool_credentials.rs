//! Attack review 19: the warm pool's credentials (issue 16). A pooled proxy bind-mounts an
//! empty `proxy-credentials.conf` from its run dir; the claim writes the real header lines
//! into it, SIGHUPs squid and waits for its journal to show every port reopened. Attacked by
//! an agent that has read the source, and by a tamperer of the pooled environment.
//!
//! - Read the key back through squid, on a claimed environment (the lines loaded): its cache
//!   manager (`config` by path, by absolute URL, `cache_object:`, behind `..`) on the
//!   credential port and on the forward port, `TRACE`/`OPTIONS` with `Max-Forwards: 0`, error
//!   pages of an over-long URL and an over-long header, `CONNECT` and an absolute URL for
//!   another host on the credential port, a pipelined manager request behind a good one, the
//!   placeholder to the API host through the forward port. Held: every byte squid sent back
//!   (kept by the agent, committed) holds no byte string of the key; the request for another
//!   host went to the stand-in API. Control: the same connection's good request reached the
//!   stand-in with the real key, and the agent's answers were kept (a 403 among them).
//! - Find the key after a warm run in the user's journal (squid's reload, the run's units),
//!   the record, `cyclix logs`, any file under `$XDG_RUNTIME_DIR` or the state dir. Held: 0
//!   hits each. Control: the agent's marker is found in the journal and in the record by the
//!   same scans, and the key file by the file scan.
//! - Keep the key past the run: a second name (hard link) of the filled environment's empty
//!   credential file, made before the claim. Broke, fixed: the claim's check looked at the
//!   file's type, owner, mode and size, not at its link count; the run claimed it warm, wrote
//!   the key through both names, and after the teardown removed the run dir the second name
//!   still held the key (measured before the fix: the run passed warm, the second name held
//!   the `request_header_add` line with the key). Now the check refuses a file with more than
//!   one name or another group than the fill gave it, and the hand-over judges the opened file
//!   (`O_NOFOLLOW`, `O_NONBLOCK`, the same checks on its metadata), so a symlink, a FIFO or a
//!   link made after the check gets nothing. Control: the run still passes (cold), and the
//!   stand-in saw the key from it.
//! - Leave the proxy frozen (`podman pause`) before the claim, so its reload cannot happen.
//!   Held: refused at the claim (`podman top` cannot list a paused container's processes),
//!   destroyed with nothing left; the run goes cold and passes. Control: the environment was
//!   ready and paused when the run began.
//! - Leave squid stopped (`SIGSTOP` from the user's namespace): its processes are listed, so
//!   the check passes, and the SIGHUP is never answered. Held: the hand-over gives up after
//!   15 s, the environment is destroyed (the key written into its file gone with its run dir:
//!   0 files under `$XDG_RUNTIME_DIR` or the state dir hold it), nothing is left, the run ends
//!   at its claim. Control: squid's processes were in state `T` when the run began.
//! - Kill the run (SIGKILL) in its hand-over, after it wrote the key and before its ledger took
//!   the environment over (squid stopped to hold it there, let go after). Broke, fixed: the
//!   environment stayed in `claimed/` with no run, its proxy running with the key loaded and
//!   the key in its file, `cyclix leftovers` calling it `pooled` (not a leftover); neither the
//!   tenant's next run nor a `pool fill` converged it (measured before the fix: after both,
//!   the proxy up, the file 131 bytes with the key). Now a claim, under the tenant lock,
//!   destroys every `claimed/` environment still under the pool's ledger (its run is dead) and
//!   forgets the state file of one a dead run took over (its ledger converges it). Control:
//!   after the kill the file held the key, the proxy ran, the environment was `claimed/`.
//! - Make the hand-over see a reload that did not happen. Hardened (not broken here): it
//!   counted squid's port lines (`| Accepting … HTTP Socket connections at`) anywhere in the
//!   proxy unit's journal past those there at the ask, so a start whose lines reached the
//!   journal late (a claim right after a fill, on a loaded host; squid logs its ports about
//!   80 ms after its container starts, the fill ends later, so not measured here) or a squid
//!   restarted under the claim would pass for the reload with the old, empty include. Now only
//!   squid's own cache-log lines count (its timestamp first: an access-log line whose URL the
//!   agent writes never does), and only after its `Reconfiguring Squid Cache` line that
//!   follows the ask (unit test `reloaded_only_once_every_port_reopened_after_a_reconfiguration`).

use std::sync::OnceLock;

use crate::common::run::{leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};
use crate::e2e_pool::{drain, fill};

/// The credential of every tenant here.
const CREDENTIAL: &str = "credentials:\n    - env: E2E_API_KEY\n      host: api.example\n      \
                          header: x-api-key\n      paths: [/v1/models/*]\n      methods: [GET]";

/// The agent: raw requests to the credential port (`E2E_BASE_URL`) and the forward port; every
/// byte squid sent back is kept (latin-1) in `a19.json` (committed).
const AGENT: &str = r#"import json, os, socket
MARK = "a19mark" + os.urandom(6).hex()
ph = os.environ["E2E_API_KEY"]
def hp(url):
    hp = url.split("//", 1)[1].split("/", 1)[0]
    return hp.rsplit(":", 1)[0], int(hp.rsplit(":", 1)[1])
CH, CP = hp(os.environ["E2E_BASE_URL"])
FH, FP = hp(os.environ["HTTP_PROXY"])
def send(req, host=CH, port=CP):
    try:
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(req)
        out = b""
        while len(out) < 262144:
            b = s.recv(65536)
            if not b:
                break
            out += b
        s.close()
        return out.decode("latin-1")
    except OSError as e:
        return "error: " + repr(e)
def get(target, extra=b"", method=b"GET"):
    return send(method + b" " + target + b" HTTP/1.1\r\nHost: api.example\r\nx-api-key: " + ph.encode() + b"\r\n" + extra + b"Connection: close\r\n\r\n")
me = f"{CH}:{CP}".encode()
out = {"mark": MARK}
out["ok"] = get(f"/v1/models/{MARK}-ok".encode())
out["mgr_path"] = get(b"/squid-internal-mgr/config")
out["mgr_abs"] = get(b"http://" + me + b"/squid-internal-mgr/config")
out["mgr_obj"] = send(b"GET cache_object://localhost/config HTTP/1.0\r\n\r\n")
out["mgr_dots"] = get(b"/v1/models/../../squid-internal-mgr/config")
out["mgr_models"] = get(b"/v1/models/squid-internal-mgr/config")
out["trace"] = get(b"/v1/models/m1", b"Max-Forwards: 0\r\n", b"TRACE")
out["options"] = get(b"*", b"Max-Forwards: 0\r\n", b"OPTIONS")
out["long_url"] = get(b"/v1/models/" + b"a" * 70000)
out["long_hdr"] = get(b"/v1/models/m1", b"x-a19: " + b"b" * 70000 + b"\r\n")
out["connect"] = send(b"CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n\r\n")
out["abs_other"] = get(f"http://denied.example/v1/models/{MARK}-abs".encode())
out["pipelined"] = send(f"GET /v1/models/{MARK}-pipe HTTP/1.1\r\nHost: api.example\r\n\r\nGET /squid-internal-mgr/config HTTP/1.1\r\nHost: api.example\r\nConnection: close\r\n\r\n".encode())
out["fwd_mgr"] = send(b"GET http://" + f"{FH}:{FP}".encode() + b"/squid-internal-mgr/config HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", FH, FP)
out["fwd_ph"] = send(f"GET http://api.example/v1/models/{MARK}-fwd HTTP/1.1\r\nHost: api.example\r\nx-api-key: {ph}\r\nConnection: close\r\n\r\n".encode(), FH, FP)
json.dump(out, open("a19.json", "w"))
print(MARK, flush=True)
"#;

/// Writes tenant `t` (credential, pool of 1, the agent `command`), its key file, and fills one
/// environment after draining what an earlier failed test left: the environment's id.
fn filled_tenant(tb: &Testbed, t: &str, command: &str) -> String {
    crate::common::tenant::key_file(tb, t, "E2E_API_KEY");
    Tenant::new(t)
        .file("a19.py", AGENT)
        .agent_cmd(command)
        .agent_key(CREDENTIAL)
        .gate_cmd("[\"true\"]")
        .extra_yaml("egress:\n  ca_certs: [/srv/testbed-ca.pem]\npool:\n  size: 1")
        .write(tb);
    drain(tb, t);
    let envs = fill(tb, t);
    assert_eq!(envs.len(), 1, "{envs:?}");
    envs[0].clone()
}

/// The key of tenant `t` (from its env file; into this process, never into an argv).
fn key(tb: &Testbed, t: &str) -> String {
    let k = expect_success(
        &tb.user_sh(&format!(
            "sed -n 's/^E2E_API_KEY=//p' ~/.config/cyclix/tenants/{t}.env"
        )),
        "read the key",
    );
    let k = k.trim().to_string();
    assert!(
        k.starts_with("sk-real-") && k.len() > 20,
        "a key: {} bytes",
        k.len()
    );
    k
}

/// The output of shell expression `what` (as the user; its stderr dropped).
fn shell(tb: &Testbed, what: &str) -> String {
    String::from_utf8_lossy(&tb.user_sh(&format!("({what}) 2>/dev/null")).stdout).to_string()
}

/// Whether the stand-in API recorded a request whose line holds `marker`, with `key`.
fn standin_saw(tb: &Testbed, marker: &str, key: &str) -> bool {
    shell(tb, "cat /run/testbed-api/requests.jsonl")
        .lines()
        .any(|l| l.contains(marker) && l.contains(key))
}

/// The warm run of the reflection agent: (record, the agent's answers, tenant).
fn reflected() -> &'static (serde_json::Value, serde_json::Value, &'static str) {
    static R: OnceLock<(serde_json::Value, serde_json::Value, &'static str)> = OnceLock::new();
    R.get_or_init(|| {
        let _shared = crate::common::testbed::shared();
        let tb = prepared();
        let t = "e2e-a19r";
        let e = filled_tenant(
            tb,
            t,
            r#"[sh, -c, "python3 a19.py && git add a19.json && git commit -qm a19"]"#,
        );
        let out = tb.user(&[&tb.cyclix_bin(), "run", t]);
        let rec = record(tb, t);
        assert!(out.status.success(), "{out:?}\n{rec:#}");
        assert_eq!(rec["environment"]["pooled"], true, "claimed warm: {rec:#}");
        assert_eq!(rec["run_id"], e.as_str(), "{rec:#}");
        let branch = rec["branch"].as_str().unwrap_or_default().to_string();
        let json = expect_success(
            &tb.user_sh(&format!("cd ~/src/{t} && git show {branch}:a19.json")),
            "read the agent's answers",
        );
        (rec, serde_json::from_str(&json).expect("a19.json"), t)
    })
}

#[test]
fn squid_gives_the_agent_no_answer_holding_the_key() {
    let (rec, got, t) = reflected();
    let tb = prepared();
    let mark = got["mark"].as_str().unwrap_or_default();
    // Positive control: the agent's good request reached the stand-in with the real key, and
    // its answers were kept (squid's 403 of the manager request among them).
    assert!(
        got["ok"].as_str().unwrap_or_default().contains(" 200 "),
        "{got:#}"
    );
    let k = key(tb, t);
    assert!(
        standin_saw(tb, &format!("{mark}-ok"), &k),
        "control: the stand-in saw the key on the agent's request: {rec:#}"
    );
    assert!(
        got["mgr_path"]
            .as_str()
            .unwrap_or_default()
            .contains(" 403 "),
        "control: squid's answer to a refused request was kept: {got:#}"
    );
    // The absolute URL for another host went to the stand-in API, nowhere else.
    assert!(
        got["abs_other"]
            .as_str()
            .unwrap_or_default()
            .contains("stand_in"),
        "{got:#}"
    );
    // Every answer, whole, and none with even the key's fixed prefix.
    let leaked: Vec<&String> = got
        .as_object()
        .map(|o| {
            o.keys()
                .filter(|n| {
                    let a = o[*n].as_str().unwrap_or_default();
                    a.contains(&k) || a.contains("sk-real-")
                })
                .collect()
        })
        .unwrap_or_default();
    assert!(
        leaked.is_empty(),
        "squid's answers to {leaked:?} hold the key: {got:#}"
    );
}

#[test]
fn the_key_is_in_no_journal_record_or_log_after_a_warm_run() {
    let (rec, got, t) = reflected();
    let tb = prepared();
    let id = rec["run_id"].as_str().unwrap_or_default();
    let mark = got["mark"].as_str().unwrap_or_default();
    let k = key(tb, t);
    let scans = [
        "journalctl --user -o verbose --no-pager".to_string(),
        format!("cat ~/.local/state/cyclix/runs/{t}/*.json"),
        format!("{} logs {t} --run {id} -n 0", tb.cyclix_bin()),
    ];
    for scan in &scans {
        // Positive control: the same scan shows the agent's marker (the journal: squid's
        // decision line for its request; the record and the logs: its output).
        let text = shell(tb, scan);
        assert!(
            text.contains(mark),
            "control: `{scan}` shows the marker {mark}"
        );
        assert!(!text.contains(&k), "`{scan}` holds the key");
    }
    // Every file the user's runtime dir, state dir and containers config hold (not the
    // tenant's env file, in ~/.config/cyclix): the key file itself is the control.
    let files = "grep -rlaF -D skip -f /tmp/a19-needle";
    let found = expect_success(
        &tb.user_sh(&format!(
            "set -e; sed -n 's/^E2E_API_KEY=//p' ~/.config/cyclix/tenants/{t}.env > /tmp/a19-needle
             echo control: $({files} ~/.config/cyclix/tenants | wc -l)
             echo found: $({files} $XDG_RUNTIME_DIR ~/.local/state ~/.config/containers 2>/dev/null | wc -l)"
        )),
        "scan the files",
    );
    assert!(
        found.contains("control: 1\nfound: 0"),
        "files holding the key (the control: its env file): {found}"
    );
    assert_eq!(leftovers(tb, id, t).trim(), "", "what is left of {id}");
}

#[test]
fn a_second_name_of_the_credential_file_is_refused_at_the_claim() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-a19l";
    let e = filled_tenant(tb, t, "[python3, a19.py]");
    let second = "$XDG_RUNTIME_DIR/a19-second-name";
    expect_success(
        &tb.user_sh(&format!(
            "set -e; rm -f {second}; ln $XDG_RUNTIME_DIR/cyclix/runs/{e}/proxy-credentials.conf {second}"
        )),
        "a second name",
    );
    let out = tb.user(&[&tb.cyclix_bin(), "run", t]);
    let rec = record(tb, t);
    let kept = shell(tb, &format!("cat {second}"));
    let _ = tb.user_sh(&format!("rm -f {second}"));
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    let k = key(tb, t);
    assert!(
        !kept.contains(&k),
        "the second name kept the key after the run ({} bytes): {rec:#}",
        kept.len()
    );
    assert_eq!(rec["environment"]["pooled"], false, "refused: {rec:#}");
    assert!(
        rec["notices"]
            .to_string()
            .contains(&format!("environment {e} refused at the claim"))
            && rec["notices"].to_string().contains("2 names"),
        "{:#}",
        rec["notices"]
    );
    // Control: the key was in play in this run (the stand-in saw it), so a second name of
    // the file it went into would have held it.
    let mark = rec["agent_log"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l.as_str())
        .find(|l| l.starts_with("a19mark"))
        .unwrap_or_else(|| panic!("the agent printed its marker: {rec:#}"))
        .trim()
        .to_string();
    assert!(standin_saw(tb, &format!("{mark}-ok"), &k), "{rec:#}");
    assert_eq!(leftovers(tb, &e, t).trim(), "", "what is left of {e}");
}

#[test]
fn a_frozen_proxy_is_never_used() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-a19f";
    let e = filled_tenant(tb, t, "[python3, a19.py]");
    // Control: the environment is ready and its proxy paused when the run begins.
    let state = expect_success(
        &tb.user_sh(&format!(
            "set -e; podman pause cyclix-{e}-proxy >/dev/null; podman inspect -f '{{{{.State.Status}}}}' cyclix-{e}-proxy; ls $XDG_RUNTIME_DIR/cyclix/pool/{t}/ready/"
        )),
        "pause the proxy",
    );
    assert!(state.contains("paused") && state.contains(&e), "{state}");
    let out = tb.user(&[&tb.cyclix_bin(), "run", t]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    // A hand-over that fails ends the run before its record; a cold run writes one.
    let rec: serde_json::Value = serde_json::from_str(&shell(
        tb,
        &format!("cat ~/.local/state/cyclix/runs/{t}/latest.json"),
    ))
    .unwrap_or_default();
    let warm_used = rec["run_id"] == e.as_str();
    let _ = tb.user_sh(&format!("podman unpause cyclix-{e}-proxy 2>/dev/null"));
    assert!(
        !warm_used,
        "the run went on with the frozen proxy: {stderr}\n{rec:#}"
    );
    // Refused at the claim (the run went cold) or failed at the hand-over: destroyed either way.
    for state in ["ready", "claimed"] {
        let files = crate::e2e_pool::pool_files(tb, t, state);
        assert!(!files.contains(e.as_str()), "{state}/: {files}\n{stderr}");
    }
    // Cold, the run passes; failed at the hand-over, it says so.
    assert!(
        out.status.success() && rec["environment"]["pooled"] == false
            || stderr.contains(&format!("environment {e}")),
        "{stderr}\n{rec:#}"
    );
    assert_eq!(
        leftovers(tb, &e, t).trim(),
        "",
        "what is left of {e}\n{stderr}"
    );
}

#[test]
fn a_proxy_that_does_not_reload_is_never_used() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-a19s";
    let e = filled_tenant(tb, t, "[python3, a19.py]");
    // squid stopped (SIGSTOP from the user's namespace): its processes are still listed, so
    // the claim's check passes, and the SIGHUP waits unanswered.
    let stopped = expect_success(
        &tb.user_sh(&format!(
            "set -e; p=$(podman top cyclix-{e}-proxy hpid comm | awk '$2 ~ /^squid/ {{print $1}}')
             [ -n \"$p\" ]; for i in $p; do podman unshare kill -STOP $i; done
             st() {{ for i in $p; do echo state=$(awk '{{print $3}}' /proc/$i/stat); done; }}
             n=0; while st | grep -qv state=T && [ $n -lt 40 ]; do sleep 0.05; n=$((n+1)); done; st"
        )),
        "stop squid",
    );
    assert!(
        stopped.contains("state=T") && !stopped.contains("state=S"),
        "control: squid is stopped: {stopped}"
    );
    let out = tb.user(&[&tb.cyclix_bin(), "run", t]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "the run went on: {stderr}");
    assert!(
        stderr.contains(&format!(
            "handing the run's credentials to environment {e}'s proxy failed, the environment is destroyed"
        )) && stderr.contains("did not reload its credentials within 15 s"),
        "{stderr}"
    );
    for state in ["ready", "claimed"] {
        let files = crate::e2e_pool::pool_files(tb, t, state);
        assert!(!files.contains(e.as_str()), "{state}/: {files}\n{stderr}");
    }
    // The run ended at its claim (no record of it: its agent never started), and the key
    // written into the destroyed environment's file is gone with its run dir.
    let records = shell(tb, &format!("ls ~/.local/state/cyclix/runs/{t}/"));
    assert!(!records.contains(e.as_str()), "a record of {e}: {records}");
    let found = shell(
        tb,
        &format!(
            "sed -n 's/^E2E_API_KEY=//p' ~/.config/cyclix/tenants/{t}.env > /tmp/a19-needle; \
             grep -rlaF -D skip -f /tmp/a19-needle $XDG_RUNTIME_DIR ~/.local/state | wc -l"
        ),
    );
    assert_eq!(
        found.trim(),
        "0",
        "files holding the key after the failed hand-over"
    );
    assert_eq!(
        leftovers(tb, &e, t).trim(),
        "",
        "what is left of {e}\n{stderr}"
    );
}

#[test]
fn a_run_killed_in_its_hand_over_leaves_no_proxy_holding_the_key() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-a19k";
    let e = filled_tenant(tb, t, "[python3, a19.py]");
    // squid stopped so the hand-over waits after writing the key; the run SIGKILLed then, and
    // squid let go: it reloads the key, in a `claimed/` environment no run holds.
    let killed = expect_success(
        &tb.user_sh(&format!(
            "set -e; p=$(podman top cyclix-{e}-proxy hpid comm | awk '$2 ~ /^squid/ {{print $1}}')
             [ -n \"$p\" ]; for i in $p; do podman unshare kill -STOP $i; done
             f=$XDG_RUNTIME_DIR/cyclix/runs/{e}/proxy-credentials.conf
             {c} run {t} >/dev/null 2>&1 & c=$!
             n=0; while [ ! -s $f ] && [ $n -lt 2400 ] && kill -0 $c 2>/dev/null; do sleep 0.05; n=$((n+1)); done
             if [ ! -s $f ]; then
               kill -9 $c 2>/dev/null || true; wait $c || true; for i in $p; do podman unshare kill -CONT $i; done
               echo \"cyclix run never wrote $f (it ended, or 120 s passed): the hand-over was not reached\" >&2; exit 1
             fi
             kill -9 $c; wait $c || true; for i in $p; do podman unshare kill -CONT $i; done
             echo claimed=$(ls $XDG_RUNTIME_DIR/cyclix/pool/{t}/claimed/)
             echo proxy=$(podman inspect -f '{{{{.State.Status}}}}' cyclix-{e}-proxy)",
            c = tb.cyclix_bin()
        )),
        "kill the run in its hand-over",
    );
    let k = key(tb, t);
    let file = shell(
        tb,
        &format!("cat $XDG_RUNTIME_DIR/cyclix/runs/{e}/proxy-credentials.conf"),
    );
    // Control: the attack got that far (the key in the live proxy's file, claimed, no run).
    assert!(
        file.contains(&k) && killed.contains(&format!("claimed={e}@{e}")),
        "{killed}"
    );
    assert!(killed.contains("proxy=running"), "{killed}");
    // The tenant's next run converges it before it claims.
    let out = tb.user(&[&tb.cyclix_bin(), "run", t]);
    let rec = record(tb, t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert!(
        rec["notices"].to_string().contains(&format!(
            "destroyed environment {e}, claimed by a run that died before taking it over"
        )),
        "{:#}",
        rec["notices"]
    );
    let claimed = crate::e2e_pool::pool_files(tb, t, "claimed");
    assert!(!claimed.contains(e.as_str()), "claimed/: {claimed}");
    let found = shell(
        tb,
        &format!(
            "sed -n 's/^E2E_API_KEY=//p' ~/.config/cyclix/tenants/{t}.env > /tmp/a19-needle; \
             grep -rlaF -D skip -f /tmp/a19-needle $XDG_RUNTIME_DIR ~/.local/state | wc -l"
        ),
    );
    assert_eq!(
        found.trim(),
        "0",
        "files holding the key after the next run"
    );
    assert_eq!(leftovers(tb, &e, t).trim(), "", "what is left of {e}");
}
