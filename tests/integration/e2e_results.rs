//! Results that say what happened (issue 32 item 3) on the real stack: an agent that runs
//! past `agent.timeout` ends `agent_timeout` (exit 1, the key named), not `error` with
//! systemd's `RuntimeMaxSec=` in the text, and `status` shows the record without calling the
//! run's own failed start one that failed before its record.

use crate::common::run::{leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

#[test]
fn an_agent_past_its_timeout_ends_agent_timeout_and_status_agrees_with_the_record() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-res-timeout")
        .agent_cmd(r#"[sh, -c, "echo working; exec sleep 600"]"#)
        .no_timeouts()
        .agent_key("timeout: 10s")
        .gate_key("timeout: 2m")
        .write(tb);
    let c = tb.cyclix_bin();
    let out = expect_success(
        &tb.user_sh(&format!(
            "systemctl --user start cyclix-run@{t}.service 2>/dev/null
             echo \"unit_status=$(systemctl --user show -P ExecMainStatus cyclix-run@{t}.service)\"
             echo '<<status'; {c} status {t}; echo 'status>>'
             systemctl --user reset-failed cyclix-run@{t}.service 2>/dev/null; true"
        )),
        "a run whose agent runs past its timeout",
    );
    let rec = record(tb, &t);
    assert_eq!(rec["result"], "agent_timeout", "{rec:#}");
    assert!(rec["error"].is_null(), "not a failure of cyclix: {rec:#}");
    assert_eq!(
        crate::common::kv(&out, "unit_status"),
        "1",
        "exit 1:\n{out}"
    );
    let causes = rec["causes"].to_string();
    assert!(causes.contains("`agent.timeout` (10 s)"), "{rec:#}");
    assert!(!rec.to_string().contains("RuntimeMaxSec"), "{rec:#}");
    // The agent's output so far is kept.
    assert!(rec["agent_log"].to_string().contains("working"), "{rec:#}");
    let status = out
        .split("<<status")
        .nth(1)
        .and_then(|s| s.split("status>>").next())
        .unwrap_or_default();
    assert!(
        status.contains("agent_timeout")
            && !status.contains("failed before its run wrote a record"),
        "status agrees with the record:\n{status}"
    );
    let left = leftovers(tb, rec["run_id"].as_str().expect("id"), &t);
    assert!(left.trim().is_empty(), "{left}");
}

/// An allowlisted host the machine cannot reach: the run is refused before the agent (its
/// positive controls cannot pass), and the refusal names the host, what squid answered and
/// what to do (before: five lines that never named it). The reachable allowlisted host of
/// the demo is the positive control: the same spec with it passes.
#[test]
fn an_unreachable_allowlisted_host_is_named_in_the_probe_refusal() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-res-gonehost")
        .egress_allow(&["gone-host.invalid"], &[80])
        .write(tb);
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rec = record(tb, &t);
    assert_eq!(rec["result"], "probe_refused", "{rec:#}");
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let named = "the allowlisted gone-host.invalid:80 did not answer through the proxy";
    assert!(
        rec["causes"][0]
            .as_str()
            .is_some_and(|c| c.starts_with(named)),
        "the first cause names the host: {rec:#}"
    );
    assert!(
        stdout.contains(named) && stdout.contains("egress.allow"),
        "{stdout}"
    );
    let left = leftovers(tb, rec["run_id"].as_str().expect("id"), &t);
    assert!(left.trim().is_empty(), "{left}");
    // The positive control: the testbed's reachable allowlisted host passes the same probes.
    let ok = Tenant::new("e2e-res-reachable")
        .egress_allow(&["allowed.example"], &[80])
        .write(tb);
    let out = tb.user(&[&tb.cyclix_bin(), "run", &ok]);
    let rec = record(tb, &ok);
    assert!(out.status.success(), "{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
}

/// Requests the allowlist let through but the proxy could not forward (the host does not
/// resolve) are counted apart in the summary's egress line (before: "3 requests, 0 denied"
/// when all had failed); the request that reached the allowlisted host is the positive
/// control (counted, not failed).
#[test]
fn allowed_requests_that_never_reached_their_host_are_counted_failed_upstream() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let agent = "import urllib.request as u\nfor h in ['gone-host.invalid', 'gone-host.invalid', 'allowed.example']:\n    try:\n        print(h, u.urlopen('http://' + h + '/', timeout=20).status)\n    except Exception as e:\n        print(h, e)\n";
    let t = Tenant::new("e2e-res-upstream")
        .file("upstream_agent.py", agent)
        .agent_cmd("[python3, /work/upstream_agent.py]")
        .egress_allow(&["allowed.example", "gone-host.invalid"], &[80])
        .write(tb);
    let _ = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    assert_eq!(rec["agent_exit"], 0, "{rec:#}");
    let status = expect_success(&tb.user(&[&tb.cyclix_bin(), "status", &t]), "status");
    assert!(
        status.contains("the agent made 3 requests, 0 denied, 2 failed upstream"),
        "{status}"
    );
}

/// `cyclix egress suggest` (issue 32 item 7): the hosts the proxy refused the agent for being
/// off the allowlist, with counts and a first URL, and the exact entries that would allow
/// them (never a wildcard); it edits nothing. The probes' own refusals
/// (`denied.example`) are the positive control of the filter: they are in the record, not in
/// the suggestion.
#[test]
fn egress_suggest_names_the_refused_hosts_and_the_lines_that_would_allow_them() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let agent = "import urllib.request as u\nfor h in ['a.cdn.example.com', 'b.cdn.example.com', 'pypi.org', 'pypi.org']:\n    try:\n        u.urlopen('http://' + h + '/simple/', timeout=20)\n    except Exception as e:\n        print(h, e)\n";
    let t = Tenant::new("e2e-res-suggest")
        .file("suggest_agent.py", agent)
        .agent_cmd("[python3, /work/suggest_agent.py]")
        .egress_allow(&["allowed.example"], &[80])
        .write(tb);
    let _ = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    assert!(
        rec["egress_decisions"]
            .to_string()
            .contains("denied.example"),
        "the probes' refusals are in the record: {rec:#}"
    );
    let spec_before = expect_success(
        &tb.user_sh(&format!("sha256sum ~/.config/cyclix/tenants/{t}.yaml")),
        "spec hash",
    );
    let out = expect_success(
        &tb.user(&[&tb.cyclix_bin(), "egress", "suggest", &t, "--runs", "1"]),
        "egress suggest",
    );
    assert!(
        out.contains("pypi.org  2 refused, port(s) 80, first: http://pypi.org/simple/"),
        "{out}"
    );
    assert!(
        out.contains("    - pypi.org")
            && out.contains("    - a.cdn.example.com")
            && out.contains("    - b.cdn.example.com"),
        "{out}"
    );
    // Never a wildcard over the names the agent chose (attack review).
    assert!(!out.contains("*."), "{out}");
    assert!(
        !out.contains("denied.example"),
        "the probes' own refusals: {out}"
    );
    let spec_after = expect_success(
        &tb.user_sh(&format!("sha256sum ~/.config/cyclix/tenants/{t}.yaml")),
        "spec hash",
    );
    assert_eq!(spec_before, spec_after, "the spec is never edited");
}
