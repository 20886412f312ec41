//! Issue 14: real agent CLIs from their presets, on the testbed. The preset's own parts — the
//! pod's keep-id user namespace with the CLI's non-root uid, the task on stdin with the
//! environment in front of it, the fixed variables, the credential kept outside — are shown
//! first with the demo image as an override (fast, no CLI image needed); the real `claude` and
//! `codex` CLIs then run against the scripted stand-in of the model API on the outside host.

use crate::common::run::{WATCH_ROUNDS, WATCH_ROUNDS_FILE, leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

use crate::common::tenant::key_file;

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

/// A random lowercase tag for model names, marks and final texts.
fn tag() -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}", n ^ u128::from(std::process::id()) << 64)
}

/// What the stand-in plays for one test (`/run/testbed-api/scripts/MODEL.json`).
struct Script {
    model: String,
    final_text: String,
    input_tokens: u64,
    output_tokens: u64,
}

/// Writes the stand-in's script for a fix of the demo bug: edit, run the tests (the tool result
/// must carry their output, "3 passed"), commit; then a final text and usage chosen here.
fn script(tb: &Testbed, cli: &str) -> Script {
    let t = tag();
    let n = u64::from_str_radix(&t[t.len() - 6..], 16).unwrap_or(7);
    let s = Script {
        model: format!("standin-{cli}-{}", &t[t.len() - 12..]),
        final_text: format!("stand-in final {t}: fixed subtract, 3 tests pass"),
        input_tokens: 1000 + n % 9000,
        output_tokens: 100 + n % 900,
    };
    let body = serde_json::json!({
        "tool_calls": [
            "sed -i '/^def subtract/,/return/ s/return a + b/return a - b/' calc/__init__.py && python3 -m pytest -q -p no:cacheprovider 2>&1 | tail -3",
            "git add calc/__init__.py && git commit -q -m 'Fix calc.subtract (stand-in)' && git log --oneline -1",
        ],
        "expect_in_tool_result": "3 passed",
        "final_text": s.final_text,
        "usage": {"input_tokens": s.input_tokens, "output_tokens": s.output_tokens},
    });
    expect_success(
        &tb.root_sh(&format!(
            "mkdir -p /run/testbed-api/scripts && cat > /run/testbed-api/scripts/{}.json <<'JSON'\n{body}\nJSON",
            s.model
        )),
        "write the stand-in's script",
    );
    s
}

/// The stand-in's result lines for `model` (one per API request).
fn results(tb: &Testbed, model: &str) -> Vec<serde_json::Value> {
    let out = tb.root_sh(&format!(
        "cat /run/testbed-api/results/{model}.jsonl 2>/dev/null"
    ));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Runs tenant `t` (preset `preset`, its key in `var`) against the stand-in and checks the
/// whole claim: passed with the CLI's commit, the record holds the stand-in's final text and
/// usage exactly, the test output reached the API, and the real key reached the stand-in only
/// through the proxy: its value is in the stand-in's request log (positive control) and in no
/// sandbox-facing place (the agent's journal, the record).
fn real_cli_passes(preset: &str, var: &str, t: &str, header: &str) -> serde_json::Value {
    let tb = prepared();
    crate::common::testbed::preset_image(preset);
    key_file(tb, t, var);
    let s = script(tb, preset);
    Tenant::new(t)
        .preset(preset)
        .agent_key(&format!("model: {}", s.model))
        .agent_key("api_host: api.example")
        .task("\"Fix the failing test in calc, run the tests, commit the fix.\"")
        .extra_yaml("egress:\n  allow: []\n  ca_certs: [/srv/testbed-ca.pem]")
        .write(tb);
    let out = tb.user(&["systemctl", "--user", "start", &format!("cyclix-run@{t}")]);
    let rec = record(tb, t);
    assert!(out.status.success(), "{preset} run failed: {rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert_eq!(rec["gate_exit"], 0, "{rec:#}");
    let commits = rec["commits"].as_array().expect("commits");
    assert_eq!(commits.len(), 1, "{rec:#}");
    assert_eq!(commits[0]["subject"], "Fix calc.subtract (stand-in)");
    let r = &rec["agent_report"];
    assert_eq!(r["final_message"], s.final_text.as_str(), "{r:#}");
    assert_eq!(r["usage"]["input_tokens"], s.input_tokens, "{r:#}");
    assert_eq!(r["usage"]["output_tokens"], s.output_tokens, "{r:#}");
    assert_eq!(r["tool_calls"], 2, "{r:#}");
    assert_eq!(r["is_error"], false, "{r:#}");
    assert_eq!(rec["preset"]["model"], s.model.as_str());
    let res = results(tb, &s.model);
    assert!(
        res.iter().any(|l| l["expect_found"] == true),
        "the tool result with the tests' output reached the API: {res:#?}"
    );
    key_reached_only_the_stand_in(tb, &rec, preset, var, t, header);
    rec
}

/// The key: the stand-in saw the real value in `header` (the proxy added it), and nothing the
/// sandbox produced holds it (the agent's journal, the record); no leftovers.
fn key_reached_only_the_stand_in(
    tb: &Testbed,
    rec: &serde_json::Value,
    preset: &str,
    var: &str,
    t: &str,
    header: &str,
) {
    let unit = format!("{}-agent.service", naming_base(rec));
    let scan = tb.user_sh(&format!(
        "sed -n 's/^{var}=//p' ~/.config/cyclix/tenants/{t}.env > /tmp/{t}-needle; [ -s /tmp/{t}-needle ] || exit 9
         api=$(grep -c -F -f /tmp/{t}-needle /run/testbed-api/requests.jsonl)
         journal=$(journalctl --user -u {unit} --no-pager -o cat | grep -c -F -f /tmp/{t}-needle)
         rec=$(grep -c -F -f /tmp/{t}-needle ~/.local/state/cyclix/runs/{t}/latest.json)
         rm -f /tmp/{t}-needle; echo api=$api journal=$journal record=$rec"
    ));
    let scan = String::from_utf8_lossy(&scan.stdout).to_string();
    assert!(
        scan.contains("journal=0 record=0") && !scan.contains("api=0"),
        "{preset}: the key reached the stand-in and nothing else ({header}): {scan}"
    );
    let left = leftovers(tb, rec["run_id"].as_str().expect("run id"), t);
    assert!(left.is_empty(), "leftovers: {left}");
}

/// `cyclix-RUN` of a record.
fn naming_base(rec: &serde_json::Value) -> String {
    format!("cyclix-{}", rec["run_id"].as_str().expect("run id"))
}

#[test]
fn claude_code_from_its_preset_fixes_the_demo_through_the_stand_in_with_its_key_kept_outside() {
    let _shared = crate::common::testbed::shared();
    let rec = real_cli_passes(
        "claude-code",
        "ANTHROPIC_API_KEY",
        "e2e-claude",
        "x-api-key",
    );
    // Claude Code counts API turns: two tool calls and the final answer.
    assert_eq!(rec["agent_report"]["turns"], 3, "{rec:#}");
}

#[test]
fn codex_from_its_preset_fixes_the_demo_through_the_stand_in_with_its_key_kept_outside() {
    let _shared = crate::common::testbed::shared();
    let rec = real_cli_passes("codex", "OPENAI_API_KEY", "e2e-codex", "authorization");
    // Codex reports one turn per `exec`; it has no turn flag, so max_turns is not enforced.
    assert_eq!(rec["agent_report"]["turns"], 1, "{rec:#}");
}

#[test]
fn a_refused_api_call_fails_the_run_with_the_clis_own_error_recorded() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    crate::common::testbed::preset_image("claude-code");
    let t = "e2e-claude-refused";
    key_file(tb, t, "ANTHROPIC_API_KEY");
    let s = script(tb, "claude-refused");
    // The spec's own credential for the key replaces the preset's and allows another path
    // only: the proxy refuses /v1/messages (403) and the CLI must fail, not hang or pass.
    Tenant::new(t)
        .preset("claude-code")
        .agent_key(&format!("model: {}", s.model))
        .agent_key(
            "credentials: [{env: ANTHROPIC_API_KEY, host: api.example, header: x-api-key, paths: [/v1/other]}]",
        )
        .extra_yaml("egress:\n  allow: []\n  ca_certs: [/srv/testbed-ca.pem]")
        .write(tb);
    let out = tb.user(&["systemctl", "--user", "start", &format!("cyclix-run@{t}")]);
    let rec = record(tb, t);
    assert!(
        !out.status.success(),
        "a refused API call cannot pass: {rec:#}"
    );
    assert_eq!(rec["result"], "agent_failed", "{rec:#}");
    assert_eq!(rec["agent_report"]["is_error"], true, "{rec:#}");
    let msg = rec["agent_report"]["final_message"].as_str().unwrap_or("");
    assert!(
        msg.contains("403"),
        "the CLI's own error is recorded: {msg}"
    );
    let refused = rec["egress_decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .any(|d| d["reason"] == "credential_path_not_allowed");
    assert!(refused, "the proxy's refusal is recorded: {rec:#}");
    assert!(
        results(tb, &s.model).is_empty(),
        "nothing reached the stand-in"
    );
    let left = leftovers(tb, rec["run_id"].as_str().expect("run id"), t);
    assert!(left.is_empty(), "leftovers: {left}");
}

#[test]
fn an_agent_running_many_processes_is_real_work_not_a_leak() {
    // Issue 20 item 5: the watch's P20 allowed 30 processes, so `make -j` or `pytest -n` was
    // stopped as a leak. 80 processes live across at least two watch rounds (waited for by
    // their probes' own marks); the run passes.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-many-procs";
    Tenant::new(t)
        .file(WATCH_ROUNDS_FILE, WATCH_ROUNDS)
        .agent_cmd(
            r#"[sh, -c, "for i in $(seq 80); do sleep 600 & p=\"$p $!\"; done; sleep 1; echo PROCS=$(ls -d /proc/[0-9]* | wc -l); . /work/rounds.sh; watch_rounds 2; kill $p; wait; exec cyclix-demo-agent"]"#,
        )
        .write(tb);
    let out = tb.user(&["systemctl", "--user", "start", &format!("cyclix-run@{t}")]);
    let rec = record(tb, t);
    assert!(out.status.success(), "{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    let procs: u64 = rec["agent_log"]
        .as_array()
        .and_then(|l| {
            l.iter()
                .find_map(|x| x.as_str()?.strip_prefix("PROCS=")?.parse().ok())
        })
        .unwrap_or(0);
    assert!(
        procs > 80,
        "the agent really ran more than 80 processes: {procs}"
    );
    assert!(
        rec["watch_rounds"].as_u64().is_some_and(|n| n >= 2),
        "the watch ran while they lived: {}",
        rec["watch_rounds"]
    );
}

/// Gemini CLI from its preset (in CI like the others; `testbed.sh up` fetches its packages).
#[test]
fn gemini_cli_fixes_the_demo_through_the_stand_in() {
    let _shared = crate::common::testbed::shared();
    let rec = real_cli_passes(
        "gemini-cli",
        "GEMINI_API_KEY",
        "e2e-gemini",
        "x-goog-api-key",
    );
    // Gemini CLI's stream-json reports no turn count.
    assert_eq!(
        rec["agent_report"]["turns"],
        serde_json::Value::Null,
        "{rec:#}"
    );
}

/// aider sends no tools: the stand-in plays its text protocol (`text_replies`, see
/// `standin_api.py` `aider_play`): the whole fixed `calc/__init__.py` in aider's "whole" edit
/// format, which aider applies and auto-commits with the stand-in's commit message. aider does
/// not run a reply's shell commands headless (`--yes-always` excludes them) and sends test
/// output only when its own `--test-cmd` fails, so no test output reaches the API here; its
/// stdout is plain text ("Tokens: 1.2k sent, 56 received."): the record holds no usage.
#[test]
fn aider_fixes_the_demo_through_the_stand_in() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    crate::common::testbed::preset_image("aider");
    let t = "e2e-aider";
    key_file(tb, t, "OPENAI_API_KEY");
    let tg = tag();
    let model = format!("standin-aider-{}", &tg[tg.len() - 12..]);
    let subject = format!("Fix calc.subtract (stand-in {})", &tg[tg.len() - 8..]);
    let src = include_str!("../../demo/project/calc/__init__.py");
    let i = src.find("def subtract").expect("demo subtract");
    let j = i + src[i..].find("return a + b").expect("demo bug");
    let fixed = format!("{}return a - b{}", &src[..j], &src[j + 12..]);
    let body = serde_json::json!({
        "text_replies": [format!("calc/__init__.py\n```\n{fixed}```\n")],
        "commit_message": subject,
        "usage": {"input_tokens": 1234, "output_tokens": 56},
    });
    expect_success(
        &tb.root_sh(&format!(
            "mkdir -p /run/testbed-api/scripts && cat > /run/testbed-api/scripts/{model}.json <<'JSON'\n{body}\nJSON"
        )),
        "write the stand-in's script",
    );
    Tenant::new(t)
        .preset("aider")
        .agent_key(&format!("model: openai/{model}"))
        .agent_key("api_host: api.example")
        .task("\"Fix the failing test in calc, run the tests, commit the fix.\"")
        .extra_yaml("egress:\n  allow: []\n  ca_certs: [/srv/testbed-ca.pem]")
        .write(tb);
    let out = tb.user(&["systemctl", "--user", "start", &format!("cyclix-run@{t}")]);
    let rec = record(tb, t);
    assert!(out.status.success(), "aider run failed: {rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert_eq!(rec["gate_exit"], 0, "{rec:#}");
    let commits = rec["commits"].as_array().expect("commits");
    assert_eq!(commits.len(), 1, "{rec:#}");
    assert_eq!(
        commits[0]["subject"],
        subject.as_str(),
        "aider's auto-commit with the stand-in's message"
    );
    assert_eq!(rec["preset"]["model"], format!("openai/{model}").as_str());
    let r = &rec["agent_report"];
    assert_eq!(r["stream"], "plain-text", "{r:#}");
    assert_eq!(r["usage"], serde_json::Value::Null, "{r:#}");
    let res = results(tb, &model);
    assert!(
        res.iter().any(|l| l["side"] == false) && res.iter().any(|l| l["side"] == true),
        "aider asked for the edit and for the commit message: {res:#?}"
    );
    let log = rec["agent_log"].to_string();
    assert!(log.contains("Applied edit to calc/__init__.py"), "{log}");
    key_reached_only_the_stand_in(tb, &rec, "aider", "OPENAI_API_KEY", t, "authorization");
}

/// The README's agent demo (`scripts/demo --agent claude-code`, issue 32 item 1): the steps
/// the script runs inside the testbed, taken from the script itself (`--print-steps`), make
/// the demo's fix through the real `claude` CLI against the stand-in: the run passes with the
/// CLI's commit, the summary shows the credential line, the stand-in saw the made-up key (the
/// proxy added it: the positive control of the scan) and the agent's journal and the record
/// hold it nowhere.
#[test]
fn the_agent_demo_of_scripts_demo_runs_the_real_cli_with_its_key_kept_outside() {
    let _shared = crate::common::testbed::shared();
    let tb = crate::common::run::demo_ready();
    crate::common::testbed::preset_image("claude-code");
    let steps = |part: &str| {
        let out = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo"))
            .args(["--agent", "claude-code", "--print-steps", part])
            .env("CYCLIX_BIN", tb.cyclix_bin())
            .output()
            .expect("scripts/demo runs");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).expect("UTF-8 steps")
    };
    expect_success(&tb.root_sh(&steps("root")), "the stand-in's script");
    let out = tb.user_sh(&steps("user"));
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let rec = record(tb, "demo-claude-code");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert_eq!(
        rec["commits"][0]["subject"], "Fix calc.subtract (stand-in)",
        "{rec:#}"
    );
    assert!(
        text.contains("credential ANTHROPIC_API_KEY (api.example): "),
        "the summary's credential line: {text}"
    );
    let seen = text
        .split("the stand-in API saw it in ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(0);
    assert!(seen >= 1, "the stand-in saw the key: {text}");
    assert!(
        text.contains("the agent's journal holds it 0 time(s), the record 0"),
        "{text}"
    );
    // `cyclix logs` (the demo prints it) reads the CLI's stream as its messages, tool calls and
    // results; `--raw` keeps the JSON events (the control: they are there to be read).
    let raw = expect_success(
        &tb.user_sh(&format!(
            "{} logs demo-claude-code -n 0 --raw",
            tb.cyclix_bin()
        )),
        "logs --raw",
    );
    assert!(
        raw.contains(r#"agent| {"type":"system""#) && raw.contains(r#""type":"result""#),
        "{raw}"
    );
    let logs = text
        .split("+ cyclix logs ")
        .nth(1)
        .unwrap_or_else(|| panic!("the demo prints cyclix logs: {text}"));
    for seen in [
        "agent| session started: model standin-demo-claude-code",
        "agent| tool Bash: sed -i ",
        "agent|   ↳ ",
        "agent| assistant: Fixed calc.subtract",
        "agent| result: success after ",
    ] {
        assert!(logs.contains(seen), "{seen:?} in the demo's logs: {logs}");
    }
    assert!(!logs.contains(r#"agent| {"type""#), "no raw event: {logs}");
    let left = leftovers(
        tb,
        rec["run_id"].as_str().expect("run id"),
        "demo-claude-code",
    );
    assert!(left.is_empty(), "leftovers: {left}");
}
