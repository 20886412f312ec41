//! Fault injection on the real stack (security-cases §3, issue 6 item 4): podman's storage
//! lock held by another process, the project's file system full, the timer firing while a run
//! is active, and memory limits on a host that cannot enforce them. Each test asserts the
//! guarantee on the host (what exists, what is unchanged, what the record says), not only the
//! exit code.

use crate::common::run::{leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

fn line<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no `{key}` line in:\n{out}"))
}

#[test]
fn a_held_podman_storage_lock_fails_the_run_in_bounded_time_naming_the_holder_and_creates_nothing()
{
    // Holding storage.lock blocks every podman command on the testbed: no other test may run.
    let _only = crate::common::testbed::exclusive();
    let tb = prepared();
    let c = tb.cyclix_bin();
    let t = Tenant::new("e2e-lock").write(tb);
    // The holder takes the same kind of lock podman takes (a POSIX write lock, fcntl F_SETLKW)
    // on podman's global storage lock and keeps it; it is not a process cyclix started.
    let script = format!(
        r#"set -u
S=~/.local/share/containers/storage/storage.lock
rm -f /tmp/lock-ready
printf '%s\n' 'import fcntl, sys, time' 'f = open(sys.argv[1], "r+")' 'fcntl.lockf(f, fcntl.LOCK_EX)' 'open("/tmp/lock-ready", "w").close()' 'time.sleep(300)' > /tmp/hold-podman-storage-lock.py
python3 /tmp/hold-podman-storage-lock.py "$S" &
h=$!
for i in $(seq 1 100); do [ -e /tmp/lock-ready ] && break; sleep 0.1; done
timeout 2 podman ps >/dev/null 2>&1; echo "podman-ps-under-lock=$?"
s=$(date +%s%N)
timeout 60 {c} run {t} --storage-lock-wait 3s; echo "rc=$?"
echo "elapsed_ms=$(( ($(date +%s%N) - s) / 1000000 ))"
s=$(date +%s%N)
timeout 60 {c} leftovers 2>&1; echo "leftovers-rc=$?"
echo "leftovers-ms=$(( ($(date +%s%N) - s) / 1000000 ))"
kill -0 $h 2>/dev/null && echo "holder-alive=yes"
echo "holder=$h"
kill $h; wait $h 2>/dev/null
run=$(python3 -c 'import json,os; print(json.load(open(os.path.expanduser("~/.local/state/cyclix/runs/{t}/latest.json")))["run_id"])')
echo "run=$run"
echo "branches=$(git -C ~/src/{t} branch --list "cyclix/{t}/$run" | wc -l)"
# The default bound (60 s): tests outside the guard may have queued podman calls meanwhile.
{c} run {t} >/dev/null 2>&1; echo "rc-after=$?"
"#
    );
    let out = tb.user_sh(&script);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let all = format!("{stdout}\n{stderr}");
    assert_eq!(
        line(&stdout, "podman-ps-under-lock="),
        "124",
        "the injected lock must really block podman:\n{all}"
    );
    assert_eq!(line(&stdout, "rc="), "2", "cyclix failed, exit 2:\n{all}");
    // Bounded by --storage-lock-wait 3s: the run waited that long at least, then ended on its
    // own (exit 2, not `timeout`'s 124) with the error "for more than 3 s" naming the holder
    // (below); how much longer start-up took is the host's business.
    let elapsed: u64 = line(&stdout, "elapsed_ms=").parse().expect("ms");
    assert!(
        elapsed >= 3000,
        "the run must wait out --storage-lock-wait 3s, took {elapsed} ms:\n{all}"
    );
    assert_eq!(
        line(&stdout, "holder-alive="),
        "yes",
        "cyclix must never kill a process it did not start"
    );
    let holder = line(&stdout, "holder=");
    let run = line(&stdout, "run=").to_string();
    // `cyclix leftovers` names the holder instead of waiting out podman's deadline: it ends on
    // its own with exit 2 (not `timeout`'s 124) and the holder's pid.
    assert_eq!(line(&stdout, "leftovers-rc="), "2", "{all}");
    assert!(
        stdout.contains("storage lock is held") && stdout.contains(&format!("pid {holder}")),
        "{all}"
    );
    // The record and the error name the lock, the holder's pid and its command line.
    let rec_text = expect_success(
        &tb.user_sh(&format!("cat ~/.local/state/cyclix/runs/{t}/{run}.json")),
        "the failed run's record",
    );
    let rec: serde_json::Value = serde_json::from_str(&rec_text).expect("json");
    assert_eq!(rec["result"], "error", "{rec:#}");
    assert_eq!(rec["failed_phase"], "prepare", "{rec:#}");
    let err = rec["error"].as_str().unwrap_or_default();
    for want in [
        "/home/cyx/.local/share/containers/storage/storage.lock",
        &format!("pid {holder}"),
        "hold-podman-storage-lock",
        "for more than 3 s",
    ] {
        assert!(err.contains(want), "`{want}` missing from the error: {err}");
    }
    assert!(
        stdout.contains(&format!("pid {holder}")),
        "the summary shows it too:\n{stdout}"
    );
    // Never started the agent; nothing half-created (checked once the lock is free again).
    assert!(
        rec["probes"].as_array().is_some_and(Vec::is_empty),
        "{rec:#}"
    );
    assert!(rec["agent_exit"].is_null(), "{rec:#}");
    assert_eq!(
        rec["leftovers"].as_array().map(Vec::len),
        Some(0),
        "{rec:#}"
    );
    assert_eq!(line(&stdout, "branches="), "0", "no run branch was created");
    let left = leftovers(tb, &run, &t);
    assert!(left.trim().is_empty(), "left behind by run {run}:\n{left}");
    // The next run works once the holder is gone.
    assert_eq!(line(&stdout, "rc-after="), "0", "{all}");
    let next = record(tb, &t);
    assert_ne!(next["run_id"].as_str(), Some(run.as_str()));
    assert_eq!(next["result"], "passed", "{next:#}");
}

#[test]
fn a_memory_limit_the_host_cannot_enforce_refuses_the_run_before_anything_exists() {
    // The testbed delegates no cgroup controller to the user manager (testbed README, fact 5):
    // podman's crun cannot set memory.max there. Before, such a run failed in its start phase
    // (agent unit status 127, the cause only in the journal) after creating its networks, pod
    // and proxy. Now it is refused up front, and `cyclix check` fails the same way.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let c = tb.cyclix_bin();
    let t = Tenant::new("e2e-oom")
        .agent_cmd(r#"[python3, -c, "b = bytearray(1 << 30)"]"#)
        .agent_key("resources: { memory: 64M }")
        .write(tb);
    let out = tb.user_sh(&format!(
        "count() {{ echo $(podman ps -a -q --filter label=io.cyclix.tenant={t} | wc -l)/$(podman network ls -q --filter label=io.cyclix.tenant={t} | wc -l); }}
         before=$(count)
         {c} run {t}; echo \"rc=$?\"
         echo \"objects=$before -> $(count)\"
         echo \"branches=$(git -C ~/src/{t} branch --list 'cyclix/*' | wc -l)\"
         ls ~/.local/state/cyclix/runs/{t} 2>/dev/null | wc -l | sed 's/^/records=/'
         systemctl --user start cyclix-run@{t}.service 2>/dev/null; echo \"unit-status=$(systemctl --user show -P ExecMainStatus cyclix-run@{t}.service)\"
         systemctl --user reset-failed cyclix-run@{t}.service 2>/dev/null
         {c} check --quick --tenant {t} --json > /tmp/{t}-check.json; echo \"check-rc=$?\""
    ));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let all = format!("{stdout}\n{stderr}");
    assert_eq!(
        line(&stdout, "rc="),
        "1",
        "a refusal is a finding, exit 1:\n{all}"
    );
    for want in [
        "agent.resources.memory needs the `memory` controller",
        "user@1000.service/cgroup.controllers: none",
        "refused instead of running without it",
        "Delegate=cpu cpuset io memory pids",
    ] {
        assert!(stderr.contains(want), "`{want}` missing:\n{all}");
    }
    let objects = line(&stdout, "objects=");
    let (before, after) = objects.split_once(" -> ").expect("before -> after");
    // This tenant's objects only (other tests' runs make theirs meanwhile): its containers and
    // networks carry its label; a pod is never made without both (its networks come first).
    assert_eq!(before, after, "a refused run created podman objects");
    assert_eq!(
        before, "0/0",
        "the tenant had objects before its run: {all}"
    );
    assert_eq!(
        line(&stdout, "branches="),
        "0",
        "a refused run created a branch"
    );
    assert_eq!(
        line(&stdout, "records="),
        "0",
        "nothing ran, so nothing is recorded"
    );
    assert_eq!(
        line(&stdout, "unit-status="),
        "1",
        "the unit refuses the same way"
    );
    assert_eq!(line(&stdout, "check-rc="), "1", "{all}");
    let report = expect_success(
        &tb.user_sh(&format!("cat /tmp/{t}-check.json")),
        "check report",
    );
    let report: serde_json::Value = serde_json::from_str(&report).expect("json");
    let delegation = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == "cgroup-delegation")
        .cloned()
        .expect("cgroup-delegation check");
    assert_eq!(delegation["status"], "fail", "{delegation:#}");
    assert!(
        delegation["found"]
            .as_str()
            .is_some_and(|f| f.contains(&format!("{t}: memory"))),
        "{delegation:#}"
    );
}

#[test]
fn a_full_project_file_system_is_reported_as_enospc_with_files_intact_and_teardown_complete() {
    // The tenant's repository and its worktrees live on one small tmpfs (the worktrees
    // directory is a bind mount of a directory on it); the agent fills it.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let c = tb.cyclix_bin();
    let agent = r#"[sh, -c, "dd if=/dev/zero of=filler bs=64k 2>&1 | grep -m1 -o 'No space left on device'; head -c 65536 /dev/urandom > more.bin || echo WRITE-FAILED; git add -A; git -c user.name=a -c user.email=a@a commit -qm fill 2>&1 | tail -1; exit 3"]"#;
    let t = Tenant::new("e2e-enospc").agent_cmd(agent).write(tb);
    let fs = "/home/cyx/enospc-fs";
    let wts = format!("/home/cyx/.local/share/cyclix/worktrees/{t}");
    expect_success(
        &tb.root_sh(&format!(
            "set -e; umount -q {wts} 2>/dev/null || true; umount -q {fs} 2>/dev/null || true
             mkdir -p {fs} {wts}; chown cyx:cyx {wts}
             mount -t tmpfs -o size=8m,uid=1000,gid=1000,mode=0755 tmpfs {fs}
             install -d -o cyx -g cyx {fs}/worktrees; mount --bind {fs}/worktrees {wts}"
        )),
        "mount a small tmpfs for the project",
    );
    let sums = "cd ~/enospc-fs/repo && { find . -path ./.git -prune -o -type f -print | sort | xargs sha256sum; sha256sum .git/config .git/HEAD; git rev-parse main; }";
    let out = tb.user_sh(&format!(
        "set -u
         git clone -q ~/.local/share/cyclix/demo/project ~/enospc-fs/repo
         sed -i 's|^repo: .*|repo: {{ path: ~/enospc-fs/repo, base: main }}|' ~/.config/cyclix/tenants/{t}.yaml
         before=$({sums} | sha256sum)
         {c} run {t}; echo \"rc=$?\"
         after=$({sums} | sha256sum)
         [ \"$before\" = \"$after\" ] && echo files=identical || {{ echo files=changed; {sums}; }}
         git -C ~/enospc-fs/repo fsck --no-dangling >/dev/null 2>&1; echo \"fsck=$?\"
         echo \"avail-after=$(df --output=avail -B1 ~/enospc-fs | tail -1 | tr -d ' ')\"
         ls -A {wts} | wc -l | sed 's/^/worktrees-left=/'"
    ));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let all = format!("{stdout}\n{stderr}");
    let rec = record(tb, &t);
    let _ = tb.root_sh(&format!("umount -q {wts}; umount -q {fs}; rmdir {fs}"));
    assert_eq!(
        line(&stdout, "rc="),
        "1",
        "the agent failed: a finding:\n{all}"
    );
    assert_eq!(rec["result"], "agent_failed", "{rec:#}");
    // The agent saw ENOSPC; nothing pretended to succeed.
    let log = rec["agent_log"].to_string();
    assert!(log.contains("No space left on device"), "{rec:#}");
    assert!(
        log.contains("WRITE-FAILED"),
        "a write must fail, not be cut short silently: {rec:#}"
    );
    assert!(
        rec["commits"].as_array().is_some_and(Vec::is_empty),
        "{rec:#}"
    );
    // cyclix names the cause from statvfs of the worktree's file system.
    let causes = rec["causes"].to_string();
    assert!(
        causes.contains("project filesystem full (avail 0 B of 8 MiB) at /home/cyx/.local/share/cyclix/worktrees/e2e-enospc/")
            && causes.contains("also holds the repository's git dir /home/cyx/enospc-fs/repo/.git"),
        "{rec:#}"
    );
    assert!(stdout.contains("CAUSE: project filesystem full"), "{all}");
    // The user's files are byte-identical, the repository is sound, and teardown freed the
    // space and left nothing.
    assert_eq!(line(&stdout, "files="), "identical", "{all}");
    assert_eq!(line(&stdout, "fsck="), "0", "{all}");
    let avail: u64 = line(&stdout, "avail-after=").parse().expect("bytes");
    assert!(
        avail > 4 << 20,
        "teardown removed the worktree and its filler: {avail} B free"
    );
    assert_eq!(line(&stdout, "worktrees-left="), "0", "{all}");
    assert_eq!(
        rec["leftovers"].as_array().map(Vec::len),
        Some(0),
        "{rec:#}"
    );
    let run = rec["run_id"].as_str().expect("run id");
    let left = leftovers(tb, run, &t);
    assert!(left.trim().is_empty(), "{left}");
}

#[test]
fn a_timer_firing_while_its_run_is_active_records_each_skip_and_starts_no_second_run() {
    // The real timer, firing every 2 s (a test drop-in; specs allow at most every 5 minutes):
    // the first trigger starts the run (its agent sleeps 7 s), the next ones find it active.
    // systemd alone would drop them silently; each must be one skip record and one journal
    // line naming the active run, and no second run or container may appear.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let c = tb.cyclix_bin();
    let t = Tenant::new("e2e-tick")
        // 7 s: the leak watch's rounds (every 5 s) stay clear of the agent's end (a round
        // that races the container's exit is reported as a leak: see the report of issue 6).
        .agent_cmd(r#"[sh, -c, "sleep 7 && exec cyclix-demo-agent"]"#)
        .write(tb);
    let script = format!(
        r#"set -u
R=~/.local/state/cyclix/runs/{t}; D=~/.config/systemd/user/cyclix-run@{t}.timer.d
rm -rf "$R" "$D"; mkdir -p "$D"
printf '[Timer]\nOnCalendar=*:*:0/2\nAccuracySec=100ms\n' > "$D/test-every-2s.conf"
systemctl --user daemon-reload
since=$(date '+%Y-%m-%d %H:%M:%S')
systemctl --user start cyclix-run@{t}.timer
max=0
for i in $(seq 1 300); do
  n=$(podman ps -a -q --filter label=io.cyclix.tenant={t} --filter label=io.cyclix.role=agent | wc -l)
  [ "$n" -gt "$max" ] && max=$n
  [ -f "$R/skips.jsonl" ] && [ "$(wc -l < "$R/skips.jsonl")" -ge 2 ] && break
  sleep 0.1
done
systemctl --user stop cyclix-run@{t}.timer
for i in $(seq 1 600); do
  n=$(podman ps -a -q --filter label=io.cyclix.tenant={t} --filter label=io.cyclix.role=agent | wc -l)
  [ "$n" -gt "$max" ] && max=$n
  s=$(systemctl --user show -P ActiveState cyclix-run@{t}.service); [ "$s" = activating ] || break; sleep 0.1
done
echo "max-agents=$max"
echo "records=$(ls "$R" | grep -c '^2.*\.json$')"
echo "skips=$(wc -l < "$R/skips.jsonl")"
j=$(journalctl --user -t cyclix-tick@{t} --since "$since" -o cat --no-pager)
echo "journal-started=$(printf '%s\n' "$j" | grep -c '^started cyclix-run@{t}.service')"
echo "journal-skipped=$(printf '%s\n' "$j" | grep -c 'cyclix: skipped: run ')"
printf '%s\n' "$j" | grep -m1 'cyclix: skipped: run ' | sed 's/^/journal-line=/'
{c} status {t} | grep 'skipped while' | sed 's/^/status=/'
rm -rf "$D"; systemctl --user daemon-reload
cat "$R/skips.jsonl"
"#
    );
    let out = tb.user_sh(&script);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let all = format!("{stdout}\n{stderr}");
    let rec = record(tb, &t);
    let run = rec["run_id"].as_str().expect("run id").to_string();
    assert_eq!(
        rec["result"], "passed",
        "the first run is untouched: {rec:#}\n{all}"
    );
    assert_eq!(line(&stdout, "records="), "1", "exactly one run: {all}");
    assert_eq!(
        line(&stdout, "max-agents="),
        "1",
        "never a second agent container: {all}"
    );
    assert_eq!(line(&stdout, "journal-started="), "1", "{all}");
    let skips: usize = line(&stdout, "skips=").trim().parse().expect("count");
    assert!(skips >= 2, "{all}");
    assert_eq!(
        line(&stdout, "journal-skipped=").parse::<usize>().ok(),
        Some(skips),
        "one skip record per missed trigger, each logged:\n{all}"
    );
    assert!(
        line(&stdout, "journal-line=").contains(&format!("skipped: run {run} active since ")),
        "{all}"
    );
    assert!(
        line(&stdout, "status=").contains(&format!(
            "{skips} trigger(s) skipped while a run was active; last: skipped: run {run}"
        )),
        "{all}"
    );
    for l in stdout.lines().filter(|l| l.starts_with('{')) {
        let s: serde_json::Value = serde_json::from_str(l).expect("skip line is JSON");
        assert_eq!(s["active_run"].as_str(), Some(run.as_str()), "{s}");
        assert_eq!(s["trigger"], format!("cyclix-run@{t}.timer"), "{s}");
    }
    let left = leftovers(tb, &run, &t);
    assert!(left.trim().is_empty(), "{left}");
}

#[test]
fn a_user_manager_reexec_during_the_agent_and_the_gate_does_not_abort_the_run() {
    // Issue 20 item 2: `systemctl --user daemon-reexec` (a package update does it) while the
    // agent works, and again while the gate runs: the D-Bus errors of the blink are retried
    // within the phase's deadline and the run passes. Exclusive: the user manager is shared.
    let _only = crate::common::testbed::exclusive();
    let tb = crate::common::run::prepared();
    let t = "e2e-reexec";
    crate::common::tenant::Tenant::new(t)
        .agent_cmd(r#"[sh, -c, "sleep 4 && exec cyclix-demo-agent"]"#)
        .gate_cmd(r#"[sh, -c, "sleep 4 && exec python3 -m pytest -q -p no:cacheprovider"]"#)
        .write(tb);
    let run = crate::common::run::inject_mid_run(
        tb,
        t,
        "systemctl --user daemon-reexec; sleep 0.3; systemctl --user daemon-reexec; sleep 0.3; systemctl --user daemon-reexec; \
         for i in $(seq 1 200); do podman ps --format '{{.Names}}' | grep -q \"cyclix-$run-gate\" && break; sleep 0.1; done; \
         sleep 1; systemctl --user daemon-reexec",
    );
    let rec = crate::common::run::record_of(tb, t, &run);
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert_eq!(
        (rec["agent_exit"].as_i64(), rec["gate_exit"].as_i64()),
        (Some(0), Some(0))
    );
    let left = crate::common::run::leftovers(tb, &run, t);
    assert!(left.is_empty(), "leftovers: {left}");
    // The blink was seen and ridden out (the run unit's journal names each retry).
    let retried = expect_success(
        &tb.user_sh(&format!(
            "journalctl --user -u cyclix-run@{t}.service --no-pager -o cat | grep -c 'did not answer' || true"
        )),
        "read the run's journal",
    );
    assert!(
        retried.trim().parse::<u32>().is_ok_and(|n| n >= 1),
        "no retry logged: the reexecs never met a call ({retried})"
    );
}

#[test]
fn a_full_runtime_dir_is_a_named_cause_and_no_exit_code_is_invented() {
    // Issue 20 item 6: with $XDG_RUNTIME_DIR full an agent that exited 0 was recorded as
    // `agent_failed`, exit 1, no cause. Exclusive: the runtime dir is the user's.
    let _only = crate::common::testbed::exclusive();
    let tb = crate::common::run::prepared();
    let t = "e2e-rtfull";
    // The agent works until the runtime dir is full (the test's mark, a file the host puts
    // into its work tree once `cat` met ENOSPC), then fixes the demo and exits 0: the fault is
    // there when conmon stores that exit and cyclix writes what follows. Measured with a
    // `sleep 3` instead, three ways the race went: conmon could not store the 0 ("conmon
    // exited prematurely, exit code could not be retrieved", the unit failed with conmon's
    // status 1); or conmon stored it and the export container after it exited 125; or the fill
    // came after the agent's end and the run passed. The first two are the fault; the third
    // was the race, gone now. A failure must name the full runtime dir and claim no exit code
    // it did not read.
    crate::common::tenant::Tenant::new(t)
        .agent_cmd(r#"[sh, -c, "i=0; while [ ! -e /work/.e2e-filled ] && [ $i -lt 1200 ]; do i=$((i+1)); sleep 0.1; done; rm -f /work/.e2e-filled; exec cyclix-demo-agent"]"#)
        .write(tb);
    let run = crate::common::run::inject_mid_run(
        tb,
        t,
        &format!(
            "{}
             cat /dev/zero > $XDG_RUNTIME_DIR/e2e-fill 2>/dev/null; df -h $XDG_RUNTIME_DIR > /tmp/e2e-rtfull-df
             touch ~/.local/share/cyclix/worktrees/{t}/$run/.e2e-filled",
            crate::common::run::LET_GO
        ),
    );
    expect_success(
        &tb.user_sh("rm -f $XDG_RUNTIME_DIR/e2e-fill"),
        "free the runtime dir",
    );
    let rec = crate::common::run::record_of(tb, t, &run);
    let causes = rec["causes"].to_string();
    assert_ne!(
        rec["result"], "passed",
        "the full runtime dir did not bite: {rec:#}"
    );
    assert!(
        causes.contains("runtime dir full"),
        "the full runtime dir is named: {rec:#}"
    );
    assert!(
        rec["agent_exit"].is_null() || rec["agent_exit"] == 0,
        "no invented exit code (the agent exited 0): {rec:#}"
    );
    assert!(
        rec["causes"][0]
            .as_str()
            .is_some_and(|c| c.starts_with("runtime dir full")),
        "the full runtime dir is the first cause: {rec:#}"
    );
    let left = crate::common::run::leftovers(tb, &run, t);
    assert!(left.is_empty(), "leftovers: {left}");
}

#[test]
fn an_agent_killed_by_a_signal_is_named_so_not_given_an_exit_code() {
    // Issue 20 item 6: a unit whose main process was killed has the signal in ExecMainStatus;
    // it was recorded as "exit 9". Tier worktree: the agent is the unit's main process.
    let _shared = crate::common::testbed::shared();
    let tb = crate::common::run::prepared();
    let t = "e2e-killed";
    crate::common::tenant::Tenant::new(t)
        .tier("worktree")
        .agent_cmd(r#"[sh, -c, "kill -KILL $$"]"#)
        .write(tb);
    let _ = crate::common::run::start(tb, t);
    let rec = record(tb, t);
    assert_eq!(rec["result"], "agent_failed", "{rec:#}");
    assert!(
        rec["agent_exit"].is_null(),
        "a signal is not an exit code: {rec:#}"
    );
    assert!(
        rec["causes"]
            .to_string()
            .contains("killed by signal 9 (SIGKILL)"),
        "{rec:#}"
    );
}

#[test]
fn a_state_dir_that_cannot_take_the_record_loses_no_result() {
    // Issue 20 item 4: with the records dir unwritable (as with ~/.local/state full) the
    // record write failed, the summary was never printed and the next run's convergence
    // wrote a false death. Now: the record goes to the runtime dir, the summary is printed,
    // and the next run moves it back and keeps it.
    let _shared = crate::common::testbed::shared();
    let tb = crate::common::run::prepared();
    let t = "e2e-statefull";
    crate::common::tenant::Tenant::new(t)
        .agent_cmd(r#"[sh, -c, "sleep 3 && exec cyclix-demo-agent"]"#)
        .write(tb);
    let d = format!("~/.local/state/cyclix/runs/{t}");
    let run = crate::common::run::inject_mid_run(tb, t, &format!("chmod 0500 {d}"));
    let after = expect_success(
        &tb.user_sh(&format!(
            "chmod 0700 {d}; ls {d}; echo ---; ls $XDG_RUNTIME_DIR/cyclix/records/{t}; echo ---; \
             journalctl --user -u cyclix-run@{t}.service --no-pager -o cat | grep -E 'could not be written|^run {run} [(]tenant' | tail -3"
        )),
        "look at both record dirs",
    );
    let mut parts = after.split("---");
    let (state, fallback, journal) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    assert!(
        !state.contains(&format!("{run}.json")),
        "positive control: the state dir refused it: {after}"
    );
    assert!(
        fallback.contains(&format!("{run}.json")),
        "the record is in the runtime dir: {after}"
    );
    assert!(
        journal.contains("could not be written") && journal.contains(&format!("run {run} (tenant")),
        "the reason and the summary reached the journal: {after}"
    );
    // What the run itself wrote (the import could not write in the records dir either, so
    // it failed there: that is its own, true result).
    let own: serde_json::Value = serde_json::from_str(&expect_success(
        &tb.user_sh(&format!(
            "cat $XDG_RUNTIME_DIR/cyclix/records/{t}/{run}.json"
        )),
        "read the fallback record",
    ))
    .expect("JSON");
    // The next run moves it back and keeps it: no invented death.
    let _ = crate::common::run::start(tb, t);
    let rec = crate::common::run::record_of(tb, t, &run);
    assert_eq!(rec, own, "the first run's own record, unchanged");
    let latest = record(tb, t);
    assert_ne!(latest["run_id"], run.as_str(), "latest is the second run");
    assert!(
        latest["notices"].to_string().contains("moved back"),
        "the second run says so: {latest:#}"
    );
}
