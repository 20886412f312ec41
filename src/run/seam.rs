//! What the run lifecycle needs from git, podman and the journal, as one trait: the real
//! implementation delegates to `git`, `podman` and `process`; the recording fake lets the
//! orchestrator's unit tests inject a failure into every phase.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Result, bail};

use super::record::CommitInfo;
use crate::inventory::Leftover;

/// Git, podman and journal operations of one run.
pub trait RunHost {
    /// Full sha of `rev` in `repo`.
    ///
    /// # Errors
    /// The ref does not exist, or git failed.
    fn rev_parse(&self, repo: &Path, rev: &str) -> Result<String>;
    /// Absolute path of `repo`'s git common dir.
    ///
    /// # Errors
    /// Not a git repository.
    fn common_dir(&self, repo: &Path) -> Result<PathBuf>;
    /// Adds a worktree at `path` on a new `branch` starting at `commit`.
    ///
    /// # Errors
    /// The branch exists already, or git failed.
    fn worktree_add(&self, repo: &Path, path: &Path, branch: &str, commit: &str) -> Result<()>;
    /// Removes the worktree at `path` (idempotent); the branch stays.
    ///
    /// # Errors
    /// git failed.
    fn worktree_remove(&self, repo: &Path, path: &Path) -> Result<()>;
    /// Commits on `branch` since `base`, oldest first.
    ///
    /// # Errors
    /// git failed.
    fn commits(&self, repo: &Path, base: &str, branch: &str) -> Result<Vec<CommitInfo>>;
    /// Creates the run's private repository at `path` on `branch` at `base`, holding what
    /// `base` reaches in `repo` ([`crate::git::private::create`]).
    ///
    /// # Errors
    /// The path exists, or git failed.
    fn private_repo(&self, repo: &Path, path: &Path, branch: &str, base: &str) -> Result<()>;
    /// Removes `path` (a tree the agent could write) as plain files, never running git in it
    /// ([`crate::podman::Podman::unshare_rm_tree`]); idempotent.
    ///
    /// # Errors
    /// The removal failed or ran past its deadline.
    fn remove_tree(&self, path: &Path) -> Result<()>;
    /// Runs the bundle export container for `req` (the bundle goes to `req.out`).
    ///
    /// # Errors
    /// podman failed, the deadline or the size cap passed, the container's git failed.
    fn export_bundle(&self, req: &super::import::ExportRequest) -> Result<super::import::Export>;
    /// Checks the run branch's tip out into the (new, empty) gate tree beside `req.repo`
    /// ([`crate::render::plan::gate_tree`]) with an export container; `false`: the branch is
    /// gone from the private repository.
    ///
    /// # Errors
    /// podman failed, the deadline passed, the container's git failed.
    fn export_gate_tree(&self, req: &super::import::ExportRequest) -> Result<bool>;
    /// Runs the uncommitted-diff export container for `req` (the diff goes to `req.out`,
    /// capped at [`super::import::DIFF_CAP`]); returns how many files it touches.
    ///
    /// # Errors
    /// podman failed, the deadline or the cap passed.
    fn export_diff(&self, req: &super::import::ExportRequest) -> Result<usize>;
    /// Imports the bundle `bundle` into `repo` as `dest` ([`crate::git::bundle::import`]):
    /// the tip, or why the bundle was refused.
    ///
    /// # Errors
    /// git could not run.
    fn import_bundle(
        &self,
        repo: &Path,
        bundle: &Path,
        want: &str,
        base: &str,
        dest: &str,
    ) -> Result<std::result::Result<String, String>>;
    /// A snapshot of `repo`'s refs, HEAD, config/hooks/info hashes and worktrees.
    ///
    /// # Errors
    /// git failed.
    fn repo_state(&self, repo: &Path) -> Result<super::repo_state::RepoState>;
    /// Creates a podman secret; `value` travels on stdin only.
    ///
    /// # Errors
    /// podman failed.
    fn secret_create(&self, name: &str, value: &[u8], labels: &[(String, String)]) -> Result<()>;
    /// Removes a podman secret (idempotent).
    ///
    /// # Errors
    /// podman failed.
    fn secret_remove(&self, name: &str) -> Result<()>;
    /// Removes every container, pod, network and volume labelled `io.cyclix.run=RUN`.
    ///
    /// # Errors
    /// podman failed.
    fn remove_run_objects(&self, run_id: &str) -> Result<()>;
    /// Lists what is left of the run in podman: labelled containers, pods, networks, volumes,
    /// and secrets named `cyclix-RUN-*` ([`super::host::podman_leftovers`]).
    ///
    /// # Errors
    /// podman failed.
    fn inventory(&self, run_id: &str) -> Result<Vec<Leftover>>;
    /// Subnets of all existing podman networks (`10.213.7.0/24`, ...).
    ///
    /// # Errors
    /// podman failed.
    fn used_subnets(&self) -> Result<Vec<String>>;
    /// Refuses the run when a mount source of `spec` is, contains or lies inside a protected
    /// path or a git directory, as the host sees it right now (`host::mount_scan`: the deep
    /// walk, podman's real storage). The default finds nothing: a host without the guard
    /// configured (the fakes) has no disk to look at.
    ///
    /// # Errors
    /// The refusal, printed as `spec validate` prints it (`FILE:LINE:COL: mounts[N].source`).
    fn check_mounts(&self, spec: &crate::spec::Spec) -> Result<()> {
        let _ = spec;
        Ok(())
    }
    /// Runs `cyclix probe` inside the running agent container `container` (only the probes in
    /// `only`, or all when empty) and returns its exit status and stdout (JSON lines).
    ///
    /// # Errors
    /// podman failed or the deadline passed.
    fn probe(
        &self,
        container: &str,
        only: &[&str],
        deadline: std::time::Duration,
    ) -> Result<(i32, String)>;
    /// The environment of every process in `container`, read on the host from
    /// `/proc/HPID/environ` (independent of the sandbox's cooperation).
    ///
    /// # Errors
    /// podman failed; a process that ended meanwhile is skipped.
    fn sandbox_environ(&self, container: &str) -> Result<Vec<super::boundary::ProcessEnv>>;
    /// Names of the containers on podman network `network` (field report B16).
    ///
    /// # Errors
    /// podman failed.
    fn network_members(&self, network: &str) -> Result<Vec<String>>;
    /// The messages the user journal holds for `unit` (oldest first).
    ///
    /// # Errors
    /// journalctl failed.
    fn unit_journal(&self, unit: &str) -> Result<Vec<String>>;
    /// Every ref of `repo` as `(refname, sha)` (`git for-each-ref`).
    ///
    /// # Errors
    /// git failed.
    fn refs(&self, repo: &Path) -> Result<Vec<(String, String)>>;
    /// Deletes `refname` in `repo` only if it still points at `sha`; whether it did.
    ///
    /// # Errors
    /// git failed.
    fn delete_ref_at(&self, repo: &Path, refname: &str, sha: &str) -> Result<bool>;
    /// The git operation half done in `worktree` (`"a merge (MERGE_HEAD)"`, a rebase, a
    /// cherry-pick, a revert), if any.
    ///
    /// # Errors
    /// git failed (not a worktree).
    fn in_progress(&self, worktree: &Path) -> Result<Option<String>>;
    /// What of run `run_id` is left in the host's process table and cgroup tree (field report
    /// B11): podman's helpers (conmon, pasta, rootlessport, slirp4netns) and the escape
    /// sentinel whose command line names the run (`cyclix-RUN…`), and cgroups named after the
    /// run's units under the user manager (whatever runs in them), each a
    /// [`Kind::Process`](crate::inventory::Kind::Process) `PID (COMM): CMDLINE` or a
    /// [`Kind::Cgroup`](crate::inventory::Kind::Cgroup) `PATH (N processes)`. A user's own
    /// `journalctl -u cyclix-RUN-agent` is not the run's.
    ///
    /// # Errors
    /// `/proc` or the cgroup tree cannot be read.
    fn run_processes(&self, run_id: &str) -> Result<Vec<Leftover>>;
    /// Kills run `run_id`'s escape sentinel (a `sleep` cyclix started, `argv[0]`
    /// `cyclix-RUN-sentinel`) left by a cyclix that died; never touches other processes.
    /// Returns how many it killed.
    ///
    /// # Errors
    /// `/proc` cannot be read.
    fn kill_sentinel(&self, run_id: &str) -> Result<usize>;
    /// Who holds podman's storage locks right now (`/proc/locks` matched against the lock
    /// files below the graph root; see [`super::storage_lock`]); empty when they are free.
    ///
    /// # Errors
    /// `/proc/locks` cannot be read.
    fn storage_lock_holders(&self) -> Result<Vec<super::storage_lock::Holder>>;
    /// Free space of the file system holding `path` (`statvfs`).
    ///
    /// # Errors
    /// `statvfs` failed (e.g. the path does not exist).
    fn fs_space(&self, path: &Path) -> Result<super::space::FsSpace>;
}

/// A scripted, recording [`RunHost`] for tests: every call is recorded as `op arg`; an op
/// listed in `fail` returns an error.
#[derive(Debug, Default)]
pub struct FakeRunHost {
    /// Recorded calls.
    pub calls: Mutex<Vec<String>>,
    /// Ops (e.g. `worktree_add`) that fail.
    pub fail: Vec<String>,
    /// Objects the fake podman "holds" (added by `secret_create`, removed by removals).
    pub objects: Mutex<Vec<String>>,
    /// Lines `unit_journal` returns.
    pub journal: Vec<String>,
    /// What `probe` returns: exit status and stdout. Default: one passing probe.
    pub probe_report: Option<(i32, String)>,
    /// What `probe` returns from its second call on (the leak watch); default as the first.
    pub watch_report: Option<(i32, String)>,
    /// What `sandbox_environ` returns.
    pub environ: Vec<super::boundary::ProcessEnv>,
    /// What `network_members` returns; `None`: the run's pod infra container and its proxy.
    pub members: Option<Vec<String>>,
    /// The refs the fake repository holds; `delete_ref_at` removes from it.
    pub refs: Mutex<Vec<(String, String)>>,
    /// Refs that appear after the first `refs` call (as if the agent had created them).
    pub refs_later: Vec<(String, String)>,
    /// What `in_progress` returns.
    pub in_progress: Option<String>,
    /// What `run_processes` returns.
    pub processes: Vec<String>,
    /// How many looks at podman's storage lock find it held (by pid 4711, `podman build .`)
    /// before it is free; `usize::MAX`: held for ever.
    pub lock_held_looks: usize,
    /// From this look on (0-based), the storage lock is held again (e.g. `Some(1)`: free at the
    /// run's wait, held when a failing phase explains itself).
    pub lock_held_from: Option<usize>,
    /// What `fs_space` reports as available bytes for every path; `None`: 1 GiB.
    pub fs_avail: Option<u64>,
    /// `export_bundle` reports no commits.
    pub no_commits: bool,
    /// `import_bundle` refuses the bundle with this reason.
    pub refuse_bundle: Option<String>,
}

/// A complete, passing probe report (one probe and the summary line).
pub const PASSING_REPORT: &str =
    "{\"id\":\"P1\",\"verdict\":\"PASS\"}\n{\"summary\":true,\"pass\":1,\"fail\":0}\n";

impl FakeRunHost {
    fn call(&self, op: &str, arg: &str) -> Result<()> {
        self.calls
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .push(format!("{op} {arg}"));
        if self.fail.iter().any(|f| f == op) {
            bail!("injected failure in {op}");
        }
        Ok(())
    }

    /// The recorded calls.
    #[must_use]
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl RunHost for FakeRunHost {
    fn rev_parse(&self, _repo: &Path, rev: &str) -> Result<String> {
        self.call("rev_parse", rev)?;
        Ok("0123456789abcdef0123456789abcdef01234567".into())
    }
    fn common_dir(&self, repo: &Path) -> Result<PathBuf> {
        self.call("common_dir", &repo.display().to_string())?;
        Ok(repo.join(".git"))
    }
    fn worktree_add(&self, _repo: &Path, path: &Path, branch: &str, _commit: &str) -> Result<()> {
        self.call("worktree_add", branch)?;
        std::fs::create_dir_all(path)?;
        Ok(())
    }
    fn worktree_remove(&self, _repo: &Path, path: &Path) -> Result<()> {
        self.call("worktree_remove", &path.display().to_string())?;
        if path.exists() {
            std::fs::remove_dir_all(path)?;
        }
        Ok(())
    }
    fn commits(&self, _repo: &Path, _base: &str, branch: &str) -> Result<Vec<CommitInfo>> {
        self.call("commits", branch)?;
        Ok(vec![CommitInfo {
            sha: "f".repeat(40),
            subject: "fix".into(),
        }])
    }
    fn private_repo(&self, _repo: &Path, path: &Path, branch: &str, _base: &str) -> Result<()> {
        self.call("private_repo", branch)?;
        std::fs::create_dir_all(path)?;
        Ok(())
    }
    fn remove_tree(&self, path: &Path) -> Result<()> {
        self.call("remove_tree", &path.display().to_string())?;
        if path.exists() {
            std::fs::remove_dir_all(path)?;
        }
        Ok(())
    }
    fn export_bundle(&self, req: &super::import::ExportRequest) -> Result<super::import::Export> {
        self.call("export_bundle", &req.branch)?;
        if self.no_commits {
            return Ok(super::import::Export::NoCommits);
        }
        std::fs::write(&req.out, b"bundle")?;
        Ok(super::import::Export::Bundle)
    }
    fn export_gate_tree(&self, req: &super::import::ExportRequest) -> Result<bool> {
        self.call("export_gate_tree", &req.branch)?;
        std::fs::create_dir_all(crate::layout::gate_tree(&req.repo))?;
        Ok(true)
    }
    fn export_diff(&self, req: &super::import::ExportRequest) -> Result<usize> {
        self.call("export_diff", &req.branch)?;
        std::fs::write(&req.out, b"")?;
        Ok(0)
    }
    fn import_bundle(
        &self,
        _repo: &Path,
        _bundle: &Path,
        _want: &str,
        _base: &str,
        dest: &str,
    ) -> Result<std::result::Result<String, String>> {
        self.call("import_bundle", dest)?;
        if let Some(why) = &self.refuse_bundle {
            return Ok(Err(why.clone()));
        }
        let tip = "f".repeat(40);
        if let Ok(mut r) = self.refs.lock() {
            r.push((dest.to_string(), tip.clone()));
        }
        Ok(Ok(tip))
    }
    fn repo_state(&self, _repo: &Path) -> Result<super::repo_state::RepoState> {
        self.call("repo_state", "")?;
        let first = self
            .calls()
            .iter()
            .filter(|c| c.starts_with("repo_state"))
            .count()
            <= 1;
        let mut refs = self.refs.lock().map(|r| r.clone()).unwrap_or_default();
        if !first {
            refs.extend(self.refs_later.iter().cloned());
        }
        refs.sort();
        Ok(super::repo_state::RepoState {
            refs,
            head: "ref: refs/heads/main".into(),
            ..Default::default()
        })
    }
    fn secret_create(&self, name: &str, _value: &[u8], _labels: &[(String, String)]) -> Result<()> {
        self.call("secret_create", name)?;
        if let Ok(mut o) = self.objects.lock() {
            o.push(format!("secret {name}"));
        }
        Ok(())
    }
    fn secret_remove(&self, name: &str) -> Result<()> {
        self.call("secret_remove", name)?;
        if let Ok(mut o) = self.objects.lock() {
            o.retain(|x| x != &format!("secret {name}"));
        }
        Ok(())
    }
    fn remove_run_objects(&self, run_id: &str) -> Result<()> {
        self.call("remove_run_objects", run_id)?;
        if let Ok(mut o) = self.objects.lock() {
            o.retain(|x| x.starts_with("secret "));
        }
        Ok(())
    }
    fn inventory(&self, run_id: &str) -> Result<Vec<Leftover>> {
        self.call("inventory", run_id)?;
        let objects = self.objects.lock().map(|o| o.clone()).unwrap_or_default();
        Ok(objects.into_iter().map(Leftover::finding).collect())
    }
    fn used_subnets(&self) -> Result<Vec<String>> {
        self.call("used_subnets", "")?;
        Ok(vec!["10.88.0.0/16".into()])
    }
    fn probe(
        &self,
        container: &str,
        only: &[&str],
        _deadline: std::time::Duration,
    ) -> Result<(i32, String)> {
        let first = !self.calls().iter().any(|c| c.starts_with("probe "));
        self.call("probe", &format!("{container} {}", only.join(",")))?;
        let report = if first {
            self.probe_report.clone()
        } else {
            self.watch_report
                .clone()
                .or_else(|| self.probe_report.clone())
        };
        Ok(report.unwrap_or((0, PASSING_REPORT.to_string())))
    }
    fn sandbox_environ(&self, container: &str) -> Result<Vec<super::boundary::ProcessEnv>> {
        self.call("sandbox_environ", container)?;
        Ok(self.environ.clone())
    }
    fn network_members(&self, network: &str) -> Result<Vec<String>> {
        self.call("network_members", network)?;
        Ok(self
            .members
            .clone()
            .unwrap_or_else(|| vec![format!("{network}-infra"), format!("{network}-proxy")]))
    }
    fn unit_journal(&self, unit: &str) -> Result<Vec<String>> {
        self.call("unit_journal", unit)?;
        Ok(self.journal.clone())
    }
    fn refs(&self, _repo: &Path) -> Result<Vec<(String, String)>> {
        let first = !self.calls().iter().any(|c| c.starts_with("refs "));
        self.call("refs", "")?;
        let mut r = self.refs.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        if !first {
            for x in &self.refs_later {
                if !r.contains(x) {
                    r.push(x.clone());
                }
            }
        }
        Ok(r.clone())
    }
    fn delete_ref_at(&self, _repo: &Path, refname: &str, sha: &str) -> Result<bool> {
        self.call("delete_ref_at", &format!("{refname} {sha}"))?;
        let mut r = self.refs.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        let before = r.len();
        r.retain(|(n, s)| !(n == refname && s == sha));
        Ok(r.len() != before)
    }
    fn in_progress(&self, worktree: &Path) -> Result<Option<String>> {
        self.call("in_progress", &worktree.display().to_string())?;
        Ok(self.in_progress.clone())
    }
    fn run_processes(&self, run_id: &str) -> Result<Vec<Leftover>> {
        self.call("run_processes", run_id)?;
        Ok(self
            .processes
            .iter()
            .cloned()
            .map(Leftover::finding)
            .collect())
    }
    fn kill_sentinel(&self, run_id: &str) -> Result<usize> {
        self.call("kill_sentinel", run_id)?;
        Ok(0)
    }
    fn fs_space(&self, path: &Path) -> Result<super::space::FsSpace> {
        self.call("fs_space", &path.display().to_string())?;
        Ok(super::space::FsSpace {
            avail: self.fs_avail.unwrap_or(1 << 30),
            total: 8 << 20,
            fsid: 1,
        })
    }
    fn storage_lock_holders(&self) -> Result<Vec<super::storage_lock::Holder>> {
        let looked = self
            .calls()
            .iter()
            .filter(|c| c.starts_with("storage_lock_holders"))
            .count();
        self.call("storage_lock_holders", "")?;
        Ok(
            if looked < self.lock_held_looks || self.lock_held_from.is_some_and(|n| looked >= n) {
                vec![super::storage_lock::Holder {
                    lock: "/home/t/.local/share/containers/storage/storage.lock".into(),
                    kind: "POSIX".into(),
                    mode: "WRITE".into(),
                    pid: Some(4711),
                    command: Some("podman build .".into()),
                }]
            } else {
                Vec::new()
            },
        )
    }
}
