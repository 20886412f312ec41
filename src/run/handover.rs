//! The agent's variables (`agent.env`) handed to its held-back container at the go, through a
//! FIFO in the run's control directory (`ctl/handover`), instead of podman secrets fixed when
//! the container is created (issue 33, item 2: the first step toward an agent container made
//! before its run).
//!
//! Prepare makes the FIFO (mode 0600, the host user's, like the report FIFO:
//! [`super::report_fifo`]). The agent's `cyclix agent-wait --handover FIFO --vars A,B` opens
//! its read end once the go file is there and blocks until the host writes; the host, right
//! after writing the go file ([`give`]), opens the write end as soon as agent-wait's read end
//! is open, unlinks the path (nothing else can open it from then on), writes one frame
//! ([`frame`]) and closes. Agent-wait reads the frame to its end ([`parse`]: exactly the
//! variables its argv names, each once, then the end line), adds them to the agent's
//! environment and `exec`s the agent; any other frame and the agent never starts.
//!
//! What this gives: the values are never in podman's secret store, never in the container's
//! first process's environment, and a container whose boundary was refused never had them (the
//! probes ran without them). What holds it: at the go nothing but the container's init and
//! agent-wait runs there (`phases::probe`'s look after the report refuses the go otherwise), so
//! no other process can open the FIFO, forge a frame or hold the host's write; and the write
//! never blocks past its deadline. What it does not cover: the baseline gets the values from the
//! host as `podman exec --env VAR` (values in podman's environment, never its argv), and podman
//! keeps that exec's environment on disk (its exec bundle and database) while it runs.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use base64::Engine as _;

/// The frame's first line.
pub const HELLO: &str = "cyclix-agent-wait-handover-v1";

/// The frame's last line.
pub const END: &str = "end";

/// The largest frame agent-wait reads (the values of a run's variables are far smaller).
pub const MAX_FRAME: usize = 1 << 20;

/// How often the host tries the FIFO for a reader while agent-wait has not opened it.
const POLL: Duration = Duration::from_millis(1);

/// Makes the FIFO at `path` (mode 0600, the host user's: the container's user maps to it).
///
/// # Errors
/// `mkfifo` failed (named with the path).
pub fn make(path: &Path) -> Result<()> {
    super::report_fifo::make_private(path, "the agent's hand-over FIFO")
}

/// The frame carrying `vars` (name, value): [`HELLO`], one `NAME=BASE64(VALUE)` line each,
/// [`END`]. Pure.
#[must_use]
pub fn frame(vars: &[(String, Vec<u8>)]) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut out = format!("{HELLO}\n");
    for (name, value) in vars {
        out.push_str(name);
        out.push('=');
        out.push_str(&b64.encode(value));
        out.push('\n');
    }
    out.push_str(END);
    out.push('\n');
    out.into_bytes()
}

/// The variables of `frame`, which must carry exactly `expected` (in any order, each once),
/// then [`END`] and nothing after it; no value may hold a NUL byte (no environment can carry
/// one). Pure.
///
/// # Errors
/// Anything else (the error says what, never a value).
pub fn parse(frame: &[u8], expected: &[String]) -> Result<Vec<(String, Vec<u8>)>> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let text = std::str::from_utf8(frame).context("the hand-over is not UTF-8")?;
    let Some(body) = text.strip_prefix(&format!("{HELLO}\n")) else {
        bail!("the hand-over does not start with `{HELLO}`: not the host's");
    };
    let Some(body) = body.strip_suffix(&format!("{END}\n")) else {
        bail!("the hand-over does not end with `{END}`: cut short, or not the host's");
    };
    let mut got: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, line) in body.lines().enumerate() {
        let Some((name, value)) = line.split_once('=') else {
            bail!("line {} of the hand-over is not NAME=VALUE", i + 2);
        };
        if !expected.iter().any(|e| e == name) {
            bail!("the hand-over carries `{name}`, which the agent's argv does not name");
        }
        if got.iter().any(|(n, _)| n == name) {
            bail!("the hand-over carries `{name}` twice");
        }
        let value = b64
            .decode(value)
            .with_context(|| format!("the value of `{name}` in the hand-over is not base64"))?;
        if value.contains(&0) {
            bail!("the value of `{name}` holds a NUL byte: no environment can carry it");
        }
        got.push((name.to_string(), value));
    }
    if let Some(missing) = expected.iter().find(|e| !got.iter().any(|(n, _)| n == *e)) {
        bail!("the hand-over lacks `{missing}`");
    }
    Ok(got)
}

/// Hands `vars` to the agent-wait whose read end of the FIFO at `path` opens within
/// `deadline`: opens the write end, unlinks the path, writes the [`frame`] and closes, all
/// within `deadline` (the writes never block: a reader that does not read cannot hold the run).
///
/// # Errors
/// No reader within `deadline` (agent-wait is not there, or did not see the go), the frame
/// not taken within it, the FIFO cannot be opened, unlinked or written (each named with the
/// path).
pub fn give(path: &Path, vars: &[(String, Vec<u8>)], deadline: Duration) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let start = Instant::now();
    let f = loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
        {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && start.elapsed() < deadline => {
                std::thread::sleep(POLL);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => bail!(
                "the agent's `cyclix agent-wait` did not open its hand-over FIFO {} within {} ms \
                 of the go: the agent does not start without its variables",
                path.display(),
                deadline.as_millis()
            ),
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("opening the agent's hand-over FIFO {}", path.display())
                });
            }
        }
    };
    // Both ends are open: the path is no longer needed, and nothing can open it after this.
    std::fs::remove_file(path)
        .with_context(|| format!("removing the agent's hand-over FIFO {}", path.display()))?;
    write_within(&f, &frame(vars), start + deadline)
        .with_context(|| format!("writing the agent's hand-over FIFO {}", path.display()))
}

/// Writes all of `bytes` into the non-blocking `f` by `end`, waiting (`poll`) while the pipe is
/// full.
///
/// # Errors
/// `end` passed with bytes left (the error says how many went), or a write failed.
fn write_within(f: &std::fs::File, bytes: &[u8], end: Instant) -> Result<()> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::io::Write as _;
    use std::os::fd::AsFd as _;
    let mut off = 0;
    let mut w = f;
    while off < bytes.len() {
        match w.write(&bytes[off..]) {
            Ok(n) => off += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let left = end.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    bail!(
                        "the reader took {off} of the frame's {} bytes and no more in time: \
                         something holds the FIFO without reading; the agent does not start",
                        bytes.len()
                    );
                }
                let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
                let mut fds = [PollFd::new(f.as_fd(), PollFlags::POLLOUT)];
                // A wake-up (room, an error, the time) is looked at by the next write.
                let _ = poll(&mut fds, PollTimeout::from(ms));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Reads the frame from the FIFO at `path` (agent-wait's side): opens the read end (blocking
/// until the host opens the write end) and reads to the end, at most [`MAX_FRAME`] bytes, all
/// within `deadline` (the read runs on a thread of its own: an open of a FIFO cannot time out);
/// then [`parse`] with `expected`.
///
/// # Errors
/// Nothing came within `deadline`, the FIFO cannot be opened or read, the frame is larger than
/// [`MAX_FRAME`], or [`parse`] refuses it.
pub fn take(
    path: &Path,
    expected: &[String],
    deadline: Duration,
) -> Result<Vec<(String, Vec<u8>)>> {
    use std::io::Read as _;
    let (tx, rx) = std::sync::mpsc::channel();
    let p = path.to_path_buf();
    std::thread::spawn(move || {
        let read = std::fs::File::open(&p).and_then(|f| {
            let mut out = Vec::new();
            f.take(MAX_FRAME as u64 + 1).read_to_end(&mut out)?;
            Ok(out)
        });
        let _ = tx.send(read);
    });
    let frame = match rx.recv_timeout(deadline) {
        Ok(r) => r.with_context(|| format!("reading the hand-over FIFO {}", path.display()))?,
        Err(_) => bail!(
            "the host did not hand the agent its variables within {} s of the go",
            deadline.as_secs()
        ),
    };
    if frame.len() > MAX_FRAME {
        bail!("the hand-over is over {MAX_FRAME} bytes: not the host's");
    }
    parse(&frame, expected)
}

#[cfg(test)]
mod tests;
