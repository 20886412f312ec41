//! The warm pool (issue 16) on the real stack: the `pool:` key, the record of a run's
//! environment, `cyclix pool fill` and the claim. A run of a tenant whose pool is empty goes
//! cold and its record says so (environment id = run id, `pooled: false`, why), on Quadlet and
//! on the plain backend (which always goes cold). A filled environment holds no secret, canary
//! or work tree; a run claims it, adopts its id, proves the boundary on it and destroys it
//! with its teardown. A bad `pool:` key is refused by `spec validate` and by `cyclix run`
//! (nothing half-created) naming the file, line and key, with a fix.

use crate::common::run::{leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// `cyclix pool fill TENANT` (it must succeed); returns the ids of the environments it made.
pub(crate) fn fill(tb: &Testbed, tenant: &str) -> Vec<String> {
    let out = expect_success(
        &tb.user(&[&tb.cyclix_bin(), "pool", "fill", tenant]),
        "cyclix pool fill",
    );
    out.lines()
        .filter_map(|l| l.split("environment ").nth(1))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}

/// Destroys what an earlier, failed test left ready in `tenant`'s pool (`cyclix pool expire`
/// at a time far past every `max_idle`).
pub(crate) fn drain(tb: &Testbed, tenant: &str) {
    expect_success(
        &tb.user(&[
            &tb.cyclix_bin(),
            "pool",
            "expire",
            tenant,
            "--now-ms",
            "99999999999999",
        ]),
        "cyclix pool expire",
    );
}

/// The statuses `cyclix leftovers --json` gives the objects of run (or environment) `id`, and
/// whether it exited 0.
pub(crate) fn leftover_statuses(tb: &Testbed, id: &str) -> (Vec<String>, bool) {
    let out = tb.user(&[&tb.cyclix_bin(), "leftovers", "--json"]);
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("cyclix leftovers --json is JSON");
    let mut st: Vec<String> = v["leftovers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["run"] == id)
        .filter_map(|l| l["status"].as_str().map(str::to_string))
        .collect();
    st.sort();
    st.dedup();
    (st, out.status.success())
}

/// The files of state directory `state` of `tenant`'s pool (`ready`, `filling`, `claimed`,
/// `ledgers`), one a line.
pub(crate) fn pool_files(tb: &Testbed, tenant: &str, state: &str) -> String {
    let out = tb.user_sh(&format!(
        "ls $XDG_RUNTIME_DIR/cyclix/pool/{tenant}/{state}/ 2>/dev/null || true"
    ));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Whether `notices` (a record's) say that environment `env` was refused at the claim and
/// destroyed for a reason containing `what`.
pub(crate) fn refused_at_claim(notices: &[impl AsRef<str>], env: &str, what: &str) -> bool {
    notices.iter().any(|n| {
        n.as_ref().starts_with(&format!(
            "pool: environment {env} refused at the claim and destroyed"
        )) && n.as_ref().contains(what)
    })
}

/// A run's `environment` record: (`id`, `pooled`, `why_cold`).
fn environment(rec: &serde_json::Value) -> (String, bool, String) {
    let e = &rec["environment"];
    (
        e["id"].as_str().unwrap_or("").to_string(),
        e["pooled"].as_bool().unwrap_or(true),
        e["why_cold"].as_str().unwrap_or("").to_string(),
    )
}

#[test]
fn a_pool_tenant_runs_cold_and_its_record_says_why_on_both_backends() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-pool")
        .extra_yaml("pool:\n  size: 2\n  max_idle: 30m\n  warm_before: 5m")
        .write(tb);
    // A run given `--run-id` never claims (a pooled environment's id is fixed at its fill);
    // `none ready` is shown by the warm test's last run.
    let now = expect_success(&tb.user_sh("date -u +%Y%m%dt%H%M%S"), "date");
    let named = format!("{}-e2e0", now.trim());
    for (backend, why, extra) in [
        (
            "quadlet",
            "`--run-id` names the run",
            vec!["--run-id", named.as_str()],
        ),
        ("plain", "plain backend (Podman < 5)", vec![]),
    ] {
        let mut argv = vec![
            tb.cyclix_bin(),
            "run".into(),
            t.clone(),
            "--backend".into(),
            backend.into(),
        ];
        argv.extend(extra.iter().map(|s| (*s).to_string()));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let out = tb.user(&argv);
        let rec = record(tb, &t);
        assert!(out.status.success(), "{backend}: {out:?}\n{rec:#}");
        assert_eq!(rec["result"], "passed", "{backend}: {rec:#}");
        crate::e2e_boundary::assert_all_probes_pass(&rec);
        let run_id = rec["run_id"].as_str().expect("run id").to_string();
        let (id, pooled, why_cold) = environment(&rec);
        assert_eq!((id.as_str(), pooled), (run_id.as_str(), false), "{rec:#}");
        assert!(why_cold.starts_with(why), "{backend}: {why_cold}");
        let left = leftovers(tb, &run_id, &t);
        assert!(
            left.trim().is_empty(),
            "{backend}: left by {run_id}:\n{left}"
        );
    }
}

#[test]
fn a_bad_pool_key_is_refused_with_file_line_key_and_a_fix() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-poolbad")
        .extra_yaml("pool:\n  size: 9")
        .write(tb);
    // Out of the tenants directory (with `--spec`): an invalid spec there would fail every
    // other test's `check`/`install` of all tenants on this testbed.
    let spec = format!("/home/cyx/{t}.yaml");
    crate::common::testbed::expect_success(
        &tb.user_sh(&format!("mv ~/.config/cyclix/tenants/{t}.yaml {spec}")),
        "move the spec",
    );
    // The line of `size: 9` in the file as written.
    let text = crate::common::testbed::expect_success(&tb.user(&["cat", &spec]), "read spec");
    let line = text
        .lines()
        .position(|l| l == "  size: 9")
        .map(|i| i + 1)
        .expect("size line");
    let want = format!("{spec}:{line}:9: pool.size: pool size `9` is out of range");
    let out = tb.user(&[&tb.cyclix_bin(), "spec", "validate", &spec]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(err.contains(&want), "{err}");
    assert!(err.contains("fix: use a size from 0 to 8"), "{err}");
    // A run of it is refused before anything is made: no record, no run state.
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t, "--spec", &spec]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(err.contains("pool.size") && err.contains("0 to 8"), "{err}");
    let made = tb.user_sh(&format!(
        "ls ~/.local/state/cyclix/runs/{t}/ ~/.local/share/cyclix/worktrees/{t}/ 2>/dev/null | grep -v '^/\\|^$' || true"
    ));
    assert_eq!(String::from_utf8_lossy(&made.stdout).trim(), "", "{made:?}");
}

#[test]
fn a_filled_environment_holds_nothing_of_a_run_and_serves_one_warm_run() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-poolw")
        .extra_yaml("pool:\n  size: 1")
        .write(tb);
    drain(tb, &t);
    let envs = fill(tb, &t);
    assert_eq!(envs.len(), 1, "{envs:?}");
    let e = &envs[0];
    assert_eq!(pool_files(tb, &t, "ready"), *e);
    // Positive control: the environment is up (its proxy runs, its pod exists) ...
    let up = tb.user_sh(&format!(
        "podman inspect --format '{{{{.State.Status}}}}' cyclix-{e}-proxy; podman pod exists cyclix-{e} && echo pod"
    ));
    assert_eq!(
        String::from_utf8_lossy(&up.stdout).trim(),
        "running\npod",
        "{up:?}"
    );
    // ... and holds nothing of a run: no secret, an empty work tree (bound into the held agent
    // container, `e2e_pool_held`), no canary in the proxy's env.
    let held = tb.user_sh(&format!(
        "podman secret ls --format '{{{{.Name}}}}' | grep -e 'cyclix-{e}' || true
         ls -A ~/.local/share/cyclix/worktrees/{t}/{e}
         podman inspect --format '{{{{range .Config.Env}}}}{{{{println .}}}}{{{{end}}}}' cyclix-{e}-proxy | grep CYCLIX_CANARY || true"
    ));
    assert_eq!(String::from_utf8_lossy(&held.stdout).trim(), "", "{held:?}");
    // `cyclix leftovers` lists its objects as the pool's, not as leftovers (its exit status
    // also counts other tests' objects).
    assert_eq!(leftover_statuses(tb, e).0, vec!["pooled".to_string()]);
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    crate::e2e_boundary::assert_all_probes_pass(&rec);
    let (id, pooled, why_cold) = environment(&rec);
    assert_eq!(
        (id.as_str(), pooled, why_cold.as_str()),
        (e.as_str(), true, ""),
        "{rec:#}"
    );
    assert_eq!(rec["run_id"], e.as_str(), "{rec:#}");
    assert!(
        rec["environment"]["filled_ms"].as_u64().unwrap_or(0) > 0,
        "{rec:#}"
    );
    let left = leftovers(tb, e, &t);
    assert!(left.trim().is_empty(), "left by {e}:\n{left}");
    // Each environment serves one run: nothing of it is left in the pool.
    for state in ["ready", "claimed", "filling", "ledgers"] {
        assert_eq!(pool_files(tb, &t, state), "", "{state}");
    }
    // The next run finds the pool empty and goes cold, saying so.
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    let (id, pooled, why_cold) = environment(&rec);
    assert!(
        !pooled && id != *e && why_cold.starts_with("none ready"),
        "{rec:#}"
    );
}

#[test]
fn a_tampered_environment_is_refused_at_the_claim_and_the_run_goes_cold() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-poolt")
        .extra_yaml("pool:\n  size: 3")
        .write(tb);
    drain(tb, &t);
    let envs = fill(tb, &t);
    assert_eq!(envs.len(), 3, "{envs:?}");
    let (net, conf, proc) = (&envs[0], &envs[1], &envs[2]);
    let intruder = format!("e2e-intruder-{net}");
    let lodger = format!("e2e-lodger-{proc}");
    // Three tampers before the claim: a container on the internal network, an allowlist line
    // in squid.conf, a container left in the pod (a process beside the infra).
    // Each intruding container runs in a user unit of its own (`systemd-run`), so its conmon
    // outlives this call's transient unit.
    let script = format!(
        "set -e
         podman create --name {intruder} --network cyclix-{net} localhost/cyclix-agent-python:latest sleep 600 >/dev/null
         systemd-run --user --quiet --collect --unit {intruder} podman start --attach {intruder}
         echo 'acl e2e_extra dstdomain denied.example' >> $XDG_RUNTIME_DIR/cyclix/runs/{conf}/squid.conf
         podman create --name {lodger} --pod cyclix-{proc} localhost/cyclix-agent-python:latest sleep 600 >/dev/null
         systemd-run --user --quiet --collect --unit {lodger} podman start --attach {lodger}
         timeout 60 podman wait --condition=running {intruder} {lodger} >/dev/null
         echo tampered"
    );
    let done = tb.user_sh(&script);
    assert_eq!(
        String::from_utf8_lossy(&done.stdout).trim(),
        "tampered",
        "{done:?}"
    );
    // Positive controls, in a call of their own: each tamper is still in place.
    let ctl = tb.user_sh(&format!(
        "podman network inspect --format '{{{{range .Containers}}}}{{{{.Name}}}} {{{{end}}}}' cyclix-{net} | grep -qw {intruder} && echo net
         grep -q e2e_extra $XDG_RUNTIME_DIR/cyclix/runs/{conf}/squid.conf && echo conf
         podman pod inspect --format json cyclix-{proc} | grep -q '\"{lodger}\"' && podman top {lodger} comm | grep -qx sleep && echo pod"
    ));
    assert_eq!(
        String::from_utf8_lossy(&ctl.stdout).trim(),
        "net\nconf\npod",
        "{ctl:?}"
    );
    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    let _ = tb.user(&["podman", "rm", "-f", "-t", "0", &intruder, &lodger]);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    crate::e2e_boundary::assert_all_probes_pass(&rec);
    let (id, pooled, why_cold) = environment(&rec);
    assert!(!pooled && !envs.contains(&id), "{rec:#}");
    assert!(why_cold.starts_with("none ready that passed"), "{why_cold}");
    let notices: Vec<String> = rec["notices"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let refused = |env: &str, what: &str| refused_at_claim(&notices, env, what);
    assert!(refused(net, &intruder), "{notices:#?}");
    assert!(
        refused(conf, "squid.conf changed since the fill"),
        "{notices:#?}"
    );
    assert!(
        refused(proc, &format!("pod cyclix-{proc} has the containers")) && refused(proc, &lodger),
        "{notices:#?}"
    );
    for e in envs.iter().chain(std::iter::once(&id)) {
        let left = leftovers(tb, e, &t);
        assert!(left.trim().is_empty(), "left by {e}:\n{left}");
    }
    for state in ["ready", "claimed", "filling", "ledgers"] {
        assert_eq!(pool_files(tb, &t, state), "", "{state}");
    }
}

#[test]
fn a_filler_killed_mid_fill_is_converged_and_an_idle_environment_expires() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-poolk")
        .extra_yaml("pool:\n  size: 1\n  max_idle: 1m")
        .write(tb);
    drain(tb, &t);
    let killed = tb.user_sh(&format!(
        "CYCLIX_FAILPOINTS=pool.fill.started {} pool fill {t}",
        tb.cyclix_bin()
    ));
    assert!(!killed.status.success(), "{killed:?}");
    let dead = pool_files(tb, &t, "filling");
    assert_eq!(dead.lines().count(), 1, "{dead}");
    // Positive control: the half-made environment's objects exist.
    let up = tb.user_sh(&format!(
        "podman inspect --format '{{{{.State.Status}}}}' cyclix-{dead}-proxy"
    ));
    assert_eq!(
        String::from_utf8_lossy(&up.stdout).trim(),
        "running",
        "{up:?}"
    );
    // The next fill converges it (the filler is dead) and fills afresh.
    let out = tb.user(&[&tb.cyclix_bin(), "pool", "fill", &t]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert!(
        err.contains(&format!(
            "destroyed environment {dead}, left half-made by a filler that died"
        )),
        "{err}"
    );
    let left = leftovers(tb, &dead, &t);
    assert!(left.trim().is_empty(), "left by {dead}:\n{left}");
    let ready = pool_files(tb, &t, "ready");
    assert_eq!(ready.lines().count(), 1, "{ready}");
    // Idle under max_idle (1 min from now): kept; past it: destroyed.
    let now = tb.user_sh("date +%s%3N");
    let now: u128 = String::from_utf8_lossy(&now.stdout)
        .trim()
        .parse()
        .expect("ms");
    let expire = |at: u128| {
        expect_success(
            &tb.user(&[
                &tb.cyclix_bin(),
                "pool",
                "expire",
                &t,
                "--now-ms",
                &at.to_string(),
            ]),
            "cyclix pool expire",
        )
    };
    assert_eq!(expire(now + 30_000).trim(), "");
    assert_eq!(pool_files(tb, &t, "ready"), ready);
    let said = expire(now + 61_000);
    assert!(
        said.contains(&format!("environment {ready} expired")),
        "{said}"
    );
    let left = leftovers(tb, &ready, &t);
    assert!(left.trim().is_empty(), "left by {ready}:\n{left}");
    for state in ["ready", "expiring", "filling", "ledgers"] {
        assert_eq!(pool_files(tb, &t, state), "", "{state}");
    }
}

#[test]
fn no_cold_run_fill_or_warm_run_reloads_the_user_manager() {
    // Issue 33: cyclix generates a run's units itself and the manager loads them when first
    // asked: no daemon-reload (serialised host-wide, 50-100 ms) on the path of a cold run, a
    // fill, a warm run or their teardown. Seen in the manager's own journal line, which names
    // the unit of the client that asked for a reload.
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-noreload")
        .extra_yaml("pool:\n  size: 1")
        .write(tb);
    drain(tb, &t);
    let out = expect_success(
        &tb.user_sh(&format!(
            "set -e
             c=$(journalctl --user -n 0 --show-cursor -o cat | sed -n 's/^-- cursor: //p')
             systemctl --user start cyclix-run@{t}.service
             cp ~/.local/state/cyclix/runs/{t}/latest.json /tmp/{t}-cold.json
             systemd-run --user --wait --quiet --collect --unit=cyclix-e2e-fill-{t} {c} pool fill {t}
             systemctl --user start cyclix-run@{t}.service
             # Positive control: a reload asked for from a unit of a known name.
             systemd-run --user --wait --quiet --collect --unit=cyclix-e2e-reloadctl-{t} systemctl --user daemon-reload
             journalctl --user --after-cursor \"$c\" -o cat | grep '^Reload requested from client' || true",
            c = tb.cyclix_bin()
        )),
        "a cold run, a fill and a warm run",
    );
    let cold: serde_json::Value = serde_json::from_str(&expect_success(
        &tb.user_sh(&format!("cat /tmp/{t}-cold.json")),
        "the cold run's record",
    ))
    .expect("record JSON");
    let warm = record(tb, &t);
    assert_eq!(cold["result"], "passed", "{cold:#}");
    assert!(!environment(&cold).1, "the first run goes cold: {cold:#}");
    assert_eq!(warm["result"], "passed", "{warm:#}");
    assert!(environment(&warm).1, "the second run is warm: {warm:#}");
    assert!(
        out.contains(&format!("(unit cyclix-e2e-reloadctl-{t}.service)")),
        "the positive control's reload is seen with its unit: {out}"
    );
    for unit in [
        format!("cyclix-run@{t}.service"),
        format!("cyclix-e2e-fill-{t}.service"),
    ] {
        assert!(
            !out.contains(&format!("(unit {unit})")),
            "{unit} reloaded the user manager: {out}"
        );
    }
    for rec in [&cold, &warm] {
        let run = rec["run_id"].as_str().unwrap_or_default();
        let left = leftovers(tb, run, &t);
        assert!(left.trim().is_empty(), "left by {run}:\n{left}");
    }
}
