//! The record's part about the run's environment: cold, or a warm one claimed from the
//! tenant's pool (`run::pool`).

use serde::{Deserialize, Serialize};

/// The environment a run used, as its record states it (`environment` in the run record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvironmentRecord {
    /// The environment id: the run id on the cold path.
    pub id: String,
    /// Whether the run claimed a warm environment from its tenant's pool.
    pub pooled: bool,
    /// Why the run went cold (empty when pooled).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why_cold: String,
    /// Pooled: when the environment became ready, in ms since the Unix epoch.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub filled_ms: u64,
    /// Pooled: how long it idled in the pool before the claim, in ms.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_ms: u64,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// What `run::pool::why_cold` says for a tenant without `pool:`.
pub const NO_POOL: &str = "the tenant has no pool";

/// What `run::pool::why_cold` says when a pooled tenant's pool had nothing ready.
pub const NONE_READY: &str = "none ready: the pool is empty (`cyclix pool fill TENANT`, or `cyclix-pool@TENANT.service` keeps it filled)";
