//! What the API server admits: every Pod cyclix makes in a namespace that enforces the
//! `restricted` Pod Security Standard (and a Pod that breaks it refused there: the control),
//! and the runner's Role — enough to create every object of a run, and no Secret listing.

use serde_json::{Value, json};

use crate::kit::{Namespace, Tenant, exported, run_id};

/// Every Pod template of `objects` (Jobs, Deployments, the CronJob's Job) as a Pod.
fn pods(objects: &[(String, Value)]) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (file, o) in objects {
        let spec = match o["kind"].as_str() {
            Some("Job" | "Deployment") => &o["spec"]["template"]["spec"],
            Some("CronJob") => &o["spec"]["jobTemplate"]["spec"]["template"]["spec"],
            _ => continue,
        };
        let name = format!("suite-{}", o["metadata"]["name"].as_str().expect("name"));
        out.push((
            file.clone(),
            json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name }, "spec": spec }),
        ));
    }
    out
}

#[test]
fn a_restricted_namespace_accepts_every_pod_cyclix_makes_and_refuses_one_that_breaks_it() {
    let ns = Namespace::new(
        "restricted",
        &[
            "pod-security.kubernetes.io/enforce=restricted",
            "pod-security.kubernetes.io/warn=restricted",
        ],
    );
    let tenant = Tenant::new(
        "suite-ps",
        "true",
        "schedule: { on_calendar: \"*-*-* 02:30\" }\nservices:\n  - { name: cache, image: localhost/cyclix-agent-python:latest, unpinned_local_image: true, command: [sleep, infinity] }\n",
    );
    let objects = exported(&tenant, &run_id("ps"));
    // The runner's Pod names its ServiceAccount, which must exist for the Pod to be admitted.
    let (_, sa) = objects
        .iter()
        .find(|(f, _)| f == "schedule/runner-serviceaccount.yaml")
        .expect("the runner's ServiceAccount");
    ns.kubectl_ok(
        &["create", "-f", "-"],
        Some(&serde_json::to_vec(sa).expect("json")),
    );
    let pods = pods(&objects);
    // The proxy, agent, gate, collector and runner Pods.
    assert_eq!(pods.len(), 5, "{pods:?}");
    for (file, pod) in &pods {
        let body = serde_json::to_vec(pod).expect("json");
        let o = ns.kubectl(&["create", "--dry-run=server", "-f", "-"], Some(&body));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{file}: {stderr}");
        // Not even a warning of the `restricted` level.
        assert!(!stderr.contains("Warning"), "{file}: {stderr}");
    }
    // Control: the agent's Pod with one field the standard forbids is refused there.
    let (_, agent) = pods
        .iter()
        .find(|(f, _)| f == "run/agent-job.yaml")
        .expect("agent");
    let mut bad = agent.clone();
    bad["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = json!(true);
    let o = ns.kubectl(
        &["create", "--dry-run=server", "-f", "-"],
        Some(&serde_json::to_vec(&bad).expect("json")),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && stderr.contains("violates PodSecurity \"restricted"),
        "{stderr}"
    );
}

#[test]
fn the_runners_role_creates_every_object_of_a_run_and_cannot_list_secrets() {
    let ns = Namespace::new("rbac", &[]);
    let tenant = Tenant::new("suite-rbac", "true", "");
    let run = run_id("rb");
    let objects = exported(&tenant, &run);
    // The runner's ServiceAccount, Role and RoleBinding, made by an admin.
    for (file, o) in objects
        .iter()
        .filter(|(f, _)| f.starts_with("schedule/runner-"))
    {
        let body = serde_json::to_vec(o).expect("json");
        let out = ns.kubectl_ok(&["create", "-f", "-"], Some(&body));
        assert!(!out.is_empty(), "{file}");
    }
    let runner = format!(
        "--as=system:serviceaccount:{}:cyclix-suite-rbac-runner",
        ns.0
    );
    // Every object of the run (the Secrets too, with placeholders), as the runner.
    let run_objects: Vec<&Value> = objects
        .iter()
        .filter(|(f, _)| f.starts_with("run/"))
        .map(|(_, o)| o)
        .collect();
    let mut all: Vec<Value> = run_objects.into_iter().cloned().collect();
    all.push(json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": format!("cyclix-{run}-env") }, "stringData": { "K": "v" } }));
    all.push(json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": format!("cyclix-{run}-repo-1") }, "binaryData": { "repo.bundle": "AAAA" } }));
    let list = json!({ "apiVersion": "v1", "kind": "List", "items": all });
    let o = ns.kubectl(
        &[&runner, "create", "--dry-run=server", "-f", "-"],
        Some(&serde_json::to_vec(&list).expect("json")),
    );
    assert!(
        o.status.success(),
        "the runner cannot create a run's objects: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // What a wait reads: the run's Pods, the namespace's events, a Job's log subresource.
    for args in [
        vec!["get", "pods"],
        vec!["get", "events"],
        vec!["auth", "can-i", "get", "pods/log"],
        vec!["auth", "can-i", "list", "jobs.batch"],
    ] {
        let mut full = vec![runner.as_str()];
        full.extend(args.iter());
        let o = ns.kubectl(&full, None);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // Refused: listing Secrets (every value of the namespace), exec, patching.
    for args in [
        vec!["get", "secrets"],
        vec!["auth", "can-i", "create", "pods/exec"],
        vec!["auth", "can-i", "patch", "jobs.batch"],
        vec!["auth", "can-i", "list", "secrets", "--all-namespaces"],
    ] {
        let mut full = vec![runner.as_str()];
        full.extend(args.iter());
        let o = ns.kubectl(&full, None);
        assert!(
            !o.status.success(),
            "{args:?} was allowed: {}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    // Control: an admin lists the namespace's Secrets.
    ns.kubectl_ok(&["get", "secrets"], None);
}

#[test]
fn the_cronjob_fires_a_runner_job() {
    let ns = Namespace::new("cron", &[]);
    let tenant = Tenant::new(
        "suite-cron",
        "true",
        "schedule: { on_calendar: \"*-*-* 02:30\" }\n",
    );
    let objects = exported(&tenant, &run_id("cr"));
    let mut schedule: Vec<Value> = objects
        .iter()
        .filter(|(f, _)| f.starts_with("schedule/"))
        .map(|(_, o)| o.clone())
        .collect();
    // The exported CronJob as it is, but every minute (a spec may not run more often than
    // every 5 minutes): its next fire is at most 60 s away.
    for o in &mut schedule {
        if o["kind"] == "CronJob" {
            assert_eq!(o["spec"]["schedule"], "30 2 * * *");
            o["spec"]["schedule"] = json!("* * * * *");
        }
    }
    assert!(
        schedule.iter().any(|o| o["kind"] == "CronJob"),
        "{schedule:?}"
    );
    let list = json!({ "apiVersion": "v1", "kind": "List", "items": schedule });
    ns.kubectl_ok(
        &["create", "-f", "-"],
        Some(&serde_json::to_vec(&list).expect("json")),
    );
    // The CronJob controller makes a Job owned by the CronJob (its Pod needs a node; the
    // firing does not): looked for every 2 s, at most 150 s (the next minute, and slack).
    let owned = |jobs: &Value| {
        jobs["items"].as_array().is_some_and(|items| {
            items.iter().any(|j| {
                j["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
                    && j["metadata"]["ownerReferences"][0]["name"] == "cyclix-suite-cron"
            })
        })
    };
    let mut jobs = Value::Null;
    for _ in 0..75 {
        jobs = serde_json::from_str(&ns.kubectl_ok(&["get", "jobs", "-o", "json"], None))
            .expect("json");
        if owned(&jobs) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    assert!(owned(&jobs), "no Job of the CronJob after 150 s: {jobs}");
}
