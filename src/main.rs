//! Minimal dispatch for the `unit` plumbing group (the lead replaces this with the real CLI).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cyclix::app::unit_cmd::{self, UnitArgs};

#[derive(Debug, Parser)]
#[command(name = "cyclix")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Drive the systemd user manager directly (plumbing).
    Unit(UnitArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Unit(args) => unit_cmd::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
