//! `cyclix notify TENANT` (hidden; what `cyclix-notify@TENANT.service` runs when the run unit
//! fails, or passes with `notify.on_success`): the spec's `notify.command` with the summary of
//! the tenant's latest run record as JSON on stdin (issue 18, item 6).

use anyhow::{Context as _, Result};

use super::tenant::tenant_spec_path;
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::run::record;

/// The schema name of the summary on the notify command's stdin.
pub const SCHEMA: &str = "cyclix-notify/1";

/// The summary of `r`: the history line (when, result, duration, branch, cause) plus the
/// failed phase, error, refusals, causes, leftovers and the record's path. No secret values:
/// the record holds none.
#[must_use]
pub fn summary(r: &record::RunRecord, record_path: &std::path::Path) -> serde_json::Value {
    let line = super::runs_cmd::line(r);
    serde_json::json!({
        "schema": SCHEMA,
        "tenant": line.tenant,
        "run_id": line.run_id,
        "result": line.result,
        "started": line.started,
        "duration_ms": line.duration_ms,
        "branch": line.branch,
        "cause": line.cause,
        "failed_phase": r.failed_phase,
        "error": r.error,
        "refusal": r.refusal,
        "causes": r.causes,
        "leftovers": r.leftovers,
        "record": record_path,
    })
}

/// `cyclix notify TENANT`.
///
/// # Errors
/// A bad tenant, a spec that does not load or has no `notify:`, no record, or a notify
/// command that fails.
pub fn run(env: &HostEnv, tenant: &str) -> Result<Outcome> {
    super::tenant::check_name(tenant)?;
    let path = tenant_spec_path(env, tenant);
    let spec = match super::spec_file::load_spec(&path, env)? {
        Ok(s) => s,
        Err(e) => return Err(crate::exit::input(format!("{e}"))),
    };
    let Some(notify) = &spec.notify else {
        return Err(crate::exit::input(format!(
            "{}: no `notify:`; nothing to tell",
            path.display()
        )));
    };
    let rec = record::latest(&env.state_home, tenant)?
        .with_context(|| format!("tenant {tenant} has no run record yet"))?;
    let dir = record::tenant_dir(&env.state_home, tenant);
    let rec_path = crate::layout::RunFiles::new(&dir, &rec.run_id).record();
    let body = serde_json::to_vec_pretty(&summary(&rec, &rec_path))?;
    crate::notify::tell(&notify.command, &body)?;
    tracing::info!(
        "told `{}` about run {} ({:?})",
        notify.command.join(" "),
        rec.run_id,
        rec.result
    );
    Ok(Outcome::Ok)
}
