//! Issue 6 on the real stack: what a run leaves beyond podman objects and files (processes and
//! cgroups, field report B11; refs the run wrote; a half-done merge; its empty branch), and
//! SIGKILL of cyclix at each teardown step (security-cases §3: the next run converges to zero
//! leftovers, and the dead run's record says where it died).

use crate::common::run::{
    arm, dead_run, inject_mid_run, leftovers, prepared, record, record_of, start, tenant,
};
use crate::common::testbed::expect_success;

#[test]
fn b11_the_run_unit_holds_only_cyclix_and_the_agents_conmon_lives_in_the_agent_unit() {
    // B11: containers live only in their Quadlet units (conmon in the container's unit cgroup,
    // never in cyclix-run@'s), and after teardown no conmon, sentinel or cgroup of the run is
    // left (the shared helper `leftovers()` checks processes and cgroups too).
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = tenant(
        tb,
        "e2e-b11cg",
        r#"[sh, -c, "sleep 3 && exec cyclix-demo-agent"]"#,
        "",
    );
    let out = tb.user_sh(&format!(
        r#"systemctl --user start --no-block cyclix-run@{t}.service
         a=
         for i in $(seq 1 300); do
           a=$(podman ps --filter label=io.cyclix.tenant={t} --filter label=io.cyclix.role=agent --format '{{{{.Names}}}}' | head -1)
           [ -n "$a" ] && break; sleep 0.1
         done
         sleep 1
         cg="/sys/fs/cgroup/user.slice/user-$(id -u).slice/user@$(id -u).service/app.slice/app-cyclix\x2drun.slice/cyclix-run@{t}.service"
         echo "RUNUNIT $(for p in $(cat "$cg/cgroup.procs"); do cat /proc/$p/comm 2>/dev/null; done | sort -u | tr '\n' ' ')"
         for p in $(pgrep conmon); do
           if tr '\0' ' ' </proc/$p/cmdline | grep -q -- "-n $a "; then echo "AGENTCONMON $(grep '^0::' /proc/$p/cgroup)"; fi
         done
         while [ "$(systemctl --user show -P ActiveState cyclix-run@{t}.service)" = activating ]; do sleep 0.2; done
         echo "RUN ${{a#cyclix-}}""#
    ));
    let out = expect_success(&out, "watch a run's cgroups");
    let line = |p: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(p))
            .unwrap_or_else(|| panic!("no {p} line in:\n{out}"))
            .trim()
            .to_string()
    };
    let comms = line("RUNUNIT ");
    // (`podman` itself may appear for an instant: a probe's `podman exec`; never a workload.)
    for bad in ["conmon", "pasta", "rootlessport"] {
        assert!(
            !comms.split(' ').any(|c| c == bad),
            "cyclix-run@{t}.service holds {bad}: {comms}"
        );
    }
    assert!(comms.split(' ').any(|c| c == "cyclix"), "{comms}");
    let run = line("RUN ").trim_end_matches("-agent").to_string();
    assert!(
        line("AGENTCONMON ").ends_with(&format!("/cyclix-{run}-agent.service/runtime"))
            || line("AGENTCONMON ").ends_with(&format!("/cyclix-{run}-agent.service")),
        "the agent's conmon is not in its unit's cgroup: {out}"
    );
    let rec = record(tb, &t);
    assert_eq!(rec["result"], "passed", "{rec:#}");
    let left = leftovers(tb, &run, &t);
    assert!(left.trim().is_empty(), "{left}");
}

#[test]
fn b11_a_process_left_in_a_cgroup_named_after_the_run_fails_the_audit() {
    // A workload started outside the run's units but named after it (what B11 describes:
    // podman spawned from another unit) survives teardown: the audit must see the process and
    // its cgroup, fail the run and list them. cyclix does not kill what it did not start.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = tenant(
        tb,
        "e2e-stray",
        r#"[sh, -c, "sleep 3 && exec cyclix-demo-agent"]"#,
        "",
    );
    let run = inject_mid_run(
        tb,
        &t,
        "systemd-run --user --quiet --unit=cyclix-$run-stray.service sleep 300",
    );
    let rec = record(tb, &t);
    let stray_still_there = expect_success(
        &tb.user_sh(&format!(
            "systemctl --user is-active cyclix-{run}-stray.service || true; systemctl --user stop cyclix-{run}-stray.service"
        )),
        "stop the stray unit",
    );
    assert_eq!(
        stray_still_there.trim(),
        "active",
        "cyclix must not kill what it did not start"
    );
    assert_eq!(rec["result"], "error", "{rec:#}");
    assert_eq!(rec["failed_phase"], "audit", "{rec:#}");
    let left = rec["leftovers"].to_string();
    assert!(
        left.contains(&format!("cyclix-{run}-stray.service (1 processes)")),
        "{rec:#}"
    );
    assert!(left.contains("cgroup "), "{rec:#}");
}

#[test]
fn refs_written_by_the_agent_and_a_half_done_merge_fail_the_run_and_stay_for_a_person() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = tenant(
        tb,
        "e2e-refs",
        r#"[sh, -c, "cyclix-demo-agent && git branch stray && git tag -f v-agent && git rev-parse HEAD > \"$(git rev-parse --git-dir)/MERGE_HEAD\""]"#,
        "",
    );
    let out = start(tb, &t);
    let rec = record(tb, &t);
    assert!(!out.status.success(), "{rec:#}");
    assert_eq!(rec["result"], "error", "{rec:#}");
    assert_eq!(rec["failed_phase"], "audit", "{rec:#}");
    let left: Vec<String> = rec["leftovers"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    for needle in [
        "ref refs/heads/stray created during the run",
        "ref refs/tags/v-agent created during the run",
        "a merge (MERGE_HEAD) was in progress in the run's worktree",
    ] {
        assert!(
            left.iter().any(|l| l.starts_with(needle)),
            "{needle}: {left:#?}"
        );
    }
    assert_eq!(left.len(), 3, "{left:#?}");
    // Never deleted: a person decides. The run branch with the agent's commit stays too.
    let refs = expect_success(
        &tb.user_sh(&format!(
            "git -C ~/src/{t} for-each-ref --format='%(refname)' refs/heads/stray refs/tags/v-agent {}",
            format_args!("refs/heads/{}", rec["branch"].as_str().expect("branch"))
        )),
        "refs",
    );
    assert_eq!(refs.lines().count(), 3, "{refs}");
    let run = rec["run_id"].as_str().expect("run id");
    let left = leftovers(tb, run, &t);
    assert!(left.trim().is_empty(), "{left}");
}

#[test]
fn a_run_without_commits_deletes_its_branch_and_says_so() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = tenant(tb, "e2e-nocommit", r#"[sh, -c, "exit 3"]"#, "");
    let out = start(tb, &t);
    assert!(!out.status.success());
    let rec = record(tb, &t);
    assert_eq!(rec["result"], "agent_failed", "{rec:#}");
    let branch = rec["branch"].as_str().expect("branch");
    assert!(
        rec["notices"].to_string().contains(&format!(
            "run branch {branch} deleted at teardown: it had no commits"
        )),
        "{rec:#}"
    );
    let n = expect_success(
        &tb.user_sh(&format!(
            "git -C ~/src/{t} for-each-ref refs/heads/cyclix/ | wc -l"
        )),
        "branches",
    );
    assert_eq!(n.trim(), "0", "the empty run branch is a temporary ref");
    assert_eq!(
        rec["leftovers"].as_array().map(Vec::len),
        Some(0),
        "{rec:#}"
    );
}

#[test]
fn sigkill_at_each_teardown_step_converges_to_zero_leftovers_and_records_where_it_died() {
    // security-cases §3: kill -9 the toolkit at each teardown step; the next invocation
    // converges; the dead run's record names the step. And between the record and the marker's
    // removal: the finished record stays the truth.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = tenant(tb, "e2e-tdkill", "[cyclix-demo-agent]", "");
    let mut points: Vec<String> = cyclix::failpoint::TEARDOWN_STEPS
        .iter()
        .map(|s| format!("teardown.{s}"))
        .collect();
    points.push("phase.audit".into());
    points.push("record.written".into());
    for point in &points {
        arm(tb, &t, point);
        let out = start(tb, &t);
        arm(tb, &t, "");
        assert!(!out.status.success(), "{point}: the run was not killed");
        expect_success(
            &tb.user_sh(&format!(
                "systemctl --user reset-failed cyclix-run@{t}.service || true"
            )),
            "reset",
        );
        let dead = dead_run(tb, &t).unwrap_or_else(|| panic!("{point}: no marker left"));
        // The next run converges the dead one first, and passes itself.
        let out = start(tb, &t);
        let rec = record(tb, &t);
        assert!(out.status.success(), "{point}: {rec:#}");
        assert!(
            rec["notices"]
                .to_string()
                .contains(&format!("converged run {dead}")),
            "{point}: {rec:#}"
        );
        let old = record_of(tb, &t, &dead);
        if point == "record.written" {
            assert_eq!(old["result"], "passed", "{point}: {old:#}");
        } else {
            assert_eq!(old["failed_phase"], "interrupted", "{point}: {old:#}");
            let want = point
                .strip_prefix("phase.")
                .map_or_else(|| point.replacen('.', "/", 1), str::to_string);
            assert_eq!(old["died_in"].as_str(), Some(want.as_str()), "{old:#}");
            assert_eq!(
                old["leftovers"].as_array().map(Vec::len),
                Some(0),
                "{point}: {old:#}"
            );
        }
        for run in [dead.as_str(), rec["run_id"].as_str().expect("id")] {
            let left = leftovers(tb, run, &t);
            assert!(left.trim().is_empty(), "{point}: run {run} left:\n{left}");
        }
        assert_eq!(dead_run(tb, &t), None, "{point}: a marker is left");
    }
}

#[test]
fn a_git_config_replaced_on_the_host_mid_run_fails_the_run_closed() {
    // `git config` on the host writes a new .git/config and renames it over the old one; Linux
    // then detaches the sandbox's read-only bind of it (a mount over a renamed path in another
    // mount namespace is dropped), so the agent could write the repository's config. The run
    // must not pass as if its boundary had held: the host-side tripwire names it.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = tenant(
        tb,
        "e2e-gitcfg",
        r#"[sh, -c, "sleep 5; if printf '' >> \"$(git rev-parse --git-common-dir)/config\" 2>/dev/null; then echo CONFIG-WRITABLE; else echo CONFIG-READONLY; fi; exec cyclix-demo-agent"]"#,
        "",
    );
    let run = inject_mid_run(
        tb,
        &t,
        &format!("sleep 1; git -C ~/src/{t} config cyclix.e2e replaced"),
    );
    let rec = record(tb, &t);
    assert_eq!(rec["run_id"].as_str(), Some(run.as_str()));
    assert_eq!(rec["result"], "leak_detected", "{rec:#}");
    assert!(
        rec["refusal"]
            .to_string()
            .contains("/config was replaced on the host during the run"),
        "{rec:#}"
    );
    // What the agent saw, for the record of this fact on the stack (not asserted: the point
    // is that the run fails whatever the kernel did).
    eprintln!("agent saw: {}", rec["agent_log"]);
    let left = leftovers(tb, &run, &t);
    assert!(left.trim().is_empty(), "{left}");
}
