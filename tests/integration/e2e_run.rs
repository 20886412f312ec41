//! The main job on the real stack: `systemctl --user start cyclix-run@TENANT` runs cyclix under
//! the user manager, which drives Quadlet units over D-Bus, real podman, real squid and real git.
//! Each test checks the run record AND the host: no container, pod, network, volume, secret,
//! unit, worktree or run dir of the run is left; the run branch holds the agent's commit.

use crate::common::run::{inject_mid_run, leftovers, prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

#[test]
fn demo_run_passes_commits_and_leaves_nothing() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let out = start(tb, "demo");
    assert!(
        out.status.success(),
        "systemctl --user start cyclix-run@demo failed: {out:?}"
    );
    let rec = record(tb, "demo");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    // The demo's allowlist is empty: the probes run in deny-all mode and all pass.
    crate::e2e_boundary::assert_all_probes_pass(&rec);
    assert_eq!(
        (rec["agent_exit"].as_i64(), rec["gate_exit"].as_i64()),
        (Some(0), Some(0))
    );
    let run_id = rec["run_id"].as_str().expect("run id");
    assert_eq!(
        rec["leftovers"].as_array().map(Vec::len),
        Some(0),
        "{rec:#}"
    );
    let branch = rec["branch"].as_str().expect("branch");
    let log = expect_success(
        &tb.user_sh(&format!(
            "git -C ~/.local/share/cyclix/demo/project log --format=%s main..{branch}"
        )),
        "read the run branch",
    );
    assert!(
        log.contains("Fix calc.subtract"),
        "the run branch lacks the agent's commit: {log}"
    );
    assert_eq!(
        rec["commits"][0]["subject"]
            .as_str()
            .map(|s| s.contains("Fix calc.subtract")),
        Some(true)
    );
    let left = leftovers(tb, run_id, "demo");
    assert!(
        left.trim().is_empty(),
        "left behind by run {run_id}:\n{left}"
    );
    let phases: Vec<&str> = rec["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|p| p["name"].as_str().unwrap_or(""))
        .collect();
    // The demo protects its tests: the gate's run on the base tree (or its kept inventory)
    // comes before the gate.
    let mut want: Vec<&str> = cyclix::failpoint::PHASES.to_vec();
    let gate = want.iter().position(|p| *p == "gate").expect("gate");
    want.insert(gate, "gate-base");
    assert_eq!(phases, want);
    assert_eq!(rec["gate_inventory"]["verdict"], "passed", "{rec:#}");
}

#[test]
fn failing_agent_and_failing_gate_give_exit_1_and_the_same_clean_teardown() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    for (name, agent, result, field) in [
        (
            "e2e-agentfail",
            r#"[sh, -c, "echo giving up; exit 3"]"#,
            "agent_failed",
            "agent_exit",
        ),
        ("e2e-gatefail", "[\"true\"]", "gate_failed", "gate_exit"),
    ] {
        let t = Tenant::new(name).agent_cmd(agent).write(tb);
        let out = start(tb, &t);
        assert!(!out.status.success(), "{t}: the run unit must fail");
        let status = expect_success(
            &tb.user(&[
                "systemctl",
                "--user",
                "show",
                "-P",
                "ExecMainStatus",
                &format!("cyclix-run@{t}.service"),
            ]),
            "ExecMainStatus",
        );
        assert_eq!(status.trim(), "1", "{t}: cyclix run must exit 1");
        let rec = record(tb, &t);
        assert_eq!(rec["result"], result, "{rec:#}");
        let want = if name == "e2e-agentfail" { 3 } else { 1 };
        // What the agent or the gate printed is in the record, for the user to see why.
        let (log, says) = if name == "e2e-agentfail" {
            ("agent_log", "giving up")
        } else {
            ("gate_log", "1 failed")
        };
        assert!(
            rec[log].to_string().contains(says),
            "{t}: {log} lacks `{says}`: {rec:#}"
        );
        assert_eq!(rec[field].as_i64(), Some(want), "{rec:#}");
        let run_id = rec["run_id"].as_str().expect("run id");
        let left = leftovers(tb, run_id, &t);
        assert!(
            left.trim().is_empty(),
            "{t}: left behind by run {run_id}:\n{left}"
        );
        let _ = tb.user(&[
            "systemctl",
            "--user",
            "reset-failed",
            &format!("cyclix-run@{t}.service"),
        ]);
    }
}

#[test]
fn a_second_run_of_a_busy_tenant_is_refused_with_the_holder_named() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-busy")
        .agent_cmd(r#"[sh, -c, "sleep 6; exit 0"]"#)
        .write(tb);
    let script = format!(
        r#"set -u
systemctl --user start --no-block cyclix-run@{t}.service
for i in $(seq 1 100); do
  [ -s $XDG_RUNTIME_DIR/cyclix/locks/{t}.lock ] && break; sleep 0.1
done
{c} run {t}; echo "second rc=$?"
holder=$(python3 -c 'import json,os; print(json.load(open(os.environ["XDG_RUNTIME_DIR"]+"/cyclix/locks/{t}.lock"))["run_id"])')
echo "holder=$holder"
for i in $(seq 1 300); do
  s=$(systemctl --user show -P ActiveState cyclix-run@{t}.service); [ "$s" = activating ] || break; sleep 0.1
done
systemctl --user reset-failed cyclix-run@{t}.service 2>/dev/null || true
"#,
        c = tb.cyclix_bin()
    );
    let out = tb.user_sh(&script);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        stdout.contains("second rc=1"),
        "the second run was not refused:\n{stdout}\n{stderr}"
    );
    let holder = stdout
        .lines()
        .find_map(|l| l.strip_prefix("holder="))
        .expect("holder line");
    assert!(
        stderr.contains(&format!("already running run {holder}")),
        "the refusal must name the holder {holder}:\n{stderr}"
    );
    let rec = record(tb, &t);
    assert_eq!(
        rec["run_id"].as_str(),
        Some(holder),
        "the first run must complete and be recorded"
    );
    assert_eq!(
        rec["result"], "gate_failed",
        "sleep fixes nothing, so the gate fails: {rec:#}"
    );
}

#[test]
fn a_timer_installed_for_a_tenant_fires_and_produces_a_record() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    // A calendar time 45 s from now (UTC): the timer must fire it once. The install must come
    // before it (a time already past never fires with `persistent: false`), which the timer's
    // next elapse, read after the install, shows; the run then has minutes, not what is left
    // of one.
    let when = expect_success(
        &tb.user_sh("date -u -d '+45 seconds' '+%Y-%m-%d %H:%M:%S UTC'"),
        "date",
    );
    let t = Tenant::new("e2e-timer")
        .extra_yaml(&format!(
            "schedule:\n  on_calendar: \"{}\"\n  persistent: false",
            when.trim()
        ))
        .write(tb);
    let install = expect_success(
        &tb.user(&[&tb.cyclix_bin(), "install", "--tenant", &t]),
        "cyclix install",
    );
    assert!(
        install.contains(&format!("enabled cyclix-run@{t}.timer: next elapse")),
        "{install}"
    );
    let timer = expect_success(
        &tb.user_sh(&format!(
            "systemctl --user show -p NextElapseUSecRealtime -p LastTriggerUSec cyclix-run@{t}.timer"
        )),
        "the timer's next elapse",
    );
    assert!(
        timer
            .lines()
            .any(|l| l.split_once('=').is_some_and(|(_, v)| !v.trim().is_empty())),
        "the install took past the calendar time (no next elapse, never triggered: the test's \
         45 s were too few):\n{timer}"
    );
    let script = format!(
        r#"for i in $(seq 1 3000); do
  [ -s ~/.local/state/cyclix/runs/{t}/latest.json ] && ! systemctl --user -q is-active cyclix-run@{t}.service && exit 0
  sleep 0.1
done
echo "no record after 300 s"; systemctl --user status cyclix-run@{t}.timer --no-pager; exit 1"#
    );
    expect_success(&tb.user_sh(&script), "wait for the timer's run");
    let rec = record(tb, &t);
    assert_eq!(rec["result"], "passed", "{rec:#}");
    let _ = tb.user_sh(&format!(
        "systemctl --user disable --now cyclix-run@{t}.timer"
    ));
}

#[test]
fn the_proxy_enforces_the_allowlist_and_its_decisions_reach_the_record() {
    let _shared = crate::common::testbed::shared();
    // Positive control and deny through the run's real squid: the agent has no route out, so
    // both requests go through the proxy; the allowed host answers 200, the other gets 403.
    let tb = prepared();
    let agent = r#"[sh, -c, "curl -s -o /dev/null -w '%{http_code}' http://allowed.example/ > allowed.txt; curl -s -o /dev/null -w '%{http_code}' http://denied.example/ > denied.txt; curl -s --noproxy '*' -m 5 -o /dev/null -w '%{http_code}' http://allowed.example/ > direct.txt; git add -A && git commit -qm 'egress probe'"]"#;
    let t = Tenant::new("e2e-egress")
        .agent_cmd(agent)
        .egress_allow(&["allowed.example"], &[80])
        .write(tb);
    let out = start(tb, &t);
    let rec = record(tb, &t);
    assert!(
        !out.status.success(),
        "the gate must fail (nothing was fixed): {rec:#}"
    );
    assert_eq!(rec["result"], "gate_failed", "{rec:#}");
    let branch = rec["branch"].as_str().expect("branch");
    let files = expect_success(
        &tb.user_sh(&format!(
            "cd ~/src/{t} && for f in allowed denied direct; do echo \"$f=$(git show {branch}:$f.txt)\"; done"
        )),
        "read the agent's results",
    );
    assert!(
        files.contains("allowed=200"),
        "the allowed host must answer through the proxy:\n{files}"
    );
    assert!(
        files.contains("denied=403"),
        "a denied host must get an immediate 403:\n{files}"
    );
    assert!(
        files.contains("direct=000"),
        "a direct connection must fail (no route out):\n{files}"
    );
    let decisions = rec["egress_decisions"].as_array().expect("decisions");
    // The agent's GETs (the probes' CONNECTs to the same hosts come first; refused CONNECTs
    // are answered 407, see render::proxy::tunnel).
    let find = |host: &str| {
        decisions
            .iter()
            .find(|d| d["host"] == host && d["method"] == "GET")
            .cloned()
    };
    let allowed = find("allowed.example").expect("a decision for allowed.example");
    let denied = find("denied.example").expect("a decision for denied.example");
    assert_eq!(
        (allowed["status"].as_str(), allowed["reason"].as_str()),
        (Some("200"), Some("allowlisted")),
        "{allowed}"
    );
    assert_eq!(
        (denied["status"].as_str(), denied["reason"].as_str()),
        (Some("403"), Some("domain_not_allowlisted")),
        "{denied}"
    );
    let left = leftovers(tb, rec["run_id"].as_str().expect("id"), &t);
    assert!(left.trim().is_empty(), "{left}");
    let _ = tb.user(&[
        "systemctl",
        "--user",
        "reset-failed",
        &format!("cyclix-run@{t}.service"),
    ]);
}

#[test]
fn a_secret_reaches_the_agent_as_env_and_nowhere_else() {
    let _shared = crate::common::testbed::shared();
    // The value is made inside the testbed and never passes through an argv (not even this
    // test's): only its sha256 goes into the spec, where the agent checks it.
    let tb = prepared();
    let t = "e2e-secret";
    let hash = crate::common::run::secret_in_env_file(tb, t, "E2E_TOKEN");
    let hash = hash.as_str();
    // The agent works until the host's scan has seen it ten times (`/tmp/agent-waits-for-scan`,
    // touched from the host), so the scan covers the sandbox by the events' count, not a time.
    let agent = format!(
        "[sh, -c, \"[ \\\"$(printf %s \\\"$E2E_TOKEN\\\" | sha256sum | cut -c1-64)\\\" = {hash} ] && i=0 && while [ ! -e /tmp/agent-waits-for-scan ] && [ $i -lt 1200 ]; do i=$((i+1)); sleep 0.1; done && exec cyclix-demo-agent\"]"
    );
    Tenant::new(t)
        .agent_cmd(&agent)
        .agent_key("env: [E2E_TOKEN]")
        .write(tb);
    // While the run is on, no process's argv may carry the value (`ps`): scan /proc/*/cmdline
    // of every process, from the run unit's start to its end; `rounds` counts the scans that
    // saw the agent (its command, told by the regex, which this script's own text does not
    // match), and the agent goes on only after ten of them.
    let argv_scan = expect_success(
        &tb.user_sh(&format!(
            "v=$(sed -n 's/^E2E_TOKEN=//p' ~/.config/cyclix/tenants/{t}.env); printf '%s\\n' \"$v\" > /tmp/needle-argv
             systemctl --user start --no-block cyclix-run@{t}.service; rounds=0; hits=0; told=
             for i in $(seq 1 1200); do
               [ \"$(systemctl --user show -P ActiveState cyclix-run@{t}.service)\" = activating ] && break; sleep 0.1
             done
             for i in $(seq 1 6000); do
               all=$(cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n')
               n=$(printf '%s\\n' \"$all\" | grep -cF -f /tmp/needle-argv)
               hits=$((hits + n))
               printf '%s\\n' \"$all\" | grep -q 'agent-waits-[f]or-scan' && rounds=$((rounds + 1))
               if [ $rounds -ge 10 ] && [ -z \"$told\" ]; then
                 a=$(podman ps --filter label=io.cyclix.tenant={t} --filter label=io.cyclix.role=agent --format '{{{{.Names}}}}' | head -1)
                 podman exec $a touch /tmp/agent-waits-for-scan && told=1
               fi
               [ \"$(systemctl --user show -P ActiveState cyclix-run@{t}.service)\" = activating ] || break; sleep 0.05
             done
             rm -f /tmp/needle-argv; echo \"rounds=$rounds hits=$hits told=$told\""
        )),
        "scan argv while the run is on",
    );
    assert!(
        argv_scan.contains("hits=0"),
        "the secret value was in a process's argv: {argv_scan}"
    );
    let rounds: u32 = argv_scan
        .split_whitespace()
        .find_map(|w| w.strip_prefix("rounds="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        rounds >= 10 && argv_scan.contains("told=1"),
        "the argv scan must have run while the agent worked: {argv_scan}"
    );
    let rec = record(tb, t);
    assert_eq!(
        rec["result"], "passed",
        "the agent did not get the secret: {rec:#}"
    );
    assert_eq!(rec["secret_names"], serde_json::json!(["E2E_TOKEN"]));
    // Zero hits outside the env file the user wrote: records, journal, unit files, run dirs.
    let hits = expect_success(
        &tb.user_sh(
            "v=$(sed -n 's/^E2E_TOKEN=//p' ~/.config/cyclix/tenants/e2e-secret.env); [ -n \"$v\" ] || exit 9
             printf '%s\n' \"$v\" > /tmp/needle
             files=$(grep -rlF -f /tmp/needle ~/.local/state/cyclix $XDG_RUNTIME_DIR/containers $XDG_RUNTIME_DIR/systemd \
               $XDG_RUNTIME_DIR/cyclix ~/.config/systemd 2>/dev/null | wc -l)
             journal=$(journalctl --user -o cat | grep -cF -f /tmp/needle)
             rm -f /tmp/needle; echo \"files=$files journal=$journal\"",
        ),
        "search for the secret",
    );
    assert_eq!(hits.trim(), "files=0 journal=0", "the secret value leaked");
    let left = leftovers(tb, rec["run_id"].as_str().expect("id"), t);
    assert!(left.trim().is_empty(), "{left}");
}

#[test]
fn b24_a_timer_with_a_random_delay_keeps_its_next_elapse_across_reloads() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-b24")
        .extra_yaml("schedule:\n  on_calendar: daily\n  persistent: false\n  randomized_delay: 6h")
        .write(tb);
    let c = tb.cyclix_bin();
    let script = format!(
        r#"set -e
{c} install --tenant {t} >/dev/null
a=$(systemctl --user show -P NextElapseUSecRealtime cyclix-run@{t}.timer)
{c} unit reload >/dev/null; {c} unit reload >/dev/null
b=$(systemctl --user show -P NextElapseUSecRealtime cyclix-run@{t}.timer)
echo "$a|$b"
systemctl --user disable --now cyclix-run@{t}.timer >/dev/null 2>&1
rm -rf ~/.config/cyclix/tenants/{t}.yaml ~/.config/systemd/user/cyclix-run@{t}.timer.d; systemctl --user daemon-reload
"#
    );
    let out = expect_success(&tb.user_sh(&script), "next elapse across reloads");
    let (a, b) = out.trim().split_once('|').expect("two values");
    assert!(
        !a.is_empty() && a != "0",
        "the timer is not scheduled: {out}"
    );
    assert_eq!(a, b, "RandomizedDelaySec was re-rolled by a reload (B24)");
}

#[test]
fn cyclix_stop_interrupts_a_run_and_still_tears_it_down() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-stop")
        .agent_cmd(r#"[sh, -c, "sleep 120"]"#)
        .write(tb);
    // Issue 19, item 6: a person's stop is not cyclix failing. The unit's state is read right
    // after `cyclix stop` returns (inject_mid_run resets a failed state afterwards).
    let run = inject_mid_run(
        tb,
        &t,
        &format!(
            "{} stop {t} > /tmp/stop-$run.txt || exit 9
             systemctl --user show -P ActiveState cyclix-run@{t}.service >> /tmp/stop-$run.txt",
            tb.cyclix_bin()
        ),
    );
    let rec = record(tb, &t);
    assert_eq!(rec["result"], "interrupted", "{rec:#}");
    assert!(
        rec["error"]
            .as_str()
            .is_some_and(|e| e.contains("interrupted")),
        "{rec:#}"
    );
    let unit = expect_success(
        &tb.user_sh(&format!(
            "cat /tmp/stop-{run}.txt; rm -f /tmp/stop-{run}.txt"
        )),
        "the run unit after the stop",
    );
    // `cyclix stop` prints the stop job's end (the unit may be unloaded right after, so its
    // exit status is read there), then the unit's state.
    assert!(
        unit.contains("(result success, main process exited, status 3)")
            && unit.trim_end().ends_with("inactive"),
        "the run unit must end inactive (not failed) with exit status 3 (interrupted):\n{unit}"
    );
    let status = tb.user(&[&tb.cyclix_bin(), "status", &t]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("): interrupted"),
        "{status:?}"
    );
    let left = leftovers(tb, &run, &t);
    assert!(left.trim().is_empty(), "a stopped run left:\n{left}");
    // A person's missing input exits 1, not 2: an unknown tenant, and a local image that is
    // not built (refused before anything of the run exists).
    let unknown = tb.user(&[&tb.cyclix_bin(), "status", "no-such-tenant"]);
    assert_eq!(unknown.status.code(), Some(1), "{unknown:?}");
    let t2 = Tenant::new("e2e-noimage")
        .image("localhost/cyclix-no-such-image:latest")
        .write(tb);
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t2]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "agent.image: `localhost/cyclix-no-such-image:latest` is not in podman's local storage"
        ),
        "{err}"
    );
    let made = expect_success(
        &tb.user_sh(&format!(
            "ls ~/.local/state/cyclix/runs/{t2}/ 2>/dev/null | wc -l; podman ps -a --filter label=io.cyclix.tenant={t2} -q | wc -l"
        )),
        "nothing of the refused run",
    );
    assert_eq!(
        made.split_whitespace().collect::<Vec<_>>(),
        ["0", "0"],
        "{made}"
    );
}

#[test]
fn cyclix_start_waits_for_the_run_and_prints_its_summary() {
    // `cyclix start` holds a D-Bus job wait while its own run reloads the manager: that must
    // not deadlock (the reload lock covers queueing a job only).
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-start").write(tb);
    let out = tb.user(&[&tb.cyclix_bin(), "start", &t, "--wait-s", "120"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "cyclix start failed: {out:?}");
    assert!(stdout.contains(": passed"), "no passing summary: {stdout}");
}

/// A host-side agent for the host tiers (the testbed has python3 and git, not the image's
/// scripted agent): fixes `subtract` and commits.
const HOST_AGENT: &str = r#"[python3, -c, 'import subprocess; p="calc/__init__.py"; s=open(p).read(); i=s.index("def subtract"); j=s.index("return a + b", i); open(p, "w").write(s[:j] + "return a - b" + s[j + 12:]); subprocess.run(["git", "-c", "user.name=agent", "-c", "user.email=agent@example.invalid", "commit", "-qam", "Fix subtract on the host"], check=True)']"#;

#[test]
fn host_tiers_run_only_when_set_and_their_records_say_no_isolation() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    for (tier, name, says) in [
        ("worktree", "e2e-wt", "version isolation only"),
        ("direct", "e2e-direct", "no isolation"),
    ] {
        // The gate must check the result on the host too: not the pytest gate.
        let t = Tenant::new(name)
            .agent_cmd(HOST_AGENT)
            .gate_cmd(
                "[python3, -c, 'import calc, sys; sys.exit(0 if calc.subtract(3, 1) == 2 else 1)']",
            )
            .tier(tier)
            .write(tb);
        let out = start(tb, &t);
        let rec = record(tb, &t);
        assert!(out.status.success(), "{tier}: {rec:#}");
        assert_eq!(rec["result"], "passed", "{tier}: {rec:#}");
        assert_eq!(rec["tier"], tier);
        assert!(
            rec["notices"].to_string().contains(says),
            "{tier}: the record must say `{says}`: {rec:#}"
        );
        assert!(
            rec["probes"].as_array().is_some_and(Vec::is_empty),
            "{tier}: nothing to probe"
        );
        assert_eq!(
            rec["commits"][0]["subject"], "Fix subtract on the host",
            "{tier}: {rec:#}"
        );
        let head = expect_success(
            &tb.user_sh(&format!("git -C ~/src/{t} log -1 --format=%s")),
            "HEAD",
        );
        // Issue 32 item 3: what `check` and the summary say is what the run did.
        let said = expect_success(
            &tb.user_sh(&format!(
                "{c} check --tenant {t} 2>&1; {c} status {t}",
                c = tb.cyclix_bin()
            )),
            "check and status",
        );
        assert!(
            said.contains("`cyclix run` runs it so") && !said.contains("implements only"),
            "{tier}: check tells what run does: {said}"
        );
        assert!(
            rec["notices"].to_string().contains("`gate.image`"),
            "{tier}: the unused gate image is a notice: {rec:#}"
        );
        if tier == "direct" {
            assert_eq!(
                head.trim(),
                "Fix subtract on the host",
                "direct works in the user's checkout"
            );
            // No run branch is named: the commits are on the checked-out branch.
            assert_eq!(rec["branch"], "", "{rec:#}");
            assert!(
                said.contains("committed in your checkout: +1 commit on its checked-out branch"),
                "{said}"
            );
        } else {
            assert_ne!(
                head.trim(),
                "Fix subtract on the host",
                "worktree keeps the user's checkout untouched"
            );
        }
        let left = leftovers(tb, rec["run_id"].as_str().expect("id"), &t);
        assert!(left.trim().is_empty(), "{tier}: {left}");
    }
}

#[test]
fn a_container_tier_without_a_usable_runtime_is_refused_never_downgraded() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    // podman is not on this PATH: the tier gate must refuse `container`, not run the agent in
    // a weaker tier. Nothing of a run may be created.
    let out = tb.user_sh(&format!(
        "mkdir -p /tmp/nopodman; ln -sf /usr/bin/git /tmp/nopodman/git; before=$(git -C ~/.local/share/cyclix/demo/project branch --list 'cyclix/*' | wc -l)
         env PATH=/tmp/nopodman {c} run demo; echo \"rc=$?\"
         echo \"branches=$(( $(git -C ~/.local/share/cyclix/demo/project branch --list 'cyclix/*' | wc -l) - before ))\"",
        c = tb.cyclix_bin()
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("rc=1"),
        "the refusal exits 1: {stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("tier `container` is configured but no usable container runtime"),
        "{stderr}"
    );
    assert!(
        stdout.contains("branches=0"),
        "a refused run created a branch: {stdout}"
    );
}

#[test]
fn user_mistakes_found_right_before_a_run_are_findings_that_name_the_key() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let c = tb.cyclix_bin();
    let t = Tenant::new("e2e-mistake").write(tb);
    // The repository is not one any more, then the task file points at a FIFO.
    let out = tb.user_sh(&format!(
        "rm -rf ~/src/{t}/.git; {c} run {t}; echo \"rc=$?\"
         git -C ~/src/{t} init -q -b main && git -C ~/src/{t} -c user.name=t -c user.email=t@t commit -q --allow-empty -m init
         mkfifo -m 600 /tmp/{t}-fifo 2>/dev/null
         sed -i 's|^task: .*|task: {{ file: /tmp/{t}-fifo }}|' ~/.config/cyclix/tenants/{t}.yaml
         timeout 20 {c} run {t}; echo \"rc=$?\"; rm -f /tmp/{t}-fifo"
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rcs: Vec<&str> = stdout.lines().filter(|l| l.starts_with("rc=")).collect();
    assert_eq!(
        rcs,
        ["rc=1", "rc=1"],
        "findings exit 1:\n{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("error: repo:") && stderr.contains("`repo.path` must be a git work tree"),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: task.file:") && stderr.contains("is not a regular file"),
        "{stderr}"
    );
}

#[test]
fn a_report_only_run_logs_would_be_denials_says_so_and_keeps_private_ranges_denied() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let agent = r#"[sh, -c, "curl -s -o /dev/null http://denied.example/; curl -s -o /dev/null http://10.78.0.1:8080/; exec cyclix-demo-agent"]"#;
    let t = Tenant::new("e2e-report")
        .agent_cmd(agent)
        .extra_yaml("egress:\n  allow: [allowed.example]\n  ports: [80]\n  report_only: true")
        .write(tb);
    let out = start(tb, &t);
    let rec = record(tb, &t);
    assert!(out.status.success(), "{rec:#}");
    assert_eq!(
        rec["result"], "passed",
        "the probes accept a report-only run: {rec:#}"
    );
    crate::e2e_boundary::assert_all_probes_pass(&rec);
    assert!(
        rec["notices"].to_string().contains("report_only"),
        "the record says so: {rec:#}"
    );
    let decisions = rec["egress_decisions"].as_array().expect("decisions");
    assert!(
        decisions.iter().any(|d| d["host"] == "denied.example"
            && d["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("would_deny:"))),
        "a would-be denial is logged: {decisions:#?}"
    );
    assert!(
        decisions
            .iter()
            .any(|d| d["host"] == "10.78.0.1" && d["status"] == "403"),
        "private ranges stay denied in report-only: {decisions:#?}"
    );
}

#[test]
fn the_plain_backend_runs_the_same_topology_end_to_end() {
    // What a host without Quadlet (podman < 5) gets: plain .service units with the podman
    // commands; forced here on podman 5 to run the same lifecycle, probes included.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-plain").write(tb);
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t, "--backend", "plain"]);
    let rec = record(tb, &t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    crate::e2e_boundary::assert_all_probes_pass(&rec);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("(Plain units)"),
        "{out:?}"
    );
    let run_id = rec["run_id"].as_str().expect("id");
    let left = leftovers(tb, run_id, &t);
    assert!(left.trim().is_empty(), "{left}");
    // This run's only: runs of other tests at the same time have files there too.
    let units = expect_success(
        &tb.user_sh(&format!(
            "ls $XDG_RUNTIME_DIR/systemd/user/ | grep -c cyclix-{run_id} || true"
        )),
        "units",
    );
    assert_eq!(units.trim(), "0", "plain unit files left");
}

#[test]
fn after_cyclix_is_killed_mid_run_the_next_run_converges_to_zero_leftovers() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-kill")
        .agent_cmd(r#"[sh, -c, "sleep 60"]"#)
        .write(tb);
    let dead = inject_mid_run(
        tb,
        &t,
        &format!("systemctl --user kill --signal=SIGKILL --kill-whom=main cyclix-run@{t}.service"),
    );
    let marker = expect_success(
        &tb.user_sh(&format!("ls ~/.local/state/cyclix/runs/{t}/{dead}.running")),
        "the killed run's marker",
    );
    assert!(!marker.trim().is_empty());
    assert!(!dead.is_empty(), "a killed run must leave its marker");
    let before = leftovers(tb, &dead, &t);
    assert!(
        !before.trim().is_empty(),
        "the kill must really leave something to converge"
    );
    // The next run of the tenant finishes the dead run's teardown first.
    expect_success(
        &tb.user_sh(&format!("sed -i 's|command: \\[sh, -c, \"sleep 60\"\\]|command: [cyclix-demo-agent]|' ~/.config/cyclix/tenants/{t}.yaml")),
        "switch the agent",
    );
    let out = start(tb, &t);
    let rec = record(tb, &t);
    assert!(out.status.success(), "{rec:#}");
    assert!(
        rec["notices"]
            .to_string()
            .contains(&format!("converged run {dead}")),
        "{rec:#}"
    );
    let old = expect_success(
        &tb.user_sh(&format!("cat ~/.local/state/cyclix/runs/{t}/{dead}.json")),
        "old record",
    );
    let old: serde_json::Value = serde_json::from_str(&old).expect("json");
    assert_eq!(old["failed_phase"], "interrupted", "{old:#}");
    assert_eq!(
        old["leftovers"].as_array().map(Vec::len),
        Some(0),
        "{old:#}"
    );
    let after = leftovers(tb, &dead, &t);
    assert!(after.trim().is_empty(), "the dead run still left:\n{after}");
    let marker = expect_success(
        &tb.user_sh(&format!(
            "ls ~/.local/state/cyclix/runs/{t}/ | grep -c running || true"
        )),
        "markers",
    );
    assert_eq!(marker.trim(), "0");
}

#[test]
fn leftovers_lists_what_no_run_owns_and_deletes_nothing() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let c = tb.cyclix_bin();
    let out = expect_success(
        &tb.user_sh(&format!(
            "podman network create --label io.cyclix.run=orphan-e2e-1 --label io.cyclix.tenant=nobody cyclix-orphan-e2e-1 >/dev/null
             {c} leftovers --json; echo \"rc=$?\"
             podman network exists cyclix-orphan-e2e-1 && echo still-there
             podman network rm -f cyclix-orphan-e2e-1 >/dev/null"
        )),
        "cyclix leftovers",
    );
    let (json, rest) = out.rsplit_once("rc=").expect("rc line");
    assert!(rest.starts_with('1'), "an untied leftover exits 1: {out}");
    assert!(
        rest.contains("still-there"),
        "leftovers must never delete: {out}"
    );
    let v: serde_json::Value = serde_json::from_str(json.trim()).expect("json");
    assert_eq!(v["schema"], "cyclix-leftovers/1");
    let hit = v["leftovers"]
        .as_array()
        .expect("list")
        .iter()
        .find(|l| l["name"] == "cyclix-orphan-e2e-1")
        .cloned()
        .unwrap_or_else(|| panic!("the orphan network is not listed: {v:#}"));
    assert_eq!(
        (
            hit["kind"].as_str(),
            hit["status"].as_str(),
            hit["run"].as_str()
        ),
        (Some("network"), Some("untied"), Some("orphan-e2e-1"))
    );
}

#[test]
fn daemon_reloads_mid_run_leave_the_run_and_its_units_unchanged() {
    // security-cases §3: a reload while a run is active must not change its units (per-run
    // unit names, nothing rewritten) and the run finishes normally.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-reload")
        .agent_cmd(r#"[sh, -c, "sleep 3 && exec cyclix-demo-agent"]"#)
        .write(tb);
    let run = inject_mid_run(
        tb,
        &t,
        "f=\"$XDG_RUNTIME_DIR/cyclix/runs/$run/quadlet/cyclix-$run-agent.container $XDG_RUNTIME_DIR/systemd/user/cyclix-$run-agent.service\"
         for x in $f; do [ -f $x ] || { echo the run has no $x >&2; exit 7; }; done
         h1=$(cat $f | sha256sum)
         systemctl --user daemon-reload; systemctl --user daemon-reload
         h2=$(cat $f | sha256sum)
         [ \"$h1\" = \"$h2\" ] || { echo the run unit changed on reload >&2; exit 7; }",
    );
    let rec = record(tb, &t);
    assert_eq!(rec["run_id"].as_str(), Some(run.as_str()));
    assert_eq!(rec["result"], "passed", "{rec:#}");
    let left = leftovers(tb, &run, &t);
    assert!(left.trim().is_empty(), "{left}");
}

#[test]
fn a_proxy_killed_mid_run_fails_closed_and_the_run_names_the_cause() {
    // security-cases §3: the agent keeps no route out (it only ever had the proxy), and the run
    // does not pass as if nothing happened: it fails naming the dead proxy; teardown completes.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let agent = r#"[sh, -c, "i=0; while [ ! -e /tmp/killed ] && [ $i -lt 1200 ]; do i=$((i+1)); sleep 0.1; done; curl -s -m 5 -o /dev/null -w '%{http_code}' http://allowed.example/ > proxy.txt; curl -s --noproxy '*' -m 5 -o /dev/null -w '%{http_code}' http://allowed.example/ > direct.txt; git add -A; git commit -qm probe"]"#;
    let t = Tenant::new("e2e-proxykill")
        .agent_cmd(agent)
        .egress_allow(&["allowed.example"], &[80])
        .write(tb);
    // Kill the proxy once the agent has been let go (its `ctl/go`: on a loaded host the probe
    // phase outlasts `inject_mid_run`'s 1 s, and a proxy killed during the probes is a refusal
    // before the agent ever runs); the agent makes its requests once told the proxy is dead
    // (`/tmp/killed`), not after a time that raced the kill.
    let run = inject_mid_run(
        tb,
        &t,
        &format!(
            "{}
             podman kill cyclix-$run-proxy >/dev/null
             podman exec $a touch /tmp/killed 2>/dev/null || true",
            crate::common::run::LET_GO
        ),
    );
    let rec = record(tb, &t);
    // Either the leak watch saw the proxy's main process gone since the probes (issue 20,
    // item 1: the agent is stopped at its next round) or a later phase found the dead proxy.
    let why = format!("{} {}", rec["error"], rec["refusal"]);
    match rec["result"].as_str() {
        Some("leak_detected") => assert!(
            why.contains(&format!(
                "cyclix-{run}-proxy.service's main process changed after the probes"
            )),
            "{rec:#}"
        ),
        Some("error") => assert!(
            why.contains("egress proxy") && why.contains("-proxy.service"),
            "{rec:#}"
        ),
        _ => panic!("a run whose proxy died must fail naming it: {rec:#}"),
    }
    // Whatever the agent managed to commit before it was stopped: never a route out.
    let got = expect_success(
        &tb.user_sh(&format!("cd ~/src/{t} && b=cyclix/{t}/{run}; echo \"proxy=$(git show $b:proxy.txt 2>/dev/null) direct=$(git show $b:direct.txt 2>/dev/null)\"")),
        "what the agent saw",
    );
    assert!(!got.contains("direct=2"), "no route out, ever: {got}");
    assert!(
        !got.contains("proxy=200"),
        "the dead proxy cannot have served: {got}"
    );
    let left = leftovers(tb, &run, &t);
    assert!(left.trim().is_empty(), "{left}");
}

#[test]
fn a_run_started_from_a_shell_reads_the_tenants_env_file_like_the_unit() {
    // Issue 19, item 4: one answer about the environment. The value is only in the tenant's
    // 0600 env file (which the run unit reads with EnvironmentFile=); `cyclix run` started
    // from a shell resolves it the same way and the agent gets it.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-envfile")
        .agent_key("env: [E2E_FILE_ONLY_TOKEN]")
        .agent_cmd(r#"[sh, -c, "test \"$E2E_FILE_ONLY_TOKEN\" = 'from the env file' && exec cyclix-demo-agent"]"#)
        .write(tb);
    expect_success(
        &tb.user_sh(&format!(
            "umask 077; printf '# the tenant env file\\nE2E_FILE_ONLY_TOKEN=\"from the env file\"\\n' > ~/.config/cyclix/tenants/{t}.env"
        )),
        "write the env file",
    );
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    expect_success(
        &tb.user_sh(&format!("rm -f ~/.config/cyclix/tenants/{t}.env")),
        "remove the env file",
    );
    // Positive control: without the file the same run is refused, naming the variable (exit 1).
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("agent.env names `E2E_FILE_ONLY_TOKEN` but it is not set"),
        "{out:?}"
    );
}
