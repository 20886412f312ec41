//! A tenant's schedule as the verbs show it: whether it is paused (`pause`, `resume`,
//! `status`, `tick`), and the line of a trigger skipped while a run was active (`tick`,
//! `status`).

use super::clock::utc_timestamp;
use crate::context::HostEnv;
use crate::run::tick::Skip;

/// The pause marker's text (`paused at …`) when `tenant` is paused.
#[must_use]
pub fn paused(env: &HostEnv, tenant: &str) -> Option<String> {
    std::fs::read_to_string(env.layout().pause_marker(tenant))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The log line of a skip: `skipped: run R active since T (…)`.
#[must_use]
pub fn skip_line(s: &Skip) -> String {
    let run = s.active_run.as_deref().unwrap_or("(unnamed)");
    let since = s
        .active_since_ms
        .map_or_else(|| "an unknown time".to_string(), utc_timestamp);
    format!(
        "skipped: run {run} active since {since} (cyclix-run@{}.service {}); {} fired at {}",
        s.tenant,
        s.unit_state,
        s.trigger,
        utc_timestamp(s.time_ms)
    )
}
