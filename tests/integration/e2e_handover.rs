//! The agent's variables (`agent.env`) reach it through its `cyclix agent-wait`'s hand-over at
//! the go (`run::handover`, issue 33 item 2's first step), on the real stack: while the agent
//! works no podman secret holds the value (a secret the test makes is listed: the listing's
//! positive control) and the hand-over FIFO is gone; a run whose boundary is refused never had
//! the value in its container (a host process holding it in its environment is found by the
//! same scan: the scan's positive control); a process left in the held container when the
//! probes are done refuses the go, so nothing but agent-wait can meet the hand-over (the same
//! run paused at the same place without it passes: the control).

use crate::common::run::{
    arm, inject_mid_run, leftovers, prepared, record, record_of, run_paused, secret_in_env_file,
};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;
use crate::common::{count, kv};

#[test]
fn the_agents_variable_is_handed_over_at_the_go_and_is_never_a_podman_secret() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-ho-pass";
    let hash = secret_in_env_file(tb, t, "E2E_HO_TOKEN");
    // The agent checks the value it got, says so, and works on only once the host looked.
    let agent = format!(
        "[sh, -c, \"[ \\\"$(printf %s \\\"$E2E_HO_TOKEN\\\" | sha256sum | cut -c1-64)\\\" = {hash} ] && touch /tmp/ho-has-it && i=0 && while [ ! -e /tmp/ho-go ] && [ $i -lt 1200 ]; do i=$((i+1)); sleep 0.1; done && exec cyclix-demo-agent\"]"
    );
    Tenant::new(t)
        .agent_cmd(&agent)
        .agent_key("env: [E2E_HO_TOKEN]")
        .write(tb);
    let out = inject_mid_run(
        tb,
        t,
        "for i in $(seq 1 1200); do podman exec $a test -e /tmp/ho-has-it 2>/dev/null && break; sleep 0.1; done
         podman exec $a test -e /tmp/ho-has-it || { echo \"the agent never had its variable (120 s)\" >&2; exit 3; }
         printf x | podman secret create e2e-ho-control - >/dev/null
         names=$(podman secret ls --format '{{.Name}}')
         podman secret rm e2e-ho-control >/dev/null
         echo \"control=$(printf '%s\\n' \"$names\" | grep -cx e2e-ho-control)\"
         echo \"agent_secret=$(printf '%s\\n' \"$names\" | grep -c E2E_HO_TOKEN)\"
         [ -e $XDG_RUNTIME_DIR/cyclix/runs/$run/ctl/handover ] && echo fifo=left || echo fifo=gone
         podman exec $a touch /tmp/ho-go",
    );
    assert_eq!(kv(&out, "control"), "1", "the listing works: {out}");
    assert_eq!(
        kv(&out, "agent_secret"),
        "0",
        "a podman secret held the agent's variable: {out}"
    );
    assert_eq!(kv(&out, "fifo"), "gone", "{out}");
    let rec = record(tb, t);
    assert_eq!(
        rec["result"], "passed",
        "the agent got its variable: {rec:#}"
    );
    assert_eq!(rec["secret_names"], serde_json::json!(["E2E_HO_TOKEN"]));
    let left = leftovers(tb, rec["run_id"].as_str().expect("id"), t);
    assert!(left.trim().is_empty(), "{left}");
}

#[test]
fn a_refused_sandbox_never_holds_the_agents_variable() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-ho-refused";
    secret_in_env_file(tb, t, "E2E_HO_REFUSED");
    // An allowlisted host that does not answer: the probes refuse the boundary.
    Tenant::new(t)
        .egress_allow(&["gone-host.invalid"], &[80])
        .agent_key("env: [E2E_HO_REFUSED]")
        .write(tb);
    // Every process whose argv is agent-wait's has its environment read (as the user, else as
    // root of the user's namespace, where a container's other users map) until the run
    // refused it; a host process under a name like agent-wait's, the value in its
    // environment, is the control.
    let out = inject_mid_run(
        tb,
        t,
        &format!(
            "v=$(sed -n 's/^E2E_HO_REFUSED=//p' ~/.config/cyclix/tenants/{t}.env); printf 'E2E_HO_REFUSED=%s\\n' \"$v\" > /tmp/ho-needle
             w=wait; E2E_HO_REFUSED=$v bash -c \"exec -a 'cyclix agent-$w --go control' sleep 300\" & ctl=$!
             unset v
             seen=0; hits=0; control=0
             for i in $(seq 1 1200); do
               for p in $(pgrep -f 'cyclix agent-wai[t] --go'); do
                 n=$( (cat /proc/$p/environ 2>/dev/null || podman unshare cat /proc/$p/environ 2>/dev/null) | tr '\\0' '\\n' | grep -cxF -f /tmp/ho-needle)
                 if [ $p = $ctl ]; then control=$((control + n)); else seen=$((seen + 1)); hits=$((hits + n)); fi
               done
               [ -e $XDG_RUNTIME_DIR/cyclix/runs/$run/ctl/refused ] && [ $seen -gt 0 ] && break
               sleep 0.05
             done
             kill $ctl; rm -f /tmp/ho-needle
             echo \"seen=$seen hits=$hits control=$control\""
        ),
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("seen="))
        .unwrap_or_default()
        .to_string();
    assert!(
        count(&line, "control") > 0,
        "the scan finds the value: {out}"
    );
    assert!(
        count(&line, "seen") > 0,
        "the scan read the held agent-wait: {out}"
    );
    assert_eq!(
        count(&line, "hits"),
        0,
        "the refused sandbox held the value: {out}"
    );
    let rec = record(tb, t);
    assert_eq!(rec["result"], "probe_refused", "{rec:#}");
    let left = leftovers(tb, rec["run_id"].as_str().expect("id"), t);
    assert!(left.trim().is_empty(), "{left}");
}

#[test]
fn a_process_left_in_the_held_container_after_the_probes_refuses_the_go() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-ho-stranger";
    secret_in_env_file(tb, t, "E2E_HO_STRANGER");
    let t = Tenant::new(t).agent_key("env: [E2E_HO_STRANGER]").write(tb);
    arm(tb, &t, "probe.reported=pause");
    // The control: paused where the report is in, nothing added: the run passes.
    let (run, _) = run_paused(tb, &t, "probe.reported", |_| {});
    let rec = record_of(tb, &t, &run);
    assert_eq!(rec["result"], "passed", "{rec:#}");
    // A process started in the held container while its report is read (as a daemon forked by
    // image code a probe ran would be): the go is refused, the process named.
    let (run, _) = run_paused(tb, &t, "probe.reported", |run| {
        // From a unit of its own (a process of the test's own transient unit would end with
        // it), seen in the container before the run goes on.
        expect_success(
            &tb.user_sh(&format!(
                "systemctl --user reset-failed e2e-ho-stranger.service 2>/dev/null
                 systemd-run --user --unit=e2e-ho-stranger --collect -q podman exec cyclix-{run}-agent sleep 300
                 for i in $(seq 1 1200); do podman top cyclix-{run}-agent comm 2>/dev/null | grep -qx sleep && exit 0; sleep 0.1; done
                 echo 'the sleep never showed in the container (120 s)' >&2; exit 1"
            )),
            "leave a process in the held container",
        );
    });
    arm(tb, &t, "");
    let _ = tb.user_sh("systemctl --user stop e2e-ho-stranger.service 2>/dev/null");
    let rec = record_of(tb, &t, &run);
    assert_eq!(rec["result"], "probe_refused", "{rec:#}");
    assert!(
        rec["refusal"].to_string().contains("(sleep)"),
        "the process is named: {rec:#}"
    );
    assert!(rec["agent_exit"].is_null(), "the agent never ran: {rec:#}");
    let left = leftovers(tb, &run, &t);
    assert!(left.trim().is_empty(), "{left}");
}
