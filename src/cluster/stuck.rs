//! Why an object `kube-run` waits for will never get there, from what a real cluster says
//! (issue 34): a Job or a `ReplicaSet` whose Pods the API server refuses (`FailedCreate`
//! events: a missing `RuntimeClass`, Pod Security admission, a `ResourceQuota`, a `LimitRange`),
//! a Pod the scheduler cannot place (its `PodScheduled` condition `Unschedulable`), a work
//! claim that no volume will ever bind (`FailedBinding`, `ProvisioningFailed` on the claim),
//! a container whose image cannot be had or whose configuration is wrong (its `waiting`
//! reason). None of these ends a Job with a `Failed` condition: without this, the runner
//! would wait out the Job's `activeDeadlineSeconds`. Pure: it reads the JSON of
//! `kubectl get pods -o json` and `kubectl get events -o json` (the API's `PodList` and
//! `EventList`).
//!
//! Only what is true *now* counts: a `FailedCreate` only while the object has no Pod, an
//! unschedulable Pod only while it is unschedulable and no cluster autoscaler is adding a node
//! for it (its `TriggeredScaleUp` event), and one that waits for its claim only when the claim
//! got a binding failure (a claim still being provisioned is not stuck).

use std::fmt;

use serde_json::Value;

/// What the cluster says about an object that will not get where it is waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    /// `KIND/NAME` of the object the cluster spoke of.
    pub object: String,
    /// The cluster's reason (`FailedCreate`, `Unschedulable`, `ErrImagePull`, …).
    pub reason: String,
    /// The cluster's message, printable, at most 600 characters.
    pub message: String,
    /// What the user can do about it.
    pub fix: &'static str,
}

impl fmt::Display for Stuck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the cluster will not run it: {} {}: {}; fix: {}",
            self.object, self.reason, self.message, self.fix
        )
    }
}

impl std::error::Error for Stuck {}

/// Container `waiting` reasons that do not go away by waiting (the kubelet retries an image
/// pull with a back-off, but a name that cannot be pulled stays so for the run's life).
const FATAL_WAITING: [&str; 6] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// The labels the Job controller gives its Pods (the second since Kubernetes 1.27).
const JOB_NAME_LABELS: [&str; 2] = ["job-name", "batch.kubernetes.io/job-name"];

/// The waited-for object: a Job (its Pods carry its name in a label) or a Deployment
/// (its `ReplicaSet`s `NAME-HASH`, their Pods `NAME-HASH-…`).
#[derive(Debug, Clone, Copy)]
pub enum Waited<'a> {
    /// A Job of this name.
    Job(&'a str),
    /// A Deployment of this name.
    Deployment(&'a str),
}

impl Waited<'_> {
    fn name(&self) -> &str {
        match self {
            Waited::Job(n) | Waited::Deployment(n) => n,
        }
    }

    /// Whether `kind`/`name` is the object that creates the Pods.
    fn creates_pods(&self, kind: &str, name: &str) -> bool {
        match self {
            Waited::Job(n) => kind == "Job" && name == *n,
            Waited::Deployment(n) => {
                kind == "ReplicaSet" && name.strip_prefix(*n).is_some_and(|r| r.starts_with('-'))
            }
        }
    }
}

fn printable(s: &str) -> String {
    crate::text::printable(&s.chars().take(600).collect::<String>())
}

fn items(list: &Value) -> &[Value] {
    list["items"].as_array().map_or(&[], Vec::as_slice)
}

/// Why the object `waited` will not get there, if the cluster says so: `pods` is the run's
/// `PodList` (any Pods; the waited object's are found by name), `events` the namespace's
/// Warning `EventList`.
#[must_use]
pub fn why_stuck(waited: Waited<'_>, pods: &Value, events: &Value) -> Option<Stuck> {
    let prefix = format!("{}-", waited.name());
    let own: Vec<&Value> = items(pods)
        .iter()
        .filter(|p| match waited {
            // The Job controller labels its Pods with the Job's name.
            Waited::Job(n) => JOB_NAME_LABELS
                .iter()
                .any(|l| p["metadata"]["labels"][*l] == *n),
            Waited::Deployment(_) => p["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(&prefix)),
        })
        .collect();
    if own.is_empty() {
        // No Pod: the API server refused to create it (the controller retries for ever).
        return items(events)
            .iter()
            .filter(|e| e["reason"] == "FailedCreate")
            .filter(|e| {
                waited.creates_pods(
                    e["involvedObject"]["kind"].as_str().unwrap_or_default(),
                    e["involvedObject"]["name"].as_str().unwrap_or_default(),
                )
            })
            .max_by_key(|e| e["lastTimestamp"].as_str().unwrap_or_default().to_string())
            .map(failed_create);
    }
    own.iter().find_map(|p| pod_stuck(p, events))
}

fn object(e: &Value) -> String {
    format!(
        "{}/{}",
        e["involvedObject"]["kind"].as_str().unwrap_or("?"),
        e["involvedObject"]["name"].as_str().unwrap_or("?")
    )
}

/// A `FailedCreate` event, with the fix its message calls for.
fn failed_create(e: &Value) -> Stuck {
    let message = e["message"].as_str().unwrap_or_default();
    let fix = if message.contains("RuntimeClass") {
        "create the RuntimeClass that agent.runtime_class names on this cluster (with its node handler, e.g. gVisor's runsc), or remove agent.runtime_class from the spec"
    } else if message.contains("PodSecurity") {
        "cyclix's Pods meet the `restricted` Pod Security Standard: look for a stricter admission policy in this namespace (its message names the field) and exempt the run's Pods or use another namespace"
    } else if message.contains("exceeded quota") || message.contains("failed quota") {
        "raise the namespace's ResourceQuota (`kubectl describe resourcequota`) or lower agent.resources / the services' resources in the spec; runs of the same namespace share it"
    } else if message.contains("usage per Container")
        || message.contains("usage per Pod")
        || message.contains("LimitRange")
    {
        "make agent.resources (and the services' resources) fit the namespace's LimitRange (`kubectl describe limitrange`), or change the LimitRange"
    } else {
        "read the message: the API server refused the Pod (an admission policy of this cluster); the Job retries for ever, so the run ended here"
    };
    Stuck {
        object: object(e),
        reason: "FailedCreate".into(),
        message: printable(message),
        fix,
    }
}

/// Why one Pod will not run: unschedulable (unless it only waits for its claim to be
/// provisioned), or a container that cannot start.
fn pod_stuck(pod: &Value, events: &Value) -> Option<Stuck> {
    let name = pod["metadata"]["name"].as_str().unwrap_or("?");
    let statuses = ["initContainerStatuses", "containerStatuses"]
        .iter()
        .flat_map(|k| pod["status"][*k].as_array().map_or(&[][..], Vec::as_slice));
    for c in statuses {
        let w = &c["state"]["waiting"];
        let Some(reason) = w["reason"].as_str() else {
            continue;
        };
        if FATAL_WAITING.contains(&reason) {
            let fix = if reason.contains("Config") || reason == "CreateContainerError" {
                "a Secret or ConfigMap key the container takes is missing or the container's settings are refused: read the message, then `kubectl describe pod`"
            } else {
                "make the image available to the nodes: a `localhost/…` image is never pulled (load it into the nodes' runtime), another needs a registry the nodes reach and its pull Secret"
            };
            return Some(Stuck {
                object: format!(
                    "Pod/{name} (container {})",
                    c["name"].as_str().unwrap_or("?")
                ),
                reason: reason.into(),
                message: printable(w["message"].as_str().unwrap_or_default()),
                fix,
            });
        }
    }
    let conditions = pod["status"]["conditions"].as_array()?;
    let unschedulable = conditions.iter().find(|c| {
        c["type"] == "PodScheduled" && c["status"] == "False" && c["reason"] == "Unschedulable"
    })?;
    let message = unschedulable["message"].as_str().unwrap_or_default();
    if message.contains("PersistentVolumeClaim") {
        // Waiting for its claim: stuck only when the claim will never bind.
        let claims: Vec<&str> = pod["spec"]["volumes"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter_map(|v| v["persistentVolumeClaim"]["claimName"].as_str())
            .collect();
        return items(events)
            .iter()
            .filter(|e| {
                e["involvedObject"]["kind"] == "PersistentVolumeClaim"
                    && matches!(e["reason"].as_str(), Some("FailedBinding" | "ProvisioningFailed"))
                    && e["involvedObject"]["name"]
                        .as_str()
                        .is_some_and(|n| claims.contains(&n))
            })
            .max_by_key(|e| e["lastTimestamp"].as_str().unwrap_or_default().to_string())
            .map(|e| Stuck {
                object: object(e),
                reason: e["reason"].as_str().unwrap_or_default().into(),
                message: printable(e["message"].as_str().unwrap_or_default()),
                fix: "give the cluster a default StorageClass with a provisioner (or name one: the work claim takes the default), or make a PersistentVolume that fits the claim's size (--work-size)",
            });
    }
    // A cluster autoscaler that is adding a node for it says so on the Pod: wait for it.
    let scaling = items(events).iter().any(|e| {
        e["reason"] == "TriggeredScaleUp"
            && e["involvedObject"]["kind"] == "Pod"
            && e["involvedObject"]["name"] == name
    });
    if scaling {
        return None;
    }
    Some(Stuck {
        object: format!("Pod/{name}"),
        reason: "Unschedulable".into(),
        message: printable(message),
        fix: "no node can take the Pod: free or add nodes that fit its requests (agent.resources, the services' resources) and match its runtime class; `kubectl describe pod` names each node's reason",
    })
}

/// A container of a Job's Pod that ended with a non-zero exit: the Pod, the container, whether
/// it is an init container (the agent never started), the exit code and the kubelet's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedContainer {
    /// The Pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// An init container (a step before the Pod's main container, or a sidecar).
    pub init: bool,
    /// Its exit code.
    pub exit: i64,
    /// The kubelet's reason (`Error`, `OOMKilled`, …).
    pub reason: String,
}

/// The first container of `job`'s Pods (in `pods`, a `PodList`) that exited non-zero: init
/// containers first, in their order.
#[must_use]
pub fn failed_container(job: &str, pods: &Value) -> Option<FailedContainer> {
    items(pods)
        .iter()
        .filter(|p| {
            JOB_NAME_LABELS
                .iter()
                .any(|l| p["metadata"]["labels"][*l] == job)
        })
        .find_map(|p| {
            [
                ("initContainerStatuses", true),
                ("containerStatuses", false),
            ]
            .iter()
            .find_map(|(key, init)| {
                p["status"][*key].as_array()?.iter().find_map(|c| {
                    let t = &c["state"]["terminated"];
                    let exit = t["exitCode"].as_i64()?;
                    (exit != 0).then(|| FailedContainer {
                        pod: p["metadata"]["name"].as_str().unwrap_or("?").to_string(),
                        container: c["name"].as_str().unwrap_or("?").to_string(),
                        init: *init,
                        exit,
                        reason: t["reason"].as_str().unwrap_or_default().to_string(),
                    })
                })
            })
        })
}

#[cfg(test)]
mod tests;
