//! `install` and the drift check through their seams (issue 32 item 6): the templates' source
//! ([`Templates`]: written for the user, or the Debian package's in a directory of the test's),
//! this binary's path, and the user manager ([`FakeUnitManager`]). A tenant with a schedule and
//! `notify:`: its timer drop-in, its notify drop-in and its timer's enablement are what the spec
//! needs, in both cases; the templates, man pages, completion and schema only without the package.

use std::path::{Path, PathBuf};

use super::packaged::{TEMPLATE_NAMES, Templates};
use super::{docs, drift, install_with};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::systemd::NextElapse;
use crate::systemd::fake::{Call, FakeUnitManager};

const BIN: &str = "/home/u/.cargo/bin/cyclix";

fn env(tmp: &Path) -> HostEnv {
    HostEnv {
        home: tmp.to_path_buf(),
        runtime_dir: None,
        config_home: tmp.join("config"),
        data_home: tmp.join("data"),
        state_home: tmp.join("state"),
        config_file: None,
    }
}

/// Tenant `acme`: a schedule and `notify:`, its repository a real git repository.
fn tenant(env: &HostEnv, tmp: &Path) {
    let repo = tmp.join("repo");
    crate::git::Git::init_repo(&repo, &[("a", "a\n")], "base").expect("repo");
    let spec = env.layout().tenant_spec("acme");
    std::fs::create_dir_all(spec.parent().expect("dir")).expect("tenants dir");
    std::fs::write(
        &spec,
        format!(
            "tenant: acme\nrepo: {{ path: {}, base: main }}\ntask: {{ text: t }}\nagent:\n  image: localhost/cyclix-agent-python:latest\n  unpinned_local_image: true\n  command: [\"true\"]\ngate:\n  image: localhost/cyclix-agent-python:latest\n  unpinned_local_image: true\n  command: [\"true\"]\nschedule:\n  on_calendar: \"*-*-* 02:00:00\"\nnotify:\n  command: [\"true\"]\n",
            repo.display()
        ),
    )
    .expect("spec");
}

/// A fake manager whose `acme` timer has a next elapse (it would fire).
fn manager() -> FakeUnitManager {
    let fake = FakeUnitManager::new();
    fake.set_next_elapse(
        "cyclix-run@acme.timer",
        NextElapse {
            realtime_us: Some(4_000_000_000_000_000),
            monotonic_us: None,
        },
    );
    fake
}

/// What the manager's `EnableUnitFiles` leaves in the user unit directory for the timer (the
/// fake records the call only).
fn enablement_link(unit_dir: &Path) {
    let wants = unit_dir.join("timers.target.wants");
    std::fs::create_dir_all(&wants).expect("wants");
    std::fs::write(wants.join("cyclix-run@acme.timer"), "").expect("link");
}

fn files_below(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
        {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).expect("below").to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn drift_lines(env: &HostEnv, source: &Templates) -> Vec<String> {
    drift::drift_with(env, source)
        .expect("drift")
        .into_iter()
        .map(|d| d.what)
        .collect()
}

#[test]
fn with_the_package_install_writes_only_what_the_specs_need_and_removes_the_user_copies() {
    let tmp = tempfile::tempdir().expect("tmp");
    let env = env(tmp.path());
    tenant(&env, tmp.path());
    let unit_dir = env.layout().user_units_dir();
    // An earlier install without the package: its templates and docs for the user.
    let before = Templates::Written { bin: BIN.into() };
    let fake = manager();
    let first = install_with(&env, None, &before, BIN, || Ok(&fake)).expect("install");
    assert_eq!(first, Outcome::Ok);
    for name in TEMPLATE_NAMES {
        assert!(
            unit_dir.join(name).is_file(),
            "{name} written without the package"
        );
    }
    let user_docs: Vec<PathBuf> = docs::files(&env, "/")
        .expect("docs")
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert!(user_docs.iter().all(|p| p.is_file()));
    enablement_link(&unit_dir);
    assert_eq!(drift_lines(&env, &before), Vec::<String>::new());

    // The package is installed: its templates in its own directory.
    let pkg = tmp.path().join("usr-lib-systemd-user");
    std::fs::create_dir_all(&pkg).expect("pkg dir");
    for name in TEMPLATE_NAMES {
        std::fs::write(pkg.join(name), "# the package's\n").expect("template");
    }
    let source = Templates::detect(&pkg, BIN.into());
    assert_eq!(source, Templates::Packaged { dir: pkg.clone() });
    let drift = drift_lines(&env, &source);
    assert_eq!(drift.len(), TEMPLATE_NAMES.len(), "{drift:#?}");
    for name in TEMPLATE_NAMES {
        assert!(
            drift.iter().any(|l| l.starts_with(&format!("{name} in "))
                && l.contains("shadows the package's")
                && l.ends_with("install removes it")),
            "{name}: {drift:#?}"
        );
    }

    let fake = manager();
    let got =
        install_with(&env, None, &source, BIN, || Ok(&fake)).expect("install with the package");
    assert_eq!(got, Outcome::Ok);
    // What the spec needs: the timer's schedule and the notify drop-in, and the timer enabled
    // and started. Nothing else below the user unit directory.
    assert_eq!(
        files_below(&unit_dir),
        [
            PathBuf::from("cyclix-run@acme.service.d/notify.conf"),
            PathBuf::from("cyclix-run@acme.timer.d/schedule.conf"),
            PathBuf::from("timers.target.wants/cyclix-run@acme.timer"),
        ]
    );
    assert!(
        std::fs::read_to_string(unit_dir.join("cyclix-run@acme.timer.d/schedule.conf"))
            .expect("drop-in")
            .contains("OnCalendar=*-*-* 02:00:00")
    );
    let calls = fake.calls();
    assert!(
        calls.contains(&Call::EnableUnitFiles(vec!["cyclix-run@acme.timer".into()])),
        "{calls:?}"
    );
    assert!(
        calls
            .iter()
            .any(|c| matches!(c, Call::Start { unit, .. } if unit == "cyclix-run@acme.timer")),
        "{calls:?}"
    );
    // No man page, completion or schema for the user: the package's are in /usr/share.
    assert!(
        user_docs.iter().all(|p| !p.exists()),
        "{:?}",
        files_below(&env.data_home)
    );
    // The package's own templates are not touched.
    for name in TEMPLATE_NAMES {
        assert_eq!(
            std::fs::read_to_string(pkg.join(name)).expect("template"),
            "# the package's\n"
        );
    }
    // The drift check agrees: nothing left to change.
    assert_eq!(drift_lines(&env, &source), Vec::<String>::new());

    // Installing again changes nothing.
    let fake = manager();
    let again =
        install_with(&env, Some("acme"), &source, BIN, || Ok(&fake)).expect("install again");
    assert_eq!(again, Outcome::Ok);
    assert_eq!(files_below(&unit_dir).len(), 3);
    assert!(files_below(&env.data_home).is_empty());
}

#[test]
fn without_the_package_install_writes_the_templates_and_docs_as_before() {
    let tmp = tempfile::tempdir().expect("tmp");
    let env = env(tmp.path());
    tenant(&env, tmp.path());
    let unit_dir = env.layout().user_units_dir();
    // A directory without the package's run template: not the package.
    let empty = tmp.path().join("no-package");
    std::fs::create_dir_all(&empty).expect("dir");
    let source = Templates::detect(&empty, BIN.into());
    assert_eq!(source, Templates::Written { bin: BIN.into() });
    let drift = drift_lines(&env, &source);
    for name in TEMPLATE_NAMES {
        assert!(
            drift.contains(&format!("{name} is not installed: install writes it")),
            "{name}: {drift:#?}"
        );
    }
    let fake = manager();
    let got = install_with(&env, None, &source, BIN, || Ok(&fake)).expect("install");
    assert_eq!(got, Outcome::Ok);
    let run = std::fs::read_to_string(unit_dir.join("cyclix-run@.service")).expect("template");
    assert!(
        run.contains(&format!("ExecStart=\"{BIN}\" run %i")),
        "{run}"
    );
    assert!(
        std::fs::read_to_string(unit_dir.join("cyclix-notify@.service"))
            .expect("notify template")
            .contains(BIN)
    );
    for name in TEMPLATE_NAMES {
        assert!(unit_dir.join(name).is_file(), "{name}");
    }
    for f in docs::files(&env, BIN).expect("docs") {
        assert_eq!(
            std::fs::read(&f.path).expect("doc"),
            f.contents,
            "{}",
            f.path.display()
        );
    }
    enablement_link(&unit_dir);
    assert_eq!(drift_lines(&env, &source), Vec::<String>::new());
}
