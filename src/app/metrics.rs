//! Writing cyclix's metrics file (`metrics_textfile` in cyclix's config; docs/metrics.md):
//! after every run (`launch`, `kube_run`) and after each pass of a pool keeper. It reads the
//! run records, what `cyclix prune` removed ([`tally_path`]) and the pools' state, renders
//! them ([`crate::metrics`]) and writes the text atomically, mode 0644 (`node_exporter` runs as
//! another user). A failure to write is said on stderr (the run's journal) and changes
//! nothing else: the run's result stands.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use super::clock::now_ms;
use crate::context::HostEnv;
use crate::metrics::{KeeperFacts, Metrics, PoolFacts, Tally};

/// Writes the metrics file when the config names one; says why on stderr when it cannot
/// (`after`: what was just done, for that line: `run R of T`, `pool keeper of T`). Never
/// fails and never panics past here: the caller's result stands.
pub fn write_after(env: &HostEnv, after: &str) {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| write(env)));
    match outcome {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => crate::stderrln!(
            "cyclix: metrics not written after {after}: {e:#} (the result above stands; fix \
             metrics_textfile in cyclix's config, docs/metrics.md)"
        ),
        Err(_) => crate::stderrln!(
            "cyclix: metrics not written after {after}: the writer panicked (the result above \
             stands)"
        ),
    }
}

/// Writes the metrics file named by the config; `Ok(None)` when it names none.
///
/// # Errors
/// The config does not load, or the file cannot be written (its directory missing, not
/// writable).
pub fn write(env: &HostEnv) -> Result<Option<PathBuf>> {
    let loaded = super::host_config::load(env).map_err(anyhow::Error::msg)?;
    let Some(path) = loaded.config.metrics_textfile.map(PathBuf::from) else {
        return Ok(None);
    };
    let text = gather(env).render(now_ms());
    crate::atomic::write_exact_mode(&path, text.as_bytes(), 0o644)
        .with_context(|| format!("metrics_textfile {}", path.display()))?;
    Ok(Some(path))
}

/// Why `path` cannot be written as the metrics file now (`cyclix check`), `None` when it can:
/// its directory missing or not writable by this user, or the path taken by something other
/// than a file.
#[must_use]
pub fn target_problem(path: &Path) -> Option<String> {
    use nix::unistd::{AccessFlags, access};
    let dir = path.parent()?;
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Some(format!("its directory {} does not exist", dir.display()));
        }
        Err(e) => return Some(format!("its directory {}: {e}", dir.display())),
        Ok(m) if !m.is_dir() => {
            return Some(format!("{} is not a directory", dir.display()));
        }
        Ok(_) => {}
    }
    if access(dir, AccessFlags::W_OK | AccessFlags::X_OK).is_err() {
        return Some(format!(
            "its directory {} is not writable by this user",
            dir.display()
        ));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Some(format!("{} is a directory", path.display())),
        _ => None,
    }
}

/// Every record kept, every tenant's prune tally and every pool's state, counted.
#[must_use]
pub fn gather(env: &HostEnv) -> Metrics {
    let mut m = Metrics::default();
    // The tallies first: a record whose run a tally counts already is not counted again.
    let mut tallied = std::collections::BTreeSet::new();
    for (tenant, path) in entries(&tally_dir(&env.state_home)) {
        let Some(tenant) = tenant.strip_suffix(".json") else {
            continue;
        };
        if let Ok(t) = read_tally(&path) {
            m.add_tally(tenant, &t);
            tallied.extend(t.runs.iter().map(|r| (tenant.to_owned(), r.clone())));
        }
    }
    let root = crate::layout::records_root(&env.state_home);
    super::history::visit(&root, None, &mut |r| match r {
        Ok(r) if tallied.contains(&(r.tenant.clone(), r.run_id.clone())) => {}
        Ok(r) => m.add_record(&r),
        Err(_) => m.add_unreadable(),
    });
    if let Ok(rt) = env.runtime() {
        for (tenant, dir) in entries(&rt.cyclix_dir().join("pool")) {
            if dir.is_dir() {
                m.add_pool(&tenant, pool_facts(&dir));
            }
        }
    }
    m
}

/// A pool's facts from its state directory and its keeper's file (what cannot be read counts
/// as nothing there).
fn pool_facts(dir: &Path) -> PoolFacts {
    let counts = crate::run::pool::PoolState::new(dir.to_path_buf())
        .counts()
        .unwrap_or_default();
    let keeper = crate::run::pool::keeper::KeeperState::read(dir)
        .ok()
        .flatten()
        .map(|k| KeeperFacts {
            want: k.want,
            failures: k.failures,
            filled: k.filled,
            expired: k.expired,
            updated_ms: k.updated_ms,
        });
    PoolFacts {
        filling: counts.filling,
        ready: counts.ready,
        claimed: counts.claimed,
        expiring: counts.expiring,
        keeper,
    }
}

/// `(file name, path)` of each entry of `dir` (none when it cannot be read), by name.
fn entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    v.sort();
    v
}

/// `$XDG_STATE_HOME/cyclix/pruned/`: one tally per tenant of what `cyclix prune` removed.
#[must_use]
pub fn tally_dir(state_home: &Path) -> PathBuf {
    state_home.join("cyclix/pruned")
}

/// `$XDG_STATE_HOME/cyclix/pruned/TENANT.json`.
#[must_use]
pub fn tally_path(state_home: &Path, tenant: &str) -> PathBuf {
    tally_dir(state_home).join(format!("{tenant}.json"))
}

fn read_tally(path: &Path) -> Result<Tally> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b).with_context(|| format!("parsing {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Tally::default()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Adds `removed` (records `cyclix prune` is about to remove) to `tenant`'s tally, so the
/// metrics' counters keep them.
///
/// # Errors
/// The tally cannot be read or written.
pub fn tally_pruned(
    state_home: &Path,
    tenant: &str,
    removed: &[crate::run::record::RunRecord],
) -> Result<()> {
    if removed.is_empty() {
        return Ok(());
    }
    let path = tally_path(state_home, tenant);
    let mut t = read_tally(&path)?;
    for r in removed {
        t.add(r);
    }
    crate::atomic::write_creating(
        &path,
        &serde_json::to_vec_pretty(&t).context("serialising the prune tally")?,
        0o600,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_in(d: &Path) -> HostEnv {
        HostEnv {
            home: d.to_path_buf(),
            runtime_dir: Some(d.join("run")),
            config_home: d.join("config"),
            data_home: d.join("data"),
            state_home: d.join("state"),
            config_file: Some(d.join("config.yaml")),
        }
    }

    #[test]
    fn no_key_writes_nothing_and_a_missing_directory_is_an_error_naming_the_file() {
        let d = tempfile::tempdir().expect("tmp");
        let env = env_in(d.path());
        std::fs::write(d.path().join("config.yaml"), "max_runs: 2\n").expect("config");
        assert_eq!(write(&env).expect("no key"), None);
        let target = d.path().join("missing/cyclix.prom");
        std::fs::write(
            d.path().join("config.yaml"),
            format!("metrics_textfile: {}\n", target.display()),
        )
        .expect("config");
        assert!(
            target_problem(&target).is_some_and(|p| p.contains("does not exist")),
            "{:?}",
            target_problem(&target)
        );
        let e = format!("{:#}", write(&env).expect_err("no such directory"));
        assert!(
            e.contains("metrics_textfile") && e.contains("missing"),
            "{e}"
        );
        // What the run calls: said, never a failure of its own.
        write_after(&env, "run r of t");
    }

    #[test]
    fn writes_the_records_the_tally_and_the_pools_world_readable() {
        use std::os::unix::fs::PermissionsExt as _;
        let d = tempfile::tempdir().expect("tmp");
        let env = env_in(d.path());
        let target = d.path().join("cyclix.prom");
        std::fs::write(
            d.path().join("config.yaml"),
            format!("metrics_textfile: {}\n", target.display()),
        )
        .expect("config");
        let mut r = crate::run::record::RunRecord::new("acme", "r1", "container".into());
        r.result = crate::run::record::RunResult::Passed;
        let dir = crate::run::record::tenant_dir(&env.state_home, "acme");
        crate::run::record::write(&dir, &r).expect("record");
        std::fs::write(dir.join("r9.json"), "{not json").expect("bad record");
        let mut pruned = r.clone();
        pruned.run_id = "r0".into();
        pruned.result = crate::run::record::RunResult::GateFailed;
        tally_pruned(&env.state_home, "acme", &[pruned]).expect("tally");
        let pool = env.runtime().expect("rt").pool_dir("acme");
        std::fs::create_dir_all(pool.join("ready/e1")).expect("pool");
        assert_eq!(write(&env).expect("written"), Some(target.clone()));
        assert_eq!(target_problem(&target), None);
        let text = std::fs::read_to_string(&target).expect("read");
        assert!(
            text.contains("cyclix_runs_total{tenant=\"acme\",result=\"passed\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("cyclix_runs_total{tenant=\"acme\",result=\"gate_failed\"} 1\n"),
            "the pruned run stays counted: {text}"
        );
        assert!(text.contains("cyclix_records_unreadable 1\n"), "{text}");
        assert!(
            text.contains("cyclix_pool_environments{tenant=\"acme\",state=\"ready\"} 1\n"),
            "{text}"
        );
        let mode = std::fs::metadata(&target)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
        // Only the file: no temporary left beside it.
        let names: Vec<String> = entries(d.path()).into_iter().map(|e| e.0).collect();
        assert!(
            !names.iter().any(|n| n.starts_with(".cyclix-")),
            "{names:?}"
        );
    }
}
