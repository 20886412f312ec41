//! Binary shim: parse args, set up logging, run the verb, map the result to an exit code.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use clap::Parser as _;
use cyclix::{app, cli::Cli, exit};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    // `COMPLETE=SHELL cyclix -- WORDS` (what `cyclix completions SHELL` registers): print the
    // candidates and exit before anything else runs or prints.
    // Only for those calls: an image's `ENV` reaches cyclix's verbs in the agent's container.
    if app::completions_cmd::is_completion_call(std::env::args_os()) {
        clap_complete::CompleteEnv::with_factory(app::completions_cmd::command)
            .var(app::completion::COMPLETE_VAR)
            .complete();
    }
    let cli = Cli::parse();
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    // Under systemd (stderr is the journal): native journal entries, at least `info`, whose
    // fields include the spans' CYCLIX_TENANT, CYCLIX_RUN and CYCLIX_PHASE (issue 18, item 4),
    // so `journalctl --user CYCLIX_RUN=R` finds one run's lines.
    let journal = cyclix::context::stderr_is_journal()
        .then(|| tracing_journald::layer().ok())
        .flatten();
    if let Some(journal) = journal {
        use tracing_subscriber::Layer as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        let level = if cli.verbose > 0 { level } else { "info" };
        let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
        tracing_subscriber::registry()
            .with(journal.with_field_prefix(None).with_filter(filter))
            .init();
    } else {
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_target(false)
            .without_time()
            .init();
    }
    if let Err(e) = cyclix::failpoint::arm_from_env() {
        cyclix::stderrln!("error: {e}");
        return ExitCode::from(exit::TOOL_FAILED);
    }
    match app::run(&cli) {
        Ok(outcome) => outcome.into(),
        Err(err) => {
            // A reader that went away (`| head`) is no error to report (as ripgrep).
            if !exit::is_broken_pipe(&err) {
                cyclix::stderrln!("error: {err:#}");
            }
            exit::for_error(&err)
        }
    }
}
