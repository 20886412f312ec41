use super::*;
use crate::run::seam::FakeRunHost;
use crate::systemd::FakeUnitManager;
use crate::systemd::fake::Call;

fn inputs(dir: &Path, run_id: &str) -> RunInputs {
    let mut inp = crate::run::inputs::fixture(
        dir,
        run_id,
        "command: [agent]",
        "command: [check], quick: [check, --quick]",
    );
    inp.paths.records_dir = None;
    inp
}

fn twin_inputs(dir: &Path) -> TwinInputs {
    TwinInputs {
        a: inputs(dir, "t1-a"),
        b: inputs(dir, "t1-b"),
        reference: inputs(dir, "t1-ref"),
        quick: vec!["check".into(), "--quick".into()],
    }
}

fn nothing_left(dir: &Path) {
    for d in ["quadlet", "units", "wt"] {
        let n = std::fs::read_dir(dir.join(d)).map_or(0, Iterator::count);
        assert_eq!(n, 0, "files left in {d}");
    }
    let runs = std::fs::read_dir(dir.join("runs")).map_or(0, Iterator::count);
    assert_eq!(runs, 0, "run dirs left");
}

#[test]
fn both_environments_come_up_run_the_quick_suite_and_no_agent_runs() {
    let dir = tempfile::tempdir().expect("tmp");
    let t = twin_inputs(dir.path());
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-t1-a-gate.service", 0);
    units.exit_after_start("cyclix-t1-b-gate.service", 0);
    let host = FakeRunHost::default();
    let r = execute(&t, &units, &host);
    assert!(r.verdict.passed, "{}", r.text());
    assert_eq!(r.commit, "main");
    for s in &r.sides {
        assert_eq!(s.suite.as_ref().map(|x| x.exit), Some(0), "{s:?}");
        assert!(s.leftovers.is_empty(), "{s:?}");
    }
    assert!(r.overlap_ms.is_some(), "both were up at once");
    assert_ne!(r.sides[0].subnet, r.sides[1].subnet);
    assert!(r.shared.is_empty() && r.names_compared > 20);
    // The agent units were started (held in agent-wait), then stopped; never let go.
    let stopped = |u: &str| {
        units
            .calls()
            .iter()
            .any(|c| matches!(c, Call::Stop { unit, .. } if unit == u))
    };
    assert!(stopped("cyclix-t1-a-agent.service") && stopped("cyclix-t1-b-agent.service"));
    let calls = host.calls();
    for b in ["cyclix/acme/t1-a", "cyclix/acme/t1-b", "cyclix/acme/t1-ref"] {
        assert!(calls.contains(&format!("branch_delete {b}")), "{calls:?}");
    }
    // Branches go only when every side is down (`git branch -D` rewrites .git/config).
    let first_delete = calls.iter().position(|c| c.starts_with("branch_delete"));
    let last_teardown = calls
        .iter()
        .rposition(|c| c.starts_with("worktree_remove") || c.starts_with("remove_run_objects"));
    assert!(first_delete > last_teardown, "{calls:?}");
    let reference = calls
        .iter()
        .find(|c| c.starts_with("run_container "))
        .expect("the reference ran");
    for flag in [
        "--network=none",
        "--read-only",
        "--cap-drop=all",
        "CYCLIX_RESULTS=",
    ] {
        assert!(reference.contains(flag), "{flag} missing: {reference}");
    }
    assert!(
        reference.ends_with(r#"--entrypoint=["check"] localhost/a --quick"#),
        "{reference}"
    );
    assert!(!reference.contains(" -d "), "{reference}");
    nothing_left(dir.path());
}

#[test]
fn a_failing_side_still_meets_the_barriers_and_everything_is_torn_down() {
    let dir = tempfile::tempdir().expect("tmp");
    let t = twin_inputs(dir.path());
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-t1-a-gate.service", 0);
    units.exit_after_start("cyclix-t1-b-gate.service", 0);
    // Every worktree fails: both environments and the reference are build errors.
    let host = FakeRunHost {
        fail: vec!["private_repo".into()],
        ..Default::default()
    };
    let r = execute(&t, &units, &host);
    assert!(!r.verdict.passed);
    let builds: Vec<&str> = r
        .verdict
        .failures
        .iter()
        .filter(|f| f.class == twin::FailureClass::Build)
        .map(|f| f.detail.as_str())
        .collect();
    assert_eq!(builds.len(), 3, "{builds:?}");
    assert!(builds[0].contains("phase prepare"), "{builds:?}");
    nothing_left(dir.path());

    // A failed probe in one environment: the other still runs its suite, both go down.
    let dir = tempfile::tempdir().expect("tmp");
    let t = twin_inputs(dir.path());
    let units = FakeUnitManager::new();
    units.exit_after_start("cyclix-t1-a-gate.service", 0);
    units.exit_after_start("cyclix-t1-b-gate.service", 0);
    let host = FakeRunHost {
        probe_report: Some((
            1,
            "{\"id\":\"N8\",\"expect\":\"403\",\"got\":\"200\",\"verdict\":\"FAIL\"}\n{\"summary\":true,\"pass\":0,\"fail\":1}\n".into(),
        )),
        ..Default::default()
    };
    let r = execute(&t, &units, &host);
    let classes: Vec<twin::FailureClass> = r.verdict.failures.iter().map(|f| f.class).collect();
    assert!(classes.contains(&twin::FailureClass::Probe), "{}", r.text());
    // (Which environment probes first is a race; at least one gets the failing report.)
    assert!(r.sides.iter().any(|s| !s.probe_failures.is_empty()));
    for s in r.sides.iter().filter(|s| !s.probe_failures.is_empty()) {
        assert!(
            s.suite.is_none(),
            "a refused environment ran its suite: {s:?}"
        );
    }
    assert!(r.sides.iter().all(|s| s.leftovers.is_empty()));
    nothing_left(dir.path());
}

impl TwinHost for FakeRunHost {
    fn branch_delete(&self, _repo: &Path, branch: &str) -> Result<()> {
        self.calls
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .push(format!("branch_delete {branch}"));
        if self.fail.iter().any(|f| f == "branch_delete") {
            bail!("injected failure in branch_delete");
        }
        Ok(())
    }
    fn branch_exists(&self, _repo: &Path, branch: &str) -> Result<bool> {
        let calls = self.calls();
        let added = calls.iter().any(|c| c == &format!("worktree_add {branch}"));
        let deleted = calls
            .iter()
            .any(|c| c == &format!("branch_delete {branch}"))
            && !self.fail.iter().any(|f| f == "branch_delete");
        Ok(added && !deleted)
    }
    fn run_container(
        &self,
        flags: &[String],
        image: &str,
        argv: &[String],
        _deadline: Duration,
    ) -> Result<(i32, Vec<String>)> {
        self.calls
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .push(format!(
                "run_container {} {image} {}",
                flags.join(" "),
                argv.join(" ")
            ));
        if self.fail.iter().any(|f| f == "run_container") {
            bail!("injected failure in run_container");
        }
        Ok((0, self.journal.clone()))
    }
}
