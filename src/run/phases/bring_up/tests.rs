use super::*;
use crate::render::{Rendered, RenderedFile};
use crate::run::ledger::Owner;
use crate::systemd::fake::{Call, FakeUnitManager, loaded_inactive};

const RUN: &str = "20261202t070000-e001";

fn paths(d: &Path) -> RunPaths {
    RunPaths {
        quadlet_dir: d.join("quadlet"),
        units_dir: d.join("units"),
        run_dir: d.join("runs").join(RUN),
        worktree: d.join("worktree"),
        records_dir: None,
    }
}

fn up<'a>(p: &'a RunPaths, bin: &'a Path, pooled: bool) -> BringUp<'a> {
    BringUp {
        run_id: RUN,
        paths: p,
        cyclix_bin: bin,
        tier: Tier::Container,
        services: &[],
        start: Duration::from_secs(5),
        secrets: &[],
        placeholders: &[],
        log_key: "k",
        pooled,
    }
}

fn ledger(d: &Path) -> Ledger {
    let owner = Owner {
        tenant: "acme".into(),
        run_id: RUN.into(),
        pid: 1,
        started_ms: 0,
        repo: d.join("repo"),
    };
    Ledger::create(&d.join("records").join(format!("{RUN}.running")), &owner).expect("ledger")
}

fn names() -> render::plan::UnitNames {
    let n = crate::naming::RunNames::new(RUN);
    let unit = |c: &str| crate::naming::container_unit(c);
    render::plan::UnitNames {
        infra: vec![unit(&n.proxy())],
        agent: unit(&n.agent()),
        gate: unit(&n.gate()),
        gate_base: None,
        all: vec![unit(&n.agent()), unit(&n.gate()), unit(&n.proxy())],
        services: Vec::new(),
    }
}

fn reloads(u: &FakeUnitManager) -> usize {
    u.calls()
        .iter()
        .filter(|c| matches!(c, Call::Reload))
        .count()
}

#[test]
fn a_claimed_environments_current_units_are_not_reloaded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (at, bin) = (paths(dir.path()), PathBuf::from("/bin/cyclix"));
    let u = FakeUnitManager::new();
    reload(
        &up(&at, &bin, true),
        &u,
        &mut ledger(dir.path()),
        &names(),
        false,
    )
    .expect("reload");
    assert_eq!(reloads(&u), 0, "{:?}", u.calls());
    // Positive control: every unit was looked at.
    let looked = u
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::UnitStatus(_)))
        .count();
    assert_eq!(looked, 3, "{:?}", u.calls());
}

#[test]
fn a_stale_unit_written_files_or_a_cold_run_reload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (at, bin) = (paths(dir.path()), PathBuf::from("/bin/cyclix"));
    let units = names();
    let l = &mut ledger(dir.path());
    // A unit whose Quadlet file changed since the last reload (NeedDaemonReload).
    let u = FakeUnitManager::new();
    u.set_status(
        &units.agent,
        crate::systemd::UnitStatus {
            need_daemon_reload: true,
            ..loaded_inactive()
        },
    );
    reload(&up(&at, &bin, true), &u, l, &units, false).expect("reload");
    assert_eq!(reloads(&u), 1, "{:?}", u.calls());
    // A unit the manager has no file for.
    let u = FakeUnitManager::new();
    u.set_missing(&units.gate);
    let r = reload(&up(&at, &bin, true), &u, l, &units, false);
    assert_eq!(reloads(&u), 1, "{:?}", u.calls());
    assert!(r.is_err(), "still not loaded after the reload: {r:?}");
    // The install wrote a unit file; a cold run.
    for (pooled, wrote) in [(true, true), (false, false)] {
        let u = FakeUnitManager::new();
        reload(&up(&at, &bin, pooled), &u, l, &units, wrote).expect("reload");
        assert_eq!(
            reloads(&u),
            1,
            "pooled {pooled} wrote {wrote}: {:?}",
            u.calls()
        );
    }
}

fn rendered(agent: &str, proxy: &str) -> Rendered {
    let n = crate::naming::RunNames::new(RUN);
    let file = |dest, name: String, contents: &str| RenderedFile {
        dest,
        name,
        contents: contents.to_string(),
    };
    Rendered {
        files: vec![
            file(
                Dest::Quadlet,
                crate::naming::container_file(&n.agent()),
                agent,
            ),
            file(
                Dest::Quadlet,
                crate::naming::container_file(&n.proxy()),
                proxy,
            ),
            file(Dest::RunDir, "context.json".into(), "{}"),
        ],
        warnings: Vec::new(),
        units: names(),
    }
}

#[test]
fn a_claimed_environments_files_are_kept_its_agent_file_replaced_any_other_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (at, bin) = (paths(dir.path()), PathBuf::from("/bin/cyclix"));
    let names = crate::naming::RunNames::new(RUN);
    let agent = at
        .quadlet_dir
        .join(crate::naming::container_file(&names.agent()));
    // The fill's files, as this run renders them: kept, nothing written that units come from.
    let l = &mut ledger(dir.path());
    let cold = install(&up(&at, &bin, false), &rendered("a", "p"), l);
    assert!(cold.expect("install"), "a cold install writes unit files");
    assert!(!install(&up(&at, &bin, true), &rendered("a", "p"), l).expect("install"));
    // The agent's file rendered otherwise (setup binds): replaced, and the units reload.
    assert!(install(&up(&at, &bin, true), &rendered("a2", "p"), l).expect("install"));
    assert_eq!(std::fs::read_to_string(&agent).expect("agent file"), "a2");
    // The proxy's (the environment's own) rendered otherwise: refused.
    let e = install(&up(&at, &bin, true), &rendered("a2", "p2"), l).expect_err("refused");
    assert!(
        format!("{e:#}").contains("differs from what this run renders"),
        "{e:#}"
    );
    // Positive control: a cold run never installs over an existing file.
    let e = install(&up(&at, &bin, false), &rendered("a2", "p"), l).expect_err("exists");
    assert!(format!("{e:#}").contains("exists already"), "{e:#}");
}
