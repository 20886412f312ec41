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

#[test]
fn a_credential_tenant_claims_a_warm_environment_that_held_no_secret() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-poolcred";
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
    // The hand-over is timed as the record's second phase, right after the claim.
    let names: Vec<&str> = rec["phases"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str())
        .take(2)
        .collect();
    assert_eq!(names, ["claim", "credentials"], "{rec:#}");
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
