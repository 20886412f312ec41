//! The warm pool (issue 16) for a tenant with `agent.credentials`: the fill's environment
//! holds no credential (its proxy's credential file is empty, nothing of the value in the
//! environment's files or its containers' configuration), a run claims it warm, its request
//! through the credential port reaches the stand-in API with the real key (the proxy reloaded
//! with the lines the claim wrote), the agent's environment holds only the placeholder, and
//! the value is then found in the proxy's file (the positive control of the scans).

use crate::common::run::{leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;
use crate::e2e_pool::{drain, fill};

/// The agent: one request to the credential port, printed as `PCRED STATUS HAS_KEY_IN_ENV`.
const AGENT: &str = r#"import os, urllib.request, urllib.error
base = os.environ["E2E_BASE_URL"]
ph = os.environ["E2E_API_KEY"]
try:
    with urllib.request.urlopen(urllib.request.Request(base + "/v1/models/m1", method="GET", headers={"x-api-key": ph}), timeout=20) as r:
        st = r.status
except urllib.error.HTTPError as e:
    st = e.code
real = open("/proc/self/environ", "rb").read().count(b"sk-real-")
print(f"PCRED {st} {real} {ph.startswith('cyclix-placeholder-')}", flush=True)
"#;

/// Writes tenant `t`: the agent above, one credential for the stand-in API, a pool of 1.
fn cred_tenant(tb: &crate::common::testbed::Testbed, t: &str) {
    crate::common::tenant::key_file(tb, t, "E2E_API_KEY");
    Tenant::new(t)
        .file("pcred_agent.py", AGENT)
        .agent_cmd("[python3, /work/pcred_agent.py]")
        .agent_key(
            "credentials:\n    - env: E2E_API_KEY\n      host: api.example\n      header: x-api-key\n      \
             paths: [/v1/models/*]\n      methods: [GET]",
        )
        .gate_cmd("[\"true\"]")
        .extra_yaml("egress:\n  ca_certs: [/srv/testbed-ca.pem]\npool:\n  size: 1")
        .write(tb);
}

#[test]
fn a_credential_tenant_claims_a_warm_environment_that_held_no_secret() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-poolcred";
    cred_tenant(tb, t);
    drain(tb, t);
    let envs = fill(tb, t);
    assert_eq!(envs.len(), 1, "{envs:?}");
    let e = &envs[0];
    // The value as a needle file (never in an argv); the scans of the filled environment.
    let scan = |what: &str| {
        expect_success(
            &tb.user_sh(&format!(
                "set -e; sed -n 's/^E2E_API_KEY=//p' ~/.config/cyclix/tenants/{t}.env > /tmp/pcred-needle
                 [ -s /tmp/pcred-needle ] || exit 9
                 f=$(grep -rlsF -f /tmp/pcred-needle $XDG_RUNTIME_DIR/cyclix/runs/{e} $XDG_RUNTIME_DIR/containers/systemd $XDG_RUNTIME_DIR/cyclix/pool/{t} | wc -l)
                 i=$(podman inspect cyclix-{e}-proxy cyclix-{e}-infra | grep -cF -f /tmp/pcred-needle || true)
                 s=$(podman secret ls --format '{{{{.Name}}}}' | grep -c 'cyclix-{e}' || true)
                 echo \"files=$f inspect=$i secrets=$s size=$(stat -c %s $XDG_RUNTIME_DIR/cyclix/runs/{e}/proxy-credentials.conf 2>/dev/null || echo gone)\""
            )),
            what,
        )
    };
    let before = scan("scan the filled environment");
    assert!(
        before.contains("files=0 inspect=0 secrets=0 size=0"),
        "{before}"
    );
    let out = tb.user(&[&tb.cyclix_bin(), "run", t]);
    let rec = record(tb, t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    crate::e2e_boundary::assert_all_probes_pass(&rec);
    assert_eq!(rec["environment"]["pooled"], true, "{rec:#}");
    assert_eq!(rec["run_id"], e.as_str(), "{rec:#}");
    // The queue comes first (a run holds no claim while it waits for a slot); the hand-over
    // is timed as the phase right after the claim.
    let names: Vec<&str> = rec["phases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str())
        .take(3)
        .collect();
    assert_eq!(names, ["queue", "claim", "credentials"], "{rec:#}");
    let line = rec["agent_log"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l.as_str())
        .find_map(|l| l.strip_prefix("PCRED "))
        .unwrap_or_else(|| panic!("no PCRED line: {rec:#}"))
        .to_string();
    assert_eq!(line, "200 0 True", "{rec:#}");
    // The stand-in API host saw the real key on the agent's request.
    let seen = expect_success(
        &tb.user_sh(&format!(
            "sed -n 's/^E2E_API_KEY=//p' ~/.config/cyclix/tenants/{t}.env > /tmp/pcred-needle; \
             grep -cF -f /tmp/pcred-needle /run/testbed-api/requests.jsonl || true"
        )),
        "the stand-in's requests",
    );
    assert!(
        seen.trim().parse::<u32>().is_ok_and(|n| n >= 1),
        "the stand-in saw the key: {seen}"
    );
    let left = leftovers(tb, e, t);
    assert!(left.trim().is_empty(), "left by {e}:\n{left}");
}

#[test]
fn a_run_whose_inputs_fail_after_its_claim_destroys_the_claimed_environment() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-poolunset";
    Tenant::new(t)
        .agent_key("env: [E2E_POOL_SET_NOWHERE]")
        .gate_cmd("[\"true\"]")
        .extra_yaml("pool:\n  size: 1")
        .write(tb);
    drain(tb, t);
    let envs = fill(tb, t);
    assert_eq!(envs.len(), 1, "{envs:?}");
    let e = &envs[0];
    // Control: the filled environment's objects are there, held by the pool.
    assert_eq!(
        crate::e2e_pool::leftover_statuses(tb, e).0,
        ["pooled"],
        "the filled environment"
    );
    let out = tb.user(&[&tb.cyclix_bin(), "run", t]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("agent.env names `E2E_POOL_SET_NOWHERE` but it is not set")
            && stderr.contains(&format!("tenants/{t}.yaml")),
        "{stderr}"
    );
    // The run claimed it and, failing, destroyed it: it is in neither `ready/` nor `claimed/`
    // (what an earlier failed test left there is not this one's) and none of its objects remain.
    for state in ["ready", "claimed"] {
        let files = crate::e2e_pool::pool_files(tb, t, state);
        assert!(!files.contains(e.as_str()), "{state}/ of the pool: {files}");
    }
    // Only this environment's rows count: the exit code is the whole host's, and a test running
    // beside this one may have objects of its own listed.
    let (left, _) = crate::e2e_pool::leftover_statuses(tb, e);
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(leftovers(tb, e, t).trim(), "", "what is left of {e}");
}

#[test]
fn a_run_killed_in_its_credential_hand_over_leaves_no_key_in_a_proxy_once_converged() {
    // Issue 36 item 4: SIGKILL right after the claimed proxy got the real key, before the run
    // took the environment over (fail point `claim.handed`).
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-poolhandkill";
    cred_tenant(tb, t);
    drain(tb, t);
    let envs = fill(tb, t);
    assert_eq!(envs.len(), 1, "{envs:?}");
    let e = &envs[0];
    // A ready environment holds no failed unit: its agent unit runs, held for the claim
    // (`e2e_pool_held`; before, the pod's start pulled it in and it failed for want of a work
    // tree, at every fill).
    let units = expect_success(
        &tb.user_sh(&format!(
            "systemctl --user list-units --all --no-legend --plain 'cyclix-{e}-*' | awk '{{print $1, $3, $4}}'"
        )),
        "the ready environment's units",
    );
    assert!(
        units.contains(&format!("cyclix-{e}-agent.service active running"))
            && !units.contains("failed"),
        "{units}"
    );
    let c = tb.cyclix_bin();
    let out = expect_success(
        &tb.user_sh(&format!(
            "CYCLIX_FAILPOINTS=claim.handed {c} run {t} >/tmp/{t}.out 2>&1; echo \"rc=$?\"
             sed -n 's/^E2E_API_KEY=//p' ~/.config/cyclix/tenants/{t}.env > /tmp/{t}-needle
             echo \"key_in_proxy=$(grep -cF -f /tmp/{t}-needle $XDG_RUNTIME_DIR/cyclix/runs/{e}/proxy-credentials.conf 2>/dev/null || echo 0)\"
             echo \"proxy_up=$(podman ps -q --filter name=cyclix-{e}-proxy | wc -l)\"
             {c} leftovers --json > /tmp/{t}-left.json; echo \"leftovers_rc=$?\"
             echo \"dead_claim=$(grep -c '\"dead-claim\"' /tmp/{t}-left.json)\"
             {c} pool expire {t}; echo \"expire_rc=$?\"
             echo \"proxy_after=$(podman ps -aq --filter name=cyclix-{e}- | wc -l)\"
             echo \"claimed_after=$(ls $XDG_RUNTIME_DIR/cyclix/pool/{t}/claimed | wc -l)\""
        )),
        "kill the run in its hand-over, then converge",
    );
    let field = |k: &str| crate::common::kv(&out, k);
    assert_eq!(field("rc"), "137", "killed by the fail point:\n{out}");
    // The positive control: the dead run's claimed proxy runs with the real key.
    assert_eq!(field("key_in_proxy"), "1", "{out}");
    assert_eq!(field("proxy_up"), "1", "{out}");
    // leftovers tells the truth about it (before: `pooled`, exit 0) ...
    assert_ne!(field("leftovers_rc"), "0", "{out}");
    assert_ne!(field("dead_claim"), "0", "{out}");
    // ... and the fix it names removes it (before: `pool expire` left claimed ones alone).
    assert!(
        out.contains(&format!(
            "destroyed environment {e}, claimed by a run that died"
        )),
        "{out}"
    );
    assert_eq!(field("expire_rc"), "0", "{out}");
    assert_eq!(field("proxy_after"), "0", "{out}");
    assert_eq!(field("claimed_after"), "0", "{out}");
    assert_eq!(leftovers(tb, e, t).trim(), "", "what is left of {e}");
    // The next ordinary run passes (cold: the pool was emptied).
    let run = tb.user(&[&c, "run", t]);
    let rec = record(tb, t);
    assert!(run.status.success(), "{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
}
