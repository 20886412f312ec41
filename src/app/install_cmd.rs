//! `cyclix install [--tenant T]`: the unit templates, the timers and the pool keepers as the
//! specs say ([`super::installer`]).

use anyhow::Result;

use crate::context::HostEnv;
use crate::exit::Outcome;

/// `cyclix install [--tenant T]`.
///
/// # Errors
/// As [`super::installer::install`].
pub fn run(env: &HostEnv, only: Option<&str>) -> Result<Outcome> {
    super::installer::install(env, only)
}
