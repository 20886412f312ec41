//! The gate phases over the fakes: a protected gate whose base run leaves no results, and a
//! kept base inventory against a gate that leaves none with exit 0.

use super::*;

/// [`world`] with `gate.protected: [tests/]`.
fn protected_world() -> World {
    let mut w = world();
    w.inp.spec.gate.protected = vec!["tests/".into()];
    w
}

fn run_world(w: &World, units: &FakeUnitManager, host: &FakeRunHost) -> RunRecord {
    let owner = crate::run::ledger::Owner {
        tenant: "acme".into(),
        run_id: "r1".into(),
        pid: 1,
        started_ms: 0,
        repo: w.inp.spec.repo.path.clone().into(),
    };
    let at = crate::layout::RunFiles::new(&w.dir.path().join("records"), "r1").marker();
    execute(
        &w.inp,
        Ledger::create(&at, &owner).expect("ledger"),
        units,
        host,
    )
}

#[test]
fn a_protected_gate_whose_base_run_leaves_no_results_is_setup_broken_before_the_gate() {
    let w = protected_world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 0);
    units.exit_after_start("cyclix-r1-gate-base.service", 1);
    let host = FakeRunHost::default();
    let rec = run_world(&w, &units, &host);
    assert_eq!(rec.result, RunResult::SetupBroken, "{rec:?}");
    assert!(
        rec.causes
            .iter()
            .any(|c| c.contains("no per-test results on the base tree") && c.contains("exited 1")),
        "{:?}",
        rec.causes
    );
    let names: Vec<&str> = rec.phases.iter().map(|p| p.name.as_str()).collect();
    assert!(
        names.contains(&"gate-base") && !names.contains(&"gate"),
        "{names:?}"
    );
    assert_eq!(rec.gate_exit, None);
    assert!(!started(&units).contains(&"cyclix-r1-gate.service".to_string()));
    nothing_left(&w, &rec, &host);
}

#[test]
fn a_kept_base_inventory_is_read_and_a_gate_that_leaves_no_results_with_exit_zero_is_weakened() {
    let w = protected_world();
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-r1-agent.service", 0);
    units.exit_after_start("cyclix-r1-gate.service", 0);
    let host = FakeRunHost {
        protected: vec![(
            "tests/test_x.py".into(),
            crate::git::gate_tree::Change::Deleted,
        )],
        ..Default::default()
    };
    // The fake's base tree, image id and the gate's argv: an inventory an earlier run kept.
    let kept = crate::run::gate_cache::Cached {
        version: 1,
        inputs: crate::run::gate_cache::Inputs {
            tree: "b".repeat(40),
            image: "a".repeat(64),
            argv: vec!["check".into()],
        },
        run_id: "r0".into(),
        exit: 1,
        tests: vec![crate::twin::TestCase {
            name: "t::x".into(),
            outcome: crate::twin::TestOutcome::Failed,
        }],
    };
    let records = w.dir.path().join("records");
    crate::run::gate_cache::store(
        &crate::layout::RunFiles::new(&records, "r1").gate_base_cache(),
        &kept,
    )
    .expect("kept");
    let rec = run_world(&w, &units, &host);
    assert_eq!(rec.result, RunResult::GateWeakened, "{rec:?}");
    let inv = rec.gate_inventory.as_ref().expect("inventory");
    assert_eq!(
        (inv.base.source.as_str(), inv.base.run_id.as_str()),
        ("cached", "r0")
    );
    assert_eq!(inv.results, "missing");
    assert_eq!(inv.weakened.len(), 1, "{inv:?}");
    assert_eq!(inv.weakened[0].now, crate::gate::Now::Missing);
    assert_eq!(
        rec.protected_changes[0].to_string(),
        "tests/test_x.py (deleted)"
    );
    assert!(
        !started(&units).contains(&"cyclix-r1-gate-base.service".to_string()),
        "a kept inventory runs no base gate"
    );
    let text = crate::run::record::summary(&rec);
    assert!(
        text.contains("GATE WEAKENED: t::x ran at base (failed)"),
        "{text}"
    );
    assert!(text.contains("(kept from run r0)"), "{text}");
    assert_eq!(rec.result.exit_code(), crate::exit::FINDINGS);
    nothing_left(&w, &rec, &host);
}
