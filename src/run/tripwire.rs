//! Escape tripwires checked on the HOST (issue 5, item 5): a planted fake SSH key outside the
//! project (its access time tells whether anything read it), a sentinel host process (it must
//! still live), a file outside the workdir and a `.git/hooks/pre-commit` that must not appear.
//! The probes inside the sandbox try to reach each of them; whatever the probes report, the
//! verdict comes from the host.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, Result};

/// What was planted for one run.
#[derive(Debug)]
pub struct Tripwires {
    /// The fake private key (outside the project).
    pub key: PathBuf,
    /// Its access time as planted (set one hour before its modification time, so that any
    /// read updates it even under `relatime`).
    pub key_atime: SystemTime,
    /// A path outside the workdir the sandbox tries to create.
    pub outside: PathBuf,
    /// The repository's `.git/hooks/pre-commit`, and whether it existed before the run.
    pub hook: (PathBuf, bool),
    /// The sentinel process.
    pub sentinel: std::process::Child,
}

impl Tripwires {
    /// The sentinel's host pid.
    #[must_use]
    pub fn sentinel_pid(&self) -> u32 {
        self.sentinel.id()
    }
}

/// The files [`plant`] creates for run `run_id` in `dir` (for a successor's cleanup).
#[must_use]
pub fn paths(dir: &Path, run_id: &str) -> Vec<PathBuf> {
    vec![
        dir.join(format!(".cyclix-canary-key-{run_id}")),
        dir.join(format!(".cyclix-escape-{run_id}")),
    ]
}

/// The run id in the name of a file [`plant`] creates (`.cyclix-canary-key-RUN`,
/// `.cyclix-escape-RUN`); `None` for any other name.
#[must_use]
pub fn run_of_file(file_name: &str) -> Option<&str> {
    file_name
        .strip_prefix(".cyclix-canary-key-")
        .or_else(|| file_name.strip_prefix(".cyclix-escape-"))
}

/// The sentinel's `argv[0]`: `cyclix-RUN-sentinel` (found by the run id if its cyclix died).
#[must_use]
pub fn sentinel_name(run_id: &str) -> String {
    crate::naming::RunNames::new(run_id).role("sentinel")
}

/// Plants the tripwires of run `run_id`: the key and the outside path in `dir` (the user's
/// home, never mounted into the sandbox), the hook path of `git_dir`.
///
/// # Errors
/// I/O failures, naming the path.
pub fn plant(dir: &Path, git_dir: &Path, run_id: &str) -> Result<Tripwires> {
    let [key, outside] = <[PathBuf; 2]>::try_from(paths(dir, run_id))
        .map_err(|_| anyhow::anyhow!("invariant: two tripwire paths"))?;
    std::fs::write(
        &key,
        format!("-----BEGIN OPENSSH PRIVATE KEY-----\ncyclix canary for run {run_id}: not a key\n-----END OPENSSH PRIVATE KEY-----\n"),
    )
    .with_context(|| format!("planting {}", key.display()))?;
    let mtime = std::fs::metadata(&key)?.modified()?;
    let key_atime = mtime
        .checked_sub(Duration::from_secs(3600))
        .unwrap_or(mtime);
    let f = std::fs::File::options().write(true).open(&key)?;
    f.set_times(
        std::fs::FileTimes::new()
            .set_accessed(key_atime)
            .set_modified(mtime),
    )
    .with_context(|| format!("setting the times of {}", key.display()))?;
    let hook = git_dir.join("hooks/pre-commit");
    let existed = hook.exists();
    let sentinel = crate::process::spawn_sentinel(24 * 3600, &sentinel_name(run_id))
        .context("starting the sentinel process")?;
    Ok(Tripwires {
        key,
        key_atime: accessed(&f)?,
        outside,
        hook: (hook, existed),
        sentinel,
    })
}

fn accessed(f: &std::fs::File) -> Result<SystemTime> {
    Ok(f.metadata()?.accessed()?)
}

/// What tripped, checked on the host. Empty means nothing escaped; a key that cannot be read
/// is a finding of its own.
pub fn check(t: &mut Tripwires) -> Vec<String> {
    let mut out = Vec::new();
    let now = std::fs::metadata(&t.key).and_then(|m| m.accessed());
    match now {
        Ok(a) if a != t.key_atime => out.push(format!(
            "the planted key {} was read (atime changed)",
            t.key.display()
        )),
        Ok(_) => {}
        Err(e) => out.push(format!(
            "the planted key {} is gone or unreadable: {e}",
            t.key.display()
        )),
    }
    if t.outside.exists() {
        out.push(format!(
            "{} was written from the sandbox",
            t.outside.display()
        ));
    }
    if !t.hook.1 && t.hook.0.exists() {
        out.push(format!(
            "{} was written from the sandbox",
            t.hook.0.display()
        ));
    }
    match t.sentinel.try_wait() {
        Ok(None) => {}
        Ok(Some(st)) => out.push(format!(
            "the sentinel host process {} was killed ({st})",
            t.sentinel.id()
        )),
        Err(e) => out.push(format!(
            "the sentinel host process could not be checked: {e}"
        )),
    }
    out
}

/// Removes the key and stops the sentinel (idempotent).
pub fn remove(t: &mut Tripwires) {
    let _ = std::fs::remove_file(&t.key);
    let _ = t.sentinel.kill();
    let _ = t.sentinel.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untouched_tripwires_are_quiet_and_each_one_trips() {
        let dir = tempfile::tempdir().expect("tmp");
        let git = dir.path().join("repo/.git");
        std::fs::create_dir_all(git.join("hooks")).expect("git");
        std::fs::write(git.join("config"), "[core]\n").expect("config");
        let mut t = plant(dir.path(), &git, "r1").expect("plant");
        assert_eq!(check(&mut t), Vec::<String>::new());
        // Positive controls: each tripwire trips when touched.
        let _ = std::fs::read(&t.key).expect("read the key");
        std::fs::write(&t.outside, "x").expect("write outside");
        std::fs::write(&t.hook.0, "#!/bin/sh\n").expect("write hook");
        let _ = t.sentinel.kill();
        let _ = t.sentinel.wait();
        // The host replacing .git/config (as `git config` does) is no tripwire any more: no
        // container mounts anything of the user's repository (issue 11).
        std::fs::write(git.join("config.lock"), "[core]\n").expect("new config");
        std::fs::rename(git.join("config.lock"), git.join("config")).expect("rename");
        let found = check(&mut t);
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(found[0].contains("was read"), "{found:?}");
        remove(&mut t);
        assert!(!t.key.exists());
    }
}
