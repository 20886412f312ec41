use super::*;
use crate::run::record::{EnvironmentRecord, Phase};

/// A record of `tenant`'s run `id` with `result` whose phases are `(name, start, end)`.
fn rec(tenant: &str, id: &str, result: RunResult, phases: &[(&str, u128, u128)]) -> RunRecord {
    let mut r = RunRecord::new(tenant, id, "container".into());
    r.result = result;
    r.phases = phases
        .iter()
        .map(|(n, s, e)| Phase {
            name: (*n).to_owned(),
            start_ms: *s,
            end_ms: *e,
            outcome: "ok".into(),
        })
        .collect();
    r
}

/// The sample lines of `text` (no comments).
fn samples(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

/// The value of the sample `series` (name and labels as written).
fn value<'a>(text: &'a str, series: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
}

/// `acme`'s passed run r1: five phases, its agent let go at 1.4 s, two egress decisions of the
/// agent's and two of the probes'.
fn acme_r1() -> RunRecord {
    let mut a = rec(
        "acme",
        "r1",
        RunResult::Passed,
        &[
            ("queue", 1_000, 1_010),
            ("prepare", 1_010, 1_200),
            ("probe", 1_200, 1_400),
            ("agent", 1_400, 3_000),
            ("audit", 3_000, 3_100),
        ],
    );
    a.go_ms = Some(1_400);
    a.egress_decisions = vec![
        serde_json::json!({"reason": "allowlisted", "status": "200"}),
        serde_json::json!({"reason": "domain_not_allowlisted", "status": "403"}),
        serde_json::json!({"by": "probe", "reason": "domain_not_allowlisted", "status": "403"}),
        serde_json::json!({"by": "probe", "reason": "sni_mismatch", "status": "200"}),
    ];
    a
}

/// A passed run and a `gate_failed` one of `acme`, a warm one of `beta`.
fn two_tenants() -> Metrics {
    let mut m = Metrics::default();
    m.add_record(&acme_r1());
    let mut b = rec(
        "acme",
        "r2",
        RunResult::GateFailed,
        &[("prepare", 5_000, 5_100), ("gate", 5_100, 7_600)],
    );
    b.leftovers = vec!["container x".into(), "network y".into()];
    m.add_record(&b);
    let mut w = rec(
        "beta",
        "w1",
        RunResult::Passed,
        &[("claim", 100, 250), ("agent", 250, 400)],
    );
    w.go_ms = Some(700);
    w.environment = Some(EnvironmentRecord {
        id: "w1".into(),
        pooled: true,
        why_cold: String::new(),
        filled_ms: 1,
        idle_ms: 2,
    });
    m.add_record(&w);
    m
}

#[test]
fn counts_runs_results_phases_egress_and_leftovers_per_tenant() {
    let t = two_tenants().render(9_000);
    let v = |s: &str| value(&t, s).unwrap_or_else(|| panic!("no {s} in\n{t}"));
    assert_eq!(
        v(r#"cyclix_runs_total{tenant="acme",result="passed"}"#),
        "1"
    );
    assert_eq!(
        v(r#"cyclix_runs_total{tenant="acme",result="gate_failed"}"#),
        "1"
    );
    assert_eq!(v(r#"cyclix_runs_total{tenant="acme",result="error"}"#), "0");
    assert_eq!(
        v(r#"cyclix_runs_total{tenant="beta",result="passed"}"#),
        "1"
    );
    // Every result of every tenant: the series exist before the first of their kind.
    assert_eq!(
        samples(&t)
            .iter()
            .filter(|l| l.starts_with("cyclix_runs_total{"))
            .count(),
        2 * RESULTS.len()
    );
    assert_eq!(
        v(r#"cyclix_run_phase_duration_seconds_sum{tenant="acme",phase="prepare"}"#),
        "0.29"
    );
    assert_eq!(
        v(r#"cyclix_run_phase_duration_seconds_count{tenant="acme",phase="prepare"}"#),
        "2"
    );
    assert_eq!(
        v(r#"cyclix_egress_requests_total{tenant="acme",by="agent"}"#),
        "2"
    );
    assert_eq!(
        v(r#"cyclix_egress_denied_total{tenant="acme",by="agent"}"#),
        "1"
    );
    // A cut tunnel is a denial too.
    assert_eq!(
        v(r#"cyclix_egress_denied_total{tenant="acme",by="probe"}"#),
        "2"
    );
    assert_eq!(v(r#"cyclix_leftovers_total{tenant="acme"}"#), "2");
    // The last run is the newest by start: r2, which failed and left two things.
    assert_eq!(
        v(r#"cyclix_last_run_result{tenant="acme",result="gate_failed"}"#),
        "1"
    );
    assert_eq!(
        v(r#"cyclix_last_run_result{tenant="acme",result="passed"}"#),
        "0"
    );
    assert_eq!(v(r#"cyclix_last_run_leftovers{tenant="acme"}"#), "2");
    assert_eq!(
        v(r#"cyclix_last_run_duration_seconds{tenant="acme"}"#),
        "2.6"
    );
    assert_eq!(
        v(r#"cyclix_last_run_end_timestamp_seconds{tenant="acme"}"#),
        "7.6"
    );
    assert_eq!(
        v(r#"cyclix_last_run_phase_duration_seconds{tenant="acme",phase="gate"}"#),
        "2.5"
    );
    // r2 never got its go: no time to agent for acme's last run; beta's was warm.
    assert!(
        value(
            &t,
            r#"cyclix_last_run_time_to_agent_seconds{tenant="acme"}"#
        )
        .is_none()
    );
    assert_eq!(
        v(r#"cyclix_last_run_time_to_agent_seconds{tenant="beta"}"#),
        "0.6"
    );
    assert_eq!(v("cyclix_metrics_generated_timestamp_seconds"), "9");
    assert_eq!(v("cyclix_records_unreadable"), "0");
}

#[test]
fn time_to_agent_is_a_histogram_from_the_first_phase_after_queue_to_the_go() {
    let t = two_tenants().render(0);
    let v = |s: &str| value(&t, s).unwrap_or_else(|| panic!("no {s} in\n{t}"));
    // acme's r1: prepare at 1010 (queue left out) to the go at 1400: 390 ms, cold.
    assert_eq!(
        v(r#"cyclix_time_to_agent_seconds_bucket{tenant="acme",environment="cold",le="0.25"}"#),
        "0"
    );
    assert_eq!(
        v(r#"cyclix_time_to_agent_seconds_bucket{tenant="acme",environment="cold",le="0.5"}"#),
        "1"
    );
    assert_eq!(
        v(r#"cyclix_time_to_agent_seconds_bucket{tenant="acme",environment="cold",le="+Inf"}"#),
        "1"
    );
    assert_eq!(
        v(r#"cyclix_time_to_agent_seconds_sum{tenant="acme",environment="cold"}"#),
        "0.39"
    );
    assert_eq!(
        v(r#"cyclix_time_to_agent_seconds_count{tenant="acme",environment="warm"}"#),
        "0"
    );
    // beta's warm run: from its claim (100) to the go (700).
    assert_eq!(
        v(r#"cyclix_time_to_agent_seconds_count{tenant="beta",environment="warm"}"#),
        "1"
    );
    assert_eq!(
        v(r#"cyclix_time_to_agent_seconds_bucket{tenant="beta",environment="warm",le="1"}"#),
        "1"
    );
    // The buckets are cumulative and their bounds increase, +Inf last.
    let les: Vec<&str> = samples(&t)
        .iter()
        .filter(|l| l.contains(r#"tenant="beta",environment="warm",le=""#))
        .map(|l| {
            l.split("le=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("")
        })
        .collect();
    assert_eq!(les.len(), TO_AGENT_BUCKETS_MS.len() + 1);
    assert_eq!(les.last(), Some(&"+Inf"));
    let bounds: Vec<f64> = les[..les.len() - 1]
        .iter()
        .map(|s| s.parse().expect("number"))
        .collect();
    assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{bounds:?}");
}

#[test]
fn label_values_are_escaped_and_bounded_to_our_own_names() {
    let mut metrics = Metrics::default();
    let hostile = "ev\"il\\ten\nant";
    let record = rec(
        hostile,
        "run-id-never-a-label",
        RunResult::AgentFailed,
        &[
            ("agent", 0, 10),
            ("phase\"}\n x 1", 10, 20),
            ("agent", 20, 25),
        ],
    );
    metrics.add_record(&record);
    let t = metrics.render(0);
    assert!(
        t.contains(r#"cyclix_runs_total{tenant="ev\"il\\ten\nant",result="agent_failed"} 1"#),
        "{t}"
    );
    // A phase name of the record's own becomes `other`; a phase met twice is added up.
    assert!(
        t.contains(
            r#"cyclix_run_phase_duration_seconds_count{tenant="ev\"il\\ten\nant",phase="other"} 1"#
        ),
        "{t}"
    );
    assert!(
        t.contains(r#"cyclix_last_run_phase_duration_seconds{tenant="ev\"il\\ten\nant",phase="agent"} 0.015"#),
        "{t}"
    );
    assert!(!t.contains("run-id-never-a-label"), "{t}");
    // Every line is one sample or a comment: the newline never reached the text raw.
    for l in t.lines() {
        assert!(
            l.starts_with("# HELP cyclix_")
                || l.starts_with("# TYPE cyclix_")
                || l.starts_with("cyclix_"),
            "{l:?}"
        );
    }
    // Only our own label names and values (the tenant aside).
    for l in samples(&t) {
        let labels = l.split_once('{').map_or("", |x| x.1);
        for pair in labels
            .split("\",")
            .filter(|p| !p.is_empty() && !p.starts_with("tenant="))
        {
            let (k, v) = pair.split_once("=\"").unwrap_or_else(|| panic!("{l}"));
            let v = v.split('"').next().unwrap_or_default();
            let ok = match k {
                "result" => RESULTS.iter().any(|r| r.as_str() == v),
                "phase" => v == "other" || PHASES.contains(&v),
                "by" => SIDES.contains(&v),
                "environment" => v == "cold" || v == "warm",
                "le" => true,
                _ => false,
            };
            assert!(ok, "label {k}={v} in {l}");
        }
    }
}

#[test]
#[allow(clippy::too_many_lines)] // one text, every rule of its layout
fn families_are_whole_sorted_and_in_a_fixed_order() {
    let mut m = two_tenants();
    m.add_pool(
        "beta",
        PoolFacts {
            ready: 1,
            filling: 1,
            keeper: Some(KeeperFacts {
                want: 2,
                failures: 0,
                filled: 3,
                expired: 1,
                updated_ms: 5_500,
            }),
            ..PoolFacts::default()
        },
    );
    m.add_pool("acme", PoolFacts::default());
    m.add_unreadable();
    let t = m.render(12_345);
    assert_eq!(t, m.render(12_345), "the same input, the same text");
    // HELP, TYPE, then that family's samples only; no family twice.
    let mut seen = Vec::new();
    let mut current = String::new();
    let lines: Vec<&str> = t.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if let Some(rest) = l.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or_default().to_owned();
            assert!(!seen.contains(&name), "{name} twice");
            assert!(
                lines[i + 1].starts_with(&format!("# TYPE {name} ")),
                "TYPE after HELP: {l}"
            );
            seen.push(name.clone());
            current = name;
        } else if !l.starts_with('#') {
            assert!(l.starts_with(&current), "{l} outside {current}");
        }
    }
    let order: Vec<&str> = seen.iter().map(String::as_str).collect();
    assert_eq!(
        order,
        [
            "cyclix_runs_total",
            "cyclix_run_phase_duration_seconds",
            "cyclix_time_to_agent_seconds",
            "cyclix_egress_requests_total",
            "cyclix_egress_denied_total",
            "cyclix_leftovers_total",
            "cyclix_last_run_result",
            "cyclix_last_run_end_timestamp_seconds",
            "cyclix_last_run_duration_seconds",
            "cyclix_last_run_phase_duration_seconds",
            "cyclix_last_run_time_to_agent_seconds",
            "cyclix_last_run_egress_denied",
            "cyclix_last_run_leftovers",
            "cyclix_pool_environments",
            "cyclix_pool_wanted_environments",
            "cyclix_pool_keeper_failures",
            "cyclix_pool_keeper_filled_total",
            "cyclix_pool_keeper_expired_total",
            "cyclix_pool_keeper_updated_timestamp_seconds",
            "cyclix_records_unreadable",
            "cyclix_metrics_generated_timestamp_seconds",
        ]
    );
    // Tenants sorted within a family; the pool's states in their fixed order.
    let pool: Vec<&str> = samples(&t)
        .into_iter()
        .filter(|l| l.starts_with("cyclix_pool_environments{"))
        .collect();
    assert_eq!(
        pool,
        [
            r#"cyclix_pool_environments{tenant="acme",state="ready"} 0"#,
            r#"cyclix_pool_environments{tenant="acme",state="filling"} 0"#,
            r#"cyclix_pool_environments{tenant="acme",state="claimed"} 0"#,
            r#"cyclix_pool_environments{tenant="acme",state="expiring"} 0"#,
            r#"cyclix_pool_environments{tenant="beta",state="ready"} 1"#,
            r#"cyclix_pool_environments{tenant="beta",state="filling"} 1"#,
            r#"cyclix_pool_environments{tenant="beta",state="claimed"} 0"#,
            r#"cyclix_pool_environments{tenant="beta",state="expiring"} 0"#,
        ]
    );
    // Phases in the lifecycle's order, not the alphabet's.
    let phases: Vec<&str> = samples(&t)
        .into_iter()
        .filter_map(|l| {
            l.strip_prefix(r#"cyclix_run_phase_duration_seconds_count{tenant="acme",phase=""#)
        })
        .filter_map(|l| l.split('"').next())
        .collect();
    assert_eq!(
        phases,
        ["queue", "prepare", "probe", "agent", "gate", "audit"]
    );
    // A pool without a keeper's file has no keeper gauges.
    assert!(!t.contains(r#"cyclix_pool_wanted_environments{tenant="acme"}"#));
    assert!(t.contains(r#"cyclix_pool_wanted_environments{tenant="beta"} 2"#));
    assert!(t.contains(r#"cyclix_pool_keeper_filled_total{tenant="beta"} 3"#));
    assert!(t.contains("cyclix_records_unreadable 1\n"));
    // Counters end in _total, nothing else does.
    for l in t.lines().filter(|l| l.starts_with("# TYPE ")) {
        let mut w = l.split(' ').skip(2);
        let (name, kind) = (w.next().unwrap_or(""), w.next().unwrap_or(""));
        assert_eq!(name.ends_with("_total"), kind == "counter", "{l}");
    }
}

#[test]
fn phases_come_in_the_lifecycles_order() {
    let t = two_tenants().render(0);
    let phases: Vec<&str> = samples(&t)
        .into_iter()
        .filter_map(|l| {
            l.strip_prefix(r#"cyclix_run_phase_duration_seconds_count{tenant="acme",phase=""#)
        })
        .filter_map(|l| l.split('"').next())
        .collect();
    assert_eq!(
        phases,
        ["queue", "prepare", "probe", "agent", "gate", "audit"]
    );
}

#[test]
fn nothing_recorded_is_a_valid_short_file() {
    let t = Metrics::default().render(1_000);
    assert_eq!(
        t,
        "# HELP cyclix_records_unreadable Run record files under the state directory that do \
         not parse (not counted above).\n# TYPE cyclix_records_unreadable gauge\n\
         cyclix_records_unreadable 0\n# HELP cyclix_metrics_generated_timestamp_seconds When \
         cyclix wrote this file, in seconds since the Unix epoch.\n# TYPE \
         cyclix_metrics_generated_timestamp_seconds gauge\n\
         cyclix_metrics_generated_timestamp_seconds 1\n"
    );
}

#[test]
fn a_pruned_run_stays_counted_through_the_tally() {
    let m = two_tenants();
    let before = m.render(0);
    // acme's r1 pruned: its record is gone, its tally holds it.
    let mut tally = Tally::default();
    tally.add(&acme_r1());
    let tally: Tally =
        serde_json::from_str(&serde_json::to_string(&tally).expect("json")).expect("back");
    let mut after = Metrics::default();
    for r in [
        {
            let mut b = rec(
                "acme",
                "r2",
                RunResult::GateFailed,
                &[("prepare", 5_000, 5_100), ("gate", 5_100, 7_600)],
            );
            b.leftovers = vec!["container x".into(), "network y".into()];
            b
        },
        {
            let mut w = rec(
                "beta",
                "w1",
                RunResult::Passed,
                &[("claim", 100, 250), ("agent", 250, 400)],
            );
            w.go_ms = Some(700);
            w.environment = Some(EnvironmentRecord {
                id: "w1".into(),
                pooled: true,
                why_cold: String::new(),
                filled_ms: 1,
                idle_ms: 2,
            });
            w
        },
    ] {
        after.add_record(&r);
    }
    after.add_tally("acme", &tally);
    assert_eq!(after.render(0), before);
}

#[test]
fn seconds_are_exact_decimals() {
    assert_eq!(seconds(0), "0");
    assert_eq!(seconds(1), "0.001");
    assert_eq!(seconds(1_500), "1.5");
    assert_eq!(seconds(2_000), "2");
    assert_eq!(seconds(1_765_000_123_456), "1765000123.456");
    assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}
