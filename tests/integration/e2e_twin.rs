//! `cyclix twin` on the real stack: two environments of one tenant from one commit, up at the
//! same time (real Quadlet units over D-Bus, real podman pods, networks and proxies, real
//! probes), the quick suite in each gate and in a `Network=none` reference over a clean
//! worktree, then teardown. Each test checks the report AND the host: no container, pod,
//! network, volume, secret, unit, unit file, worktree, run dir or temporary branch of any of
//! the three sides is left, and `cyclix leftovers` ties nothing to them.

use crate::common::run::demo_ready;
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// The quick suite that writes `JUnit` XML to `$CYCLIX_RESULTS`.
const JUNIT_QUICK: &str =
    r#"[sh, -c, 'exec python3 -m pytest -q -p no:cacheprovider --junitxml="$CYCLIX_RESULTS"']"#;

/// The twin id (`ID` of `ID-a`, `ID-b`, `ID-ref`) from cyclix's stderr line.
fn twin_id(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|l| l.contains("environments "))
        .unwrap_or_else(|| panic!("no `environments` line in: {stderr}"));
    let a = line
        .split("environments ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("run id of env A");
    a.strip_suffix("-a")
        .expect("env A's id ends in -a")
        .to_string()
}

/// Everything the three sides could have left, listed from the host side; empty means clean.
fn leftovers(tb: &Testbed, id: &str, tenant: &str, repo: &str) -> String {
    let mut script = String::new();
    for side in ["a", "b", "ref"] {
        let r = format!("{id}-{side}");
        script.push_str(&format!(
            r#"l=io.cyclix.run={r}
podman ps -a -q --filter label=$l; podman pod ls -q --filter label=$l
podman network ls -q --filter label=$l; podman volume ls -q --filter label=$l
podman secret ls --format '{{{{.Name}}}}' | grep -e "cyclix-{r}" || true
systemctl --user list-units --all --no-legend 'cyclix-{r}*'
ls $XDG_RUNTIME_DIR/containers/systemd/ $XDG_RUNTIME_DIR/systemd/user/ 2>/dev/null | grep {r} || true
ls -d ~/.local/share/cyclix/worktrees/{tenant}/{r} $XDG_RUNTIME_DIR/cyclix/runs/{r} 2>/dev/null || true
grep -l {r} $XDG_RUNTIME_DIR/cyclix/subnets/* 2>/dev/null || true
"#
        ));
    }
    script.push_str(&format!(
        "git -C {repo} branch --list 'cyclix/{tenant}/{id}*'\n\
         git -C {repo} worktree list --porcelain | grep -e '^worktree ' | grep -v -x \"worktree $(cd {repo} && pwd)\" || true\n\
         {} leftovers | grep -e {id} || true\n",
        tb.cyclix_bin()
    ));
    expect_success(&tb.user_sh(&script), "list leftovers")
}

fn twin(tb: &Testbed, tenant: &str, json: bool) -> std::process::Output {
    let c = tb.cyclix_bin();
    tb.user_sh(&format!(
        "{c} twin {tenant}{}",
        if json { " --json" } else { "" }
    ))
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

#[test]
fn twin_demo_passes_with_identical_results_distinct_networks_and_nothing_left() {
    let _shared = crate::common::testbed::shared();
    let tb = demo_ready();
    let out = twin(tb, "demo", true);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).expect("the report is JSON");
    assert_eq!(r["schema"], "cyclix-twin/1");
    assert_eq!(r["verdict"]["passed"], true, "{r:#}");
    let id = twin_id(&stderr);
    let sides = r["sides"].as_array().expect("sides");
    let labels: Vec<&str> = sides.iter().filter_map(|s| s["label"].as_str()).collect();
    assert_eq!(labels, ["A", "B", "reference"]);
    // The demo's test fails at base (the agent fixes it): every side fails it identically.
    for s in sides {
        assert_eq!(s["error"], serde_json::Value::Null, "{s:#}");
        assert_eq!(s["leftovers"].as_array().map(Vec::len), Some(0), "{s:#}");
        assert_eq!(s["suite"]["exit"], 1, "{s:#}");
        assert_eq!(s["suite"]["results"]["contract"], "junit", "{s:#}");
        let tests = s["suite"]["results"]["tests"].as_array().expect("tests");
        let outcome = |name: &str| {
            tests
                .iter()
                .find(|t| t["name"] == name)
                .map(|t| t["outcome"].as_str().unwrap_or("").to_string())
        };
        assert_eq!(
            outcome("tests.test_calc::test_subtract").as_deref(),
            Some("failed"),
            "{s:#}"
        );
        assert_eq!(
            outcome("tests.test_calc::test_add").as_deref(),
            Some("passed")
        );
    }
    assert_eq!(sides[0]["suite"], sides[1]["suite"]);
    assert_eq!(sides[0]["suite"]["results"], sides[2]["suite"]["results"]);
    // Both proven by the probes, each on its own network and subnet, up at the same time.
    for s in &sides[..2] {
        assert!(s["probes_passed"].as_u64().unwrap_or(0) > 10, "{s:#}");
        assert_eq!(s["probe_failures"].as_array().map(Vec::len), Some(0));
    }
    assert_eq!(sides[0]["run_id"], format!("{id}-a"));
    assert_eq!(sides[1]["run_id"], format!("{id}-b"));
    assert_eq!(sides[2]["networks"], serde_json::json!(["none"]));
    assert_ne!(sides[0]["networks"], sides[1]["networks"]);
    assert_ne!(sides[0]["subnet"], sides[1]["subnet"]);
    assert!(
        sides[0]["subnet"]
            .as_str()
            .is_some_and(|s| s.starts_with("10.213."))
    );
    assert_eq!(r["shared"].as_array().map(Vec::len), Some(0), "{r:#}");
    assert!(r["names_compared"].as_u64().unwrap_or(0) > 20, "{r:#}");
    assert!(r["overlap_ms"].as_u64().is_some_and(|o| o > 0), "{r:#}");
    let rows = r["verdict"]["rows"].as_array().expect("rows");
    assert!(rows.len() >= 2 && rows.iter().all(|row| row["differs"] == false));
    let left = leftovers(tb, &id, "demo", "~/.local/share/cyclix/demo/project");
    assert!(left.trim().is_empty(), "left behind by twin {id}:\n{left}");

    // The human report: the three sides side by side, the same row everywhere, PASS.
    let out = twin(tb, "demo", false);
    let report = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{report}\n{}",
        text(&out.stderr)
    );
    assert!(report.contains("env A") && report.contains("env B") && report.contains("reference"));
    let row = report
        .lines()
        .find(|l| l.contains("tests.test_calc::test_subtract"))
        .unwrap_or_else(|| panic!("no row for test_subtract:\n{report}"));
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        [
            "tests.test_calc::test_subtract",
            "failed",
            "failed",
            "failed"
        ],
        "{report}"
    );
    assert!(report.contains("verdict: PASS"), "{report}");
    let id = twin_id(&text(&out.stderr));
    let left = leftovers(tb, &id, "demo", "~/.local/share/cyclix/demo/project");
    assert!(left.trim().is_empty(), "left behind by twin {id}:\n{left}");
}

#[test]
fn a_nondeterministic_project_fails_the_twin_and_the_report_names_the_differing_test() {
    let _shared = crate::common::testbed::shared();
    let tb = demo_ready();
    // Passes only where the run id ends in `-a`: environment A, never B or the reference. The
    // gate sees its own run id in CYCLIX_RUN, so the two environments always disagree.
    let t = Tenant::new("tw-flaky")
        .file(
            "tests/test_env.py",
            "import os\n\n\ndef test_depends_on_the_environment():\n    assert os.environ[\"CYCLIX_RUN\"].endswith(\"-a\")\n",
        )
        .gate_quick(JUNIT_QUICK)
        .write(tb);
    let out = twin(tb, &t, false);
    let (report, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{report}\n{stderr}");
    let row = report
        .lines()
        .find(|l| l.contains("test_depends_on_the_environment"))
        .unwrap_or_else(|| panic!("no row for the flaky test:\n{report}"));
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        [
            "*",
            "tests.test_env::test_depends_on_the_environment",
            "passed",
            "failed",
            "failed",
            "<-",
            "differs"
        ],
        "{report}"
    );
    assert!(
        report.contains(
            "[results] tests.test_env::test_depends_on_the_environment: A passed, B failed, reference failed"
        ),
        "{report}"
    );
    assert!(report.contains("[counts]"), "{report}");
    // Only that test differs: the demo's own tests agree.
    let sub = report
        .lines()
        .find(|l| l.contains("tests.test_calc::test_subtract"))
        .expect("row");
    assert!(!sub.contains("differs"), "{report}");
    assert!(report.contains("verdict: FAIL"), "{report}");
    assert!(
        report.contains("leftovers") && !report.contains("[leftover]"),
        "{report}"
    );
    let id = twin_id(&stderr);
    let left = leftovers(tb, &id, &t, &format!("~/src/{t}"));
    assert!(left.trim().is_empty(), "left behind by twin {id}:\n{left}");
}

#[test]
fn a_quick_suite_that_cannot_start_is_a_build_error_and_leaves_nothing() {
    let _shared = crate::common::testbed::shared();
    let tb = demo_ready();
    let t = Tenant::new("tw-badargv")
        .gate_quick("[/nonexistent/quick-suite, --fast]")
        .write(tb);
    let out = twin(tb, &t, true);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).expect("the report is JSON");
    assert_eq!(r["verdict"]["passed"], false);
    let failures = r["verdict"]["failures"].as_array().expect("failures");
    let builds: Vec<&str> = failures
        .iter()
        .filter(|f| f["class"] == "build")
        .filter_map(|f| f["detail"].as_str())
        .collect();
    assert_eq!(builds.len(), 3, "{failures:#?}");
    for (who, d) in ["env A", "env B", "reference"].iter().zip(&builds) {
        assert!(d.starts_with(who), "{d}");
        assert!(d.contains("the quick suite could not start (exit "), "{d}");
        assert!(d.contains("gate.quick"), "{d}");
    }
    assert!(builds[0].contains("phase quick"), "{}", builds[0]);
    // Both environments were still built and proven before the suite failed to start.
    for s in &r["sides"].as_array().expect("sides")[..2] {
        assert!(s["probes_passed"].as_u64().unwrap_or(0) > 10, "{s:#}");
        assert_eq!(s["leftovers"].as_array().map(Vec::len), Some(0), "{s:#}");
    }
    assert!(
        !failures.iter().any(|f| f["class"] == "leftover"),
        "{failures:#?}"
    );
    let id = twin_id(&stderr);
    let left = leftovers(tb, &id, &t, &format!("~/src/{t}"));
    assert!(left.trim().is_empty(), "left behind by twin {id}:\n{left}");
}

/// A `PostgreSQL` service with its data volume and a readiness check.
const POSTGRES: &str = "  - name: db
    image: localhost/cyclix-postgres:latest
    unpinned_local_image: true
    data: /var/lib/postgresql/data
    health:
      command: [sh, -c, \"pg_isready -q -h 127.0.0.1 -p \\\"${PGPORT}\\\"\"]
      interval: 1s
      retries: 60";

#[test]
fn a_twin_with_a_database_service_gives_each_environment_its_own_port_database_and_volume() {
    let _shared = crate::common::testbed::shared();
    let tb = demo_ready();
    // The agent's variable is set nowhere: no agent runs in a twin, so it must not be asked
    // for (issue 19, item 4).
    let t = Tenant::new("tw-svc")
        .gate_quick(JUNIT_QUICK)
        .services(POSTGRES)
        .agent_key("env: [TW_AGENT_ONLY_TOKEN]")
        .write(tb);
    let out = twin(tb, &t, true);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let r: serde_json::Value = serde_json::from_str(&stdout).expect("the report is JSON");
    assert_eq!(r["verdict"]["passed"], true, "{r:#}");
    // The service's port, database name and data volume are identity values of each plan:
    // compared, and none shared.
    assert_eq!(r["shared"].as_array().map(Vec::len), Some(0), "{r:#}");
    assert!(r["names_compared"].as_u64().unwrap_or(0) > 50, "{r:#}");
    let id = twin_id(&stderr);
    let left = leftovers(tb, &id, &t, &format!("~/src/{t}"));
    assert!(left.trim().is_empty(), "left behind by twin {id}:\n{left}");
}
