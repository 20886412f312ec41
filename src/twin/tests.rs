//! The twin's unit tests.

use serde_json::Value;

use super::*;
use crate::render::plan::RunPlan;

fn t(name: &str, outcome: TestOutcome) -> TestCase {
    TestCase {
        name: name.into(),
        outcome,
    }
}

#[allow(clippy::unnecessary_wraps)] // reads as a side's `suite`
fn junit(exit: i32, tests: Vec<TestCase>) -> Option<SuiteRun> {
    Some(SuiteRun {
        exit,
        results: Results::Junit { tests },
    })
}

fn side(label: &str, suite: Option<SuiteRun>) -> Side {
    Side {
        label: label.into(),
        run_id: format!("x-{label}"),
        suite,
        probes_passed: 40,
        ..Side::default()
    }
}

/// The demo at its base commit: one test passes, one fails, everywhere.
fn demo() -> [Side; 3] {
    let suite = || {
        junit(
            1,
            vec![
                t("tests.test_calc::test_add", TestOutcome::Passed),
                t("tests.test_calc::test_subtract", TestOutcome::Failed),
            ],
        )
    };
    [
        side("A", suite()),
        side("B", suite()),
        side("reference", suite()),
    ]
}

fn classes(v: &Comparison) -> Vec<FailureClass> {
    v.failures.iter().map(|f| f.class).collect()
}

#[test]
fn identical_results_pass_even_when_a_test_fails_everywhere() {
    let v = judge(&demo(), &[]);
    assert!(v.passed, "{v:?}");
    assert_eq!(v.rows.len(), 2);
    assert!(v.rows.iter().all(|r| !r.differs));
    assert_eq!(
        v.counts[2],
        Some(Counts {
            passed: 1,
            failed: 1,
            skipped: 0,
            error: 0
        })
    );
}

#[test]
fn a_build_error_fails() {
    let mut s = demo();
    s[1].error = Some("phase start: starting cyclix-x-B-proxy.service: job failed".into());
    s[1].suite = None;
    let v = judge(&s, &[]);
    assert_eq!(classes(&v), [FailureClass::Build]);
    assert!(v.failures[0].detail.starts_with("env B (x-B): phase start"));
    // A side that produced no suite without an error is a build failure too.
    let mut s = demo();
    s[2].suite = None;
    assert_eq!(classes(&judge(&s, &[])), [FailureClass::Build]);
}

#[test]
fn a_failed_probe_fails() {
    let mut s = demo();
    s[0].probe_failures = vec!["N8: expected 403, got 200".into()];
    let v = judge(&s, &[]);
    assert_eq!(classes(&v), [FailureClass::Probe]);
    assert_eq!(
        v.failures[0].detail,
        "env A (x-A): N8: expected 403, got 200"
    );
}

#[test]
fn a_skip_against_a_pass_is_a_difference_and_changes_the_counts() {
    let mut s = demo();
    s[1].suite = junit(
        1,
        vec![
            t("tests.test_calc::test_add", TestOutcome::Skipped),
            t("tests.test_calc::test_subtract", TestOutcome::Failed),
        ],
    );
    let v = judge(&s, &[]);
    assert_eq!(classes(&v), [FailureClass::Results, FailureClass::Counts]);
    assert_eq!(
        v.failures[0].detail,
        "tests.test_calc::test_add: A passed, B skipped, reference passed"
    );
    let differing: Vec<&str> = v
        .rows
        .iter()
        .filter(|r| r.differs)
        .map(|r| r.test.as_str())
        .collect();
    assert_eq!(differing, ["tests.test_calc::test_add"]);
}

#[test]
fn a_difference_from_the_reference_alone_fails() {
    let mut s = demo();
    s[2].suite = junit(
        0,
        vec![
            t("tests.test_calc::test_add", TestOutcome::Passed),
            t("tests.test_calc::test_subtract", TestOutcome::Passed),
        ],
    );
    let v = judge(&s, &[]);
    assert_eq!(
        classes(&v),
        [
            FailureClass::Results,
            FailureClass::Results,
            FailureClass::Counts
        ]
    );
    assert!(v.failures[0].detail.contains("reference 0"), "{v:?}");
}

#[test]
fn a_test_missing_on_one_side_is_a_difference() {
    let mut s = demo();
    s[0].suite = junit(
        1,
        vec![t("tests.test_calc::test_subtract", TestOutcome::Failed)],
    );
    let v = judge(&s, &[]);
    assert!(
        v.failures
            .iter()
            .any(|f| f.detail
                == "tests.test_calc::test_add: A missing, B passed, reference passed"),
        "{v:?}"
    );
}

#[test]
fn without_results_files_exit_and_digest_are_compared() {
    let d = |exit, sha: &str| {
        Some(SuiteRun {
            exit,
            results: Results::Digest {
                sha256: sha.into(),
                lines: vec![format!("out {sha}")],
            },
        })
    };
    let same = [
        side("A", d(1, "aa")),
        side("B", d(1, "aa")),
        side("reference", d(1, "aa")),
    ];
    assert!(judge(&same, &[]).passed);
    // A differing digest shows the differing lines and says how to compare per test.
    let differ = [
        side("A", d(1, "bb")),
        side("B", d(1, "aa")),
        side("reference", d(1, "aa")),
    ];
    let v = judge(&differ, &[]);
    let f = v
        .failures
        .iter()
        .find(|f| f.detail.starts_with("normalised output differs"))
        .expect("a digest failure");
    assert!(
        f.detail
            .contains("A against the reference (- reference, + A):\n    - out aa\n    + out bb")
            && !f.detail.contains("B against")
            && f.detail.contains("--junitxml=$CYCLIX_RESULTS"),
        "{}",
        f.detail
    );
    let mut other = same.clone();
    other[1].suite = d(1, "bb");
    let v = judge(&other, &[]);
    assert_eq!(classes(&v), [FailureClass::Results]);
    assert!(v.failures[0].detail.contains("normalised output differs"));
    // One side with `JUnit` and the others without is a difference too.
    let mut mixed = demo();
    mixed[0].suite = d(1, "aa");
    assert_eq!(classes(&judge(&mixed, &[])), [FailureClass::Results]);
}

#[test]
fn a_shared_name_and_a_leftover_fail() {
    let mut s = demo();
    s[1].leftovers = vec!["network cyclix-x-B".into()];
    let shared = [Shared {
        value: "10.213.5.0/24".into(),
        a: "subnet".into(),
        b: "subnet".into(),
    }];
    let v = judge(&s, &shared);
    assert_eq!(classes(&v), [FailureClass::Shared, FailureClass::Leftover]);
    assert!(v.failures[0].detail.contains("`10.213.5.0/24` is in both"));
}

fn plan(run: &str, octet: u8) -> RunPlan {
    plan_with_port(run, octet, 20000 + u16::from(octet))
}

/// A run of a spec with a service whose port cyclix picks (`service_port`).
fn plan_with_port(run: &str, octet: u8, service_port: u16) -> RunPlan {
    let yaml = "tenant: acme\nrepo: {path: /srv/acme, base: main}\ntask: {text: t}\n\
                agent: {image: localhost/a, unpinned_local_image: true, command: [agent], env: [API_KEY]}\n\
                gate: {image: localhost/a, unpinned_local_image: true, command: [check]}\n\
                mounts: [{source: /srv/data, target: /mnt/data}]\n\
                services: [{name: db, image: localhost/pg, unpinned_local_image: true, \
                data: /var/lib/pg, health: {command: [pg_isready], interval: 1s, retries: 3}}]\n";
    let ctx = crate::spec::SpecContext {
        file: "t.yaml".into(),
        home: "/home/t".into(),
        runtime_dir: "/run/user/1000".into(),
    };
    let spec = crate::spec::parse(yaml, &ctx).expect("spec");
    let run = crate::render::RunContext {
        gvisor: None,
        run_id: run.into(),
        worktree: format!("/home/t/wt/{run}"),
        run_dir: format!("/run/user/1000/cyclix/runs/{run}"),
        subnet_octet: octet,
        proxy_image: "localhost/cyclix-proxy:latest".into(),
        cyclix_bin: "/usr/bin/cyclix".into(),
        service_ports: vec![service_port],
        placeholders: Vec::new(),
        setup_binds: Vec::new(),
        // One per run, as `app::tenant::run_inputs` draws them.
        log_key: format!("{octet:032x}"),
        credentials_file: false,
        claim_wait_s: None,
    };
    crate::render::plan::plan(&spec, &run).expect("plan")
}

fn json(p: &RunPlan) -> Value {
    serde_json::to_value(p).expect("json")
}

#[test]
fn two_rendered_runs_share_no_name_and_a_constant_name_is_caught_generically() {
    let by_design: Vec<String> = Vec::new();
    let (a, b) = (plan("t1-a", 7), plan("t1-b", 9));
    let (n, shared) = shared_names(&json(&a), &json(&b), &by_design);
    // Two runs as cyclix renders them share nothing: networks, subnets, addresses, pod,
    // containers, units, secrets, the service's port, database name and data.
    assert!(n > 30, "only {n} identity values");
    assert!(shared.is_empty(), "{shared:?}");
    // The same service port in both (e.g. a port the spec fixes) is caught with its field.
    let (_, s) = shared_names(
        &json(&a),
        &json(&plan_with_port("t1-b", 9, 20007)),
        &by_design,
    );
    assert!(s.iter().any(|x| x.value.contains("20007")), "{s:?}");
    // A by-design value is never reported: the same service port declared shareable.
    let (_, s) = shared_names(
        &json(&a),
        &json(&plan_with_port("t1-b", 9, 20007)),
        &["20007".to_string()],
    );
    assert!(!s.iter().any(|x| x.value == "20007"), "{s:?}");
    // Same subnet: every address derived from it is shared, named with its field.
    let (_, s) = shared_names(&json(&a), &json(&plan("t1-b", 7)), &by_design);
    let values: Vec<&str> = s.iter().map(|x| x.value.as_str()).collect();
    for v in [
        "10.213.7.0/24",
        "10.213.7.128/25",
        "10.213.7.2",
        "10.213.7.3",
    ] {
        assert!(values.contains(&v), "{v} not reported: {s:?}");
    }
    // A field the comparison has never heard of (a volume, a database name) is compared.
    let mut ja = json(&a);
    let mut jb = json(&b);
    ja["volumes"] = serde_json::json!([{"name": "pgdata", "database": "app"}]);
    jb["volumes"] = serde_json::json!([{"name": "pgdata-b", "database": "app"}]);
    let (_, s) = shared_names(&ja, &jb, &by_design);
    assert!(
        s.iter()
            .any(|x| x.value == "app" && x.a == "volumes[0].database"),
        "{s:?}"
    );
    assert!(!s.iter().any(|x| x.value == "pgdata"));
}

#[test]
fn the_quick_gate_keeps_the_gate_hardened_and_adds_the_results_mount() {
    let mut p = plan("t1-a", 7);
    let before = p.containers.last().cloned().expect("gate");
    quick_gate(&mut p, &["pytest".into(), "-x".into()], "/run/r/results").expect("gate");
    let g = p.containers.last().expect("gate");
    assert_eq!(g.exec, ["pytest", "-x"]);
    assert_eq!(g.net, before.net);
    assert_eq!(g.net, crate::render::plan::Net::None);
    // Every gate has its results mount already: the quick gate's replaces it, once.
    assert_eq!(g.binds.len(), before.binds.len());
    assert!(
        g.binds[..before.binds.len() - 1]
            .iter()
            .all(|b| b.read_only)
    );
    assert_eq!(
        g.binds
            .last()
            .map(|b| (b.source.as_str(), b.target.as_str(), b.read_only)),
        Some(("/run/r/results", RESULTS_DIR_PATH, false))
    );
    assert_eq!(
        g.env.iter().filter(|(k, _)| k == RESULTS_ENV).count(),
        1,
        "{:?}",
        g.env
    );
    assert!(
        g.env
            .contains(&(RESULTS_ENV.into(), "/cyclix/results/junit.xml".into()))
    );
}

#[test]
fn a_suite_that_cannot_start_is_told_from_one_that_fails() {
    let none: Vec<String> = Vec::new();
    assert_eq!(cannot_start(127, &none), Some("the command was not found"));
    assert!(cannot_start(125, &none).is_some() && cannot_start(126, &none).is_some());
    let init =
        vec!["ERROR (catatonit:2): failed to exec pid1: No such file or directory".to_string()];
    assert!(cannot_start(1, &init).is_some_and(|w| w.contains("catatonit")));
    assert_eq!(
        cannot_start(1, &["1 failed, 2 passed in 0.02s".to_string()]),
        None
    );
    assert_eq!(cannot_start(0, &none), None);
}

#[test]
fn the_output_digest_ignores_timings_run_ids_and_podman_noise() {
    let a = vec![
        "2026-11-30 12:33:25.88 +0000 UTC m=+0.04 container exec 945e".to_string(),
        "F.                                                                       [100%]".into(),
        "FAILED tests/test_calc.py::test_subtract - assert 4 == 2 (run t1-a)".into(),
        "1 failed, 1 passed in 0.03s".into(),
        "<object at 0x7f3a9c2b1d60>".into(),
    ];
    let b = vec![
        "F.                                                                       [100%]"
            .to_string(),
        "conmon 945e <nwarn>: Failed to add inotify watch".into(),
        "FAILED tests/test_calc.py::test_subtract - assert 4 == 2 (run t1-b)".into(),
        String::new(),
        "1 failed, 1 passed in 1.20s".into(),
        "<object at 0x55d0a1>".into(),
        "f269f241b9f1daea58f01baa25cbbdc643213087aca8fc101e1ed94d35cf79df".into(),
        "cyclix-t1-b-gate.service: Consumed 1.2s CPU time.".into(),
    ];
    assert_eq!(
        output_digest(&a, &["t1-a"]),
        output_digest(&b, &["t1-b"]),
        "{:?} vs {:?}",
        normalise(&a, &["t1-a"]),
        normalise(&b, &["t1-b"])
    );
    let c = vec!["2 passed in 0.03s".to_string()];
    assert_ne!(output_digest(&a, &["t1-a"]), output_digest(&c, &[]));
    assert_eq!(normalise(&c, &[]), ["2 passed in Ns"]);
    let rnd = vec![
        "PermissionError: '/tmp/tmpk3j4_a9x/out' /tmp/tmp.AbC123xyz /tmp/pytest-of-cyx/pytest-12/popen-gw3/t0"
            .to_string(),
    ];
    assert_eq!(
        normalise(&rnd, &[]),
        [
            "PermissionError: '/tmp/tmpRANDOM/out' /tmp/tmp.RANDOM /tmp/pytest-of-cyx/pytest-N/popen-gwN/t0"
        ]
    );
    let d = vec!["E + where 11 = <function subtract at 0x7f5edc872d40>(7, 4) 0x".to_string()];
    assert_eq!(
        normalise(&d, &[]),
        ["E + where 11 = <function subtract at 0xADDR>(7, 4) 0x"]
    );
}

#[test]
fn the_report_shows_the_sides_the_table_and_the_verdict() {
    let mut s = demo();
    s[0].up_ms = Some(1000);
    s[1].up_ms = Some(1200);
    s[0].down_ms = Some(5000);
    s[1].down_ms = Some(4900);
    let r = Report::new(
        "demo".into(),
        "0123456789abcdef".into(),
        vec!["pytest".into()],
        s.clone(),
        (42, Vec::new()),
    );
    let text = r.text();
    assert_eq!(r.overlap_ms, Some(3700));
    assert!(
        text.contains("tests.test_calc::test_subtract  failed   failed   failed"),
        "{text}"
    );
    assert!(text.contains("verdict: PASS"), "{text}");
    assert!(text.contains("x-A"), "{text}");
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(json["schema"], "cyclix-twin/1");
    assert_eq!(json["verdict"]["passed"], true);
    assert_eq!(json["sides"][2]["label"], "reference");
    assert_eq!(json["sides"][0]["suite"]["results"]["contract"], "junit");

    s[1].suite = junit(
        0,
        vec![
            t("tests.test_calc::test_add", TestOutcome::Passed),
            t("tests.test_calc::test_subtract", TestOutcome::Passed),
        ],
    );
    let r = Report::new("demo".into(), "0123".into(), vec![], s, (42, Vec::new()));
    let text = r.text();
    assert!(
        text.contains("* tests.test_calc::test_subtract  failed   passed   failed     <- differs"),
        "{text}"
    );
    assert!(text.contains("verdict: FAIL"), "{text}");
}
