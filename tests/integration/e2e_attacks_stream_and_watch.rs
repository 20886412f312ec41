//! Issue 14, attacked: what a hostile agent that has read the source does with the parts that
//! are new this round (the preset's stream parser reading its stdout into the record).

use crate::common::run::{WATCH_ROUNDS, WATCH_ROUNDS_FILE, leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

/// The forger: prints the hash of its secret (the positive control that it holds the real
/// value), the raw value (the line-level redaction must catch it), then a Claude `result` line
/// whose text carries the value with its first character as a JSON `\u00XX` escape: the raw
/// line does not contain the value, the parsed string does. The demo fix runs first (quietly),
/// so the run passes and the forged lines are the log's last. The value starts with a letter:
/// a digit's escape (`\u0034` for `4`) ends in the digit itself, so the raw line would hold
/// the value after all.
const FORGE: &str = r#"set -e
cyclix-demo-agent > /dev/null 2>&1
t="$E2E_TOKEN"
first=$(printf %s "$t" | cut -c1)
rest=$(printf %s "$t" | cut -c2-)
hex=$(printf %s "$first" | od -An -tx1 | tr -d ' \n')
printf 'HASH=%s\n' "$(printf %s "$t" | sha256sum | cut -c1-64)"
printf '{"type":"assistant","message":{"content":[{"type":"text","text":"raw %s"}]}}\n' "$t"
printf '{"type":"result","result":"LEAK:\\u00%s%s:END","num_turns":1,"is_error":false}\n' "$hex" "$rest"
"#;

#[test]
fn a_json_escaped_secret_in_the_clis_stream_is_redacted_from_the_agent_report() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-a14-report";
    let hash = expect_success(
        &tb.user_sh(&format!(
            "set -e; mkdir -p ~/.config/cyclix/tenants; umask 077
             v=s$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
             k=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
             printf 'E2E_TOKEN=%s\\nANTHROPIC_API_KEY=sk-real-%s\\n' \"$v\" \"$k\" > ~/.config/cyclix/tenants/{t}.env
             printf %s \"$v\" | sha256sum | cut -c1-64"
        )),
        "make the secret",
    );
    let hash = hash.trim().to_string();
    Tenant::new(t)
        .preset_overridden("claude-code")
        .file("forge.sh", FORGE)
        .agent_cmd("[sh, /work/forge.sh]")
        .agent_key("env: [E2E_TOKEN]")
        .extra_yaml("egress:\n  allow: [allowed.example]\n  ca_certs: [/srv/testbed-ca.pem]")
        .write(tb);
    let _ = tb.user(&["systemctl", "--user", "start", &format!("cyclix-run@{t}")]);
    let rec = record(tb, t);
    let log = rec["agent_log"].to_string();
    // Positive controls: the agent held the real value, the line-level redaction ran, and the
    // forged result line reached the record's report (so a value in it would be seen).
    assert!(
        log.contains(&format!("HASH={hash}")),
        "the agent must hold the secret: {rec:#}"
    );
    assert!(log.contains("raw ***"), "the raw value is redacted: {log}");
    let msg = rec["agent_report"]["final_message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        msg.starts_with("LEAK:") && msg.ends_with(":END"),
        "the forged result line was parsed into the record: {rec:#}"
    );
    // The attack: the decoded value must not be in the report, nor anywhere cyclix wrote.
    assert_eq!(
        msg, "LEAK:***:END",
        "the secret value is in the record's agent_report"
    );
    let hits = expect_success(
        &tb.user_sh(&format!(
            "v=$(sed -n 's/^E2E_TOKEN=//p' ~/.config/cyclix/tenants/{t}.env); [ -n \"$v\" ] || exit 9
             printf '%s\\n' \"$v\" > /tmp/needle-a14
             files=$(grep -rlF -f /tmp/needle-a14 ~/.local/state/cyclix 2>/dev/null | wc -l)
             rm -f /tmp/needle-a14; echo \"files=$files\""
        )),
        "search for the secret",
    );
    assert_eq!(hits.trim(), "files=0", "the secret value is in a record");
    let left = leftovers(tb, rec["run_id"].as_str().expect("run id"), t);
    assert!(left.trim().is_empty(), "leftovers: {left}");
}

/// The hunter: until it has seen two watch probes end (two rounds, by their own marks, not a
/// time; at most 3,000 scans), every `cyclix probe` process it sees (the in-sandbox watch
/// probe, told by its cmdline, run by `podman exec` as the preset's uid) is read at
/// `/proc/PID/environ` (the `PTRACE_MODE_READ` check, the same as `maps`; `mem` needs more).
/// Once as uid 1000, once as root of a nested user namespace it makes itself (under keep-id its
/// `uid_map` write succeeds, so it has every capability there, and it CAN read the
/// execute-only binary: `NESTBIN`). Positive controls: a `sleep` it started in the same namespace
/// is read the same way (`ctl`), and the probe was seen (`seen`).
const HUNT: &str = r#"cat > /tmp/hunt.sh <<X
sleep 600 & ctl=\$!
seen=0; got=0; ok=0; ends=0; was=0; n=0
while [ \$ends -lt 2 ] && [ \$n -lt 3000 ]; do
  now=0; n=\$((n+1))
  for p in /proc/[0-9]*; do
    c=\$(cat \$p/comm 2>/dev/null) || continue
    case "\$c" in cyclix) tr '\\0' ' ' < \$p/cmdline 2>/dev/null | grep -q ' probe ' || continue
      now=1; seen=\$((seen+1)); cat \$p/environ > /dev/null 2>&1 && got=\$((got+1));; esac
  done
  [ \$was = 1 ] && [ \$now = 0 ] && ends=\$((ends+1)); was=\$now
  cat /proc/\$ctl/environ > /dev/null 2>&1 && ok=\$((ok+1))
done
kill \$ctl
echo "HUNT \$1 seen=\$seen got=\$got ctl=\$ok"
X
sh /tmp/hunt.sh direct
unshare -Ur sh /tmp/hunt.sh nested
unshare -Ur sh -c 'head -c 4 /cyclix/bin/cyclix > /dev/null && echo NESTBIN=readable || echo NESTBIN=unreadable'
cyclix-demo-agent > /dev/null 2>&1
"#;

#[test]
fn the_watch_probe_stays_untraceable_by_the_presets_uid_and_by_a_nested_namespace_root() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-a14-hunt";
    crate::common::tenant::key_file(tb, t, "ANTHROPIC_API_KEY");
    Tenant::new(t)
        .preset_overridden("claude-code")
        .file("hunt.sh", HUNT)
        .agent_cmd("[sh, /work/hunt.sh]")
        .extra_yaml("egress:\n  allow: [allowed.example]\n  ca_certs: [/srv/testbed-ca.pem]")
        .write(tb);
    let _ = tb.user(&["systemctl", "--user", "start", &format!("cyclix-run@{t}")]);
    let rec = record(tb, t);
    let log: Vec<String> = rec["agent_log"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|l| l.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    for who in ["direct", "nested"] {
        let line = log
            .iter()
            .find(|l| l.starts_with(&format!("HUNT {who} ")))
            .unwrap_or_else(|| panic!("no {who} hunt line: {rec:#}"));
        let n = |k: &str| crate::common::count(line, k);
        assert!(n("seen") > 0, "{who}: the probe was never seen: {line}");
        assert!(
            n("ctl") > 0,
            "{who}: the read works on a process of its own: {line}"
        );
        assert_eq!(
            n("got"),
            0,
            "{who}: the watch probe's environ was read: {line}"
        );
    }
    assert!(rec["watch_rounds"].as_u64().unwrap_or(0) >= 2, "{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    let left = leftovers(tb, rec["run_id"].as_str().expect("run id"), t);
    assert!(left.trim().is_empty(), "leftovers: {left}");
}

/// The crowd: 600 non-dumpable processes (a copy of `sleep` the agent made execute-only, as
/// cyclix does its own binary) living through three watch rounds (waited for by their probes'
/// own marks, not by a sleep: 30 s once gave two rounds on a loaded 2-core host). The host
/// once read each one's environment with its own `podman unshare cat` (about 50 ms each on
/// the testbed), one after the other inside the watch round: a crowd stretched a round far
/// past its 5 s interval and blinded the leak watch that long (measured: about 20 s for one
/// round).
const CROWD: &str = r"cp /bin/sleep /work/.nd && chmod 0111 /work/.nd
for i in $(seq 600); do /work/.nd 1000 & done
sleep 1; echo PROCS=$(ls -d /proc/[0-9]* | wc -l)
. /work/rounds.sh; watch_rounds 3
cyclix-demo-agent > /dev/null 2>&1
";

/// Held: every non-dumpable process is read in ONE `podman unshare` per scan, and the watch
/// sees every process through three rounds of the crowd (no "cannot be read" refusal); the
/// crowd is real work, and the run passes. Positive control: the crowd is there (the agent
/// counts its processes). The rounds' pace is a speed, which this test does not time (a
/// timed test fails under load): one scan per round is what keeps it.
#[test]
fn a_crowd_of_non_dumpable_processes_does_not_slow_or_blind_the_watch() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-a14-crowd";
    crate::common::tenant::key_file(tb, t, "ANTHROPIC_API_KEY");
    Tenant::new(t)
        .preset_overridden("claude-code")
        .file("crowd.sh", CROWD)
        .file(WATCH_ROUNDS_FILE, WATCH_ROUNDS)
        .agent_cmd("[sh, /work/crowd.sh]")
        .extra_yaml("egress:\n  allow: [allowed.example]\n  ca_certs: [/srv/testbed-ca.pem]")
        .write(tb);
    let _ = tb.user(&["systemctl", "--user", "start", &format!("cyclix-run@{t}")]);
    let rec = record(tb, t);
    let procs: u64 = rec["agent_log"]
        .as_array()
        .and_then(|l| {
            l.iter()
                .find_map(|x| x.as_str()?.strip_prefix("PROCS=")?.parse().ok())
        })
        .unwrap_or(0);
    assert!(procs >= 600, "the crowd is there: {procs}");
    assert!(
        rec["watch_rounds"].as_u64().is_some_and(|n| n >= 3),
        "the watch kept its pace: {rec:#}"
    );
    assert_eq!(rec["result"], "passed", "{rec:#}");
    let left = leftovers(tb, rec["run_id"].as_str().expect("run id"), t);
    assert!(left.trim().is_empty(), "leftovers: {left}");
}
