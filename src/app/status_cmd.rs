//! `cyclix status [TENANT] [--json]`: the run unit, the timer, a run in progress (its id,
//! phase and how long it has been in it) and the last run record; with no tenant, one line per
//! tenant (issue 19, item 5).

use anyhow::Result;
use serde::Serialize;

use super::clock::elapse_text;
use super::current_run::{CurrentRun, current_line, current_run};
use super::tenant::{run_unit, unit_manager};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::run::record;
use crate::systemd::UnitManager;

/// `cyclix status [TENANT]`: one tenant in full, or every tenant in one line each.
///
/// # Errors
/// D-Bus or record read failures.
pub fn run(env: &HostEnv, tenant: Option<&str>, json: bool) -> Result<Outcome> {
    match tenant {
        Some(t) => one(env, t, json),
        None => all(env, json),
    }
}

/// One line of `cyclix status` with no tenant (`--json`: one object of `cyclix-status/1`).
#[derive(Debug, Serialize)]
struct TenantRow {
    tenant: String,
    unit_state: String,
    current_run: Option<CurrentRun>,
    timer_next_elapse: Option<String>,
    paused: Option<String>,
    last_result: Option<String>,
    last_run: Option<String>,
    /// The tenant's warm pool, when it has one (newcomer trial 8: `status` alone showed none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pool: Option<crate::run::pool::PoolView>,
}

impl TenantRow {
    /// `TENANT  STATE[ · queued|running RUN] · next …|paused|no timer · last RESULT (RUN)[ · pool …]`.
    fn line(&self) -> String {
        let now = self.current_run.as_ref().map_or_else(String::new, |c| {
            // A run still waiting for a run slot (phase `queue`) is not running yet.
            let verb = if c.phase.as_deref() == Some("queue") {
                "queued"
            } else {
                "running"
            };
            format!(" · {verb} {}", c.run_id)
        });
        let timer = match (&self.paused, &self.timer_next_elapse) {
            (Some(_), _) => "paused".to_owned(),
            (None, Some(n)) => format!("next {n}"),
            (None, None) => "no timer".to_owned(),
        };
        let pool = self.pool.as_ref().map_or_else(String::new, |p| {
            let ready = p
                .counts
                .as_ref()
                .map_or_else(|| "?".to_string(), |c| c.ready.to_string());
            let kept = if p.refilling {
                String::new()
            } else {
                format!(", not refilling: {}", p.why_not)
            };
            format!(" · pool {ready}/{} ready{kept}", p.size)
        });
        format!(
            "{:<20} {}{now} · {timer} · last {} ({}){pool}",
            self.tenant,
            self.unit_state,
            self.last_result.as_deref().unwrap_or("-"),
            self.last_run.as_deref().unwrap_or("-"),
        )
    }
}

/// `cyclix status` with no tenant: for each spec in the tenants directory, the run unit's
/// state, a run in progress, the timer's next elapse, a pause and the last result.
fn all(env: &HostEnv, json: bool) -> Result<Outcome> {
    let mut tenants: Vec<String> = std::fs::read_dir(env.layout().tenants_dir())
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter_map(|n| n.strip_suffix(".yaml").map(str::to_owned))
                .filter(|t| crate::spec::validate::tenant_name(t).is_ok())
                .collect()
        })
        .unwrap_or_default();
    tenants.sort();
    let units = unit_manager(env)?;
    let mut rows = Vec::new();
    for t in &tenants {
        let st = units.unit_status(&crate::naming::run_service(t))?;
        let next = units
            .timer_next_elapse(&crate::naming::run_timer(t))
            .ok()
            .filter(crate::systemd::NextElapse::is_scheduled);
        let last = record::latest(&env.state_home, t).ok().flatten();
        rows.push(TenantRow {
            tenant: t.clone(),
            unit_state: st.summary(),
            current_run: current_run(env, t),
            timer_next_elapse: next.map(elapse_text),
            paused: super::schedule::paused(env, t),
            last_result: last.as_ref().map(|r| r.result.as_str().to_string()),
            last_run: last.map(|r| r.run_id),
            pool: pool_view(env, &units, t),
        });
    }
    // The host-wide run slots (`max_runs`) and the runs waiting for one (issue 16, item 4).
    let capacity = match (super::host_config::load(env), env.runtime_dir.as_ref()) {
        (Ok(l), Some(rt)) => Ok(super::host_config::view(&l, rt)),
        (Err(e), _) => Err(e),
        (_, None) => Err("$XDG_RUNTIME_DIR is unset: the run slots cannot be read".to_string()),
    };
    if json {
        let cap = match &capacity {
            Ok(v) => serde_json::to_value(v)?,
            Err(e) => serde_json::json!({"error": e}),
        };
        let v = serde_json::json!({"schema": "cyclix-status/1", "tenants": rows, "capacity": cap,
            "install_would_change": drift_lines(env, None)});
        crate::outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(Outcome::Ok);
    }
    if rows.is_empty() {
        crate::outln!(
            "no tenants in {} (`cyclix demo setup` lays out the demo tenant)",
            env.layout().tenants_dir().display()
        );
    }
    for r in &rows {
        crate::outln!("{}", r.line());
    }
    match &capacity {
        Ok(v) => {
            let now = u64::try_from(super::clock::now_ms()).unwrap_or(u64::MAX);
            for l in super::host_config::view_lines(v, now) {
                crate::outln!("{l}");
            }
        }
        Err(e) => crate::outln!("run slots: unknown ({e})"),
    }
    print_drift(&drift_lines(env, None))?;
    Ok(Outcome::Ok)
}

/// What `cyclix install` would change (the shared templates, and `tenant`'s when one is
/// named: issue 32 item 2); a line saying it could not be read on failure.
fn drift_lines(env: &HostEnv, tenant: Option<&str>) -> Vec<String> {
    match super::installer::drift::lines(env, tenant) {
        Ok(d) => d,
        Err(e) => vec![format!(
            "(what `cyclix install` would change could not be read: {e:#})"
        )],
    }
}

fn print_drift(lines: &[String]) -> Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    crate::outln!("not installed as the specs say; `cyclix install` would change:");
    for l in lines {
        crate::outln!("  {l}");
    }
    Ok(())
}

/// `cyclix status TENANT`: the run unit's state, a run in progress, the timer's next elapse
/// and the last record.
fn one(env: &HostEnv, tenant: &str, json: bool) -> Result<Outcome> {
    let unit = run_unit(env, tenant)?;
    let units = unit_manager(env)?;
    let current = current_run(env, tenant);
    let st = units.unit_status(&unit)?;
    let timer = crate::naming::run_timer(tenant);
    let next = units.timer_next_elapse(&timer).ok();
    // A damaged record must not hide the unit's state.
    let last = record::latest(&env.state_home, tenant).unwrap_or_else(|e| {
        crate::stderrln!("warning: the last run record cannot be read: {e:#}");
        None
    });
    let (skips, unreadable) = crate::run::tick::read(&record::tenant_dir(&env.state_home, tenant))
        .unwrap_or_else(|e| {
            crate::stderrln!("warning: the skipped triggers cannot be read: {e:#}");
            (Vec::new(), 0)
        });
    let paused = super::schedule::paused(env, tenant);
    let pool = pool_view(env, &units, tenant);
    if json {
        let v = serde_json::json!({"unit": unit, "status": st, "timer_next_elapse": next,
            "paused": paused, "current_run": current, "pool": pool,
            "skips": {"count": skips.len(), "last": skips.last(), "unreadable_lines": unreadable},
            "last_run": last, "install_would_change": drift_lines(env, Some(tenant))});
        crate::outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(Outcome::Ok);
    }
    crate::outln!("{unit}: {}", st.summary());
    if let Some(c) = &current {
        crate::outln!("{}", current_line(c));
        for s in &c.services {
            crate::outln!("  service {s}");
        }
    }
    match next {
        Some(n) if n.is_scheduled() => crate::outln!("{timer}: next elapse {}", elapse_text(n)),
        _ => crate::outln!("{timer}: not scheduled"),
    }
    if let Some(why) = &paused {
        crate::outln!("{tenant} is paused ({why}); `cyclix resume {tenant}` undoes it");
    }
    if let Some(p) = &pool {
        for l in p.lines(super::clock::now_ms(), &super::clock::utc_timestamp) {
            crate::outln!("{l}");
        }
    }
    if let Some(s) = skips.last() {
        crate::outln!(
            "{timer}: {} trigger(s) skipped while a run was active; last: {}",
            skips.len(),
            super::schedule::skip_line(s)
        );
    }
    if st.active_state == crate::systemd::ActiveState::Failed {
        let errors = unrecorded_errors(&unit, last.as_ref());
        if !errors.is_empty() {
            crate::outln!("the last start of {unit} failed before its run wrote a record:");
            for e in &errors {
                crate::outln!("  {}", crate::text::printable(e));
            }
            // Newcomer trial 9: after the spec was fixed this still showed, as if current.
            crate::outln!(
                "  (the unit keeps this failed start until it starts again, or `systemctl --user reset-failed {unit}`)"
            );
        }
    }
    print_drift(&drift_lines(env, Some(tenant)))?;
    if let Some(r) = last {
        crate::out!("last {}", record::summary(&r));
    } else {
        crate::outln!("no run recorded yet");
    }
    Ok(Outcome::Ok)
}

/// The tenant's warm pool (`pool:` with a size above 0), what its state holds and its keeper;
/// `None` without one, or when the spec cannot be loaded (`status` shows the unit regardless).
fn pool_view(
    env: &HostEnv,
    units: &dyn UnitManager,
    tenant: &str,
) -> Option<crate::run::pool::PoolView> {
    let path = super::tenant::tenant_spec_path(env, tenant);
    let spec = super::spec_file::load_spec(&path, env).ok()?.ok()?;
    let pool = spec.pool.filter(|p| p.size > 0)?;
    let dir = env.runtime().ok()?.pool_dir(tenant);
    let keeper = keeper_view(units, &dir, tenant);
    let state = crate::run::pool::PoolState::new(dir);
    Some(crate::run::pool::PoolView::new(
        &pool,
        state.counts(),
        keeper,
    ))
}

/// The keeper of `tenant`'s pool (in `pool_dir`): its unit's state and its state file.
pub(crate) fn keeper_view(
    units: &dyn UnitManager,
    pool_dir: &std::path::Path,
    tenant: &str,
) -> crate::run::pool::KeeperView {
    let unit = crate::naming::pool_service(tenant);
    let active_state = match units.unit_status(&unit) {
        Ok(s) => s.active_state.as_str().to_string(),
        Err(e) => format!("unknown ({e})"),
    };
    let (state, error) = match crate::run::pool::keeper::KeeperState::read(pool_dir) {
        Ok(s) => (s, String::new()),
        Err(e) => (None, format!("{e:#}")),
    };
    crate::run::pool::KeeperView {
        unit,
        active_state,
        state,
        error,
    }
}

/// cyclix's `error:` lines (at most the last 3) that run unit `unit` logged after the end of
/// the `last` recorded run: why a start that wrote no record failed (a variable set nowhere,
/// an image not built), which the record cannot say. Read like `cyclix start` reads them
/// (`journal::unit_messages_since`); empty when the journal cannot be read.
fn unrecorded_errors(unit: &str, last: Option<&record::RunRecord>) -> Vec<String> {
    let since = last
        .and_then(|r| r.phases.iter().map(|p| p.end_ms).max())
        .map_or(0, |ms| ms + 1);
    let id = unit.strip_suffix(".service").unwrap_or(unit);
    let lines = crate::journal::unit_messages_since(unit, id, since).unwrap_or_default();
    error_lines(after_the_record(&lines, last))
}

/// The lines after the last one naming `last`'s record file: a run prints its summary, with
/// `record: …/RUN.json` and the `error:` line of its result, after its last phase ended, and
/// that start is the record's, not one that failed before writing it (issue 32 item 3: an
/// agent timeout's own summary was shown as an unrecorded failure, then its record).
fn after_the_record<'a>(lines: &'a [String], last: Option<&record::RunRecord>) -> &'a [String] {
    let Some(r) = last else {
        return lines;
    };
    let file = format!("/{}.json", r.run_id);
    // `cyclix run` ends a run recorded `error` with `error: run RUN failed in phase P`.
    let own_error = format!("error: run {} failed in phase ", r.run_id);
    match lines
        .iter()
        .rposition(|l| l.trim_start().starts_with("record: ") && l.trim_end().ends_with(&file))
    {
        Some(i) => {
            let rest = &lines[i + 1..];
            match rest.first() {
                Some(l) if l.starts_with(&own_error) => &rest[1..],
                _ => rest,
            }
        }
        None => lines,
    }
}

/// The last `error:` line of a start and the lines after it (a spec's diagnostics and their
/// fixes follow `error: the spec does not validate:`), at most [`ERROR_LINES`].
fn error_lines(lines: &[String]) -> Vec<String> {
    let Some(first) = lines.iter().rposition(|l| l.starts_with("error:")) else {
        return Vec::new();
    };
    lines[first..].iter().take(ERROR_LINES).cloned().collect()
}

/// How many lines of a failed start `cyclix status` shows.
const ERROR_LINES: usize = 8;

#[cfg(test)]
mod error_line_tests {
    #[test]
    fn the_last_error_and_its_diagnostics_are_shown() {
        let l = |v: &[&str]| v.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
        let lines = l(&[
            "cyclix: starting",
            "error: the spec does not validate:",
            "/h/t.yaml:29:1: egres: unknown key `egres`",
            "  fix: did you mean `egress`?",
        ]);
        assert_eq!(super::error_lines(&lines), lines[1..].to_vec());
        assert!(super::error_lines(&l(&["cyclix: ok"])).is_empty());
    }

    #[test]
    fn a_runs_own_summary_is_its_record_and_a_later_failed_start_is_not() {
        let l = |v: &[&str]| v.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
        let rec = crate::run::record::RunRecord::interrupted("t", "r1", String::new(), Vec::new());
        let own = l(&[
            "  record: /home/u/.local/state/cyclix/runs/t/r1.json",
            "error: run r1 failed in phase agent",
        ]);
        let after = super::after_the_record(&own, Some(&rec));
        assert!(super::error_lines(after).is_empty(), "{after:?}");
        // A start after the record that failed before a run began is shown.
        let mut later = own.clone();
        later.push("error: the spec does not validate:".into());
        let after = super::after_the_record(&later, Some(&rec));
        assert_eq!(super::error_lines(after), later[2..].to_vec());
        // Another run's record line does not hide anything.
        let other = l(&["  record: /x/t/r0.json", "error: boom"]);
        assert_eq!(
            super::error_lines(super::after_the_record(&other, Some(&rec))).len(),
            1
        );
    }
}

#[cfg(test)]
mod row_tests {
    use super::TenantRow;
    use crate::run::pool::{Counts, KeeperView, PoolView};

    fn row(pool: Option<PoolView>) -> TenantRow {
        TenantRow {
            tenant: "t".into(),
            unit_state: "inactive (dead)".into(),
            current_run: None,
            timer_next_elapse: None,
            paused: None,
            last_result: Some("passed".into()),
            last_run: Some("r1".into()),
            pool,
        }
    }

    fn pool(active: &str, ready: usize) -> PoolView {
        let spec = crate::spec::Pool {
            size: 2,
            max_idle_s: 7200,
            warm_before_s: 600,
        };
        let counts = Counts {
            ready,
            ..Counts::default()
        };
        let keeper = KeeperView {
            unit: "cyclix-pool@t.service".into(),
            active_state: active.into(),
            state: None,
            error: String::new(),
        };
        PoolView::new(&spec, Ok(counts), keeper)
    }

    #[test]
    fn the_tenant_list_shows_a_pool_and_whether_it_refills() {
        let plain = row(None).line();
        assert!(!plain.contains("pool"), "{plain}");
        assert!(plain.ends_with("· no timer · last passed (r1)"), "{plain}");
        let kept = row(Some(pool("active", 2))).line();
        assert!(
            kept.ends_with("· last passed (r1) · pool 2/2 ready"),
            "{kept}"
        );
        let stopped = row(Some(pool("inactive", 0))).line();
        assert!(
            stopped.contains("· pool 0/2 ready, not refilling: the keeper is not running"),
            "{stopped}"
        );
    }
}
