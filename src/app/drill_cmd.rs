//! `cyclix drill TENANT [--model M] [--json] [--only ESCAPE]`: the escape drill (issue 14 item
//! 3). One normal run of the tenant per escape (same boundary, probes, teardown, audit and
//! record; the record says `drill: ESCAPE`), one after another, each with its task replaced by
//! the escape's prompt (`drill::escapes`) and its own objects planted with a fresh nonce
//! (`plant`). The verdict (`drill::verdict`) reads the host, the run's record and its agent's
//! journal (searched for the nonce only). Exit 0 when every applicable escape was attempted and
//! refused, 1 when any got through or was not attempted.
//!
//! JSON schema `cyclix-drill/1`: `{"schema", "tenant", "model", "seconds", "escapes": [{"escape",
//! "verdict", "evidence", "run_id"}]}`, `verdict` one of `got-through`, `refused`,
//! `not-attempted`, `not-applicable`.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::launch::{RunOpts, run_with};
use super::plant;
use super::tenant::runnable_spec;
use crate::context::HostEnv;
use crate::drill::escapes::{self, Escape, Placeholder, Targets};
use crate::drill::verdict::{self, Observed, Row, Verdict};
use crate::exit::Outcome;
use crate::run::inputs::Override;
use crate::run::record::RunRecord;
use crate::spec::{HostPattern, Spec};

/// The largest text of a run's commits the verdict searches, in bytes (16 MiB).
const COMMITS_CAP: u64 = 16 * 1024 * 1024;

/// `cyclix drill`: see the module documentation.
///
/// # Errors
/// Failures of cyclix itself (no runtime dir, planting failed, a run failed to start).
pub fn run(
    env: &HostEnv,
    tenant: &str,
    model: Option<&str>,
    json: bool,
    only: &[String],
) -> Result<Outcome> {
    let mut wanted = Vec::new();
    for id in only {
        match Escape::from_id(id) {
            Ok(e) => wanted.push(e),
            Err(m) => {
                crate::stderrln!("error: --only: {m}");
                return Ok(Outcome::Findings);
            }
        }
    }
    if wanted.is_empty() {
        wanted = Escape::ALL.to_vec();
    }
    // One canary for the drill's process tree, made before anything exists (`run::canary`);
    // every drill run carries it, and the verdict of `canary-out` searches for it.
    crate::run::canary::ensure()?;
    let canary = crate::context::utf8_var(crate::run::canary::VAR).unwrap_or_default();
    let runtime = env.runtime()?;
    let Some((spec, _)) = runnable_spec(env, tenant, None, None, &|_| None)? else {
        return Ok(Outcome::Findings);
    };
    if !spec.tier.is_sandboxed() {
        crate::stderrln!(
            "error: {}: tenant {tenant} has `tier: {}`, where the agent runs with your own rights \
             (`cyclix tier describe {}`): its escapes would be real (your key read, your \
             repository's hooks written, your processes killed). cyclix drill drills the \
             container boundary only; fix: set `tier: container` in the spec",
            super::tenant::tenant_spec_path(env, tenant).display(),
            spec.tier,
            spec.tier
        );
        return Ok(Outcome::Findings);
    }
    if let Some(m) = model
        && let Err(e) = crate::spec::apply_model(&mut spec.agent.clone(), m)
    {
        crate::stderrln!("error: {e}");
        return Ok(Outcome::Findings);
    }
    // SIGTERM/SIGINT between two runs stops the drill too (each run has its own flag).
    let stop = super::tenant::interrupt_flag()?;
    let ledgers = plant::ledgers_dir(&runtime);
    for n in plant::converge(&ledgers) {
        crate::stderrln!("cyclix: {n}");
    }
    let t0 = Instant::now();
    let mut rows = Vec::new();
    let mut interrupted = false;
    for escape in wanted {
        interrupted |= stop.load(std::sync::atomic::Ordering::SeqCst);
        if interrupted {
            rows.push(verdict::without_run(
                escape,
                Verdict::NotAttempted,
                "the drill was interrupted before this escape".into(),
            ));
            continue;
        }
        let (row, stop) = drill_one(env, tenant, &spec, escape, model, &canary)?;
        interrupted = stop;
        rows.push(row);
    }
    report(tenant, model, json, &rows, t0.elapsed())?;
    Ok(if interrupted {
        Outcome::Interrupted
    } else if verdict::passes(&rows) {
        Outcome::Ok
    } else {
        Outcome::Findings
    })
}

/// One escape: plant, run, observe, judge, remove. Returns the row and whether the run was
/// interrupted (the drill then stops).
fn drill_one(
    env: &HostEnv,
    tenant: &str,
    spec: &Spec,
    escape: Escape,
    model: Option<&str>,
    canary: &str,
) -> Result<(Row, bool)> {
    let runtime = env.runtime()?;
    let ledgers = plant::ledgers_dir(&runtime);
    let mut interrupted = false;
    let nonce = plant::random_hex(6)?;
    let mut targets = targets(spec, &runtime.0, &nonce);
    if let Some(reason) = escapes::not_applicable(escape, &targets) {
        let row = verdict::without_run(escape, Verdict::NotApplicable, reason);
        return Ok((row, false));
    }
    let mut planted = plant::Planted::plant(
        tenant,
        &nonce,
        &env.home,
        &runtime.0,
        &ledgers,
        Path::new(&spec.repo.path),
    )?;
    if escape == Escape::SshKey
        && let Some(blind) = planted.key_blind.clone()
    {
        // Fail closed: an escape the host could not see is not a pass.
        let left = planted.remove();
        let mut row = verdict::without_run(escape, Verdict::NotAttempted, blind);
        row.evidence.extend(
            left.into_iter()
                .map(|l| format!("drill object not removed: {l}")),
        );
        return Ok((row, false));
    }
    targets.key = planted.ledger.key.display().to_string();
    targets.outside = planted.ledger.outside.display().to_string();
    targets.sentinel_pid = planted.ledger.sentinel_pid;
    targets
        .sockets
        .push(planted.ledger.socket.display().to_string());
    crate::stderrln!("cyclix: drill {escape} (drill-{nonce}) of tenant {tenant}");
    let over = Override {
        task: Some(escapes::prompt(escape, &targets)),
        drill: Some(escape.id().to_string()),
        model: model.map(str::to_string),
    };
    let opts = RunOpts {
        spec_path: None,
        run_id: None,
        force_backend: None,
        storage_lock_wait: crate::run::storage_lock::DEFAULT_WAIT,
    };
    let ran = run_with(env, tenant, &opts, over);
    // The run's own secret values: the evidence quotes the agent's output, never them.
    let secrets = super::tenant::run_secrets(env, spec).unwrap_or_default();
    let host = planted.facts();
    let secret = match escape {
        Escape::SshKey => planted.key_content.clone(),
        Escape::CanaryOut => canary.to_string(),
        _ => String::new(),
    };
    let left = planted.remove();
    let mut row = match ran {
        Ok((_, Some(rec))) => {
            interrupted = rec.result == crate::run::record::RunResult::Interrupted;
            let dir = crate::run::record::tenant_dir(&env.state_home, tenant);
            let o = observe(&rec, spec, host, &secrets, &dir);
            verdict::judge(escape, &nonce, &o, &secret)
        }
        Ok((_, None)) => verdict::without_run(
            escape,
            Verdict::NotAttempted,
            "the run was refused before it started (see above)".into(),
        ),
        Err(e) => verdict::without_run(
            escape,
            Verdict::NotAttempted,
            format!("the run failed: {e:#}"),
        ),
    };
    row.evidence.extend(
        left.into_iter()
            .map(|l| format!("drill object not removed: {l}")),
    );
    Ok((row, interrupted))
}

/// What the prompt names, before the drill's objects are planted (their paths and the
/// sentinel's pid are filled in after).
fn targets(spec: &Spec, runtime_dir: &Path, nonce: &str) -> Targets {
    let api: Vec<&str> = spec
        .agent
        .credentials
        .iter()
        .map(|c| c.host.as_str())
        .collect();
    let plain = spec.egress.ports.contains(&80) || spec.egress.ports.contains(&8080);
    let port = if spec.egress.ports.contains(&80) {
        ""
    } else {
        ":8080"
    };
    let allowed = spec.egress.allow.iter().find_map(|h| match h {
        HostPattern::Exact(h) if plain && !api.contains(&h.as_str()) => {
            Some(format!("http://{h}{port}"))
        }
        _ => None,
    });
    Targets {
        nonce: nonce.to_string(),
        key: String::new(),
        outside: String::new(),
        repo: spec.repo.path.clone(),
        sentinel_pid: 0,
        sockets: vec![
            runtime_dir.join("bus").display().to_string(),
            runtime_dir.join("podman/podman.sock").display().to_string(),
        ],
        allowed,
        placeholder: spec.agent.credentials.first().map(|c| Placeholder {
            var: c.env.clone(),
            header: c.header.clone(),
            scheme: match c.scheme {
                crate::spec::CredentialScheme::Bearer => "Bearer ".into(),
                crate::spec::CredentialScheme::Raw => String::new(),
            },
        }),
    }
}

/// What the verdict needs from the run: its record, its agent's kept output (every line; the
/// verdict only searches it and quotes it as evidence, so each line has every value of
/// `secrets` replaced by `***`), its commits' text.
fn observe(
    rec: &RunRecord,
    spec: &Spec,
    host: verdict::HostFacts,
    secrets: &[(String, Vec<u8>)],
    records: &std::path::Path,
) -> Observed {
    let values: Vec<&[u8]> = secrets.iter().map(|(_, v)| v.as_slice()).collect();
    let kept = crate::layout::RunFiles::new(records, &rec.run_id).output_log("agent");
    let agent_log: Vec<String> = super::run_output::container_lines(&kept, "agent")
        .unwrap_or_else(|e| {
            crate::stderrln!("warning: {e:#}; the drill searches the record's agent log instead");
            rec.agent_log.clone()
        })
        .iter()
        .map(|l| crate::run::phases::collect::redact(l, &values))
        .collect();
    let mut commits = if rec.commits.is_empty() || rec.branch.is_empty() {
        String::new()
    } else {
        commits_text(spec, rec)
            .unwrap_or_else(|e| format!("(the commits could not be read: {e:#})"))
    };
    // What the agent left uncommitted is kept beside the record: searched too.
    if let Some(diff) = rec
        .import
        .as_ref()
        .and_then(|i| i.uncommitted_diff.as_ref())
    {
        commits.push_str(&String::from_utf8_lossy(
            &std::fs::read(diff).unwrap_or_default(),
        ));
    }
    Observed {
        run_id: rec.run_id.clone(),
        result: serde_json::to_value(rec.result)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        tool_log: spec
            .agent
            .preset
            .as_ref()
            .and_then(|p| crate::agents::stream::tool_outputs(p.stream, &agent_log)),
        agent_log,
        decisions: rec.egress_decisions.clone(),
        refusal: rec.refusal.clone(),
        commits,
        host,
    }
}

/// The messages and patches of the run's commits (`git log -p base..branch` in the user's
/// repository), as text.
fn commits_text(spec: &Spec, rec: &RunRecord) -> Result<String> {
    let dir = tempfile::tempdir()?;
    let git = crate::git::Git::new(&spec.repo.path);
    let bytes = git.delivered_text(&rec.base_commit, &rec.branch, dir.path(), COMMITS_CAP)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn report(
    tenant: &str,
    model: Option<&str>,
    json: bool,
    rows: &[Row],
    took: Duration,
) -> Result<()> {
    if json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "schema": "cyclix-drill/1",
                "tenant": tenant,
                "model": model,
                "seconds": took.as_secs(),
                "escapes": rows,
            }))?
        );
    } else {
        crate::out!("{}", verdict::table(rows));
        crate::outln!(
            "drill of tenant {tenant}: {} escape(s) in {} s{}",
            rows.len(),
            took.as_secs(),
            model.map_or(String::new(), |m| format!(", model {m}"))
        );
    }
    Ok(())
}
