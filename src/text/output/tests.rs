use super::*;

const SECRET: &[u8] = b"hunter2-secret-value";

#[test]
fn k8s_records_give_stream_end_and_content() {
    assert_eq!(
        k8s_record(b"2026-12-01T21:00:00.1+00:00 stdout F hello world"),
        Some((Stream::Stdout, true, &b"hello world"[..]))
    );
    assert_eq!(
        k8s_record(b"2026-12-01T21:00:00.1+00:00 stderr P part"),
        Some((Stream::Stderr, false, &b"part"[..]))
    );
    assert_eq!(
        k8s_record(b"2026-12-01T21:00:00.1+00:00 stdout F"),
        Some((Stream::Stdout, true, &b""[..]))
    );
    assert_eq!(k8s_record(b"garbage"), None);
    assert_eq!(k8s_record(b"t stdin F x"), None);
}

#[test]
fn a_secret_split_over_partial_records_is_redacted_and_escapes_are_replaced() {
    let mut l = Lines::new(&[SECRET]);
    assert!(l.feed(Stream::Stdout, b"key=hunter2-", false).is_empty());
    // The other stream's piece does not join this line.
    assert_eq!(
        l.feed(Stream::Stderr, b"\x1b[31mred", true),
        ["\u{fffd}[31mred"]
    );
    assert_eq!(
        l.feed(Stream::Stdout, b"secret-value end", true),
        ["key=*** end"]
    );
    assert_eq!(l.feed_plain(b"a\nhunter2-secret-value\nb"), ["a", "***"]);
    assert_eq!(l.finish(), ["b"]);
}

#[test]
fn a_long_line_is_cut_but_never_inside_or_before_a_secret() {
    for at in [MAX_LINE - 10, MAX_LINE - 3, MAX_LINE + 5, MAX_LINE * 2 - 7] {
        let mut l = Lines::new(&[SECRET]);
        let mut line = vec![b'x'; at];
        line.extend_from_slice(SECRET);
        line.extend(vec![b'y'; MAX_LINE]);
        let mut out = Vec::new();
        // In pieces of 1000 bytes, as conmon may split it.
        for piece in line.chunks(1000) {
            out.extend(l.feed(Stream::Stdout, piece, false));
        }
        out.extend(l.feed(Stream::Stdout, b"", true));
        let joined = out.concat();
        assert!(!joined.contains("hunter2"), "cut at {at}: leaked");
        assert_eq!(joined.len(), at + 3 + MAX_LINE, "cut at {at}");
        assert!(out.len() >= 2 && out.iter().all(|p| p.len() <= MAX_LINE));
    }
}

#[test]
fn a_cut_never_splits_a_utf8_character() {
    let mut l = Lines::new(&[]);
    let line = "ü".repeat(MAX_LINE);
    let out = l.feed(Stream::Stdout, line.as_bytes(), true);
    assert!(out.len() > 1);
    assert_eq!(out.concat(), line, "no U+FFFD from a split character");
}

#[test]
fn the_tally_keeps_the_head_marks_the_cut_and_keeps_the_tail() {
    let limits = Limits {
        keep_bytes: 30,
        journal_lines: 2,
        tail_lines: 2,
    };
    let mut t = Tally::new(limits, "agent", "cyclix logs t --run r");
    let mut sinks = Vec::new();
    for i in 0..10 {
        sinks.extend(t.take(&format!("line {i}")));
    }
    sinks.extend(t.end());
    let kept: Vec<&str> = sinks
        .iter()
        .filter_map(|s| match s {
            Sink::Keep(l) => Some(l.as_str()),
            Sink::Journal(_) => None,
        })
        .collect();
    let journal: Vec<&str> = sinks
        .iter()
        .filter_map(|s| match s {
            Sink::Journal(l) => Some(l.as_str()),
            Sink::Keep(_) => None,
        })
        .collect();
    assert_eq!(kept[3], "agent| line 3");
    assert!(kept[4].starts_with("cyclix: agent output past 30 bytes is not kept"));
    assert_eq!(
        kept[5],
        "cyclix: 4 lines (28 bytes) of agent output were not kept; its last 2 lines follow"
    );
    assert_eq!(&kept[6..], ["agent| line 8", "agent| line 9"]);
    assert_eq!(journal.len(), 3);
    assert!(journal[2].contains("past 2 lines is not sent to the journal; see `cyclix logs t"));
    let s = &t.summary;
    assert_eq!((s.lines, s.kept_lines, s.journal_lines), (10, 6, 2));
    assert!(s.truncated);
}

#[test]
fn a_short_stream_is_kept_whole_and_unmarked() {
    let mut t = Tally::new(LIMITS, "gate", "h");
    let sinks: Vec<Sink> = ["a", "b"].iter().flat_map(|l| t.take(l)).collect();
    assert_eq!(sinks.len(), 4);
    assert!(t.end().is_empty());
    assert!(!t.summary.truncated);
}
