//! The leak watch cannot be blinded (issue 13 item 3), attacked from inside on the real stack:
//! a script agent (python3 + ctypes) goes after the in-sandbox watch probe while it runs with
//! `PTRACE_SEIZE`, `PTRACE_ATTACH`, `/proc/PID/mem`, `/proc/PID/environ`, `/proc/PID/fd/1` (readlink, open), and
//! then SIGSTOP or SIGKILL. Each attack has its positive control: the same attack on a `sleep`
//! the agent started (a dumpable process of its own uid) must work, so the test would see the
//! attack succeed. Also: the canary is random per run (read from the host's
//! `/proc/PID/environ` of `cyclix run`, where it lives), a variable merely NAMED `CYCLIX_CANARY`
//! is recorded as the agent's doing, and the canary's VALUE injected into the sandbox fails the
//! run. Three runs in one test (shared setup).

use crate::common::run::{inject_mid_run, prepared, record_of};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// The attacker. `argv[1]`: `stop` or `kill` (what it does to the watch probe after attacking
/// `argv[2]` of them), or `wait` (attacks, then waits to be stopped).
const ATTACK: &str = r#"import ctypes, errno, json, os, signal, subprocess, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
SEIZE, INTERRUPT, ATTACH, DETACH = 0x4206, 0x4207, 16, 17
def en(e): return errno.errorcode.get(e, str(e))
def pt(req, pid):
    r = libc.ptrace(req, pid, None, None)
    if r != 0: return en(ctypes.get_errno())
    # Stop the tracee (SEIZE does not), wait for the stop, detach: it runs on untraced.
    if req == SEIZE: libc.ptrace(INTERRUPT, pid, None, None)
    try: os.waitpid(pid, 0x40000000)
    except OSError: pass
    libc.ptrace(DETACH, pid, None, None)
    return "ok"
def rd(pid, what):
    try:
        # The fd numbers are listable (the directory's owner is the agent's uid); what
        # matters is following one: its stdout pipe, to forge report lines into it.
        if what == "fd_link": os.readlink(f"/proc/{pid}/fd/1"); return "ok"
        if what == "fd_open": open(f"/proc/{pid}/fd/1", "wb").close(); return "ok"
        with open(f"/proc/{pid}/{what}", "rb") as f:
            if what == "mem":
                lo = int(open(f"/proc/{pid}/maps").readline().split("-")[0], 16)
                f.seek(lo)
            return "ok" if f.read(16) else "empty"
    except OSError as e: return en(e.errno)
def attacks(pid):
    return {"attach": pt(ATTACH, pid), "seize": pt(SEIZE, pid), "mem": rd(pid, "mem"),
            "environ": rd(pid, "environ"), "fd_link": rd(pid, "fd_link"),
            "fd_open": rd(pid, "fd_open")}
def state(pid):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("State:"): return l.split()[1]
def gone(pid):
    # A short-lived watch probe may end between being seen and being attacked: then its pid
    # is no more (ESRCH, ENOENT) or a zombie, and what was tried on it says nothing about its
    # protection (an exiting process has dropped its memory, and with it the dumpable flag).
    return st(pid) in ("Z", "gone")
def st(pid):
    try: return state(pid)
    except (FileNotFoundError, ProcessLookupError): return "gone"
mode, rounds = sys.argv[1], int(sys.argv[2])
env = dict(os.environ, CYCLIX_CANARY="set-by-the-agent-not-the-canary")
own = subprocess.Popen(["sleep", "600"], env=env)
victim = subprocess.Popen(["sleep", "600"])
time.sleep(0.2)
ctl = attacks(own.pid)
os.kill(own.pid, signal.SIGSTOP); time.sleep(0.1); ctl["sigstop"] = state(own.pid)
os.kill(own.pid, signal.SIGCONT)
os.kill(victim.pid, signal.SIGKILL); ctl["sigkill"] = victim.wait()
ctx = json.load(open("/cyclix/ctl/probe.json"))
print("CONTROL " + json.dumps(ctl), flush=True)
print("CTX " + json.dumps(sorted(ctx["forbidden_env_sha256"])), flush=True)
mine = {os.getpid(), own.pid, victim.pid, 1}
tried, done, results, breaches = set(), set(), [], []
deadline = time.time() + 100
while time.time() < deadline:
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in mine or int(d) in done: continue
        pid = int(d)
        try: cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError: continue
        if b"--watch" not in cmd:
            # Anything else new (the runtime's exec helper before its execve, the probe's
            # children): an attach that works is a breach too. The pid is looked at again
            # (it may exec the probe next).
            if pid not in tried:
                tried.add(pid)
                if pt(SEIZE, pid) == "ok": breaches.append(cmd.decode(errors="replace"))
            continue
        done.add(pid)
        if len(results) < rounds:
            r = attacks(pid)
            # Ended under the attacks: not recorded, the next probe is attacked instead.
            if gone(pid): continue
            results.append(r)
            print("ATTACK " + json.dumps(results[-1]), flush=True)
            continue
        if mode not in ("stop", "kill") or gone(pid): continue
        try: os.kill(pid, signal.SIGSTOP if mode == "stop" else signal.SIGKILL)
        except ProcessLookupError: continue
        if mode == "stop":
            # The stop is seen in the probe's state; a probe that ended first was not stopped.
            while (now := st(pid)) not in ("T", "Z", "gone"): time.sleep(0.01)
            if now != "T": continue
        print(f"{mode.upper()} {pid} {int(time.time() * 1000)}", flush=True)
        print("BREACHES " + json.dumps(breaches), flush=True)
        # A SIGKILL cannot be seen to land (the probe may have ended just before it): every
        # later probe is killed too, until the run ends. A stopped probe stays stopped.
        if mode == "stop": time.sleep(120)
    time.sleep(0.001)
print("BREACHES " + json.dumps(breaches), flush=True)
time.sleep(120)
"#;

/// The line of `log` after `key ` (the agent's output).
fn after<'a>(log: &'a str, key: &str) -> &'a str {
    log.lines()
        .find_map(|l| l.split_once(&format!("{key} ")).map(|(_, v)| v))
        .unwrap_or_else(|| panic!("no `{key}` line in the agent's output:\n{log}"))
}

/// Runs tenant `t` (its agent: the attacker in `mode`, attacking `rounds` watch probes) through
/// its unit; meanwhile reads the run's canary from the host's `/proc/PID/environ` of `cyclix
/// run` and, with `leak`, injects its value into the sandbox as a leak would (a process in the
/// agent container carrying it). Returns (run id, record, agent output, canary sha256).
fn attacked_run(
    tb: &Testbed,
    t: &str,
    mode: &str,
    rounds: u32,
    leak: bool,
) -> (String, serde_json::Value, String, String) {
    Tenant::new(t)
        .agent_cmd(&format!("[python3, /work/attack.py, {mode}, \"{rounds}\"]"))
        .file("attack.py", ATTACK)
        .write(tb);
    let inject = format!(
        r#"{let_go}
p=$(systemctl --user show -P MainPID cyclix-run@{t}.service)
v=$(tr '\0' '\n' < /proc/$p/environ | sed -n 's/^CYCLIX_CANARY=//p')
printf '%s' "$v" | sha256sum | cut -d' ' -f1 > /tmp/{t}.sha
printf '%s' "$v" > /tmp/{t}.v
grep -lF -f /tmp/{t}.v /proc/[0-9]*/cmdline 2>/dev/null | wc -l > /tmp/{t}.argv
grep -lF -f /tmp/{t}.v /proc/$p/environ | wc -l >> /tmp/{t}.argv
{leak}"#,
        leak = if leak {
            "printf 'LEAKED=%s\\n' \"$v\" > /tmp/leak.env; podman exec -d --env-file /tmp/leak.env $a sleep 300 >/dev/null; rm /tmp/leak.env"
        } else {
            ""
        },
        let_go = crate::common::run::LET_GO
    );
    let run = inject_mid_run(tb, t, &inject);
    let sha = expect_success(&tb.user_sh(&format!("cat /tmp/{t}.sha")), "canary sha")
        .trim()
        .to_string();
    // The value never in an argv (looked at mid-run), a unit file, the journal or a record.
    let nowhere = expect_success(
        &tb.user_sh(&format!(
            "cat /tmp/{t}.argv; grep -rlF -f /tmp/{t}.v ~/.local/state/cyclix ~/.config/systemd/user \
             ~/.config/containers $XDG_RUNTIME_DIR/systemd $XDG_RUNTIME_DIR/containers $XDG_RUNTIME_DIR/cyclix/runs; \
             journalctl --user --no-pager -o cat | grep -cF -f /tmp/{t}.v; rm -f /tmp/{t}.v"
        )),
        "look for the canary",
    );
    assert_eq!(
        nowhere.split_whitespace().collect::<Vec<_>>(),
        ["0", "1", "0"],
        "{t}: the canary's value must be in no argv (first count; the second, cyclix's own environ, is the positive control), file (listed) or journal line (last count)"
    );
    let log = expect_success(
        &tb.user_sh(&format!(
            "sed -n 's/^agent| //p' ~/.local/state/cyclix/runs/{t}/{run}.agent.log"
        )),
        "agent output (as cyclix kept it)",
    );
    (run.clone(), record_of(tb, t, &run), log, sha)
}

fn refusal(rec: &serde_json::Value) -> String {
    rec["refusal"].to_string()
}

#[test]
fn the_watch_probe_cannot_be_traced_read_stopped_or_killed_unseen_and_the_canary_is_random() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t0 = std::time::Instant::now();

    // Run 1: ptrace, /proc reads against two watch probes, then SIGSTOP the third.
    let (_, rec, log, sha1) = attacked_run(tb, "e2e-w-stop", "stop", 2, false);
    let ctl: serde_json::Value = serde_json::from_str(after(&log, "CONTROL")).expect("json");
    for a in ["seize", "attach", "mem", "environ", "fd_link", "fd_open"] {
        assert_eq!(
            ctl[a], "ok",
            "positive control: {a} on the agent's own sleep: {ctl}"
        );
    }
    assert_eq!(
        ctl["sigstop"], "T",
        "positive control: SIGSTOP stops a sleep: {ctl}"
    );
    assert_eq!(
        ctl["sigkill"], -9,
        "positive control: SIGKILL kills a sleep: {ctl}"
    );
    let attacks: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| l.strip_prefix("ATTACK "))
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(attacks.len(), 2, "two watch probes attacked:\n{log}");
    for at in &attacks {
        for a in ["seize", "attach"] {
            assert_eq!(at[a], "EPERM", "{a} on the watch probe: {at}");
        }
        for a in ["mem", "environ", "fd_link", "fd_open"] {
            assert!(
                at[a] == "EACCES" || at[a] == "EPERM",
                "{a} of the watch probe must be refused: {at}"
            );
        }
    }
    assert_eq!(
        after(&log, "BREACHES"),
        "[]",
        "no new process in the container may be traceable by the agent"
    );
    assert_eq!(rec["result"], "leak_detected", "{rec:#}");
    let why = refusal(&rec);
    assert!(
        why.contains("did not come back within its deadline of 5000 ms"),
        "the stopped probe must be named, within one interval (5 s): {why}"
    );
    assert!(
        !why.contains("CYCLIX_CANARY"),
        "a variable merely named CYCLIX_CANARY is not a finding: {why}"
    );
    let named = rec["agent_named"].to_string();
    assert!(
        named.contains("(sleep): variable CYCLIX_CANARY is set, not to the watched value")
            && named.contains("P22: /proc/"),
        "the named variable is recorded by the host scan and by P22: {rec:#}"
    );
    assert!(
        serde_json::from_str::<Vec<String>>(after(&log, "CTX"))
            .expect("json")
            .contains(&sha1),
        "the canary read from cyclix's environment is the one watched by value (probe context)"
    );

    // Run 2: SIGKILL the watch probe after one attacked round.
    let (_, rec, log, sha2) = attacked_run(tb, "e2e-w-kill", "kill", 1, false);
    assert!(log.contains("KILL "), "{log}");
    assert_eq!(rec["result"], "leak_detected", "{rec:#}");
    assert!(
        refusal(&rec).contains("the watch probe was killed by signal 9"),
        "{rec:#}"
    );
    assert_ne!(sha1, sha2, "two runs must have different canaries");

    // Run 3: the canary's value placed into the sandbox (a leak) fails the run; the agent only
    // attacks (its own named variable stays a note).
    let (_, rec, _, sha3) = attacked_run(tb, "e2e-w-leak", "wait", 1_000, true);
    assert_eq!(rec["result"], "leak_detected", "{rec:#}");
    assert!(
        refusal(&rec).contains("the value of host variable CYCLIX_CANARY is in LEAKED"),
        "{rec:#}"
    );
    assert!(sha3 != sha1 && sha3 != sha2);
    eprintln!("e2e_watch: 3 runs in {} s", t0.elapsed().as_secs());
}
