//! `cyclix check [--quick] [--json] [--tenant T]`: is this host able to run cyclix? Proven by
//! outcome, with a fix for every failure (issue 4).
//!
//! Sequence: load the tenants' specs (T only with `--tenant`, else every
//! `~/.config/cyclix/tenants/*.yaml`), gather the host facts once (`host::facts`, the only
//! I/O), decide every check (`host::checks`, pure), print a table (colour only when stdout is
//! a terminal) or JSON.
//!
//! Exit status (`crate::exit`): 0 no check failed (warnings and skips allowed), 1 a check
//! failed, 2 cyclix itself failed (e.g. `$HOME` unset, stdout closed).
//!
//! # JSON schema (`--json`), version `cyclix-check/1`
//!
//! One object on stdout:
//!
//! ```text
//! {
//!   "schema":     "cyclix-check/1",        // changes only when a field changes meaning
//!   "quick":      false,                   // --quick: no podman info, no outcome test
//!   "tenant":     null | "T",              // --tenant
//!   "user":       "cyx",  "uid": 1000,
//!   "elapsed_ms": 412,                     // wall time of gathering + deciding
//!   "ok":         true,                    // no check has status "fail" (exit 0)
//!   "summary":    {"pass": 18, "warn": 1, "fail": 0, "skip": 2},
//!   "checks": [                            // fixed order; ids are stable
//!     {"id": "podman", "status": "pass"|"warn"|"fail"|"skip",
//!      "found": "what was found (for skip: why)", "fix": null | "the exact fix"}
//!   ]
//! }
//! ```
//!
//! Check ids, in order: `podman`, `quadlet`, `rootless`, `runtime-dir`, `user-manager`,
//! `linger`, `subuid`, `subgid`, `newuidmap`, `newgidmap`, `cgroup-v2`, `cgroup-delegation`,
//! `oci-runtime`, `gvisor`, `network-backend`, `rootless-network`, `storage-driver`,
//! `podman-info`, `network-online`, `host-tools`, `config`, `install`, then per tenant
//! `spec:TENANT`, `images:TENANT` and (when the spec names variables) `env:TENANT` (and with a
//! pool, `pool:TENANT`), `gate:TENANT`, and last `outcome`.
//! New checks may be added; existing ids keep their meaning.

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result};
use serde::Serialize;

use crate::context::{self, HostEnv};
use crate::exit::Outcome;
use crate::host::checks::{self, Check, CheckOptions, Status};
use crate::host::facts::{self, GatherInput, TenantInput};

/// The `schema` value of `--json`.
pub const SCHEMA: &str = "cyclix-check/1";

/// The `--json` document (see the module docs).
#[derive(Debug, Clone, Serialize)]
pub struct Report<'a> {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// `--quick`.
    pub quick: bool,
    /// `--tenant`.
    pub tenant: Option<&'a str>,
    /// The user checked.
    pub user: &'a str,
    /// Its uid.
    pub uid: u32,
    /// Wall time in ms.
    pub elapsed_ms: u64,
    /// No check failed.
    pub ok: bool,
    /// Counts per status.
    pub summary: Summary,
    /// Every check.
    pub checks: &'a [Check],
}

/// Counts per status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Passed.
    pub pass: usize,
    /// Warnings.
    pub warn: usize,
    /// Failures.
    pub fail: usize,
    /// Skipped.
    pub skip: usize,
}

impl Summary {
    /// Counts `checks`.
    #[must_use]
    pub fn of(checks: &[Check]) -> Summary {
        let mut s = Summary::default();
        for c in checks {
            match c.status {
                Status::Pass => s.pass += 1,
                Status::Warn => s.warn += 1,
                Status::Fail => s.fail += 1,
                Status::Skip => s.skip += 1,
            }
        }
        s
    }
}

/// Runs `cyclix check`.
///
/// # Errors
/// Failures of cyclix itself: `$HOME` unset, the tenants directory unreadable, stdout closed.
pub fn run(env: &HostEnv, quick: bool, json: bool, tenant: Option<&str>) -> Result<Outcome> {
    let started = Instant::now();
    let tenants = load_tenants(env, tenant)?;
    let input = GatherInput {
        env,
        runtime_dir_raw: context::runtime_dir_raw(),
        search_path: context::search_path(),
        quick,
        tenants,
    };
    let host = facts::gather(&input);
    let options = CheckOptions {
        tenant: tenant.map(str::to_string),
    };
    let mut list = checks::checks(&host, &options);
    let settings = super::host_config::load(env)
        .map(|l| (l.max_runs(), l.max_runs_source(), l.config.queue_timeout_s));
    // Before the tenants' checks (the last check, the outcome test, stays last).
    let at = list
        .iter()
        .position(|c| c.id.contains(':') || c.id == "outcome")
        .unwrap_or(list.len());
    let mut config = checks::host_config(&settings);
    if let Ok(Some(path)) = super::host_config::load(env).map(|l| l.config.metrics_textfile) {
        // The metrics file (docs/metrics.md): a run never fails for it, so a WARN.
        match super::metrics::target_problem(std::path::Path::new(&path)) {
            None => config.found = format!("{}; metrics written to {path}", config.found),
            Some(why) => {
                config.found = format!("{}; metrics_textfile {path}: {why}", config.found);
                if config.status == checks::Status::Pass {
                    config.status = checks::Status::Warn;
                    config.fix = Some(format!(
                        "make the directory, writable by this user (`sudo install -d -o $USER -m \
                         755 {}`), or change metrics_textfile (docs/metrics.md); until then \
                         each run says the metrics were not written",
                        std::path::Path::new(&path)
                            .parent()
                            .map_or_else(String::new, |d| d.display().to_string())
                    ));
                }
            }
        }
    }
    if config.status == checks::Status::Pass
        && env.config_file.is_some()
        && host
            .manager_env
            .as_ref()
            .is_ok_and(|names| !names.iter().any(|n| n == "CYCLIX_CONFIG"))
    {
        // As `env:T` for a variable only the shell has: the runs would not see it.
        config.status = checks::Status::Warn;
        config.fix = Some(format!(
            "CYCLIX_CONFIG is set in this shell only; runs started by the user manager read {}. \
             Put the settings there, or `systemctl --user set-environment CYCLIX_CONFIG=...`",
            env.layout().config_file().display()
        ));
    }
    list.insert(at, config);
    // What `cyclix install` would change: the templates and, with --tenant, that tenant's.
    let drift = super::installer::drift::lines(env, tenant).map_err(|e| format!("{e:#}"));
    list.insert(at + 1, checks::install_drift(&drift));
    let summary = Summary::of(&list);
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let text = if json {
        let report = Report {
            schema: SCHEMA,
            quick,
            tenant,
            user: &host.user,
            uid: host.uid,
            elapsed_ms,
            ok: summary.fail == 0,
            summary,
            checks: &list,
        };
        format!("{}\n", serde_json::to_string_pretty(&report)?)
    } else {
        table(&list, summary, elapsed_ms, std::io::stdout().is_terminal())
    };
    super::print_out(&text)?;
    Ok(Outcome::from_passed(summary.fail == 0))
}

/// The tenants to check: T with `--tenant` (none if its spec does not exist: the checks report
/// that), else every `*.yaml` in `~/.config/cyclix/tenants/`, sorted by name.
fn load_tenants(env: &HostEnv, only: Option<&str>) -> Result<Vec<TenantInput>> {
    let dir = env.layout().tenants_dir();
    let files: Vec<(String, PathBuf)> = if let Some(t) = only {
        if let Err(e) = crate::spec::validate::tenant_name(t) {
            anyhow::bail!("--tenant `{t}`: {e}");
        }
        let p = super::tenant::tenant_spec_path(env, t);
        if p.exists() {
            vec![(t.to_string(), p)]
        } else {
            Vec::new()
        }
    } else {
        match std::fs::read_dir(&dir) {
            Ok(rd) => {
                let mut v: Vec<(String, PathBuf)> = rd
                    .filter_map(std::result::Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                    .filter_map(|p| {
                        let name = p.file_stem()?.to_string_lossy().into_owned();
                        Some((name, p))
                    })
                    .collect();
                v.sort();
                v
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                return Err(e).with_context(|| format!("listing tenants in {}", dir.display()));
            }
        }
    };
    // The user manager, asked only when some tenant has a pool (its keeper's state).
    let units = std::cell::OnceCell::new();
    Ok(files
        .into_iter()
        .map(|(name, path)| {
            let spec = load_one(env, &name, &path);
            TenantInput {
                keeper: spec
                    .as_ref()
                    .ok()
                    .and_then(|s| s.pool.as_ref())
                    .filter(|p| p.size > 0)
                    .map(|_| {
                        keeper_fact(
                            env,
                            units.get_or_init(|| {
                                super::tenant::unit_manager(env).map_err(|e| format!("{e:#}"))
                            }),
                            &name,
                        )
                    }),
                env: spec
                    .as_ref()
                    .map(|s| super::tenant::env_needs(env, s))
                    .unwrap_or_default(),
                task: spec.as_ref().ok().and_then(|s| match &s.task {
                    crate::spec::Task::File(f) => {
                        Some(super::tenant::read_task_file(f).map(|_| ()))
                    }
                    crate::spec::Task::Text(_) => None,
                }),
                base: spec.as_ref().ok().map(|s| {
                    crate::git::Git::new(&s.repo.path)
                        .rev_parse_commit(&s.repo.base)
                        .map_err(|e| format!("{e:#}"))
                }),
                spec,
                file: path.display().to_string(),
                name,
            }
        })
        .collect())
}

/// The keeper of `tenant`'s pool: its unit's state (from `units`, or why the user manager
/// cannot be reached) and what it wrote down last.
fn keeper_fact(
    env: &HostEnv,
    units: &std::result::Result<crate::systemd::ZbusUnitManager, String>,
    tenant: &str,
) -> facts::KeeperFact {
    let active = units.as_ref().map_err(Clone::clone).and_then(|u| {
        crate::systemd::UnitManager::unit_status(u, &crate::naming::pool_service(tenant))
            .map(|s| s.active_state.as_str().to_string())
            .map_err(|e| e.to_string())
    });
    let note = env
        .runtime()
        .map_err(|e| format!("{e:#}"))
        .and_then(|rt| {
            crate::run::pool::keeper::KeeperState::read(&rt.pool_dir(tenant))
                .map_err(|e| format!("{e:#}"))
        })
        .map(|st| {
            st.map(|st| facts::KeeperNote {
                line: st.line(super::clock::now_ms(), &super::clock::utc_timestamp),
                state: st.state,
                failures: st.failures,
                last_error: st.last_error,
            })
        });
    facts::KeeperFact { active, note }
}

/// The tenant's spec as `check` judges it: loaded, its name matching the file, and its mount
/// sources walked deeply for git directories (`host::mount_scan::DEEP`); podman's real
/// storage paths are compared in `checks` once `podman info` is in the facts.
fn load_one(env: &HostEnv, name: &str, path: &Path) -> facts::Fact<crate::spec::Spec> {
    use crate::host::mount_scan;
    match super::spec_file::load_spec(path, env) {
        Ok(Ok(spec)) if spec.tenant == name => {
            let found = mount_scan::scan(&spec, env, &[], mount_scan::DEEP);
            if found.diagnostics.is_empty() {
                Ok(spec)
            } else {
                Err(crate::spec::SpecError {
                    file: path.display().to_string(),
                    diagnostics: found.diagnostics,
                }
                .to_string())
            }
        }
        Ok(Ok(spec)) => Err(format!(
            "the spec names tenant `{}`, but its file is {name}.yaml; rename one of them",
            spec.tenant
        )),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(format!("{e:#}")),
    }
}

fn paint(s: &str, status: Status, colour: bool) -> String {
    if !colour {
        return s.to_string();
    }
    let code = match status {
        Status::Pass => "32",
        Status::Warn => "33",
        Status::Fail => "31",
        Status::Skip => "2",
    };
    format!("\x1b[{code}m{s}\x1b[0m")
}

/// The human form: one line per check (`STATUS  ID  FOUND`), then `fix:` under each warning or
/// failure, then a summary line. ANSI colour only when `colour`.
#[must_use]
pub fn table(list: &[Check], summary: Summary, elapsed_ms: u64, colour: bool) -> String {
    let width = list.iter().map(|c| c.id.len()).max().unwrap_or(0);
    let mut s = String::new();
    for c in list {
        let status = format!("{:<4}", c.status.as_str().to_uppercase());
        let mut lines = c.found.lines();
        let _ = writeln!(
            s,
            "{}  {:<width$}  {}",
            paint(&status, c.status, colour),
            c.id,
            lines.next().unwrap_or_default()
        );
        for l in lines {
            let _ = writeln!(s, "      {:<width$}  {l}", "");
        }
        if let Some(fix) = &c.fix {
            let _ = writeln!(s, "      {:<width$}  fix: {fix}", "");
        }
    }
    // A failed tenant check (`spec:T`, `images:T`, `env:T`) is the tenant's, not the host's.
    let failed: Vec<&Check> = list.iter().filter(|c| c.status == Status::Fail).collect();
    let mut tenants: Vec<&str> = failed
        .iter()
        .filter_map(|c| c.id.split_once(':').map(|(_, t)| t))
        .collect();
    tenants.dedup();
    let verdict = if summary.fail == 0 {
        paint("this host can run cyclix", Status::Pass, colour)
    } else if failed.iter().all(|c| c.id.contains(':')) {
        paint(
            &format!(
                "this host can run cyclix; tenant {} cannot run yet",
                tenants.join(", ")
            ),
            Status::Fail,
            colour,
        )
    } else {
        paint("this host cannot run cyclix yet", Status::Fail, colour)
    };
    let _ = writeln!(
        s,
        "{verdict}: {} pass, {} warn, {} fail, {} skip ({elapsed_ms} ms)",
        summary.pass, summary.warn, summary.fail, summary.skip
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Check> {
        vec![
            Check {
                id: "podman".into(),
                status: Status::Pass,
                found: "/usr/bin/podman: podman 5.4.2".into(),
                fix: None,
            },
            Check {
                id: "subuid".into(),
                status: Status::Fail,
                found: "no line".into(),
                fix: Some("sudo usermod --add-subuids 100000-165535 cyx".into()),
            },
        ]
    }

    #[test]
    fn a_failure_of_tenant_checks_only_is_the_tenants_not_the_hosts() {
        let mut list = sample();
        list[1].id = "env:shop".into();
        list.push(Check {
            id: "images:shop".into(),
            status: Status::Fail,
            found: "missing".into(),
            fix: None,
        });
        let text = table(&list, Summary::of(&list), 1, false);
        assert!(
            text.contains(
                "this host can run cyclix; tenant shop cannot run yet: 1 pass, 0 warn, 2 fail"
            ),
            "{text}"
        );
        list[0].status = Status::Fail;
        let text = table(&list, Summary::of(&list), 1, false);
        assert!(text.contains("this host cannot run cyclix yet"), "{text}");
    }

    #[test]
    fn table_has_fixes_and_colour_only_on_request() {
        let list = sample();
        let plain = table(&list, Summary::of(&list), 12, false);
        assert!(!plain.contains('\x1b'), "{plain}");
        assert!(
            plain.contains("PASS  podman  /usr/bin/podman: podman 5.4.2"),
            "{plain}"
        );
        assert!(plain.contains("FAIL  subuid  no line"), "{plain}");
        assert!(
            plain.contains("fix: sudo usermod --add-subuids 100000-165535 cyx"),
            "{plain}"
        );
        assert!(
            plain.contains(
                "this host cannot run cyclix yet: 1 pass, 0 warn, 1 fail, 0 skip (12 ms)"
            ),
            "{plain}"
        );
        let coloured = table(&list, Summary::of(&list), 12, true);
        assert!(coloured.contains("\x1b[31mFAIL\x1b[0m"), "{coloured}");
    }

    #[test]
    fn json_report_shape() {
        let list = sample();
        let r = Report {
            schema: SCHEMA,
            quick: true,
            tenant: None,
            user: "cyx",
            uid: 1000,
            elapsed_ms: 5,
            ok: false,
            summary: Summary::of(&list),
            checks: &list,
        };
        let v = serde_json::to_value(&r).expect("json");
        assert_eq!(v["schema"], "cyclix-check/1");
        assert_eq!(v["summary"]["fail"], 1);
        assert_eq!(v["checks"][1]["status"], "fail");
        assert_eq!(v["checks"][0]["fix"], serde_json::Value::Null);
    }
}
