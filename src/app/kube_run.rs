//! `cyclix kube-run TENANT`: one run of a tenant on Kubernetes, driven from outside its Pods
//! (the CronJob's runner, or a person): the same objects as `cyclix export kube`, created in
//! stages through a [`Cluster`] adapter, waited for, the run's commits read from the
//! collector's log and imported into the user's repository as untrusted data, then every object
//! of the run deleted and the deletion audited. Each step is a phase with a deadline; a failure
//! names the phase and the object, and whatever was created is deleted (the `teardown` and
//! `audit` phases run whatever happened before them). The phases are timed and logged by the
//! run's own recorder (`run::state::Recorder`), as a run on systemd is.
//!
//! The repository: the runner reads it at `--repo` (default `repo.path`), a directory it can
//! reach — on a cluster, a volume mounted into the runner's Pod (the CronJob mounts the claim
//! `cyclix-TENANT-repo`). It makes the run's bundle from it (git's own `git bundle`,
//! [`crate::git::seed`]) and imports the run branch back into it. Sizes: the bundle goes in
//! as ConfigMaps of 1 MiB each (the agent Pod's clone step joins them, [`REPO_MAX`]); the
//! run's commits come out in collector logs of
//! [`crate::render::kube::gate::COLLECT_PART`] bytes each, one collector Job per part, each
//! part checked against the size and SHA-256 the collectors print, up to
//! [`crate::run::import::BUNDLE_CAP`].

mod stages;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use super::kube_export::{Rendered, render, secret_manifests};
use crate::cli::{ClusterKind, KubeRunArgs};
use crate::cluster::kubectl::Kubectl;
use crate::cluster::podman_play::PodmanPlay;
use crate::cluster::{Cluster, JobEnd};
use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::naming::RunNames;
use crate::render::kube::KubeNames;
use crate::render::kube::gate::COLLECT_PART;
use crate::run::record::{RunRecord, RunResult};
use crate::run::state::Recorder;

/// The largest repository bundle the runner sends (bytes): it travels through the API
/// server into etcd as immutable ConfigMaps of at most
/// [`crate::render::kube::agent::REPO_PART_MAX`] bytes each (deleted at teardown; etcd frees
/// their space at its next compaction, and its default quota is 2 GiB), so a run holds at
/// most a quarter of that quota.
pub const REPO_MAX: u64 = 512 * 1024 * 1024;

/// Seconds added to a Job's own `activeDeadlineSeconds` for the runner's wait (the Pod's
/// scheduling and image pull).
pub const WAIT_SLACK_S: u64 = 120;

/// How long the runner waits for the proxy Deployment to be available.
pub const PROXY_READY: Duration = Duration::from_secs(120);

/// The largest agent or gate log kept for the record (bytes).
pub const LOG_CAP: u64 = 4 * 1024 * 1024;

/// Lines of the agent's and the gate's log kept in the record.
const LOG_LINES: usize = 40;

/// Runs `cyclix kube-run`.
///
/// # Errors
/// I/O on the record or the scratch directory; every failure of the run itself is in its
/// record (result `error`, the failed phase) and the exit status.
pub fn run(env: &HostEnv, args: &KubeRunArgs) -> Result<Outcome> {
    let r = match render(env, &args.render.render_args())? {
        Ok(r) => r,
        Err(outcome) => return Ok(outcome),
    };
    // SIGTERM (the runner Pod deleted, its deadline) and SIGINT stop the run at its next
    // check (a wait's slice, a phase's start) and it still deletes everything.
    let stop = super::tenant::interrupt_flag()?;
    let cluster: Box<dyn Cluster> = match args.cluster {
        ClusterKind::Kubectl => Box::new(Kubectl::new(
            args.namespace.clone(),
            &r.run_id,
            stop.clone(),
        )),
        ClusterKind::Podman => Box::new(PodmanPlay::new(&r.run_id, stop.clone())),
    };
    run_on(env, args, &r, cluster.as_ref(), &stop)
}

/// [`run`] on `cluster`; `stop` set: interrupted.
fn run_on(
    env: &HostEnv,
    args: &KubeRunArgs,
    r: &Rendered,
    cluster: &dyn Cluster,
    stop: &Arc<AtomicBool>,
) -> Result<Outcome> {
    let repo = args
        .repo
        .clone()
        .unwrap_or_else(|| PathBuf::from(&r.spec.repo.path));
    let scratch = tempfile::Builder::new()
        .prefix("cyclix-kube-run-")
        .tempdir()
        .context("creating the runner's scratch directory")?;
    let mut rec = RunRecord::new(&r.spec.tenant, &r.run_id, "kubernetes".into());
    rec.notices
        .push(format!("cluster adapter: {}", cluster.name()));
    let mut run = KubeRun {
        cluster,
        r,
        env,
        repo: &repo,
        scratch: scratch.path(),
        rec: &mut rec,
        secrets: Vec::new(),
        delivery: None,
        recorder: Recorder::new(Some(stop.clone()), None),
        stop,
    };
    crate::stderrln!(
        "kube-run {} (tenant {}) on {}",
        r.run_id,
        r.spec.tenant,
        cluster.name()
    );
    match run.drive() {
        Err((phase, e)) if stop.load(Ordering::Relaxed) => {
            run.rec.result = RunResult::Interrupted;
            run.rec
                .causes
                .push(format!("stopped by a signal in phase {phase}: {e:#}"));
        }
        Err((phase, e)) => {
            run.rec.result = RunResult::Error;
            run.rec.failed_phase = Some(phase.to_string());
            run.rec.error = Some(format!("{e:#}"));
        }
        Ok(()) => {}
    }
    run.teardown();
    rec.phases = std::mem::take(&mut run.recorder.phases);
    let dir = crate::run::record::tenant_dir(&env.state_home, &r.spec.tenant);
    let path = crate::run::record::write(&dir, &rec)?;
    super::metrics::write_after(env, &format!("run {} of {}", rec.run_id, r.spec.tenant));
    crate::outln!("{}", crate::run::record::summary(&rec));
    crate::outln!("record: {}", path.display());
    Ok(match rec.result {
        RunResult::Passed => Outcome::Ok,
        RunResult::Interrupted => Outcome::Interrupted,
        RunResult::Error => anyhow::bail!(
            "run {} failed in phase {}: {}",
            rec.run_id,
            rec.failed_phase.as_deref().unwrap_or("?"),
            rec.error.as_deref().unwrap_or_default()
        ),
        _ => Outcome::Findings,
    })
}

/// One run in progress.
struct KubeRun<'a> {
    cluster: &'a dyn Cluster,
    r: &'a Rendered,
    env: &'a HostEnv,
    repo: &'a Path,
    scratch: &'a Path,
    rec: &'a mut RunRecord,
    /// The names of the Secrets the run created (deleted and audited by name).
    secrets: Vec<String>,
    /// The delivery's start (`delivery:` in the spec): the branch lock, the remote tip.
    delivery: Option<crate::run::phases::deliver::Start>,
    /// Set by SIGTERM/SIGINT (the recorder refuses the next phase; a delivery's lock wait ends).
    stop: &'a AtomicBool,
    /// The phases' timings and outcomes, as a run on systemd records them (interrupted by
    /// SIGTERM/SIGINT: no phase but `teardown` and `audit` runs).
    recorder: Recorder,
}

type PhaseResult<T> = std::result::Result<T, (&'static str, anyhow::Error)>;

impl KubeRun<'_> {
    /// Runs `f` as phase `name`, timing it into the record; not at all once the run is
    /// interrupted.
    fn phase<T>(
        &mut self,
        name: &'static str,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> PhaseResult<T> {
        let (begun, stopped) = self.recorder.begin(name);
        let out = match stopped {
            Some(e) => Err(e),
            None => f(self),
        };
        self.recorder.end(begun, out).map_err(|e| (name, e))
    }

    fn names(&self) -> KubeNames<'_> {
        KubeNames(RunNames::new(&self.r.run_id))
    }

    /// The run's phases up to the import; the caller tears down.
    fn drive(&mut self) -> PhaseResult<()> {
        if self.r.spec.delivery.is_some() {
            match self.phase("delivery-start", Self::delivery_start) {
                Ok(()) => {}
                Err((_, e))
                    if e.downcast_ref::<crate::run::phases::deliver::Refusal>()
                        .is_some() =>
                {
                    self.rec.result = RunResult::DeliveryRefused;
                    self.rec.causes.push(format!("{e:#}"));
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        let bundle = self.phase("bundle", Self::make_bundle)?;
        let st = stages::split(&self.r.export.manifests);
        let secrets = self.phase("secrets", |s| {
            secret_manifests(s.env, &s.r.spec, &s.r.run_id)
                .map(|m| m.into_iter().map(|m| m.object).collect::<Vec<Value>>())
        })?;
        self.secrets = secrets
            .iter()
            .filter_map(|o| o["metadata"]["name"].as_str().map(String::from))
            .collect();
        let (proxy_secrets, agent_secrets) = stages::split_secrets(&secrets);
        self.phase("apply-proxy", |s| {
            let mut objs = proxy_secrets;
            objs.extend(st.proxy.iter().cloned());
            s.cluster.apply(&objs)
        })?;
        let proxy = self.names().proxy();
        self.phase("proxy-ready", |s| {
            s.cluster.wait_available(&proxy, "proxy", PROXY_READY)
        })?;
        self.phase("apply-agent", |s| {
            s.apply_agent(&bundle, agent_secrets, &st.agent)
        })?;
        if !self.agent(&st.agent)? {
            return Ok(());
        }
        self.rec.agent_exit = Some(0);
        self.phase("apply-gate", |s| s.cluster.apply(&st.gate))?;
        let gate_end = self.job("gate", "gate", &st.gate)?;
        self.rec.gate_log = self.log_lines("gate", "gate")?;
        self.rec.result = match gate_end {
            JobEnd::Complete => {
                self.rec.gate_exit = Some(0);
                RunResult::Passed
            }
            JobEnd::Failed(why) => {
                self.rec.causes.push(format!("the gate Job failed: {why}"));
                RunResult::GateFailed
            }
        };
        self.phase("apply-collect", |s| s.cluster.apply(&st.collect))?;
        let collect_end = self.job("collect", "collect", &st.collect)?;
        if let JobEnd::Failed(why) = collect_end {
            return Err((
                "collect",
                anyhow::anyhow!("the collector Job failed: {why}"),
            ));
        }
        self.phase("import", |s| s.import(&st.collect))?;
        let imported = self
            .rec
            .import
            .as_ref()
            .is_some_and(|i| i.outcome == "imported");
        if let Some(start) = self.delivery.take() {
            if self.rec.result == RunResult::Passed && imported {
                self.phase("deliver", |s| s.deliver(start))?;
            } else {
                self.rec.delivery = Some(start.record.clone());
            }
        }
        Ok(())
    }

    /// The delivery's facts for [`crate::run::phases::deliver`], with the run's secret values to scan
    /// for.
    fn with_target<T>(
        &mut self,
        f: impl FnOnce(
            &crate::run::phases::deliver::Target<'_>,
            &crate::run::phases::deliver::GitRepo,
            &mut RunRecord,
        ) -> Result<T>,
    ) -> Result<T> {
        let spec = &self.r.spec;
        let d = spec
            .delivery
            .as_ref()
            .context("invariant: a delivery phase has a delivery spec")?;
        let values = super::tenant::run_secrets(self.env, spec)?;
        let locks_dir = self
            .env
            .runtime()
            .map_or_else(|_| self.scratch.join("locks"), |r| r.locks_dir());
        let branch = self.rec.branch.clone();
        let t = crate::run::phases::deliver::Target {
            spec: d,
            tenant: &spec.tenant,
            run_id: &self.r.run_id,
            base: &spec.repo.base,
            run_branch: &branch,
            locks_dir,
            // SIGTERM (the runner Pod deleted) ends a wait for the branch lock too.
            interrupted: self.stop,
            secrets: values
                .iter()
                .map(|(k, v)| (format!("value of secret {k}"), v.as_slice()))
                .collect(),
            scratch: self.scratch.join("delivery"),
        };
        let repo = crate::run::phases::deliver::GitRepo::new(self.repo)?;
        f(&t, &repo, self.rec)
    }

    /// Waits for the agent Job and reads its log (the probe verdicts); `false`: it failed, and
    /// the record says how (`probe_refused` naming the failed probes, else `agent_failed`).
    fn agent(&mut self, stage: &[Value]) -> PhaseResult<bool> {
        let agent_end = self.job("agent", "agent", stage)?;
        let agent_log = match self.log_lines("agent", "agent") {
            Ok(lines) => lines,
            // A failed Job whose agent container never ran has no log: its failure says why.
            Err((_, e)) if matches!(agent_end, JobEnd::Failed(_)) => {
                self.rec
                    .causes
                    .push(format!("the agent's log could not be read: {e:#}"));
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        stages::read_agent_log(&agent_log, self.rec);
        if let JobEnd::Failed(why) = agent_end {
            self.rec.result = if stages::probes_failed(&self.rec.probes) {
                let refusal = stages::probe_refusal(&self.rec.probes);
                self.rec.refusal.push(refusal);
                RunResult::ProbeRefused
            } else {
                RunResult::AgentFailed
            };
            self.rec.causes.push(format!("the agent Job failed: {why}"));
            return Ok(false);
        }
        Ok(true)
    }

    /// Creates the agent's Secret, the repository's ConfigMaps, the run's ConfigMap, the work
    /// claim and the agent Job whose clone step joins the parts (phase `apply-agent`).
    fn apply_agent(&mut self, bundle: &[u8], secrets: Vec<Value>, stage: &[Value]) -> Result<()> {
        let repo_maps = self.repo_configmaps(bundle);
        let mut stage = stage.to_vec();
        let job = stage
            .iter_mut()
            .find(|o| o["kind"] == "Job")
            .context("invariant: the agent stage has its Job")?;
        crate::render::kube::agent::set_repo_parts(
            job,
            &self.names(),
            &self.rec.branch,
            &self.r.opts,
            repo_maps.len(),
        )
        .map_err(anyhow::Error::msg)?;
        let mut objs = secrets;
        objs.extend(repo_maps);
        objs.extend(stage);
        self.cluster.apply(&objs)
    }

    /// Takes the branch lock and reads the remote tip (phase `delivery-start`): a fixed branch
    /// that contains the base moves the run's start to its tip.
    fn delivery_start(&mut self) -> Result<()> {
        let start =
            self.with_target(|t, repo, _| crate::run::phases::deliver::start_with(t, repo))?;
        self.delivery = Some(start);
        Ok(())
    }

    /// Checks and pushes the imported run branch (phase `deliver`).
    fn deliver(&mut self, start: crate::run::phases::deliver::Start) -> Result<()> {
        let result = self.with_target(|t, repo, rec| {
            let facts = rec.delivery_facts();
            crate::run::phases::deliver::deliver_with(t, start, &facts, repo, &mut rec.delivery)
        })?;
        self.rec.result = result;
        Ok(())
    }

    /// Waits for the Job of `role` (its deadline: the Job's own plus [`WAIT_SLACK_S`]).
    fn job(
        &mut self,
        role: &'static str,
        container: &str,
        objects: &[Value],
    ) -> PhaseResult<JobEnd> {
        let name = self.names().role(role);
        let own = objects
            .iter()
            .find(|o| o["kind"] == "Job")
            .and_then(|o| o["spec"]["activeDeadlineSeconds"].as_u64())
            .unwrap_or(3600);
        let deadline = Duration::from_secs(own + WAIT_SLACK_S);
        let phase: &'static str = match role {
            "agent" => "wait-agent",
            "gate" => "wait-gate",
            _ => "wait-collect",
        };
        self.phase(phase, |s| {
            s.cluster
                .wait_job(&name, container, deadline)
                .with_context(|| format!("Job {name}"))
        })
    }

    /// The last lines of a Job's log, printable.
    fn log_lines(&mut self, role: &'static str, container: &str) -> PhaseResult<Vec<String>> {
        let name = self.names().role(role);
        let file = self.scratch.join(format!("{role}.log"));
        let phase: &'static str = if role == "agent" {
            "log-agent"
        } else {
            "log-gate"
        };
        self.phase(phase, |s| {
            s.cluster
                .log(&name, container, &file, LOG_CAP)
                .with_context(|| format!("reading the log of Job {name}"))?;
            let text =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let _ = std::fs::remove_file(&file);
            let text = String::from_utf8_lossy(&text);
            let lines: Vec<String> = text.lines().map(crate::text::printable).collect();
            Ok(lines)
        })
        .map(|l| {
            let skip = l.len().saturating_sub(LOG_LINES * 4);
            l.into_iter().skip(skip).collect()
        })
    }

    /// The repository bundle of the base as the run branch (phase `bundle`).
    fn make_bundle(&mut self) -> Result<Vec<u8>> {
        let g = crate::git::Git::new(self.repo);
        let base = g
            .rev_parse_commit(&self.r.spec.repo.base)
            .with_context(|| {
                format!(
                    "repo.base `{}` in {} (--repo or repo.path)",
                    self.r.spec.repo.base,
                    self.repo.display()
                )
            })?;
        let common = g.common_dir()?;
        let seed = self.scratch.join("seed");
        std::fs::create_dir(&seed).with_context(|| format!("creating {}", seed.display()))?;
        let out = self.scratch.join("repo.bundle");
        crate::git::seed::run_bundle(&common, &base, &self.rec.branch, &seed, &out)?;
        let _ = std::fs::remove_dir_all(&seed);
        let bytes = std::fs::read(&out).with_context(|| format!("reading {}", out.display()))?;
        let _ = std::fs::remove_file(&out);
        if bytes.len() as u64 > REPO_MAX {
            anyhow::bail!(
                "the repository bundle of {} at `{}` is {} bytes; a run sends at most {REPO_MAX} through the API server (etcd's default quota is 2 GiB): run this repository with `cyclix run` on a host, or make its history smaller (e.g. a shallow clone as repo.path)",
                self.repo.display(),
                self.r.spec.repo.base,
                bytes.len()
            );
        }
        self.rec.base_commit = base;
        self.rec.notices.push(format!(
            "repository bundle: {} bytes in {} ConfigMap(s)",
            bytes.len(),
            crate::render::kube::agent::repo_parts(bytes.len() as u64)
        ));
        Ok(bytes)
    }

    /// The immutable ConfigMaps `cyclix-R-repo`, `cyclix-R-repo-1`, … holding the bundle's
    /// parts, in order.
    fn repo_configmaps(&self, bundle: &[u8]) -> Vec<Value> {
        use base64::Engine as _;
        let names = self.names();
        let part = usize::try_from(crate::render::kube::agent::REPO_PART_MAX).unwrap_or(usize::MAX);
        let chunks: Vec<&[u8]> = if bundle.is_empty() {
            vec![bundle]
        } else {
            bundle.chunks(part).collect()
        };
        chunks
            .iter()
            .enumerate()
            .map(|(i, chunk)| {
                json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": crate::render::kube::agent::repo_part(&names, i),
                        "labels": {
                            crate::naming::label::TENANT: self.r.spec.tenant,
                            crate::naming::label::RUN: self.r.run_id,
                            crate::naming::label::ROLE: "agent",
                        },
                    },
                    "immutable": true,
                    "binaryData": {
                        crate::render::kube::agent::BUNDLE_KEY: base64::engine::general_purpose::STANDARD.encode(chunk),
                    },
                })
            })
            .collect()
    }

    /// The log of collector `part` (the Job `cyclix-R-collect`, or `cyclix-R-collect-PART`),
    /// read.
    fn collect_log(&self, job: &str) -> Result<stages::Collected> {
        let log = self.scratch.join(format!("{job}.log"));
        let cap = stages::collect_log_cap(COLLECT_PART);
        self.cluster
            .log(job, "collect", &log, cap)
            .with_context(|| format!("reading the log of Job {job}"))?;
        let text = std::fs::read(&log).with_context(|| format!("reading {}", log.display()))?;
        let _ = std::fs::remove_file(&log);
        Ok(stages::read_collect_log(&text, &self.rec.branch))
    }

    /// The run's bundle from its collectors: the first's part, then one more collector Job per
    /// part, each checked ([`stages::join_part`]). `Err(Ok(record))`: no bundle, or parts that
    /// do not make one (refused).
    fn collect_bundle(
        &mut self,
        collect: &[Value],
    ) -> Result<std::result::Result<Vec<u8>, crate::run::record::ImportRecord>> {
        let refused = |outcome: &str, reason: String| {
            let mut r = crate::run::record::ImportRecord::default();
            outcome.clone_into(&mut r.outcome);
            r.reason = reason;
            r
        };
        let first_job = self.names().role("collect");
        let (size, sha256, bytes) = match self.collect_log(&first_job)? {
            stages::Collected::Nothing { outcome, reason } => {
                return Ok(Err(refused(outcome, reason)));
            }
            stages::Collected::Part {
                size,
                sha256,
                bytes,
            } => (size, sha256, bytes),
        };
        if size > crate::run::import::BUNDLE_CAP {
            return Ok(Err(refused(
                "refused",
                format!(
                    "the run's bundle is {size} bytes, over the import's cap of {}",
                    crate::run::import::BUNDLE_CAP
                ),
            )));
        }
        // Grown part by part: the size is the collector's word, checked as the parts come.
        let mut joined = Vec::new();
        let first = (size, sha256.as_str());
        let first_part = stages::Collected::Part {
            size,
            sha256: sha256.clone(),
            bytes,
        };
        if let Err(why) = stages::join_part(&mut joined, 0, COLLECT_PART, first, first_part) {
            return Ok(Err(refused("refused", why)));
        }
        let job = collect
            .iter()
            .find(|o| o["kind"] == "Job")
            .context("invariant: the collect stage has its Job")?;
        for part in 1..size.div_ceil(COLLECT_PART) {
            let names = self.names();
            let index = usize::try_from(part).context("a part index past usize")?;
            let obj = crate::render::kube::gate::collect_part_job(job, &names, index)
                .map_err(anyhow::Error::msg)?;
            let name = names.role(&format!("collect-{part}"));
            self.cluster.apply(std::slice::from_ref(&obj))?;
            let deadline = Duration::from_secs(crate::render::kube::gate::COLLECT_S + WAIT_SLACK_S);
            if let JobEnd::Failed(why) = self.cluster.wait_job(&name, "collect", deadline)? {
                anyhow::bail!("the collector Job {name} failed: {why}");
            }
            let this = self.collect_log(&name)?;
            if let Err(why) = stages::join_part(&mut joined, part, COLLECT_PART, first, this) {
                return Ok(Err(refused("refused", why)));
            }
        }
        self.rec.notices.push(format!(
            "the run's bundle: {size} bytes from {} collector Job(s)",
            size.div_ceil(COLLECT_PART).max(1)
        ));
        Ok(Ok(joined))
    }

    /// Reads the collectors' logs and imports their bundle (phase `import`).
    fn import(&mut self, collect: &[Value]) -> Result<()> {
        let out = match self.collect_bundle(collect)? {
            Err(record) => record,
            Ok(bytes) => {
                let bundle = self.scratch.join("run.bundle");
                let out = stages::import_bundle(
                    &bytes,
                    &bundle,
                    self.repo,
                    &self.rec.branch,
                    &self.rec.base_commit,
                )?;
                let _ = std::fs::remove_file(&bundle);
                out
            }
        };
        if out.outcome == "imported" {
            self.rec.commits =
                crate::git::bundle::commits(self.repo, &self.rec.base_commit, &out.tip)?
                    .into_iter()
                    .map(|c| crate::run::record::CommitInfo {
                        sha: c.sha,
                        subject: c.subject,
                    })
                    .collect();
        } else if out.outcome != "no-commits" {
            self.rec.causes.push(format!(
                "the run's commits were not imported ({}): {}",
                out.outcome, out.reason
            ));
            if matches!(self.rec.result, RunResult::Passed | RunResult::GateFailed) {
                self.rec.result = RunResult::AgentFailed;
            }
        }
        self.rec.import = Some(out);
        Ok(())
    }

    /// Deletes every object of the run and audits that nothing is left (phases `teardown`,
    /// `audit`); a failure of either makes the run an error.
    fn teardown(&mut self) {
        if let Some(start) = self.delivery.take() {
            self.rec.delivery = Some(start.record.clone());
        }
        let run_id = self.r.run_id.clone();
        let secrets = self.secrets.clone();
        let deleted = self.phase("teardown", |s| s.cluster.delete_run(&run_id, &secrets));
        let audit = self.phase("audit", |s| s.cluster.leftovers(&run_id, &secrets));
        let fail = |phase: &str, e: String, rec: &mut RunRecord| {
            if rec.result != RunResult::Error {
                rec.result = RunResult::Error;
                rec.failed_phase = Some(phase.to_string());
                rec.error = Some(e);
            }
        };
        if let Err((p, e)) = deleted {
            fail(p, format!("{e:#}"), self.rec);
        }
        match audit {
            Ok(left) if left.is_empty() => {}
            Ok(left) => {
                let msg = format!(
                    "objects of run {run_id} are left: {}; delete them with `kubectl delete {} -l io.cyclix.run={run_id}` (or `podman pod rm`/`volume rm`)",
                    left.join(", "),
                    crate::cluster::kubectl::RUN_KINDS
                );
                self.rec.leftovers = left;
                fail("audit", msg, self.rec);
            }
            Err((p, e)) => fail(p, format!("{e:#}"), self.rec),
        }
    }
}

#[cfg(test)]
mod tests;
