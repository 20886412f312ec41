//! What Kubernetes does not enforce the way Podman does, printed with every `cyclix export
//! kube` and by `cyclix tier describe` (issue 17, item 4). Pure data.

/// One line each.
pub const NOT_ENFORCED: &[&str] = &[
    "NetworkPolicy is enforced only by a CNI that implements it (Calico, Cilium, …; kind's default kindnet and flannel do not): without one the agent reaches anything",
    "NetworkPolicies are additive: any other policy that selects the run's Pods (a namespace default, a chart's) can only WIDEN what they may reach; keep the run's namespace free of others",
    "a denied connection is usually DROPPED, not refused: the probe profile `kubernetes` counts no answer within 1 s as denied (cyclix tier describe)",
    "`podman kube play` (the single-host proof) ignores NetworkPolicy, runtimeClassName, seccompProfile, runAsNonRoot, dnsPolicy and automountServiceAccountToken: there the network boundary is the podman network it is played on",
    "no user namespace by default: the agent's uid is a real uid on the node unless the cluster enables `hostUsers: false`",
    "agent.resources.pids has no Pod field: the node's kubelet `podPidsLimit` bounds processes",
    "the Pods see every Service of their namespace as variables (enableServiceLinks, needed for the proxy's address): give each tenant its own namespace",
    "a local image (`localhost/…`, imagePullPolicy Never) must already be on every node",
];

#[cfg(test)]
mod tests {
    #[test]
    fn names_the_cni_the_additivity_and_the_drop() {
        let all = super::NOT_ENFORCED.join("\n");
        for w in ["CNI", "additive", "DROPPED", "podman kube play"] {
            assert!(all.contains(w), "{w}");
        }
    }
}
