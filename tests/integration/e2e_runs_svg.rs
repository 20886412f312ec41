//! `cyclix runs TENANT --svg FILE` on a real run (issue 32, item 5): the picture parses as SVG
//! and holds one bar per phase of the run's record, in the record's order; a record with a
//! phase fewer draws a bar fewer (the count is read from the record, not assumed); a FILE
//! whose directory is missing is refused with the directory named, and nothing is written.

use crate::common::run::{prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// The `data-phase` of every `rect.phase` of `run`'s group in `svg`, in order; the whole
/// document is parsed (an error fails the test) and every bar of the picture must be in a
/// run's group.
fn bars_of(svg: &str, run: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("not XML: {e}\n{svg}"));
    let root = doc.root_element();
    assert!(
        root.has_tag_name(("http://www.w3.org/2000/svg", "svg")),
        "{svg}"
    );
    let is = |n: &roxmltree::Node, tag: &str, class: &str| {
        n.has_tag_name(tag)
            && n.attribute("class")
                .is_some_and(|c| c.split(' ').any(|x| x == class))
    };
    let groups: Vec<_> = root.descendants().filter(|n| is(n, "g", "run")).collect();
    let in_groups: usize = groups
        .iter()
        .map(|g| g.children().filter(|n| is(n, "rect", "phase")).count())
        .sum();
    assert_eq!(
        in_groups,
        root.descendants()
            .filter(|n| is(n, "rect", "phase"))
            .count(),
        "{svg}"
    );
    let g = groups
        .iter()
        .find(|g| g.attribute("data-run") == Some(run))
        .unwrap_or_else(|| panic!("no group of run {run}:\n{svg}"));
    g.children()
        .filter(|n| is(n, "rect", "phase"))
        .map(|b| {
            let phase = b.attribute("data-phase").expect("data-phase").to_owned();
            let title = b
                .children()
                .find(|t| t.has_tag_name("title"))
                .and_then(|t| t.text())
                .unwrap_or_default();
            assert!(title.starts_with(&format!("{phase}: ")), "{title}");
            phase
        })
        .collect()
}

fn phase_names(rec: &serde_json::Value) -> Vec<String> {
    rec["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|p| p["name"].as_str().expect("name").to_owned())
        .collect()
}

/// `cyclix runs T --svg PATH`: the file, after what the verb said and the file's mode are
/// checked.
fn draw(tb: &Testbed, t: &str, path: &str, phases: usize) -> String {
    let out = tb.user_sh(&format!(
        "set -e; {c} runs {t} --svg {path}; stat -c 'mode=%a' {path} >&2; cat {path} >&2",
        c = tb.cyclix_bin()
    ));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}\n{err}");
    let home_path = path.replacen('~', "/home/cyx", 1);
    assert_eq!(
        said,
        format!("wrote {home_path}: 1 run of {t}, {phases} phases\n"),
        "{err}"
    );
    let (mode, svg) = err.split_once('\n').expect("mode, then the file");
    assert_eq!(
        mode, "mode=644",
        "a picture to share, as a redirect leaves it"
    );
    svg.to_owned()
}

#[test]
fn runs_svg_draws_one_bar_per_phase_of_a_real_run() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-runs-svg").write(tb);
    expect_success(
        &tb.user_sh(&format!(
            "rm -rf ~/.local/state/cyclix/runs/{t} ~/e2e-svg; mkdir ~/e2e-svg"
        )),
        "forget earlier runs",
    );
    let out = start(tb, &t);
    let rec = record(tb, &t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    let run = rec["run_id"].as_str().expect("run id").to_owned();
    let phases = phase_names(&rec);
    assert!(
        phases.len() >= 5
            && phases.iter().any(|p| p == "agent")
            && phases.iter().any(|p| p == "gate"),
        "{phases:?}"
    );

    let svg = draw(tb, &t, "~/e2e-svg/runs.svg", phases.len());
    assert_eq!(bars_of(&svg, &run), phases, "one bar per phase, in order");
    assert!(svg.contains("data-result=\"passed\""), "{svg}");
    assert!(!svg.contains("<script") && !svg.contains("href"), "{svg}");

    // Positive control: the same record with its last phase taken out draws one bar fewer.
    expect_success(
        &tb.user_sh(&format!(
            "set -e; f=~/.local/state/cyclix/runs/{t}/{run}.json
             python3 -c 'import json,sys; p=sys.argv[1]; r=json.load(open(p)); r[\"phases\"].pop(); json.dump(r, open(p, \"w\"))' $f"
        )),
        "take a phase out of the record",
    );
    let fewer = record_file(tb, &t, &run);
    assert_eq!(phase_names(&fewer).len(), phases.len() - 1);
    let svg = draw(tb, &t, "~/e2e-svg/runs.svg", phases.len() - 1);
    assert_eq!(bars_of(&svg, &run), phase_names(&fewer), "{svg}");

    // A directory that does not exist: refused, named, nothing written.
    let missing = tb.user_sh(&format!(
        "{c} runs {t} --svg ~/e2e-svg/no-such-dir/runs.svg; echo rc=$?; ls ~/e2e-svg",
        c = tb.cyclix_bin()
    ));
    let said = String::from_utf8_lossy(&missing.stdout);
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(said.contains("rc=1"), "{said}\n{err}");
    assert!(
        err.contains("the directory /home/cyx/e2e-svg/no-such-dir does not exist"),
        "{err}"
    );
    assert!(
        said.ends_with("rc=1\nruns.svg\n"),
        "only the earlier picture: {said}"
    );
}

fn record_file(tb: &Testbed, t: &str, run: &str) -> serde_json::Value {
    let text = expect_success(
        &tb.user_sh(&format!("cat ~/.local/state/cyclix/runs/{t}/{run}.json")),
        "read the record",
    );
    serde_json::from_str(&text).expect("JSON")
}
