//! The metrics file (issue 32, item 4) on the real stack: with `metrics_textfile` in cyclix's
//! config (a file named by `CYCLIX_CONFIG`, so no other test's runs write it), a pool keeper
//! writes it after its passes, and `cyclix run` after a passed run and after a failed one
//! (the gate fails). Each time Debian's `promtool check metrics` (the testbed's `prometheus`
//! package) accepts it, and its counts per result are the runs'. Positive controls: promtool
//! rejects a copy with an unescaped newline in a label value and one whose counter lost its
//! `_total`. A file that cannot be written changes no run's result: it is said on stderr.

use crate::common::run::{leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;
use crate::e2e_pool::drain;

/// The text between `<<name` and `name>>` in `out`.
fn block<'a>(out: &'a str, name: &str) -> &'a str {
    let start = format!("<<{name}\n");
    let end = format!("{name}>>");
    let from = out
        .find(&start)
        .unwrap_or_else(|| panic!("no {start} in:\n{out}"))
        + start.len();
    let len = out[from..]
        .find(&end)
        .unwrap_or_else(|| panic!("no {end} in:\n{out}"));
    &out[from..from + len]
}

/// The value of the sample `series` (name and labels as written) in `text`.
fn sample<'a>(text: &'a str, series: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
}

#[test]
#[allow(clippy::too_many_lines)] // one script of runs, every claim and its positive control
fn the_metrics_file_passes_promtool_after_a_keeper_pass_a_passed_and_a_failed_run() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let pass = Tenant::new("e2e-met-pass").write(tb);
    // An agent that fixes nothing: the demo's failing test fails the gate.
    let fail = Tenant::new("e2e-met-fail")
        .agent_cmd(r#"[sh, -c, "echo looked; exit 0"]"#)
        .write(tb);
    let kept = Tenant::new("e2e-met-pool")
        .extra_yaml("pool:\n  size: 1\n  max_idle: 30m")
        .write(tb);
    drain(tb, &kept);
    let c = tb.cyclix_bin();
    let script = format!(
        r#"set -u
d=$(mktemp -d); chmod 755 "$d"
printf 'metrics_textfile: %s/cyclix.prom\n' "$d" > "$d/config.yaml"
bad=$(mktemp); printf 'metrics_textfile: %s/missing/cyclix.prom\n' "$d" > "$bad"
# Fresh counts: these tenants are this test's own.
rm -rf ~/.local/state/cyclix/runs/{pass} ~/.local/state/cyclix/runs/{fail} ~/.local/state/cyclix/pruned/{pass}.json
check() {{ promtool check metrics < "$1" >"$1.check" 2>&1; echo "$?"; }}
# The keeper fills its pool of one and writes the file after its pass.
CYCLIX_CONFIG=$d/config.yaml {c} pool keep {kept} >"$d/keep.out" 2>&1 & pk=$!
for i in $(seq 1 600); do
  grep -qx 'cyclix_pool_environments{{tenant="{kept}",state="ready"}} 1' "$d/cyclix.prom" 2>/dev/null && break
  sleep 0.1
done
cp "$d/cyclix.prom" "$d/keeper.prom" 2>/dev/null
kill -TERM $pk; wait $pk; echo "rc_keep=$?"
echo "check_keeper=$(check "$d/keeper.prom")"
echo "<<keeper"; cat "$d/keeper.prom"; echo "keeper>>"
CYCLIX_CONFIG=$d/config.yaml {c} run {pass} >"$d/pass.out" 2>&1; echo "rc_pass=$?"
cp "$d/cyclix.prom" "$d/pass.prom"
echo "check_pass=$(check "$d/pass.prom")"
echo "<<pass"; cat "$d/pass.prom"; echo "pass>>"
echo "mode=$(stat -c %a "$d/cyclix.prom")"
CYCLIX_CONFIG=$d/config.yaml {c} run {fail} >"$d/fail.out" 2>&1; echo "rc_fail=$?"
cp "$d/cyclix.prom" "$d/fail.prom"
echo "check_fail=$(check "$d/fail.prom")"
echo "<<fail"; cat "$d/fail.prom"; echo "fail>>"
echo "<<check"; cat "$d/fail.prom.check"; echo "check>>"
# Positive controls: the same check rejects a broken copy.
sed 's/tenant="{fail}"/tenant="{fail}\n"/' "$d/fail.prom" > "$d/newline.prom"
echo "check_newline=$(check "$d/newline.prom")"
sed 's/cyclix_leftovers_total/cyclix_leftovers/g' "$d/fail.prom" > "$d/suffix.prom"
echo "check_suffix=$(check "$d/suffix.prom")"
echo "<<controls"; cat "$d/newline.prom.check" "$d/suffix.prom.check"; echo "controls>>"
echo "files=$(ls -A "$d" | grep -c '^\.cyclix-')"
# `cyclix check` says where the metrics go, and warns of a directory that is not there.
echo "<<check_ok"; CYCLIX_CONFIG=$d/config.yaml {c} check --quick --json | python3 -c 'import json,sys; [print(c["status"], c["found"]) for c in json.load(sys.stdin)["checks"] if c["id"] == "config"]'; echo "check_ok>>"
echo "<<check_bad"; CYCLIX_CONFIG=$bad {c} check --quick --json | python3 -c 'import json,sys; [print(c["status"], c["found"], c["fix"]) for c in json.load(sys.stdin)["checks"] if c["id"] == "config"]'; echo "check_bad>>"
# A file that cannot be written: the run's result stands, and it says why.
CYCLIX_CONFIG=$bad {c} run {pass} >"$d/bad.out" 2>&1; echo "rc_bad=$?"
echo "<<bad"; grep -e 'metrics' -e 'passed' "$d/bad.out"; echo "bad>>"
"#
    );
    let out = expect_success(&tb.user_sh(&script), "runs writing the metrics file");
    drain(tb, &kept);
    let field = |k: &str| crate::common::kv(&out, k);
    assert_eq!(field("rc_keep"), "0", "the keeper stops on SIGTERM:\n{out}");
    let keeper = block(&out, "keeper");
    assert_eq!(
        sample(
            keeper,
            &format!(r#"cyclix_pool_environments{{tenant="{kept}",state="ready"}}"#)
        ),
        Some("1"),
        "the keeper's pass is in the file:\n{out}"
    );
    assert_eq!(
        sample(
            keeper,
            &format!(r#"cyclix_pool_wanted_environments{{tenant="{kept}"}}"#)
        ),
        Some("1"),
        "{keeper}"
    );
    assert_eq!(field("check_keeper"), "0", "promtool:\n{out}");

    assert_eq!(field("rc_pass"), "0", "{out}");
    assert_eq!(
        field("check_pass"),
        "0",
        "promtool after a passed run:\n{out}"
    );
    let p = block(&out, "pass");
    let runs = |text: &str, t: &str, result: &str| {
        sample(
            text,
            &format!(r#"cyclix_runs_total{{tenant="{t}",result="{result}"}}"#),
        )
        .map(str::to_owned)
    };
    assert_eq!(runs(p, &pass, "passed").as_deref(), Some("1"), "{p}");
    assert_eq!(runs(p, &pass, "gate_failed").as_deref(), Some("0"), "{p}");
    assert_eq!(
        runs(p, &fail, "gate_failed"),
        None,
        "no run of it yet:\n{p}"
    );
    assert_eq!(
        sample(
            p,
            &format!(r#"cyclix_time_to_agent_seconds_count{{tenant="{pass}",environment="cold"}}"#)
        ),
        Some("1"),
        "{p}"
    );
    assert_eq!(
        sample(
            p,
            &format!(r#"cyclix_last_run_leftovers{{tenant="{pass}"}}"#)
        ),
        Some("0"),
        "{p}"
    );
    assert_eq!(
        field("mode"),
        "644",
        "node_exporter reads it as another user"
    );

    let rec = record(tb, &fail);
    assert_eq!(rec["result"], "gate_failed", "{rec:#}");
    assert_eq!(field("rc_fail"), "1", "{out}");
    assert_eq!(
        field("check_fail"),
        "0",
        "promtool after a failed run:\n{}",
        block(&out, "check")
    );
    let f = block(&out, "fail");
    assert_eq!(runs(f, &pass, "passed").as_deref(), Some("1"), "{f}");
    assert_eq!(runs(f, &fail, "gate_failed").as_deref(), Some("1"), "{f}");
    assert_eq!(runs(f, &fail, "passed").as_deref(), Some("0"), "{f}");
    assert_eq!(
        sample(
            f,
            &format!(r#"cyclix_last_run_result{{tenant="{fail}",result="gate_failed"}}"#)
        ),
        Some("1"),
        "{f}"
    );
    assert_eq!(
        sample(
            f,
            &format!(r#"cyclix_run_phase_duration_seconds_count{{tenant="{fail}",phase="gate"}}"#)
        ),
        Some("1"),
        "{f}"
    );
    // The probe suite's own requests, most of them meant to be refused, are counted apart.
    let probe_denied = sample(
        f,
        &format!(r#"cyclix_egress_denied_total{{tenant="{fail}",by="probe"}}"#),
    )
    .and_then(|v| v.parse::<u64>().ok())
    .unwrap_or(0);
    assert!(probe_denied > 0, "{f}");
    // The controls: the same check fails on a broken copy.
    assert_ne!(field("check_newline"), "0", "{}", block(&out, "controls"));
    assert_ne!(field("check_suffix"), "0", "{}", block(&out, "controls"));
    assert!(
        block(&out, "controls").contains("should have \"_total\" suffix"),
        "{out}"
    );
    assert_eq!(field("files"), "0", "no temporary file left beside it");

    let ok = block(&out, "check_ok");
    // (A WARN of its own: CYCLIX_CONFIG is set in this shell only.)
    assert!(ok.contains("metrics written to /tmp/"), "{ok}");
    let bad = block(&out, "check_bad");
    assert!(
        bad.starts_with("warn ") && bad.contains("does not exist") && bad.contains("install -d"),
        "{bad}"
    );
    assert_eq!(field("rc_bad"), "0", "the run's result stands:\n{out}");
    let bad = block(&out, "bad");
    assert!(
        bad.contains("metrics not written after run") && bad.contains("missing"),
        "{bad}"
    );
    for t in [&pass, &fail] {
        let id = record(tb, t)["run_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(leftovers(tb, &id, t), "", "run {id} of {t} left nothing");
    }
}
