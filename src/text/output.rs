//! The agent's and the gate's output as cyclix passes it on (issue 19 item 7, issue 20 item 7):
//! podman's `k8s-file` log records (or a host tier's plain output) joined into lines, every
//! secret value redacted, control and bidi characters replaced ([`super::printable`]), and cut
//! at stated limits with a line saying what was not kept. Pure: `run::output` reads the raw
//! log and writes what [`Tally`] decides.
//!
//! Every line of a container is written as `LABEL| TEXT` (`agent| …`, `gate| …`); cyclix's
//! own lines about the stream start with `cyclix: `. A container cannot print a line that
//! starts with `cyclix: `, so no marker is the agent's.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::{printable, redact};

/// Which stream of a container a piece came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A line longer than this (bytes) is passed on in pieces of at most this length.
pub const MAX_LINE: usize = 16 * 1024;

/// One record of podman's `k8s-file` log (conmon writes the CRI logging format:
/// `TIMESTAMP STREAM TAG CONTENT`, `TAG` `F` for a piece that ends a line, `P` for a partial
/// one): the stream, whether the piece ends a line, and the content. `None`: not such a
/// record.
#[must_use]
pub fn k8s_record(record: &[u8]) -> Option<(Stream, bool, &[u8])> {
    let mut parts = record.splitn(4, |b| *b == b' ');
    let _time = parts.next()?;
    let stream = match parts.next()? {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        _ => return None,
    };
    let ends = match parts.next()? {
        b"F" => true,
        b"P" => false,
        _ => return None,
    };
    Some((stream, ends, parts.next().unwrap_or_default()))
}

/// Joins a stream's pieces into lines and makes each safe: every value of `secrets` (at least
/// [`super::MIN_SECRET_LEN`] bytes) redacted, control and bidi characters replaced. A line
/// over [`MAX_LINE`] is cut, never inside a secret value nor before a piece that may still
/// grow into one.
#[derive(Debug, Clone)]
pub struct Lines {
    secrets: Vec<Vec<u8>>,
    pending: [Vec<u8>; 2],
}

impl Lines {
    /// For a run whose secret values are `secrets`.
    #[must_use]
    pub fn new(secrets: &[&[u8]]) -> Self {
        Lines {
            secrets: secrets
                .iter()
                .filter(|s| s.len() >= super::MIN_SECRET_LEN)
                .map(|s| s.to_vec())
                .collect(),
            pending: [Vec::new(), Vec::new()],
        }
    }

    fn clean(&self, bytes: &[u8]) -> String {
        let refs: Vec<&[u8]> = self.secrets.iter().map(Vec::as_slice).collect();
        printable(&redact(&String::from_utf8_lossy(bytes), &refs))
    }

    /// Where a too long `buf` may be cut: at most [`MAX_LINE`], before the last
    /// (longest secret - 1) bytes (a value may continue past `buf`), never inside a value nor
    /// inside a UTF-8 character. `None`: not yet.
    fn cut(&self, buf: &[u8]) -> Option<usize> {
        let hold = self.secrets.iter().map(Vec::len).max().unwrap_or(1) - 1;
        let mut at = buf.len().saturating_sub(hold).min(MAX_LINE);
        loop {
            let inside = self.secrets.iter().find_map(|s| {
                (at.saturating_sub(s.len() - 1)..at)
                    .find(|&i| buf[i..].starts_with(s) && i + s.len() > at)
            });
            match inside {
                Some(i) => at = i,
                None => break,
            }
        }
        while at > 0 && at < buf.len() && buf[at] & 0xc0 == 0x80 {
            at -= 1;
        }
        (at > 0).then_some(at)
    }

    /// Takes one piece of `stream`; `ends_line`: the piece ends a line. Returns the lines it
    /// completed.
    pub fn feed(&mut self, stream: Stream, piece: &[u8], ends_line: bool) -> Vec<String> {
        let i = usize::from(stream == Stream::Stderr);
        self.pending[i].extend_from_slice(piece);
        let mut out = Vec::new();
        while self.pending[i].len() > MAX_LINE {
            let Some(at) = self.cut(&self.pending[i]) else {
                break;
            };
            let head: Vec<u8> = self.pending[i].drain(..at).collect();
            out.push(self.clean(&head));
        }
        if ends_line {
            let line = std::mem::take(&mut self.pending[i]);
            out.push(self.clean(&line));
        }
        out
    }

    /// Takes plain output (a host tier's, one stream): every `\n` ends a line.
    pub fn feed_plain(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = bytes;
        while let Some(n) = rest.iter().position(|b| *b == b'\n') {
            out.extend(self.feed(Stream::Stdout, &rest[..n], true));
            rest = &rest[n + 1..];
        }
        out.extend(self.feed(Stream::Stdout, rest, false));
        out
    }

    /// The unfinished lines of both streams (the container ended without a last newline).
    pub fn finish(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for i in 0..2 {
            if !self.pending[i].is_empty() {
                let line = std::mem::take(&mut self.pending[i]);
                out.push(self.clean(&line));
            }
        }
        out
    }
}

/// What of a stream is kept and sent on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of lines kept in the run's log from the start (`RUN.agent.log`).
    pub keep_bytes: u64,
    /// Lines sent to the journal from the start (journald drops the rest of a flood at its
    /// rate limit without a note: `RateLimitBurst=`, journald.conf(5)).
    pub journal_lines: u64,
    /// Lines kept from the end once the log was cut.
    pub tail_lines: usize,
}

/// The limits of a run: 4 MiB kept from the start, 1,000 lines to the journal, the last 200
/// lines kept after a cut.
pub const LIMITS: Limits = Limits {
    keep_bytes: 4 * 1024 * 1024,
    journal_lines: 1000,
    tail_lines: 200,
};

/// Where a line goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sink {
    /// Into the run's log (and to `cyclix logs`).
    Keep(String),
    /// To the journal.
    Journal(String),
}

/// A stream's size and what of it was kept, for the record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputSummary {
    /// Lines the container printed.
    pub lines: u64,
    /// Bytes of those lines (as passed on, one newline each).
    pub bytes: u64,
    /// Lines of them in the run's log.
    pub kept_lines: u64,
    /// Lines of them sent to the journal.
    pub journal_lines: u64,
    /// Some lines are not in the run's log (over [`Limits::keep_bytes`]) or not in the
    /// journal (over [`Limits::journal_lines`]).
    pub truncated: bool,
    /// The raw log was rotated by podman (`max-size`) while cyclix read it: lines may be
    /// missing that no count includes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rotated: bool,
}

/// Decides, line by line, what of a stream is kept and sent on ([`LIMITS`]), and counts it.
#[derive(Debug, Clone)]
pub struct Tally {
    limits: Limits,
    label: String,
    hint: String,
    kept_bytes: u64,
    cut: bool,
    dropped: (u64, u64),
    tail: VecDeque<(String, u64)>,
    /// The counts so far.
    pub summary: OutputSummary,
}

impl Tally {
    /// For stream `label` (`agent`, `gate`); `hint` says where the whole kept log is
    /// (`cyclix logs T --run R`).
    #[must_use]
    pub fn new(limits: Limits, label: &str, hint: &str) -> Self {
        Tally {
            limits,
            label: label.into(),
            hint: hint.into(),
            kept_bytes: 0,
            cut: false,
            dropped: (0, 0),
            tail: VecDeque::new(),
            summary: OutputSummary::default(),
        }
    }

    /// Where `line` (a [`Lines`] line) goes, as `LABEL| line`, with cyclix's marker where a
    /// limit is reached.
    pub fn take(&mut self, line: &str) -> Vec<Sink> {
        let text = format!("{}| {line}", self.label);
        let size = line.len() as u64 + 1;
        let s = &mut self.summary;
        s.lines += 1;
        s.bytes += size;
        let mut out = Vec::new();
        if s.journal_lines < self.limits.journal_lines {
            s.journal_lines += 1;
            out.push(Sink::Journal(text.clone()));
        } else if s.journal_lines == self.limits.journal_lines && !s.truncated {
            s.truncated = true;
            out.push(Sink::Journal(format!(
                "cyclix: {} output past {} lines is not sent to the journal; see `{}`",
                self.label, self.limits.journal_lines, self.hint
            )));
        }
        if !self.cut && self.kept_bytes + size <= self.limits.keep_bytes {
            self.kept_bytes += size;
            s.kept_lines += 1;
            out.push(Sink::Keep(text));
            return out;
        }
        if !self.cut {
            self.cut = true;
            s.truncated = true;
            out.push(Sink::Keep(format!(
                "cyclix: {} output past {} bytes is not kept; its last {} lines follow when it ends",
                self.label, self.limits.keep_bytes, self.limits.tail_lines
            )));
        }
        self.dropped.0 += 1;
        self.dropped.1 += size;
        self.tail.push_back((text, size));
        if self.tail.len() > self.limits.tail_lines {
            self.tail.pop_front();
        }
        out
    }

    /// The end of the stream: after a cut, how much was not kept and the last lines.
    pub fn end(&mut self) -> Vec<Sink> {
        if !self.cut {
            return Vec::new();
        }
        let shown = self.tail.len() as u64;
        let shown_bytes: u64 = self.tail.iter().map(|(_, n)| n).sum();
        let mut out = vec![Sink::Keep(format!(
            "cyclix: {} lines ({} bytes) of {} output were not kept; its last {shown} lines follow",
            self.dropped.0 - shown,
            self.dropped.1 - shown_bytes,
            self.label
        ))];
        self.summary.kept_lines += shown;
        out.extend(self.tail.drain(..).map(|(l, _)| Sink::Keep(l)));
        out
    }
}

#[cfg(test)]
mod tests;
