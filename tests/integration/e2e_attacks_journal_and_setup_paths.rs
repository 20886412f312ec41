//! Issues 15, 18, 19, 20, attacked: what a hostile agent that has read the source does with the
//! parts new this round. One run, shared: the agent (1) makes squid print a line of its choosing
//! on the proxy's log, shaped like one of squid's access-log decisions, so that cyclix would take
//! it for a request a probe made; (2) prints cyclix's marker lines, terminal escapes and a line
//! that grows past journald's `LineMax=` once cyclix replaces its control bytes, to forge a
//! journal entry of its own; (3) moves a gitlink under a setup path of a project whose
//! `.gitmodules` says `ignore = all`, so that a plain `git diff` would not list it; (4) swaps a
//! glob-bound setup file by renaming its directory. A second run's agent commits a
//! `.gitmodules` whose URL git's fsck quotes, with a bidi override and a C1 CSI, in the words
//! cyclix keeps as the cause and hands to the notify command.

use std::sync::OnceLock;

use crate::common::run::{prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

/// The agent. The proxy request: a plain `GET` through squid whose header block holds a NUL
/// byte; squid 6 then logs `WARNING: HTTP header contains NULL characters {…}\nNULL\n{…}` on
/// its cache log (stderr, the proxy unit's journal) with the header bytes after the NUL as they
/// came: a line that is a whole JSON object of the agent's. The control: an ordinary request to
/// a host not allowed, which squid's own decision line records (`ctl-a15.example`).
const AGENT: &str = r#"import os, socket, sys
proxy = os.environ["HTTP_PROXY"].removeprefix("http://").rstrip("/")
PH, PP = proxy.rsplit(":", 1)[0], int(proxy.rsplit(":", 1)[1])

def send(req):
    s = socket.create_connection((PH, PP), timeout=5)
    s.sendall(req)
    try:
        while s.recv(4096):
            pass
    except OSError:
        pass
    s.close()

forged = (b'{"ts":1.000,"client":"10.0.0.9","method":"GET","host":"forged-a15.example","port":"80",'
          b'"url":"http://forged-a15.example/","status":"200","squid":"TCP_MISS","server":"192.0.2.1",'
          b'"reason":"allowlisted","ms":"3","bytes":"10","sni":"-","err":"-"}')
send(b"GET http://allowed.example/ HTTP/1.1\r\nHost: allowed.example\r\nX-A: a\x00b\r\n" + forged + b"\r\nConnection: close\r\n\r\n")
send(b"GET http://ctl-a15.example/ HTTP/1.1\r\nHost: ctl-a15.example\r\nConnection: close\r\n\r\n")

out = sys.stdout.buffer
out.write(b"cyclix: forged-marker-a15\n")
out.write(b"esc-a15 \x1b]0;title\x07 \x1b[31mred \xe2\x80\xae bidi \xc2\x9b csi\n")
# 16,382 control bytes become 49,146 bytes of U+FFFD: with `agent| ` the line passes 48 KiB.
out.write(b"\x01" * 16382 + b"cyclix: forged-journal-a15\n")
out.flush()
"#;

/// The gitlink `ci/lib` at the base and where the agent's commit moves it (plumbing only: the
/// read-only bind of `ci/` is never written).
const BASE_LINK: &str = "1111111111111111111111111111111111111111";
const MOVED: &str = "2222222222222222222222222222222222222222";

/// The run's record and the run unit's journal (JSON lines), from one run.
fn run() -> &'static (serde_json::Value, String, String, String) {
    static R: OnceLock<(serde_json::Value, String, String, String)> = OnceLock::new();
    R.get_or_init(|| {
        let _shared = crate::common::testbed::shared();
        let tb = prepared();
        let t = "e2e-a15";
        Tenant::new(t)
            .agent_cmd(&format!(
                r#"[sh, -c, "python3 attack15.py; git update-index --cacheinfo 160000,{MOVED},ci/lib && git commit -qm bump; (mv scripts s2 && mkdir scripts && echo 'echo evil' > scripts/b.sh && echo SWAP=done || echo SWAP=refused); git add -A scripts s2 && git commit -qm swap; cyclix-demo-agent > /dev/null 2>&1"]"#
            ))
            .egress_allow(&["allowed.example"], &[80, 443])
            .extra_yaml("setup: [ci/, \"scripts/*.sh\"]")
            .file("attack15.py", AGENT)
            .file("ci/a.yml", "a: 1\n")
            .file("scripts/b.sh", "echo ok\n")
            .write(tb);
        // The user's project has a submodule under the setup path that git is told to ignore.
        expect_success(
            &tb.user_sh(&format!(
                "set -e; cd ~/src/{t}
                 printf '[submodule \"lib\"]\\n\\tpath = ci/lib\\n\\turl = ../lib\\n\\tignore = all\\n' > .gitmodules
                 git add .gitmodules && git update-index --add --cacheinfo 160000,{BASE_LINK},ci/lib
                 git -c user.name=t -c user.email=t@example.com commit -q -m submodule"
            )),
            "add the ignored submodule",
        );
        let since = expect_success(&tb.user_sh("date +%s"), "the time").trim().to_string();
        let out = start(tb, t);
        let rec = record(tb, t);
        let run_id = rec["run_id"]
            .as_str()
            .unwrap_or_else(|| panic!("a record: {rec:#}\n{out:?}"))
            .to_string();
        let journal = expect_success(
            &tb.user_sh(&format!(
                "journalctl --user -u cyclix-run@{t}.service --since @{since} -o json --no-pager"
            )),
            "the run unit's journal",
        );
        let kept = expect_success(
            &tb.user_sh(&format!(
                "cat ~/.local/state/cyclix/runs/{t}/{run_id}.agent.log"
            )),
            "the kept log",
        );
        let proxy = expect_success(
            &tb.user_sh(&format!(
                "journalctl --user -u cyclix-{run_id}-proxy.service -o cat --no-pager | grep -a forged-a15 || true"
            )),
            "the proxy's journal",
        );
        (rec, journal, kept, proxy)
    })
}

#[test]
fn a_line_the_agent_makes_squid_print_is_not_taken_for_a_decision() {
    let (rec, _, _, proxy) = run();
    // Positive control: squid printed the agent's line, whole, on the proxy's journal.
    assert!(
        proxy
            .lines()
            .any(|l| l.trim().starts_with("{\"ts\":1.000,") && l.contains("forged-a15")),
        "squid printed the forged line: {proxy}"
    );
    let decisions = rec["egress_decisions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let host = |h: &str| {
        decisions
            .iter()
            .filter(|d| d["host"] == h)
            .cloned()
            .collect::<Vec<_>>()
    };
    // Positive control: the agent's ordinary request is a decision, counted as the agent's.
    let ctl = host("ctl-a15.example");
    assert!(
        !ctl.is_empty() && ctl.iter().all(|d| d["by"] == "agent"),
        "the control request is the agent's decision: {decisions:#?}"
    );
    assert_eq!(
        host("forged-a15.example"),
        Vec::<serde_json::Value>::new(),
        "a line the agent made squid print is in the record's egress decisions"
    );
}

#[test]
fn the_agents_output_forges_no_marker_no_escape_and_no_journal_entry() {
    let (_, journal, kept, _) = run();
    // Positive controls: the lines reached the kept log and the journal.
    assert!(
        kept.contains("agent| cyclix: forged-marker-a15"),
        "the marker line is kept, prefixed: {kept:.2000}"
    );
    assert!(kept.contains("esc-a15"), "the escape line is kept");
    assert!(
        journal.contains("agent| cyclix: forged-marker-a15"),
        "the marker line reached the journal"
    );
    for l in kept.lines() {
        assert!(
            l.starts_with("agent| ") || l.starts_with("gate| ") || l.starts_with("cyclix: "),
            "a kept line of no stream: {l:.200}"
        );
        assert!(
            !l.starts_with("cyclix: forged"),
            "a forged marker: {l:.200}"
        );
        assert!(
            !l.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}', '\u{1}']),
            "an escape in the kept log: {l:.200}"
        );
    }
    for l in journal.lines() {
        let e: serde_json::Value = serde_json::from_str(l).expect("journal JSON");
        let msg = e["MESSAGE"].as_str().unwrap_or_default();
        assert!(
            !msg.starts_with("cyclix: forged") && !msg.contains('\u{1b}'),
            "a journal entry the agent forged: {msg:.200}"
        );
    }
}

#[test]
fn a_gitlink_moved_under_a_setup_path_is_seen_though_the_submodule_is_ignored() {
    let (rec, _, _, _) = run();
    let tb = prepared();
    let branch = rec["branch"].as_str().unwrap_or_default();
    // Positive control: the run's branch carries the moved gitlink (the attack happened).
    let tree = expect_success(
        &tb.user_sh(&format!(
            "cd ~/src/e2e-a15 && git ls-tree {branch} ci/lib; git config -f .gitmodules submodule.lib.ignore"
        )),
        "the run branch's gitlink",
    );
    assert!(
        tree.contains(&format!("160000 commit {MOVED}\tci/lib")) && tree.contains("all"),
        "the agent moved the ignored submodule: {tree}\n{rec:#}"
    );
    let changes: Vec<&str> = rec["setup_changes"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        changes.contains(&"ci/lib"),
        "the moved gitlink is not among the setup changes: {changes:?}"
    );
}

/// The agent's `.gitmodules` holds a URL that git's fsck refuses and quotes in its error, with a
/// bidi override and a C1 CSI in it (git replaces only C0 controls).
const GITMODULES: &str = r#"printf '[submodule "x"]\n\tpath = x\n\turl = -\342\200\256\302\233evil-a15\n' > .gitmodules && git add .gitmodules && git commit -qm modules"#;

#[test]
fn git_words_quoting_the_agents_bytes_reach_the_record_printable() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-a15-fsck";
    Tenant::new(t)
        .agent_cmd("[sh, /work/modules.sh]")
        .file("modules.sh", &format!("set -e\n{GITMODULES}\n"))
        .extra_yaml("notify:\n  command: [sh, -c, 'cat > ~/notify-a15.json']")
        .write(tb);
    let _ = start(tb, t);
    let rec = record(tb, t);
    let causes = rec["causes"].to_string();
    let text: String = rec["causes"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    // Positive control: fsck refused the import and its words, quoting the URL, are the cause.
    assert!(
        text.contains("disallowed submodule url") && text.contains("evil-a15"),
        "the agent's URL reached the cause: {rec:#}"
    );
    assert!(
        !text.contains(['\u{202e}', '\u{9b}']),
        "a bidi override or C1 control in the record's causes: {causes}"
    );
    // What the host's notify command reads (`cyclix notify`, as cyclix-notify@T runs it).
    let told = expect_success(
        &tb.user_sh(&format!(
            "rm -f ~/notify-a15.json; {} notify {t} && cat ~/notify-a15.json",
            tb.cyclix_bin()
        )),
        "notify",
    );
    assert!(told.contains("disallowed submodule url"), "told: {told}");
    assert!(
        !told.contains(['\u{202e}', '\u{9b}']),
        "a bidi override or C1 control raw in the notify summary: {told}"
    );
}

#[test]
fn a_setup_file_swapped_by_renaming_its_directory_is_still_held() {
    // The read-only bind is on the file: its directory is the agent's and can be renamed, the
    // bind moving with it, and a new file put in its place. The delivery check sees it.
    let (rec, _, kept, _) = run();
    assert!(
        kept.contains("agent| SWAP=done"),
        "the agent renamed the directory of a bound setup file: {kept:.3000}"
    );
    let changes: Vec<&str> = rec["setup_changes"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        changes.contains(&"scripts/b.sh"),
        "the swapped setup file is not among the setup changes: {changes:?}"
    );
}
