//! The sandbox that runs is the one the probes proved (issue 20, item 1), on the real stack.
//! Field finding: killing the pod's infra container made Quadlet's `.pod` unit restart
//! (`Restart=on-failure` by default), the agent came back in a new pod — a network namespace
//! no probe saw — and the record said `passed`. Now every unit has `Restart=no`, and the run
//! notes each unit's invocation before the probes and fails closed when one changes.

use crate::common::run::{WATCH_ROUNDS, WATCH_ROUNDS_FILE, inject_mid_run, prepared, record};
use crate::common::tenant::Tenant;

/// Waits (inside an inject snippet) until the run is in its agent phase: the change then
/// happens after the probes proved the sandbox. Fails the snippet after 120 s.
fn in_agent_phase(t: &str) -> String {
    format!(
        "p=; for i in $(seq 1 2400); do grep -qx agent ~/.local/state/cyclix/runs/{t}/$run.phase 2>/dev/null && p=agent && break; sleep 0.05; done; \
         [ -n \"$p\" ] || {{ echo 'the run never reached its agent phase' >&2; exit 3; }}"
    )
}

/// After the change: tells the agent it was made (it waits for that, then for a watch round).
const CHANGED: &str = "podman exec $a touch /tmp/changed 2>/dev/null || true";

#[test]
fn a_unit_restarted_or_killed_after_the_probes_fails_the_run_naming_it() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    // The agent works until the change is made (the test's mark) and a watch round ran after
    // it (the round's own marks), not for a time that races both on a loaded host.
    let agent = r#"[sh, -c, "i=0; while [ ! -e /tmp/changed ] && [ $i -lt 1200 ]; do i=$((i+1)); sleep 0.1; done; . /work/rounds.sh; watch_rounds 1; exec cyclix-demo-agent"]"#;

    // The proxy restarted by someone on the host: it comes back healthy, so nothing but the
    // noted invocation can tell (the positive control of the check: without it this run
    // passes).
    let t = Tenant::new("e2e-proven-proxy")
        .file(WATCH_ROUNDS_FILE, WATCH_ROUNDS)
        .agent_cmd(agent)
        .write(tb);
    let run = inject_mid_run(
        tb,
        &t,
        &format!(
            "{}; systemctl --user restart cyclix-$run-proxy.service; {CHANGED}",
            in_agent_phase(&t)
        ),
    );
    let rec = record(tb, &t);
    assert_eq!(rec["result"], "leak_detected", "{rec:#}");
    let why = rec["refusal"].to_string();
    assert!(
        why.contains(&format!(
            "cyclix-{run}-proxy.service was started again after the probes"
        )),
        "{rec:#}"
    );
    assert_eq!(
        rec["leftovers"].as_array().map(Vec::len),
        Some(0),
        "{rec:#}"
    );

    // The pod's infra container killed: with `Restart=no` the pod stays down and takes the
    // agent with it; the run must not pass and must name the pod.
    let t = Tenant::new("e2e-proven-infra")
        .file(WATCH_ROUNDS_FILE, WATCH_ROUNDS)
        .agent_cmd(agent)
        .write(tb);
    let run = inject_mid_run(
        tb,
        &t,
        &format!(
            "{}; podman kill cyclix-$run-infra >/dev/null; {CHANGED}",
            in_agent_phase(&t)
        ),
    );
    let rec = record(tb, &t);
    assert_ne!(rec["result"], "passed", "{rec:#}");
    let all = format!("{} {}", rec["refusal"], rec["causes"]);
    assert!(
        all.contains(&format!("cyclix-{run}-pod.service")),
        "the record must name the pod unit: {rec:#}"
    );
    let restarts = crate::common::testbed::expect_success(
        &tb.user_sh(&format!(
            "journalctl --user -q -o cat -u cyclix-{run}-pod.service | grep -c 'Scheduled restart job' || true"
        )),
        "pod restarts",
    );
    assert_eq!(restarts.trim(), "0", "the pod unit must not restart");
    assert_eq!(
        rec["leftovers"].as_array().map(Vec::len),
        Some(0),
        "{rec:#}"
    );
}
