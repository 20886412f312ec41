//! The pooled agent container (issue 33 item 2) on the real stack: a fill makes and starts the
//! agent container, held in `cyclix agent-wait --claim` with nothing of a run in it (no
//! variable's value, no canary, no podman secret, an empty work tree, an empty task: each
//! looked for, with the needle's positive control); the claiming run fills it in place, wakes
//! it and the agent gets its variable at the go. A held container tampered with before its
//! claim (a process added by `podman exec`, a mount made in its mount namespace, a file
//! written into its `/tmp` and into its upper layer) is refused at the claim and destroyed;
//! the run goes on warm on the untouched environment (the check's positive control). A held
//! agent that runs past `agent.timeout` is stopped by cyclix (its unit's clock runs from the
//! fill), and the record says it was the agent's timeout.

use crate::common::run::{leftovers, prepared, record, secret_in_env_file};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};
use crate::e2e_pool::{drain, fill, pool_files, refused_at_claim};

/// The run's `environment`: (`id`, `pooled`).
fn environment(rec: &serde_json::Value) -> (String, bool) {
    (
        rec["environment"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        rec["environment"]["pooled"].as_bool().unwrap_or(false),
    )
}

/// The record's notices.
fn notices(rec: &serde_json::Value) -> Vec<String> {
    rec["notices"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect()
}

/// Nothing of `envs` (and of run `id`) is left, and the pool's state dirs are empty.
fn nothing_left(tb: &Testbed, t: &str, envs: &[String], id: &str) {
    for e in envs.iter().map(String::as_str).chain(std::iter::once(id)) {
        let left = leftovers(tb, e, t);
        assert!(left.trim().is_empty(), "left by {e}:\n{left}");
    }
    for state in ["ready", "claimed", "filling", "ledgers"] {
        assert_eq!(pool_files(tb, t, state), "", "{state}");
    }
}

#[test]
fn a_held_agent_container_holds_nothing_of_a_run_and_its_claim_runs_the_agent_warm() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-pheld";
    let hash = secret_in_env_file(tb, t, "E2E_PHELD_TOKEN");
    // The agent works only with the value it was handed at the go.
    let agent = format!(
        "[sh, -c, \"[ \\\"$(printf %s \\\"$E2E_PHELD_TOKEN\\\" | sha256sum | cut -c1-64)\\\" = {hash} ] && exec cyclix-demo-agent\"]"
    );
    Tenant::new(t)
        .agent_cmd(&agent)
        .agent_key("env: [E2E_PHELD_TOKEN]")
        .extra_yaml("pool:\n  size: 1")
        .write(tb);
    drain(tb, t);
    let envs = fill(tb, t);
    assert_eq!(envs.len(), 1, "{envs:?}");
    let e = &envs[0];
    // The held container: running, exactly its init and agent-wait, blocked on the claim FIFO.
    // Its environment (podman's record of it and agent-wait's own, read as root of the user's
    // namespace), the secrets, the work tree and the task hold nothing of a run; the needle
    // (the value, from the tenant's env file) is found in that file: the search's control.
    let out = expect_success(
        &tb.user_sh(&format!(
            "a=cyclix-{e}-agent
             echo \"state=$(podman inspect --format '{{{{.State.Status}}}}' $a)\"
             echo \"procs=$(podman top $a comm | tail -n +2 | sort | tr '\\n' ' ')\"
             v=$(sed -n 's/^E2E_PHELD_TOKEN=//p' ~/.config/cyclix/tenants/{t}.env)
             echo \"control=$(grep -c \"$v\" ~/.config/cyclix/tenants/{t}.env)\"
             pid=$(podman top $a hpid comm | awk '$2 == \"cyclix\" {{print $1}}')
             env=$(podman unshare cat /proc/$pid/environ | tr '\\0' '\\n')
             echo \"environ_read=$(printf '%s\\n' \"$env\" | grep -c '^CYCLIX_RUN=')\"
             echo \"in_environ=$(printf '%s\\n' \"$env\" | grep -c -e \"$v\" -e CYCLIX_CANARY)\"
             echo \"in_inspect=$(podman inspect $a | grep -c -e \"$v\" -e CYCLIX_CANARY)\"
             echo \"secrets=$(podman secret ls --format '{{{{.Name}}}}' | grep -c {e})\"
             echo \"tree=$(ls -A ~/.local/share/cyclix/worktrees/{t}/{e} | wc -l)\"
             echo \"task=$(stat -c %s $XDG_RUNTIME_DIR/cyclix/runs/{e}/task.md)\"
             echo \"ctl=$(ls $XDG_RUNTIME_DIR/cyclix/runs/{e}/ctl | tr '\\n' ' ')\""
        )),
        "look at the held container",
    );
    let kv = |k: &str| crate::common::kv(&out, k);
    assert_eq!(kv("state"), "running", "{out}");
    assert!(
        ["catatonit cyclix", "cyclix podman-init"].contains(&kv("procs").as_str()),
        "exactly init and agent-wait: {out}"
    );
    assert_eq!(kv("control"), "1", "{out}");
    assert_eq!(
        kv("environ_read"),
        "1",
        "agent-wait's environment was read: {out}"
    );
    assert_eq!(kv("in_environ"), "0", "{out}");
    assert_eq!(kv("in_inspect"), "0", "{out}");
    assert_eq!(kv("secrets"), "0", "{out}");
    assert_eq!(kv("tree"), "0", "the work tree is empty: {out}");
    assert_eq!(kv("task"), "0", "the task is empty: {out}");
    assert_eq!(kv("ctl"), "claim", "{out}");
    let out = tb.user(&[&tb.cyclix_bin(), "run", t]);
    let rec = record(tb, t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(
        rec["result"], "passed",
        "the agent got its variable: {rec:#}"
    );
    crate::e2e_boundary::assert_all_probes_pass(&rec);
    assert_eq!(environment(&rec), (e.clone(), true), "{rec:#}");
    nothing_left(tb, t, &envs, e);
    // A fresh ready environment, held agent and all, goes with `pool expire --all` (after an
    // image rebuild it would hold the old image).
    let more = fill(tb, t);
    assert_eq!(pool_files(tb, t, "ready"), more.join("\n"));
    expect_success(
        &tb.user(&[&tb.cyclix_bin(), "pool", "expire", t, "--all"]),
        "cyclix pool expire --all",
    );
    nothing_left(tb, t, &more, &more[0]);
}

#[test]
fn an_agent_container_tampered_with_before_its_claim_is_refused_and_the_run_takes_the_next() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-phtamper")
        .extra_yaml("pool:\n  size: 4")
        .write(tb);
    drain(tb, &t);
    let mut envs = fill(tb, &t);
    assert_eq!(envs.len(), 4, "{envs:?}");
    // A claim takes the first id in order (ids begin with their fill's second): the untouched
    // one is tried last.
    envs.sort();
    let (procs, mount, file, clean) = (&envs[0], &envs[1], &envs[2], &envs[3]);
    // Three tampers, each as the host user: a process left by `podman exec` (from a unit of
    // its own, so it outlives this call), a tmpfs mounted in the container's mount namespace,
    // a file written into its /tmp (by `podman exec`, gone since) and one into its upper layer.
    let done = expect_success(
        &tb.user_sh(&format!(
            "set -e
             systemd-run --user --quiet --collect --unit e2e-phtamper-{procs} podman exec cyclix-{procs}-agent sleep 600
             pid=$(podman inspect --format '{{{{.State.Pid}}}}' cyclix-{mount}-agent)
             podman unshare nsenter -t $pid -m mount -t tmpfs e2e-tamper /mnt
             podman exec cyclix-{file}-agent sh -c 'echo x > /tmp/e2e-evil'
             podman unshare touch \"$(podman inspect --format '{{{{.GraphDriver.Data.UpperDir}}}}' cyclix-{file}-agent)/e2e-upper\"
             for i in $(seq 1 600); do podman top cyclix-{procs}-agent comm | grep -qx sleep && break; sleep 0.1; done
             echo tampered"
        )),
        "tamper",
    );
    assert!(done.contains("tampered"), "{done}");
    // Positive controls: each tamper is in place.
    let ctl = expect_success(
        &tb.user_sh(&format!(
            "podman top cyclix-{procs}-agent comm | grep -qx sleep && echo procs
             pid=$(podman inspect --format '{{{{.State.Pid}}}}' cyclix-{mount}-agent)
             grep -q e2e-tamper /proc/$pid/mountinfo && echo mount
             podman exec cyclix-{file}-agent test -e /tmp/e2e-evil && echo file"
        )),
        "controls",
    );
    assert_eq!(ctl.trim(), "procs\nmount\nfile", "{ctl}");
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    let _ = tb.user_sh(&format!(
        "systemctl --user stop e2e-phtamper-{procs} 2>/dev/null || true"
    ));
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    // The untouched environment is claimed warm: the check passes a held container as filled.
    assert_eq!(environment(&rec), (clean.clone(), true), "{rec:#}");
    let notices = notices(&rec);
    let refused = |env: &str, what: &str| refused_at_claim(&notices, env, what);
    assert!(
        refused(procs, "runs") && refused(procs, "sleep"),
        "{notices:#?}"
    );
    assert!(
        refused(mount, "mounts changed since the fill"),
        "{notices:#?}"
    );
    assert!(
        refused(file, "/tmp/e2e-evil") && refused(file, "upper:/e2e-upper"),
        "{notices:#?}"
    );
    nothing_left(tb, &t, &envs, clean);
}

#[test]
fn a_held_agent_that_runs_past_its_timeout_is_stopped_and_recorded_as_the_agents_timeout() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-phtime")
        .agent_cmd("[sleep, \"600\"]")
        .no_timeouts()
        .agent_key("timeout: 10s")
        .extra_yaml("pool:\n  size: 1")
        .write(tb);
    drain(tb, &t);
    let envs = fill(tb, &t);
    assert_eq!(envs.len(), 1, "{envs:?}");
    let e = &envs[0];
    // The held unit's clock counts from the fill: the pool's max_idle (2 h) and agent-wait's
    // wait for the go (300 s) on top.
    let file = expect_success(
        &tb.user_sh(&format!(
            "grep -h RuntimeMaxSec $XDG_RUNTIME_DIR/cyclix/runs/{e}/quadlet/cyclix-{e}-agent.container"
        )),
        "the agent's file",
    );
    assert_eq!(file.trim(), "RuntimeMaxSec=7510", "{file}");
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    assert_eq!(out.status.code(), Some(1), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "agent_timeout", "{rec:#}");
    assert_eq!(environment(&rec), (e.clone(), true), "{rec:#}");
    let causes = rec["causes"].to_string();
    assert!(
        causes.contains("ran past `agent.timeout` (10 s)"),
        "{rec:#}"
    );
    nothing_left(tb, &t, &envs, e);
}

#[test]
fn a_held_agent_whose_run_died_is_stopped_by_its_deadline_timer() {
    // The held agent's own `RuntimeMaxSec=` counts from the fill (max_idle on top): a run
    // SIGKILLed while its agent works leaves a timer of the user manager that stops the agent
    // a slack after its budget, as a cold agent's unit would.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-phdead";
    let tenant = || {
        Tenant::new(t)
            .agent_cmd("[sleep, \"600\"]")
            .no_timeouts()
            .agent_key("timeout: 10s")
            .extra_yaml("pool:\n  size: 1")
    };
    tenant().write(tb);
    drain(tb, t);
    let envs = fill(tb, t);
    assert_eq!(envs.len(), 1, "{envs:?}");
    let e = &envs[0];
    let c = tb.cyclix_bin();
    let out = expect_success(
        &tb.user_sh(&format!(
            "CYCLIX_FAILPOINTS=agent.deadline {c} run {t} >/tmp/{t}.out 2>&1; echo \"rc=$?\"
             a=cyclix-{e}-agent.service; d=cyclix-{e}-agent-deadline
             echo \"agent_before=$(systemctl --user show -P ActiveState $a)\"
             echo \"timer=$(systemctl --user show -P ActiveState $d.timer)\"
             echo \"on_active=$(systemctl --user show -P TimersMonotonic $d.timer | grep -o 'OnActiveUSec=[^ ;]*')\"
             systemctl --user start $d.service
             for i in $(seq 1 300); do [ \"$(systemctl --user show -P ActiveState $a)\" = active ] || break; sleep 0.1; done
             echo \"agent_after=$(systemctl --user show -P ActiveState $a)\""
        )),
        "kill the run while its held agent works, then fire its deadline",
    );
    let kv = |k: &str| crate::common::kv(&out, k);
    assert_eq!(kv("rc"), "137", "killed at the fail point: {out}");
    // The positive control: the dead run's agent still runs (its unit's clock: 2 h more).
    assert_eq!(kv("agent_before"), "active", "{out}");
    assert_eq!(kv("timer"), "active", "{out}");
    assert!(kv("on_active").starts_with("OnActiveUSec="), "{out}");
    assert_ne!(
        kv("agent_after"),
        "active",
        "the deadline's service stopped it: {out}"
    );
    // The tenant's next run (a quick agent; its pool empty: cold) converges the dead one and
    // its claim.
    Tenant::new(t).extra_yaml("pool:\n  size: 1").write(tb);
    let out = tb.user(&[&c, "run", t]);
    assert!(out.status.success(), "{out:?}");
    nothing_left(tb, t, &envs, e);
}
