use super::*;

fn vars() -> Vec<(String, Vec<u8>)> {
    vec![
        (
            "API_TOKEN".into(),
            b"s3cr3t = with spaces\nand a line".to_vec(),
        ),
        ("OTHER".into(), Vec::new()),
    ]
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_string()).collect()
}

#[test]
fn a_frame_carries_any_value_and_parses_back_to_exactly_the_named_variables() {
    let f = frame(&vars());
    let text = String::from_utf8(f.clone()).expect("utf-8");
    assert!(
        !text.contains("s3cr3t"),
        "values travel base64, one line each: {text}"
    );
    let got = parse(&f, &names(&["OTHER", "API_TOKEN"])).expect("parses");
    assert_eq!(got, vars());
}

#[test]
fn a_frame_that_is_not_exactly_the_hosts_is_refused_and_the_error_names_no_value() {
    let good = frame(&vars());
    let expected = names(&["API_TOKEN", "OTHER"]);
    let refused = |f: &[u8], want: &str| {
        let e = format!("{:#}", parse(f, &expected).expect_err(want));
        assert!(e.contains(want), "{e}");
        assert!(!e.contains("s3cr3t"), "no value in an error: {e}");
    };
    // Cut short: no end line.
    refused(&good[..good.len() - 4], "does not end with");
    // Not the host's first line.
    refused(b"hello\nend\n", "does not start with");
    // A variable the argv does not name (e.g. LD_PRELOAD forged by a writer).
    let mut forged = vars();
    forged.push(("LD_PRELOAD".into(), b"/tmp/x.so".to_vec()));
    refused(&frame(&forged), "does not name");
    // Twice.
    let mut twice = vars();
    twice.push(("OTHER".into(), b"again".to_vec()));
    refused(&frame(&twice), "twice");
    // One missing.
    refused(&frame(&vars()[..1]), "lacks `OTHER`");
    // A NUL byte.
    refused(
        &frame(&[
            ("API_TOKEN".into(), b"a\0b".to_vec()),
            ("OTHER".into(), Vec::new()),
        ]),
        "NUL",
    );
    // Something after the end line.
    let mut after = good.clone();
    after.extend_from_slice(b"OTHER=eA==\nend\n");
    refused(&after, "not NAME=VALUE");
    // Not base64.
    refused(
        format!("{HELLO}\nAPI_TOKEN=%%%\nOTHER=\n{END}\n").as_bytes(),
        "not base64",
    );
}

#[test]
fn the_host_gives_once_agent_wait_reads_and_unlinks_the_path_before_writing() {
    let dir = tempfile::tempdir().expect("tmp");
    let fifo = dir.path().join("handover");
    make(&fifo).expect("mkfifo");
    // Nobody reads: the host's deadline ends it, and says so.
    let e = give(&fifo, &vars(), Duration::from_millis(30)).expect_err("no reader");
    assert!(format!("{e:#}").contains("did not open"), "{e:#}");
    assert!(fifo.exists(), "a failed hand-over leaves the FIFO");
    let p = fifo.clone();
    let reader = std::thread::spawn(move || {
        take(&p, &names(&["API_TOKEN", "OTHER"]), Duration::from_secs(30))
    });
    give(&fifo, &vars(), Duration::from_secs(30)).expect("given");
    assert!(!fifo.exists(), "unlinked once both ends are open");
    let got = reader.join().expect("reader").expect("taken");
    assert_eq!(got, vars());
}

#[test]
fn agent_wait_gives_up_when_no_host_writes_within_its_deadline() {
    let dir = tempfile::tempdir().expect("tmp");
    let fifo = dir.path().join("handover");
    make(&fifo).expect("mkfifo");
    let e = take(&fifo, &names(&["A"]), Duration::from_millis(30)).expect_err("no writer");
    assert!(format!("{e:#}").contains("did not hand"), "{e:#}");
}

#[test]
fn a_reader_that_does_not_read_cannot_hold_the_host_past_its_deadline() {
    let dir = tempfile::tempdir().expect("tmp");
    let fifo = dir.path().join("handover");
    make(&fifo).expect("mkfifo");
    // Opened for reading and never read (as a process left in the container could): a frame
    // larger than the pipe's buffer fills it.
    let p = fifo.clone();
    let holder = std::thread::spawn(move || std::fs::File::open(p).expect("read end"));
    let big = vec![("API_TOKEN".to_string(), vec![b'x'; 256 << 10])];
    let e = give(&fifo, &big, Duration::from_millis(300)).expect_err("held");
    let held = holder.join().expect("holder");
    assert!(format!("{e:#}").contains("no more in time"), "{e:#}");
    drop(held);
}
