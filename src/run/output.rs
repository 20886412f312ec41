//! Reading the agent's and the gate's output while they run (issue 19 item 7): podman writes
//! a container's output to a raw file in the run directory (`k8s-file` log driver, see
//! [`crate::render::plan::ContainerPlan::log_file`]), a host tier's unit appends it to one
//! (`StandardOutput=append:`); a [`Follower`] thread reads it as it grows, passes every line
//! through [`crate::text::output`] (secret values redacted, escapes replaced, limits marked)
//! and writes the result to the run's log in the records directory (`RUN.agent.log`, what
//! `cyclix logs [-f]` shows) and, up to a limit, to cyclix's stderr (the run unit's journal).
//! The raw file never leaves the run directory, which teardown removes.

use std::fs::File;
use std::io::{BufWriter, Read as _, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow};

use crate::text::output::{LIMITS, Lines, OutputSummary, Sink, Tally, k8s_record};

/// How the raw file is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// podman's `k8s-file` records (`TIMESTAMP STREAM F|P CONTENT`).
    K8sFile,
    /// The command's bytes as it wrote them (a host tier's unit).
    Plain,
}

/// What to follow and where its lines go.
#[derive(Debug, Clone)]
pub struct OutputFollow {
    /// The unit whose output it is (the key of [`super::seam::RunJournal::output`]).
    pub unit: String,
    /// `agent` or `gate`: the prefix of every line (`agent| …`).
    pub label: &'static str,
    /// The raw file (need not exist yet).
    pub source: PathBuf,
    /// Its layout.
    pub format: Format,
    /// The run's log (`RUN.agent.log`), created empty at once; `None`: lines are only
    /// returned.
    pub kept: Option<PathBuf>,
    /// The run's secret values.
    pub secrets: Vec<Vec<u8>>,
    /// Where the whole kept log is shown (`cyclix logs T --run R`), named by the markers.
    pub hint: String,
    /// Send lines to stderr (cyclix runs under its run unit: stderr is the journal).
    pub journal: bool,
}

/// A stream's lines as cyclix kept them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The container's lines (redacted, printable), without the `LABEL| ` prefix: the head,
    /// and after a cut its last lines; cyclix's markers are not among them.
    pub lines: Vec<String>,
    /// Counts and whether anything was cut.
    pub summary: OutputSummary,
}

/// How often a follower looks for more output when it found none (ms).
const POLL: Duration = Duration::from_millis(100);

/// A thread following one raw file.
#[derive(Debug)]
pub struct Follower {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<Captured>>,
}

impl Follower {
    /// Creates the kept log (empty) and starts following.
    ///
    /// # Errors
    /// The kept log cannot be created, or the thread cannot be spawned.
    pub fn start(f: OutputFollow) -> Result<Follower> {
        let out = match &f.kept {
            Some(p) => Some(BufWriter::new(
                File::create(p).with_context(|| format!("creating {}", p.display()))?,
            )),
            None => None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name(format!("output-{}", f.label))
            .spawn(move || follow(&f, out, &flag))
            .context("starting the output reader")?;
        Ok(Follower { stop, handle })
    }

    /// Reads what is left (the unit has ended, so the file is complete) and returns the
    /// lines.
    ///
    /// # Errors
    /// Reading the raw file or writing the kept log failed.
    pub fn finish(self) -> Result<Captured> {
        self.stop.store(true, Ordering::SeqCst);
        self.handle
            .join()
            .map_err(|_| anyhow!("the output reader panicked"))?
    }
}

/// The state of one follow.
struct State<'a> {
    f: &'a OutputFollow,
    lines: Lines,
    tally: Tally,
    record: Vec<u8>,
    out: Option<BufWriter<File>>,
    captured: Captured,
}

impl State<'_> {
    fn sink(&mut self, line: &str) -> Result<()> {
        for s in self.tally.take(line) {
            self.put(s)?;
        }
        Ok(())
    }

    fn put(&mut self, s: Sink) -> Result<()> {
        match s {
            Sink::Journal(t) => {
                if self.f.journal {
                    crate::stderrln!("{t}");
                }
            }
            Sink::Keep(t) => {
                if let Some(o) = self.out.as_mut() {
                    writeln!(o, "{t}").context("writing the run's output log")?;
                }
                let prefix = format!("{}| ", self.f.label);
                if let Some(l) = t.strip_prefix(&prefix) {
                    self.captured.lines.push(l.to_string());
                }
            }
        }
        Ok(())
    }

    fn take(&mut self, bytes: &[u8]) -> Result<()> {
        let done = match self.f.format {
            Format::Plain => self.lines.feed_plain(bytes),
            Format::K8sFile => {
                self.record.extend_from_slice(bytes);
                let mut done = Vec::new();
                while let Some(n) = self.record.iter().position(|b| *b == b'\n') {
                    let rec: Vec<u8> = self.record.drain(..=n).collect();
                    done.extend(self.k8s(&rec[..n]));
                }
                done
            }
        };
        for l in done {
            self.sink(&l)?;
        }
        Ok(())
    }

    fn k8s(&mut self, rec: &[u8]) -> Vec<String> {
        match k8s_record(rec) {
            Some((stream, ends, content)) => self.lines.feed(stream, content, ends),
            // Not conmon's format: passed on whole, made safe like any line.
            None => self
                .lines
                .feed(crate::text::output::Stream::Stdout, rec, true),
        }
    }
}

fn follow(f: &OutputFollow, out: Option<BufWriter<File>>, stop: &AtomicBool) -> Result<Captured> {
    let secrets: Vec<&[u8]> = f.secrets.iter().map(Vec::as_slice).collect();
    let mut st = State {
        f,
        lines: Lines::new(&secrets),
        tally: Tally::new(LIMITS, f.label, &f.hint),
        record: Vec::new(),
        out,
        captured: Captured::default(),
    };
    let mut file: Option<(File, u64)> = None;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        // Read before looking: a stop seen here means the file is complete up to its end.
        let stopping = stop.load(Ordering::SeqCst);
        if file.is_none() {
            file = File::open(&f.source)
                .ok()
                .and_then(|h| Some((h.metadata().ok()?.ino(), h)))
                .map(|(ino, h)| (h, ino));
        }
        let mut got = 0usize;
        let mut reopen = false;
        if let Some((h, ino)) = file.as_mut() {
            loop {
                let n = h
                    .read(&mut chunk)
                    .with_context(|| format!("reading {}", f.source.display()))?;
                if n == 0 {
                    break;
                }
                got += n;
                st.take(&chunk[..n])?;
                if got >= 1024 * 1024 {
                    break; // flush now and then, so `cyclix logs -f` sees a flood as it goes
                }
            }
            // At the end of this file: podman may have started a new one (`max-size`).
            let now = std::fs::metadata(&f.source).map(|m| m.ino()).ok();
            if got == 0 && now.is_some_and(|i| i != *ino) {
                st.captured.summary.rotated = true;
                reopen = true;
            }
        }
        if reopen {
            file = None;
        }
        if let Some(o) = st.out.as_mut() {
            o.flush().context("writing the run's output log")?;
        }
        if stopping && got == 0 && !reopen {
            break;
        }
        if got == 0 && !reopen {
            std::thread::sleep(POLL);
        }
    }
    if !st.record.is_empty() {
        let rest = std::mem::take(&mut st.record);
        for l in st.k8s(&rest) {
            st.sink(&l)?;
        }
    }
    for l in st.lines.finish() {
        st.sink(&l)?;
    }
    for s in st.tally.end() {
        st.put(s)?;
    }
    if let Some(o) = st.out.as_mut() {
        o.flush().context("writing the run's output log")?;
    }
    let rotated = st.captured.summary.rotated;
    st.captured.summary = OutputSummary {
        rotated,
        ..st.tally.summary.clone()
    };
    if rotated {
        st.captured.summary.truncated = true;
    }
    Ok(st.captured)
}

#[cfg(test)]
mod tests;
