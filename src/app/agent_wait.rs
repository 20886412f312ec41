//! `cyclix agent-wait --go FILE --timeout-s N -- ARGV...`: runs as the agent container's
//! command and holds the agent back until cyclix, on the host, has proven the boundary from
//! inside this very container (`cyclix probe` through `podman exec`) and created FILE in the
//! read-only control directory. Then it `exec`s ARGV, so the agent is the same process the unit
//! supervises. If cyclix refuses the boundary (it creates `refused` beside FILE) or FILE does
//! not appear within N seconds, the agent never starts and this exits 1.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::exit::Outcome;
use crate::render::plan::REFUSED_FILE;

/// How often the control directory is looked at.
pub const POLL: Duration = Duration::from_millis(10);

/// Waits for `go`, then replaces this process with `argv`, its standard input `stdin` when
/// given (opened only after the go: the task file of a preset CLI).
///
/// # Errors
/// When `stdin` cannot be opened or `argv` cannot be executed (the error names the file or
/// the program).
pub fn run(go: &Path, timeout_s: u64, stdin: Option<&Path>, argv: &[String]) -> Result<Outcome> {
    let refused = go.with_file_name(REFUSED_FILE);
    let deadline = Instant::now() + Duration::from_secs(timeout_s);
    loop {
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
        std::thread::sleep(POLL);
    }
    let input = match stdin {
        Some(p) => Some(
            std::fs::File::open(p)
                .map_err(|e| anyhow::anyhow!("opening the agent's input {}: {e}", p.display()))?,
        ),
        None => None,
    };
    let err = crate::process::exec_replace(argv, input);
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
        timeout_s,
        stdin,
        argv,
    } = c
    else {
        anyhow::bail!("invariant: agent-wait dispatched another verb");
    };
    match (go, probe) {
        (_, Some(context)) => run_probed(context, stdin.as_deref(), argv),
        (Some(go), None) => run(go, *timeout_s, stdin.as_deref(), argv),
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
    let only: Vec<String> = ctx
        .profile
        .probes()
        .iter()
        .map(|s| (*s).to_string())
        .collect();
    let start = Instant::now();
    let results = crate::probe::run(&ctx, &only)?;
    let sum = crate::probe::summary(&results, start.elapsed());
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
    let err = crate::process::exec_replace(argv, input);
    anyhow::bail!(
        "starting the agent `{}`: {err}",
        argv.first().map_or("", String::as_str)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_or_late_boundaries_never_start_the_agent() {
        let dir = tempfile::tempdir().expect("tmp");
        let go = dir.path().join("go");
        let marker = dir.path().join("agent-ran");
        let argv = vec!["touch".to_string(), marker.display().to_string()];
        std::fs::write(dir.path().join(REFUSED_FILE), "").expect("refuse");
        assert_eq!(run(&go, 5, None, &argv).expect("runs"), Outcome::Findings);
        std::fs::remove_file(dir.path().join(REFUSED_FILE)).expect("rm");
        let t = Instant::now();
        assert_eq!(run(&go, 0, None, &argv).expect("runs"), Outcome::Findings);
        assert!(t.elapsed() < Duration::from_secs(2));
        assert!(!marker.exists(), "the agent ran without a proven boundary");
    }
}
