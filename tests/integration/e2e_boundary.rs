//! The boundary proves itself on the real stack: each test weakens ONE run the way an attacker
//! with write access to the user's Quadlet directory could (a drop-in for that run's units,
//! `~/.config/containers/systemd/UNIT.d/`, which Quadlet merges into cyclix's runtime units) and
//! checks that the probes catch it before the agent starts: the run is refused, the record
//! names the failing probe, the agent never ran, and teardown still ran.

use crate::common::run::demo_setup;
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// A tenant cloned from the demo project with egress to the testbed's allowed host (so the
/// positive controls have a target); returns nothing, the name is the caller's.
fn tenant(tb: &Testbed, name: &str) {
    demo_setup(tb);
    Tenant::new(name)
        .agent_cmd(r#"[sh, -c, "touch /work/AGENT-RAN && git add -A && git commit -qm agent-ran"]"#)
        .egress_allow(&["allowed.example"], &[80])
        .write(tb);
}

/// Writes the drop-ins (unit file name → content) for run `run_id`, runs it with `env`
/// prepended, removes the drop-ins, and returns (exit code, record, stderr).
fn weakened_run(
    tb: &Testbed,
    name: &str,
    run_id: &str,
    dropins: &[(&str, String)],
    env: &str,
) -> (Option<i32>, serde_json::Value, String) {
    tenant(tb, name);
    let mut script = String::from("set -e\nQ=~/.config/containers/systemd; mkdir -p $Q\n");
    // `unit:NAME` is a whole unit file of its own; any other name gets a drop-in.
    for (unit, content) in dropins {
        if let Some(file) = unit.strip_prefix("unit:") {
            script.push_str(&format!("cat > $Q/{file} <<'EOF'\n{content}\nEOF\n"));
        } else {
            script.push_str(&format!(
                "mkdir -p $Q/{unit}.d\ncat > $Q/{unit}.d/weaken.conf <<'EOF'\n{content}\nEOF\n"
            ));
        }
    }
    // A whole unit of its own exists on the host once the manager has generated it (a run
    // generates only its own units and reloads nothing).
    let whole = dropins.iter().any(|(u, _)| u.starts_with("unit:"));
    if whole {
        script.push_str("systemctl --user daemon-reload\n");
    }
    script.push_str(&format!(
        "set +e\n{env} {c} run {name} --run-id {run_id}\necho \"rc=$?\" >&2\n",
        c = tb.cyclix_bin()
    ));
    for (unit, _) in dropins {
        let unit = unit.trim_start_matches("unit:");
        script.push_str(&format!("rm -rf $Q/{unit} $Q/{unit}.d\n"));
    }
    if whole {
        script.push_str("systemctl --user daemon-reload\n");
    }
    let out = tb.user_sh(&script);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("rc="))
        .and_then(|c| c.trim().parse().ok());
    let rec = expect_success(
        &tb.user_sh(&format!(
            "cat ~/.local/state/cyclix/runs/{name}/{run_id}.json"
        )),
        "read the run record",
    );
    (
        code,
        serde_json::from_str(&rec).expect("record JSON"),
        stderr,
    )
}

fn assert_refused(name: &str, code: Option<i32>, rec: &serde_json::Value, needle: &str) {
    assert_eq!(rec["result"], "probe_refused", "{name}: {rec:#}");
    assert_eq!(
        code,
        Some(1),
        "{name}: cyclix run must exit 1 on a refused boundary"
    );
    let refusal = rec["refusal"].to_string();
    assert!(
        refusal.contains(needle),
        "{name}: the refusal must name {needle}: {refusal}"
    );
    assert!(
        rec["agent_exit"].is_null(),
        "{name}: the agent ran: {rec:#}"
    );
    assert!(
        rec["commits"].as_array().is_some_and(Vec::is_empty),
        "{name}: the agent committed"
    );
    let phases: Vec<&str> = rec["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(
        phases.contains(&"teardown") && phases.contains(&"audit"),
        "{name}: teardown must run: {phases:?}"
    );
}

#[test]
fn the_demo_run_records_every_probe_passing() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    tenant(tb, "b-pass");
    let out = tb.user(&[&tb.cyclix_bin(), "run", "b-pass", "--run-id", "b-pass-1"]);
    let rec: serde_json::Value = serde_json::from_str(&expect_success(
        &tb.user_sh("cat ~/.local/state/cyclix/runs/b-pass/b-pass-1.json"),
        "record",
    ))
    .expect("json");
    assert_eq!(
        rec["result"], "gate_failed",
        "the agent ran (it fixes nothing): {rec:#}\n{out:?}"
    );
    assert_all_probes_pass(&rec);
}

/// The pre-agent report comes from agent-wait through the run's FIFO (issue 16): every probe
/// reports and passes, and by the time the agent runs the FIFO is gone and the read-only
/// control directory takes no new one, so nothing the agent writes there reaches the host.
#[test]
fn the_report_fifo_is_gone_before_the_agent_runs_and_cannot_be_made_again() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    demo_setup(tb);
    Tenant::new("b-fifo")
        .agent_cmd(r#"[sh, -c, "if [ -e /cyclix/ctl/report ]; then echo FIFO-THERE; else echo FIFO-GONE; fi; touch /cyclix/ctl/report || echo CREATE-REFUSED"]"#)
        .egress_allow(&["allowed.example"], &[80])
        .write(tb);
    let out = tb.user(&[&tb.cyclix_bin(), "run", "b-fifo", "--run-id", "b-fifo-1"]);
    let rec: serde_json::Value = serde_json::from_str(&expect_success(
        &tb.user_sh("cat ~/.local/state/cyclix/runs/b-fifo/b-fifo-1.json"),
        "record",
    ))
    .expect("json");
    assert_all_probes_pass(&rec);
    let log = rec["agent_log"].to_string();
    assert!(
        log.contains("FIFO-GONE") && !log.contains("FIFO-THERE"),
        "the agent saw the report FIFO: {rec:#}\n{out:?}"
    );
    assert!(
        log.contains("CREATE-REFUSED"),
        "the agent made a file in the control directory: {rec:#}"
    );
    assert_eq!(rec["leftovers"], serde_json::json!([]), "{rec:#}");
}

/// Every probe of the suite reported, in order, and passed: the boundary is proven.
pub fn assert_all_probes_pass(rec: &serde_json::Value) {
    let probes = rec["probes"].as_array().expect("probes");
    let ids: Vec<&str> = probes.iter().filter_map(|p| p["id"].as_str()).collect();
    let want: Vec<String> = (1..=25)
        .map(|i| format!("P{i}"))
        .chain((1..=17).map(|i| format!("N{i}")))
        .chain(["E1".to_string()])
        .collect();
    assert_eq!(ids, want, "every probe must report, in order");
    let failed: Vec<&serde_json::Value> =
        probes.iter().filter(|p| p["verdict"] != "PASS").collect();
    assert!(
        failed.is_empty(),
        "probes failed on the production configuration: {failed:#?}"
    );
}

#[test]
fn an_extra_container_on_the_run_network_is_refused() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    let id = "b-intruder-1";
    // The run's network by its podman name: the run's `.network` file is in the run's own
    // directory, which the manager's generator does not scan.
    let intruder = format!(
        "[Unit]\nDescription=intruder\nRequires=cyclix-{id}-network.service\nAfter=cyclix-{id}-network.service\n[Container]\nContainerName={id}-intruder\nImage=docker.io/library/busybox:latest\nNetwork=cyclix-{id}\nExec=sleep 300\n[Quadlet]\nDefaultDependencies=false"
    );
    let agent =
        format!("[Unit]\nWants=cyclix-{id}-intruder.service\nAfter=cyclix-{id}-intruder.service");
    let (code, rec, err) = weakened_run(
        tb,
        "b-intruder",
        id,
        &[
            (&format!("unit:cyclix-{id}-intruder.container"), intruder),
            (&format!("cyclix-{id}-agent.container"), agent),
        ],
        "",
    );
    let _ = tb.user_sh(&format!("systemctl --user stop cyclix-{id}-intruder.service; podman rm -f {id}-intruder; podman network rm -f cyclix-{id}"));
    assert_eq!(rec["agent_exit"], serde_json::Value::Null, "{err}");
    assert!(rec["refusal"].to_string().contains("B16"), "{rec:#}\n{err}");
    assert_eq!(code.map(|c| c != 0), Some(true));
}

#[test]
fn the_user_bus_mounted_into_the_agent_is_refused() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    let id = "b-bus-1";
    let (code, rec, _) = weakened_run(
        tb,
        "b-bus",
        id,
        &[(
            &format!("cyclix-{id}-agent.container"),
            "[Container]\nVolume=%t/bus:/run/user/1000/bus".to_string(),
        )],
        "",
    );
    assert_refused("b-bus", code, &rec, "P19");
}

/// `cyclix run` replaces the `CYCLIX_CANARY` given here with its own random one (`run::canary`),
/// so the drop-in's variable is a name-only sighting: before the agent runs, that refuses.
/// The value case (the real canary reaching a running agent) is in `e2e_watch`.
#[test]
fn a_canary_forwarded_into_the_agent_is_refused() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    let id = "b-canary-1";
    let (code, rec, _) = weakened_run(
        tb,
        "b-canary",
        id,
        &[(
            &format!("cyclix-{id}-agent.container"),
            "[Container]\nEnvironment=CYCLIX_CANARY=cyclix-canary-b-canary-0123456789".to_string(),
        )],
        "CYCLIX_CANARY=cyclix-canary-b-canary-0123456789",
    );
    assert_refused("b-canary", code, &rec, "CYCLIX_CANARY");
}

#[test]
fn a_writable_git_hooks_is_refused() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    let id = "b-hooks-1";
    let home = "/home/cyx";
    let git = format!("{home}/src/b-hooks/.git");
    let mounts = format!(
        "[Container]\nMount=\nMount=type=bind,source={home}/.local/share/cyclix/worktrees/b-hooks/{id},destination=/work\n\
         Mount=type=bind,source={git},destination={git}\n\
         Mount=type=bind,source={git}/config,destination={git}/config,readonly=true\n\
         Mount=type=bind,source={git}/info,destination={git}/info,readonly=true\n\
         Mount=type=bind,source={bin},destination=/cyclix/bin/cyclix,readonly=true\n\
         Mount=type=bind,source=/run/user/1000/cyclix/runs/{id}/ctl,destination=/cyclix/ctl,readonly=true\n\
         Mount=type=bind,source=/run/user/1000/cyclix/runs/{id}/task.md,destination=/cyclix/task.md,readonly=true",
        bin = tb.cyclix_bin()
    );
    let (code, rec, _) = weakened_run(
        tb,
        "b-hooks",
        id,
        &[(&format!("cyclix-{id}-agent.container"), mounts)],
        "",
    );
    assert_refused("b-hooks", code, &rec, "hooks");
}

#[test]
fn a_proxy_that_allows_everything_is_refused() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    let id = "b-open-1";
    expect_success(
        &tb.user_sh(
            "printf 'http_port 3128\\ncache deny all\\npid_filename none\\npinger_enable off\\nshutdown_lifetime 1 seconds\\n\
             cache_log stdio:/dev/stderr\\naccess_log stdio:/dev/stdout\\nhttp_access allow all\\n' > ~/open-squid.conf; chmod 644 ~/open-squid.conf",
        ),
        "write an open proxy config",
    );
    let proxy = "[Container]\nMount=\nMount=type=bind,source=/home/cyx/open-squid.conf,destination=/etc/cyclix/squid.conf,readonly=true".to_string();
    let (code, rec, _) = weakened_run(
        tb,
        "b-open",
        id,
        &[(&format!("cyclix-{id}-proxy.container"), proxy)],
        "",
    );
    assert_refused("b-open", code, &rec, "N9");
}

#[test]
fn an_agent_with_a_default_route_is_refused() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    let id = "b-route-1";
    let (code, rec, _) = weakened_run(
        tb,
        "b-route",
        id,
        &[(
            &format!("cyclix-{id}.pod"),
            "[Pod]\nNetwork=podman".to_string(),
        )],
        "",
    );
    assert_refused("b-route", code, &rec, "N1");
}
