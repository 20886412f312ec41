use super::*;
use crate::render::{Rendered, RenderedFile};
use crate::run::ledger::Owner;
use crate::run::seam::FakeRunHost;
use crate::systemd::fake::{Call, FakeUnitManager, loaded_inactive};

const RUN: &str = "20261202t070000-e001";

fn paths(d: &Path) -> RunPaths {
    RunPaths {
        quadlet_dir: d.join("runs").join(RUN).join("quadlet"),
        quadlet_user_dirs: vec![d.join("user-quadlet")],
        quadlet_admin_dir: Some(d.join("admin-quadlet")),
        units_dir: d.join("units"),
        run_dir: d.join("runs").join(RUN),
        worktree: d.join("worktree"),
        records_dir: None,
    }
}

fn up<'a>(p: &'a RunPaths, bin: &'a Path, pooled: bool) -> BringUp<'a> {
    BringUp {
        gvisor: None,
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
        claim_wait_s: pooled.then_some(7200),
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

fn no_files() -> Rendered {
    Rendered {
        files: Vec::new(),
        warnings: Vec::new(),
        units: names(),
    }
}

#[test]
fn units_loaded_as_installed_are_not_reloaded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (at, bin) = (paths(dir.path()), PathBuf::from("/bin/cyclix"));
    let (u, host) = (FakeUnitManager::new(), FakeRunHost::default());
    let l = &mut ledger(dir.path());
    for pooled in [false, true] {
        let reloaded = load(&up(&at, &bin, pooled), &u, &host, l, &no_files(), &[]).expect("load");
        assert!(!reloaded, "pooled {pooled}");
    }
    assert_eq!(reloads(&u), 0, "{:?}", u.calls());
    // Positive control: every unit was looked at, each time.
    let looked = u
        .calls()
        .iter()
        .filter(|c| matches!(c, Call::UnitStatus(_)))
        .count();
    assert_eq!(looked, 6, "{:?}", u.calls());
}

#[test]
fn a_stale_or_missing_unit_reloads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (at, bin) = (paths(dir.path()), PathBuf::from("/bin/cyclix"));
    let units = names();
    let l = &mut ledger(dir.path());
    let host = FakeRunHost::default();
    // A unit loaded from an older file (NeedDaemonReload: a claimed environment's file the
    // run replaced).
    let u = FakeUnitManager::new();
    u.set_status(
        &units.agent,
        crate::systemd::UnitStatus {
            need_daemon_reload: true,
            ..loaded_inactive()
        },
    );
    assert!(load(&up(&at, &bin, true), &u, &host, l, &no_files(), &[]).expect("load"));
    assert_eq!(reloads(&u), 1, "{:?}", u.calls());
    // A unit the manager has no file for: reloaded, and still refused.
    let u = FakeUnitManager::new();
    u.set_missing(&units.gate);
    let r = load(&up(&at, &bin, false), &u, &host, l, &no_files(), &[]);
    assert_eq!(reloads(&u), 1, "{:?}", u.calls());
    let e = r.expect_err("still not loaded after the reload");
    assert!(format!("{e:#}").contains("after the reload"), "{e:#}");
}

#[test]
fn the_units_of_the_quadlet_files_are_generated_installed_and_recorded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (at, bin) = (paths(dir.path()), PathBuf::from("/bin/cyclix"));
    let l = &mut ledger(dir.path());
    let (u, host) = (FakeUnitManager::new(), FakeRunHost::default());
    let files = rendered("a", "p");
    // The admin's directory for every user: generated from a copy without other users' parts.
    let admin = at.quadlet_admin_dir.clone().expect("admin dir");
    std::fs::create_dir_all(admin.join("1001")).expect("admin dir");
    let written = install(&up(&at, &bin, false), &files, l).expect("install");
    assert_eq!(
        written.len(),
        2,
        "a cold install writes every Quadlet file: {written:?}"
    );
    assert!(!load(&up(&at, &bin, false), &u, &host, l, &files, &written).expect("load"));
    let n = crate::naming::RunNames::new(RUN);
    let agent = at.units_dir.join(crate::naming::container_unit(&n.agent()));
    let proxy = at.units_dir.join(crate::naming::container_unit(&n.proxy()));
    let text = std::fs::read_to_string(&agent).expect("the agent's generated unit");
    assert!(text.starts_with("generated from cyclix-"), "{text}");
    assert!(
        l.files().any(|f| f == agent.as_path()),
        "recorded for teardown"
    );
    // The generator ran over the run's own directory, then the user's, then the admin's copy.
    let sources = format!(
        "generate_units {}:{}:{}",
        at.quadlet_dir.display(),
        at.quadlet_user_dirs[0].display(),
        at.run_dir.join("quadlet-admin").display()
    );
    let generations = |h: &FakeRunHost| h.calls().iter().filter(|c| **c == sources).count();
    assert_eq!(generations(&host), 1, "{:?}", host.calls());
    for gone in ["generated", "quadlet-admin"] {
        assert!(!at.run_dir.join(gone).exists(), "{gone} is removed");
    }
    // A claimed environment whose files the run keeps: its units are kept as installed (the
    // claim checked their digests), the generator does not run.
    let all = [
        crate::naming::container_file(&n.agent()),
        crate::naming::container_file(&n.proxy()),
    ];
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    std::fs::write(&proxy, "as the fill installed it").expect("proxy unit");
    let host = FakeRunHost::default();
    generate(&up(&at, &bin, true).target(), &host, &all, &[], l).expect("kept");
    assert_eq!(generations(&host), 0, "{:?}", host.calls());
    // The run replaced the agent's file: its unit is generated anew, the proxy's kept.
    let written = install(&up(&at, &bin, true), &rendered("a2", "p"), l).expect("install");
    assert_eq!(written, vec![all[0].to_string()]);
    generate(&up(&at, &bin, true).target(), &host, &all, &written, l).expect("agent replaced");
    assert_eq!(generations(&host), 1, "{:?}", host.calls());
    let text = std::fs::read_to_string(&agent).expect("agent unit");
    assert!(text.ends_with("a2"), "{text}");
    let text = std::fs::read_to_string(&proxy).expect("proxy unit");
    assert_eq!(text, "as the fill installed it");
    // Positive control: a cold run never installs over an existing unit.
    let e = generate(&up(&at, &bin, false).target(), &host, &all, &[], l).expect_err("exists");
    assert!(format!("{e:#}").contains("exists already"), "{e:#}");
    // A file the generator made nothing of: named, with what it said.
    let e = generate(
        &up(&at, &bin, false).target(),
        &host,
        &["x.container"],
        &[],
        l,
    )
    .expect_err("no unit");
    assert!(format!("{e:#}").contains("made no x.service"), "{e:#}");
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
    assert_eq!(
        cold.expect("install").len(),
        2,
        "a cold install writes unit files"
    );
    assert!(
        install(&up(&at, &bin, true), &rendered("a", "p"), l)
            .expect("install")
            .is_empty()
    );
    // The agent's file rendered otherwise (setup binds): replaced, its unit made anew.
    assert_eq!(
        install(&up(&at, &bin, true), &rendered("a2", "p"), l)
            .expect("install")
            .len(),
        1
    );
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

#[test]
fn the_admins_directory_is_copied_without_other_users_subdirectories() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (from, to) = (dir.path().join("users"), dir.path().join("copy"));
    let files = [
        "a.container",
        "container.d/10-all.conf",
        "1001/container.d/10-only-1001.conf",
        "1001/b.container",
        "site/1001/c.container",
    ];
    for f in files {
        let p = from.join(f);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("dir");
        std::fs::write(&p, f).expect("file");
    }
    std::os::unix::fs::symlink(from.join("a.container"), from.join("linked.container"))
        .expect("link");
    std::fs::create_dir_all(&to).expect("copy dir");
    load::copy_for_every_user(&from, &to).expect("copy");
    for kept in [
        "a.container",
        "linked.container",
        "container.d/10-all.conf",
        "site/1001/c.container",
    ] {
        assert!(to.join(kept).is_file(), "{kept} is copied");
    }
    assert!(
        !to.join("1001").exists(),
        "another user's subdirectory is left out"
    );
    // Positive control: the left-out files were there to copy.
    assert!(from.join("1001/container.d/10-only-1001.conf").is_file());
}
