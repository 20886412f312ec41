//! Issue 14: real agent CLIs from their presets, on the testbed. The preset's own parts — the
//! pod's keep-id user namespace with the CLI's non-root uid, the task on stdin with the
//! environment in front of it, the fixed variables, the credential kept outside — are shown
//! first with the demo image as an override (fast, no CLI image needed); the real `claude` and
//! `codex` CLIs then run against the scripted stand-in of the model API on the outside host.

use crate::common::run::{leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// The tenant env file holding a credential's real value (mode 0600, made inside the testbed);
/// returns nothing, the value never leaves the testbed.
fn key_file(tb: &Testbed, t: &str, var: &str) {
    expect_success(
        &tb.user_sh(&format!(
            "set -e; mkdir -p ~/.config/cyclix/tenants; umask 077
             printf '{var}=sk-real-%s\\n' \"$(head -c 18 /dev/urandom | base64 | tr -d '/+=')\" > ~/.config/cyclix/tenants/{t}.env"
        )),
        "make the key",
    );
}

#[test]
fn a_preset_agent_runs_as_its_uid_with_the_task_on_stdin_and_the_override_recorded() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-preset-uid";
    key_file(tb, t, "ANTHROPIC_API_KEY");
    // The demo agent stands in for the CLI: it prints what it is and what arrived on stdin,
    // then fixes the demo bug and commits as the preset's uid.
    Tenant::new(t)
        .preset_overridden("claude-code")
        .agent_cmd(
            r#"[sh, -c, "grep -c 'Where you are' - > /tmp/stdin-count; cyclix-demo-agent; rc=$?; echo UID=$(id -u) GID=$(id -g) OWNER=$(stat -c %u /work) STDIN_HAS_ENV=$(cat /tmp/stdin-count); echo CONFIG=$CLAUDE_CONFIG_DIR BASE=$ANTHROPIC_BASE_URL; exit $rc"]"#,
        )
        .extra_yaml("egress:\n  allow: [allowed.example]\n  ca_certs: [/srv/testbed-ca.pem]")
        .write(tb);
    let out = tb.user(&["systemctl", "--user", "start", &format!("cyclix-run@{t}")]);
    let rec = record(tb, t);
    let log = rec["agent_log"].to_string();
    assert!(out.status.success(), "run failed: {rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert!(
        log.contains("UID=1000 GID=1000"),
        "the CLI runs as the preset's uid: {log}"
    );
    assert!(
        log.contains("OWNER=1000"),
        "keep-id: the work tree is the uid's own: {log}"
    );
    assert!(
        log.contains("STDIN_HAS_ENV=1"),
        "the task with its environment on stdin: {log}"
    );
    assert!(log.contains("CONFIG=/tmp/.claude"), "{log}");
    assert!(
        log.contains("BASE=http://10.213."),
        "the base URL is the proxy's: {log}"
    );
    assert_eq!(rec["commits"].as_array().map(Vec::len), Some(1), "{rec:#}");
    let p = &rec["preset"];
    assert_eq!(p["name"], "claude-code");
    assert_eq!(
        p["overridden"],
        serde_json::json!(["agent.image", "agent.command"])
    );
    let probes = rec["probes"].as_array().expect("probes");
    assert!(
        probes.iter().all(|p| p["verdict"] == "PASS"),
        "every probe passes as uid 1000: {probes:#?}"
    );
    // The override's stream is not stream-json: the report says so instead of inventing one.
    assert_eq!(
        rec["agent_report"]["final_message"],
        serde_json::Value::Null,
        "{rec:#}"
    );
    let left = leftovers(tb, rec["run_id"].as_str().expect("run id"), t);
    assert!(left.is_empty(), "leftovers: {left}");
}
