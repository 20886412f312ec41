//! The run helpers the end-to-end tests share: the prepared testbed (images built, demo laid
//! out, and for runs templates installed), run records, and the list of everything a run could
//! leave on the host. Tenants are written with [`crate::common::tenant::Tenant`].

use std::sync::OnceLock;

use crate::common::testbed::{Testbed, expect_success};

/// A shell function for an agent's command that must work while the leak watch runs:
/// `watch_rounds N` returns once N of its rounds have been counted, told by the events' own
/// marks, not by a sleep (a sleep of "long enough" raced the rounds on a loaded host, where a
/// round takes longer than its 5 s interval). Each round runs `/cyclix/bin/cyclix probe …
/// --watch` in the agent's container (`podman exec`), which the agent sees in `/proc`; a
/// round's probe ending is one mark, and the (N+1)th end means round N was counted (the round
/// after it started), since an agent that ends right after a probe may end that round
/// uncounted. A probe missed between two looks only makes the wait longer. Gives up after
/// about 3 minutes; prints `WATCHED ENDS` either way. Written into the tenant's repository
/// with `.file(WATCH_ROUNDS_FILE, WATCH_ROUNDS)` and sourced as `. /work/rounds.sh`.
pub const WATCH_ROUNDS: &str = r#"watch_rounds() {
  ends=0; was=0; i=0
  while [ "$ends" -le "$1" ] && [ "$i" -lt 6000 ]; do
    if grep -qsa -e '-[-]watch' /proc/[0-9]*/cmdline; then was=1
    elif [ "$was" = 1 ]; then was=0; ends=$((ends + 1)); fi
    i=$((i + 1)); sleep 0.03
  done
  echo "WATCHED $ends"
}
"#;

/// Where [`WATCH_ROUNDS`] goes in the tenant's repository (`/work/rounds.sh` in the agent).
pub const WATCH_ROUNDS_FILE: &str = "rounds.sh";

/// Images built, demo laid out, templates installed: once per test process.
pub fn prepared() -> &'static Testbed {
    static READY: OnceLock<()> = OnceLock::new();
    let tb = Testbed::get();
    READY.get_or_init(|| {
        let c = tb.cyclix_bin();
        expect_success(
            &tb.user_sh(&format!(
                "set -e; systemctl --user stop 'cyclix-pool@e2e-*.service' || true; \
                 rm -rf ~/.config/cyclix/tenants/e2e-* ~/.config/systemd/user/cyclix-run@e2e-* \
                 ~/.config/systemd/user/cyclix-pool@e2e-* ~/.config/systemd/user/default.target.wants/cyclix-pool@e2e-* \
                 ~/.local/share/systemd/timers/stamp-cyclix-run@e2e-*; {c} images build; {c} demo setup; {c} install --tenant demo"
            )),
            "build images, set up the demo, install the templates",
        );
    });
    tb
}

/// Images built and the demo project laid out (no templates installed): every time.
pub fn demo_setup(tb: &Testbed) {
    let c = tb.cyclix_bin();
    expect_success(
        &tb.user_sh(&format!(
            "set -e; {c} images build >/dev/null; {c} demo setup >/dev/null"
        )),
        "build images, set up the demo",
    );
}

/// [`demo_setup`] once per test process.
pub fn demo_ready() -> &'static Testbed {
    static READY: OnceLock<()> = OnceLock::new();
    let tb = Testbed::get();
    READY.get_or_init(|| demo_setup(tb));
    tb
}

/// The last non-empty line of a record's log (`agent_log`, `gate_log`), trimmed.
pub fn last_line(rec: &serde_json::Value, key: &str) -> String {
    rec[key]
        .as_array()
        .and_then(|l| {
            l.iter()
                .rev()
                .filter_map(|x| x.as_str())
                .find(|x| !x.trim().is_empty())
        })
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The latest run record of `tenant`.
pub fn record(tb: &Testbed, tenant: &str) -> serde_json::Value {
    let text = expect_success(
        &tb.user_sh(&format!(
            "cat ~/.local/state/cyclix/runs/{tenant}/latest.json"
        )),
        "read the run record",
    );
    serde_json::from_str(&text).expect("the run record is JSON")
}

/// Everything the run could have left, listed from the host side (podman objects, secrets,
/// units, unit files, worktree and the gates' trees, run dir, import and gate staging dirs,
/// conmon and sentinel processes and cgroups named after
/// the run: field report B11); empty means clean.
pub fn leftovers(tb: &Testbed, run_id: &str, tenant: &str) -> String {
    let script = format!(
        r#"l=io.cyclix.run={run_id}
podman ps -a -q --filter label=$l; podman pod ls -q --filter label=$l
podman network ls -q --filter label=$l; podman volume ls -q --filter label=$l
podman secret ls --format '{{{{.Name}}}}' | grep -e "cyclix-{run_id}" || true
systemctl --user list-units --all --no-legend 'cyclix-{run_id}*'
ls $XDG_RUNTIME_DIR/containers/systemd/ $XDG_RUNTIME_DIR/systemd/user/ 2>/dev/null | grep {run_id} || true
ls -d ~/.local/share/cyclix/worktrees/{tenant}/{run_id} ~/.local/share/cyclix/worktrees/{tenant}/{run_id}.* $XDG_RUNTIME_DIR/cyclix/runs/{run_id} ~/.local/state/cyclix/runs/{tenant}/{run_id}.import ~/.local/state/cyclix/runs/{tenant}/{run_id}.gate-objects 2>/dev/null || true
pgrep -a conmon | grep -e "cyclix-{run_id}" || true
pgrep -af '^cyclix-{run_id}-sentinel' || true
find /sys/fs/cgroup/user.slice/user-$(id -u).slice/user@$(id -u).service -maxdepth 4 -name '*cyclix-{run_id}*' 2>/dev/null || true
"#
    );
    expect_success(&tb.user_sh(&script), "list leftovers")
}

/// `systemctl --user start cyclix-run@TENANT.service`, waiting for the run.
pub fn start(tb: &Testbed, tenant: &str) -> std::process::Output {
    tb.user(&[
        "systemctl",
        "--user",
        "start",
        &format!("cyclix-run@{tenant}.service"),
    ])
}

/// `cyclix run NAME --run-id ID` with `dropin` (a Quadlet drop-in's text) on the run's proxy
/// container, as an attacker with the Quadlet directory could write it: the positive controls
/// of the proxy's rules run the same attack against a proxy without them. The drop-in is
/// removed afterwards; stderr ends with `rc=N`, the run's exit code.
pub fn run_with_proxy_dropin(
    tb: &Testbed,
    name: &str,
    id: &str,
    dropin: &str,
) -> std::process::Output {
    let unit = format!("cyclix-{id}-proxy.container");
    tb.user_sh(&format!(
        "set -e\nQ=~/.config/containers/systemd; mkdir -p $Q/{unit}.d\ncat > $Q/{unit}.d/weaken.conf <<'EOF'\n{dropin}\nEOF\n\
         set +e\n{c} run {name} --run-id {id}\necho \"rc=$?\" >&2\nrm -rf $Q/{unit}.d\n",
        c = tb.cyclix_bin()
    ))
}

/// Starts `t`'s run in the background, waits for its agent container, runs `inject` (a shell
/// snippet; `$a` is the agent container, `$run` the run id), waits for the run to end. Each
/// wait is on the run's own mark (the container listed, the unit no longer activating) with a
/// cap of minutes, past which the test fails saying which (a cap of seconds once ran the
/// snippet without a container on a loaded host).
pub fn inject_mid_run(tb: &Testbed, t: &str, inject: &str) -> String {
    let script = format!(
        "systemctl --user start --no-block cyclix-run@{t}.service
         a=
         for i in $(seq 1 1200); do
           a=$(podman ps --filter label=io.cyclix.tenant={t} --filter label=io.cyclix.role=agent --format '{{{{.Names}}}}' | head -1)
           [ -n \"$a\" ] && break; sleep 0.1
         done
         [ -n \"$a\" ] || {{ echo \"no agent container of {t} within 120 s\" >&2; exit 3; }}
         run=${{a#cyclix-}}; run=${{run%-agent}}
         sleep 1
         {inject}
         for i in $(seq 1 3000); do
           s=$(systemctl --user show -P ActiveState cyclix-run@{t}.service); [ \"$s\" = activating ] || break; sleep 0.1
         done
         [ \"$s\" != activating ] || {{ echo \"the run of {t} still runs after 300 s\" >&2; exit 3; }}
         systemctl --user reset-failed cyclix-run@{t}.service 2>/dev/null; echo \"$run\""
    );
    expect_success(&tb.user_sh(&script), "inject a fault mid-run")
        .trim()
        .to_string()
}

/// Shell lines for an [`inject_mid_run`] snippet: wait until the run let its agent go (its
/// `ctl/go`: the probes proved the sandbox), failing the snippet after 120 s.
pub const LET_GO: &str = "for i in $(seq 1 1200); do [ -e $XDG_RUNTIME_DIR/cyclix/runs/$run/ctl/go ] && break; sleep 0.1; done
[ -e $XDG_RUNTIME_DIR/cyclix/runs/$run/ctl/go ] || { echo \"run $run: the agent was not let go (no ctl/go) within 120 s\" >&2; exit 3; }";

/// Where a run armed by [`arm`] writes `NAME.paused` at a point armed `NAME=pause` and waits
/// for `NAME.go`: `$XDG_RUNTIME_DIR/e2e-failpoints/TENANT` (`%t` and `%i` of the run unit,
/// written `%%` for printf).
pub const PAUSE_DIR: &str = "%%t/e2e-failpoints/%%i";

/// Arms the fail points `points` (`CYCLIX_FAILPOINTS`, debug builds; `NAME=pause` pauses, see
/// [`PAUSE_DIR`]) for `t`'s run unit with a drop-in; an empty list removes it. Either way the
/// user manager is reloaded.
pub fn arm(tb: &Testbed, t: &str, points: &str) {
    let d = format!("~/.config/systemd/user/cyclix-run@{t}.service.d");
    let script = if points.is_empty() {
        format!("rm -rf {d}; systemctl --user daemon-reload")
    } else {
        format!(
            "mkdir -p {d} && printf '[Service]\\nEnvironment=CYCLIX_FAILPOINTS={points} CYCLIX_FAILPOINT_DIR={PAUSE_DIR}\\n' > {d}/failpoints.conf && systemctl --user daemon-reload"
        )
    };
    expect_success(&tb.user_sh(&script), "arm the fail points");
}

/// The run id of `t`'s marker (`RUN.running`), if a killed run left one.
pub fn dead_run(tb: &Testbed, t: &str) -> Option<String> {
    let out = expect_success(
        &tb.user_sh(&format!(
            "cd ~/.local/state/cyclix/runs/{t} 2>/dev/null && ls *.running 2>/dev/null || true"
        )),
        "markers",
    );
    out.lines()
        .next()
        .map(|l| l.trim_end_matches(".running").to_string())
}

/// The record `RUN.json` of `t`.
pub fn record_of(tb: &Testbed, t: &str, run: &str) -> serde_json::Value {
    let text = expect_success(
        &tb.user_sh(&format!("cat ~/.local/state/cyclix/runs/{t}/{run}.json")),
        "read a run record",
    );
    serde_json::from_str(&text).expect("json")
}

/// Starts `t`'s run (armed with [`arm`] `POINT=pause`), waits until it pauses at `point`, calls
/// `fault` (the run's id given), lets the run go on and waits for its end. Returns the run id
/// and the run unit's exit status (`ExecMainStatus`).
pub fn run_paused(
    tb: &Testbed,
    t: &str,
    point: &str,
    fault: impl FnOnce(&str),
) -> (String, String) {
    let run = expect_success(
        &tb.user_sh(&format!(
            "D=$XDG_RUNTIME_DIR/e2e-failpoints/{t}; rm -rf $D
             systemctl --user reset-failed cyclix-run@{t}.service 2>/dev/null
             systemctl --user start --no-block cyclix-run@{t}.service
             for i in $(seq 1 1200); do [ -e $D/{point}.paused ] && break; sleep 0.05; done
             [ -e $D/{point}.paused ] || {{ echo 'the run never paused at {point}' >&2; exit 1; }}
             cd ~/.local/state/cyclix/runs/{t} && ls *.running | sed 's/[.]running$//'"
        )),
        "start the run and wait for its pause",
    )
    .trim()
    .to_string();
    fault(&run);
    let status = expect_success(
        &tb.user_sh(&format!(
            "touch $XDG_RUNTIME_DIR/e2e-failpoints/{t}/{point}.go
             for i in $(seq 1 1200); do
               s=$(systemctl --user show -P ActiveState cyclix-run@{t}.service); [ \"$s\" = activating ] || break; sleep 0.1
             done
             systemctl --user show -P ExecMainStatus cyclix-run@{t}.service
             systemctl --user reset-failed cyclix-run@{t}.service 2>/dev/null; true"
        )),
        "let the run go on and wait for its end",
    )
    .trim()
    .to_string();
    (run, status)
}

/// Writes a random value of `var` into tenant `t`'s env file (`~/.config/cyclix/tenants/T.env`,
/// mode 0600), made inside the testbed and never in an argv (not even a test's), and returns its
/// SHA-256 (hex): what a spec or an agent compares the value with.
pub fn secret_in_env_file(tb: &Testbed, t: &str, var: &str) -> String {
    let hash = expect_success(
        &tb.user_sh(&format!(
            "set -e; mkdir -p ~/.config/cyclix/tenants; umask 077
             v=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
             printf '{var}=%s\\n' \"$v\" > ~/.config/cyclix/tenants/{t}.env
             printf %s \"$v\" | sha256sum | cut -c1-64"
        )),
        "make the secret",
    );
    let hash = hash.trim().to_string();
    assert_eq!(hash.len(), 64, "{hash}");
    hash
}
