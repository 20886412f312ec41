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
    /// The git paths the agent's container binds read-only over the shared git dir
    /// (`config`, `hooks`, `info`; B27), with their (device, inode) when planted. Replacing
    /// one on the host during the run (`git config` and `git branch -D` write a new
    /// `config` and rename it over the old) detaches that bind in the container's mount
    /// namespace (Linux ≥ 3.18 detaches mounts in other namespaces whose mountpoint is
    /// renamed over or unlinked), so the sandbox then writes the new file: the run cannot
    /// vouch for its boundary any more.
    pub git_binds: Vec<(PathBuf, Option<(u64, u64)>)>,
}

/// (device, inode) of `p`, if it exists.
fn identity(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::symlink_metadata(p)
        .ok()
        .map(|m| (m.dev(), m.ino()))
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

/// The sentinel's `argv[0]`: `cyclix-RUN-sentinel` (found by the run id if its cyclix died).
#[must_use]
pub fn sentinel_name(run_id: &str) -> String {
    format!("cyclix-{run_id}-sentinel")
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
    let git_binds = ["config", "hooks", "info"]
        .iter()
        .map(|n| {
            let p = git_dir.join(n);
            let id = identity(&p);
            (p, id)
        })
        .collect();
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
        git_binds,
    })
}

fn accessed(f: &std::fs::File) -> Result<SystemTime> {
    Ok(f.metadata()?.accessed()?)
}

/// Records the git binds' identities again (call right before the sandbox starts, after
/// cyclix's own git work such as `git worktree add`).
pub fn pin_git_binds(t: &mut Tripwires) {
    for (p, id) in &mut t.git_binds {
        *id = identity(p);
    }
}

/// What tripped, checked on the host. Empty means nothing escaped.
///
/// # Errors
/// I/O failures reading the key's metadata.
pub fn check(t: &mut Tripwires) -> Result<Vec<String>> {
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
    for (p, was) in &t.git_binds {
        let now = identity(p);
        if was.is_some() && now != *was {
            out.push(format!(
                "{} was replaced on the host during the run (a `git config` or `git branch -D` \
                 there rewrites it): the sandbox's read-only bind of it was detached, so the \
                 agent could write it; leave the repository's git settings alone while a run is on",
                p.display()
            ));
        }
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
    Ok(out)
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
        assert_eq!(check(&mut t).expect("check"), Vec::<String>::new());
        // Positive controls: each tripwire trips when touched.
        let _ = std::fs::read(&t.key).expect("read the key");
        std::fs::write(&t.outside, "x").expect("write outside");
        std::fs::write(&t.hook.0, "#!/bin/sh\n").expect("write hook");
        let _ = t.sentinel.kill();
        let _ = t.sentinel.wait();
        // The host replacing .git/config (as `git config` does: write a new file, rename it).
        std::fs::write(git.join("config.lock"), "[core]\n").expect("new config");
        std::fs::rename(git.join("config.lock"), git.join("config")).expect("rename");
        let found = check(&mut t).expect("check");
        assert_eq!(found.len(), 5, "{found:?}");
        assert!(
            found
                .iter()
                .any(|f| f.contains("config was replaced on the host")),
            "{found:?}"
        );
        assert!(found[0].contains("was read"), "{found:?}");
        remove(&mut t);
        assert!(!t.key.exists());
    }
}
