//! The agent's output, safely (issue 19 item 7, issue 20 item 7), on the real stack: one run
//! whose agent prints its secret, terminal escapes and a bidi control, a line it then waits
//! on, and a flood past every limit. `cyclix logs -f` shows the waiting line while the agent
//! runs; no journal line holds the secret (its redacted line there is the control that it
//! was printed and passed on); every limit is marked. The same run's egress: the agent's two
//! requests are told from the probe suite's (issue 19 item 8).

use crate::common::run::{leftovers, prepared, record_of};
use crate::common::tenant::{Tenant, key_file};
use crate::common::testbed::expect_success;

/// The agent (committed as `agent.sh`): the secret, escapes, a line to follow, a wait for the
/// host's release file in its control dir (so the line is seen while it runs), ~6 MB in
/// 60,000 lines, then the demo's fix; first two proxy requests (denied: no host is allowed).
const AGENT: &str = r#"python3 - <<'PY'
import urllib.request as u
for h in ('a.invalid', 'b.invalid'):
    try: u.urlopen('http://' + h + '/x', timeout=20)
    except Exception as e: print('EGRESS', h, type(e).__name__)
PY
echo "SECRET=$E2E_TOKEN end"
printf 'ESC:\033[31mred bidi:\342\200\256x\n'
echo LIVE-MARKER
i=0; while [ ! -e /cyclix/ctl/release ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done
python3 -c "import sys; sys.stdout.write(('y' * 99 + chr(10)) * 60000)"
echo LAST-LINE
exec cyclix-demo-agent
"#;

#[test]
fn the_agents_output_is_redacted_followed_live_and_marked_where_cut() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let c = tb.cyclix_bin();
    let t = Tenant::new("e2e-logs")
        .file("agent.sh", AGENT)
        .agent_cmd("[sh, /work/agent.sh]")
        .agent_key("env: [E2E_TOKEN]")
        .write(tb);
    key_file(tb, &t, "E2E_TOKEN");
    let script = format!(
        r#"date +%s > /tmp/{t}.since; systemctl --user start --no-block cyclix-run@{t}.service
a=; for i in $(seq 1 600); do
  a=$(podman ps --filter label=io.cyclix.tenant={t} --filter label=io.cyclix.role=agent --format '{{{{.Names}}}}' | head -1)
  [ -n "$a" ] && break; sleep 0.1
done
run=${{a#cyclix-}}; run=${{run%-agent}}
timeout 300 {c} logs {t} -f > /tmp/{t}.follow 2>&1 & f=$!
for i in $(seq 1 600); do grep -q '^agent| LIVE-MARKER$' /tmp/{t}.follow && break; sleep 0.1; done
live=$(grep -c '^agent| LIVE-MARKER$' /tmp/{t}.follow)
running=$(podman ps -q --filter name=^$a\$ | wc -l)
touch $XDG_RUNTIME_DIR/cyclix/runs/$run/ctl/release
wait $f; frc=$?
for i in $(seq 1 600); do [ "$(systemctl --user show -P ActiveState cyclix-run@{t}.service)" = activating ] || break; sleep 0.1; done
echo "run=$run live=$live running=$running follow_rc=$frc""#
    );
    let out = expect_success(&tb.user_sh(&script), "run, following its output");
    let field = |k: &str| {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .unwrap_or_default()
            .to_string()
    };
    let run = field("run");
    assert!(!run.is_empty(), "no agent container was seen: {out}");
    assert_eq!(
        (field("live").as_str(), field("running").as_str()),
        ("1", "1"),
        "`cyclix logs -f` showed the line while the agent ran (it waits for the release): {out}"
    );
    assert_eq!(
        field("follow_rc"),
        "0",
        "`logs -f` ended with the run: {out}"
    );
    let follow = expect_success(&tb.user_sh(&format!("cat /tmp/{t}.follow")), "follow");
    for want in [
        "agent| SECRET=*** end",
        "agent| ESC:\u{fffd}[31mred bidi:\u{fffd}x",
        "cyclix: agent output past 4194304 bytes is not kept; its last 200 lines follow when it ends",
        "of agent output were not kept; its last 200 lines follow",
        "agent| LAST-LINE",
    ] {
        assert!(
            follow.lines().any(|l| l.contains(want)),
            "`cyclix logs -f` shows {want:?}:\n{}",
            &follow[..follow.len().min(2000)]
        );
    }
    assert!(!follow.contains('\u{1b}') && !follow.contains('\u{202e}'));
    // The secret: in no journal line, no file cyclix wrote, nor what `logs` printed; its
    // redacted line reached the run unit's journal (the control: it was printed and sent on).
    let scan = expect_success(
        &tb.user_sh(&format!(
            "sed -n 's/^E2E_TOKEN=//p' ~/.config/cyclix/tenants/{t}.env > /tmp/{t}.needle; [ -s /tmp/{t}.needle ] || exit 9
             since=@$(cat /tmp/{t}.since); rm -f /tmp/{t}.since; run_journal() {{ journalctl --user -o cat --no-pager --since $since -u cyclix-run@{t}.service; }}
             # The run's last line (`record: PATH`) in: journald has the stream's earlier lines.
             for i in $(seq 1 1200); do run_journal | grep -q '^  record: ' && break; sleep 0.1; done
             journal=$(journalctl --user -o cat --no-pager | grep -cF -f /tmp/{t}.needle)
             files=$(grep -rlF -f /tmp/{t}.needle ~/.local/state/cyclix /tmp/{t}.follow | wc -l)
             redacted=$(run_journal | grep -cxF 'agent| SECRET=*** end')
             capped=$(run_journal | grep -c '^cyclix: agent output past 1000 lines is not sent to the journal')
             flood=$(run_journal | grep -c '^agent| yyyy')
             rm -f /tmp/{t}.needle /tmp/{t}.follow
             echo journal=$journal files=$files redacted=$redacted capped=$capped flood=$flood"
        )),
        "look for the secret",
    );
    let flood: u32 = scan
        .split_whitespace()
        .find_map(|w| w.strip_prefix("flood="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        scan.contains("journal=0 files=0 redacted=1 capped=1") && (900..=1000).contains(&flood),
        "the secret in no journal line or file, its redacted line and at most 1,000 lines in the run's journal: {scan}"
    );
    let rec = record_of(tb, &t, &run);
    let o = &rec["agent_output"];
    assert_eq!(o["truncated"], true, "{o}");
    assert!(o["lines"].as_u64().unwrap_or(0) > 60_000, "{o}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    egress_is_told_apart(tb, &c, &t, &rec);
    logs_verb_and_nothing_left(tb, &c, &t, &run);
}

/// The agent's two requests apart from the probe suite's (by when they started), in the
/// record and in `cyclix status`.
fn egress_is_told_apart(
    tb: &crate::common::testbed::Testbed,
    c: &str,
    t: &str,
    rec: &serde_json::Value,
) {
    let by = |who: &str| -> Vec<String> {
        rec["egress_decisions"]
            .as_array()
            .expect("decisions")
            .iter()
            .filter(|d| d["by"] == who)
            .map(|d| d["host"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(
        by("agent"),
        ["a.invalid", "b.invalid"],
        "{:#}",
        rec["egress_decisions"]
    );
    let probes = by("probe");
    assert!(
        probes.len() >= 5 && !probes.iter().any(|h| h.ends_with(".invalid")),
        "the probe suite's requests: {probes:?}"
    );
    let status = expect_success(&tb.user_sh(&format!("{c} status {t}")), "status");
    assert!(
        status.contains(&format!(
            "egress: the agent made 2 requests, 2 denied; the probes {}, ",
            probes.len()
        )),
        "{status}"
    );
}

/// `--run` and `-n`, an unknown run; the worktrees dir and every object gone.
fn logs_verb_and_nothing_left(tb: &crate::common::testbed::Testbed, c: &str, t: &str, run: &str) {
    // `--run` and `-n`; an unknown run is the person's mistake (exit 1), named.
    let tail = tb.user_sh(&format!("{c} logs {t} --run {run} -n 2"));
    let text = String::from_utf8_lossy(&tail.stdout);
    assert!(tail.status.success() && text.lines().count() <= 4, "{text}");
    let bad = tb.user_sh(&format!("{c} logs {t} --run 20000101-000000-dead"));
    assert_eq!(bad.status.code(), Some(1), "{bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("has no run 20000101-000000-dead"));
    // The tenant's worktrees dir went with its last run.
    let dir = tb.user_sh(&format!("test -e ~/.local/share/cyclix/worktrees/{t}"));
    assert!(
        !dir.status.success(),
        "worktrees/{t}/ is left after the run"
    );
    let left = leftovers(tb, run, t);
    assert!(
        left.trim().is_empty(),
        "leftovers (the raw output files with the run dir): {left}"
    );
}
