//! Running a child whose output is shown as it comes (a long `podman build`): every line of
//! its stdout and stderr goes to a callback as soon as it is written, and the last lines are
//! kept for the error.

use std::io::BufRead as _;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{ProcessError, show};

/// How a streamed child ended.
#[derive(Debug, Clone)]
pub struct Streamed {
    /// Exit status.
    pub status: ExitStatus,
    /// The last lines of its stdout and stderr, interleaved as they came (at most the
    /// `keep` of [`run_streaming`]).
    pub tail: Vec<String>,
}

/// Runs `program args…` (stdin `/dev/null`, `env` set as [`super::Opts::env`] is) for at most
/// `deadline`, handing every output line (lossy UTF-8, without its newline) to `on_line` as it
/// comes, and keeps the last `keep` lines.
///
/// `stop`, when given, is looked at every 200 ms: once its flag is set (SIGTERM or SIGINT to
/// cyclix), its hook runs once (e.g. ending the child's work so it cleans up after itself) and
/// the child gets [`STOP_GRACE`] to exit; then it is killed.
///
/// # Errors
/// [`ProcessError::Spawn`], [`ProcessError::Deadline`] or [`ProcessError::Stopped`] (the
/// child is killed).
#[allow(clippy::too_many_arguments)] // one streamed command: what, how long, where its lines go
pub fn run_streaming(
    program: &str,
    args: &[&str],
    env: &[(&str, Option<&str>)],
    deadline: Duration,
    hint: &str,
    keep: usize,
    stop: Option<(&std::sync::atomic::AtomicBool, &dyn Fn())>,
    on_line: &mut dyn FnMut(&str),
) -> Result<Streamed, ProcessError> {
    let stopped = || stop.is_some_and(|(s, _)| s.load(std::sync::atomic::Ordering::SeqCst));
    let mut grace_end: Option<Instant> = None;
    let shown = show(program, args);
    tracing::debug!(argv = %shown, deadline_ms = deadline.as_millis(), "running (streamed)");
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let mut child = cmd.spawn().map_err(|source| ProcessError::Spawn {
        argv: shown.clone(),
        source,
        hint: hint.to_string(),
    })?;
    let (rx, readers) = readers_of(&mut child);
    let start = Instant::now();
    let mut tail: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    loop {
        let left = deadline.saturating_sub(start.elapsed());
        if stopped() {
            let end = *grace_end.get_or_insert_with(|| {
                if let Some((_, hook)) = stop {
                    hook();
                }
                Instant::now() + STOP_GRACE
            });
            if Instant::now() >= end || matches!(child.try_wait(), Ok(Some(_))) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ProcessError::Stopped { argv: shown });
            }
        }
        if left.is_zero() {
            let _ = child.kill();
            let _ = child.wait();
            // What it printed up to its kill is kept (the lines still on their way included).
            while let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
                keep_last(&mut tail, line, keep);
            }
            return Err(ProcessError::Deadline {
                argv: shown,
                after_ms: deadline.as_millis(),
                tail: tail.into_iter().collect(),
            });
        }
        match rx.recv_timeout(left.min(Duration::from_millis(200))) {
            Ok(line) => {
                on_line(&line);
                keep_last(&mut tail, line, keep);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // Both pipes are closed: the child has exited or is about to.
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ProcessError::Deadline {
                    argv: shown,
                    after_ms: deadline.as_millis(),
                    tail: tail.into_iter().collect(),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(source) => {
                return Err(ProcessError::Spawn {
                    argv: shown,
                    source,
                    hint: hint.to_string(),
                });
            }
        }
    };
    for r in readers {
        let _ = r.join();
    }
    if grace_end.is_some() {
        return Err(ProcessError::Stopped { argv: shown });
    }
    Ok(Streamed {
        status,
        tail: tail.into_iter().collect(),
    })
}

/// A channel of `child`'s output lines (stdout and stderr as they come) and its reader
/// threads (they end at EOF).
fn readers_of(
    child: &mut std::process::Child,
) -> (mpsc::Receiver<String>, Vec<std::thread::JoinHandle<()>>) {
    let (tx, rx) = mpsc::channel::<String>();
    let mut readers = Vec::new();
    if let Some(out) = child.stdout.take() {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || forward(out, &tx)));
    }
    if let Some(err) = child.stderr.take() {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || forward(err, &tx)));
    }
    (rx, readers)
}

/// Appends `line` to `tail`, keeping its last `keep` lines.
fn keep_last(tail: &mut std::collections::VecDeque<String>, line: String, keep: usize) {
    tail.push_back(line);
    while tail.len() > keep {
        tail.pop_front();
    }
}

/// How long a stopped child may take to exit by itself after the stop's hook: 10 s.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// Sends each line of `from` to `tx` until EOF.
fn forward(from: impl std::io::Read, tx: &mpsc::Sender<String>) {
    let mut r = std::io::BufReader::new(from);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf);
                let line = line.trim_end_matches(['\n', '\r']).to_string();
                if tx.send(line).is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_come_as_written_and_the_tail_is_kept() {
        let mut seen = Vec::new();
        let out = run_streaming(
            "sh",
            &["-c", "echo one; echo two >&2; echo three; exit 3"],
            &[],
            Duration::from_secs(10),
            "",
            2,
            None,
            &mut |l| seen.push(l.to_string()),
        )
        .expect("runs");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert_eq!(out.tail.len(), 2);
    }

    #[test]
    fn a_child_past_its_deadline_is_killed() {
        let mut seen = Vec::new();
        let e = run_streaming(
            "sh",
            &["-c", "echo before; sleep 5"],
            &[],
            Duration::from_millis(500),
            "",
            5,
            None,
            &mut |l| seen.push(l.to_string()),
        )
        .expect_err("deadline");
        // Every line it printed before its kill is in the error's tail, the ones still on
        // their way when the deadline hit drained into it.
        match &e {
            ProcessError::Deadline { tail, .. } => {
                assert!(seen.iter().all(|l| tail.contains(l)), "{seen:?} {tail:?}");
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn a_stopped_child_is_killed() {
        let stop = std::sync::atomic::AtomicBool::new(true);
        let e = run_streaming(
            "sh",
            &["-c", "sleep 60"],
            &[],
            Duration::from_secs(120),
            "",
            5,
            Some((&stop, &|| {})),
            &mut |_| {},
        )
        .expect_err("stopped");
        assert!(matches!(e, ProcessError::Stopped { .. }), "{e}");
    }
}
