//! The project's own environment on the real stack (issue 15, items 2, 4 and 5), in one
//! tenant and three runs that share the setup:
//!
//! 1. A passing baseline, then an agent that writes a marker into its HOME, XDG and TMPDIR
//!    (positive control: it reads each back), tries plain writes to three setup paths (each
//!    gets EROFS; control: a write to a non-setup file succeeds and is committed) and then
//!    changes `setup.sh` with plumbing only (`hash-object`, `update-index --cacheinfo`,
//!    `commit-tree`, `update-ref`), never touching the work tree: the record flags
//!    `setup.sh` and the delivery is held.
//! 2. The same with `delivery.allow_setup_changes: true`: the markers of run 1 are gone, and
//!    the plumbing commit is delivered (the control of run 1's hold).
//! 3. A failing baseline: `setup_broken`, exit 1, its output in the record, the agent never
//!    ran its command (control: run 1's agent log shows the agent's own lines), nothing left.

use crate::common::run::{leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// The agent: `one` writes the markers and tries the setup paths; `two` checks the markers
/// are gone. Both then commit a note and change `setup.sh` with plumbing only.
const AGENT: &str = r#"set -u
echo "ENV HOME=$HOME TMPDIR=$TMPDIR CACHE=$XDG_CACHE_HOME CONFIG=$XDG_CONFIG_HOME DATA=$XDG_DATA_HOME DNT=$DO_NOT_TRACK"
dirs="$HOME $XDG_CACHE_HOME $XDG_CONFIG_HOME $XDG_DATA_HOME $TMPDIR"
if [ "$1" = one ]; then
  for d in $dirs; do
    mkdir -p "$d" && echo run1 > "$d/e2e-marker" && [ "$(cat "$d/e2e-marker")" = run1 ] || { echo "MARKER-FAILED $d"; exit 11; }
  done
  echo MARKERS-WRITTEN
  for f in setup.sh ci/a.yml .cyclix/keep .cyclix/new; do
    if (echo tampered >> "$f") 2>/dev/null; then echo "WROTE $f"; exit 12; fi
    (echo tampered >> "$f") 2>&1 | sed "s|^|DENIED $f: |"
  done
else
  for d in $dirs; do
    if [ -e "$d/e2e-marker" ]; then echo "MARKER-LEFT $d"; exit 13; fi
  done
  echo MARKERS-ABSENT
fi
echo "note $1" >> notes.txt && git add notes.txt && git commit -qm "note $1" || exit 14
echo NONSETUP-WRITTEN
blob=$(printf '#!/bin/sh\necho replaced\n' | git hash-object -w --stdin) || exit 15
git update-index --cacheinfo "100644,$blob,setup.sh" || exit 16
tree=$(git write-tree) || exit 17
c=$(git commit-tree "$tree" -p HEAD -m "plumbing: setup.sh") || exit 18
git update-ref HEAD "$c" || exit 19
echo PLUMBED
"#;

const GATE: &str =
    r#"[sh, -c, "echo GATE HOME=$HOME TMPDIR=$TMPDIR CACHE=$XDG_CACHE_HOME; test -f notes.txt"]"#;

/// The tenant's spec: `agent` and `baseline` commands, `allow` for `allow_setup_changes`.
fn tenant(agent: &str, baseline: &str, allow: bool) -> Tenant {
    Tenant::new("e2e-setup")
        .agent_cmd(agent)
        .gate_cmd(GATE)
        .file("t/agent.sh", AGENT)
        .file("setup.sh", "#!/bin/sh\necho setup v1\n")
        .file("ci/a.yml", "steps: []\n")
        .file(".cyclix/keep", "kept\n")
        .extra_yaml(&format!(
            "setup: [setup.sh, \"ci/*.yml\"]\nbaseline:\n  command: {baseline}\n  timeout: 1m\n\
             delivery:\n  remote: deliver\n  allow_setup_changes: {allow}"
        ))
}

/// `cyclix run T`: (exit status, stdout).
fn run(tb: &Testbed, t: &str) -> (String, String) {
    let out = expect_success(
        &tb.user_sh(&format!(
            "set +e; {} run {t} 2>/dev/null; echo \"rc=$?\"",
            tb.cyclix_bin()
        )),
        "cyclix run",
    );
    let rc = out
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("rc="))
        .unwrap_or("")
        .to_string();
    (rc, out)
}

fn log(rec: &serde_json::Value, key: &str) -> String {
    rec[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(serde_json::Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn spec_only(tb: &Testbed, t: &Tenant, name: &str) {
    expect_success(
        &tb.user_sh(&format!(
            "cat > ~/.config/cyclix/tenants/{name}.yaml <<'SPEC'\n{}SPEC\n",
            t.yaml()
        )),
        "rewrite the spec",
    );
}

#[test]
fn setup_files_are_read_only_and_held_the_baseline_gates_the_agent_and_nothing_is_shared() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let ok_baseline = r#"[sh, -c, "test -r setup.sh && echo BASELINE-OK home=$HOME"]"#;
    let t = tenant("[sh, t/agent.sh, one]", ok_baseline, false).write(tb);
    expect_success(
        &tb.user_sh(&format!(
            "set -e; rm -rf ~/{t}-remote.git; git init -q --bare ~/{t}-remote.git; git -C ~/src/{t} remote add deliver ~/{t}-remote.git"
        )),
        "a local bare remote",
    );

    held(tb, &t);
    delivered(tb, &t, ok_baseline);
    broken(tb, &t);
}

/// Run 1: EROFS on the setup paths, markers written, the plumbing change held.
fn held(tb: &Testbed, t: &str) {
    let (rc, out) = run(tb, t);
    let rec = record(tb, t);
    let agent_log = log(&rec, "agent_log");
    assert_eq!(rc, "1", "held delivery is a finding: {out}\n{rec:#}");
    assert_eq!(rec["result"], "delivery_refused", "{rec:#}");
    assert_eq!(rec["baseline"]["passed"], true, "{rec:#}");
    assert!(
        log(&rec["baseline"], "log").contains("BASELINE-OK home=/tmp"),
        "{rec:#}"
    );
    assert!(
        agent_log.contains("MARKERS-WRITTEN"),
        "positive control: {agent_log}"
    );
    assert!(
        agent_log.contains("ENV HOME=/tmp TMPDIR=/tmp CACHE=/tmp/.cache CONFIG=/tmp/.config DATA=/tmp/.local/share DNT=1"),
        "{agent_log}"
    );
    for f in ["setup.sh", "ci/a.yml", ".cyclix/keep", ".cyclix/new"] {
        assert!(
            agent_log
                .lines()
                .any(|l| l.starts_with(&format!("DENIED {f}: "))
                    && l.contains("Read-only file system")),
            "a plain write to {f} was not refused with EROFS: {agent_log}"
        );
    }
    assert!(!agent_log.contains("WROTE "), "{agent_log}");
    assert!(
        agent_log.contains("NONSETUP-WRITTEN") && agent_log.contains("PLUMBED"),
        "{agent_log}"
    );
    assert_eq!(rec["gate_exit"], 0, "{rec:#}");
    assert!(
        log(&rec, "gate_log").contains("GATE HOME=/tmp TMPDIR=/tmp CACHE=/tmp/.cache"),
        "{rec:#}"
    );
    assert_eq!(
        rec["setup_changes"],
        serde_json::json!(["setup.sh"]),
        "{rec:#}"
    );
    assert_eq!(rec["delivery"]["outcome"], "held", "{rec:#}");
    assert!(
        rec["delivery"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("allow_setup_changes"),
        "{rec:#}"
    );
    let branch = rec["branch"].as_str().unwrap_or("").to_string();
    let remote = expect_success(
        &tb.user_sh(&format!("git ls-remote ~/{t}-remote.git")),
        "ls-remote",
    );
    assert!(!remote.contains(&branch), "a held run was pushed: {remote}");
    assert!(
        out.contains("SETUP CHANGED by the run's commits: setup.sh"),
        "{out}"
    );
}

/// Run 2: nothing of run 1 left in HOME or the caches; allowed, the change is delivered.
fn delivered(tb: &Testbed, t: &str, ok_baseline: &str) {
    spec_only(tb, &tenant("[sh, t/agent.sh, two]", ok_baseline, true), t);
    let (rc, out) = run(tb, t);
    let rec = record(tb, t);
    let agent_log = log(&rec, "agent_log");
    assert_eq!(rc, "0", "{out}\n{rec:#}");
    assert!(agent_log.contains("MARKERS-ABSENT"), "{agent_log}");
    assert_eq!(
        rec["setup_changes"],
        serde_json::json!(["setup.sh"]),
        "{rec:#}"
    );
    assert_eq!(rec["delivery"]["outcome"], "pushed", "{rec:#}");
    let pushed = expect_success(
        &tb.user_sh(&format!(
            "git -C ~/{t}-remote.git show {}:setup.sh",
            rec["delivery"]["pushed_tip"].as_str().unwrap_or("none")
        )),
        "the delivered setup.sh",
    );
    assert!(pushed.contains("echo replaced"), "{pushed}");
}

/// Run 3: the baseline fails; the agent never starts.
fn broken(tb: &Testbed, t: &str) {
    let broken = r#"[sh, -c, "echo BASELINE-BROKEN; echo db unreachable >&2; exit 3"]"#;
    spec_only(
        tb,
        &tenant(
            r#"[sh, -c, "echo AGENT-STARTED; git commit --allow-empty -qm x"]"#,
            broken,
            false,
        ),
        t,
    );
    let (rc, out) = run(tb, t);
    let rec = record(tb, t);
    assert_eq!(rc, "1", "{out}\n{rec:#}");
    assert_eq!(rec["result"], "setup_broken", "{rec:#}");
    assert_eq!(rec["baseline"]["exit"], 3, "{rec:#}");
    let bl = log(&rec["baseline"], "log");
    assert!(
        bl.contains("BASELINE-BROKEN") && bl.contains("db unreachable"),
        "{rec:#}"
    );
    let agent_log = log(&rec, "agent_log");
    assert!(
        !agent_log.contains("AGENT-STARTED"),
        "the agent ran: {agent_log}"
    );
    assert!(agent_log.contains("the baseline failed"), "{agent_log}");
    assert!(
        rec["agent_exit"].is_null() && rec["gate_exit"].is_null(),
        "{rec:#}"
    );
    assert_eq!(rec["commits"], serde_json::json!([]), "{rec:#}");
    assert!(out.contains("SETUP BROKEN: the baseline"), "{out}");
    assert!(out.contains("not the agent, is at fault"), "{out}");
    assert_eq!(rec["leftovers"], serde_json::json!([]), "{rec:#}");
    let run_id = rec["run_id"].as_str().unwrap_or("");
    assert_eq!(
        leftovers(tb, run_id, t).trim(),
        "",
        "left after a broken setup"
    );
}

#[test]
fn a_baseline_that_leaves_a_process_or_hangs_breaks_the_setup_with_what_it_did() {
    // Issue 36 item 6: a baseline's `sleep &` kept running beside the agent after the probes,
    // recorded nowhere; a baseline past its timeout lost its output.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let with = |baseline: &str, timeout: &str| {
        Tenant::new("e2e-baseline-left")
            .agent_cmd(r#"[sh, -c, "echo AGENT-STARTED; exec cyclix-demo-agent"]"#)
            .extra_yaml(&format!(
                "baseline:\n  command: {baseline}\n  timeout: {timeout}\n"
            ))
    };
    let t = with(r#"[sh, -c, "sleep 300 & echo LEFT-RUNNING"]"#, "1m").write(tb);
    let (rc, out) = run(tb, &t);
    let rec = record(tb, &t);
    assert_eq!(rc, "1", "{out}\n{rec:#}");
    assert_eq!(rec["result"], "setup_broken", "{rec:#}");
    assert_eq!(rec["baseline"]["exit"], 0, "it exited 0: {rec:#}");
    let why = rec["baseline"]["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("left 1 process(es) running beside the agent") && why.contains("(sleep)"),
        "{rec:#}"
    );
    assert!(!log(&rec, "agent_log").contains("AGENT-STARTED"), "{rec:#}");
    assert!(out.contains("SETUP BROKEN"), "{out}");
    // The positive control: the same baseline ending what it started passes.
    spec_only(
        tb,
        &with(r#"[sh, -c, "sleep 300 & kill $!; wait; echo CLEAN"]"#, "1m"),
        &t,
    );
    let (rc, out) = run(tb, &t);
    let rec = record(tb, &t);
    assert_eq!(
        (rc.as_str(), &rec["result"]),
        ("0", &serde_json::json!("passed")),
        "{out}\n{rec:#}"
    );
    // A baseline past its timeout keeps what it printed up to its kill. The timeout counts
    // from before `podman exec` starts the shell: 30 s leaves the echo room on a loaded host,
    // and `sleep 300` still outlasts it.
    spec_only(
        tb,
        &with(r#"[sh, -c, "echo BEFORE-THE-HANG; exec sleep 300"]"#, "30s"),
        &t,
    );
    let (rc, out) = run(tb, &t);
    let rec = record(tb, &t);
    assert_eq!(rc, "1", "{out}\n{rec:#}");
    assert!(rec["baseline"]["exit"].is_null(), "{rec:#}");
    assert!(
        log(&rec["baseline"], "log").contains("BEFORE-THE-HANG"),
        "the output up to the deadline: {rec:#}"
    );
    let run_id = rec["run_id"].as_str().unwrap_or("");
    assert_eq!(leftovers(tb, run_id, &t).trim(), "");
}
