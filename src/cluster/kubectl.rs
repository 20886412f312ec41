//! The real-cluster adapter of [`super::Cluster`]: `kubectl` (Debian's `kubernetes-client`
//! in the runner image), in-cluster from the CronJob's runner Pod (the ServiceAccount's token
//! and namespace) or with any kubeconfig. Objects are created with `kubectl create -f -` (a
//! JSON `List` on stdin, so Secret values are never in an argument): the runner's Role has
//! `create` but no `patch`/`update`, and an object of the same name already there is an error,
//! never silently changed. Jobs (and the proxy's Deployment) are waited for with `kubectl
//! wait` in slices of [`WAIT_SLICE_S`] seconds; after each slice the Job's `Failed` condition
//! is read, so a failed Job ends the wait at once instead of at the deadline (and an interrupt
//! is seen within a slice), and so is what the cluster says of the run's Pods and the
//! namespace's Warning events ([`super::stuck`]): a Pod the cluster will never run ends the
//! wait with the cluster's reason and its fix.
//!
//! Proven against a real control plane by the cluster suite (`scripts/test-kube`,
//! docs/kubernetes.md); in CI, unit tests run the adapter against a stand-in `kubectl` script
//! (argv, stdin, the wait's control flow).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::stuck::{FailedContainer, Stuck, Waited, failed_container, why_stuck};
use super::{APPLY_DEADLINE, Cluster, DELETE_DEADLINE, JobEnd, QUERY_DEADLINE, names};
use crate::naming::label;
use crate::process;

/// Seconds of one `kubectl wait` slice.
pub const WAIT_SLICE_S: u64 = 5;

/// The kinds one run creates that are found by label, as `kubectl get`/`delete` takes them
/// (Secrets are deleted by name: the runner may not list them; Pods only in the audit: the
/// Jobs' and the Deployment's Pods are deleted by the cluster's garbage collector).
pub const RUN_KINDS: &str =
    "jobs,deployments,services,networkpolicies,configmaps,persistentvolumeclaims";

/// `kubectl`, optionally in a namespace (default: the kubeconfig's or the Pod's own).
#[derive(Debug, Clone)]
pub struct Kubectl {
    /// The program (`kubectl`).
    pub program: String,
    /// `--namespace`, when given.
    pub namespace: Option<String>,
    /// The run whose Pods a wait looks at (`io.cyclix.run=RUN`).
    pub run_id: String,
    /// Set when the run is asked to stop (SIGTERM, SIGINT): a wait ends at its next slice.
    pub stop: Arc<AtomicBool>,
}

impl Kubectl {
    /// `kubectl` in `namespace` (`None`: the default) for run `run_id`.
    #[must_use]
    pub fn new(namespace: Option<String>, run_id: &str, stop: Arc<AtomicBool>) -> Self {
        Self {
            program: "kubectl".into(),
            namespace,
            run_id: run_id.to_string(),
            stop,
        }
    }

    /// What the cluster says against `waited` ever getting there ([`super::stuck`]): the
    /// run's Pods and the namespace's Warning events, read now.
    ///
    /// # Errors
    /// `kubectl` failed or passed [`QUERY_DEADLINE`], or printed no JSON.
    pub fn stuck(&self, waited: Waited<'_>) -> Result<Option<Stuck>> {
        let sel = format!("{}={}", label::RUN, self.run_id);
        let pods = self.run_ok(
            &["get", "pods", "-l", &sel, "-o", "json"],
            None,
            QUERY_DEADLINE,
            &format!("listing the Pods labelled {sel}"),
        )?;
        let events = self.run_ok(
            &[
                "get",
                "events",
                "--field-selector=type=Warning",
                "-o",
                "json",
            ],
            None,
            QUERY_DEADLINE,
            "listing the namespace's Warning events",
        )?;
        let pods: Value =
            serde_json::from_str(&pods).context("kubectl get pods printed no JSON")?;
        let events: Value =
            serde_json::from_str(&events).context("kubectl get events printed no JSON")?;
        Ok(why_stuck(waited, &pods, &events))
    }

    /// The container that failed Job `job` ([`super::stuck::failed_container`]) and, for an
    /// init container, the last lines of its log (`: LINES`, printable; empty when unreadable).
    ///
    /// # Errors
    /// `kubectl get pods` failed or printed no JSON.
    fn failed_container(&self, job: &str) -> Result<Option<(FailedContainer, String)>> {
        let sel = format!("job-name={job}");
        let pods = self.run_ok(
            &["get", "pods", "-l", &sel, "-o", "json"],
            None,
            QUERY_DEADLINE,
            &format!("listing the Pods of Job {job}"),
        )?;
        let pods: Value =
            serde_json::from_str(&pods).context("kubectl get pods printed no JSON")?;
        let Some(f) = failed_container(job, &pods) else {
            return Ok(None);
        };
        let mut log = String::new();
        if f.init {
            let target = format!("pod/{}", f.pod);
            if let Ok(o) = self.run(
                &["logs", &target, "-c", &f.container, "--tail=5"],
                None,
                QUERY_DEADLINE,
                None,
            ) && o.status.success()
            {
                let lines: Vec<String> = o.stdout.lines().map(crate::text::printable).collect();
                if !lines.is_empty() {
                    log = format!(": {}", lines.join(" | "));
                }
            }
        }
        Ok(Some((f, log)))
    }

    /// Runs `kubectl wait --for=CONDITION TARGET` in slices until it succeeds (`Ok(None)`),
    /// `ended` says the object ended otherwise (`Ok(Some(end))`), the cluster says it never
    /// will (an error: [`Stuck`]), the run is interrupted or `deadline` passed.
    fn wait_sliced<T>(
        &self,
        condition: &str,
        target: &str,
        waited: Waited<'_>,
        deadline: Duration,
        mut ended: impl FnMut() -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let began = Instant::now();
        let slice = format!("--timeout={WAIT_SLICE_S}s");
        let condition = format!("--for={condition}");
        loop {
            if self.stop.load(Ordering::Relaxed) {
                bail!("interrupted while waiting for {target}");
            }
            let o = self.run(
                &["wait", &condition, &slice, target],
                None,
                Duration::from_secs(WAIT_SLICE_S + 30),
                None,
            )?;
            if o.status.success() {
                return Ok(None);
            }
            if let Some(end) = ended()? {
                return Ok(Some(end));
            }
            if let Some(stuck) = self.stuck(waited)? {
                return Err(anyhow::Error::new(stuck).context(format!("waiting for {target}")));
            }
            if began.elapsed() >= deadline {
                bail!(
                    "{target} did not end within {} s (kubectl wait: {})",
                    deadline.as_secs(),
                    o.stderr.trim()
                );
            }
        }
    }

    /// The argv of one call: the namespace, then `args`.
    #[must_use]
    pub fn argv(&self, args: &[&str]) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(ns) = &self.namespace {
            v.push(format!("--namespace={ns}"));
        }
        v.extend(args.iter().map(|a| (*a).to_string()));
        v
    }

    fn run(
        &self,
        args: &[&str],
        stdin: Option<&[u8]>,
        deadline: Duration,
        out: Option<(&Path, u64)>,
    ) -> Result<process::Output> {
        let full = self.argv(args);
        let full: Vec<&str> = full.iter().map(String::as_str).collect();
        Ok(process::run_with(
            &self.program,
            &full,
            &process::Opts {
                stdin,
                deadline,
                hint: "install kubectl (Debian: kubernetes-client) and give it a kubeconfig or run it in a Pod with a ServiceAccount",
                stdout_file: out,
                ..process::Opts::default()
            },
        )?)
    }

    fn run_ok(
        &self,
        args: &[&str],
        stdin: Option<&[u8]>,
        deadline: Duration,
        what: &str,
    ) -> Result<String> {
        let o = self.run(args, stdin, deadline, None)?;
        if !o.status.success() {
            bail!("kubectl {what} failed ({}): {}", o.status, o.stderr.trim());
        }
        Ok(o.stdout)
    }
}

/// `objects` as one `List` (what `kubectl create -f -` reads).
#[must_use]
pub fn list(objects: &[Value]) -> Value {
    json!({ "apiVersion": "v1", "kind": "List", "items": objects })
}

impl Cluster for Kubectl {
    fn name(&self) -> &'static str {
        "kubectl"
    }

    fn apply(&self, objects: &[Value]) -> Result<()> {
        let body = serde_json::to_vec(&list(objects)).context("serialising the objects")?;
        self.run_ok(
            &["create", "-f", "-"],
            Some(&body),
            APPLY_DEADLINE,
            &format!("creating {}", names(objects)),
        )
        .map(|_| ())
    }

    fn wait_available(&self, deployment: &str, _container: &str, deadline: Duration) -> Result<()> {
        let target = format!("deployment/{deployment}");
        self.wait_sliced(
            "condition=available",
            &target,
            Waited::Deployment(deployment),
            deadline,
            || Ok(None::<()>),
        )
        .map(drop)
    }

    fn wait_job(&self, job: &str, _container: &str, deadline: Duration) -> Result<JobEnd> {
        let target = format!("job/{job}");
        let ended = || {
            let failed = self.run_ok(
                &[
                    "get",
                    &target,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type==\"Failed\")].status} {.status.conditions[?(@.type==\"Failed\")].reason}",
                ],
                None,
                QUERY_DEADLINE,
                &format!("reading the conditions of {target}"),
            )?;
            let Some(reason) = failed.trim().strip_prefix("True") else {
                return Ok(None);
            };
            let why = format!("the Job failed ({})", reason.trim());
            match self.failed_container(job)? {
                // A step before the agent (the clone, cyclix's copy, a service) failed: the
                // cluster's or the run's making, never the agent's.
                Some((f, log)) if f.init => bail!(
                    "{why}: init container `{}` of Pod {} exited {} ({}) before the main container started{log}",
                    f.container,
                    f.pod,
                    f.exit,
                    f.reason
                ),
                Some((f, _)) => Ok(Some(JobEnd::Failed(format!(
                    "{why}: container `{}` exited {} ({})",
                    f.container, f.exit, f.reason
                )))),
                None => Ok(Some(JobEnd::Failed(why))),
            }
        };
        Ok(self
            .wait_sliced(
                "condition=complete",
                &target,
                Waited::Job(job),
                deadline,
                ended,
            )?
            .unwrap_or(JobEnd::Complete))
    }

    fn log(&self, job: &str, container: &str, out: &Path, cap: u64) -> Result<()> {
        let target = format!("job/{job}");
        let o = self.run(
            &["logs", &target, "-c", container],
            None,
            QUERY_DEADLINE,
            Some((out, cap)),
        )?;
        if !o.status.success() {
            bail!(
                "kubectl logs {target} -c {container} failed ({}): {}",
                o.status,
                o.stderr.trim()
            );
        }
        Ok(())
    }

    fn delete_run(&self, run_id: &str, secrets: &[String]) -> Result<()> {
        let sel = format!("{}={run_id}", label::RUN);
        self.run_ok(
            &[
                "delete",
                RUN_KINDS,
                "-l",
                &sel,
                "--ignore-not-found",
                "--cascade=foreground",
                "--wait=false",
            ],
            None,
            DELETE_DEADLINE,
            &format!("deleting the objects labelled {sel}"),
        )?;
        if !secrets.is_empty() {
            let mut args = vec!["delete", "secret", "--ignore-not-found", "--wait=false"];
            args.extend(secrets.iter().map(String::as_str));
            self.run_ok(
                &args,
                None,
                DELETE_DEADLINE,
                &format!("deleting the Secrets {}", secrets.join(", ")),
            )?;
        }
        let timeout = format!("--timeout={}s", DELETE_DEADLINE.as_secs());
        let kinds = format!("{RUN_KINDS},pods");
        let o = self.run(
            &["wait", "--for=delete", &kinds, "-l", &sel, &timeout],
            None,
            DELETE_DEADLINE + Duration::from_secs(30),
            None,
        )?;
        // Nothing matching the selector any more is what was waited for.
        if o.status.success() || o.stderr.contains("no matching resources found") {
            Ok(())
        } else {
            bail!(
                "the objects labelled {sel} were not gone within {} s: {}",
                DELETE_DEADLINE.as_secs(),
                o.stderr.trim()
            )
        }
    }

    fn leftovers(&self, run_id: &str, secrets: &[String]) -> Result<Vec<String>> {
        let sel = format!("{}={run_id}", label::RUN);
        let kinds = format!("{RUN_KINDS},pods");
        let out = self.run_ok(
            &["get", &kinds, "-l", &sel, "-o", "name"],
            None,
            QUERY_DEADLINE,
            &format!("listing the objects labelled {sel}"),
        )?;
        let mut left: Vec<String> = out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect();
        if !secrets.is_empty() {
            let mut args = vec!["get", "secret", "--ignore-not-found", "-o", "name"];
            args.extend(secrets.iter().map(String::as_str));
            let out = self.run_ok(
                &args,
                None,
                QUERY_DEADLINE,
                &format!("looking up the Secrets {}", secrets.join(", ")),
            )?;
            left.extend(
                out.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(String::from),
            );
        }
        Ok(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_name_the_namespace_first_and_the_objects_travel_on_stdin() {
        let k = Kubectl::new(Some("team-a".into()), "r", Arc::default());
        assert_eq!(
            k.argv(&["create", "-f", "-"]),
            ["--namespace=team-a", "create", "-f", "-"]
        );
        assert_eq!(
            Kubectl::new(None, "r", Arc::default()).argv(&["get"]),
            ["get"]
        );
        let l =
            list(&[json!({"kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}})]);
        assert_eq!(l["kind"], "List");
        assert_eq!(l["items"][0]["stringData"]["k"], "v");
        // Every kind the run creates is deleted and audited (pods: audited).
        for k in [
            "jobs",
            "deployments",
            "services",
            "networkpolicies",
            "configmaps",
            "persistentvolumeclaims",
        ] {
            assert!(RUN_KINDS.split(',').any(|x| x == k), "{k}");
        }
    }

    /// A stand-in `kubectl` (a shell script) that logs its argv and stdin and answers as an
    /// API server would for one run: the adapter's control flow, not a cluster.
    fn fake(dir: &Path, script: &str) -> Kubectl {
        let bin = dir.join("kubectl");
        crate::process::write_executable(
            &bin,
            &format!(
                "#!/bin/sh\nL={}/calls\necho \"$*\" >> $L\n{script}\n",
                dir.display()
            ),
        );
        Kubectl {
            program: bin.display().to_string(),
            namespace: Some("ns".into()),
            run_id: "r".into(),
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    fn calls(dir: &Path) -> String {
        std::fs::read_to_string(dir.join("calls")).unwrap_or_default()
    }

    #[test]
    fn a_failed_job_ends_the_wait_at_once_and_a_complete_one_is_complete() {
        let tmp = tempfile::tempdir().expect("tmp");
        let k = fake(
            tmp.path(),
            r#"case "$*" in
  *"wait --for=condition=complete"*job/good*) exit 0;;
  *"wait --for=condition=complete"*) echo "timed out waiting for the condition" >&2; exit 1;;
  *"get job/bad"*|*"get job/init"*) printf 'True BackoffLimitExceeded';;
  *"get job/slow"*|*"get job/refused"*) printf ' ';;
  *"get pods -l io.cyclix.run=r -o json"*) echo '{"items":[]}';;
  *"get pods -l job-name=bad -o json"*) echo '{"items":[]}';;
  *"get pods -l job-name=init -o json"*) echo '{"items":[{"metadata":{"name":"init-x","labels":{"job-name":"init"}},"status":{"initContainerStatuses":[{"name":"repo","state":{"terminated":{"exitCode":128,"reason":"Error"}}}]}}]}';;
  *"logs pod/init-x -c repo --tail=5"*) echo "fatal: detected dubious ownership in repository at '/work'";;
  *"get events --field-selector=type=Warning -o json"*) echo '{"items":[{"type":"Warning","reason":"FailedCreate","involvedObject":{"kind":"Job","name":"refused"},"message":"Error creating: pods \"refused-\" is forbidden: pod rejected: RuntimeClass \"gvisor\" not found"}]}';;
esac"#,
        );
        assert_eq!(
            k.wait_job("good", "agent", Duration::from_secs(60))
                .expect("wait"),
            JobEnd::Complete
        );
        assert_eq!(
            k.wait_job("bad", "agent", Duration::from_secs(60))
                .expect("wait"),
            JobEnd::Failed("the Job failed (BackoffLimitExceeded)".into())
        );
        // Neither complete nor failed: the deadline ends the wait, naming the Job.
        let e = k
            .wait_job("slow", "agent", Duration::ZERO)
            .expect_err("deadline");
        assert!(
            format!("{e:#}").contains("job/slow did not end within 0 s"),
            "{e:#}"
        );
        // An init step that failed: an error naming the container, its exit and its log (the
        // agent never ran), not the agent's failure.
        let e = k
            .wait_job("init", "agent", Duration::from_secs(60))
            .expect_err("init failed");
        let e = format!("{e:#}");
        assert!(
            e.contains("init container `repo` of Pod init-x exited 128 (Error) before the main container started: fatal: detected dubious ownership"),
            "{e}"
        );
        // A Job whose Pods the API server refuses ends the wait at its first slice, however
        // long its deadline, with the cluster's reason and the fix.
        let e = k
            .wait_job("refused", "agent", Duration::from_secs(3600))
            .expect_err("stuck");
        let e = format!("{e:#}");
        assert!(
            e.contains("waiting for job/refused")
                && e.contains("Job/refused FailedCreate")
                && e.contains("RuntimeClass \"gvisor\" not found")
                && e.contains("fix: create the RuntimeClass"),
            "{e}"
        );
        let c = calls(tmp.path());
        assert!(
            c.contains("--namespace=ns wait --for=condition=complete --timeout=5s job/good"),
            "{c}"
        );
        assert_eq!(
            c.lines()
                .filter(|l| l.contains("wait --for=condition=complete --timeout=5s job/refused"))
                .count(),
            1,
            "{c}"
        );
    }

    #[test]
    fn objects_go_on_stdin_secrets_are_deleted_by_name_and_an_empty_selector_is_gone() {
        let tmp = tempfile::tempdir().expect("tmp");
        let k = fake(
            tmp.path(),
            &format!(
                r#"case "$*" in
  *"create -f -"*) cat > {d}/stdin;;
  *"wait --for=delete"*) echo "error: no matching resources found" >&2; exit 1;;
  *"get secret"*) echo secret/cyclix-r-env;;
  *"get "*) ;;
esac"#,
                d = tmp.path().display()
            ),
        );
        let secret = json!({"kind": "Secret", "metadata": {"name": "cyclix-r-env"}, "stringData": {"K": "value-9"}});
        k.apply(&[secret]).expect("apply");
        let stdin = std::fs::read_to_string(tmp.path().join("stdin")).expect("stdin");
        assert!(
            stdin.contains("value-9") && stdin.contains("\"List\""),
            "{stdin}"
        );
        k.delete_run("r", &["cyclix-r-env".into()]).expect("delete");
        let left = k.leftovers("r", &["cyclix-r-env".into()]).expect("audit");
        assert_eq!(left, ["secret/cyclix-r-env"]);
        let c = calls(tmp.path());
        // The value travelled on stdin only; Secrets are never selected by label (no list).
        assert!(!c.contains("value-9"), "{c}");
        assert!(
            c.contains("delete secret --ignore-not-found --wait=false cyclix-r-env"),
            "{c}"
        );
        assert!(
            c.contains(&format!("delete {RUN_KINDS} -l io.cyclix.run=r")),
            "{c}"
        );
        assert!(
            !c.lines().any(|l| l.contains("-l") && l.contains("secret")),
            "{c}"
        );
    }
}
