//! Delivery of a passed run's branch to a remote of the user's repository (`delivery:` in the
//! spec): one writer per remote branch, a fast-forward-only start on a fixed branch, a hold on
//! CI/automation paths and secrets, and a push with a lease.
//!
//! Owns: the branch lock (`$XDG_RUNTIME_DIR/cyclix/locks/delivery-HASH.lock`, flock, keyed by
//! the remote's push URL and the branch, held from prepare to the push), [`start`] (lock, read
//! the remote tip, decide where the run starts) and [`deliver`] (hold checks, push, record).
//! The decisions are pure and live in [`core`]; git runs only in `crate::git`, behind the
//! [`Repo`] seam so the orchestration is tested over fakes.
//!
//! The commits come from the sandbox: nothing here runs them, checks them out or lets a hook
//! see them. Pushes run from the user's repository with the user's credentials and ssh
//! settings, never prompting (`GIT_TERMINAL_PROMPT=0`, `GCM_INTERACTIVE=never`, and ssh
//! `BatchMode=yes` unless the user names their own ssh command), each with a deadline.

pub mod core;
pub mod lock;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use self::core::{PushOutcome, StartPoint};
use self::lock::{BranchLock, Holder, acquire, lock_path, now_ms};
use super::super::record::SecretHit;
use super::super::record::{DeliveryFacts, RunResult};
pub use super::super::record::{DeliveryRecord, Outcome};
use crate::git::Git;
use crate::spec::Delivery;

/// Deadline of a remote query (`ls-remote`) or the fetch of the remote tip at prepare.
pub const REMOTE_DEADLINE: Duration = Duration::from_secs(120);
/// Deadline of the push.
pub const PUSH_DEADLINE: Duration = Duration::from_secs(300);
/// Largest delivered diff (and, separately, log with patches) the secret scan reads; a larger
/// one is held, unscanned.
pub const SCAN_CAP: u64 = 32 << 20;

/// The git facts and actions a delivery needs (the real one is [`GitRepo`]).
pub trait Repo {
    /// The push URL of `remote`.
    ///
    /// # Errors
    /// The remote does not exist, or git fails.
    fn push_url(&self, remote: &str) -> Result<String>;
    /// The tip of `branch` on `remote`, `None` when absent.
    ///
    /// # Errors
    /// The remote cannot be reached in time.
    fn remote_tip(&self, remote: &str, branch: &str) -> Result<Option<String>>;
    /// Fetches `branch` from `remote` (via the temporary ref `tmp_ref`) and returns its tip.
    ///
    /// # Errors
    /// The fetch fails.
    fn fetch_tip(&self, remote: &str, branch: &str, tmp_ref: &str) -> Result<String>;
    /// The commit `rev` names.
    ///
    /// # Errors
    /// `rev` names no commit.
    fn rev_parse(&self, rev: &str) -> Result<String>;
    /// Whether `a` is an ancestor of (or equal to) `b`.
    ///
    /// # Errors
    /// git fails.
    fn is_ancestor(&self, a: &str, b: &str) -> Result<bool>;
    /// The paths `base..tip` touches.
    ///
    /// # Errors
    /// git fails.
    fn touched_paths(&self, base: &str, tip: &str) -> Result<Vec<String>>;
    /// The delivered diff and every commit's message and patch, as text (scratch files under
    /// `dir`, removed by the caller).
    ///
    /// # Errors
    /// git fails or the text is larger than [`SCAN_CAP`].
    fn delivered_text(&self, base: &str, tip: &str, dir: &Path) -> Result<Vec<u8>>;
    /// Pushes `src` to `refs/heads/BRANCH` with the lease `expected`; (exit ok, porcelain
    /// stdout, stderr).
    ///
    /// # Errors
    /// git cannot be started or runs past its deadline.
    fn push(
        &self,
        remote: &str,
        src: &str,
        branch: &str,
        expected: Option<&str>,
    ) -> Result<(bool, String, String)>;
}

/// [`Repo`] over the user's repository with `crate::git`.
pub struct GitRepo {
    git: Git,
    env: Vec<(&'static str, Option<&'static str>)>,
}

/// The ssh command a delivery uses when the user names none: never prompts, gives up on a
/// dead host.
pub const BATCH_SSH: &str = "ssh -o BatchMode=yes -o ConnectTimeout=30";

impl GitRepo {
    /// The repository at `path`, with the environment of every remote call: no terminal
    /// prompt, no credential-manager dialog, and [`BATCH_SSH`] unless the user set
    /// `GIT_SSH_COMMAND`, `GIT_SSH` or `core.sshCommand` (theirs wins: it must not prompt).
    ///
    /// # Errors
    /// git cannot read the repository's configuration.
    pub fn new(path: &Path) -> Result<Self> {
        let git = Git::new(path);
        let mut env = vec![
            ("GIT_TERMINAL_PROMPT", Some("0")),
            ("GCM_INTERACTIVE", Some("never")),
        ];
        if !crate::context::git_ssh_from_env() && !git.config_is_set("core.sshCommand")? {
            env.push(("GIT_SSH_COMMAND", Some(BATCH_SSH)));
        }
        Ok(GitRepo { git, env })
    }
}

impl Repo for GitRepo {
    fn push_url(&self, remote: &str) -> Result<String> {
        Ok(self.git.remote_push_url(remote)?)
    }
    fn remote_tip(&self, remote: &str, branch: &str) -> Result<Option<String>> {
        Ok(self
            .git
            .remote_tip(remote, branch, &self.env, REMOTE_DEADLINE)?)
    }
    fn fetch_tip(&self, remote: &str, branch: &str, tmp_ref: &str) -> Result<String> {
        Ok(self
            .git
            .fetch_tip(remote, branch, tmp_ref, &self.env, REMOTE_DEADLINE)?)
    }
    fn rev_parse(&self, rev: &str) -> Result<String> {
        Ok(self.git.rev_parse_commit(rev)?)
    }
    fn is_ancestor(&self, a: &str, b: &str) -> Result<bool> {
        Ok(self.git.is_ancestor(a, b)?)
    }
    fn touched_paths(&self, base: &str, tip: &str) -> Result<Vec<String>> {
        Ok(self.git.touched_paths(base, tip)?)
    }
    fn delivered_text(&self, base: &str, tip: &str, dir: &Path) -> Result<Vec<u8>> {
        Ok(self.git.delivered_text(base, tip, dir, SCAN_CAP)?)
    }
    fn push(
        &self,
        remote: &str,
        src: &str,
        branch: &str,
        expected: Option<&str>,
    ) -> Result<(bool, String, String)> {
        let out =
            self.git
                .push_with_lease(remote, src, branch, expected, &self.env, PUSH_DEADLINE)?;
        Ok((out.status.success(), out.stdout, out.stderr))
    }
}

/// What a run needs to know about its delivery from prepare on.
#[derive(Debug)]
pub struct Start {
    /// The commit the run starts from instead of `repo.base`: the remote tip of a fixed
    /// branch that contains the base.
    pub base_override: Option<String>,
    /// The remote tip the push's lease expects (`None`: the branch must not exist).
    pub expected: Option<String>,
    /// The record so far (outcome `not_reached`).
    pub record: DeliveryRecord,
    /// The push URL as configured (may hold credentials: never recorded, used to scrub).
    url: String,
    /// Held until the push (or the end of the run).
    _lock: BranchLock,
}

/// The run facts [`start_with`] and [`deliver_with`] need.
pub struct Target<'a> {
    /// The spec's `delivery:`.
    pub spec: &'a Delivery,
    /// Tenant.
    pub tenant: &'a str,
    /// Run id.
    pub run_id: &'a str,
    /// The spec's `repo.base`.
    pub base: &'a str,
    /// The local run branch (`cyclix/TENANT/RUN`).
    pub run_branch: &'a str,
    /// Where the branch locks live (`$XDG_RUNTIME_DIR/cyclix/locks`).
    pub locks_dir: PathBuf,
    /// Set when the run is asked to stop.
    pub interrupted: &'a AtomicBool,
    /// What the scan looks for: (kind of a hit, value): the run's secrets (`value of secret
    /// NAME`) and the host credentials the sandbox must never see (`value of host credential
    /// NAME`).
    pub secrets: Vec<(String, &'a [u8])>,
    /// A scratch directory for the scan's text (created and removed by [`deliver_with`]).
    pub scratch: PathBuf,
}

impl Target<'_> {
    /// The branch on the remote.
    #[must_use]
    pub fn branch(&self) -> &str {
        self.spec.branch.as_deref().unwrap_or(self.run_branch)
    }
}

/// The run's [`Target`] from its inputs; `None` when the spec has no `delivery:`.
#[must_use]
pub fn target<'a>(
    inp: &'a super::super::inputs::RunInputs,
    run_branch: &'a str,
) -> Option<Target<'a>> {
    let spec = inp.spec.delivery.as_ref()?;
    let runs_root = inp.paths.run_dir.parent()?;
    Some(Target {
        spec,
        tenant: &inp.spec.tenant,
        run_id: &inp.run_id,
        base: &inp.spec.repo.base,
        run_branch,
        locks_dir: runs_root.parent().unwrap_or(runs_root).join("locks"),
        interrupted: &inp.interrupted,
        secrets: inp
            .secrets
            .iter()
            .map(|(k, v)| (format!("value of secret {k}"), v.as_slice()))
            .chain(inp.watched.iter().map(|w| {
                (
                    format!("value of host credential {}", w.name),
                    w.value.as_slice(),
                )
            }))
            .collect(),
        scratch: inp.paths.run_dir.join("delivery"),
    })
}

/// At prepare: takes the branch lock, reads the remote tip and decides where the run starts.
/// `None` when the spec has no `delivery:`.
///
/// # Errors
/// The lock stayed held, the remote cannot be read, or its tip does not contain the base.
pub fn start(inp: &super::super::inputs::RunInputs, run_branch: &str) -> Result<Option<Start>> {
    let Some(t) = target(inp, run_branch) else {
        return Ok(None);
    };
    let repo = GitRepo::new(Path::new(&inp.spec.repo.path))?;
    start_with(&t, &repo).map(Some)
}

/// A delivery that cannot start for a reason of the run's own (the branch is held by another
/// run past `delivery.lock_wait`, or a fixed branch does not contain the base): a finding
/// (`DeliveryRefused`, exit 1), not a failure of cyclix.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

/// [`start`] over any [`Repo`].
///
/// # Errors
/// As [`start`].
pub fn start_with(t: &Target<'_>, repo: &dyn Repo) -> Result<Start> {
    let url = repo.push_url(&t.spec.remote)?;
    start_from(t, repo, &url).map_err(|e| anyhow::anyhow!(scrub(&format!("{e:#}"), &url, t)))
}

/// `text` as it may be recorded: the push URL's credentials removed, every secret value (as
/// text) replaced by `***` (git's and the remote's messages are quoted in reasons and errors).
fn scrub(text: &str, url: &str, t: &Target<'_>) -> String {
    let mut out = text.replace(url, &core::redact_url(url));
    for (_, value) in &t.secrets {
        if let Ok(v) = std::str::from_utf8(value)
            && !v.is_empty()
        {
            out = out.replace(v, "***");
        }
    }
    out
}

fn start_from(t: &Target<'_>, repo: &dyn Repo, url: &str) -> Result<Start> {
    let remote = &t.spec.remote;
    let branch = t.branch();
    let shown = core::redact_url(url);
    let what = format!("branch `{branch}` of {shown}");
    let holder = Holder {
        run_id: t.run_id.to_owned(),
        tenant: t.tenant.to_owned(),
        pid: std::process::id(),
        since_ms: now_ms(),
    };
    let began = Instant::now();
    let wait = Duration::from_secs(t.spec.lock_wait_s);
    let lock = acquire(
        &lock_path(&t.locks_dir, url, branch),
        &holder,
        wait,
        t.interrupted,
        &what,
    )?;
    let lock_wait_ms = began.elapsed().as_millis();
    let tip = match repo.remote_tip(remote, branch)? {
        None => None,
        // The objects must be here for the run to start from them.
        Some(_) => Some(repo.fetch_tip(
            remote,
            branch,
            &format!("refs/cyclix-delivery/{}", t.run_id),
        )?),
    };
    let base = repo.rev_parse(t.base)?;
    let contains = match &tip {
        Some(tip) => repo.is_ancestor(&base, tip)?,
        None => false,
    };
    let (base_override, expected) = match core::start_point(tip.as_deref(), contains) {
        StartPoint::New => (None, None),
        StartPoint::FastForward(tip) => (Some(tip.clone()), Some(tip)),
        StartPoint::Diverged { tip } => {
            return Err(Refusal(format!(
                "{what} is at {tip}, which does not contain the base {base} (`{}`): a fixed \
                 branch is only ever fast-forwarded; merge `{}` into it, delete it on the \
                 remote, or deliver to another `delivery.branch`",
                t.base, t.base
            ))
            .into());
        }
    };
    Ok(Start {
        base_override,
        record: DeliveryRecord {
            remote: remote.clone(),
            url: shown,
            branch: branch.to_owned(),
            expected: expected.clone(),
            outcome: Outcome::NotReached,
            reason: Some("the run did not pass".into()),
            pushed_tip: None,
            held_paths: Vec::new(),
            secret_hits: Vec::new(),
            lock_wait_ms,
            push_start_ms: None,
            push_end_ms: None,
        },
        expected,
        url: url.to_owned(),
        _lock: lock,
    })
}

/// After a passed run: checks and pushes its branch (see [`deliver_with`]).
///
/// # Errors
/// git fails (the run is then an error; nothing was pushed unless the record says so).
pub fn deliver(
    inp: &super::super::inputs::RunInputs,
    start: Start,
    facts: &DeliveryFacts,
    out: &mut Option<DeliveryRecord>,
) -> Result<RunResult> {
    let t =
        target(inp, &facts.branch).context("invariant: a delivery start has a delivery spec")?;
    let repo = GitRepo::new(Path::new(&inp.spec.repo.path))?;
    deliver_with(&t, start, facts, &repo, out)
}

/// Holds the delivery when the commits touch held paths or carry a secret, refuses it when
/// the run's tip does not contain the remote tip it started from, else pushes with the lease
/// (unless `push: false`). The delivery's record goes into `out` (also when git fails);
/// returns `Passed` or `DeliveryRefused` (held or refused). The branch lock is released on
/// return.
///
/// # Errors
/// git fails.
pub fn deliver_with(
    t: &Target<'_>,
    start: Start,
    facts: &DeliveryFacts,
    repo: &dyn Repo,
    out: &mut Option<DeliveryRecord>,
) -> Result<RunResult> {
    let mut d = start.record.clone();
    d.reason = None;
    let result = decide_and_push(t, &start, facts, repo, &mut d)
        .map_err(|e| anyhow::anyhow!(scrub(&format!("{e:#}"), &start.url, t)));
    if let Err(e) = &result {
        d.reason = Some(format!(
            "the delivery failed: {e}; kept on {}",
            t.run_branch
        ));
    }
    d.reason = d.reason.map(|r| scrub(&r, &start.url, t));
    *out = Some(d);
    drop(start);
    result
}

fn decide_and_push(
    t: &Target<'_>,
    start: &Start,
    facts: &DeliveryFacts,
    repo: &dyn Repo,
    d: &mut DeliveryRecord,
) -> Result<RunResult> {
    if !facts.has_commits {
        d.outcome = Outcome::NothingToDeliver;
        return Ok(RunResult::Passed);
    }
    let src = format!("refs/heads/{}", t.run_branch);
    let tip = repo.rev_parse(&src)?;
    let base = &facts.base;
    d.held_paths = core::held_paths(
        &repo.touched_paths(base, &tip)?,
        &t.spec.hold_paths,
        &t.spec.allow_paths,
    );
    d.secret_hits = scan(t, repo, base, &tip)?;
    let setup = core::setup_held(&facts.setup_changes, t.spec.allow_setup_changes);
    let protected = core::protected_held(&facts.protected_changes, &t.spec.allow_paths);
    if let Some(why) = core::hold_reasons(&d.held_paths, &setup, &protected, &d.secret_hits) {
        d.held_paths = core::merged(&core::merged(&d.held_paths, &setup), &protected);
        d.outcome = Outcome::Held;
        d.reason = Some(format!("kept on {}: {why}", t.run_branch));
        return Ok(RunResult::DeliveryRefused);
    }
    if let Some(expected) = &start.expected
        && !repo.is_ancestor(expected, &tip)?
    {
        d.outcome = Outcome::Refused;
        d.reason = Some(format!(
            "the run's tip {tip} does not contain {expected}, the remote tip it started \
             from: pushing would drop commits; kept on {}",
            t.run_branch
        ));
        return Ok(RunResult::DeliveryRefused);
    }
    if !t.spec.push {
        d.outcome = Outcome::NotPushed;
        return Ok(RunResult::Passed);
    }
    push(t, start, repo, d, &tip)
}

/// Pushes `tip` (the commit scanned: by object name, so a ref moved since cannot slip
/// unscanned commits in) with the lease and records how it went in `d`.
fn push(
    t: &Target<'_>,
    start: &Start,
    repo: &dyn Repo,
    d: &mut DeliveryRecord,
    tip: &str,
) -> Result<RunResult> {
    let tip = tip.to_owned();
    d.push_start_ms = Some(now_ms());
    let pushed = repo.push(&t.spec.remote, &tip, &d.branch, start.expected.as_deref());
    d.push_end_ms = Some(now_ms());
    let dst = format!("refs/heads/{}", d.branch);
    let outcome = match pushed {
        Ok((ok, porcelain, stderr)) => core::push_outcome(ok, &porcelain, &stderr, &dst),
        // git killed at its deadline: the push may have landed; the read-back below tells.
        Err(e) => PushOutcome::Failed(format!("{e:#}")),
    };
    let outcome = match outcome {
        // A push git did not see through may still have landed (a remote that failed to
        // report, git killed after the ref moved): the remote's word decides.
        PushOutcome::Failed(why)
            if repo
                .remote_tip(&t.spec.remote, &d.branch)
                .is_ok_and(|r| r.as_deref() == Some(tip.as_str())) =>
        {
            d.reason = Some(format!(
                "git did not report the push through ({why}), but the remote's `{dst}` is at \
                 {tip}: it landed"
            ));
            d.outcome = Outcome::Pushed;
            d.pushed_tip = Some(tip.clone());
            return Ok(RunResult::Passed);
        }
        other => other,
    };
    match outcome {
        PushOutcome::Pushed => {
            // Landed, by git's report: recorded so whatever the read-back says.
            d.outcome = Outcome::Pushed;
            d.pushed_tip = Some(tip.clone());
            match repo.remote_tip(&t.spec.remote, &d.branch) {
                Ok(Some(read)) if read == tip => Ok(RunResult::Passed),
                Ok(read) => {
                    d.outcome = Outcome::Refused;
                    d.pushed_tip = read;
                    d.reason = Some(format!(
                        "git reported the push, but the remote's `{dst}` is at {} instead of {tip}",
                        d.pushed_tip.as_deref().unwrap_or("nothing")
                    ));
                    Ok(RunResult::DeliveryRefused)
                }
                Err(e) => {
                    d.reason = Some(format!(
                        "git reported the push of {tip}; reading `{dst}` back failed ({e:#}): \
                         the tip is git's report, not read back (`git ls-remote {} {dst}` \
                         tells once the remote answers)",
                        t.spec.remote
                    ));
                    Ok(RunResult::Passed)
                }
            }
        }
        PushOutcome::Refused(why) => {
            d.outcome = Outcome::Refused;
            let lease = start.expected.as_deref().map_or_else(
                || "must not exist yet".to_owned(),
                |e| format!("must still be at {e}"),
            );
            d.reason = Some(format!(
                "push refused: {why}; the lease on `{dst}` ({lease}) does not hold or the \
                 remote declined; kept on {}, nothing was overwritten",
                t.run_branch
            ));
            Ok(RunResult::DeliveryRefused)
        }
        PushOutcome::Failed(why) => {
            d.outcome = Outcome::Failed;
            anyhow::bail!(
                "the push to `{dst}` on remote `{}` did not get through: {why} (the remote is \
                 gone, unreachable or cannot store it; fix the remote and run again)",
                t.spec.remote
            )
        }
    }
}

/// The secret scan over the delivered text; the scratch files are removed whatever happens.
/// A text larger than [`SCAN_CAP`] is a hit of its own (held, unscanned).
fn scan(t: &Target<'_>, repo: &dyn Repo, base: &str, tip: &str) -> Result<Vec<SecretHit>> {
    let _ = std::fs::remove_dir_all(&t.scratch);
    std::fs::create_dir_all(&t.scratch)
        .with_context(|| format!("creating {}", t.scratch.display()))?;
    let text = repo.delivered_text(base, tip, &t.scratch);
    let _ = std::fs::remove_dir_all(&t.scratch);
    let text = match text {
        Ok(text) => text,
        Err(e)
            if e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<crate::process::ProcessError>(),
                    Some(crate::process::ProcessError::TooLarge { .. })
                )
            }) =>
        {
            return Ok(vec![SecretHit {
                file: "the delivered diff".into(),
                kind: format!("too large to scan (over {} MiB)", SCAN_CAP >> 20),
            }]);
        }
        Err(e) => return Err(e),
    };
    let secrets: Vec<(&str, &[u8])> = t.secrets.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    Ok(core::scan(&text, &secrets))
}

#[cfg(test)]
mod tests;
