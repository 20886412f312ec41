//! `cyclix check --tenant` and `cyclix start` as a newcomer meets them (issue 19, the repeated
//! trial): a variable the spec names but nothing sets is a FAIL of `check` (`env:T`), and
//! `start` says why its run wrote no record instead of "see journalctl"; a `start` waiting for
//! a run that `cyclix stop` interrupts exits 3 with THAT run's summary, and a later start
//! never prints an earlier run's summary as its own.

use crate::common::run::prepared;
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

/// The status of check `id` in `cyclix check --json` output.
fn check_status(json: &str, id: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(json).expect("check --json is JSON");
    v["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == id)
        .map_or_else(
            || format!("no check {id} in {json}"),
            |c| format!("{} {}", c["status"].as_str().unwrap_or("?"), c["found"]),
        )
}

#[test]
fn check_and_start_name_an_unset_variable_and_a_stopped_start_exits_3_with_its_own_summary() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-startenv")
        .agent_key("env: [E2E_START_KEY]")
        .agent_cmd(r#"[sh, -c, "sleep 120"]"#)
        .write(tb);
    let c = tb.cyclix_bin();
    let env_file = format!("~/.config/cyclix/tenants/{t}.env");
    expect_success(&tb.user_sh(&format!("rm -f {env_file}")), "no env file");

    // Set nowhere: `check` FAILs env:T naming the key; `start` exits 1 and says why.
    let out = tb.user(&[&c, "check", "--quick", "--json", "--tenant", &t]);
    let env = check_status(&String::from_utf8_lossy(&out.stdout), &format!("env:{t}"));
    assert!(
        env.starts_with("fail") && env.contains("agent.env `E2E_START_KEY`"),
        "{env}\n{out:?}"
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let out = tb.user(&[&c, "start", &t, "--wait-s", "60"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        err.contains("the run unit said") && err.contains("E2E_START_KEY"),
        "start must print why the run wrote no record:\n{err}"
    );
    // ... and `status` says it too (the unit is failed, no record tells why).
    let status = expect_success(&tb.user(&[&c, "status", &t]), "status");
    assert!(
        status.contains("failed before its run wrote a record")
            && status.contains("E2E_START_KEY")
            && status.contains("until it starts again, or `systemctl --user reset-failed"),
        "{status}"
    );

    // Positive control: in the tenant's env file, `check` passes env:T.
    expect_success(
        &tb.user_sh(&format!(
            "umask 077; printf 'E2E_START_KEY=start-value\\n' > {env_file}"
        )),
        "the env file",
    );
    let out = tb.user(&[&c, "check", "--quick", "--json", "--tenant", &t]);
    let env = check_status(&String::from_utf8_lossy(&out.stdout), &format!("env:{t}"));
    assert!(env.starts_with("pass"), "{env}");

    // A waiting start whose run is stopped: exit 3, this run's summary.
    let out = expect_success(
        &tb.user_sh(&format!(
            "{c} start {t} --wait-s 120 > /tmp/startenv.out 2> /tmp/startenv.err & p=$!
             for i in $(seq 1 300); do
               a=$(podman ps --filter label=io.cyclix.tenant={t} --filter label=io.cyclix.role=agent -q | head -1)
               [ -n \"$a\" ] && break; sleep 0.1
             done
             [ -n \"$a\" ] || {{ echo 'the agent never started'; cat /tmp/startenv.err; exit 9; }}
             {c} stop {t} > /dev/null
             wait $p; echo \"code=$?\"; cat /tmp/startenv.out /tmp/startenv.err"
        )),
        "start, then stop the run",
    );
    assert!(out.starts_with("code=3"), "a stopped start exits 3:\n{out}");
    assert!(out.contains("): interrupted"), "its own summary:\n{out}");

    // Unset again: the next start prints no summary of the interrupted run as its own.
    expect_success(&tb.user_sh(&format!("rm -f {env_file}")), "no env file");
    let out = tb.user(&[&c, "start", &t, "--wait-s", "60"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stdout.trim().is_empty(),
        "an earlier run's summary printed as this start's:\n{stdout}"
    );
    expect_success(
        &tb.user_sh(&format!("systemctl --user reset-failed cyclix-run@{t}.service 2>/dev/null; rm -f /tmp/startenv.*; true")),
        "reset",
    );
}
