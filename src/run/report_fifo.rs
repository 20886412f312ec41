//! The FIFO through which the held-back agent container hands the host its probe report
//! (issue 16): `ctl/report` in the run's control directory, made in prepare, opened by the
//! host at the start of the probe phase (which lets `cyclix agent-wait --report` open its
//! write end), and read until agent-wait closes its end. Agent-wait first writes [`HELLO`];
//! on reading it the host unlinks the FIFO, and agent-wait runs the suite only once the path
//! is gone. Before the suite nothing of the image runs in the container (the agent's command
//! does not exist before the go file), so the one writer is agent-wait; once the suite runs
//! image code (P6's setuid child, P9's) there is no path left to open: no other process can
//! write a report line (agent-wait's descriptor is close-on-exec).

use std::io::Read as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

/// The largest report read (42 probe lines are some 20 KiB): more is refused.
pub const MAX_REPORT: usize = 4 << 20;

/// The first line agent-wait writes, before any probe ran: the host unlinks the FIFO on it.
pub const HELLO: &str = "cyclix-agent-wait-report-v1";

/// How often the read end is looked at while agent-wait has not written or not finished.
const POLL: Duration = Duration::from_millis(1);

/// Makes the FIFO at `path` (mode 0600, the host user's: the container's user maps to it).
///
/// # Errors
/// `mkfifo` failed (named with the path).
pub fn make(path: &Path) -> Result<()> {
    make_private(path, "the probe report FIFO")
}

/// Makes a FIFO of the control directory at `path`, mode 0600 (the host user's: the
/// container's user maps to it); `what` names it in the error.
///
/// # Errors
/// `mkfifo` failed (named with `what` and the path).
pub(crate) fn make_private(path: &Path, what: &str) -> Result<()> {
    nix::unistd::mkfifo(
        path,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .with_context(|| format!("making {what} {}", path.display()))
}

/// Opens the FIFO's read end (non-blocking: agent-wait may not have opened its end yet) and
/// reads until the writer closed after writing, within `deadline`. The FIFO is unlinked as
/// soon as the [`HELLO`] line is in (agent-wait waits for that before its first probe); the
/// report returned is what follows it.
///
/// # Errors
/// The FIFO cannot be opened, read or unlinked; the first line is not [`HELLO`]; nothing
/// ended within `deadline` (agent-wait is not there or hangs); the report is larger than
/// [`MAX_REPORT`].
pub fn read(path: &Path, deadline: Duration) -> Result<String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("opening the probe report FIFO {}", path.display()))?;
    let start = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 16 << 10];
    let mut unlinked = false;
    loop {
        match f.read(&mut buf) {
            // No writer: not yet there (nothing read) or done (its report read).
            Ok(0) if unlinked || !out.is_empty() => break,
            Ok(0) => {}
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if !unlinked && out.contains(&b'\n') {
                    out = hello_taken(path, out)?;
                    unlinked = true;
                }
                if out.len() > MAX_REPORT {
                    bail!(
                        "the probe report in {} is over {MAX_REPORT} bytes: not a report of the suite",
                        path.display()
                    );
                }
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("reading the probe report {}", path.display()));
            }
        }
        if start.elapsed() >= deadline {
            bail!(
                "no complete probe report from the agent container within {} ms ({} bytes came): \
                 its `cyclix agent-wait --report` did not run the suite (see the agent unit's journal)",
                deadline.as_millis(),
                out.len()
            );
        }
        std::thread::sleep(POLL);
    }
    if !unlinked {
        bail!(
            "the probe report in {} ended before its first line: not agent-wait's report",
            path.display()
        );
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Checks that `out` starts with the [`HELLO`] line, unlinks the FIFO at `path` (agent-wait
/// waits for that before its first probe) and returns what follows the line.
fn hello_taken(path: &Path, mut out: Vec<u8>) -> Result<Vec<u8>> {
    let end = out.iter().position(|b| *b == b'\n').unwrap_or(out.len());
    if &out[..end] != HELLO.as_bytes() {
        bail!(
            "the probe report in {} does not start with agent-wait's line `{HELLO}`: not written \
             by this cyclix's agent-wait (is the mounted cyclix binary the host's?)",
            path.display()
        );
    }
    std::fs::remove_file(path).with_context(|| {
        format!(
            "removing the probe report FIFO {} before the probes run (its directory must be the host user's)",
            path.display()
        )
    })?;
    Ok(out.split_off((end + 1).min(out.len())))
}

/// The exit status `cyclix probe` would have had for `report`: 0 when its summary line counts
/// no failure, 1 when it counts one, -1 without a summary line. Pure.
#[must_use]
pub fn exit_of(report: &str) -> i32 {
    report
        .lines()
        .filter_map(|l| serde_json::from_str::<crate::probe::Summary>(l.trim()).ok())
        .find(|s| s.summary)
        .map_or(-1, |s| i32::from(s.fail > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_read_until_its_writer_closes_and_a_silent_fifo_times_out() {
        let dir = tempfile::tempdir().expect("tmp");
        let fifo = dir.path().join("report");
        make(&fifo).expect("mkfifo");
        // Nobody writes: the deadline ends it, and says so.
        let e = read(&fifo, Duration::from_millis(50)).expect_err("no writer");
        assert!(
            format!("{e:#}").contains("no complete probe report"),
            "{e:#}"
        );
        let w = fifo.clone();
        let writer = std::thread::spawn(move || {
            // Like agent-wait: wait for a reader, then write and close.
            let f = loop {
                use std::os::unix::fs::OpenOptionsExt as _;
                match std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&w)
                {
                    Ok(f) => break f,
                    Err(e) if e.raw_os_error() == Some(libc::ENXIO) => std::thread::yield_now(),
                    Err(e) => panic!("open: {e}"),
                }
            };
            let mut f = f;
            std::io::Write::write_all(&mut f, format!("{HELLO}\n").as_bytes()).expect("write");
            // Like agent-wait: no probe before the host unlinked the FIFO.
            while w.symlink_metadata().is_ok() {
                std::thread::yield_now();
            }
            std::io::Write::write_all(
                &mut f,
                b"{\"id\":\"P1\",\"verdict\":\"PASS\"}\n{\"summary\":true,\"pass\":1,\"fail\":0,\"wall_ms\":1}\n",
            )
            .expect("write");
        });
        let text = read(&fifo, Duration::from_secs(10)).expect("a report");
        writer.join().expect("writer");
        assert!(
            !fifo.exists(),
            "the FIFO is unlinked once agent-wait's line is in"
        );
        assert_eq!(exit_of(&text), 0, "{text}");
        assert!(text.starts_with("{\"id\":\"P1\""), "{text}");
    }

    /// Opens `fifo`'s write end once the host has its read end open (ENXIO before).
    fn open_when_read(fifo: &Path) -> std::fs::File {
        loop {
            match forge_open(fifo) {
                Ok(f) => break f,
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => std::thread::yield_now(),
                Err(e) => panic!("open: {e}"),
            }
        }
    }

    /// Opens `fifo` for writing as a forger would (non-blocking).
    fn forge_open(fifo: &Path) -> std::io::Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(fifo)
    }

    #[test]
    fn once_agent_wait_said_hello_no_other_process_can_open_the_fifo() {
        let dir = tempfile::tempdir().expect("tmp");
        let fifo = dir.path().join("report");
        make(&fifo).expect("mkfifo");
        let (w, ready) = (fifo.clone(), std::sync::mpsc::channel::<()>());
        let (tx, rx) = ready;
        let writer = std::thread::spawn(move || {
            let mut f = open_when_read(&w);
            // Positive control: while the host reads and before the hello, a second writer
            // (what P6's setuid child of the image would be) can open the path.
            let early = forge_open(&w);
            assert!(
                early.is_ok(),
                "the control: the FIFO opens before the hello: {early:?}"
            );
            drop(early);
            std::io::Write::write_all(&mut f, format!("{HELLO}\n").as_bytes()).expect("hello");
            while w.symlink_metadata().is_ok() {
                std::thread::yield_now();
            }
            // The probes (image code) run from here: the path is gone.
            let late = forge_open(&w).map(|_| ());
            assert_eq!(
                late.map_err(|e| e.kind()),
                Err(std::io::ErrorKind::NotFound),
                "a process of the suite could still open the report FIFO"
            );
            tx.send(()).expect("send");
            std::io::Write::write_all(
                &mut f,
                b"{\"summary\":true,\"pass\":1,\"fail\":0,\"wall_ms\":1}\n",
            )
            .expect("write");
        });
        let text = read(&fifo, Duration::from_secs(10)).expect("a report");
        writer.join().expect("writer");
        rx.recv().expect("the writer checked after the unlink");
        assert_eq!(
            text,
            "{\"summary\":true,\"pass\":1,\"fail\":0,\"wall_ms\":1}\n"
        );
    }

    #[test]
    fn a_report_without_agent_waits_first_line_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let fifo = dir.path().join("report");
        make(&fifo).expect("mkfifo");
        let w = fifo.clone();
        let writer = std::thread::spawn(move || {
            let mut f = open_when_read(&w);
            std::io::Write::write_all(
                &mut f,
                b"{\"summary\":true,\"pass\":1,\"fail\":0,\"wall_ms\":1}\n",
            )
            .expect("write");
        });
        let e = read(&fifo, Duration::from_secs(10)).expect_err("a forged report");
        writer.join().expect("writer");
        assert!(
            format!("{e:#}").contains("does not start with agent-wait's line"),
            "{e:#}"
        );
        // Positive control: the same lines after the hello are a report.
        let ok = hello_taken(&fifo, format!("{HELLO}\nx\n").into_bytes()).expect("taken");
        assert_eq!(ok, b"x\n");
    }

    #[test]
    fn the_exit_follows_the_summary() {
        assert_eq!(
            exit_of("{\"summary\":true,\"pass\":1,\"fail\":2,\"wall_ms\":3}\n"),
            1
        );
        assert_eq!(exit_of("{\"id\":\"P1\",\"verdict\":\"PASS\"}\n"), -1);
        assert_eq!(exit_of(""), -1);
    }
}
