//! The cluster's words as the API returns them (the messages are a real kube-apiserver's,
//! scheduler's and kubelet's; see docs/kubernetes.md for the versions).

use serde_json::{Value, json};

use super::*;

fn event(kind: &str, name: &str, reason: &str, message: &str, at: &str) -> Value {
    json!({
        "kind": "Event",
        "type": "Warning",
        "involvedObject": { "kind": kind, "name": name },
        "reason": reason,
        "message": message,
        "lastTimestamp": at,
    })
}

fn list(items: Vec<Value>) -> Value {
    let mut v = json!({ "kind": "List" });
    v["items"] = Value::Array(items);
    v
}

fn pod(name: &str, status: Value) -> Value {
    let job = name.rsplit_once('-').map_or(name, |(j, _)| j);
    let v = json!({
        "metadata": { "name": name, "labels": { "batch.kubernetes.io/job-name": job } },
        "spec": { "volumes": [
            { "name": "work", "persistentVolumeClaim": { "claimName": "cyclix-r1-work" } },
            { "name": "run", "configMap": { "name": "cyclix-r1-run" } },
        ] },
    });
    let mut v = v;
    v["status"] = status;
    v
}

fn unschedulable(message: &str) -> Value {
    json!({ "phase": "Pending", "conditions": [
        { "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message },
    ] })
}

#[test]
fn a_refused_pod_creation_names_its_reason_and_fix_while_the_job_has_no_pod() {
    let none = list(vec![]);
    for (message, fix_says) in [
        (
            r#"Error creating: pods "cyclix-r1-agent-" is forbidden: pod rejected: RuntimeClass "gvisor" not found"#,
            "agent.runtime_class",
        ),
        (
            r#"Error creating: pods "cyclix-r1-agent-x7k2p" is forbidden: violates PodSecurity "restricted:latest": seccompProfile (pod or container "agent" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
            "restricted",
        ),
        (
            r#"Error creating: pods "cyclix-r1-agent-4sd8f" is forbidden: exceeded quota: compute, requested: limits.memory=2Gi, used: limits.memory=0, limited: limits.memory=1Gi"#,
            "ResourceQuota",
        ),
        (
            r#"Error creating: pods "cyclix-r1-agent-4sd8f" is forbidden: maximum memory usage per Container is 1Gi, but limit is 2Gi"#,
            "LimitRange",
        ),
        (
            r#"Error creating: pods "cyclix-r1-agent-4sd8f" is forbidden: admission webhook "deny.example" denied the request"#,
            "admission policy",
        ),
    ] {
        let events = list(vec![
            event(
                "Job",
                "cyclix-r1-agent",
                "FailedCreate",
                message,
                "2026-12-07T14:00:01Z",
            ),
            // Another run's Job of a name that starts the same: not this one's.
            event(
                "Job",
                "cyclix-r1-agent-2",
                "FailedCreate",
                "other",
                "2026-12-07T14:00:09Z",
            ),
        ]);
        let s = why_stuck(Waited::Job("cyclix-r1-agent"), &none, &events).expect(message);
        assert_eq!(s.object, "Job/cyclix-r1-agent");
        assert_eq!(s.reason, "FailedCreate");
        assert_eq!(s.message, message);
        assert!(s.fix.contains(fix_says), "{message}: {}", s.fix);
        assert!(s.to_string().contains("fix: "), "{s}");
        // Once the Job has a Pod, an old refusal is history: not stuck.
        let pods = list(vec![pod(
            "cyclix-r1-agent-abcde",
            json!({ "phase": "Running" }),
        )]);
        assert_eq!(
            why_stuck(Waited::Job("cyclix-r1-agent"), &pods, &events),
            None
        );
    }
    // A Deployment's Pods are its ReplicaSet's: the proxy's refusal is seen there.
    let events = list(vec![event(
        "ReplicaSet",
        "cyclix-r1-proxy-7d9f8c6b5",
        "FailedCreate",
        "Error creating: pods \"cyclix-r1-proxy-7d9f8c6b5-\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=10, limited: pods=10",
        "2026-12-07T14:00:01Z",
    )]);
    let s = why_stuck(Waited::Deployment("cyclix-r1-proxy"), &none, &events).expect("rs");
    assert_eq!(s.object, "ReplicaSet/cyclix-r1-proxy-7d9f8c6b5");
    // The same event says nothing about a Job of the run.
    assert_eq!(
        why_stuck(Waited::Job("cyclix-r1-agent"), &none, &events),
        None
    );
    // Control: no event, no Pod yet (the controller has not got to it): keep waiting.
    assert_eq!(
        why_stuck(Waited::Job("cyclix-r1-agent"), &none, &none),
        None
    );
}

#[test]
fn an_unschedulable_pod_is_stuck_unless_it_only_waits_for_a_claim_being_provisioned() {
    let none = list(vec![]);
    let pods = list(vec![pod(
        "cyclix-r1-agent-abcde",
        unschedulable("0/0 nodes are available: no nodes available to schedule pods."),
    )]);
    let s = why_stuck(Waited::Job("cyclix-r1-agent"), &pods, &none).expect("unschedulable");
    assert_eq!(s.reason, "Unschedulable");
    assert_eq!(s.object, "Pod/cyclix-r1-agent-abcde");
    assert!(s.message.contains("0/0 nodes"), "{s}");
    // A cluster autoscaler adding a node for it (the words of cluster-autoscaler's event):
    // on its way, not stuck.
    let scaling = list(vec![event(
        "Pod",
        "cyclix-r1-agent-abcde",
        "TriggeredScaleUp",
        "pod triggered scale-up: [{pool-1 1->2 (max: 5)}]",
        "2026-12-07T14:00:02Z",
    )]);
    assert_eq!(
        why_stuck(Waited::Job("cyclix-r1-agent"), &pods, &scaling),
        None
    );
    // Waiting for its claim: not stuck while the claim is provisioned …
    let pods = list(vec![pod(
        "cyclix-r1-agent-abcde",
        unschedulable(
            "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        ),
    )]);
    assert_eq!(
        why_stuck(Waited::Job("cyclix-r1-agent"), &pods, &none),
        None
    );
    // … another claim's failure is not this Pod's …
    let other = list(vec![event(
        "PersistentVolumeClaim",
        "cyclix-r9-work",
        "FailedBinding",
        "no persistent volumes available for this claim and no storage class is set",
        "2026-12-07T14:00:01Z",
    )]);
    assert_eq!(
        why_stuck(Waited::Job("cyclix-r1-agent"), &pods, &other),
        None
    );
    // … but stuck when its own claim cannot bind.
    let events = list(vec![event(
        "PersistentVolumeClaim",
        "cyclix-r1-work",
        "FailedBinding",
        "no persistent volumes available for this claim and no storage class is set",
        "2026-12-07T14:00:01Z",
    )]);
    let s = why_stuck(Waited::Job("cyclix-r1-agent"), &pods, &events).expect("claim");
    assert_eq!(s.object, "PersistentVolumeClaim/cyclix-r1-work");
    assert_eq!(s.reason, "FailedBinding");
    assert!(s.fix.contains("StorageClass"), "{s}");
    // Control: a scheduled, running Pod is not stuck.
    let pods = list(vec![pod(
        "cyclix-r1-agent-abcde",
        json!({ "phase": "Running", "conditions": [{ "type": "PodScheduled", "status": "True" }] }),
    )]);
    assert_eq!(
        why_stuck(Waited::Job("cyclix-r1-agent"), &pods, &events),
        None
    );
}

#[test]
fn a_container_that_cannot_start_is_stuck_and_one_that_is_starting_is_not() {
    let none = list(vec![]);
    let waiting = |reason: &str, message: &str, key: &str| {
        let mut status = json!({ "phase": "Pending" });
        status[key] = json!([
            { "name": "cyclix-bin", "state": { "terminated": { "exitCode": 0 } } },
            { "name": "repo", "state": { "waiting": { "reason": reason, "message": message } } },
        ]);
        list(vec![pod("cyclix-r1-agent-abcde", status)])
    };
    for (reason, says) in [
        ("ErrImageNeverPull", "localhost/"),
        ("ImagePullBackOff", "registry"),
        ("ErrImagePull", "registry"),
        ("InvalidImageName", "registry"),
        ("CreateContainerConfigError", "Secret or ConfigMap"),
    ] {
        for key in ["initContainerStatuses", "containerStatuses"] {
            let pods = waiting(
                reason,
                "Container image \"localhost/runner:x\" is not present with pull policy of Never",
                key,
            );
            let s = why_stuck(Waited::Job("cyclix-r1-agent"), &pods, &none).expect(reason);
            assert_eq!(s.reason, reason);
            assert_eq!(s.object, "Pod/cyclix-r1-agent-abcde (container repo)");
            assert!(s.fix.contains(says), "{reason}: {}", s.fix);
        }
    }
    // Control: a container being created or started is on its way.
    for reason in ["PodInitializing", "ContainerCreating"] {
        let pods = waiting(reason, "", "initContainerStatuses");
        assert_eq!(
            why_stuck(Waited::Job("cyclix-r1-agent"), &pods, &none),
            None
        );
    }
    // Another Job's Pod is not this Job's.
    let pods = waiting("ErrImageNeverPull", "", "containerStatuses");
    assert_eq!(why_stuck(Waited::Job("cyclix-r1-gate"), &pods, &none), None);
}

#[test]
fn the_container_that_failed_a_job_is_found_init_containers_first() {
    let status = json!({
        "phase": "Failed",
        "initContainerStatuses": [
            { "name": "cyclix-bin", "state": { "terminated": { "exitCode": 0, "reason": "Completed" } } },
            { "name": "repo", "state": { "terminated": { "exitCode": 128, "reason": "Error" } } },
        ],
        "containerStatuses": [
            { "name": "agent", "state": { "waiting": { "reason": "PodInitializing" } } },
        ],
    });
    let pods = list(vec![pod("cyclix-r1-agent-abcde", status)]);
    let f = failed_container("cyclix-r1-agent", &pods).expect("failed");
    assert_eq!(
        f,
        FailedContainer {
            pod: "cyclix-r1-agent-abcde".into(),
            container: "repo".into(),
            init: true,
            exit: 128,
            reason: "Error".into(),
        }
    );
    // The main container that failed, after every init step passed.
    let status = json!({
        "phase": "Failed",
        "initContainerStatuses": [
            { "name": "repo", "state": { "terminated": { "exitCode": 0 } } },
        ],
        "containerStatuses": [
            { "name": "agent", "state": { "terminated": { "exitCode": 1, "reason": "Error" } } },
        ],
    });
    let pods = list(vec![pod("cyclix-r1-agent-abcde", status)]);
    let f = failed_container("cyclix-r1-agent", &pods).expect("failed");
    assert!(!f.init && f.container == "agent" && f.exit == 1, "{f:?}");
    // Another Job's Pod, or nothing failed: none.
    assert_eq!(failed_container("cyclix-r1-gate", &pods), None);
    let ok = list(vec![pod(
        "cyclix-r1-agent-abcde",
        json!({ "containerStatuses": [{ "name": "agent", "state": { "terminated": { "exitCode": 0 } } }] }),
    )]);
    assert_eq!(failed_container("cyclix-r1-agent", &ok), None);
}
