//! The FIFO through which the held-back agent container hands the host its probe report
//! (issue 16): `ctl/report` in the run's control directory, made in prepare, opened by the
//! host at the start of the probe phase (which lets `cyclix agent-wait --report` run the
//! suite), read until agent-wait closes its end, then removed. The agent's command does not
//! exist before the go file, so the only writer there can be is agent-wait itself.

use std::io::Read as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

/// The largest report read (42 probe lines are some 20 KiB): more is refused.
pub const MAX_REPORT: usize = 4 << 20;

/// How often the read end is looked at while agent-wait has not written or not finished.
const POLL: Duration = Duration::from_millis(1);

/// Makes the FIFO at `path` (mode 0600, the host user's: the container's user maps to it).
///
/// # Errors
/// `mkfifo` failed (named with the path).
pub fn make(path: &Path) -> Result<()> {
    nix::unistd::mkfifo(
        path,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .with_context(|| format!("making the probe report FIFO {}", path.display()))
}

/// Opens the FIFO's read end (non-blocking: agent-wait may not have opened its end yet) and
/// reads until the writer closed after writing, within `deadline`.
///
/// # Errors
/// The FIFO cannot be opened or read; nothing ended within `deadline` (agent-wait is not
/// there or hangs); the report is larger than [`MAX_REPORT`].
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
    loop {
        match f.read(&mut buf) {
            // No writer: not yet there (nothing read) or done (its report read).
            Ok(0) if !out.is_empty() => break,
            Ok(0) => {}
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
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
    Ok(String::from_utf8_lossy(&out).into_owned())
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
            std::io::Write::write_all(
                &mut f,
                b"{\"id\":\"P1\",\"verdict\":\"PASS\"}\n{\"summary\":true,\"pass\":1,\"fail\":0,\"wall_ms\":1}\n",
            )
            .expect("write");
        });
        let text = read(&fifo, Duration::from_secs(10)).expect("a report");
        writer.join().expect("writer");
        assert_eq!(exit_of(&text), 0, "{text}");
        assert!(text.starts_with("{\"id\":\"P1\""), "{text}");
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
