//! `bench/run --short` on the testbed (issue 7): every measurement ran and produced numbers.
//! Performance is judged by a person reading ratios of one run, never by a timed test, so
//! nothing here compares a number with a threshold.

use crate::common::testbed::{Testbed, expect_success};

fn num(v: &serde_json::Value, path: &str) -> f64 {
    let mut cur = v;
    for k in path.split('.') {
        cur = &cur[k];
    }
    let x = cur
        .as_f64()
        .unwrap_or_else(|| panic!("bench: `{path}` is not a number: {cur} in {v:#}"));
    assert!(x.is_finite() && x >= 0.0, "bench: `{path}` = {x}");
    x
}

#[test]
fn the_short_benchmark_measures_every_pair() {
    // It re-lays out the demo and builds the images: no other cyclix test meanwhile.
    let _excl = crate::common::testbed::exclusive();
    let tb = Testbed::get();
    let out = expect_success(
        &tb.user(&[
            "python3",
            &format!("{}/bench/inside.py", tb.src()),
            "--short",
            "--cyclix",
            &tb.cyclix_bin(),
        ]),
        "bench/inside.py --short",
    );
    let v: serde_json::Value = serde_json::from_str(&out).expect("the bench prints JSON");
    assert_eq!(v["schema"], "cyclix-bench/1");
    let pairs = v["pairs"].as_array().expect("pairs");
    let names: Vec<&str> = pairs.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "bring-up (ms)",
            "teardown+audit (ms)",
            "D-Bus start vs systemctl (ms)",
            "cyclix unit start process (ms)"
        ]
    );
    for p in pairs {
        for side in ["cyclix", "bare"] {
            for s in ["min", "median", "max"] {
                num(p, &format!("{side}.{s}"));
            }
        }
        assert!(num(p, "bare.median") > 0.0, "{p:#}");
        num(p, "ratio");
    }
    // The time to agent, cold and warm (a pooled environment claimed): numbers and parts.
    let ta = &v["time_to_agent"];
    for (side, parts) in [("cold", 5), ("warm", 6)] {
        num(ta, &format!("{side}.median"));
        let got = ta[format!("{side}_parts")]
            .as_object()
            .map(serde_json::Map::len);
        assert_eq!(got, Some(parts), "{ta:#}");
    }
    num(ta, "warm_parts.claim+check.median");
    num(ta, "warm_over_cold");
    assert_eq!(
        ta["warm_leftovers"].as_array().map(Vec::len),
        Some(0),
        "{ta:#}"
    );
    num(&v, "probes.wall_ms.median");
    assert_eq!(v["probes"]["slowest"].as_array().map(Vec::len), Some(3));
    assert!(num(&v, "probes.count") >= 40.0, "{:#}", v["probes"]);
    num(&v, "render.in_process.render_ms");
    assert!(num(&v, "render.in_process.files") >= 100.0);
    num(&v, "render.process_ms.median");
    let d = &v["density"];
    assert_eq!(d["runs"], 2, "{d:#}");
    // Correctness, not speed: every run passed and left nothing.
    assert_eq!(d["passed"], 2, "{d:#}");
    assert_eq!(d["collisions"], 0, "{d:#}");
    assert_eq!(d["leftovers"].as_array().map(Vec::len), Some(0), "{d:#}");
    num(d, "rss_mib_per_run.median");
}

/// The pure parts of the tier comparison (`bench/test_inside.py`: the demo spec per tier, the
/// figures from a record, the gVisor/container ratios) pass their unit tests, in the testbed's
/// Python. The comparison itself runs only in `bench/run` (full or `--gvisor`), never here.
#[test]
fn the_tier_comparisons_pure_parts_pass_their_unit_tests() {
    let tb = Testbed::get();
    let out = tb.user_sh(&format!(
        "cd {}/bench && PYTHONDONTWRITEBYTECODE=1 python3 -m unittest -v test_inside 2>&1",
        tb.src()
    ));
    let text = expect_success(&out, "python3 -m unittest test_inside");
    assert!(text.contains("\nOK"), "{text}");
}
