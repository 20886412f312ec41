//! Tier `gvisor` (issue 35) on the testbed's Debian runsc: the demo tenant with `tier: gvisor`
//! passes with the gVisor probe profile, its record names the runtime and P25 shows gVisor's
//! kernel; the agent and the gate both run on gVisor's kernel while a tier-`container` run of
//! the same tenant sees the host's (the positive control of the kernel check); and without a
//! usable runsc the run is refused before anything exists, never run on the host's kernel.

use crate::common::run::{last_line, leftovers, prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// The host kernel's release, as the testbed (which shares it) reports it.
fn host_release(tb: &Testbed) -> String {
    expect_success(&tb.user_sh("uname -r"), "uname -r")
        .trim()
        .to_string()
}

#[test]
fn the_demo_tenant_on_gvisor_passes_with_gvisors_probe_profile_and_names_its_runtime() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-gv-demo";
    // The demo tenant itself (its project, task, protected gate), tier gvisor.
    expect_success(
        &tb.user_sh(&format!(
            "cd ~/.config/cyclix/tenants && sed -e 's/^tenant: demo$/tenant: {t}/' \
             -e 's/^tier: .*$//' demo.yaml > {t}.yaml && echo 'tier: gvisor' >> {t}.yaml"
        )),
        "write the tenant",
    );
    let out = start(tb, t);
    let rec = record(tb, t);
    assert!(out.status.success(), "{rec:#}\n{out:?}");
    assert_eq!(
        (rec["result"].as_str(), rec["tier"].as_str()),
        (Some("passed"), Some("gvisor")),
        "{rec:#}"
    );
    // Every probe of the gVisor profile reports, in suite order, and passes.
    let ids: Vec<&str> = rec["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .filter_map(|p| p["id"].as_str())
        .collect();
    assert_eq!(ids, cyclix::probe::profile::GVISOR_PROBES, "{rec:#}");
    let failed: Vec<&serde_json::Value> = rec["probes"]
        .as_array()
        .expect("probes")
        .iter()
        .filter(|p| p["verdict"] != "PASS")
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    let p25 = rec["probes"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["id"] == "P25"))
        .expect("P25");
    let got = p25["got"].as_str().unwrap_or_default();
    assert!(
        got.contains("Starting gVisor")
            && !got.starts_with(&format!("release {} ", host_release(tb))),
        "P25: {p25:#}"
    );
    // The record and the summary name runsc, its version and flags.
    let rt = &rec["oci_runtime"];
    assert!(
        rt["path"].as_str().is_some_and(|p| p.ends_with("/runsc"))
            && rt["version"].as_str().is_some_and(|v| !v.is_empty())
            && rt["flags"]
                .as_array()
                .is_some_and(|f| f.iter().any(|x| x == "network=host")),
        "{rt:#}"
    );
    let status = expect_success(&tb.user(&[&tb.cyclix_bin(), "status", t]), "cyclix status");
    assert!(status.contains("agent and gate on runsc "), "{status}");
    assert!(
        rec["notices"].as_array().is_some_and(|n| n
            .iter()
            .any(|x| x.as_str().is_some_and(|x| x.starts_with("tier gvisor:")))),
        "{rec:#}"
    );
    assert_eq!(rec["gate_inventory"]["verdict"], "passed", "{rec:#}");
    let run_id = rec["run_id"].as_str().expect("run id");
    let left = leftovers(tb, run_id, t);
    assert!(left.trim().is_empty(), "left behind by {run_id}:\n{left}");
}

#[test]
fn the_agent_and_the_gate_run_on_gvisors_kernel_and_a_container_run_on_the_hosts() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let host = host_release(tb);
    let mut releases = Vec::new();
    for (t, tier) in [
        ("e2e-gv-kernel", "gvisor"),
        ("e2e-gv-kernel-c", "container"),
    ] {
        Tenant::new(t)
            .agent_cmd(r#"[sh, -c, "cyclix-demo-agent && uname -r"]"#)
            .gate_cmd(r#"[sh, -c, "python3 -m pytest -q -p no:cacheprovider && uname -r"]"#)
            .tier(tier)
            .write(tb);
        let out = start(tb, t);
        let rec = record(tb, t);
        assert_eq!(rec["result"], "passed", "{rec:#}\n{out:?}");
        let p25 = rec["probes"]
            .as_array()
            .and_then(|a| a.iter().find(|p| p["id"] == "P25"))
            .cloned()
            .unwrap_or_default();
        releases.push((
            tier,
            last_line(&rec, "agent_log"),
            last_line(&rec, "gate_log"),
            p25["got"].as_str().unwrap_or_default().to_string(),
        ));
    }
    let (_, gv_agent, gv_gate, gv_p25) = &releases[0];
    let (_, c_agent, c_gate, c_p25) = &releases[1];
    // Positive control: tier container shares the host's kernel, and P25 says so.
    assert_eq!(
        (c_agent.as_str(), c_gate.as_str()),
        (host.as_str(), host.as_str())
    );
    assert!(
        c_p25.starts_with(&format!("release {host} (host {host})")),
        "{c_p25}"
    );
    // Tier gvisor: the agent and the gate both see another kernel, the one P25 proved.
    assert!(
        !gv_agent.is_empty() && gv_agent != &host && gv_gate == gv_agent,
        "agent {gv_agent:?}, gate {gv_gate:?}, host {host:?}"
    );
    assert!(
        gv_p25.starts_with(&format!("release {gv_agent} (host {host})")),
        "{gv_p25}"
    );
}

#[test]
fn without_a_usable_runsc_a_gvisor_run_is_refused_before_anything_exists() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-gv-refused";
    Tenant::new(t).tier("gvisor").write(tb);
    for (runsc, says) in [
        ("/nonexistent/runsc", "is not an executable file"),
        // An executable that is not runsc: no version of runsc's.
        ("/usr/bin/true", "did not name a runsc version"),
    ] {
        let out = tb.user_sh(&format!(
            "b() {{ git -C ~/src/{t} branch --list 'cyclix/*' | wc -l; }}; before=$(b)
             CYCLIX_RUNSC={runsc} {c} run {t}; echo \"rc=$?\"
             echo \"branches=$(( $(b) - before ))\"
             echo \"records=$(ls ~/.local/state/cyclix/runs/{t} 2>/dev/null | wc -l)\"",
            c = tb.cyclix_bin()
        ));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stdout.contains("rc=1"), "{stdout}\n{stderr}");
        assert!(
            stderr.contains("tier `gvisor` is configured but gVisor's runsc is not usable")
                && stderr.contains(says)
                && stderr.contains("apt install runsc"),
            "{stderr}"
        );
        assert!(
            stdout.contains("branches=0") && stdout.contains("records=0"),
            "a refused run made something: {stdout}"
        );
    }
}

#[test]
fn the_plain_backend_carries_the_gvisor_runtime_too() {
    // What a host without Quadlet gets (podman < 5: plain units with the podman commands),
    // forced here on podman 5: the agent and the gate on runsc all the same.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-gv-plain")
        .gate_cmd(r#"[sh, -c, "python3 -m pytest -q -p no:cacheprovider && uname -r"]"#)
        .tier("gvisor")
        .write(tb);
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t, "--backend", "plain"]);
    let rec = record(tb, &t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("(Plain units)"),
        "{out:?}"
    );
    assert_eq!(
        (rec["result"].as_str(), rec["tier"].as_str()),
        (Some("passed"), Some("gvisor")),
        "{rec:#}"
    );
    let p25 = rec["probes"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["id"] == "P25"))
        .expect("P25");
    assert_eq!(p25["verdict"], "PASS", "{p25:#}");
    let gate = last_line(&rec, "gate_log");
    assert!(
        !gate.is_empty() && gate != host_release(tb),
        "the gate's kernel: {gate:?}"
    );
    let run_id = rec["run_id"].as_str().expect("id");
    let left = leftovers(tb, run_id, &t);
    assert!(left.trim().is_empty(), "{left}");
}

#[test]
fn an_agent_outlasting_watch_rounds_passes_and_what_it_leaves_in_its_report_dir_goes() {
    // Attack review of issue 35: the leak watch's probe starts dumpable under gVisor (W0) and
    // gets no seccomp filter from `podman exec` (P3): every run longer than a watch interval
    // ended `leak_detected`. The agent's writable report directory was on the runtime tmpfs
    // (it could fill it) and a tree it left there broke the teardown. Now: the watch rounds
    // pass, the directory is beside the private repository and goes as plain files.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = "e2e-gv-long";
    Tenant::new(t)
        .agent_cmd(
            r#"[sh, -c, "sleep 12; mkdir -p /cyclix/report.d/locked/inner && echo f > /cyclix/report.d/locked/inner/f && chmod 000 /cyclix/report.d/locked/inner && chmod 500 /cyclix/report.d/locked && dd if=/dev/zero of=/cyclix/report.d/fill bs=1M count=64 2>/dev/null && cyclix-demo-agent"]"#,
        )
        .tier("gvisor")
        .write(tb);
    let out = start(tb, t);
    let rec = record(tb, t);
    assert_eq!(rec["result"], "passed", "{rec:#}\n{out:?}");
    assert!(
        rec["watch_rounds"].as_u64().is_some_and(|n| n >= 1),
        "the watch ran while the agent worked: {rec:#}"
    );
    let run_id = rec["run_id"].as_str().expect("run id");
    let left = leftovers(tb, run_id, t);
    assert!(left.trim().is_empty(), "left behind by {run_id}:\n{left}");
    let report = expect_success(
        &tb.user_sh(&format!(
            "ls -d ~/.local/share/cyclix/worktrees/{t}/{run_id}.report 2>&1; true"
        )),
        "the report dir",
    );
    assert!(report.contains("No such file"), "{report}");
}
