//! The run's NetworkPolicies. They are only as good as the cluster's CNI (one that enforces
//! NetworkPolicy) and additive: another policy selecting the same Pods can only widen them
//! ([`super::limits`]). Pure.
//!
//! - `cyclix-R-agent`: the agent Pod may send only to the run's proxy Pod on the proxy's ports
//!   (no DNS: it needs none, its proxy address comes from the Service's variables) and
//!   accepts nothing.
//! - `cyclix-R-proxy`: the proxy accepts only the run's agent Pod on its ports and may send
//!   to public addresses on `egress.ports` and to the cluster DNS.
//! - `cyclix-R-no-network`: the gate and the collector send and accept nothing.

use serde_json::{Value, json};

use super::Manifest;
use super::shared::{KubeNames, NO_NETWORK_LABEL, meta, selector};
use crate::naming::RunNames;
use crate::render::plan::RunPlan;
use crate::render::proxy::PRIVATE_RANGES;
use crate::spec::Spec;

fn tcp_ports(ports: &[u16]) -> Vec<Value> {
    ports
        .iter()
        .map(|p| json!({ "protocol": "TCP", "port": p }))
        .collect()
}

/// The proxy's egress: public addresses (IPv4 and IPv6, less [`PRIVATE_RANGES`]) on
/// `egress.ports` — no such rule when the list is empty, since a rule without ports would
/// allow every port — and the cluster DNS (the proxy resolves; the agent does not).
fn proxy_egress(spec: &Spec) -> Vec<Value> {
    let v4_private: Vec<&str> = PRIVATE_RANGES
        .iter()
        .copied()
        .filter(|r| !r.contains(':'))
        .collect();
    let v6_private: Vec<&str> = PRIVATE_RANGES
        .iter()
        .copied()
        .filter(|r| r.contains(':'))
        .collect();
    let mut rules = Vec::new();
    if !spec.egress.ports.is_empty() {
        rules.push(json!({
            "to": [
                { "ipBlock": { "cidr": "0.0.0.0/0", "except": v4_private } },
                { "ipBlock": { "cidr": "::/0", "except": v6_private } },
            ],
            "ports": tcp_ports(&spec.egress.ports),
        }));
    }
    rules.push(json!({
        "to": [{
            "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": "kube-system" } },
            "podSelector": { "matchLabels": { "k8s-app": "kube-dns" } },
        }],
        "ports": [
            { "protocol": "UDP", "port": 53 },
            { "protocol": "TCP", "port": 53 },
        ],
    }));
    rules
}

/// The three policies.
#[must_use]
pub fn manifests(spec: &Spec, plan: &RunPlan) -> Vec<Manifest> {
    let names = KubeNames(RunNames::new(&plan.run_id));
    let proxy_ports = super::proxy::ports(spec);
    let agent = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(plan, &names.role("agent"), "agent"),
        "spec": {
            "podSelector": selector(plan, "agent"),
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [{
                "to": [{ "podSelector": selector(plan, "proxy") }],
                "ports": tcp_ports(&proxy_ports),
            }],
        },
    });
    let proxy = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(plan, &names.role("proxy"), "proxy"),
        "spec": {
            "podSelector": selector(plan, "proxy"),
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{
                "from": [{ "podSelector": selector(plan, "agent") }],
                "ports": tcp_ports(&proxy_ports),
            }],
            "egress": proxy_egress(spec),
        },
    });
    let none = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": meta(plan, &names.role("no-network"), "gate"),
        "spec": {
            "podSelector": { "matchLabels": {
                crate::naming::label::RUN: plan.run_id,
                NO_NETWORK_LABEL: "none",
            } },
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [],
            "egress": [],
        },
    });
    vec![
        Manifest {
            file: "run/netpol-agent.yaml".into(),
            object: agent,
        },
        Manifest {
            file: "run/netpol-proxy.yaml".into(),
            object: proxy,
        },
        Manifest {
            file: "run/netpol-no-network.yaml".into(),
            object: none,
        },
    ]
}
