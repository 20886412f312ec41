//! `cyclix logs TENANT [--run R] [-f] [-n N] [--raw]`: what a run's agent and gate printed, as
//! cyclix kept it (`RUN.agent.log`, `RUN.gate.log` beside the record: secret values redacted,
//! terminal escapes and bidi controls replaced, limits marked; `run::output`). `-f` follows a
//! run in progress to its end. A preset's CLI writes JSON events: its agent lines are shown
//! as messages, tool calls and results (`agents::stream_view`), `--raw` shows the events.

use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};

use crate::agents::StreamKind;
use crate::agents::stream_view::View;
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::layout::RunFiles;
use crate::run::record;

/// The two kept logs of a run, in the order they are written.
const LABELS: [&str; 2] = ["agent", "gate"];

/// How often `-f` looks for more lines (ms).
const POLL: Duration = Duration::from_millis(200);

/// How `cyclix logs` prints a run's kept agent lines.
struct Shown {
    /// The preset CLI's stream read as a person reads it (it redacts the tenant's secret
    /// values in what it decodes); `None`: the lines as they are.
    view: Option<View>,
}

impl Shown {
    /// Writes kept `bytes` (complete lines) of the log labelled `label`.
    fn emit(&mut self, label: &str, bytes: &[u8]) -> Result<()> {
        let Some(view) = self.view.as_mut().filter(|_| label == "agent") else {
            return write_out(bytes);
        };
        let prefix = format!("{label}| ");
        let mut out = String::new();
        let put = |out: &mut String, l: &str| {
            out.push_str(&prefix);
            out.push_str(l);
            out.push('\n');
        };
        for line in String::from_utf8_lossy(bytes).lines() {
            if let Some(event) = line.strip_prefix(&prefix) {
                view.push(event).iter().for_each(|l| put(&mut out, l));
            } else {
                // cyclix's own marks (a cut, a limit) end what the view holds.
                view.finish().iter().for_each(|l| put(&mut out, l));
                out.push_str(line);
                out.push('\n');
            }
        }
        write_out(out.as_bytes())
    }

    /// What the view still holds, at the end of the agent's log.
    fn finish(&mut self) -> Result<()> {
        let rest = self.view.as_mut().map(View::finish).unwrap_or_default();
        let mut text = String::new();
        for l in &rest {
            text.push_str("agent| ");
            text.push_str(l);
            text.push('\n');
        }
        write_out(text.as_bytes())
    }
}

/// The stream of run `run_id`'s preset CLI: its record's parser, else (a run in progress)
/// the tenant's `spec`'s preset. `None`: no preset, or neither says.
fn preset_stream(spec: Option<&crate::spec::Spec>, run_id: &str, dir: &Path) -> Option<StreamKind> {
    let rec = RunFiles::new(dir, run_id).record();
    if let Ok(b) = std::fs::read(&rec) {
        let rec = serde_json::from_slice::<record::RunRecord>(&b).ok()?;
        let stream = rec.agent_report?.stream;
        return serde_json::from_value(serde_json::Value::String(stream)).ok();
    }
    spec?.agent.preset.as_ref().map(|p| p.stream)
}

/// `cyclix logs TENANT`: the kept output of run `run` (default: the run in progress, else
/// the last recorded one), its last `lines` lines of each stream (0: all); `follow`: then
/// every line as it is written, until the run ends. A preset run's agent lines are shown
/// through [`View`] unless `raw`.
///
/// # Errors
/// An unknown run or a tenant with no run ([`crate::exit::input`], exit 1); a log that
/// cannot be read.
pub fn run(
    env: &HostEnv,
    tenant: &str,
    run: Option<&str>,
    follow: bool,
    lines: u32,
    raw: bool,
) -> Result<Outcome> {
    super::tenant::known_tenant(env, tenant)?;
    let dir = record::tenant_dir(&env.state_home, tenant);
    let run_id = which_run(env, tenant, &dir, run)?;
    let files = RunFiles::new(&dir, &run_id);
    let paths: Vec<PathBuf> = LABELS.iter().map(|l| files.output_log(l)).collect();
    // The tenant's spec, loaded once: the preset of a run in progress and the secret values.
    let spec = (!raw)
        .then(|| super::spec_file::load_spec(&super::tenant::tenant_spec_path(env, tenant), env))
        .and_then(Result::ok)
        .and_then(Result::ok);
    let view = (!raw)
        .then(|| preset_stream(spec.as_ref(), &run_id, &dir))
        .flatten()
        .filter(|k| *k != StreamKind::PlainText)
        .map(|kind| {
            // Each value found counts: one variable set nowhere does not leave the rest
            // unredacted (attack review).
            let secrets = spec
                .as_ref()
                .map(|spec| super::tenant::known_secret_values(env, spec))
                .unwrap_or_default();
            View::new(kind, secrets)
        });
    let mut shown = Shown { view };
    let live = || super::current_run::current_run(env, tenant).is_some_and(|c| c.run_id == run_id);
    if !follow {
        if !paths.iter().any(|p| p.exists()) {
            return Err(crate::exit::input(format!(
                "run {run_id} of {tenant} kept no output (it ended before its agent started, \
                 or it ran before cyclix kept output); see `journalctl --user -u \
                 cyclix-run@{tenant}.service`"
            )));
        }
        let mut kept = 0;
        for (p, label) in paths.iter().zip(LABELS) {
            kept += print_tail(p, lines, &mut |b| shown.emit(label, b))?;
            if label == "agent" {
                shown.finish()?;
            }
        }
        if kept == 0 {
            // Not silence (a newcomer's report): say that there was nothing to show.
            crate::outln!("run {run_id} of {tenant}: its agent and gate printed nothing");
        }
        return Ok(Outcome::Ok);
    }
    let mut at = [0u64; 2];
    for (i, p) in paths.iter().enumerate() {
        at[i] = print_tail(p, lines, &mut |b| shown.emit(LABELS[i], b))?;
    }
    // How many looks in a row found the run gone and nothing new: one look can miss a run
    // that is still there (its lock file read mid-write, measured once in a full suite under
    // load: `logs -f` ended before the run's last lines), so it takes two, a poll apart.
    let mut ended_looks = 0;
    loop {
        // Looked at first: a run that has ended has written everything it will.
        let running = live();
        let mut got = 0;
        for (i, p) in paths.iter().enumerate() {
            let (n, pos) = print_from(p, at[i], &mut |b| shown.emit(LABELS[i], b))?;
            got += n;
            at[i] = pos;
        }
        if !running && got == 0 {
            ended_looks += 1;
            if ended_looks >= 2 {
                shown.finish()?;
                return Ok(Outcome::Ok);
            }
        } else {
            ended_looks = 0;
        }
        if got == 0 {
            std::thread::sleep(POLL);
        }
    }
}

/// The run to show: `run` (it must have a record, a log or be in progress), else the run in
/// progress, else the last recorded one.
fn which_run(env: &HostEnv, tenant: &str, dir: &Path, run: Option<&str>) -> Result<String> {
    if let Some(r) = run {
        crate::spec::validate::run_id(r)
            .map_err(|m| crate::exit::input(format!("--run {r}: {m}")))?;
        let f = RunFiles::new(dir, r);
        let known = f.record().exists()
            || LABELS.iter().any(|l| f.output_log(l).exists())
            || super::current_run::current_run(env, tenant).is_some_and(|c| c.run_id == r);
        if !known {
            return Err(crate::exit::input(format!(
                "{tenant} has no run {r}; `cyclix status {tenant}` names the last one"
            )));
        }
        return Ok(r.to_string());
    }
    if let Some(c) = super::current_run::current_run(env, tenant) {
        return Ok(c.run_id);
    }
    match record::latest(&env.state_home, tenant)? {
        Some(rec) => Ok(rec.run_id),
        None => Err(crate::exit::input(format!(
            "{tenant} has no run yet; `cyclix start {tenant}` starts one"
        ))),
    }
}

/// Passes the last `lines` lines of `path` (0: all; nothing if it does not exist) to `emit`
/// and returns the offset after its last complete line.
fn print_tail(path: &Path, lines: u32, emit: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<u64> {
    let text = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let end = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let whole = &text[..end];
    let mut start = 0;
    if lines > 0 {
        let mut seen = 0;
        for (i, b) in whole.iter().enumerate().rev().skip(1) {
            if *b == b'\n' {
                seen += 1;
                if seen == lines {
                    start = i + 1;
                    break;
                }
            }
        }
    }
    emit(&whole[start..])?;
    Ok(end as u64)
}

/// Passes the complete lines of `path` after offset `at` to `emit`: (bytes read, new offset).
fn print_from(
    path: &Path,
    at: u64,
    emit: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<(usize, u64)> {
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, at)),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    f.seek(SeekFrom::Start(at))
        .with_context(|| format!("reading {}", path.display()))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)
        .with_context(|| format!("reading {}", path.display()))?;
    let end = buf.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    emit(&buf[..end])?;
    Ok((end, at + end as u64))
}

/// Writes kept lines (already made printable by the run) to stdout.
fn write_out(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .context("writing to stdout")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::run_output::container_lines;

    #[test]
    fn the_tail_counts_whole_lines_and_returns_the_end_of_the_last() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("r.agent.log");
        std::fs::write(&p, "agent| a\nagent| b\ncyclix: cut\nagent| par").expect("write");
        let mut seen = Vec::new();
        let mut keep = |b: &[u8]| {
            seen.extend_from_slice(b);
            Ok(())
        };
        assert_eq!(print_tail(&p, 2, &mut keep).expect("tail"), 30);
        assert_eq!(print_from(&p, 30, &mut keep).expect("from"), (0, 30));
        assert_eq!(
            print_tail(&dir.path().join("none"), 2, &mut keep).expect("none"),
            0
        );
        assert_eq!(seen, b"agent| b\ncyclix: cut\n");
        assert_eq!(
            container_lines(&p, "agent").expect("lines"),
            ["a", "b", "par"]
        );
    }
}
