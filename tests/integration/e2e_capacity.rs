//! The host-wide limit on runs at once (issue 16, item 4) on the real stack: with `max_runs: 1`
//! a second tenant's run waits in its `queue` phase while the first runs (`cyclix status`
//! shows it queued), then takes the slot and passes; with `queue_timeout: 0s` a run over the
//! limit fails at once in phase `queue`, naming the limit, and leaves nothing. The settings come
//! from a file named by `CYCLIX_CONFIG`, so no other test's runs see the limit; the test holds
//! the testbed exclusively, so no other run holds a slot meanwhile.

use crate::common::run::{leftovers, prepared, record_of};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

#[test]
fn a_run_over_max_runs_waits_its_turn_then_passes_and_a_zero_timeout_fails_in_queue() {
    let _only = crate::common::testbed::exclusive();
    let tb = prepared();
    // A holds the only slot until the test releases its agent; B and C are plain demo runs.
    let a = Tenant::new("e2e-cap-a")
        .agent_cmd(
            r#"[sh, -c, "i=0; while [ ! -e /work/.release ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done; rm -f /work/.release; exec cyclix-demo-agent"]"#,
        )
        .write(tb);
    let b = Tenant::new("e2e-cap-b").write(tb);
    let c_t = Tenant::new("e2e-cap-c").write(tb);
    let c = tb.cyclix_bin();
    let script = format!(
        r#"set -u
# B is a tenant's first run, as a new user's is: no records dir yet (its queue note makes it).
rm -rf ~/.local/state/cyclix/runs/{b}
cfg=$(mktemp); printf 'max_runs: 1\nqueue_timeout: 2m\n' > "$cfg"
cfg0=$(mktemp); printf 'max_runs: 1\nqueue_timeout: 0s\n' > "$cfg0"
phase() {{ cat ~/.local/state/cyclix/runs/$1/*.phase 2>/dev/null; }}
CYCLIX_CONFIG=$cfg {c} run {a} >/tmp/cap-a.out 2>&1 & pa=$!
for i in $(seq 1 600); do [ "$(phase {a})" = agent ] && break; sleep 0.1; done
echo "a_phase=$(phase {a})"
# C: the slot is A's and C may not wait: phase queue fails at once.
CYCLIX_CONFIG=$cfg0 {c} run {c_t} >/tmp/cap-c.out 2>&1; echo "rc_c=$?"
CYCLIX_CONFIG=$cfg {c} run {b} >/tmp/cap-b.out 2>&1 & pb=$!
q=
for i in $(seq 1 600); do
  CYCLIX_CONFIG=$cfg {c} status --json >/tmp/cap-status.json 2>/dev/null
  q=$(python3 -c 'import json; print(" ".join(x["tenant"] for x in json.load(open("/tmp/cap-status.json"))["capacity"]["queued"]))')
  [ -n "$q" ] && break; sleep 0.1
done
echo "queued=$q"
echo "status_text<<"; CYCLIX_CONFIG=$cfg {c} status | grep -e 'run slots' -e queued; echo ">>"
echo "b_phase_while_a=$(phase {b})"
touch ~/.local/share/cyclix/worktrees/{a}/*/.release
wait $pa; echo "rc_a=$?"
wait $pb; echo "rc_b=$?"
echo "queue_files=$(ls $XDG_RUNTIME_DIR/cyclix/queue | wc -l)"
for t in {a} {b} {c_t}; do echo "run_$t=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' ~/.local/state/cyclix/runs/$t/latest.json)"; done
tail -3 /tmp/cap-c.out
"#
    );
    let out = expect_success(&tb.user_sh(&script), "three runs under max_runs 1");
    let field = |k: &str| crate::common::kv(&out, k);
    assert_eq!(
        field("a_phase"),
        "agent",
        "A never reached its agent:\n{out}"
    );
    // The positive control of the wait: B was seen queued while A held the slot.
    assert_eq!(field("queued"), b, "B was never seen queued:\n{out}");
    assert_eq!(field("b_phase_while_a"), "queue", "{out}");
    assert!(
        out.contains("run slots: 1 of 1 taken (max_runs in")
            && out.contains(&format!("queued: {b}/")),
        "status shows the slot and the queue:\n{out}"
    );
    // B's tenant line calls it queued, not running (newcomer trial 7, item 12); A's is running.
    assert!(
        out.lines()
            .any(|l| l.starts_with(b.as_str()) && l.contains(" · queued ")),
        "B's tenant line says queued:\n{out}"
    );
    assert_eq!(field("rc_a"), "0", "{out}");
    assert_eq!(field("rc_b"), "0", "{out}");
    assert_eq!(
        field("queue_files"),
        "0",
        "the queue is empty after:\n{out}"
    );
    let (ra, rb, rc) = (
        field(&format!("run_{a}")),
        field(&format!("run_{b}")),
        field(&format!("run_{c_t}")),
    );
    let rec_a = record_of(tb, &a, &ra);
    let rec_b = record_of(tb, &b, &rb);
    let rec_c = record_of(tb, &c_t, &rc);
    assert_eq!(rec_a["result"], "passed", "{rec_a:#}");
    assert_eq!(rec_a["queue"]["busy_at_start"], 0, "{rec_a:#}");
    assert_eq!(rec_b["result"], "passed", "{rec_b:#}");
    assert_eq!(rec_b["phases"][0]["name"], "queue", "{rec_b:#}");
    assert_eq!(rec_b["queue"]["max_runs"], 1, "{rec_b:#}");
    assert_eq!(rec_b["queue"]["busy_at_start"], 1, "{rec_b:#}");
    assert!(
        rec_b["queue"]["waited_ms"].as_u64().unwrap_or(0) > 0,
        "B waited for A: {rec_b:#}"
    );
    // C: refused at once in phase queue, naming the limit and the file, nothing created.
    assert_eq!(field("rc_c"), "2", "{out}");
    assert_eq!(rec_c["failed_phase"], "queue", "{rec_c:#}");
    let err = rec_c["error"].as_str().unwrap_or_default();
    assert!(
        err.contains("max_runs") && err.contains(&format!("{a}/{ra}")),
        "the error names the limit and the holder: {err}"
    );
    for (t, r) in [(&a, &ra), (&b, &rb), (&c_t, &rc)] {
        assert_eq!(
            leftovers(tb, r, t).trim(),
            "",
            "run {r} of {t} left something"
        );
    }
}

#[test]
fn a_config_that_does_not_validate_refuses_the_run_naming_file_line_key_and_fix() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-cap-bad").write(tb);
    let c = tb.cyclix_bin();
    let out = tb.user_sh(&format!(
        "cfg=$(mktemp); printf '# settings\\nmax_run: 2\\n' > \"$cfg\"; \
         CYCLIX_CONFIG=$cfg {c} run {t}; echo \"rc=$?\"; \
         CYCLIX_CONFIG=$cfg {c} check --quick | grep -A1 -e '^FAIL  config ' ; \
         echo \"files=$(ls ~/.local/state/cyclix/runs/{t}/ 2>/dev/null | wc -l)\""
    ));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("rc=1"), "{text}");
    assert!(
        text.contains(":2:1: max_run") && text.contains("max_runs") && text.contains("fix:"),
        "file:line:col, the key, the nearest valid key and a fix: {text}"
    );
    assert!(
        text.contains("FAIL  config ") && text.contains("files=0"),
        "check fails `config`; no record, no marker: nothing of the run was made: {text}"
    );
}

#[test]
fn stop_ends_a_cyclix_run_run_and_a_killed_run_keeps_its_slot_until_its_sandbox_is_gone() {
    // Issue 36 item 5. Exclusive: the slots are the host's.
    let _only = crate::common::testbed::exclusive();
    let tb = prepared();
    let a = Tenant::new("e2e-cap-kill")
        .agent_cmd(
            r#"[sh, -c, "i=0; while [ ! -e /work/.release ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done; rm -f /work/.release; exec cyclix-demo-agent"]"#,
        )
        .write(tb);
    let b = Tenant::new("e2e-cap-next").write(tb);
    let c = tb.cyclix_bin();
    let script = format!(
        r#"set -u
# B is a tenant's first run, as a new user's is: no records dir yet (its queue note makes it).
rm -rf ~/.local/state/cyclix/runs/{b}
cfg=$(mktemp); printf 'max_runs: 1\nqueue_timeout: 2m\n' > "$cfg"
cfg0=$(mktemp); printf 'max_runs: 1\nqueue_timeout: 0s\n' > "$cfg0"
R=~/.local/state/cyclix/runs/{a}
live() {{ ls $R/*.running 2>/dev/null | sed 's#.*/##; s#[.]running$##' | grep -v "^${{1:-none}}$" | head -1; }}
at_agent() {{ for i in $(seq 1 600); do r=$(live "${{1:-none}}"); [ -n "$r" ] && [ "$(cat $R/$r.phase 2>/dev/null)" = agent ] && break; sleep 0.1; done; echo "$r"; }}
# 1. `cyclix stop` of a run started with `cyclix run` (no unit): it ends, teardown done.
CYCLIX_CONFIG=$cfg {c} run {a} >/tmp/cap-kill-1.out 2>&1 & pa=$!
r1=$(at_agent); echo "r1=$r1"
{c} stop {a} >/tmp/cap-stop.out 2>&1; echo "rc_stop=$?"
kill -0 $pa 2>/dev/null && echo "alive_after_stop=yes" || echo "alive_after_stop=no"
wait $pa; echo "rc_stopped=$?"
echo "stop_said=$(tr '\n' ' ' < /tmp/cap-stop.out)"
# 2. A run SIGKILLed under max_runs 1: its sandbox is up, so its slot is taken.
CYCLIX_CONFIG=$cfg {c} run {a} >/tmp/cap-kill-2.out 2>&1 & pa=$!
r2=$(at_agent); echo "r2=$r2"
kill -KILL $pa; wait $pa 2>/dev/null
echo "agent_up_after_kill=$(podman ps -q --filter label=io.cyclix.run=$r2 --filter label=io.cyclix.role=agent | wc -l)"
CYCLIX_CONFIG=$cfg0 {c} run {b} >/tmp/cap-next-1.out 2>&1; echo "rc_b_while_dead=$?"
echo "b_refused=$(tr '\n' ' ' < /tmp/cap-next-1.out)"
# 3. The tenant's next run converges the dead one first; then the slot is free again.
CYCLIX_CONFIG=$cfg {c} run {a} >/tmp/cap-kill-3.out 2>&1 & pa=$!
r3=$(at_agent "$r2"); echo "r3=$r3"
touch ~/.local/share/cyclix/worktrees/{a}/$r3/.release
wait $pa; echo "rc_a3=$?"
CYCLIX_CONFIG=$cfg0 {c} run {b} >/tmp/cap-next-2.out 2>&1; echo "rc_b_after=$?"
for t in {b}; do echo "run_b=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run_id"])' ~/.local/state/cyclix/runs/$t/latest.json)"; done
"#
    );
    let out = expect_success(&tb.user_sh(&script), "stop, kill and the next runs");
    let field = |k: &str| crate::common::kv(&out, k);
    // 1. stop stopped it (before: "stopped cyclix-run@…: inactive" while the run went on).
    let r1 = field("r1");
    assert!(
        !r1.is_empty(),
        "the first run never reached its agent:\n{out}"
    );
    assert_eq!(field("rc_stop"), "0", "{out}");
    assert_eq!(
        field("alive_after_stop"),
        "no",
        "stop returned before the run ended:\n{out}"
    );
    assert!(
        field("stop_said").contains(&format!("stopped run {r1} of {a}")),
        "{out}"
    );
    let rec1 = record_of(tb, &a, &r1);
    assert_eq!(rec1["result"], "interrupted", "{rec1:#}");
    assert_eq!(
        leftovers(tb, &r1, &a).trim(),
        "",
        "the stopped run left something"
    );
    // 2. The positive control that the dead run's sandbox is up: its agent container runs;
    // the next tenant's run may not take the slot (before: it ran beside it).
    let r2 = field("r2");
    assert_eq!(field("agent_up_after_kill"), "1", "{out}");
    assert_eq!(field("rc_b_while_dead"), "2", "{out}");
    let b_run = field("run_b");
    let refused = field("b_refused");
    assert!(
        refused.contains(&format!("{a}/{r2} (its cyclix died")) && refused.contains("max_runs"),
        "the refusal names the dead run and the limit: {refused}"
    );
    // 3. Converged by the tenant's next run, the slot is free: the same refused run passes.
    assert_eq!(field("rc_a3"), "0", "{out}");
    assert_eq!(field("rc_b_after"), "0", "{out}");
    assert_eq!(record_of(tb, &b, &b_run)["result"], "passed");
    assert_eq!(
        leftovers(tb, &r2, &a).trim(),
        "",
        "the killed run was converged"
    );
}
