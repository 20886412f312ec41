//! The delivery orchestration over a fake [`Repo`]: where a run starts, what holds it, what
//! the lease does, and the branch lock.

use std::cell::RefCell;
use std::sync::atomic::AtomicBool;

use super::*;
use crate::run::record::RunRecord;
use anyhow::bail;

const BASE: &str = "1111111111111111111111111111111111111111";
const TIP: &str = "2222222222222222222222222222222222222222";
const RUN_TIP: &str = "3333333333333333333333333333333333333333";
const OTHER: &str = "4444444444444444444444444444444444444444";

struct Fake {
    remote_tip: RefCell<Option<String>>,
    /// (ancestor, commit) pairs that hold.
    ancestors: Vec<(&'static str, &'static str)>,
    touched: Vec<String>,
    text: Vec<u8>,
    push_reply: (bool, String, String),
    /// Where the remote is after a push that succeeds.
    pushes: RefCell<Vec<(String, String, Option<String>)>>,
}

impl Fake {
    fn new(remote_tip: Option<&str>) -> Self {
        Fake {
            remote_tip: RefCell::new(remote_tip.map(str::to_owned)),
            ancestors: vec![(BASE, TIP), (BASE, RUN_TIP), (TIP, RUN_TIP)],
            touched: vec!["calc.py".into()],
            text: b"+def subtract(a, b):\n".to_vec(),
            push_reply: (true, String::new(), String::new()),
            pushes: RefCell::new(Vec::new()),
        }
    }
}

impl Repo for Fake {
    fn push_url(&self, remote: &str) -> Result<String> {
        if remote == "origin" {
            Ok("https://user:tok@git.example/acme.git".into())
        } else {
            bail!("no remote {remote}")
        }
    }
    fn remote_tip(&self, _: &str, _: &str) -> Result<Option<String>> {
        Ok(self.remote_tip.borrow().clone())
    }
    fn fetch_tip(&self, _: &str, _: &str, tmp: &str) -> Result<String> {
        assert!(tmp.starts_with("refs/cyclix-delivery/"), "{tmp}");
        self.remote_tip.borrow().clone().context("nothing to fetch")
    }
    fn rev_parse(&self, rev: &str) -> Result<String> {
        Ok(match rev {
            "main" => BASE.into(),
            r if r.starts_with("refs/heads/cyclix/") => RUN_TIP.into(),
            r => bail!("unknown {r}"),
        })
    }
    fn is_ancestor(&self, a: &str, b: &str) -> Result<bool> {
        Ok(a == b || self.ancestors.iter().any(|(x, y)| *x == a && *y == b))
    }
    fn touched_paths(&self, _: &str, _: &str) -> Result<Vec<String>> {
        Ok(self.touched.clone())
    }
    fn delivered_text(&self, _: &str, _: &str, dir: &Path) -> Result<Vec<u8>> {
        assert!(dir.is_dir(), "the scratch dir exists during the scan");
        Ok(self.text.clone())
    }
    fn push(
        &self,
        _: &str,
        src: &str,
        branch: &str,
        expected: Option<&str>,
    ) -> Result<(bool, String, String)> {
        self.pushes
            .borrow_mut()
            .push((src.into(), branch.into(), expected.map(str::to_owned)));
        if self.push_reply.0 {
            *self.remote_tip.borrow_mut() = Some(RUN_TIP.into());
            let line = format!(" \t{src}:refs/heads/{branch}\tabc..def\nDone\n");
            return Ok((true, line, String::new()));
        }
        Ok(self.push_reply.clone())
    }
}

fn spec(branch: Option<&str>) -> Delivery {
    Delivery {
        remote: "origin".into(),
        branch: branch.map(str::to_owned),
        push: true,
        allow_paths: Vec::new(),
        hold_paths: Vec::new(),
        lock_wait_s: 0,
        allow_setup_changes: false,
    }
}

struct Env {
    dir: tempfile::TempDir,
    stop: AtomicBool,
}

fn env() -> Env {
    Env {
        dir: tempfile::tempdir().expect("tmp"),
        stop: AtomicBool::new(false),
    }
}

fn target<'a>(e: &'a Env, spec: &'a Delivery, run: &'a str, branch: &'a str) -> Target<'a> {
    Target {
        spec,
        tenant: "acme",
        run_id: run,
        base: "main",
        run_branch: branch,
        locks_dir: e.dir.path().join("locks"),
        interrupted: &e.stop,
        secrets: vec![(
            "value of secret API_TOKEN".into(),
            b"tok-0123456789-secret".as_slice(),
        )],
        scratch: e.dir.path().join(format!("scratch-{run}")),
    }
}

fn record(base: &str) -> RunRecord {
    let mut rec = RunRecord::new("acme", "r1", "container".into());
    rec.base_commit = base.into();
    rec.commits.push(crate::run::record::CommitInfo {
        sha: RUN_TIP.into(),
        subject: "Fix calc.subtract".into(),
    });
    rec
}

/// Start and deliver one run over `fake`; the record's delivery and the result.
fn run(e: &Env, spec: &Delivery, fake: &Fake) -> (DeliveryRecord, RunResult) {
    run_changing(e, spec, fake, &[])
}

/// [`run`] of a run whose commits change the setup paths `setup` (`rec.setup_changes`).
fn run_changing(
    e: &Env,
    spec: &Delivery,
    fake: &Fake,
    setup: &[&str],
) -> (DeliveryRecord, RunResult) {
    run_protected(e, spec, fake, setup, &[])
}

/// [`run_changing`] of a run whose commits also change the protected paths `protected`
/// (`rec.protected_changes`).
fn run_protected(
    e: &Env,
    spec: &Delivery,
    fake: &Fake,
    setup: &[&str],
    protected: &[&str],
) -> (DeliveryRecord, RunResult) {
    let (d, result) = run_to_result(e, spec, fake, setup, protected);
    (d, result.expect("deliver"))
}

/// [`run_protected`] that returns the delivery's error (a failed push) instead of panicking.
fn run_to_result(
    e: &Env,
    spec: &Delivery,
    fake: &Fake,
    setup: &[&str],
    protected: &[&str],
) -> (DeliveryRecord, anyhow::Result<RunResult>) {
    let t = target(e, spec, "r1", "cyclix/acme/r1");
    let start = start_with(&t, fake).expect("start");
    let base = start.base_override.clone().unwrap_or_else(|| BASE.into());
    let mut rec = record(&base);
    rec.setup_changes = setup.iter().map(|s| (*s).to_string()).collect();
    rec.protected_changes = protected
        .iter()
        .map(|p| crate::run::record::ProtectedChange {
            path: (*p).to_string(),
            change: "modified".into(),
        })
        .collect();
    let facts = rec.delivery_facts();
    let result = deliver_with(&t, start, &facts, fake, &mut rec.delivery);
    assert!(!t.scratch.exists(), "the scan's scratch files are removed");
    (rec.delivery.expect("a delivery record"), result)
}

#[test]
fn a_new_branch_is_pushed_with_a_must_not_exist_lease() {
    let e = env();
    let spec = spec(None);
    let fake = Fake::new(None);
    let t = target(&e, &spec, "r1", "cyclix/acme/r1");
    let start = start_with(&t, &fake).expect("start");
    assert_eq!(
        (start.base_override.as_deref(), start.expected.as_deref()),
        (None, None)
    );
    assert_eq!(
        start.record.url, "https://git.example/acme.git",
        "credentials never recorded"
    );
    drop(start);
    let (d, result) = run(&e, &spec, &fake);
    assert_eq!(
        (d.outcome, result),
        (Outcome::Pushed, RunResult::Passed),
        "{d:?}"
    );
    assert_eq!(d.pushed_tip.as_deref(), Some(RUN_TIP));
    assert_eq!(
        fake.pushes.borrow().last().cloned(),
        Some((RUN_TIP.into(), "cyclix/acme/r1".into(), None)),
        "the scanned commit is pushed by object name, not by the ref"
    );
    assert!(
        d.summary()
            .starts_with("pushed 333333333333 to origin cyclix/acme/r1"),
        "{}",
        d.summary()
    );
}

#[test]
fn a_fixed_branch_that_contains_the_base_is_fast_forwarded_from_its_tip() {
    let e = env();
    let spec = spec(Some("cyclix/acme/nightly"));
    let fake = Fake::new(Some(TIP));
    let t = target(&e, &spec, "r1", "cyclix/acme/r1");
    let start = start_with(&t, &fake).expect("start");
    assert_eq!(start.base_override.as_deref(), Some(TIP));
    assert_eq!(start.expected.as_deref(), Some(TIP));
    drop(start);
    let (d, result) = run(&e, &spec, &fake);
    assert_eq!(
        (d.outcome, result),
        (Outcome::Pushed, RunResult::Passed),
        "{d:?}"
    );
    assert_eq!(
        fake.pushes.borrow().last().map(|p| p.2.clone()),
        Some(Some(TIP.into())),
        "the lease names the tip the run started from"
    );
}

#[test]
fn a_fixed_branch_that_does_not_contain_the_base_is_refused_naming_both_commits() {
    let e = env();
    let spec = spec(Some("cyclix/acme/nightly"));
    let fake = Fake::new(Some(OTHER));
    let err = start_with(&target(&e, &spec, "r1", "cyclix/acme/r1"), &fake).expect_err("diverged");
    let msg = format!("{err:#}");
    assert!(msg.contains(OTHER) && msg.contains(BASE), "{msg}");
    assert!(msg.contains("fast-forwarded"), "{msg}");
}

#[test]
fn ci_paths_hold_the_delivery_unless_allowed() {
    let e = env();
    let mut spec = spec(None);
    let mut fake = Fake::new(None);
    fake.touched = vec!["calc.py".into(), ".github/workflows/ci.yml".into()];
    let (d, result) = run(&e, &spec, &fake);
    assert_eq!(
        (d.outcome, result),
        (Outcome::Held, RunResult::DeliveryRefused)
    );
    assert_eq!(d.held_paths, vec![".github/workflows/ci.yml".to_string()]);
    assert!(
        fake.pushes.borrow().is_empty(),
        "a held delivery is never pushed"
    );
    assert!(
        d.reason
            .as_deref()
            .is_some_and(|r| r.contains("allow_paths")),
        "{d:?}"
    );
    // Positive control: allowed, the same commits are pushed.
    spec.allow_paths = vec![".github/workflows/".into()];
    let (d, result) = run(&e, &spec, &fake);
    assert_eq!(
        (d.outcome, result),
        (Outcome::Pushed, RunResult::Passed),
        "{d:?}"
    );
    // The spec's own hold list holds too.
    spec.hold_paths = vec!["calc.py".into()];
    let (d, _) = run(&e, &spec, &fake);
    assert_eq!(d.held_paths, vec!["calc.py".to_string()]);
}

#[test]
fn setup_changes_hold_the_delivery_unless_allowed() {
    let e = env();
    let mut spec = spec(None);
    let mut fake = Fake::new(None);
    fake.touched = vec!["calc.py".into(), "setup.sh".into()];
    let (d, result) = run_changing(&e, &spec, &fake, &["setup.sh"]);
    assert_eq!(
        (d.outcome, result),
        (Outcome::Held, RunResult::DeliveryRefused)
    );
    assert_eq!(d.held_paths, vec!["setup.sh".to_string()]);
    assert!(
        d.reason
            .as_deref()
            .is_some_and(|r| r.contains("allow_setup_changes")),
        "{d:?}"
    );
    assert!(
        fake.pushes.borrow().is_empty(),
        "a held delivery is never pushed"
    );
    // Positive control: allowed, the same commits are pushed.
    spec.allow_setup_changes = true;
    let (d, result) = run_changing(&e, &spec, &fake, &["setup.sh"]);
    assert_eq!(
        (d.outcome, result),
        (Outcome::Pushed, RunResult::Passed),
        "{d:?}"
    );
}

#[test]
fn a_secret_in_the_delivered_text_holds_it_and_the_record_never_holds_the_value() {
    let e = env();
    let spec = spec(None);
    let mut fake = Fake::new(None);
    fake.text = b"diff --git a/cfg b/cfg\n+++ b/cfg\n+token=tok-0123456789-secret\n".to_vec();
    let t = target(&e, &spec, "r1", "cyclix/acme/r1");
    let start = start_with(&t, &fake).expect("start");
    let mut rec = record(BASE);
    let facts = rec.delivery_facts();
    let result = deliver_with(&t, start, &facts, &fake, &mut rec.delivery).expect("deliver");
    assert_eq!(result, RunResult::DeliveryRefused);
    let d = rec.delivery.clone().expect("delivery");
    assert_eq!(d.outcome, Outcome::Held);
    assert_eq!(
        d.secret_hits,
        vec![SecretHit {
            file: "cfg".into(),
            kind: "value of secret API_TOKEN".into()
        }]
    );
    let json = serde_json::to_string(&rec).expect("json");
    assert!(!json.contains("tok-0123456789"), "{json}");
    assert!(crate::run::record::summary(&rec).contains("HELD"));
    assert!(fake.pushes.borrow().is_empty());
}

#[test]
fn a_push_the_lease_refuses_is_a_finding_and_names_the_lease() {
    let e = env();
    let spec = spec(Some("cyclix/acme/nightly"));
    let mut fake = Fake::new(Some(TIP));
    fake.push_reply = (
        false,
        "To x\n!\trefs/heads/cyclix/acme/r1:refs/heads/cyclix/acme/nightly\t[rejected] (stale info)\nDone\n".into(),
        "error: failed to push some refs".into(),
    );
    let (d, result) = run(&e, &spec, &fake);
    assert_eq!(
        (d.outcome, result),
        (Outcome::Refused, RunResult::DeliveryRefused)
    );
    let why = d.reason.clone().unwrap_or_default();
    assert!(why.contains("stale info") && why.contains(TIP), "{why}");
    assert_eq!(result.exit_code(), crate::exit::FINDINGS);
    assert!(d.push_start_ms.is_some() && d.push_end_ms.is_some());
}

#[test]
fn a_tip_that_drops_the_remote_commits_is_never_pushed() {
    let e = env();
    let spec = spec(Some("cyclix/acme/nightly"));
    let mut fake = Fake::new(Some(TIP));
    fake.ancestors = vec![(BASE, TIP), (BASE, RUN_TIP)];
    let (d, result) = run(&e, &spec, &fake);
    assert_eq!(
        (d.outcome, result),
        (Outcome::Refused, RunResult::DeliveryRefused)
    );
    assert!(fake.pushes.borrow().is_empty());
}

#[test]
fn push_false_checks_everything_and_sends_nothing() {
    let e = env();
    let mut spec = spec(None);
    spec.push = false;
    let fake = Fake::new(None);
    let (d, result) = run(&e, &spec, &fake);
    assert_eq!((d.outcome, result), (Outcome::NotPushed, RunResult::Passed));
    assert!(fake.pushes.borrow().is_empty());
}

#[test]
fn one_writer_per_remote_branch_across_tenants() {
    let e = env();
    let spec = spec(Some("cyclix/shared/nightly"));
    let fake = Fake::new(None);
    let first = start_with(&target(&e, &spec, "r1", "cyclix/acme/r1"), &fake).expect("first");
    let err = start_with(&target(&e, &spec, "r2", "cyclix/acme/r2"), &fake).expect_err("busy");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("run r1 (tenant acme, pid ") && msg.contains("lock_wait"),
        "{msg}"
    );
    // Another branch on the same remote is independent (positive control).
    let other = spec_with_branch("cyclix/shared/weekly");
    let free = start_with(&target(&e, &other, "r3", "cyclix/acme/r3"), &fake).expect("other");
    drop(free);
    // A bounded wait gets the lock once the holder lets go.
    let mut waiting = spec.clone();
    waiting.lock_wait_s = 10;
    // `began` before the holder's clock starts: the wait is at least its 400 ms however
    // slowly the thread gets going.
    let began = Instant::now();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        drop(first);
    });
    let second = start_with(&target(&e, &waiting, "r2", "cyclix/acme/r2"), &fake).expect("waited");
    assert!(
        began.elapsed() >= Duration::from_millis(300),
        "it waited for the holder"
    );
    assert!(second.record.lock_wait_ms > 0, "the wait is recorded");
    release.join().expect("join");
}

fn spec_with_branch(b: &str) -> Delivery {
    spec(Some(b))
}

#[test]
fn lock_paths_depend_on_url_and_branch() {
    let d = Path::new("/l");
    assert_eq!(lock_path(d, "u", "b"), lock_path(d, "u", "b"));
    assert_ne!(lock_path(d, "u", "b"), lock_path(d, "u2", "b"));
    assert_ne!(lock_path(d, "u", "b"), lock_path(d, "u", "b2"));
    // No ambiguity from concatenation.
    assert_ne!(lock_path(d, "ab", "c"), lock_path(d, "a", "bc"));
}

#[test]
fn git_messages_quoted_in_the_record_lose_credentials_and_secret_values() {
    let e = env();
    let spec = spec(None);
    let mut fake = Fake::new(None);
    fake.push_reply = (
        false,
        String::new(),
        "remote: saw tok-0123456789-secret\nfatal: unable to access 'https://user:tok@git.example/acme.git'".into(),
    );
    // git never reached the remote: a failure of the phase (exit 2), not a refusal.
    let (d, result) = run_to_result(&e, &spec, &fake, &[], &[]);
    assert_eq!(d.outcome, Outcome::Failed);
    let err = format!("{:#}", result.expect_err("a failed push is an error"));
    let why = d.reason.unwrap_or_default();
    for text in [&why, &err] {
        assert!(text.contains("https://git.example/acme.git"), "{text}");
        assert!(
            !text.contains("user:tok@") && !text.contains("tok-0123456789"),
            "{text}"
        );
    }
}

#[test]
fn protected_changes_hold_the_delivery_unless_allow_paths_names_them() {
    let e = env();
    let mut spec = spec(None);
    let mut fake = Fake::new(None);
    fake.touched = vec!["calc.py".into(), "tests/test_calc.py".into()];
    let (d, result) = run_protected(&e, &spec, &fake, &[], &["tests/test_calc.py"]);
    assert_eq!(
        (d.outcome, result),
        (Outcome::Held, RunResult::DeliveryRefused)
    );
    assert_eq!(d.held_paths, vec!["tests/test_calc.py".to_string()]);
    assert!(
        d.reason
            .as_deref()
            .is_some_and(|r| r.contains("protected paths tests/test_calc.py")),
        "{d:?}"
    );
    assert!(fake.pushes.borrow().is_empty());
    // Positive control: `allow_paths: [tests/]` delivers the same commits.
    spec.allow_paths = vec!["tests/".into()];
    let (d, result) = run_protected(&e, &spec, &fake, &[], &["tests/test_calc.py"]);
    assert_eq!(
        (d.outcome, result),
        (Outcome::Pushed, RunResult::Passed),
        "{d:?}"
    );
}
