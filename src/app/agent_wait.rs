//! `cyclix agent-wait --go FILE [--report FIFO] --timeout-s N [--claim FIFO] [--handover FIFO
//! --vars A,B] -- ARGV...`: runs as the agent container's command and holds the agent back until cyclix, on
//! the host, has proven the boundary from inside this very container and created FILE in the
//! read-only control directory. With `--report` this process runs the probe suite itself when
//! the host opens the FIFO's read end, and writes the report into it (issue 16: no `podman
//! exec` before the agent); the agent's command does not exist yet, so nothing else in the
//! container can write there first. With `--handover` it then takes the agent's variables from
//! that FIFO, where the host writes them right after the go (`run::handover`). Then it `exec`s
//! ARGV with them, so the agent is the same process the unit supervises. If cyclix refuses the
//! boundary (it creates `refused` beside FILE), FILE does not appear within N seconds, or the
//! hand-over is not exactly the host's, the agent never starts and this exits 1. With
//! `--claim` (a pooled environment's agent container, made before its run: `run::pool::held`)
//! it first waits, blocked in `open(2)` of that FIFO and with no clock, until the claiming run
//! opens it; the N seconds count from then.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::exit::Outcome;
use crate::render::plan::REFUSED_FILE;

/// How often the control directory is looked at.
pub const POLL: Duration = Duration::from_millis(10);

/// How often the report FIFO is tried for a reader while none is there: the host opens it at
/// the start of the probe phase, which then waits for this at most.
pub const REPORT_POLL: Duration = Duration::from_millis(2);

/// The report FIFO opened for writing, or `None` while the host has no read end open (`ENXIO`
/// of a non-blocking open).
fn open_report(fifo: &Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::OpenOptionsExt as _;
    match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(fifo)
    {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Runs the suite with the context `context` (the control directory's, beside the go file:
/// under tier `gvisor` the report FIFO has a directory of its own) and writes the report (the
/// lines of `cyclix probe`) into `f`, blocking; closing `f` ends the report for the host.
/// Whatever fails is said in the report itself (a context that does not parse: one FAIL line),
/// so the host refuses.
fn hand_report(f: std::fs::File, fifo: &Path, context: &Path) {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    use std::io::Write as _;
    // Blocking writes from here: the host reads as we write.
    if let Ok(fl) = fcntl(&f, FcntlArg::F_GETFL) {
        let _ = fcntl(
            &f,
            FcntlArg::F_SETFL(OFlag::from_bits_truncate(fl) & !OFlag::O_NONBLOCK),
        );
    }
    let mut f = f;
    let hello = f.write_all(format!("{}\n", crate::run::report_fifo::HELLO).as_bytes());
    // No probe (image code: P6's setuid child) before the host unlinked the FIFO: then no
    // other process can open it.
    let lines = match hello.map_err(|e| e.to_string()).and_then(|()| gone(fifo)) {
        Ok(()) => report_lines(context),
        Err(why) => unproven(&why),
    };
    let mut w = std::io::BufWriter::new(f);
    let _ = w.write_all(lines.as_bytes());
    let _ = w.flush();
}

/// The probes of the context's profile, as `--only` takes them (empty: all, under podman;
/// gVisor's or Kubernetes' subset).
fn profile_probes(ctx: &crate::probe::Context) -> Vec<String> {
    ctx.profile
        .probes()
        .iter()
        .map(|s| (*s).to_string())
        .collect()
}

/// How long agent-wait waits for the host to unlink the report FIFO after its first line.
pub const UNLINK_WAIT: Duration = Duration::from_secs(10);

/// Waits until `fifo` no longer exists (the host unlinked it), within [`UNLINK_WAIT`].
fn gone(fifo: &Path) -> Result<(), String> {
    let end = Instant::now() + UNLINK_WAIT;
    loop {
        match fifo.symlink_metadata() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            _ if Instant::now() >= end => {
                return Err(format!(
                    "the report FIFO {} was still there {} s after agent-wait's first line: the \
                     host did not unlink it, so the probes (which run image code) could write into \
                     it; no probe ran (is the host's cyclix the same version?)",
                    fifo.display(),
                    UNLINK_WAIT.as_secs()
                ));
            }
            _ => std::thread::sleep(REPORT_POLL),
        }
    }
}

/// A report of one failing line `P0` saying `why`, and its summary.
fn unproven(why: &str) -> String {
    let r = crate::probe::ProbeResult {
        id: "P0".into(),
        expect: "the probe context".into(),
        got: "unusable".into(),
        verdict: crate::probe::Verdict::Fail,
        detail: why.to_string(),
        ms: 0,
    };
    let sum = crate::probe::summary(std::slice::from_ref(&r), Duration::ZERO);
    [serde_json::to_string(&r), serde_json::to_string(&sum)]
        .into_iter()
        .flatten()
        .map(|l| l + "\n")
        .collect()
}

/// The report of the whole suite under the context in `context`, as `cyclix probe` prints it.
/// The suite waits for the proxy first, as `cyclix probe` does ([`crate::probe::first_run`]).
fn report_lines(context: &Path) -> String {
    let start = Instant::now();
    let ran = std::fs::read_to_string(context)
        .map_err(|e| format!("reading the probe context {}: {e}", context.display()))
        .and_then(|t| {
            serde_json::from_str::<crate::probe::Context>(&t)
                .map_err(|e| format!("parsing the probe context {}: {e}", context.display()))
        })
        .and_then(|ctx| {
            crate::probe::first_run(&ctx, &profile_probes(&ctx), "cyclix agent-wait")
                .map_err(|e| e.to_string())
        });
    let (results, sum) = ran.unwrap_or_else(|why| {
        let results = vec![crate::probe::ProbeResult {
            id: "P0".into(),
            expect: "the probe context".into(),
            got: "unusable".into(),
            verdict: crate::probe::Verdict::Fail,
            detail: why,
            ms: 0,
        }];
        let sum = crate::probe::summary(&results, start.elapsed());
        (results, sum)
    });
    let mut out = String::new();
    for r in &results {
        if let Ok(l) = serde_json::to_string(r) {
            out.push_str(&l);
            out.push('\n');
        }
    }
    if let Ok(l) = serde_json::to_string(&sum) {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// Waits, blocked in `open(2)` of the FIFO `fifo` for reading (no clock, no polling: a pooled
/// agent container idles here for up to its pool's `max_idle`), until the run that claims the
/// environment opens it for writing and closes it again; then the wait for the go begins.
///
/// # Errors
/// `fifo` is not a FIFO or cannot be opened or read.
fn claimed(fifo: &Path) -> std::io::Result<()> {
    use std::io::Read as _;
    use std::os::unix::fs::FileTypeExt as _;
    if !fifo.symlink_metadata()?.file_type().is_fifo() {
        return Err(std::io::Error::other("not a FIFO"));
    }
    let mut f = std::fs::File::open(fifo)?;
    // Until the host closes its end (it writes nothing): one byte at most is read.
    let mut byte = [0u8; 1];
    let _ = f.read(&mut byte)?;
    Ok(())
}

/// How long agent-wait waits for the host's hand-over after the go (the host writes it right
/// after the go file: `run::handover::give`).
pub const HANDOVER_WAIT: Duration = Duration::from_secs(60);

/// What holds the agent back (`agent-wait --go`): the go file, the report FIFO, how long to
/// wait, the hand-over FIFO and the variables it must carry, the agent's standard input.
#[derive(Clone, Copy)]
pub struct Held<'a> {
    /// The file whose appearance means "go".
    pub go: &'a Path,
    /// The FIFO the probe report goes through (`--report`).
    pub report: Option<&'a Path>,
    /// Give up after this many seconds without a go (counted from the claim with `claim`).
    pub timeout_s: u64,
    /// The FIFO a pooled agent container waits on for its claim first (`--claim`).
    pub claim: Option<&'a Path>,
    /// The hand-over FIFO and the names it must carry (`--handover`, `--vars`).
    pub handover: Option<(&'a Path, &'a [String])>,
    /// The agent's standard input (`--stdin`).
    pub stdin: Option<&'a Path>,
}

/// Waits for the go, takes the hand-over when there is one, then replaces this process with
/// `argv`, its standard input `stdin` when given (opened only after the go: the task file of
/// a preset CLI) and the handed-over variables in its environment. A hand-over that does not
/// come within [`HANDOVER_WAIT`] or is not exactly the host's: the agent never starts (exit 1).
///
/// # Errors
/// When `stdin` cannot be opened or `argv` cannot be executed (the error names the file or
/// the program).
pub fn run(held: &Held<'_>, argv: &[String]) -> Result<Outcome> {
    // Non-dumpable from here on: under tier `gvisor` the binary is readable, so nothing marked
    // it at exec; its report FIFO is reachable through `/proc/PID/fd` only while it is dumpable
    // (attack review of issue 35). The agent it starts execs anew and is dumpable again.
    let _ = nix::sys::prctl::set_dumpable(false);
    let Held {
        go,
        report,
        timeout_s,
        claim,
        handover,
        stdin,
    } = *held;
    if let Some(fifo) = claim
        && let Err(e) = claimed(fifo)
    {
        crate::stderrln!(
            "cyclix: waiting for the claim on {}: {e}; the agent does not start",
            fifo.display()
        );
        return Ok(Outcome::Findings);
    }
    let refused = go.with_file_name(REFUSED_FILE);
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    let mut report = report;
    loop {
        if let Some(fifo) = report {
            match open_report(fifo) {
                Ok(Some(f)) => {
                    hand_report(
                        f,
                        fifo,
                        &go.with_file_name(crate::render::plan::PROBE_CONTEXT_FILE),
                    );
                    report = None;
                    continue;
                }
                Ok(None) => {}
                // Gone (the host removed it) or unusable: the host then has no report and
                // refuses, or gives up; keep waiting for its verdict either way.
                Err(_) => report = None,
            }
        }
        if refused.exists() {
            // cyclix writes why (the boundary, or a failed baseline); the directory is
            // read-only here.
            let why = std::fs::read_to_string(&refused).unwrap_or_default();
            let why = match crate::text::printable(why.trim()) {
                w if w.is_empty() => "the sandbox boundary was refused".to_string(),
                w => w,
            };
            crate::stderrln!("cyclix: {why}; the agent does not start");
            return Ok(Outcome::Findings);
        }
        if go.exists() {
            break;
        }
        if Instant::now() >= deadline {
            crate::stderrln!(
                "cyclix: the boundary was not proven within {timeout_s} s; the agent does not start"
            );
            return Ok(Outcome::Findings);
        }
        std::thread::sleep(if report.is_some() { REPORT_POLL } else { POLL });
    }
    let env = match handover {
        None => Vec::new(),
        Some((fifo, vars)) => match crate::run::handover::take(fifo, vars, HANDOVER_WAIT) {
            Ok(env) => env,
            Err(e) => {
                crate::stderrln!(
                    "cyclix: the agent's variables were not handed over ({e:#}); the agent does not start"
                );
                return Ok(Outcome::Findings);
            }
        },
    };
    let input = match stdin {
        Some(p) => Some(
            std::fs::File::open(p)
                .map_err(|e| anyhow::anyhow!("opening the agent's input {}: {e}", p.display()))?,
        ),
        None => None,
    };
    let err = crate::process::exec_replace(argv, input, &env);
    anyhow::bail!(
        "starting the agent `{}`: {err}",
        argv.first().map_or("", String::as_str)
    )
}

/// `agent-wait` with `--go FILE` ([`run`]) or `--probe CONTEXT` ([`run_probed`]).
///
/// # Errors
/// Neither is given, or as the one that runs.
pub fn from_command(c: &crate::cli::Command) -> Result<Outcome> {
    let crate::cli::Command::AgentWait {
        go,
        probe,
        report,
        timeout_s,
        claim,
        handover,
        vars,
        stdin,
        argv,
    } = c
    else {
        anyhow::bail!("invariant: agent-wait dispatched another verb");
    };
    match (go, probe) {
        (_, Some(context)) => run_probed(context, stdin.as_deref(), argv),
        (Some(go), None) => run(
            &Held {
                go,
                report: report.as_deref(),
                timeout_s: *timeout_s,
                claim: claim.as_deref(),
                handover: handover.as_deref().map(|f| (f, vars.as_slice())),
                stdin: stdin.as_deref(),
            },
            argv,
        ),
        (None, None) => Err(crate::exit::input(
            "cyclix agent-wait needs --go FILE or --probe CONTEXT",
        )),
    }
}

/// The Kubernetes profile's gate in front of the agent (`agent-wait --probe CONTEXT`): runs
/// the probe suite in this very process (the one that becomes the agent), with the context's
/// profile and its probe list, its JSON lines on stderr (the Pod's log; stdout is the
/// agent's), and `exec`s `argv` only when every probe passed. An empty `proxy_url` is taken
/// from this process's `HTTP_PROXY`, which the kubelet set from the proxy Service's
/// environment before anything of the agent ran.
///
/// # Errors
/// The context cannot be read or parsed (naming the file), or the agent cannot be started.
pub fn run_probed(context: &Path, stdin: Option<&Path>, argv: &[String]) -> Result<Outcome> {
    let text = std::fs::read_to_string(context)
        .map_err(|e| anyhow::anyhow!("reading the probe context {}: {e}", context.display()))?;
    let mut ctx: crate::probe::Context = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "parsing the probe context {} (see cyclix::probe::Context): {e}",
            context.display()
        )
    })?;
    if ctx.proxy_url.is_empty() {
        ctx.proxy_url = std::env::var("HTTP_PROXY").unwrap_or_default();
    }
    // With credentials `NO_PROXY` names the proxy itself, whose address only the Pod knows.
    let proxy_host = ctx.proxy_ip().unwrap_or_default();
    for entry in &mut ctx.no_proxy_allowed {
        if entry == crate::render::kube::agent::PROXY_HOST_MARKER {
            entry.clone_from(&proxy_host);
        }
    }
    let (results, sum) = crate::probe::first_run(&ctx, &profile_probes(&ctx), "cyclix agent-wait")?;
    for r in &results {
        crate::stderrln!("{}", serde_json::to_string(r)?);
    }
    crate::stderrln!("{}", serde_json::to_string(&sum)?);
    if sum.fail > 0 || sum.pass == 0 {
        crate::stderrln!(
            "cyclix: {} of {} probes failed ({}); the agent does not start",
            sum.fail,
            sum.fail + sum.pass,
            ctx.profile.statement()
        );
        return Ok(Outcome::Findings);
    }
    let input = match stdin {
        Some(p) => Some(
            std::fs::File::open(p)
                .map_err(|e| anyhow::anyhow!("opening the agent's input {}: {e}", p.display()))?,
        ),
        None => None,
    };
    let err = crate::process::exec_replace(argv, input, &[]);
    anyhow::bail!(
        "starting the agent `{}`: {err}",
        argv.first().map_or("", String::as_str)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held<'a>(go: &'a Path, report: Option<&'a Path>, timeout_s: u64) -> Held<'a> {
        Held {
            go,
            report,
            timeout_s,
            claim: None,
            handover: None,
            stdin: None,
        }
    }

    #[test]
    fn after_the_go_a_hand_over_that_is_not_the_hosts_never_starts_the_agent() {
        let dir = tempfile::tempdir().expect("tmp");
        let go = dir.path().join("go");
        let fifo = dir.path().join(crate::render::plan::HANDOVER_FILE);
        crate::run::handover::make(&fifo).expect("mkfifo");
        std::fs::write(&go, "").expect("go");
        let marker = dir.path().join("agent-ran");
        let argv = vec!["touch".to_string(), marker.display().to_string()];
        let vars = vec!["API_TOKEN".to_string()];
        // A writer that is not the host: one variable the argv never named.
        let f = fifo.clone();
        let forger = std::thread::spawn(move || {
            crate::run::handover::give(
                &f,
                &[("LD_PRELOAD".into(), b"/tmp/x.so".to_vec())],
                Duration::from_secs(20),
            )
        });
        let mut h = held(&go, None, 20);
        h.handover = Some((&fifo, &vars));
        assert_eq!(run(&h, &argv).expect("runs"), Outcome::Findings);
        forger.join().expect("forger").expect("written");
        assert!(!marker.exists(), "the agent ran on a forged hand-over");
    }

    #[test]
    fn a_held_agent_wait_waits_for_its_claim_before_anything_else() {
        let dir = tempfile::tempdir().expect("tmp");
        let go = dir.path().join("go");
        let claim = dir.path().join(crate::render::plan::CLAIM_FILE);
        crate::run::claim_fifo::make_claim(&claim).expect("mkfifo");
        // Refused before the claim: only the claim lets agent-wait see it.
        std::fs::write(dir.path().join(REFUSED_FILE), "").expect("refuse");
        let marker = dir.path().join("agent-ran");
        let argv = vec!["touch".to_string(), marker.display().to_string()];
        let (g, c, a) = (go.clone(), claim.clone(), argv.clone());
        let waiter = std::thread::spawn(move || {
            let mut h = held(&g, None, 0);
            h.claim = Some(&c);
            run(&h, &a).expect("runs")
        });
        // The wake succeeds only while agent-wait is blocked opening the FIFO: it has not
        // looked at the control directory yet (with a zero timeout it would have given up).
        while crate::run::claim_fifo::wake(&claim).is_err() {
            assert!(!waiter.is_finished(), "agent-wait went on before its claim");
            std::thread::yield_now();
        }
        assert_eq!(waiter.join().expect("woken"), Outcome::Findings);
        assert!(!marker.exists(), "the agent ran");
        // A claim path that is no FIFO: the agent never starts.
        std::fs::write(&claim, "").expect("a plain file");
        let mut h = held(&go, None, 5);
        h.claim = Some(&claim);
        std::fs::remove_file(dir.path().join(REFUSED_FILE)).expect("rm");
        std::fs::write(&go, "").expect("go");
        assert_eq!(run(&h, &argv).expect("runs"), Outcome::Findings);
        assert!(!marker.exists(), "the agent ran without its claim");
    }

    #[test]
    fn refused_or_late_boundaries_never_start_the_agent() {
        let dir = tempfile::tempdir().expect("tmp");
        let go = dir.path().join("go");
        let marker = dir.path().join("agent-ran");
        let argv = vec!["touch".to_string(), marker.display().to_string()];
        std::fs::write(dir.path().join(REFUSED_FILE), "").expect("refuse");
        assert_eq!(
            run(&held(&go, None, 5), &argv).expect("runs"),
            Outcome::Findings
        );
        std::fs::remove_file(dir.path().join(REFUSED_FILE)).expect("rm");
        assert_eq!(
            run(&held(&go, None, 0), &argv).expect("runs"),
            Outcome::Findings
        );
        assert!(!marker.exists(), "the agent ran without a proven boundary");
    }

    #[test]
    fn the_report_goes_through_the_fifo_before_any_verdict_and_a_bad_context_fails_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let go = dir.path().join("go");
        let fifo = dir.path().join(crate::render::plan::REPORT_FILE);
        crate::run::report_fifo::make(&fifo).expect("mkfifo");
        std::fs::write(
            dir.path().join(crate::render::plan::PROBE_CONTEXT_FILE),
            "{\"bogus\":1}",
        )
        .expect("context");
        let marker = dir.path().join("agent-ran");
        let argv = vec!["touch".to_string(), marker.display().to_string()];
        let (f, d) = (fifo.clone(), dir.path().to_path_buf());
        // The host's side: read the report, then refuse (as it must for a failed probe).
        let host = std::thread::spawn(move || {
            let text = crate::run::report_fifo::read(&f, Duration::from_secs(20)).expect("report");
            std::fs::write(d.join(REFUSED_FILE), "refused by the test").expect("refuse");
            text
        });
        assert_eq!(
            run(&held(&go, Some(&fifo), 20), &argv).expect("runs"),
            Outcome::Findings
        );
        let text = host.join().expect("host side");
        assert!(
            text.contains("\"id\":\"P0\"") && text.contains("\"verdict\":\"FAIL\""),
            "{text}"
        );
        assert_eq!(crate::run::report_fifo::exit_of(&text), 1, "{text}");
        assert!(!marker.exists(), "the agent ran without a proven boundary");
    }
}
