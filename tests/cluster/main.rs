//! The cluster suite (issue 34): `cyclix kube-run`, its objects and its runner's rights
//! against a real Kubernetes cluster — the one `KUBECONFIG` names, with admin rights on it.
//! Not part of CI (no cluster is reachable there): `scripts/test-kube` runs it and refuses,
//! naming `KUBECONFIG`, without one. Every test makes its own namespace and deletes it.
//!
//! What needs only a control plane (an API server with its admission plugins, the controller
//! manager, the scheduler): the `restricted` Pod Security namespace accepting every Pod cyclix
//! makes, the runner's Role, the CronJob firing, and a run ending at once, with the cluster's
//! reason and its fix, when the cluster will not run its Pods. What needs nodes that run Pods
//! (a kubelet, the images loaded, a CNI that enforces NetworkPolicy): the whole run
//! (`whole_run`).

mod admission;
mod fail_fast;
mod kit;
mod whole_run;
