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
    let line = super::history::line(r);
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

/// `json` with every control character JSON leaves raw (DEL, C1: U+009B is a terminal's CSI)
/// and every bidi control written as a `\uXXXX` escape: a command that prints what it reads
/// gets no escape sequence nor reordered text, and a JSON reader the same strings. JSON's
/// structure is ASCII, so such a character can only be inside a string.
#[must_use]
pub fn escaped(json: &str) -> Vec<u8> {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        let raw = c == '\u{7f}'
            || (!c.is_ascii() && crate::text::printable(&c.to_string()) != c.to_string());
        if raw {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{u:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out.into_bytes()
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
    let body = escaped(&serde_json::to_string_pretty(&summary(&rec, &rec_path))?);
    crate::notify::tell(&notify.command, &body)?;
    tracing::info!(
        "told `{}` about run {} ({:?})",
        notify.command.join(" "),
        rec.run_id,
        rec.result
    );
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    #[test]
    fn what_json_leaves_raw_is_escaped_and_reads_back_the_same() {
        let v = serde_json::json!({"cause": "url -\u{202e}\u{9b}31m\u{7f} ünï\n"});
        let text = serde_json::to_string_pretty(&v).expect("json");
        let out = String::from_utf8(super::escaped(&text)).expect("utf-8");
        assert!(out.contains("\\u202e\\u009b31m\\u007f ünï\\n"), "{out}");
        let back: serde_json::Value = serde_json::from_str(&out).expect("still JSON");
        assert_eq!(back, v);
    }
}
