//! One file per section of the spec, each holding the section's raw form (every value with
//! its position), its key table ([`crate::spec::keys::Key`]), its decoding from the YAML tree
//! and its validation into the model. `top` holds the top-level keys and composes the rest.
//!
//! A new key is: its entry in the section's `KEYS`, its field in the raw form and its line in
//! `decode`, its rule in the section's `validate`, and its field in the model.

pub(crate) mod agent;
pub(crate) mod agent_preset;
pub(crate) mod baseline;
pub(crate) mod build;
pub(crate) mod credentials;
pub(crate) mod delivery;
pub(crate) mod egress;
pub(crate) mod gate;
pub(crate) mod mounts;
pub(crate) mod notify;
pub(crate) mod paths;
pub(crate) mod pool;
pub(crate) mod repo;
pub(crate) mod schedule;
pub(crate) mod services;
pub(crate) mod setup;
pub(crate) mod task;
pub(crate) mod top;

use super::{Diagnostic, yaml};
pub(crate) use top::RawSpec;

/// Decodes a spec text into the unchecked model.
///
/// Returns `Err` with the diagnostics when the text cannot be read as one YAML mapping at all
/// (encoding, syntax, budgets, tags). Otherwise returns the model and the schema diagnostics
/// (unknown, duplicate or missing keys, wrong YAML types): fields with a problem are `None`
/// in the model, so validation can still check everything else.
///
/// # Errors
/// The fatal diagnostics, as above.
pub(crate) fn decode(text: &str) -> Result<(RawSpec, Vec<Diagnostic>), Vec<Diagnostic>> {
    let root = yaml::read(text)?;
    let mut d = yaml::Decoder { out: Vec::new() };
    match top::decode(&mut d, &root) {
        Some(raw) => Ok((raw, d.out)),
        None => Err(d.out),
    }
}
