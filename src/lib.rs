//! cyclix: runs AI coding agents in rootless-Podman sandboxes supervised by the systemd user
//! manager, proves the boundary before the agent starts and leaves nothing behind.
//!
//! Pure core: [`spec`], [`tier`], [`render`], [`naming`] (every name of a run), [`layout`] (every
//! path). Adapters ([`context`], [`host`], [`journal`]) and the orchestrator ([`app`]) live beside them; [`exit`] is the one place for exit codes.

/// `eprintln!` that never panics: a closed stderr (`cyclix ... 2>&1 | head`) is not an error
/// worth dying for (`eprintln!` panics on `EPIPE`).
#[macro_export]
macro_rules! stderrln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// `println!` that never panics: a closed stdout (`cyclix status | head -1`) returns from the
/// enclosing function (which returns `anyhow::Result`) with `writing to stdout: Broken pipe`,
/// which `exit::for_error` turns into exit 0 and no message, as ripgrep does; `println!`
/// would panic (exit 101).
#[macro_export]
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(out, $($t)*)
            .and_then(|()| out.flush())
            .map_err(|e| anyhow::Error::new(e).context("writing to stdout"))?;
    }};
}

/// `print!` that never panics (see [`outln!`]).
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        write!(out, $($t)*)
            .and_then(|()| out.flush())
            .map_err(|e| anyhow::Error::new(e).context("writing to stdout"))?;
    }};
}

/// `eprint!` that never panics (see [`stderrln!`]).
#[macro_export]
macro_rules! stderr {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($t)*);
    }};
}

pub mod agents;
pub mod app;
pub mod atomic;
pub mod cli;
pub mod cluster;
pub mod context;
pub mod demo;
pub mod drill;
pub mod envfile;
pub mod exit;
pub mod failpoint;
pub mod flock;
pub mod gate;
pub mod git;
pub mod host;
pub mod images;
pub mod inventory;
pub mod journal;
pub mod layout;
pub mod limits;
pub mod metrics;
pub mod naming;
pub mod notify;
pub mod podman;
pub mod probe;
pub mod process;
pub mod render;
pub(crate) mod run;

/// The kinds of a run's ledger entries, in the order a run first appends them (each a fail
/// point `ledger.KIND`): [`run::ledger::KINDS`].
pub use run::ledger::KINDS as LEDGER_KINDS;
pub mod spec;
pub mod systemd;
pub mod text;
pub mod tier;
pub mod twin;
