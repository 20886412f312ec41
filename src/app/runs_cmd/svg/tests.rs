use super::*;
use crate::run::record::Phase;

fn phase(name: &str, start_ms: u128, end_ms: u128) -> Phase {
    Phase {
        name: name.into(),
        start_ms,
        end_ms,
        outcome: "ok".into(),
    }
}

/// A record of `tenant`'s `run` that started at `t0`, with `phases` (name, from, to: ms after
/// `t0`).
fn rec(run: &str, result: RunResult, t0: u128, phases: &[(&str, u128, u128)]) -> RunRecord {
    let mut r = RunRecord::new("acme", run, "container".into());
    r.result = result;
    r.phases = phases
        .iter()
        .map(|(n, a, b)| phase(n, t0 + a, t0 + b))
        .collect();
    r
}

const SIX: [(&str, u128, u128); 6] = [
    ("prepare", 0, 800),
    ("start", 800, 3_100),
    ("agent", 3_100, 48_000),
    ("gate", 48_000, 61_500),
    ("teardown", 61_500, 62_400),
    ("audit", 62_400, 62_450),
];

/// The `rect.phase` elements of each `g.run`, by run id: their `data-phase`, in order.
fn bars(svg: &str) -> Vec<(String, Vec<String>)> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert_eq!(
        doc.root_element().tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let class = |n: &roxmltree::Node, c: &str| {
        n.attribute("class")
            .is_some_and(|v| v.split(' ').any(|x| x == c))
    };
    let all_bars = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && class(n, "phase"))
        .count();
    let runs: Vec<(String, Vec<String>)> = doc
        .descendants()
        .filter(|n| n.has_tag_name("g") && class(n, "run"))
        .map(|g| {
            let run = g.attribute("data-run").expect("data-run").to_owned();
            let phases = g
                .children()
                .filter(|n| n.has_tag_name("rect") && class(n, "phase"))
                .map(|b| {
                    assert_eq!(b.attribute("data-run"), Some(run.as_str()));
                    let title = b
                        .children()
                        .find(|t| t.has_tag_name("title"))
                        .and_then(|t| t.text())
                        .expect("every bar has a title");
                    let name = b.attribute("data-phase").expect("data-phase").to_owned();
                    assert!(title.starts_with(&format!("{name}: ")), "{title}");
                    name
                })
                .collect();
            (run, phases)
        })
        .collect();
    assert_eq!(
        all_bars,
        runs.iter().map(|r| r.1.len()).sum::<usize>(),
        "every bar is in its run's group"
    );
    runs
}

#[test]
fn the_svg_parses_and_holds_one_bar_per_phase_of_each_run() {
    let new = rec("r-new", RunResult::Passed, 1_700_000_100_000, &SIX);
    let mut old = rec("r-old", RunResult::GateFailed, 1_700_000_000_000, &SIX[..4]);
    old.failed_phase = Some("gate".into());
    old.phases[3].outcome = "exit status 1".into();
    let svg = svg(&[new.clone(), old.clone()], "cyclix runs: acme");
    let got = bars(&svg);
    let names = |r: &RunRecord| r.phases.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            ("r-new".to_owned(), names(&new)),
            ("r-old".to_owned(), names(&old))
        ]
    );
    // Positive control: a phase more in a record is a bar more, in that run only.
    let mut more = old.clone();
    more.phases
        .push(phase("teardown", 1_700_000_061_500, 1_700_000_062_000));
    let got = bars(&super::svg(&[new.clone(), more], "t"));
    assert_eq!(got[0].1.len(), 6);
    assert_eq!(got[1].1.len(), 5, "{got:?}");
    // A record without phases is a header and no bar.
    let none = rec("r-none", RunResult::Error, 0, &[]);
    let text = super::svg(&[none], "t");
    assert_eq!(bars(&text), vec![("r-none".to_owned(), vec![])]);
    assert!(text.contains("no phase recorded"), "{text}");
    let empty = super::svg(&[], "t");
    assert!(bars(&empty).is_empty());
    assert!(empty.contains("no runs recorded"), "{empty}");
}

#[test]
fn bars_are_coloured_by_result_placed_on_one_time_axis_and_the_failed_phase_outlined() {
    let pass = rec("r-pass", RunResult::Passed, 5_000_000, &SIX);
    let mut fail = rec(
        "r-fail",
        RunResult::AgentTimeout,
        9_000_000,
        &[("prepare", 0, 1_000), ("agent", 1_000, 31_000)],
    );
    fail.phases[1].outcome = "the agent ran past agent.timeout".into();
    let text = svg(&[pass, fail], "t");
    let doc = roxmltree::Document::parse(&text).expect("parses");
    let rects: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect"))
        .collect();
    let bar = |run: &str, phase: &str| {
        *rects
            .iter()
            .find(|n| {
                n.attribute("data-run") == Some(run) && n.attribute("data-phase") == Some(phase)
            })
            .unwrap_or_else(|| panic!("{run} {phase}"))
    };
    let num = |n: roxmltree::Node, a: &str| -> f64 {
        n.attribute(a).expect("attr").parse().expect("number")
    };
    // 62.45 s in all: a 10 s step, the axis to 70 s over the plot's width.
    let scale = PLOT / 70_000.0;
    assert!((num(bar("r-pass", "prepare"), "x") - LEFT).abs() < 0.1);
    assert!((num(bar("r-pass", "gate"), "x") - (LEFT + 48_000.0 * scale)).abs() < 0.1);
    assert!((num(bar("r-pass", "gate"), "width") - 13_500.0 * scale).abs() < 0.1);
    // Each run counts from its own start, on the same scale.
    assert!((num(bar("r-fail", "agent"), "x") - (LEFT + 1_000.0 * scale)).abs() < 0.1);
    assert!((num(bar("r-fail", "agent"), "width") - 30_000.0 * scale).abs() < 0.1);
    // A 50 ms phase still shows.
    assert!(num(bar("r-pass", "audit"), "width") >= MIN_BAR);
    assert_eq!(bar("r-pass", "gate").attribute("data-ms"), Some("13500"));
    assert_eq!(
        bar("r-pass", "gate").attribute("fill"),
        Some(colour(RunResult::Passed))
    );
    assert_eq!(
        bar("r-fail", "agent").attribute("fill"),
        Some(colour(RunResult::AgentTimeout))
    );
    assert_eq!(
        bar("r-fail", "agent").attribute("class"),
        Some("phase failed")
    );
    assert_eq!(bar("r-fail", "prepare").attribute("class"), Some("phase"));
    let title = bar("r-fail", "agent")
        .first_element_child()
        .and_then(|t| t.text())
        .expect("title");
    assert_eq!(title, "agent: 30.0 s (the agent ran past agent.timeout)");
    // The legend: one swatch per result drawn, in its colour.
    let swatches: Vec<_> = rects
        .iter()
        .filter(|n| n.attribute("class") == Some("swatch"))
        .map(|n| {
            (
                n.attribute("data-result").expect("r"),
                n.attribute("fill").expect("f"),
            )
        })
        .collect();
    assert_eq!(
        swatches,
        [
            ("passed", colour(RunResult::Passed)),
            ("agent_timeout", colour(RunResult::AgentTimeout))
        ]
    );
    // The axis: ticks 0 to 70 s.
    let ticks: Vec<_> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("tick"))
        .filter_map(|n| n.text())
        .collect();
    assert_eq!(ticks.len(), 16, "{ticks:?}");
    assert_eq!(ticks[0], "0");
    assert_eq!(ticks[ticks.len() - 1], "1 min 10 s");
}

#[test]
fn every_result_has_a_colour_of_its_own() {
    let all = RunResult::ALL;
    let mut colours: Vec<_> = all.iter().map(|r| colour(*r)).collect();
    colours.sort_unstable();
    colours.dedup();
    assert_eq!(colours.len(), all.len());
}

#[test]
fn text_from_a_record_is_escaped_and_the_picture_references_nothing() {
    let hostile = "<script>alert('x')</script> & \"q\" ]]> \u{1b}[31m\u{7}\u{202e}\u{ffff}\nnext";
    let mut r = rec("r-<b>&\"'", RunResult::GateFailed, 1_000, &SIX[..2]);
    r.tenant = format!("t<script>&{hostile}");
    r.causes.push(hostile.into());
    r.phases[1].name = format!("start{hostile}");
    r.phases[1].outcome = hostile.into();
    let text = svg(&[r.clone()], &format!("cyclix runs: {}", r.tenant));
    let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    // No element but the few drawn; nothing a browser would run or fetch.
    let allowed = [
        "svg", "title", "style", "rect", "text", "tspan", "g", "line",
    ];
    for n in doc.descendants().filter(roxmltree::Node::is_element) {
        assert!(allowed.contains(&n.tag_name().name()), "{:?}", n.tag_name());
        for a in n.attributes() {
            assert!(
                !a.name().contains("href") && !a.name().starts_with("on"),
                "{a:?}"
            );
        }
    }
    let lower = text.to_lowercase();
    for bad in [
        "<script",
        "href",
        "url(",
        "@import",
        "<image",
        "<foreignobject",
        "javascript:",
    ] {
        assert!(!lower.contains(bad), "{bad}:\n{text}");
    }
    assert_eq!(
        lower.matches("http").count(),
        1,
        "only the namespace's name:\n{text}"
    );
    // What the record said reads back whole, made printable.
    let printable =
        "<script>alert('x')</script> & \"q\" ]]> \u{fffd}[31m\u{fffd}\u{fffd}\u{fffd} next";
    let g = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("run"))
        .expect("run");
    assert_eq!(g.attribute("data-run"), Some("r-<b>&\"'"));
    assert_eq!(
        g.attribute("data-tenant"),
        Some(format!("t<script>&{printable}").as_str())
    );
    let bar = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("data-phase").is_some())
        .nth(1)
        .expect("second bar");
    assert_eq!(
        bar.attribute("data-phase"),
        Some(format!("start{printable}").as_str())
    );
    let title = bar
        .first_element_child()
        .and_then(|t| t.text())
        .expect("title");
    assert!(title.ends_with(&format!("({printable})")), "{title}");
    let head: String = doc
        .descendants()
        .find(|n| n.attribute("class") == Some("head"))
        .expect("head")
        .descendants()
        .filter(|n| n.is_text() && n.parent().is_some_and(|p| !p.has_tag_name("title")))
        .filter_map(|n| n.text())
        .collect();
    assert!(head.ends_with(&format!("— {printable}")), "{head}");
    // The escaping itself.
    assert_eq!(esc("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&#39;");
    assert_eq!(esc("x\ty\u{0}\u{fffe}"), "x y\u{fffd}\u{fffd}");
}

#[test]
fn a_long_cause_is_clipped_in_the_header_and_longer_in_its_hover_title() {
    let mut r = rec("r-long", RunResult::Error, 0, &SIX[..1]);
    r.causes.push("é".repeat(500));
    let text = svg(&[r], "t");
    roxmltree::Document::parse(&text).expect("parses");
    assert!(
        text.contains(&format!("— {}…</text>", "é".repeat(CAUSE_CHARS))),
        "{text}"
    );
    assert!(
        text.contains(&format!("{}…</title>", "é".repeat(300))),
        "{text}"
    );
}

#[test]
fn durations_and_ticks_read_as_a_person_says_them() {
    assert_eq!(duration(340), "340 ms");
    assert_eq!(duration(12_345), "12.3 s");
    assert_eq!(duration(245_000), "4 min 05 s");
    assert_eq!(duration(3_720_000), "1 h 02 min");
    assert_eq!(step(62_450), 10_000);
    assert_eq!(step(800), 100);
    assert_eq!(step(1), 1);
    assert_eq!(step(36_000_000), 3_600_000);
    assert_eq!(step(3_600_000 * 30), 3 * 3_600_000);
    for span in [1_u128, 7, 999, 62_450, 1_799_999, 5_000_000, 80_000_000] {
        assert!(span.div_ceil(step(span)) <= 10, "{span}");
    }
    assert_eq!(tick_label(0), "0");
    assert_eq!(tick_label(500), "500 ms");
    assert_eq!(tick_label(1_500), "1.5 s");
    assert_eq!(tick_label(30_000), "30 s");
    assert_eq!(tick_label(120_000), "2 min");
    assert_eq!(tick_label(90_000), "1 min 30 s");
    assert_eq!(tick_label(7_200_000), "2 h");
    assert_eq!(tick_label(5_400_000), "1 h 30 min");
}

#[test]
fn the_phase_a_result_speaks_of_is_outlined_though_it_ran_to_its_end() {
    // A gate that failed ran to its end: its phase is `ok`, the record names no failed phase.
    let outlined = |result: RunResult| {
        let text = svg(&[rec("r", result, 0, &SIX)], "t");
        let doc = roxmltree::Document::parse(&text).expect("parses");
        doc.descendants()
            .filter(|n| n.attribute("class") == Some("phase failed"))
            .filter_map(|n| n.attribute("data-phase").map(str::to_owned))
            .collect::<Vec<_>>()
    };
    assert_eq!(outlined(RunResult::GateFailed), ["gate"]);
    assert_eq!(outlined(RunResult::AgentFailed), ["agent"]);
    assert!(outlined(RunResult::Passed).is_empty());
    let mut r = rec("r", RunResult::Error, 0, &SIX);
    r.failed_phase = Some("teardown".into());
    let text = svg(&[r], "t");
    assert_eq!(text.matches("class=\"phase failed\"").count(), 1);
    assert!(text.contains("class=\"phase failed\" data-run=\"r\" data-phase=\"teardown\""));
}

/// Attack review: a record whose phase times span (nearly) all of u128 (a corrupted or hand-edited
/// record; records are host-written) must not panic `cyclix runs --svg` (debug: overflow panic
/// at `span.div_ceil(step).max(1) * step`; release: a wrapped axis).
#[test]
fn a_record_spanning_all_of_u128_does_not_overflow_the_axis() {
    let r = rec("r1", RunResult::Passed, 0, &[("agent", 0, u128::MAX)]);
    let s = svg(&[r], "t");
    assert!(!s.contains("inf") && !s.contains("NaN"), "{s}");
}
