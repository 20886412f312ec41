//! Services in a pooled environment (issue 16) on the real stack: the fill starts the
//! services that need no secret and no work tree (`PostgreSQL` here, healthy, its database and
//! volume the environment's own) and reserves every service's port under the environment's id;
//! a service that runs the work tree or whose image the run builds is only installed, and the
//! claiming run starts it as a cold run would. A process left in a pooled service before the claim is refused and the run takes
//! the next environment.

use crate::common::run::{leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};
use crate::e2e_pool::{drain, fill};

/// A poolable database, an app that serves the work tree and a service whose image the run
/// builds (neither poolable).
const SERVICES: &str = "  - name: db
    image: localhost/cyclix-postgres:latest
    unpinned_local_image: true
    data: /var/lib/postgresql/data
    health:
      command: [sh, -c, \"pg_isready -q -h 127.0.0.1 -p \\\"${PGPORT}\\\"\"]
      interval: 1s
      retries: 60
  - name: app
    image: localhost/cyclix-agent-python:latest
    unpinned_local_image: true
    worktree: read_only
    command: [sh, -c, \"exec python3 -m http.server \\\"${CYCLIX_PORT}\\\" --bind 127.0.0.1\"]
    health:
      command: [python3, -c, \"import os, urllib.request as u; u.urlopen('http://127.0.0.1:' + os.environ['CYCLIX_PORT'] + '/marker.txt')\"]
      interval: 1s
      retries: 60
  - name: tool
    build: { containerfile: Containerfile.tool }
    command: [sleep, infinity]";

/// The built service's image (built by the run, from its base commit).
const TOOL: &str = "FROM docker.io/library/debian:trixie\n";

/// The agent: writes to the run's database and reads the work tree's marker through the app.
const AGENT: &str = r#"set -eu
q() { psql -X -q -tA -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$CYCLIX_SERVICE_DB_PORT" -U postgres -d "$CYCLIX_SERVICE_DB_DATABASE" -c "$1"; }
q "CREATE TABLE evidence (n int)"
q "INSERT INTO evidence VALUES (42)"
db=$(q "SELECT current_database() || ' ' || sum(n) FROM evidence")
app=$(python3 -c "import os, urllib.request as u; print(u.urlopen('http://' + os.environ['CYCLIX_SERVICE_APP'] + '/marker.txt').read().decode().strip())")
printf 'db=%s app=%s\n' "$db" "$app" > evidence.txt
git add evidence.txt
git commit -qm evidence
"#;

fn tenant(tb: &Testbed, name: &str, size: u32) -> String {
    Tenant::new(name)
        .file("agent.sh", AGENT)
        .file("marker.txt", "served-from-the-work-tree\n")
        .file("Containerfile.tool", TOOL)
        .agent_cmd("[sh, /work/agent.sh]")
        .gate_cmd(r#"[sh, -c, "cat evidence.txt"]"#)
        .services(SERVICES)
        .extra_yaml(&format!("pool:\n  size: {size}"))
        .write(tb)
}

/// The state of container `c` (`running`, …), or `absent`.
fn state(tb: &Testbed, c: &str) -> String {
    let out = tb.user_sh(&format!(
        "podman container inspect --format '{{{{.State.Status}}}}' {c} 2>/dev/null || echo absent"
    ));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_pooled_environment_holds_its_database_and_the_run_starts_the_work_tree_service() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = tenant(tb, "e2e-pools", 1);
    drain(tb, &t);
    let envs = fill(tb, &t);
    assert_eq!(envs.len(), 1, "{envs:?}");
    let e = &envs[0];
    // The fill: the database up (healthy), the work tree's app not made.
    assert_eq!(state(tb, &format!("cyclix-{e}-svc-db")), "running");
    assert_eq!(state(tb, &format!("cyclix-{e}-svc-app")), "absent");
    assert_eq!(state(tb, &format!("cyclix-{e}-svc-tool")), "absent");
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    crate::e2e_boundary::assert_all_probes_pass(&rec);
    assert_eq!(rec["environment"]["pooled"], true, "{rec:#}");
    assert_eq!(rec["run_id"], e.as_str(), "{rec:#}");
    let branch = rec["branch"].as_str().expect("branch");
    let evidence = expect_success(
        &tb.user_sh(&format!("git -C ~/src/{t} show {branch}:evidence.txt")),
        "the agent's evidence",
    );
    let db = format!("cyclix_{}_{}", t.replace('-', "_"), e.replace('-', "_"));
    assert_eq!(
        evidence,
        format!("db={db} 42 app=served-from-the-work-tree\n"),
        "{rec:#}"
    );
    // The built service ran in the run, from the image the run built (its file replaced).
    let roles: Vec<&str> = rec["images"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["role"].as_str())
        .collect();
    assert!(roles.contains(&"service-tool"), "{rec:#}");
    assert_eq!(leftovers(tb, e, &t).trim(), "", "what is left of {e}");
}

#[test]
fn a_process_left_in_a_pooled_service_is_refused_at_the_claim() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = tenant(tb, "e2e-poolsp", 2);
    drain(tb, &t);
    let mut envs = fill(tb, &t);
    assert_eq!(envs.len(), 2, "{envs:?}");
    envs.sort();
    let (tampered, good) = (&envs[0], &envs[1]);
    let db = format!("cyclix-{tampered}-svc-db");
    let unit = format!("e2e-stray-{tampered}");
    // Positive control: the process is there before the claim.
    crate::e2e_pool_claim::stray(tb, &unit, &db, "sleep 1000", "sleep");
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    let _ = tb.user_sh(&format!("systemctl --user stop {unit} 2>/dev/null; true"));
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert_eq!(rec["run_id"], good.as_str(), "{rec:#}");
    assert_eq!(rec["environment"]["pooled"], true, "{rec:#}");
    let refused = rec["notices"].as_array().into_iter().flatten().any(|n| {
        n.as_str().is_some_and(|n| {
            n.starts_with(&format!(
                "pool: environment {tampered} refused at the claim"
            )) && n.contains(&format!("the service {db} runs sleep"))
        })
    });
    assert!(refused, "{rec:#}");
    assert_eq!(
        state(tb, &db),
        "absent",
        "the tampered environment is destroyed"
    );
    assert_eq!(leftovers(tb, good, &t).trim(), "", "what is left of {good}");
    assert_eq!(
        leftovers(tb, tampered, &t).trim(),
        "",
        "what is left of {tampered}"
    );
}
