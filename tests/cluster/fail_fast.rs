//! A run ends at once, with the cluster's reason and its fix, when the cluster will not run
//! its Pods — never at a Job's deadline — and nothing of it is left. Through the whole
//! `cyclix kube-run` (the proxy's Pods refused by a `ResourceQuota`, by a `LimitRange`) and
//! through the adapter's wait on the agent Job (a RuntimeClass that does not exist, a Pod
//! no node can take, a work claim no volume will bind).

use std::sync::Arc;
use std::time::Duration;

use cyclix::cluster::Cluster as _;
use cyclix::cluster::kubectl::Kubectl;
use serde_json::{Value, json};

use crate::kit::{Namespace, Tenant, exported, kube_run, left, record, run_id};

/// `kube-run` in `ns` fails in phase `proxy-ready` with `says` in its error, the fix named,
/// not at the deadline, and leaves nothing.
fn run_refused(ns: &Namespace, tenant: &Tenant, run: &str, says: &str) {
    let o = kube_run(tenant, ns, run);
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(2), "{out}");
    let rec = record(tenant, run);
    assert_eq!(rec["result"], "error", "{out}");
    assert_eq!(rec["failed_phase"], "proxy-ready", "{out}");
    let error = rec["error"].as_str().unwrap_or_default();
    assert!(error.contains(says) && error.contains("fix: "), "{error}");
    assert!(!error.contains("did not end within"), "{error}");
    assert_eq!(rec["leftovers"], json!([]), "{out}");
    assert_eq!(left(ns, run), "", "{out}");
}

#[test]
fn a_resource_quota_that_refuses_the_pods_ends_the_run_at_once_naming_it() {
    let ns = Namespace::new("quota", &[]);
    ns.kubectl_ok(&["create", "quota", "no-pods", "--hard=pods=0"], None);
    let tenant = Tenant::new("suite-quota", "true", "");
    run_refused(&ns, &tenant, &run_id("qu"), "exceeded quota");
}

#[test]
fn a_limit_range_that_refuses_the_pods_ends_the_run_at_once_naming_it() {
    let ns = Namespace::new("limits", &[]);
    // A Pod-wide maximum: with no default for Pods, the API server refuses every Pod over it
    // (a Container `min` alone would be applied as the default request and admitted).
    let lr = json!({
        "apiVersion": "v1", "kind": "LimitRange", "metadata": { "name": "tiny-pods" },
        "spec": { "limits": [{ "type": "Pod", "max": { "memory": "1Mi" } }] },
    });
    ns.kubectl_ok(
        &["create", "-f", "-"],
        Some(&serde_json::to_vec(&lr).expect("json")),
    );
    let tenant = Tenant::new("suite-limits", "true", "");
    run_refused(
        &ns,
        &tenant,
        &run_id("lr"),
        "maximum memory usage per Pod is 1Mi",
    );
}

/// Creates the agent stage of `tenant`'s export (its run ConfigMap, work claim and agent Job,
/// `change`d) in `ns` with the runner's adapter, waits for the Job and returns the wait's
/// error; then deletes and audits the run.
fn agent_wait_error(ns: &Namespace, tenant: &Tenant, change: impl Fn(&mut Value)) -> String {
    let run = run_id("ag");
    let objects: Vec<Value> = exported(tenant, &run)
        .into_iter()
        .filter(|(f, _)| {
            matches!(
                f.as_str(),
                "run/run-configmap.yaml" | "run/work-pvc.yaml" | "run/agent-job.yaml"
            )
        })
        .map(|(_, mut o)| {
            change(&mut o);
            o
        })
        .collect();
    assert_eq!(objects.len(), 3);
    let k = Kubectl::new(Some(ns.0.clone()), &run, Arc::default());
    k.apply(&objects).expect("apply");
    // Its own deadline would be an hour: the cluster's reason must end it first.
    let e = k
        .wait_job(
            &format!("cyclix-{run}-agent"),
            "agent",
            Duration::from_secs(3600),
        )
        .expect_err("the agent Job cannot run here");
    let e = format!("{e:#}");
    k.delete_run(&run, &[]).expect("delete");
    assert_eq!(k.leftovers(&run, &[]).expect("audit"), Vec::<String>::new());
    e
}

#[test]
fn a_runtime_class_the_cluster_does_not_have_ends_the_wait_naming_it() {
    let ns = Namespace::new("runtimeclass", &[]);
    let tenant = Tenant::new("suite-rc", "true", "");
    let e = agent_wait_error(&ns, &tenant, |o| {
        if o["kind"] == "Job" {
            o["spec"]["template"]["spec"]["runtimeClassName"] = json!("cyclix-suite-absent");
        }
    });
    assert!(
        e.contains("FailedCreate")
            && e.contains("RuntimeClass")
            && e.contains("fix: create the RuntimeClass"),
        "{e}"
    );
}

#[test]
fn a_pod_no_node_can_take_ends_the_wait_as_unschedulable() {
    let ns = Namespace::new("unschedulable", &[]);
    let tenant = Tenant::new("suite-sched", "true", "");
    let e = agent_wait_error(&ns, &tenant, |o| {
        if o["kind"] == "Job" {
            o["spec"]["template"]["spec"]["nodeSelector"] =
                json!({ "cyclix-suite/no-such-node": "x" });
        }
    });
    assert!(
        e.contains("Unschedulable") && e.contains("fix: no node can take the Pod"),
        "{e}"
    );
}

#[test]
fn a_work_claim_no_volume_will_bind_ends_the_wait_naming_the_claim() {
    let ns = Namespace::new("claim", &[]);
    let tenant = Tenant::new("suite-claim", "true", "");
    let nodes = crate::kit::kubectl_ok(&["get", "nodes", "-o", "name"], None);
    let e = agent_wait_error(&ns, &tenant, |o| {
        if o["kind"] == "PersistentVolumeClaim" {
            o["spec"]["storageClassName"] = json!("cyclix-suite-absent");
        }
    });
    if nodes.trim().is_empty() {
        // No node at all: the scheduler says so before any claim matters.
        assert!(
            e.contains("Unschedulable") && e.contains("0/0 nodes"),
            "{e}"
        );
    } else {
        assert!(
            e.contains("PersistentVolumeClaim/") && e.contains("StorageClass"),
            "{e}"
        );
    }
}
