//! The recording [`RunHost`](super::RunHost) of the unit tests: every call is recorded as `op
//! arg`; an op listed in `fail` returns an error.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context as _, Result, bail};

use super::super::record::CommitInfo;
use super::{RunGit, RunJournal, RunPodman, RunProcs};
use crate::inventory::Leftover;

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
    /// Lines `unit_journal` returns, and the plain output `output` reads for every unit.
    pub journal: Vec<String>,
    /// The follows started (`follow_output`), by unit.
    pub follows: Mutex<Vec<super::super::output::OutputFollow>>,
    /// What `probe` returns: exit status and stdout. Default: one passing probe.
    pub probe_report: Option<(i32, String)>,
    /// What `probe` returns from its second call on (the leak watch); default as the first.
    pub watch_report: Option<(i32, String)>,
    /// What `sandbox_environ` returns.
    pub environ: Vec<super::super::boundary::ProcessEnv>,
    /// What `container_members` returns; `None`: the held agent container's init and
    /// agent-wait.
    pub held: Option<Vec<super::Member>>,
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
    /// What `fs_space` of the run dir (the runtime dir's tmpfs) says is available.
    pub runtime_avail: Option<u64>,
    /// `export_bundle` reports no commits.
    pub no_commits: bool,
    /// `import_bundle` refuses the bundle with this reason.
    pub refuse_bundle: Option<String>,
    /// What `baseline` returns; `None`: exit 0, `ok`.
    pub baseline: Option<(i32, String)>,
    /// What `tree_entries` returns (mode, path) for every query.
    pub tree: Vec<(u32, String)>,
    /// What `touched_among` returns for every query.
    pub setup_touched: Vec<String>,
    /// The protected changes `gate_tree` reports (path, change).
    pub protected: Vec<(String, crate::git::gate_tree::Change)>,
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
        if self
            .fail
            .iter()
            .any(|f| f.strip_prefix("deadline:") == Some(op))
        {
            // A command past its deadline, as podman behind a held storage lock ends.
            return Err(crate::process::ProcessError::Deadline {
                argv: format!("podman {op}"),
                after_ms: 1,
                tail: Vec::new(),
            })
            .map_err(|e| anyhow::Error::new(e).context(format!("injected deadline in {op}")));
        }
        Ok(())
    }

    /// The recorded calls.
    #[must_use]
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl RunGit for FakeRunHost {
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
    fn repo_state(&self, _repo: &Path) -> Result<super::super::repo_state::RepoState> {
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
        Ok(super::super::repo_state::RepoState {
            refs,
            head: "ref: refs/heads/main".into(),
            ..Default::default()
        })
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
    fn tree_entries(
        &self,
        _repo: &Path,
        commit: &str,
        pathspecs: &[String],
    ) -> Result<Vec<(u32, String)>> {
        self.call("tree_entries", &format!("{commit} {}", pathspecs.join(" ")))?;
        Ok(self.tree.clone())
    }
    fn touched_among(
        &self,
        _repo: &Path,
        base: &str,
        tip: &str,
        pathspecs: &[String],
    ) -> Result<Vec<String>> {
        self.call(
            "touched_among",
            &format!("{base}..{tip} {}", pathspecs.join(" ")),
        )?;
        Ok(self.setup_touched.clone())
    }
    fn gate_tree(
        &self,
        _repo: &Path,
        base: &str,
        tip: &str,
        pathspecs: &[String],
        _scratch: &Path,
    ) -> Result<crate::git::gate_tree::Composed> {
        self.call(
            "gate_tree",
            &format!("{base}..{tip} {}", pathspecs.join(" ")),
        )?;
        Ok(crate::git::gate_tree::Composed {
            tree: if self.protected.is_empty() {
                "e".repeat(40)
            } else {
                "c".repeat(40)
            },
            base_tree: "b".repeat(40),
            changes: self
                .protected
                .iter()
                .map(|(p, c)| crate::git::gate_tree::PathChange {
                    path: p.as_bytes().to_vec(),
                    change: *c,
                })
                .collect(),
        })
    }
    fn pack_trees(&self, _repo: &Path, trees: &[&str], dir: &Path) -> Result<PathBuf> {
        self.call("pack_trees", &trees.join(" "))?;
        let objects = dir.join("objects");
        std::fs::create_dir_all(&objects)?;
        Ok(objects)
    }
}

impl RunPodman for FakeRunHost {
    fn remove_tree(&self, path: &Path) -> Result<()> {
        self.call("remove_tree", &path.display().to_string())?;
        if path.exists() {
            std::fs::remove_dir_all(path)?;
        }
        Ok(())
    }
    fn export_bundle(
        &self,
        req: &super::super::import::ExportRequest,
    ) -> Result<super::super::import::Export> {
        self.call("export_bundle", &req.branch)?;
        if self.no_commits {
            return Ok(super::super::import::Export::NoCommits);
        }
        std::fs::write(&req.out, b"bundle")?;
        Ok(super::super::import::Export::Bundle)
    }
    fn fill_tree(&self, req: &super::super::import::FillRequest) -> Result<()> {
        self.call("fill_tree", &format!("{} {}", req.role, req.tree))?;
        std::fs::create_dir_all(&req.out)?;
        Ok(())
    }
    fn image_id(&self, reference: &str) -> Result<String> {
        self.call("image_id", reference)?;
        Ok("a".repeat(64))
    }
    fn export_diff(&self, req: &super::super::import::ExportRequest) -> Result<usize> {
        self.call("export_diff", &req.branch)?;
        std::fs::write(&req.out, b"")?;
        Ok(0)
    }
    fn build_image(
        &self,
        req: &crate::images::build::Request<'_>,
    ) -> Result<crate::images::build::Built> {
        self.call("build_image", &req.build.role)?;
        Ok(crate::images::build::Built {
            reference: format!("{}:fake", req.repository),
            built: true,
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
    /// Every Quadlet file of the first source directory becomes its unit (Quadlet's naming),
    /// holding `generated from NAME` and the file's text; the call names every directory.
    fn generate_units(&self, sources: &[&Path], out: &Path) -> Result<String> {
        let first = sources.first().context("no source directory")?;
        let all: Vec<String> = sources.iter().map(|s| s.display().to_string()).collect();
        self.call("generate_units", &all.join(":"))?;
        for entry in std::fs::read_dir(first)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(unit) = crate::naming::unit_of_file(&name).filter(|u| *u != name) {
                let text = std::fs::read_to_string(entry.path())?;
                std::fs::write(out.join(unit), format!("generated from {name}\n{text}"))?;
            }
        }
        Ok(String::new())
    }
    fn baseline(
        &self,
        container: &str,
        argv: &[String],
        env: &[(String, Vec<u8>)],
        _deadline: std::time::Duration,
    ) -> Result<(i32, String)> {
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        self.call(
            "baseline",
            &format!("{container} {} env:{}", argv.join(" "), names.join(",")),
        )?;
        Ok(self.baseline.clone().unwrap_or((0, "ok\n".into())))
    }
    fn held_probe(
        &self,
        container: &str,
        _report: &std::path::Path,
        deadline: std::time::Duration,
    ) -> Result<(i32, String)> {
        // The same scripted first report as a `probe` call (the calls name it `probe`).
        self.probe(container, &[], false, deadline)
    }
    fn hand_over(
        &self,
        _fifo: &std::path::Path,
        vars: &[(String, Vec<u8>)],
        _deadline: std::time::Duration,
    ) -> Result<()> {
        // Names only: the calls are compared in tests, values never recorded.
        let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        self.call("hand_over", &names.join(","))
    }
    fn probe(
        &self,
        container: &str,
        only: &[&str],
        watch: bool,
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
        let (code, out) = report.unwrap_or((0, PASSING_REPORT.to_string()));
        // A real watch round starts with the W0 guard line (`cyclix probe --watch`), which its
        // summary counts.
        Ok(if watch && !out.is_empty() {
            let counted: String = out
                .lines()
                .map(|l| match serde_json::from_str::<serde_json::Value>(l) {
                    Ok(mut v) if v["summary"] == true && v["pass"].is_u64() => {
                        v["pass"] = (v["pass"].as_u64().unwrap_or(0) + 1).into();
                        format!("{v}\n")
                    }
                    _ => format!("{l}\n"),
                })
                .collect();
            (
                code,
                format!("{{\"id\":\"W0\",\"verdict\":\"PASS\"}}\n{counted}"),
            )
        } else {
            (code, out)
        })
    }
    fn sandbox_environ(&self, container: &str) -> Result<Vec<super::super::boundary::ProcessEnv>> {
        self.call("sandbox_environ", container)?;
        Ok(self.environ.clone())
    }
    fn container_members(&self, container: &str, _known: &[u32]) -> Result<Vec<super::Member>> {
        self.call("container_members", container)?;
        Ok(self.held.clone().unwrap_or_else(|| {
            vec![
                super::Member {
                    pid: 1,
                    comm: "catatonit".into(),
                    init: true,
                },
                super::Member {
                    pid: 2,
                    comm: "cyclix".into(),
                    init: false,
                },
            ]
        }))
    }
    fn gvisor_members(
        &self,
        container: &str,
        _runsc: &crate::tier::runsc::OciRuntime,
    ) -> Result<Vec<super::Member>> {
        self.call("gvisor_members", container)?;
        self.container_members(container, &[])
    }
    fn network_members(&self, network: &str) -> Result<Vec<String>> {
        self.call("network_members", network)?;
        Ok(self
            .members
            .clone()
            .unwrap_or_else(|| vec![format!("{network}-infra"), format!("{network}-proxy")]))
    }
}

impl RunJournal for FakeRunHost {
    fn unit_journal(&self, unit: &str) -> Result<Vec<String>> {
        self.call("unit_journal", unit)?;
        Ok(self.journal.clone())
    }
    fn follow_output(&self, f: super::super::output::OutputFollow) -> Result<()> {
        self.call("follow_output", &f.unit)?;
        self.follows
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .push(f);
        Ok(())
    }
    /// `journal` as the unit's plain output, through the same lines and tally as the real
    /// follower (with the secrets of its follow; none if it was never followed).
    fn output(&self, unit: &str) -> Result<super::super::output::Captured> {
        use crate::text::output::{LIMITS, Lines, Sink, Tally};
        self.call("output", unit)?;
        let follows = self
            .follows
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?;
        let Some(f) = follows.iter().find(|f| f.unit == unit) else {
            return Ok(super::super::output::Captured::default());
        };
        let secrets: Vec<&[u8]> = f.secrets.iter().map(Vec::as_slice).collect();
        let mut lines = Lines::new(&secrets);
        let mut tally = Tally::new(LIMITS, f.label, &f.hint);
        let mut all: Vec<String> = Vec::new();
        for l in &self.journal {
            all.extend(lines.feed_plain(format!("{l}\n").as_bytes()));
        }
        let mut kept = Vec::new();
        for l in &all {
            kept.extend(tally.take(l));
        }
        kept.extend(tally.end());
        let prefix = format!("{}| ", f.label);
        Ok(super::super::output::Captured {
            lines: kept
                .into_iter()
                .filter_map(|s| match s {
                    Sink::Keep(t) => t.strip_prefix(&prefix).map(str::to_string),
                    Sink::Journal(_) => None,
                })
                .collect(),
            summary: tally.summary,
        })
    }
}

impl RunProcs for FakeRunHost {
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
    fn fs_space(&self, path: &Path) -> Result<super::super::space::FsSpace> {
        self.call("fs_space", &path.display().to_string())?;
        // The run dir (`…/runs/RUN`, `run::inputs::fixture`) lives in the runtime dir, a file
        // system of its own (a tmpfs).
        if path.parent().is_some_and(|p| p.ends_with("runs")) {
            return Ok(super::super::space::FsSpace {
                avail: self.runtime_avail.unwrap_or(1 << 30),
                total: 8 << 20,
                fsid: 2,
            });
        }
        Ok(super::super::space::FsSpace {
            avail: self.fs_avail.unwrap_or(1 << 30),
            total: 8 << 20,
            fsid: 1,
        })
    }
    fn storage_lock_holders(
        &self,
        _run: Option<&str>,
    ) -> Result<Vec<super::super::storage_lock::Holder>> {
        let looked = self
            .calls()
            .iter()
            .filter(|c| c.starts_with("storage_lock_holders"))
            .count();
        self.call("storage_lock_holders", "")?;
        Ok(
            if looked < self.lock_held_looks || self.lock_held_from.is_some_and(|n| looked >= n) {
                vec![super::super::storage_lock::Holder {
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
