//! cyclix: runs AI coding agents in rootless-Podman sandboxes supervised by the systemd user
//! manager, proves the boundary before the agent starts and leaves nothing behind.
//!
//! Pure core: [`spec`], [`tier`], [`render`]. Adapters and the orchestrator live beside them.

pub mod app;
pub mod spec;
pub mod systemd;
pub mod tier;
