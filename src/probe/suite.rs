//! The suite runner: every selected probe on its own thread with its own deadline, the
//! proxy's lane one at a time beside them (issue 16), results in registry order.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::verdict::{self, Judged};
use super::{
    Context, Probe, ProbeError, ProbeFn, ProbeResult, Summary, Verdict, ms, observe, result, run,
};

/// Runs `probes` (only those named in `only`, all when it is empty) side by side, and
/// returns their results in `probes` order. Every probe runs on its own thread with its own
/// hard deadline of `min(timeout, what is left of budget)` from its own start; a probe that
/// misses it is a FAIL ([`verdict::timed_out`]) and its thread is abandoned (the process exits
/// or `exec`s soon after, which ends it). The probes of the proxy's lane
/// ([`Probe::via_proxy`]) start one after the other, on a lane thread beside the others;
/// once `budget` is used up, the lane starts no more and those FAIL
/// ([`verdict::over_budget`]). So the suite takes about as long as its slowest probe or its
/// proxy lane, and never much longer than `budget`. A probe whose thread cannot be spawned
/// FAILs.
///
/// The probes are independent: each observes its own effect (its own scratch names, its own
/// child processes, its own sockets), so running them side by side changes no verdict; P20's
/// pid count sees at most the few children of P6 and P9 next to it (`max_pids` leaves room).
///
/// # Errors
/// [`ProbeError::UnknownId`] for an id in `only` that is not in `probes`.
pub fn run_with(
    probes: &[Probe],
    ctx: &Context,
    only: &[String],
    timeout: Duration,
    budget: Duration,
) -> Result<Vec<ProbeResult>, ProbeError> {
    for id in only {
        if !probes.iter().any(|p| p.id.eq_ignore_ascii_case(id)) {
            return Err(ProbeError::UnknownId(id.clone()));
        }
    }
    let suite = Instant::now();
    let selected: Vec<&Probe> = probes
        .iter()
        .filter(|p| only.is_empty() || only.iter().any(|o| o.eq_ignore_ascii_case(p.id)))
        .collect();
    // The proxy's lane: one thread, one probe at a time, each answer sent with its index.
    let (lane_tx, lane_rx) = mpsc::channel();
    let lane: Vec<(usize, ProbeFn)> = selected
        .iter()
        .enumerate()
        .filter(|(_, p)| p.via_proxy)
        .map(|(i, p)| (i, p.run))
        .collect();
    let lane_len = lane.len();
    if !lane.is_empty() {
        let ctx = ctx.clone();
        let spawned = std::thread::Builder::new()
            .name("probe-lane".into())
            .spawn(move || {
                for (i, f) in lane {
                    let left = budget.saturating_sub(suite.elapsed());
                    let t = Instant::now();
                    let j = if left.is_zero() {
                        verdict::over_budget(ms(budget))
                    } else {
                        let d = timeout.min(left);
                        match start_one(f, &ctx) {
                            Started::Running(rx) => rx
                                .recv_timeout(d)
                                .map_or_else(|_| verdict::timed_out(ms(d)), |(j, _)| j),
                            Started::Failed(j) => j,
                        }
                    };
                    let _ = lane_tx.send((i, j, t.elapsed()));
                }
            });
        // Not spawned: the channel is closed at once and the lane's probes FAIL below.
        drop(spawned);
    }
    let deadline = timeout.min(budget);
    let started: Vec<Option<Started>> = selected
        .iter()
        .map(|p| (!p.via_proxy).then(|| start_one(p.run, ctx)))
        .collect();
    let mut out: Vec<Option<(Judged, Duration)>> = started
        .into_iter()
        .map(|s| {
            s.map(|s| match s {
                Started::Running(rx) => rx
                    .recv_timeout(deadline.saturating_sub(suite.elapsed()))
                    .unwrap_or_else(|_| (verdict::timed_out(ms(deadline)), suite.elapsed())),
                Started::Failed(j) => (j, Duration::ZERO),
            })
        })
        .collect();
    // The lane ends within the budget plus one probe's overrun of it; what has not come by
    // then FAILs as timed out.
    let lane_end = budget + timeout;
    for _ in 0..lane_len {
        match lane_rx.recv_timeout(lane_end.saturating_sub(suite.elapsed())) {
            Ok((i, j, took)) => out[i] = Some((j, took)),
            Err(_) => break,
        }
    }
    Ok(selected
        .iter()
        .zip(out)
        .map(|(p, r)| {
            let (j, took) =
                r.unwrap_or_else(|| (verdict::timed_out(ms(deadline)), suite.elapsed()));
            result(p.id, j, took)
        })
        .collect())
}

/// A probe's thread: its answer and its own wall time come on the channel, or it could not
/// be spawned.
enum Started {
    Running(mpsc::Receiver<(Judged, Duration)>),
    Failed(Judged),
}

fn start_one(f: ProbeFn, ctx: &Context) -> Started {
    let (tx, rx) = mpsc::channel();
    let ctx = ctx.clone();
    let spawned = std::thread::Builder::new()
        .name("probe".into())
        .spawn(move || {
            let t = Instant::now();
            let j = f(&ctx);
            let _ = tx.send((j, t.elapsed()));
        });
    match spawned {
        Ok(_) => Started::Running(rx),
        Err(e) => Started::Failed(Judged {
            expect: "the probe runs".into(),
            got: "not started".into(),
            pass: false,
            detail: format!("spawning the probe thread: {e}"),
        }),
    }
}

/// The summary of a result list.
#[must_use]
pub fn summary(results: &[ProbeResult], wall: Duration) -> Summary {
    let pass = results
        .iter()
        .filter(|r| r.verdict == Verdict::Pass)
        .count();
    Summary {
        summary: true,
        pass,
        fail: results.len() - pass,
        wall_ms: ms(wall),
        proxy_wait_ms: None,
    }
}

/// The suite as a run's first probe run: waits for the proxy to accept a connection
/// ([`wait_for_proxy`], at most [`PROXY_WAIT`]; `who` says on stderr that it waits and, if
/// it gave up, that the probes run anyway), then runs the probes `only` (empty: all). Every
/// first probe run goes through here: `cyclix probe`, agent-wait's report to the host (the
/// run's own probe phase) and agent-wait's in-Pod suite on Kubernetes. Returns the results
/// and their summary, which names the wait (`proxy_wait_ms`, ms).
///
/// # Errors
/// As [`run`]: an unknown id in `only`.
pub fn first_run(
    ctx: &Context,
    only: &[String],
    who: &str,
) -> Result<(Vec<ProbeResult>, Summary), ProbeError> {
    let start = Instant::now();
    let addr = super::clients::http::host_of(&ctx.proxy_url);
    if addr.parse::<std::net::SocketAddr>().is_err() {
        // No wait at all ([`wait_for_proxy`] resolves no name): said as what it is.
        crate::stderrln!(
            "{who}: the proxy address {addr} is not IP:port, so there is no wait for it (a name is never resolved here); the probes judge it"
        );
    } else if let Err(e) = wait_for_proxy(addr, PROXY_WAIT, |e| {
        crate::stderrln!(
            "{who}: the proxy at {addr} does not accept connections yet ({e}); waiting up to {} s",
            PROXY_WAIT.as_secs()
        );
    }) {
        crate::stderrln!(
            "{who}: the proxy at {addr} accepted no connection within {} s (last: {e}); the probes run anyway",
            PROXY_WAIT.as_secs()
        );
    }
    let waited = ms(start.elapsed());
    let results = run(ctx, only)?;
    let mut sum = summary(&results, start.elapsed());
    sum.proxy_wait_ms = Some(waited);
    Ok((results, sum))
}

/// How long the suite waits for the proxy to accept a connection before its probes run:
/// 10 s. The proxy's unit starts beside the agent's, and squid listens only once its
/// entrypoint made the run's CA and squid read its configuration
/// (`images/proxy/cyclix-proxy-start`), which under load comes after the agent container is
/// up. With the suite's own budget ([`super::SUITE_BUDGET`]) it stays inside the host's
/// deadline for the probe phase (30 s).
pub const PROXY_WAIT: Duration = Duration::from_secs(10);

/// Waits until the proxy at `addr` (`IP:port`) accepts a TCP connection, closed at once
/// (squid logs it as a transaction ended before its headers, before the run's go mark: the
/// record shows it `by: probe`). A refused or failed attempt is tried again every 50 ms, each
/// bounded by what is left of `wait` (at most 1 s); `on_first_failure` gets the first failure
/// (`cyclix probe` says on stderr that it waits). Returns how long it waited, or the last failure once `wait` ran out: the probes
/// then run anyway and judge what they see (a proxy that never listens fails them, fail
/// closed). A name is never resolved: in a static binary the C library's lookup loads the
/// name-service plugins the image's `/etc/nsswitch.conf` names, image code inside agent-wait
/// before any probe (attack review of issue 33: on Kubernetes an unexpanded
/// `$(CYCLIX_R_PROXY_SERVICE_HOST)` reached it), so anything but `IP:port` ends the wait at
/// once and the probes judge the address (`clients::tcp` takes literals only too).
///
/// # Errors
/// The last attempt's failure (`ECONNREFUSED`, a timeout), when no connection was accepted
/// within `wait`; at once, an address that is not `IP:port`.
pub fn wait_for_proxy(
    addr: &str,
    wait: Duration,
    mut on_first_failure: impl FnMut(&str),
) -> Result<Duration, String> {
    use std::net::{SocketAddr, TcpStream};
    let start = Instant::now();
    let Ok(a) = addr.parse::<SocketAddr>() else {
        let e = format!("{addr} is not IP:port (a name is never resolved here)");
        on_first_failure(&e);
        return Err(e);
    };
    let mut failed = false;
    loop {
        let left = wait.saturating_sub(start.elapsed());
        let got = TcpStream::connect_timeout(
            &a,
            left.clamp(Duration::from_millis(1), Duration::from_secs(1)),
        )
        .map(drop)
        .map_err(|e| {
            e.raw_os_error()
                .map_or_else(|| e.to_string(), crate::probe::verdict::errno_name)
        });
        match got {
            Ok(()) => return Ok(start.elapsed()),
            Err(e) => {
                if !failed {
                    failed = true;
                    on_first_failure(&e);
                }
                if start.elapsed() >= wait {
                    return Err(e);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50).min(wait.saturating_sub(start.elapsed())));
    }
}

/// `cyclix probe ...` (hidden; see `cyclix::probe`): one JSON line per probe, then a summary
/// line; exit 0 when every probe passed, 1 otherwise.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only these probes (`P1,N8,...`); repeatable.
    #[arg(long)]
    pub only: Vec<String>,
    /// The host-written context (JSON, `cyclix::probe::Context`).
    #[arg(long)]
    pub context: Option<std::path::PathBuf>,
    /// Internal: a leak-watch round while the agent runs: first W0 (this process is not
    /// dumpable and not traced), and P22 records a variable merely named like a watched one.
    #[arg(long, hide = true)]
    pub watch: bool,
    /// Internal: run one probe child (`userns`) in a fresh process.
    #[arg(long, hide = true)]
    pub child: Option<String>,
}

/// Entry point of `cyclix probe`: reads the context, runs the suite, prints the JSON lines.
/// Returns `Ok(true)` when every probe passed.
///
/// # Errors
/// An unreadable or invalid context file, an unknown `--only` id, stdout failures.
pub fn main(args: &Args) -> anyhow::Result<bool> {
    use anyhow::Context as _;
    use std::io::Write as _;
    if let Some(child) = &args.child {
        return observe::privilege::child_main(child);
    }
    // The watch probe's guard comes first: whether it is dumpable or traced right after exec.
    // Observed first, judged once the context (its profile) is read.
    let guard = args
        .watch
        .then(|| (Instant::now(), observe::processes::w0()));
    let mut ctx: Context = match &args.context {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the probe context {}", path.display()))?;
            serde_json::from_str(&text).with_context(|| {
                format!(
                    "parsing the probe context {} (see cyclix::probe::Context)",
                    path.display()
                )
            })?
        }
        None => anyhow::bail!(
            "cyclix probe needs --context FILE (the host-written facts); see cyclix::probe::Context"
        ),
    };
    let only: Vec<String> = args
        .only
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    ctx.watch = args.watch;
    let (results, sum) = if args.watch {
        // A watch round does not wait: the proxy has served the first probe run by then.
        let start = Instant::now();
        let mut results: Vec<ProbeResult> = guard
            .into_iter()
            .map(|(t, o)| {
                result(
                    "W0",
                    crate::probe::verdict::processes::w0(&o, ctx.profile),
                    t.elapsed(),
                )
            })
            .collect();
        results.extend(run(&ctx, &only)?);
        let sum = summary(&results, start.elapsed());
        (results, sum)
    } else {
        first_run(&ctx, &only, "cyclix probe")?
    };
    let mut out = std::io::stdout().lock();
    for r in &results {
        writeln!(out, "{}", serde_json::to_string(r)?).context("writing to stdout")?;
    }
    writeln!(out, "{}", serde_json::to_string(&sum)?).context("writing to stdout")?;
    out.flush().context("writing to stdout")?;
    Ok(sum.fail == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A local port nothing listens on (bound, then closed).
    fn closed_port() -> String {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let a = l.local_addr().expect("addr").to_string();
        drop(l);
        a
    }

    #[test]
    fn a_listening_proxy_is_taken_at_once_without_a_failure() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        let mut failures = Vec::new();
        let w = wait_for_proxy(&addr, Duration::from_secs(5), |e| {
            failures.push(e.to_owned());
        });
        assert!(w.is_ok(), "{w:?}");
        assert!(failures.is_empty(), "{failures:?}");
    }

    #[test]
    fn a_proxy_that_listens_after_the_first_refusal_is_waited_for() {
        let addr = closed_port();
        let mut failures = Vec::new();
        let mut late = None;
        // The proxy starts listening only once the wait saw it refuse: the order is the
        // events', not the clock's.
        let w = wait_for_proxy(&addr, Duration::from_secs(30), |e| {
            failures.push(e.to_owned());
            late = Some(TcpListener::bind(&addr).expect("bind the late proxy"));
        });
        assert!(w.is_ok(), "{w:?}");
        assert_eq!(failures, vec!["ECONNREFUSED".to_string()]);
        assert!(late.is_some());
    }

    #[test]
    fn a_proxy_that_never_listens_ends_the_wait_with_the_last_failure() {
        let addr = closed_port();
        let mut calls = 0;
        let w = wait_for_proxy(&addr, Duration::from_millis(200), |_| calls += 1);
        assert_eq!(w, Err("ECONNREFUSED".to_string()));
        assert_eq!(calls, 1, "the first failure is said once");
        let unresolvable = wait_for_proxy("no-such-proxy.invalid:3128", Duration::ZERO, |_| {});
        assert!(
            unresolvable
                .as_ref()
                .is_err_and(|e| e.contains("no-such-proxy.invalid")),
            "{unresolvable:?}"
        );
    }

    #[test]
    fn a_name_is_never_resolved_even_one_that_would_resolve_and_listen() {
        // `localhost` resolves through the C library (and so through the name-service
        // plugins an image's nsswitch.conf names); a listener is there, so a resolving wait
        // would succeed. Control: the same listener by its literal address is taken.
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let mut said = Vec::new();
        let by_name = wait_for_proxy(&format!("localhost:{port}"), Duration::from_secs(5), |e| {
            said.push(e.to_owned());
        });
        assert!(
            by_name
                .as_ref()
                .is_err_and(|e| e.contains("is not IP:port")),
            "{by_name:?}"
        );
        assert_eq!(said.len(), 1, "{said:?}");
        let literal = wait_for_proxy(&format!("127.0.0.1:{port}"), Duration::from_secs(5), |_| {});
        assert!(literal.is_ok(), "{literal:?}");
    }

    #[test]
    fn the_wait_and_the_suite_fit_in_the_hosts_probe_deadline() {
        // The host reads the report within `Deadlines::probe` from the FIFO's open; the
        // wait, the suite's budget and one probe's overrun must end before it, with a margin,
        // or a late proxy turns a refusal into a phase error with no report (attack review).
        let host = crate::run::lifecycle::Deadlines::default().probe;
        let worst = PROXY_WAIT + crate::probe::SUITE_BUDGET + crate::probe::PROBE_TIMEOUT;
        assert!(
            worst + Duration::from_secs(2) <= host,
            "{worst:?} + 2 s margin > {host:?}"
        );
    }
}
