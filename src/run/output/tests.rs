use std::io::Write as _;

use super::*;

fn follow_of(dir: &std::path::Path, format: Format) -> OutputFollow {
    OutputFollow {
        unit: "cyclix-r-agent.service".into(),
        label: "agent",
        source: dir.join("agent.out"),
        format,
        kept: Some(dir.join("r.agent.log")),
        secrets: vec![b"hunter2-secret".to_vec()],
        hint: "cyclix logs t --run r".into(),
        journal: false,
    }
}

#[test]
fn a_k8s_file_is_read_redacted_and_kept_including_what_came_after_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = follow_of(dir.path(), Format::K8sFile);
    let mut raw = File::create(&f.source).expect("raw");
    raw.write_all(b"2026-12-01T21:00:00.1+00:00 stdout F first\n2026-12-01T21:00:00.2+00:00 stdout P key=hunter2-")
        .expect("write");
    let kept = f.kept.clone().expect("kept");
    let follower = Follower::start(f).expect("start");
    raw.write_all(b"secret\n2026-12-01T21:00:00.3+00:00 stdout F  end\n2026-12-01T21:00:00.4+00:00 stderr F \x1b]0;title\x07\n")
        .expect("write");
    let c = follower.finish().expect("finish");
    assert_eq!(
        c.lines,
        ["first", "key=*** end", "\u{fffd}]0;title\u{fffd}"]
    );
    assert_eq!(c.summary.lines, 3);
    assert!(!c.summary.truncated);
    let log = std::fs::read_to_string(kept).expect("kept log");
    assert_eq!(
        log,
        "agent| first\nagent| key=*** end\nagent| \u{fffd}]0;title\u{fffd}\n"
    );
}

#[test]
fn plain_output_without_a_last_newline_and_a_missing_file_end_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = follow_of(dir.path(), Format::Plain);
    std::fs::write(&f.source, "one\ntwo hunter2-secret").expect("raw");
    let c = Follower::start(f).expect("start").finish().expect("finish");
    assert_eq!(c.lines, ["one", "two ***"]);
    let none = follow_of(&dir.path().join("never"), Format::K8sFile);
    let mut none = none;
    none.kept = None;
    let c = Follower::start(none)
        .expect("start")
        .finish()
        .expect("finish");
    assert!(c.lines.is_empty() && c.summary.lines == 0);
}
