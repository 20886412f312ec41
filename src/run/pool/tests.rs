use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};

use super::*;
use crate::spec::Pool;

fn pool(t: &tempfile::TempDir) -> PoolState {
    PoolState::new(t.path().join("pool/acme"))
}

fn spec_pool(size: u32) -> Pool {
    Pool {
        size,
        max_idle_s: 7200,
        warm_before_s: 600,
    }
}

#[test]
fn an_environment_moves_from_filling_to_ready_to_claimed() {
    let t = tempfile::tempdir().expect("tempdir");
    let p = pool(&t);
    assert_eq!(p.counts().expect("counts"), Counts::default());
    assert_eq!(p.claim("20261202t030000-aaaa").expect("claim"), None);
    p.begin("20261202t020000-e001", "acme", 10, 1)
        .expect("begin");
    assert_eq!(p.counts().expect("counts").filling, 1);
    // Filling is not ready: no claim gets it.
    assert_eq!(p.claim("20261202t030000-aaaa").expect("claim"), None);
    let filled = p.ready("20261202t020000-e001", 20).expect("ready");
    assert_eq!((filled.began_ms, filled.ready_ms), (10, 20));
    let c = p
        .claim("20261202t030000-aaaa")
        .expect("claim")
        .expect("one");
    assert_eq!(c.filled, filled);
    assert_eq!(
        c.path,
        t.path()
            .join("pool/acme/claimed/20261202t020000-e001@20261202t030000-aaaa")
    );
    let n = p.counts().expect("counts");
    assert_eq!((n.filling, n.ready, n.claimed), (0, 0, 1));
    assert_eq!(
        p.claimed().expect("claimed"),
        [("20261202t020000-e001".to_string(), c.path.clone())]
    );
    assert_eq!(p.claim("20261202t030000-bbbb").expect("claim"), None);
    PoolState::forget(&c.path).expect("forget");
    PoolState::forget(&c.path).expect("forget twice is no error");
    assert_eq!(p.counts().expect("counts"), Counts::default());
}

#[test]
fn begin_is_exclusive_and_checks_the_id() {
    let t = tempfile::tempdir().expect("tempdir");
    let p = pool(&t);
    p.begin("20261202t020000-e001", "acme", 1, 1)
        .expect("begin");
    let e = p
        .begin("20261202t020000-e001", "acme", 2, 1)
        .expect_err("taken");
    assert!(format!("{e:#}").contains("another filler"), "{e:#}");
    let e = p.begin("../x", "acme", 1, 1).expect_err("bad id");
    assert!(format!("{e:#}").contains("environment id"), "{e:#}");
    let e = p.ready("20261202t020000-e002", 1).expect_err("never begun");
    assert!(
        format!("{e:#}").contains("filling/20261202t020000-e002"),
        "{e:#}"
    );
    let e = p.claim("Bad Run").expect_err("bad run id");
    assert!(format!("{e:#}").contains("run id"), "{e:#}");
}

#[test]
fn claims_take_the_oldest_first() {
    let t = tempfile::tempdir().expect("tempdir");
    let p = pool(&t);
    for env in ["20261202t020002-e002", "20261202t020001-e001"] {
        p.begin(env, "acme", 1, 1).expect("begin");
        p.ready(env, 2).expect("ready");
    }
    let c = p
        .claim("20261202t030000-aaaa")
        .expect("claim")
        .expect("one");
    assert_eq!(c.filled.env, "20261202t020001-e001");
}

/// 16 runs race for 5 environments, each from its own thread released by one barrier: every
/// environment goes to exactly one run, and 11 runs go cold. Repeated so a race that only
/// sometimes shows has its chances.
#[test]
fn two_concurrent_claims_never_get_the_same_environment() {
    for round in 0..20 {
        let t = tempfile::tempdir().expect("tempdir");
        let p = pool(&t);
        for i in 0..5 {
            let env = format!("20261202t02000{i}-e00{i}");
            p.begin(&env, "acme", 1, 1).expect("begin");
            p.ready(&env, 2).expect("ready");
        }
        let barrier = Arc::new(Barrier::new(16));
        let handles: Vec<_> = (0..16)
            .map(|r| {
                let (p, barrier) = (p.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    p.claim(&format!("20261202t030000-{r:04x}"))
                        .expect("claim")
                        .map(|c| c.filled.env)
                })
            })
            .collect();
        let got: Vec<String> = handles
            .into_iter()
            .filter_map(|h| h.join().expect("thread"))
            .collect();
        let unique: BTreeSet<&String> = got.iter().collect();
        assert_eq!(got.len(), 5, "round {round}: {got:?}");
        assert_eq!(
            unique.len(),
            5,
            "round {round}: one environment twice: {got:?}"
        );
        let n = p.counts().expect("counts");
        assert_eq!((n.ready, n.claimed), (0, 5), "round {round}");
    }
}

#[test]
fn a_taken_environment_cannot_be_claimed_and_is_taken_once() {
    let t = tempfile::tempdir().expect("tempdir");
    let p = pool(&t);
    p.begin("20261202t020000-e001", "acme", 0, 1)
        .expect("begin");
    p.ready("20261202t020000-e001", 1_000).expect("ready");
    assert!(p.take("20261202t020000-e001").expect("take"));
    assert!(!p.take("20261202t020000-e001").expect("taken already"));
    assert!(!p.take("20261202t020000-e009").expect("never ready"));
    let n = p.counts().expect("counts");
    assert_eq!((n.ready, n.expiring), (0, 1));
    assert!(p.expiring_path("20261202t020000-e001").exists());
    assert_eq!(p.claim("20261202t030000-aaaa").expect("claim"), None);
}

#[test]
fn an_environment_idle_past_max_idle_expires_and_cannot_be_claimed() {
    let t = tempfile::tempdir().expect("tempdir");
    let p = pool(&t);
    p.begin("20261202t020000-e001", "acme", 0, 1)
        .expect("begin");
    p.ready("20261202t020000-e001", 1_000).expect("ready");
    p.begin("20261202t020000-e002", "acme", 0, 1)
        .expect("begin");
    p.ready("20261202t020000-e002", 5_000).expect("ready");
    // max_idle 2 s: at 2.999 s nothing is past it (positive control: e001 is still ready).
    assert!(p.take_expired(2_999, 2_000).expect("expire").is_empty());
    assert_eq!(p.counts().expect("counts").ready, 2);
    let gone = p.take_expired(3_000, 2_000).expect("expire");
    assert_eq!(
        gone.iter().map(|f| f.env.as_str()).collect::<Vec<_>>(),
        ["20261202t020000-e001"]
    );
    let n = p.counts().expect("counts");
    assert_eq!((n.ready, n.expiring), (1, 1));
    // The run gets the one still fresh, never the expiring one.
    let c = p
        .claim("20261202t030000-aaaa")
        .expect("claim")
        .expect("one");
    assert_eq!(c.filled.env, "20261202t020000-e002");
    assert_eq!(p.claim("20261202t030000-bbbb").expect("claim"), None);
}

#[test]
fn a_state_file_naming_another_environment_is_refused_at_claim() {
    let t = tempfile::tempdir().expect("tempdir");
    let p = pool(&t);
    p.begin("20261202t020000-e001", "acme", 0, 1)
        .expect("begin");
    p.ready("20261202t020000-e001", 1).expect("ready");
    std::fs::rename(
        t.path().join("pool/acme/ready/20261202t020000-e001"),
        t.path().join("pool/acme/ready/20261202t020000-e009"),
    )
    .expect("rename");
    let e = p.claim("20261202t030000-aaaa").expect_err("edited");
    assert!(
        format!("{e:#}").contains("the pool state was edited"),
        "{e:#}"
    );
}

fn spec(extra: &str) -> crate::spec::Spec {
    let yaml = format!(
        "tenant: shop\nrepo: {{path: /home/u/shop, base: main}}\ntask: {{text: x}}\n\
         agent: {{image: localhost/a, unpinned_local_image: true, command: [agent]}}\n\
         gate: {{image: localhost/a, unpinned_local_image: true, command: [check]}}\n{extra}"
    );
    let ctx = crate::spec::SpecContext {
        file: "t.yaml".into(),
        home: "/home/u".into(),
        runtime_dir: "/run/user/1000".into(),
    };
    crate::spec::parse(&yaml, &ctx).expect("spec")
}

#[test]
fn a_cold_run_says_why_and_its_environment_is_the_run() {
    let run = "20261202t030000-aaaa";
    let pool = "pool: {size: 2}\n";
    let cases = [
        (
            String::new(),
            Backend::Quadlet,
            Some("the tenant has no pool"),
        ),
        (
            "pool: {size: 0}\n".to_string(),
            Backend::Quadlet,
            Some("the tenant's pool has size 0"),
        ),
        (
            pool.to_string(),
            Backend::Plain,
            Some("plain backend (Podman < 5)"),
        ),
        (
            format!(
                "{pool}services: [{{name: db, image: localhost/a, unpinned_local_image: true}}]\n"
            ),
            Backend::Quadlet,
            None,
        ),
        (pool.to_string(), Backend::Quadlet, None),
    ];
    for (extra, backend, want) in cases {
        let got = why_cold(&spec(&extra), backend);
        match (got, want) {
            (Some(g), Some(w)) => assert!(g.starts_with(w), "{w}: {g}"),
            (g, w) => assert_eq!(g, w, "{extra}"),
        }
    }
    let r = cold(run, NONE_READY);
    assert_eq!((r.id.as_str(), r.pooled), (run, false));
    assert!(r.why_cold.starts_with("none ready"), "{}", r.why_cold);
}

#[test]
fn a_warm_record_names_the_environment_its_fill_and_idle_time() {
    let f = Filled {
        env: "20261202t020000-e001".into(),
        tenant: "acme".into(),
        began_ms: 1000,
        ready_ms: 1500,
        pid: 7,
        octet: 9,
        log_key: "k".into(),
        files: Vec::new(),
        units: Vec::new(),
        placeholders: Vec::new(),
        credentials_file: String::new(),
        service_ports: Vec::new(),
        services: Vec::new(),
        agent: None,
        credentials_gid: 0,
    };
    let r = warm(&f, 4000);
    assert_eq!(
        (r.id.as_str(), r.pooled, r.filled_ms, r.idle_ms),
        (f.env.as_str(), true, 1500, 2500)
    );
    let json = serde_json::to_string(&r).expect("json");
    assert!(
        !json.contains("log_key") && !json.contains("why_cold"),
        "{json}"
    );
}

#[test]
fn status_shows_what_the_pool_holds_and_whether_its_keeper_runs() {
    let t = tempfile::tempdir().expect("tempdir");
    let p = pool(&t);
    p.begin("20261202t020000-e001", "acme", 0, 1)
        .expect("begin");
    let keeper = |active: &str| KeeperView {
        unit: "cyclix-pool@acme.service".into(),
        active_state: active.into(),
        state: None,
        error: String::new(),
    };
    let ts = |ms: u128| ms.to_string();
    let v = PoolView::new(&spec_pool(2), p.counts(), keeper("inactive"));
    assert_eq!(
        v.lines(0, &ts),
        [
            "pool: size 2: 0 ready, 1 filling, 0 claimed, 0 expiring",
            "cyclix-pool@acme.service: inactive; cannot refill: the keeper is not running; `cyclix install` enables and starts it"
        ]
    );
    let v = PoolView::new(
        &spec_pool(2),
        Err(anyhow::anyhow!("listing X: denied")),
        keeper("active"),
    );
    assert_eq!(
        v.lines(0, &ts),
        [
            "pool: size 2: state unreadable (listing X: denied)",
            "cyclix-pool@acme.service: active: starting"
        ]
    );
    assert!(v.refilling);
}

#[test]
fn only_a_service_with_no_secret_no_work_tree_and_no_build_is_pooled() {
    let s = spec(
        "services:\n  \
         - {name: db, image: localhost/pg, unpinned_local_image: true}\n  \
         - {name: sec, image: localhost/pg, unpinned_local_image: true, env: [DB_TOKEN]}\n  \
         - {name: app, image: localhost/x, unpinned_local_image: true, worktree: read_only, command: [python3]}\n  \
         - {name: built, build: {containerfile: Containerfile}}\n",
    );
    let pooled: Vec<&str> = s
        .services
        .iter()
        .filter(|v| poolable(v))
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(pooled, ["db"]);
    assert_eq!(s.services.len(), 4, "the control: all four parsed");
}
