//! What the run lifecycle needs from git, podman and the journal, as one trait: the real
//! implementation delegates to `git`, `podman` and `process`; the recording fake lets the
//! orchestrator's unit tests inject a failure into every phase.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::record::CommitInfo;
use crate::inventory::Leftover;

/// Everything the run lifecycle needs from the host: one small trait per adapter (git,
/// podman, the journal, processes and file systems), implemented together by
/// [`super::host::RealRunHost`] (and, in tests, the recording fake).
pub trait RunHost: RunGit + RunPodman + RunJournal + RunProcs + Sync {}

impl<T: RunGit + RunPodman + RunJournal + RunProcs + Sync> RunHost for T {}

/// The git side of a run: the user's repository, its refs and worktrees, the private
/// repository and the import.
pub trait RunGit {
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
    /// Every entry of `commit`'s tree in `repo` among `pathspecs`, as (octal mode, path)
    /// ([`crate::git::Git::tree_entries`]); git runs in `repo`, never in a tree the agent
    /// could write.
    ///
    /// # Errors
    /// git failed.
    fn tree_entries(
        &self,
        repo: &Path,
        commit: &str,
        pathspecs: &[String],
    ) -> Result<Vec<(u32, String)>>;
    /// The paths `base..tip` touches in `repo` among `pathspecs` (the tree diff and each
    /// commit's own changes: [`crate::git::Git::touched_among`]).
    ///
    /// # Errors
    /// git failed.
    fn touched_among(
        &self,
        repo: &Path,
        base: &str,
        tip: &str,
        pathspecs: &[String],
    ) -> Result<Vec<String>>;
    /// The gate's tree of a run in `repo` whose imported tip is `tip` (`base` when it made
    /// no commits): `tip`'s tree with every path among `pathspecs` as `base` has it
    /// ([`crate::git::Git::compose_protected`]); `scratch` is an empty directory of cyclix's.
    ///
    /// # Errors
    /// git failed.
    fn gate_tree(
        &self,
        repo: &Path,
        base: &str,
        tip: &str,
        pathspecs: &[String],
        scratch: &Path,
    ) -> Result<crate::git::gate_tree::Composed>;
    /// Packs every object `trees` reach in `repo` under `dir` ([`crate::git::Git::pack_trees`]);
    /// the object directory.
    ///
    /// # Errors
    /// git failed.
    fn pack_trees(&self, repo: &Path, trees: &[&str], dir: &Path) -> Result<PathBuf>;
    /// The git operation half done in `worktree` (`"a merge (MERGE_HEAD)"`, a rebase, a
    /// cherry-pick, a revert), if any.
    ///
    /// # Errors
    /// git failed (not a worktree).
    fn in_progress(&self, worktree: &Path) -> Result<Option<String>>;
}

/// The podman side of a run: secrets, labelled objects, export containers, the probes and
/// the sandbox's processes.
pub trait RunPodman {
    /// Removes `path` (a tree the agent could write) as plain files, never running git in it
    /// ([`crate::podman::Podman::unshare_rm_tree`]); idempotent.
    ///
    /// # Errors
    /// The removal failed or ran past its deadline.
    fn remove_tree(&self, path: &Path) -> Result<()>;
    /// [`Self::remove_tree`] for each of `paths`; the real host does them all in one podman
    /// call ([`crate::podman::Podman::unshare_rm_trees`]), the default one by one.
    ///
    /// # Errors
    /// A removal failed or ran past its deadline (the first failure, after trying every path).
    fn remove_trees(&self, paths: &[&Path]) -> Result<()> {
        let mut first = None;
        for p in paths {
            if let Err(e) = self.remove_tree(p) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
    /// Runs the bundle export container for `req` (the bundle goes to `req.out`).
    ///
    /// # Errors
    /// podman failed, the deadline or the size cap passed, the container's git failed.
    fn export_bundle(&self, req: &super::import::ExportRequest) -> Result<super::import::Export>;
    /// Writes a tree of packed objects into a new, empty directory with a fill container
    /// ([`super::import::run_fill`]): a gate's tree.
    ///
    /// # Errors
    /// podman failed, the deadline passed, the container's git failed.
    fn fill_tree(&self, req: &super::import::FillRequest) -> Result<()>;
    /// The id of the local image `reference` (`podman image inspect`).
    ///
    /// # Errors
    /// The image is missing, or podman failed.
    fn image_id(&self, reference: &str) -> Result<String>;
    /// Runs the uncommitted-diff export container for `req` (the diff goes to `req.out`,
    /// capped at [`super::import::DIFF_CAP`]); returns how many files it touches.
    ///
    /// # Errors
    /// podman failed, the deadline or the cap passed.
    fn export_diff(&self, req: &super::import::ExportRequest) -> Result<usize>;
    /// Kills what still runs of run `run_id`'s image build (its `RUN` steps, in scopes of their
    /// own: a cyclix that died mid-build leaves them), before its objects are removed; best
    /// effort ([`crate::images::build::kill_steps`]). Nothing by default (fakes).
    fn kill_build_steps(&self, run_id: &str) {
        let _ = run_id;
    }
    /// Builds the image of `req` from the repository's files at its base commit, or finds
    /// the image of the same inputs ([`crate::images::build::build`]); its progress lines go
    /// to stderr (the journal, for a run unit).
    ///
    /// # Errors
    /// A refused input, a failed build ([`crate::images::build::BuildFailed`]), git or podman.
    fn build_image(
        &self,
        req: &crate::images::build::Request<'_>,
    ) -> Result<crate::images::build::Built>;
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
    /// Runs Podman's Quadlet user generator (the `podman-user-generator` the user manager
    /// runs) over the directories `sources`, in that order (`QUADLET_UNIT_DIRS`; the first
    /// file of a name wins, drop-ins merge from all), writing the units into `out` (which must
    /// exist and be empty). Returns what the generator printed on stderr: it names the files
    /// it could not turn into units, and still generates the others (exit status 1).
    ///
    /// # Errors
    /// No generator is installed, it could not be run, or it outran its deadline (10 s).
    fn generate_units(&self, sources: &[&Path], out: &Path) -> Result<String>;
    /// Runs `cyclix probe` inside the running agent container `container` (only the probes in
    /// `only`, or all when empty; with `watch`, as a leak-watch round: `--watch`, which adds
    /// the W0 guard line) and returns its exit status and stdout (JSON lines).
    ///
    /// # Errors
    /// podman failed or the deadline passed.
    fn probe(
        &self,
        container: &str,
        only: &[&str],
        watch: bool,
        deadline: std::time::Duration,
    ) -> Result<(i32, String)>;
    /// The pre-agent probe report of `container`'s held-back `cyclix agent-wait --report
    /// FIFO` (issue 16): opens the FIFO `report` (host path), which lets agent-wait run the
    /// suite, reads the report until agent-wait closes its end, then removes the FIFO so
    /// nothing can hand the host another one. Returns the exit status `cyclix probe` would
    /// have had (0: a summary with no failure; 1: failures; -1: no summary) and the lines.
    ///
    /// # Errors
    /// The FIFO cannot be opened or read, or the report did not end within `deadline`.
    fn held_probe(
        &self,
        container: &str,
        report: &std::path::Path,
        deadline: std::time::Duration,
    ) -> Result<(i32, String)>;
    /// Hands `vars` (name, value) to the held-back `cyclix agent-wait --handover FIFO` of the
    /// agent container once it opened the FIFO `fifo` (host path), within `deadline`
    /// (`run::handover::give`: the path is unlinked before the values are written).
    ///
    /// # Errors
    /// agent-wait did not open the FIFO within `deadline`, or it cannot be written.
    fn hand_over(
        &self,
        fifo: &std::path::Path,
        vars: &[(String, Vec<u8>)],
        deadline: std::time::Duration,
    ) -> Result<()>;
    /// Runs the spec's `baseline.command` inside the running (held back) agent container
    /// `container` (`podman exec`: the agent's image, user, environment and work tree) and
    /// returns its exit status and output (stdout, then stderr). `env` (name, value): the
    /// agent's variables, which its container gets only at the go (`run::handover`), given to
    /// the command as `--env NAME` with the value in podman's environment, never its argv.
    ///
    /// # Errors
    /// podman failed or the deadline passed; a value is not UTF-8.
    fn baseline(
        &self,
        container: &str,
        argv: &[String],
        env: &[(String, Vec<u8>)],
        deadline: std::time::Duration,
    ) -> Result<(i32, String)>;
    /// The environment of every process in `container`, read on the host from
    /// `/proc/HPID/environ` (independent of the sandbox's cooperation).
    ///
    /// # Errors
    /// podman failed; a process that ended meanwhile is skipped.
    fn sandbox_environ(&self, container: &str) -> Result<Vec<super::boundary::ProcessEnv>>;
    /// Every live process of the running container `container`, zombies left out, read from
    /// the host's `/proc` and cgroup tree (`procs::container_processes`: its PID namespace and
    /// its first process's cgroup), starting from `known`, the host pids of its processes an
    /// earlier look saw (the lowest is taken as its first process).
    ///
    /// # Errors
    /// `known` is empty, or `/proc` or the cgroup tree cannot be read (the container ended).
    fn container_members(&self, container: &str, known: &[u32]) -> Result<Vec<Member>>;
    /// Every process of the running tier-`gvisor` container `container` as gVisor's kernel (the
    /// Sentry) lists them (`runsc --root $XDG_RUNTIME_DIR/runsc ps ID`, asked from the host
    /// through runsc's control socket, never through the sandbox's processes): the host's
    /// `/proc` shows only runsc's own processes there. `init`: pid 1 in the sandbox.
    ///
    /// # Errors
    /// podman cannot name the container's id, or `runsc ps` failed or printed no table.
    fn gvisor_members(
        &self,
        container: &str,
        runsc: &crate::tier::runsc::OciRuntime,
    ) -> Result<Vec<Member>>;
    /// Names of the containers on podman network `network` (field report B16).
    ///
    /// # Errors
    /// podman failed.
    fn network_members(&self, network: &str) -> Result<Vec<String>>;
}

/// The user journal.
pub trait RunJournal {
    /// The messages the user journal holds for `unit` (oldest first).
    ///
    /// # Errors
    /// journalctl failed.
    fn unit_journal(&self, unit: &str) -> Result<Vec<String>>;
    /// The messages container unit `unit` wrote at priority `info` (oldest first), found by
    /// its syslog identifier (`crate::journal::identifier_info_messages`: the plain backend's
    /// lines are not filed under the unit): the proxy's decisions. Under Quadlet squid's cache
    /// log (stderr, `PRIORITY=3`) is not among them; under the plain backend it is, and it
    /// prints request bytes an agent chose (a header block holding a NUL: `WARNING: HTTP
    /// header contains NULL characters {…}`) line for line, so the collect phase keeps only
    /// the lines with the run's access-log key. The default (the fakes): [`Self::unit_journal`].
    ///
    /// # Errors
    /// journalctl failed.
    fn unit_stdout_journal(&self, unit: &str) -> Result<Vec<String>> {
        self.unit_journal(unit)
    }
    /// Starts reading the output a unit writes to its raw file, as it grows
    /// ([`super::output::Follower`]): redacted, made printable, kept and sent to the journal
    /// within [`crate::text::output::LIMITS`].
    ///
    /// # Errors
    /// The kept log cannot be created.
    fn follow_output(&self, f: super::output::OutputFollow) -> Result<()>;
    /// Ends reading `f.unit`'s output (the unit has ended) and returns its lines; a unit that
    /// was never followed has none.
    ///
    /// # Errors
    /// The raw file could not be read or the kept log written.
    fn output(&self, unit: &str) -> Result<super::output::Captured>;
    /// Ends every follow still going (a run that ended before it read them).
    fn end_outputs(&self) {}
}

/// A process of a container as the host sees it ([`RunPodman::container_members`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Host pid.
    pub pid: u32,
    /// Its `comm`.
    pub comm: String,
    /// It is the container's init: pid 1 in the container's PID namespace (the innermost pid
    /// of `/proc/PID/status`'s `NSpid:`), which no other process can be.
    pub init: bool,
}

/// The host around a run: its processes (`/proc`, cgroups), podman's storage locks, file
/// system space and the mount guard.
pub trait RunProcs {
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
    /// Never cyclix itself or its own child processes (its podman calls); with `run`, not the
    /// processes of that run's units either (the pod unit's own `podman pod rm` is not a
    /// stuck holder: issue 20 item 7).
    ///
    /// # Errors
    /// `/proc/locks` cannot be read.
    fn storage_lock_holders(&self, run: Option<&str>) -> Result<Vec<super::storage_lock::Holder>>;
    /// Free space of the file system holding `path` (`statvfs`).
    ///
    /// # Errors
    /// `statvfs` failed (e.g. the path does not exist).
    fn fs_space(&self, path: &Path) -> Result<super::space::FsSpace>;
}

#[cfg(test)]
mod fake;
#[cfg(test)]
pub use fake::FakeRunHost;
