//! Probe profiles: which probes a sandbox runs and how a denial may look there.
//!
//! - [`Profile::Podman`] (the default): the full suite; every denial must be an immediate
//!   refusal with the exact errno (a timeout is "dropped, not rejected" and FAILs).
//! - [`Profile::Kubernetes`] (`cyclix export kube`, issue 17): a Pod always has a default route
//!   and NetworkPolicy implementations usually DROP what they deny, so a direct connection
//!   (N2, N4) that is refused **or gets no answer within the probe's short deadline**
//!   ([`DROP_DEADLINE`]) counts as denied, and a DNS query to a public resolver counts as
//!   denied when no reply comes back. The probes that compare against a Podman host's facts
//!   (the host user's namespaces, the run's podman subnet and gateway, podman-init, host
//!   tripwires) are left out, each with its reason ([`KUBERNETES_LEFT_OUT`]). Pure.

use serde::{Deserialize, Serialize};

/// The short deadline within which a denied attempt must have failed or stayed unanswered
/// under [`Profile::Kubernetes`] (the probes' own network deadline): a connection still
/// pending then is taken as dropped by the NetworkPolicy.
pub const DROP_DEADLINE: std::time::Duration = crate::probe::clients::NET_TIMEOUT;

/// Which sandbox the probes judge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// A cyclix pod under rootless Podman: the full suite, refusals only.
    #[default]
    Podman,
    /// A Kubernetes Pod (or `podman kube play` of one): the subset of
    /// [`KUBERNETES_PROBES`], a drop within [`DROP_DEADLINE`] counts as denied.
    Kubernetes,
    /// A cyclix pod whose agent runs on gVisor's kernel (tier `gvisor`): the subset of
    /// [`GVISOR_PROBES`]; where gVisor's kernel answers for itself (its own `/proc`, devices,
    /// user namespace and cgroupfs) the probe is left out with its reason
    /// ([`GVISOR_LEFT_OUT`]), and a few accept gVisor's own answer (each verdict says which).
    Gvisor,
}

/// The probes the gVisor profile runs, in suite order (P25 proves the kernel is gVisor's).
pub const GVISOR_PROBES: &[&str] = &[
    "P1", "P2", "P3", "P6", "P7", "P8", "P13", "P14", "P17", "P18", "P19", "P22", "P25", "N1",
    "N2", "N3", "N4", "N5", "N6", "N7", "N8", "N9", "N10", "N11", "N12", "N13", "N14", "N15",
    "N16", "N17", "E1",
];

/// The probes the gVisor profile leaves out, and why: each asks the host kernel something
/// that gVisor's kernel (the Sentry) answers with its own emulation, which the agent's code
/// never gets past to the host's.
pub const GVISOR_LEFT_OUT: &[(&str, &str)] = &[
    (
        "P4",
        "gVisor's kernel has no LSM (no /proc/self/attr); the host's LSM confines runsc itself",
    ),
    (
        "P5",
        "gVisor presents its own root user namespace (uid_map 0 0 4294967295); runsc runs in podman's rootless user namespace on the host",
    ),
    (
        "P9",
        "a user namespace made inside the sandbox is gVisor's, served by the Sentry: no host namespace code is reached",
    ),
    (
        "P10",
        "the device nodes are gVisor's own (its /dev/fuse, and mknod makes nodes of gVisor's devices), not the host's",
    ),
    (
        "P11",
        "gVisor's /proc and /sys have none of the host files podman masks (they are absent)",
    ),
    (
        "P12",
        "gVisor's /proc/sysrq-trigger is its own file: writing it reaches no host kernel knob",
    ),
    (
        "P15",
        "gVisor's mount table does not show nosuid/nodev on podman's tmpfs mounts",
    ),
    (
        "P16",
        "file ownership is seen through gVisor's identity user namespace (uid 0), not the host's mapping",
    ),
    (
        "P20",
        "the namespaces are gVisor's own (no cgroup namespace file); the sandbox's processes are listed by gVisor's kernel from the host instead (`runsc ps`)",
    ),
    (
        "P21",
        "gVisor mounts its own cgroupfs; runsc sets the container's limits on the host (or ignores them where the user manager delegates no controllers: the record says so)",
    ),
    (
        "P23",
        "the keyring syscalls are not implemented by gVisor (ENOSYS): there is no kernel keyring to read",
    ),
    (
        "P24",
        "the kernel log and symbols are gVisor's own (its synthetic boot log; no kallsyms): P25 reads them to prove the kernel is gVisor's",
    ),
];

/// The probes the Kubernetes profile runs, in suite order.
pub const KUBERNETES_PROBES: &[&str] = &[
    "P1", "P2", "P3", "P6", "P7", "P8", "P9", "P10", "P11", "P12", "P14", "P22", "P23", "P24",
    "N2", "N4", "N5", "N8", "N9", "N10", "N12", "N13", "N14", "N15", "N16",
];

/// The probes the Kubernetes profile leaves out, and why.
pub const KUBERNETES_LEFT_OUT: &[(&str, &str)] = &[
    (
        "P4",
        "the LSM is the node's (AppArmor/SELinux profile of the runtime), not cyclix's",
    ),
    (
        "P5",
        "Pods get no user namespace unless `hostUsers: false` and the node supports it",
    ),
    (
        "P13",
        "/sys and the cgroupfs mounts are the runtime's choice",
    ),
    (
        "P15",
        "scratch space is an emptyDir whose mount options are the kubelet's",
    ),
    (
        "P16",
        "the work tree is a volume owned through fsGroup, not the host user's bind mount",
    ),
    ("P17", "there is no user repository on the node to look for"),
    (
        "P18",
        "the mount table lists the kubelet's volumes (service account, hosts, termination log)",
    ),
    (
        "P19",
        "host sockets are the node's; no host path is mounted",
    ),
    (
        "P20",
        "no podman-init; the Pod's process count includes its sidecars",
    ),
    (
        "P21",
        "the cgroup limits come from `resources` and the kubelet's pids limit",
    ),
    (
        "N1",
        "a Pod always has a default route; NetworkPolicy, not routing, denies",
    ),
    ("N3", "IPv6 depends on the cluster"),
    (
        "N6",
        "there is no podman gateway; the node is reached only if a policy allows it",
    ),
    (
        "N7",
        "the Pod has no resolver (dnsPolicy None, nameserver 127.0.0.1); N2 checks public DNS",
    ),
    ("N11", "rebinding names need the testbed's DNS fixture"),
    (
        "N17",
        "the tunnel probe needs an allowlisted TLS host on 443",
    ),
    ("E1", "the host tripwires are planted on a Podman host only"),
    (
        "P25",
        "the node's kernel release is not known to the Pod (a RuntimeClass such as gVisor is the cluster's)",
    ),
];

impl Profile {
    /// The probe ids this profile runs (empty: all).
    #[must_use]
    pub fn probes(self) -> &'static [&'static str] {
        match self {
            Profile::Podman => &[],
            Profile::Kubernetes => KUBERNETES_PROBES,
            Profile::Gvisor => GVISOR_PROBES,
        }
    }

    /// A timeout of a direct connection counts as denied.
    #[must_use]
    pub fn drop_counts_as_denied(self) -> bool {
        self == Profile::Kubernetes
    }

    /// The profile in one paragraph, as `cyclix tier describe` and `cyclix export kube` print it.
    #[must_use]
    pub fn statement(self) -> String {
        match self {
            Profile::Podman => "probe profile `podman`: the full suite (P1–P25, N1–N17, E1); a denial must be an immediate refusal with the exact errno, a timeout FAILs; P25 states that the agent's kernel is the host's".to_string(),
            Profile::Gvisor => format!(
                "probe profile `gvisor`: {} probes ({}) as under podman, where P25 proves the agent's kernel is gVisor's (its release is not the host's and its log is gVisor's) and P1, P3, P7, P14, N15 accept gVisor's own answer where it differs (no CapAmb or Seccomp_filters line; ENOSYS, ENODEV or EOPNOTSUPP for a call gVisor does not implement; EACCES for a write to the read-only root or a netlink change); left out, gVisor's kernel answering for itself: {}",
                GVISOR_PROBES.len(),
                GVISOR_PROBES.join(" "),
                GVISOR_LEFT_OUT
                    .iter()
                    .map(|(id, _)| *id)
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Profile::Kubernetes => format!(
                "probe profile `kubernetes`: {} probes ({}) run in the agent Pod before the agent (the agent's command is `cyclix agent-wait --probe …`); NetworkPolicy usually drops instead of refusing, so there a direct connection (N2, N4) that is refused OR unanswered within {} ms counts as denied, and a DNS query to a public resolver counts as denied when no reply comes; left out: {}",
                KUBERNETES_PROBES.len(),
                KUBERNETES_PROBES.join(" "),
                DROP_DEADLINE.as_millis(),
                KUBERNETES_LEFT_OUT
                    .iter()
                    .map(|(id, _)| *id)
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_probe_is_run_or_left_out_with_a_reason_under_kubernetes() {
        for p in crate::probe::PROBES {
            let run = KUBERNETES_PROBES.contains(&p.id);
            let out = KUBERNETES_LEFT_OUT.iter().any(|(id, _)| *id == p.id);
            assert!(run ^ out, "{}: run={run} left_out={out}", p.id);
        }
        assert_eq!(
            KUBERNETES_PROBES.len() + KUBERNETES_LEFT_OUT.len(),
            crate::probe::PROBES.len()
        );
    }

    #[test]
    fn every_probe_is_run_or_left_out_with_a_reason_under_gvisor() {
        for p in crate::probe::PROBES {
            let run = GVISOR_PROBES.contains(&p.id);
            let out = GVISOR_LEFT_OUT.iter().any(|(id, _)| *id == p.id);
            assert!(run ^ out, "{}: run={run} left_out={out}", p.id);
        }
        assert_eq!(
            GVISOR_PROBES.len() + GVISOR_LEFT_OUT.len(),
            crate::probe::PROBES.len()
        );
        assert!(!Profile::Gvisor.drop_counts_as_denied());
    }

    #[test]
    fn only_kubernetes_counts_a_drop_as_denied_and_says_so() {
        assert!(Profile::Kubernetes.drop_counts_as_denied());
        assert!(!Profile::Podman.drop_counts_as_denied());
        assert!(
            Profile::Kubernetes
                .statement()
                .contains("unanswered within 1000 ms")
        );
        assert!(Profile::Podman.statement().contains("a timeout FAILs"));
    }
}
