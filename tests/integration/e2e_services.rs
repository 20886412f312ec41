//! Per-run services on the real stack (issue 6, item 2): a `PostgreSQL` service in the agent's
//! pod with its own database on a per-run volume, on a port cyclix picked and reserved, started
//! only once its health check passed (Quadlet `Notify=healthy`); its address in the agent's
//! context file. Each test checks the record AND the host: no volume, unit, reservation or
//! anything else of the run is left.

use crate::common::run::{inject_mid_run, leftovers, prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// What the agent does: read the service's address and database from the context file
/// (`$CYCLIX_CONTEXT`), create a table there with `psql`, read it back, and commit the evidence.
const AGENT: &str = r#"set -eu
eval "$(python3 - <<'PY'
import json, os
ctx = json.load(open(os.environ["CYCLIX_CONTEXT"]))
db = [s for s in ctx["services"] if s["name"] == "db"][0]
print(f'host={db["host"]} port={db["port"]} database={db["database"]} address={db["address"]}')
PY
)"
[ "$CYCLIX_SERVICE_DB" = "$address" ]
q() { psql -X -q -tA -v ON_ERROR_STOP=1 -h "$host" -p "$port" -U postgres -d "$database" -c "$1"; }
q "CREATE TABLE evidence (tenant text, n int)"
q "INSERT INTO evidence VALUES ('$CYCLIX_TENANT', 42)"
sum=$(q "SELECT sum(n) FROM evidence")
current=$(q "SELECT current_database()")
printf 'address=%s database=%s current_database=%s sum=%s\n' "$address" "$database" "$current" "$sum" > db-evidence.txt
git add db-evidence.txt
git commit -q -m "db evidence: $current at $address sum=$sum"
# Hold the run open HOLD s, or until the test releases it (`podman exec AGENT touch /tmp/release`).
i=0; while [ "$i" -lt "$((${HOLD:-0} * 10))" ] && [ ! -e /tmp/release ]; do sleep 0.1; i=$((i + 1)); done
"#;

/// A tenant whose repo is a clone of the demo project plus `agent.sh` ([`AGENT`]); the gate
/// shows the evidence the agent committed. `service` is the YAML of its one service.
fn tenant(tb: &Testbed, name: &str, service: &str, hold_s: u32) -> String {
    Tenant::new(name)
        .file("agent.sh", &format!("HOLD={hold_s}\n{AGENT}\n"))
        .task("\"Record evidence in the run's database.\"")
        .agent_cmd("[sh, /work/agent.sh]")
        .gate_cmd(r#"[sh, -c, "cat db-evidence.txt && grep -q ' sum=42$' db-evidence.txt"]"#)
        .gate_timeout("1m")
        .services(service)
        .write(tb)
}

/// The `PostgreSQL` service with its data volume and a `pg_isready` health check.
const POSTGRES: &str = "  - name: db
    image: localhost/cyclix-postgres:latest
    unpinned_local_image: true
    data: /var/lib/postgresql/data
    health:
      # `$`, `%` and quotes must reach podman as written (systemd would expand `${PGPORT}`).
      command: [sh, -c, \"test -n \\\"${PGPORT}\\\" && pg_isready -q -h 127.0.0.1 -p \\\"${PGPORT}\\\" && echo '100% \\\"ready\\\"'\"]
      interval: 1s
      retries: 60";

/// What `cyclix leftovers --json` ties to `run_id` (nothing, after a clean teardown).
fn leftovers_of(tb: &Testbed, run_id: &str) -> Vec<serde_json::Value> {
    let out = tb.user(&[&tb.cyclix_bin(), "leftovers", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("leftovers json: {e}: {out:?}"));
    v["leftovers"]
        .as_array()
        .expect("leftovers list")
        .iter()
        .filter(|l| l["run"].as_str() == Some(run_id) || l["name"].to_string().contains(run_id))
        .cloned()
        .collect()
}

/// The run's service as the record states it.
fn service(rec: &serde_json::Value) -> (u64, String, String) {
    let s = &rec["services"][0];
    (
        s["port"].as_u64().expect("port"),
        s["database"].as_str().expect("database").to_string(),
        s["volume"].as_str().expect("volume").to_string(),
    )
}

fn assert_clean(tb: &Testbed, rec: &serde_json::Value, tenant: &str) {
    let run_id = rec["run_id"].as_str().expect("run id");
    assert_eq!(
        rec["leftovers"].as_array().map(Vec::len),
        Some(0),
        "{rec:#}"
    );
    let left = leftovers(tb, run_id, tenant);
    assert!(left.trim().is_empty(), "left behind by {run_id}:\n{left}");
    let tied = leftovers_of(tb, run_id);
    assert!(
        tied.is_empty(),
        "`cyclix leftovers` ties to {run_id}: {tied:#?}"
    );
    let (_, _, volume) = service(rec);
    let vols = expect_success(
        &tb.user_sh(&format!("podman volume ls -q --filter name={volume}; ls $XDG_RUNTIME_DIR/cyclix/ports/ 2>/dev/null | while read p; do grep -l {run_id} $XDG_RUNTIME_DIR/cyclix/ports/$p; done; true")),
        "volume and port reservations",
    );
    assert!(
        vols.trim().is_empty(),
        "volume or port reservation left: {vols}"
    );
}

#[test]
fn a_postgres_service_gets_its_own_database_volume_and_port_and_leaves_nothing() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    // The agent holds the run open after its commit until the checks below release it (at
    // most 100 s, under the agent's 2 min timeout: the all-tenants status of a long suite takes
    // seconds). In the middle of the run (issue 19, items 3 and 5;
    // one run for all of them to save CI time): `cyclix leftovers` must tie every object of it
    // — the service, the pod's infra container and every conmon — and exit 0 (the infra conmon
    // was "untied"); `cyclix status` names the run in progress and its phase, for the tenant
    // and in the all-tenants list; `cyclix start` returns at once naming it (exit 1).
    let t = tenant(tb, "e2e-svc-pg", POSTGRES, 100);
    let c = tb.cyclix_bin();
    let run = inject_mid_run(
        tb,
        &t,
        &format!(
            "{c} leftovers > /tmp/leftovers-$run.txt 2>&1; echo \"exit=$?\" >> /tmp/leftovers-$run.txt
             {{ {c} status {t}; echo \"exit=$?\"; {c} status; {c} status --json; timeout 20 {c} start {t}; echo \"start-exit=$?\"; }} > /tmp/status-$run.txt 2>&1
             podman exec \"$a\" touch /tmp/release"
        ),
    );
    let status = expect_success(
        &tb.user_sh(&format!(
            "cat /tmp/status-{run}.txt; rm -f /tmp/status-{run}.txt"
        )),
        "cyclix status/start mid-run",
    );
    assert!(
        status.contains(&format!("run {run} in progress: phase ")),
        "{status}"
    );
    assert!(status.contains(&format!("· running {run} ·")), "{status}");
    assert!(
        status.contains(&format!("\"run_id\": \"{run}\"")),
        "{status}"
    );
    assert!(
        status.contains(&format!(
            "cyclix-run@{t}.service is busy: run {run} in progress"
        )) && status.contains("start-exit=1"),
        "{status}"
    );
    let mid = expect_success(
        &tb.user_sh(&format!(
            "cat /tmp/leftovers-{run}.txt; rm -f /tmp/leftovers-{run}.txt"
        )),
        "cyclix leftovers mid-run",
    );
    // Every object of this run is in use by it. `leftovers` looks host-wide: its exit is 1 while
    // another test's killed run waits to be converged (full run 22: e2e-svc-kill's, beside this
    // one), so the lines of this run decide, not the exit.
    let own: Vec<&str> = mid
        .lines()
        .filter(|l| l.contains(&format!("({run})")))
        .collect();
    assert!(!own.is_empty(), "{mid}");
    for l in &own {
        assert_eq!(l.split_whitespace().nth(1), Some("running"), "{l}\n{mid}");
    }
    assert!(!mid.contains("untied"), "{mid}");
    for role in ["infra", "agent", "proxy", "svc-db"] {
        assert!(
            mid.contains("(conmon): ") && mid.contains(&format!("-n cyclix-{run}-{role} ")),
            "the {role} conmon must be listed and tied:\n{mid}"
        );
    }
    let rec = record(tb, &t);
    assert_eq!(rec["result"], "passed", "{rec:#}");
    crate::e2e_boundary::assert_all_probes_pass(&rec);
    let run_id = rec["run_id"].as_str().expect("run id");
    let (port, database, volume) = service(&rec);
    assert!((20_000..=29_999).contains(&port), "picked port {port}");
    assert_eq!(
        database,
        format!("cyclix_e2e_svc_pg_{}", run_id.replace('-', "_")),
        "{rec:#}"
    );
    assert_eq!(volume, format!("cyclix-{run_id}-svc-db-data"));
    // The agent reached the database at the address of its context file and committed it.
    let evidence =
        format!("address=127.0.0.1:{port} database={database} current_database={database} sum=42");
    let subject = rec["commits"][0]["subject"].as_str().unwrap_or_default();
    assert_eq!(
        subject,
        format!("db evidence: {database} at 127.0.0.1:{port} sum=42"),
        "{rec:#}"
    );
    let branch = rec["branch"].as_str().expect("branch");
    let file = expect_success(
        &tb.user_sh(&format!("git -C ~/src/{t} show {branch}:db-evidence.txt")),
        "the committed evidence",
    );
    assert_eq!(file.trim(), evidence);
    // The gate (no network) saw it in the worktree.
    assert!(rec["gate_log"].to_string().contains(&evidence), "{rec:#}");
    // The service unit was in the run and stopped with it; its volume unit too.
    let units: Vec<&str> = rec["units"]
        .as_array()
        .expect("units")
        .iter()
        .filter_map(|u| u.as_str())
        .collect();
    for u in [
        format!("cyclix-{run_id}-svc-db.service"),
        format!("cyclix-{run_id}-svc-db-data-volume.service"),
    ] {
        assert!(units.contains(&u.as_str()), "{u} not in {units:?}");
    }
    assert_clean(tb, &rec, &t);
}

#[test]
fn two_tenants_with_services_at_once_share_no_port_database_or_network() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    // Each agent holds its run open until both agents' containers run (the test releases them
    // then), so the two runs overlap by their own marks, not by a time.
    let a = tenant(tb, "e2e-svc-a", POSTGRES, 100);
    let b = tenant(tb, "e2e-svc-b", POSTGRES, 100);
    // One systemctl call queues both start jobs; systemd runs them in parallel.
    let out = tb.user_sh(&format!(
        "systemctl --user start --no-block cyclix-run@{a}.service cyclix-run@{b}.service
         agent() {{ podman ps --filter label=io.cyclix.tenant=$1 --filter label=io.cyclix.role=agent --format '{{{{.Names}}}}' | head -1; }}
         for i in $(seq 1 1200); do
           x=$(agent {a}); y=$(agent {b}); [ -n \"$x\" ] && [ -n \"$y\" ] && break; sleep 0.1
         done
         [ -n \"$x\" ] && [ -n \"$y\" ] || {{ echo \"the two agents never ran at once: '$x' '$y'\" >&2; exit 3; }}
         podman exec $x touch /tmp/release; podman exec $y touch /tmp/release
         for i in $(seq 1 3000); do
           [ \"$(systemctl --user show -P ActiveState cyclix-run@{a}.service cyclix-run@{b}.service | grep -c activating)\" = 0 ] && break
           sleep 0.1
         done
         for u in {a} {b}; do echo \"$u=$(systemctl --user show -P Result cyclix-run@$u.service)\"; done"
    ));
    let (ra, rb) = (record(tb, &a), record(tb, &b));
    assert!(
        out.status.success()
            && String::from_utf8_lossy(&out.stdout)
                .lines()
                .all(|l| l.ends_with("=success")),
        "{out:?}\n{ra:#}\n{rb:#}"
    );
    for r in [&ra, &rb] {
        assert_eq!(r["result"], "passed", "{r:#}");
    }
    let span = |r: &serde_json::Value, phase: &str| {
        let p = r["phases"]
            .as_array()
            .expect("phases")
            .iter()
            .find(|p| p["name"] == phase)
            .unwrap_or_else(|| panic!("no phase {phase}"));
        (
            p["start_ms"].as_u64().expect("start"),
            p["end_ms"].as_u64().expect("end"),
        )
    };
    let (a0, a1) = (span(&ra, "start").0, span(&ra, "agent").1);
    let (b0, b1) = (span(&rb, "start").0, span(&rb, "agent").1);
    assert!(
        a0 < b1 && b0 < a1,
        "the runs did not overlap: a {a0}-{a1}, b {b0}-{b1}"
    );
    let (pa, da, va) = service(&ra);
    let (pb, db, vb) = service(&rb);
    assert_ne!(pa, pb, "both runs got port {pa}");
    assert_ne!(da, db, "both runs got database {da}");
    assert_ne!(va, vb, "both runs got volume {va}");
    let net = |r: &serde_json::Value| {
        r["units"]
            .as_array()
            .expect("units")
            .iter()
            .filter_map(|u| u.as_str())
            .filter(|u| u.ends_with("-network.service"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let (na, nb) = (net(&ra), net(&rb));
    assert_eq!(na.len(), 2, "{na:?}");
    assert!(
        na.iter().all(|n| !nb.contains(n)),
        "shared networks: {na:?} {nb:?}"
    );
    // Each agent worked in its own database.
    for (r, t) in [(&ra, &a), (&rb, &b)] {
        let (port, database, _) = service(r);
        assert_eq!(
            r["commits"][0]["subject"].as_str(),
            Some(format!("db evidence: {database} at 127.0.0.1:{port} sum=42").as_str()),
            "{r:#}"
        );
        assert_clean(tb, r, t);
    }
}

#[test]
fn a_service_that_never_gets_healthy_fails_the_run_in_start_naming_it() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = tenant(
        tb,
        "e2e-svc-sick",
        "  - name: db
    image: localhost/cyclix-postgres:latest
    unpinned_local_image: true
    data: /var/lib/postgresql/data
    health: { command: [pg_isready, -q, -h, 127.0.0.1, -p, \"1\"], interval: 1s, timeout: 2s, retries: 3 }",
        0,
    );
    let out = start(tb, &t);
    assert!(!out.status.success(), "the run unit must fail");
    let status = expect_success(
        &tb.user(&[
            "systemctl",
            "--user",
            "show",
            "-P",
            "ExecMainStatus",
            &format!("cyclix-run@{t}.service"),
        ]),
        "ExecMainStatus",
    );
    assert_eq!(
        status.trim(),
        "2",
        "cyclix run must exit 2 (the run could not start)"
    );
    let rec = record(tb, &t);
    assert_eq!(rec["result"], "error", "{rec:#}");
    assert_eq!(rec["failed_phase"], "start", "{rec:#}");
    let error = rec["error"].as_str().unwrap_or_default();
    let run_id = rec["run_id"].as_str().expect("run id");
    for want in [
        format!("service `db` (cyclix-{run_id}-svc-db.service) never became healthy"),
        "pg_isready -q -h 127.0.0.1 -p 1".to_string(),
        "services[0].health.retries".to_string(),
        format!("journalctl --user -u cyclix-{run_id}-svc-db.service"),
    ] {
        assert!(error.contains(&want), "the error lacks `{want}`: {error}");
    }
    // Within its deadline: 3 failed checks a second apart, not the unit's start budget.
    let (s0, s1) = rec["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .find(|p| p["name"] == "start")
        .map(|p| {
            (
                p["start_ms"].as_u64().unwrap_or(0),
                p["end_ms"].as_u64().unwrap_or(0),
            )
        })
        .expect("start phase");
    assert!(s1 - s0 < 30_000, "the start phase took {} ms", s1 - s0);
    assert_eq!(
        rec["agent_exit"],
        serde_json::Value::Null,
        "the agent never ran"
    );
    assert_clean(tb, &rec, &t);
}

#[test]
fn the_plain_backend_waits_for_the_health_check_and_cleans_up_the_same_way() {
    // Podman < 5 has no `--sdnotify=healthy`: the plain units' ExecStartPost= runs the check
    // (forced here on podman 5 to run the same lifecycle).
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = tenant(tb, "e2e-svc-plain", POSTGRES, 0);
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t, "--backend", "plain"]);
    let rec = record(tb, &t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    let (port, database, _) = service(&rec);
    assert_eq!(
        rec["commits"][0]["subject"].as_str(),
        Some(format!("db evidence: {database} at 127.0.0.1:{port} sum=42").as_str()),
        "{rec:#}"
    );
    assert_clean(tb, &rec, &t);

    let t = tenant(
        tb,
        "e2e-svc-plainsick",
        "  - name: db
    image: localhost/cyclix-postgres:latest
    unpinned_local_image: true
    data: /var/lib/postgresql/data
    health: { command: [\"false\"], interval: 1s, retries: 2 }",
        0,
    );
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t, "--backend", "plain"]);
    let rec = record(tb, &t);
    assert_eq!(out.status.code(), Some(2), "{out:?}\n{rec:#}");
    assert_eq!(rec["failed_phase"], "start", "{rec:#}");
    let error = rec["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("service `db`") && error.contains("health check `false`"),
        "{error}"
    );
    assert_clean(tb, &rec, &t);
}

#[test]
fn a_run_killed_with_its_service_up_is_converged_volume_and_port_included() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = tenant(tb, "e2e-svc-kill", POSTGRES, 60);
    // SIGKILL cyclix once the service is healthy and the agent holds the run open.
    let dead = inject_mid_run(
        tb,
        &t,
        &format!(
            "for i in $(seq 1 150); do podman healthcheck run cyclix-$run-svc-db >/dev/null 2>&1 && break; sleep 0.2; done
             systemctl --user kill --signal=SIGKILL --kill-whom=main cyclix-run@{t}.service"
        ),
    );
    assert!(!dead.is_empty(), "no run id");
    let volume = format!("cyclix-{dead}-svc-db-data");
    let before = leftovers_of(tb, &dead);
    let kinds: Vec<&str> = before.iter().filter_map(|l| l["kind"].as_str()).collect();
    for kind in ["volume", "port-reservation", "subnet-reservation"] {
        assert!(
            kinds.contains(&kind),
            "no {kind} left to converge: {before:#?}"
        );
    }
    assert!(
        before
            .iter()
            .filter(|l| l["kind"] == "volume")
            .all(|l| l["name"] == volume.as_str() && l["status"] == "dead-run"),
        "{before:#?}"
    );
    // The next run of the tenant finishes the dead run's teardown first.
    expect_success(
        &tb.user_sh(&format!(
            "cd ~/src/{t} && sed -i 's/^HOLD=60$/HOLD=0/' agent.sh && git -c user.name=t -c user.email=t@t commit -qam 'no hold'"
        )),
        "stop holding",
    );
    let out = start(tb, &t);
    let rec = record(tb, &t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert!(
        rec["notices"]
            .to_string()
            .contains(&format!("converged run {dead}")),
        "{rec:#}"
    );
    let after = leftovers_of(tb, &dead);
    assert!(after.is_empty(), "the dead run still left: {after:#?}");
    let left = leftovers(tb, &dead, &t);
    assert!(left.trim().is_empty(), "the dead run still left:\n{left}");
    assert_clean(tb, &rec, &t);
}
