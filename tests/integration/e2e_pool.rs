//! The warm pool (issue 16) on the real stack, as far as it is built: the `pool:` key and the
//! record of a run's environment. No filler makes environments yet, so a run of a tenant with
//! a pool goes cold; its record says so (environment id = run id, `pooled: false`, why), on
//! Quadlet and on the plain backend (which always goes cold), and the run is the same clean
//! run as without a pool; `cyclix status` shows the pool and that it cannot refill. A bad `pool:` key is refused by `spec validate` and by `cyclix run`
//! (nothing half-created) naming the file, line and key, with a fix.

use crate::common::run::{leftovers, prepared, record};
use crate::common::tenant::Tenant;

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
    for (backend, why) in [
        ("quadlet", "none ready: nothing fills pools yet"),
        ("plain", "plain backend (Podman < 5)"),
    ] {
        let out = tb.user(&[&tb.cyclix_bin(), "run", &t, "--backend", backend]);
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
