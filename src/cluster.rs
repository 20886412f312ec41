//! The seam between `cyclix kube-run` (issue 17) and the place one run's Kubernetes objects
//! run: [`Cluster`], with one adapter per tool —
//! - [`kubectl`]: a real cluster through `kubectl` (in-cluster from the CronJob's runner Pod,
//!   or any kubeconfig): `create -f -`, `wait`, `get`, `logs`, `delete -l`;
//! - [`podman_play`]: one host through `podman kube play` (the testbed's proof: podman has no
//!   API server, no Services and no NetworkPolicy, so the adapter stands in for them — see its
//!   module doc).
//!
//! Every call has a deadline; every error names the object and what was being done. Object
//! values are the export's own (`render::kube`), as JSON; Secret values reach the tool only on
//! its stdin, never in an argument.

pub mod kubectl;
pub mod podman_play;
pub mod stuck;

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde_json::Value;

/// How long one `apply` may take (the tool's call, not the objects' start).
pub const APPLY_DEADLINE: Duration = Duration::from_secs(120);

/// How long deleting one run's objects may take.
pub const DELETE_DEADLINE: Duration = Duration::from_secs(180);

/// How long one query (`get`, `logs`, an audit listing) may take.
pub const QUERY_DEADLINE: Duration = Duration::from_secs(60);

/// How a Job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobEnd {
    /// It completed (its Pod's containers exited 0).
    Complete,
    /// It failed; the words say how (an exit status, the Job's failure reason).
    Failed(String),
}

/// Where one run's objects are created, waited for, read and deleted.
pub trait Cluster {
    /// The adapter's name (`kubectl`, `podman`), for records and messages.
    fn name(&self) -> &'static str;

    /// Creates `objects` (in order; one call per stage of the run). Nothing of a failed
    /// call is left standing by the adapter beyond what [`Cluster::delete_run`] removes.
    ///
    /// # Errors
    /// The tool failed or passed [`APPLY_DEADLINE`], naming the objects.
    fn apply(&self, objects: &[Value]) -> Result<()>;

    /// Waits until the Deployment `deployment` (whose container is `container`) is
    /// available, at most `deadline`.
    ///
    /// # Errors
    /// The deadline passed (naming the Deployment) or the tool failed.
    fn wait_available(&self, deployment: &str, container: &str, deadline: Duration) -> Result<()>;

    /// Waits until the Job `job` (whose main container is `container`) has ended, at most
    /// `deadline`.
    ///
    /// # Errors
    /// The deadline passed (naming the Job) or the tool failed.
    fn wait_job(&self, job: &str, container: &str, deadline: Duration) -> Result<JobEnd>;

    /// Writes the log of container `container` of the Job `job` (stdout and stderr, as
    /// `kubectl logs` gives them) to the new file `out`, at most `cap` bytes.
    ///
    /// # Errors
    /// The tool failed, the deadline or the cap passed.
    fn log(&self, job: &str, container: &str, out: &Path, cap: u64) -> Result<()>;

    /// Deletes every object of run `run_id` (by its `io.cyclix.run` label; its Secrets by
    /// name, `secrets`: the runner may not list Secrets) and waits for them to be gone, at
    /// most [`DELETE_DEADLINE`].
    ///
    /// # Errors
    /// The tool failed or the deadline passed.
    fn delete_run(&self, run_id: &str, secrets: &[String]) -> Result<()>;

    /// What of run `run_id` is still there (`KIND/NAME` each; its Secrets looked up by name);
    /// empty when nothing is.
    ///
    /// # Errors
    /// The tool failed or passed [`QUERY_DEADLINE`].
    fn leftovers(&self, run_id: &str, secrets: &[String]) -> Result<Vec<String>>;
}

/// `KIND/NAME` of an object, for messages.
#[must_use]
pub fn object_name(o: &Value) -> String {
    format!(
        "{}/{}",
        o["kind"].as_str().unwrap_or("?"),
        o["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// The names of `objects`, comma-separated, for messages.
#[must_use]
pub fn names(objects: &[Value]) -> String {
    objects
        .iter()
        .map(object_name)
        .collect::<Vec<_>>()
        .join(", ")
}
