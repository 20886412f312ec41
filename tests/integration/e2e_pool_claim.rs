//! The claim's check of a warm environment on the real stack (issue 16, "done when"): a
//! process left in a pooled environment before its claim (in its proxy, or in its pod's infra
//! container) is refused by the claim, the environment destroyed with the process, and the run
//! replaces it with the next ready one, whose boundary it proves as usual.

use crate::common::run::{leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};
use crate::e2e_pool::{drain, fill, pool_files, refused_at_claim};

/// Starts `argv` in container `container` of the testbed's user with `podman exec`, from a
/// transient user unit of its own (`unit`), so the process outlives the test's one-off call;
/// returns once `podman top` lists a process named `comm` in the container (positive control),
/// within a deadline.
pub(crate) fn stray(tb: &Testbed, unit: &str, container: &str, argv: &str, comm: &str) {
    let out = tb.user_sh(&format!(
        "systemd-run --user --quiet --collect --unit {unit} podman exec {container} {argv}
         timeout 60 sh -c 'until podman top {container} comm | grep -qx {comm}; do sleep 0.2; done' && echo seen"
    ));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "seen",
        "{out:?}"
    );
}

/// Tenant `name` with a pool of `size`, drained, then filled: the tenant and its ready
/// environments in the order a claim tries them (by id).
fn ready(tb: &Testbed, name: &str, size: usize) -> (String, Vec<String>) {
    let t = Tenant::new(name)
        .extra_yaml(&format!("pool:\n  size: {size}"))
        .write(tb);
    drain(tb, &t);
    let mut envs = fill(tb, &t);
    assert_eq!(envs.len(), size, "{envs:?}");
    envs.sort();
    (t, envs)
}

/// Nothing of environments `envs` is left, and tenant `t`'s pool holds no file.
fn nothing_left(tb: &Testbed, t: &str, envs: &[String]) {
    for e in envs {
        let left = leftovers(tb, e, t);
        assert!(left.trim().is_empty(), "left by {e}:\n{left}");
    }
    for state in ["ready", "claimed", "filling", "ledgers"] {
        assert_eq!(pool_files(tb, t, state), "", "{state}");
    }
}

/// How many processes named `comm` `podman top` lists in `container`.
fn count(tb: &Testbed, container: &str, comm: &str) -> usize {
    let out = tb.user_sh(&format!(
        "podman top {container} comm | grep -cx {comm} || true"
    ));
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

#[test]
fn a_process_left_in_a_pooled_environment_is_refused_at_the_claim_and_replaced() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    // The claim tries the ready ones in id order: the two tampered ones come first.
    let (t, envs) = ready(tb, "e2e-poolp", 3);
    let (in_proxy, in_infra, good) = (&envs[0], &envs[1], &envs[2]);
    let proxy = format!("cyclix-{in_proxy}-proxy");
    let infra = format!("cyclix-{in_infra}-infra");
    let units = [
        format!("e2e-stray-{in_proxy}"),
        format!("e2e-stray-{in_infra}"),
    ];
    // A process left in the proxy (its image has a shell and sleep) ...
    stray(tb, &units[0], &proxy, "sleep 1000", "sleep");
    // ... and one in the pod's infra container, whose image holds only catatonit: a second
    // one (`-P`: it pauses) beside the one the fill left.
    assert_eq!(count(tb, &infra, "catatonit"), 1, "the fill left one");
    let out = tb.user_sh(&format!(
        "systemd-run --user --quiet --collect --unit {} podman exec {infra} /catatonit -P
         timeout 60 sh -c 'until [ $(podman top {infra} comm | grep -cx catatonit) -ge 2 ]; do sleep 0.2; done' && echo seen",
        units[1]
    ));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "seen",
        "{out:?}"
    );
    // Positive control in a call of its own: both processes are still there before the claim.
    assert_eq!(count(tb, &proxy, "sleep"), 1);
    assert_eq!(count(tb, &infra, "catatonit"), 2);

    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    let cleanup = format!(
        "systemctl --user stop {} {} 2>/dev/null; true",
        units[0], units[1]
    );
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    crate::e2e_boundary::assert_all_probes_pass(&rec);
    // Replaced: the run claimed the untampered environment, warm.
    assert_eq!(rec["environment"]["id"], good.as_str(), "{rec:#}");
    assert_eq!(rec["environment"]["pooled"], true, "{rec:#}");
    assert_eq!(rec["run_id"], good.as_str(), "{rec:#}");
    let notices: Vec<&str> = rec["notices"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let refused = |env: &str, what: &str| refused_at_claim(&notices, env, what);
    assert!(
        refused(in_proxy, &format!("the proxy {proxy} runs sleep (pid")),
        "{notices:#?}"
    );
    assert!(
        refused(
            in_infra,
            &format!("the pod's infra container {infra} runs 2 processes")
        ),
        "{notices:#?}"
    );
    // The claim is the record's first phase after the queue (no claim is held while a run
    // waits for a slot).
    assert_eq!(rec["phases"][0]["name"], "queue", "{rec:#}");
    assert_eq!(rec["phases"][1]["name"], "claim", "{rec:#}");
    // The stray processes went with their environments: their units ended by themselves.
    let ended = tb.user_sh(&format!(
        "timeout 60 sh -c 'while systemctl --user is-active -q {} {}; do sleep 0.2; done' && echo ended",
        units[0], units[1]
    ));
    let _ = tb.user_sh(&cleanup);
    assert_eq!(
        String::from_utf8_lossy(&ended.stdout).trim(),
        "ended",
        "{ended:?}"
    );
    let units_left = expect_success(
        &tb.user_sh(&format!(
            "systemctl --user list-units --all --no-legend '{}' '{}'",
            units[0], units[1]
        )),
        "list the stray units",
    );
    assert_eq!(units_left.trim(), "", "{units_left}");
    nothing_left(tb, &t, &envs);
}

/// A container that joins a pooled proxy's network namespace (`--network container:`) is on
/// no network and in no pod; the claim sees the shared namespace (`podman ps --ns`), refuses
/// the environment and takes the next one.
#[test]
fn a_container_joined_to_a_pooled_proxys_namespace_is_refused_at_the_claim() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let (t, envs) = ready(tb, "e2e-poolj", 2);
    let (tampered, good) = (&envs[0], &envs[1]);
    let proxy = format!("cyclix-{tampered}-proxy");
    let spy = format!("e2e-spy-{tampered}");
    // Positive control: the spy runs and shares the proxy's network namespace.
    let shared = expect_success(
        &tb.user_sh(&format!(
            "set -e; systemd-run --user --quiet --collect --unit {spy} podman run --rm --name {spy} --network container:{proxy} localhost/tb-busybox:latest sleep 1000
             timeout 60 sh -c 'until podman container exists {spy}; do sleep 0.2; done; until [ \"$(podman inspect --format {{{{.State.Status}}}} {spy})\" = running ]; do sleep 0.2; done'
             podman ps --ns --format json | python3 -c 'import json, sys; net = {{c[\"Names\"][0]: c[\"Namespaces\"].get(\"Net\") for c in json.load(sys.stdin)}}; print(\"shared\" if net[\"{proxy}\"] and net[\"{proxy}\"] == net[\"{spy}\"] else net)'"
        )),
        "the spy joins the proxy's network namespace",
    );
    assert_eq!(shared.trim(), "shared");
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    // The spy's unit ends when its container goes; podman 5.4 may fail the first removal of a
    // container that joined another's namespace ("conmon exited prematurely").
    let _ = tb.user_sh(&format!(
        "systemctl --user stop {spy} 2>/dev/null; podman rm -f -t0 {spy} >/dev/null 2>&1 || podman rm -f {spy} >/dev/null 2>&1; true"
    ));
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert_eq!(rec["run_id"], good.as_str(), "{rec:#}");
    let refused = rec["notices"].as_array().into_iter().flatten().any(|n| {
        n.as_str().is_some_and(|n| {
            n.starts_with(&format!(
                "pool: environment {tampered} refused at the claim"
            )) && n.contains(&format!(
                "container {spy} shares the Net namespace of {proxy}"
            ))
        })
    });
    assert!(refused, "{rec:#}");
    for e in &envs {
        let left = leftovers(tb, e, &t);
        assert!(left.trim().is_empty(), "left by {e}:\n{left}");
    }
}

#[test]
fn a_process_that_entered_a_pooled_proxys_pid_namespace_from_outside_is_refused() {
    // Issue 33: the claim reads a pooled container's processes from the host's /proc (its PID
    // namespace) and cgroup tree instead of `podman top`. A process that joined the proxy's
    // PID namespace from outside (`nsenter`, from a unit of its own) is in no cgroup of the
    // proxy: only the PID namespace shows it (`podman top … hpid`, the look before, gave it no
    // host pid and dropped it: the attack review's reading of psgo).
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let (t, envs) = ready(tb, "e2e-poolns", 2);
    let (entered, good) = (&envs[0], &envs[1]);
    let proxy = format!("cyclix-{entered}-proxy");
    let unit = format!("e2e-nsenter-{entered}");
    // Positive controls: `podman top … comm` lists the process in the proxy, and its cgroup is
    // its own unit's, not the proxy's.
    let out = expect_success(
        &tb.user_sh(&format!(
            "set -e
             p=$(podman inspect --format '{{{{.State.Pid}}}}' {proxy})
             systemd-run --user --quiet --collect --unit {unit} nsenter -t $p -U -p --preserve-credentials sleep 1000
             timeout 60 sh -c 'until podman top {proxy} comm | grep -qx sleep; do sleep 0.2; done'
             echo seen
             s=$(systemctl --user show -P MainPID {unit})
             sed -n 's/^0:://p' /proc/$s/cgroup"
        )),
        "a process enters the proxy's PID namespace",
    );
    assert!(out.starts_with("seen\n"), "{out}");
    assert!(
        out.trim_end().ends_with(&format!("/{unit}.service")),
        "the entered process is in its own unit's cgroup: {out}"
    );
    let run = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    let ended = tb.user_sh(&format!(
        "timeout 60 sh -c 'while systemctl --user is-active -q {unit}; do sleep 0.2; done' && echo ended;
         systemctl --user stop {unit} 2>/dev/null; true"
    ));
    assert!(run.status.success(), "{run:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert_eq!(rec["environment"]["id"], good.as_str(), "{rec:#}");
    assert_eq!(rec["environment"]["pooled"], true, "{rec:#}");
    let notices = rec["notices"].to_string();
    assert!(
        notices.contains(&format!(
            "pool: environment {entered} refused at the claim and destroyed"
        )) && notices.contains(&format!("the proxy {proxy} runs sleep (pid")),
        "{rec:#}"
    );
    // The proxy's PID namespace ended with the environment, and the process with it.
    assert_eq!(
        String::from_utf8_lossy(&ended.stdout).trim(),
        "ended",
        "{ended:?}"
    );
    nothing_left(tb, &t, &envs);
}

#[test]
fn a_process_that_entered_a_pooled_network_namespace_from_outside_is_refused() {
    // Issue 33 (a tampered environment is refused by the claim): a process that entered the
    // proxy's or the pod's network namespace from outside (`nsenter -U -n`, from a unit of its
    // own) is in no PID namespace or cgroup of the environment's containers, so neither the
    // look of `podman top` nor the PID-namespace look sees it; in there it sees and makes the
    // connections of the claiming run's agent (an attack review's spy read them from
    // `/proc/PID/net/tcp`). The claim's look at every process's network namespace refuses it.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let (t, envs) = ready(tb, "e2e-poolnet", 3);
    let (proxied, podded, good) = (&envs[0], &envs[1], &envs[2]);
    let proxy = format!("cyclix-{proxied}-proxy");
    let infra = format!("cyclix-{podded}-infra");
    let units = [
        format!("e2e-netns-{proxied}"),
        format!("e2e-netns-{podded}"),
    ];
    // Positive controls: each spy is in the container's network namespace (the same link; the
    // proxy's spy sees squid's listening socket, port 3128 = 0C38, in its /proc/net/tcp6), and
    // `podman top` lists no process of it in the container.
    let out = expect_success(
        &tb.user_sh(&format!(
            "set -e
             spy() {{
               p=$(podman inspect --format '{{{{.State.Pid}}}}' $1)
               systemd-run --user --quiet --collect --unit $2 nsenter -t $p -U -n --preserve-credentials sleep 1000
               timeout 60 sh -c \"until [ \\$(systemctl --user show -P MainPID $2) != 0 ]; do sleep 0.1; done\"
               s=$(systemctl --user show -P MainPID $2)
               timeout 60 sh -c \"until [ \\$(readlink /proc/$s/ns/net) = \\$(readlink /proc/$p/ns/net) ]; do sleep 0.1; done\"
               echo \"$1 same-net=yes top-sleep=$(podman top $1 comm | grep -cx sleep || true)\"
               [ $1 = {proxy} ] && echo \"listen3128=$(cat /proc/$s/net/tcp /proc/$s/net/tcp6 | grep -cE ':0C38 0+:0000 0A' || true)\"
               true
             }}
             spy {proxy} {u0}
             spy {infra} {u1}",
            u0 = units[0],
            u1 = units[1]
        )),
        "processes enter the proxy's and the pod's network namespaces",
    );
    let run = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    let _ = tb.user_sh(&format!(
        "systemctl --user stop {} {} 2>/dev/null; true",
        units[0], units[1]
    ));
    assert!(
        out.contains(&format!("{proxy} same-net=yes top-sleep=0"))
            && out.contains(&format!("{infra} same-net=yes top-sleep=0"))
            && out.contains("listen3128=1"),
        "{out}"
    );
    assert!(run.status.success(), "{run:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert_eq!(rec["environment"]["id"], good.as_str(), "{rec:#}");
    assert_eq!(rec["environment"]["pooled"], true, "{rec:#}");
    let notices = rec["notices"].to_string();
    for (env, whose) in [(proxied, &proxy), (podded, &infra)] {
        assert!(
            notices.contains(&format!(
                "pool: environment {env} refused at the claim and destroyed"
            )) && notices.contains(&format!(
                "is in the network namespace of {whose} from outside"
            )),
            "{env}: {rec:#}"
        );
    }
    nothing_left(tb, &t, &envs);
}
