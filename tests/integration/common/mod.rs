//! Helpers shared by the integration tests.

pub mod deb;
pub mod run;
pub mod tenant;
pub mod testbed;

/// Writes `text` to `path` as an executable script (mode 0755) from a child process: a file
/// this test process held open for writing while another test's thread forked would make its
/// exec fail with `ETXTBSY` (the descriptor is copied into the forked child until its exec).
///
/// # Panics
/// When the script cannot be written.
pub fn write_executable(path: &std::path::Path, text: &str) {
    use std::io::Write as _;
    let mut child = std::process::Command::new("sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("sh");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write the script");
    assert!(
        child.wait().expect("sh").success(),
        "writing {}",
        path.display()
    );
}

/// The number `KEY=N` among the space-separated words of `line` (a test script's one-line
/// count, `seen=3 hits=0`); 0 when it is not there or not a number.
#[must_use]
pub fn count(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The value of the first `KEY=VALUE` line of `out` (a test script's report), trimmed.
///
/// # Panics
/// If `out` has no such line (the message shows `out`).
pub fn kv(out: &str, key: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in:\n{out}"))
        .trim()
        .to_string()
}
