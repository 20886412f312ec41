//! The runner's driver over a fake [`Cluster`]: whatever phase fails, everything of the run
//! is deleted and audited, and the record names the phase and the object.

use std::cell::RefCell;

use super::*;

/// A cluster that fails the apply holding a Job named `fail_job`, and keeps what was applied
/// until `delete_run` (or for ever, with `sticky`).
struct Fake {
    fail_job: &'static str,
    sticky: bool,
    applied: RefCell<Vec<String>>,
    calls: RefCell<Vec<String>>,
}

impl Cluster for Fake {
    fn name(&self) -> &'static str {
        "fake"
    }
    fn apply(&self, objects: &[Value]) -> Result<()> {
        self.calls.borrow_mut().push("apply".into());
        self.applied
            .borrow_mut()
            .extend(objects.iter().map(crate::cluster::object_name));
        if objects
            .iter()
            .any(|o| o["kind"] == "Job" && o["metadata"]["name"] == self.fail_job)
        {
            anyhow::bail!("the fake refuses {}", crate::cluster::names(objects));
        }
        Ok(())
    }
    fn wait_available(&self, _: &str, _: &str, _: Duration) -> Result<()> {
        Ok(())
    }
    fn wait_job(&self, _: &str, _: &str, _: Duration) -> Result<JobEnd> {
        Ok(JobEnd::Failed("the fake's Jobs fail".into()))
    }
    fn log(&self, _: &str, _: &str, out: &Path, _: u64) -> Result<()> {
        std::fs::write(out, "{\"id\":\"P1\",\"verdict\":\"FAIL\"}\n")?;
        Ok(())
    }
    fn delete_run(&self, run_id: &str, _: &[String]) -> Result<()> {
        self.calls.borrow_mut().push(format!("delete {run_id}"));
        if !self.sticky {
            self.applied.borrow_mut().clear();
        }
        Ok(())
    }
    fn leftovers(&self, _: &str, _: &[String]) -> Result<Vec<String>> {
        self.calls.borrow_mut().push("audit".into());
        Ok(self.applied.borrow().clone())
    }
}

fn setup(tmp: &Path) -> (HostEnv, KubeRunArgs) {
    let repo = tmp.join("repo");
    crate::git::Git::init_repo(&repo, &[("a", "a\n")], "base").expect("repo");
    let spec = tmp.join("spec.yaml");
    std::fs::write(
        &spec,
        format!(
            "tenant: fake\nrepo: {{ path: {}, base: main }}\ntask: {{ text: t }}\nagent:\n  image: localhost/cyclix-agent-python:latest\n  unpinned_local_image: true\n  command: [\"true\"]\ngate:\n  image: localhost/cyclix-agent-python:latest\n  unpinned_local_image: true\n  command: [\"true\"]\negress: {{ allow: [allowed.example], ports: [80] }}\n",
            repo.display()
        ),
    )
    .expect("spec");
    let env = HostEnv {
        home: tmp.to_path_buf(),
        runtime_dir: None,
        config_home: tmp.join("config"),
        data_home: tmp.join("data"),
        state_home: tmp.join("state"),
        config_file: None,
    };
    let args = KubeRunArgs {
        render: crate::cli::KubeRender {
            tenant: "fake".into(),
            spec: Some(spec),
            run_id: Some("fk-1".into()),
            k8s_version: crate::render::kube::DEFAULT_K8S.into(),
            runner_image: "localhost/cyclix-runner:latest".into(),
            pod_cidr: "0.0.0.0/0".into(),
            work_size: "1Gi".into(),
        },
        repo: None,
        cluster: ClusterKind::Kubectl,
        namespace: None,
    };
    (env, args)
}

fn drive(fake: &Fake) -> (Result<Outcome>, RunRecord) {
    drive_stopped(fake, false)
}

fn drive_stopped(fake: &Fake, stopped: bool) -> (Result<Outcome>, RunRecord) {
    let tmp = tempfile::tempdir().expect("tmp");
    let (env, args) = setup(tmp.path());
    let Ok(r) = render(&env, &args.render.render_args()).expect("render") else {
        panic!("the spec renders")
    };
    let out = run_on(
        &env,
        &args,
        &r,
        fake,
        &std::sync::Arc::new(std::sync::atomic::AtomicBool::new(stopped)),
    );
    let rec = crate::run::record::latest(&env.state_home, "fake")
        .expect("read")
        .expect("a record");
    (out, rec)
}

#[test]
fn a_failed_apply_names_the_phase_and_the_object_and_everything_made_is_deleted() {
    let fake = Fake {
        fail_job: "cyclix-fk-1-agent",
        sticky: false,
        applied: RefCell::new(Vec::new()),
        calls: RefCell::new(Vec::new()),
    };
    let (out, rec) = drive(&fake);
    let err = format!("{:#}", out.expect_err("a tool failure"));
    assert!(err.contains("apply-agent"), "{err}");
    assert!(err.contains("Job/cyclix-fk-1-agent"), "{err}");
    assert_eq!(rec.failed_phase.as_deref(), Some("apply-agent"));
    assert_eq!(rec.result, RunResult::Error);
    // The proxy stage had been applied: the delete and the audit ran after the failure.
    assert_eq!(
        *fake.calls.borrow(),
        ["apply", "apply", "delete fk-1", "audit"]
    );
    assert!(rec.leftovers.is_empty());
    assert!(!rec.base_commit.is_empty(), "the bundle phase ran");
}

#[test]
fn a_failed_agent_job_skips_the_gate_and_what_the_audit_finds_left_makes_the_run_an_error() {
    let fake = Fake {
        fail_job: "none",
        sticky: true,
        applied: RefCell::new(Vec::new()),
        calls: RefCell::new(Vec::new()),
    };
    let (out, rec) = drive(&fake);
    // The agent Job failed with a failed probe: no gate, no collector were applied.
    assert!(
        !fake
            .applied
            .borrow()
            .iter()
            .any(|n| n.ends_with("-gate") || n.ends_with("-collect")),
        "{:?}",
        fake.applied.borrow()
    );
    assert!(rec.refusal.iter().any(|r| r.contains("probe")), "{rec:?}");
    // The fake kept its objects: the audit's finding is the run's error, naming them.
    let err = format!("{:#}", out.expect_err("leftovers are a failure"));
    assert_eq!(rec.failed_phase.as_deref(), Some("audit"), "{err}");
    assert!(err.contains("Job/cyclix-fk-1-agent"), "{err}");
    assert!(
        rec.leftovers
            .iter()
            .any(|l| l == "Deployment/cyclix-fk-1-proxy"),
        "{rec:?}"
    );
}

#[test]
fn a_runner_stopped_before_it_began_applies_nothing_and_still_tears_down_and_audits() {
    let fake = Fake {
        fail_job: "none",
        sticky: false,
        applied: RefCell::new(Vec::new()),
        calls: RefCell::new(Vec::new()),
    };
    let (out, rec) = drive_stopped(&fake, true);
    assert!(matches!(out, Ok(Outcome::Interrupted)), "{out:?}");
    assert_eq!(rec.result, RunResult::Interrupted);
    assert!(
        fake.applied.borrow().is_empty(),
        "{:?}",
        fake.applied.borrow()
    );
    assert_eq!(*fake.calls.borrow(), ["delete fk-1", "audit"]);
    // The same recorder as a run on systemd: the refused phase, then teardown and audit.
    let names: Vec<&str> = rec.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["bundle", "teardown", "audit"], "{:?}", rec.phases);
    assert!(
        rec.phases[0].outcome.contains("stopped by a person"),
        "{:?}",
        rec.phases[0]
    );
    assert!(
        rec.causes.iter().any(|c| c.contains("phase bundle")),
        "{:?}",
        rec.causes
    );
}
