//! cyclix: runs AI coding agents in rootless-Podman sandboxes supervised by the systemd user
//! manager, proves the boundary before the agent starts and leaves nothing behind.
//!
//! Pure core: [`spec`], [`tier`], [`render`]. Adapters ([`context`], [`host`]) and the
//! orchestrator ([`app`]) live beside them; [`exit`] is the one place for exit codes.

pub mod app;
pub mod cli;
pub mod context;
pub mod demo;
pub mod exit;
pub mod git;
pub mod host;
pub mod images;
pub mod podman;
pub mod probe;
pub mod process;
pub mod render;
pub mod run;
pub mod spec;
pub mod systemd;
pub mod tier;
