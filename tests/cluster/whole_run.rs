//! The whole run on the cluster: `cyclix kube-run` with the kubectl adapter — the proxy, the
//! agent Job whose probe suite (profile `kubernetes`) passes before the agent commits, the
//! gate, the collectors, the import, every object deleted. Needs nodes that run Pods, the
//! runner and agent images on them (`CYCLIX_KUBE_RUNNER_IMAGE`, `CYCLIX_KUBE_AGENT_IMAGE`),
//! a default `StorageClass` and a CNI that enforces `NetworkPolicy`. On a control plane without
//! nodes it fails at once, naming the scheduler's reason (which is what it should do there).

use crate::kit::{Namespace, Tenant, kube_run, left, record, run_id};

#[test]
fn a_whole_run_passes_on_the_cluster_and_leaves_nothing() {
    let ns = Namespace::new("whole", &["pod-security.kubernetes.io/enforce=restricted"]);
    let tenant = Tenant::new(
        "suite-whole",
        "echo hello > hello.txt && git add hello.txt && git -c user.name=a -c user.email=a@a commit -qm agent-says-hello",
        "",
    );
    let run = run_id("wr");
    let o = kube_run(&tenant, &ns, &run);
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let rec = record(&tenant, &run);
    assert_eq!(rec["result"], "passed", "{out}");
    assert!(
        rec["probes"]
            .as_array()
            .is_some_and(|p| !p.is_empty() && p.iter().all(|p| p["verdict"] == "PASS")),
        "{out}"
    );
    assert_eq!(rec["import"]["outcome"], "imported", "{out}");
    assert_eq!(rec["commits"][0]["subject"], "agent-says-hello", "{out}");
    assert_eq!(left(&ns, &run), "", "{out}");
}
