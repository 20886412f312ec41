//! `cyclix runs [TENANT] [--json] [--last N] [--svg FILE]`: the run history from the records in
//! `$XDG_STATE_HOME/cyclix/runs/TENANT/RUN.json` (issue 18, item 5): when, result, duration,
//! branch, cause; newest first. A record that does not parse is named, never skipped silently.
//! `--svg FILE` draws the last runs as a timeline of their phases instead (issue 32, item 5:
//! [`svg`]), written whole or not at all.

mod svg;

use std::path::Path;

use anyhow::{Context as _, Result};

use super::history::{SCHEMA, history, records, text_line};
use crate::context::HostEnv;
use crate::exit::Outcome;

/// How many runs `--svg` draws without `--last`: more is a picture too tall to read.
pub const SVG_DEFAULT_LAST: usize = 20;

/// `cyclix runs`: the newest `last` runs (every run with `None`; [`SVG_DEFAULT_LAST`] for an
/// SVG), as lines, as JSON, or drawn to `svg`.
///
/// # Errors
/// A bad tenant name, `--svg` FILE's directory missing or not writable, stdout closed.
pub fn run(
    env: &HostEnv,
    tenant: Option<&str>,
    json: bool,
    svg: Option<&Path>,
    last: Option<u32>,
) -> Result<Outcome> {
    if let Some(t) = tenant {
        super::tenant::known_tenant(env, t)?;
    }
    let last = last.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    if let Some(file) = svg {
        return write_svg(env, tenant, file, last.unwrap_or(SVG_DEFAULT_LAST));
    }
    let (mut lines, bad) = history(&env.layout().records_root(), tenant);
    lines.truncate(last.unwrap_or(usize::MAX));
    for b in &bad {
        crate::stderrln!("warning: a record that does not parse: {b}");
    }
    if json {
        let doc = serde_json::json!({ "schema": SCHEMA, "runs": lines, "unreadable": bad });
        super::print_out(&format!("{}\n", serde_json::to_string_pretty(&doc)?))?;
    } else if lines.is_empty() {
        super::print_out("no runs recorded\n")?;
    } else {
        let text: String = lines.iter().map(|l| text_line(l) + "\n").collect();
        super::print_out(&text)?;
    }
    Ok(Outcome::Ok)
}

/// `--svg FILE`: the newest `last` runs drawn, FILE replaced atomically (mode 0644, as a shell
/// redirect would leave it: a picture to share). FILE's directory must exist.
fn write_svg(env: &HostEnv, tenant: Option<&str>, file: &Path, last: usize) -> Result<Outcome> {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // A person's input, found before anything is written: exit 1, naming the fix.
    if !dir.is_dir() {
        return Err(crate::exit::input(format!(
            "cannot write {}: the directory {} does not exist (create it first)",
            file.display(),
            dir.display()
        )));
    }
    let to_stdout = file.as_os_str() == "-";
    match std::fs::symlink_metadata(file) {
        _ if to_stdout => {}
        Ok(m) if m.is_dir() => {
            return Err(crate::exit::input(format!(
                "cannot write {}: it is a directory (name a file in it)",
                file.display()
            )));
        }
        // The picture replaces a file by renaming over it: a symlink, a device or a FIFO would
        // be replaced, not written to (as root, `--svg /dev/stdout` replaced the device's
        // link: attack review). `-` writes to stdout.
        Ok(m) if !m.is_file() => {
            return Err(crate::exit::input(format!(
                "cannot write {}: it is not a regular file (a symlink, a device or a FIFO would be replaced); name a new or a regular file, or `-` for stdout",
                file.display()
            )));
        }
        _ => {}
    }
    let (mut recs, bad) = records(&env.layout().records_root(), tenant);
    for b in &bad {
        crate::stderrln!("warning: a record that does not parse: {b}");
    }
    recs.truncate(last);
    let scope = tenant.unwrap_or("every tenant");
    let n = recs.len();
    let title = format!(
        "cyclix runs: {scope}, the last {n} run{}",
        if n == 1 { "" } else { "s" }
    );
    let picture = svg::svg(&recs, &title);
    let phases: usize = recs.iter().map(|r| r.phases.len()).sum();
    let said = format!(
        "wrote {}: {n} run{} of {scope}, {phases} phase{}",
        if to_stdout {
            "the picture to stdout".to_owned()
        } else {
            file.display().to_string()
        },
        if n == 1 { "" } else { "s" },
        if phases == 1 { "" } else { "s" }
    );
    if to_stdout {
        super::print_out(&picture)?;
        crate::stderrln!("{said}");
        return Ok(Outcome::Ok);
    }
    crate::atomic::write_mode(file, picture.as_bytes(), 0o644)
        .with_context(|| format!("writing the picture to {}", file.display()))?;
    super::print_out(&format!("{said}\n"))?;
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::history::line;
    use crate::run::record::RunRecord;
    use crate::run::record::RunResult;
    use crate::run::record::{CommitInfo, Phase};

    fn rec(run: &str, start: u128, result: RunResult) -> RunRecord {
        let mut r = RunRecord::new("acme", run, "container".into());
        r.result = result;
        r.phases = vec![
            Phase {
                name: "prepare".into(),
                start_ms: start,
                end_ms: start + 1000,
                outcome: "ok".into(),
            },
            Phase {
                name: "gate".into(),
                start_ms: start + 1000,
                end_ms: start + 61_500,
                outcome: "ok".into(),
            },
        ];
        r
    }

    #[test]
    fn the_history_is_newest_first_and_names_a_bad_record() {
        let d = tempfile::tempdir().expect("tmp");
        let t = d.path().join("acme");
        std::fs::create_dir_all(&t).expect("dir");
        let mut pass = rec("r-new", 1_700_000_100_000, RunResult::Passed);
        pass.commits.push(CommitInfo {
            sha: "a".repeat(40),
            subject: "fix".into(),
        });
        let mut fail = rec("r-old", 1_700_000_000_000, RunResult::GateFailed);
        fail.failed_phase = Some("gate".into());
        fail.error = Some("phase gate: exit 1".into());
        for r in [&pass, &fail] {
            crate::run::record::write_only(&t, r).expect("write");
        }
        std::fs::write(t.join("latest.json"), b"{}").expect("latest");
        std::fs::write(t.join("r-bad.json"), b"{").expect("bad");
        let (lines, bad) = history(d.path(), None);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0].run_id, "r-new");
        assert_eq!(lines[0].branch.as_deref(), Some("cyclix/acme/r-new"));
        assert_eq!(lines[0].duration_ms, Some(61_500));
        assert_eq!(lines[1].cause.as_deref(), Some("phase gate: exit 1"));
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].contains("r-bad.json"), "{bad:?}");
        assert_eq!(
            text_line(&lines[1]),
            "2023-11-14 22:13:20 UTC  acme  r-old  gate_failed  62s  phase gate: exit 1"
        );
        assert!(history(d.path(), Some("other")).0.is_empty());
    }

    #[test]
    fn a_pass_without_commits_says_so() {
        let r = rec("r-none", 1_700_000_000_000, RunResult::Passed);
        let l = line(&r);
        assert_eq!(l.branch, None);
        assert!(
            text_line(&l).ends_with("  passed  62s  no commits"),
            "{}",
            text_line(&l)
        );
        let f = rec("r-gate", 1_700_000_000_000, RunResult::GateFailed);
        assert!(!text_line(&line(&f)).contains("no commits"));
    }

    #[test]
    fn a_failed_run_with_commits_shows_its_cause_before_its_branch() {
        let mut r = rec("r-gate", 1_700_000_000_000, RunResult::GateFailed);
        r.gate_exit = Some(1);
        r.commits.push(CommitInfo {
            sha: "b".repeat(40),
            subject: "try".into(),
        });
        let l = line(&r);
        assert_eq!(
            text_line(&l),
            "2023-11-14 22:13:20 UTC  acme  r-gate  gate_failed  62s  the gate exited 1 (branch cyclix/acme/r-gate)"
        );
    }

    #[test]
    fn every_result_prints_the_name_its_record_holds() {
        for r in RunResult::ALL {
            assert_eq!(
                serde_json::to_value(r).expect("json"),
                serde_json::Value::from(r.as_str())
            );
        }
    }
}
