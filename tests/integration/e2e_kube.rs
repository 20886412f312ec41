//! The single-host proof of `cyclix export kube` (issue 17, item 6): the exported agent Pod
//! (its Job) and the egress proxy (its Deployment) run under `podman kube play` on the
//! testbed, the agent's probe suite (profile `kubernetes`, `agent-wait --probe`) passes inside
//! the Pod before the agent starts, and nothing of the run is left afterwards. The failure
//! mode: played without its proxy, the probes fail and the agent never starts.
//!
//! What stands in for a cluster here, and only here: podman has no Services, so the script
//! puts the proxy's fixed address where the kubelet would expand the Service variable
//! (`$(CYCLIX_R_PROXY_SERVICE_HOST)`); it creates the repository bundle's ConfigMap as the
//! runner would; and the network boundary is the run's internal podman network (kube play
//! ignores NetworkPolicy, docs/kubernetes.md). Everything runs in ONE `testbed.sh user` call:
//! the transient unit's end would stop the played Pods.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::common::run::demo_ready;
use crate::common::testbed::{Testbed, expect_success, shared};

/// The two plays run one at a time: played in parallel, the agent's `exec` of the cyclix
/// binary its init step had just copied failed in 2 of 5 parallel runs with `Text file busy`
/// (podman 5.4.2; never in 5 serial runs). `e2e_kube_run` takes the same lock.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

const TENANT: &str = "e2e-kube";

/// Exports a run `run` of the test tenant, plays the proxy (when `with_proxy`) and the agent
/// Job on the run's networks (internal subnet `10.214.OCTET.0/24`, outside the `10.213.0.0/16`
/// cyclix gives its runs — a run beside this test once held the same subnet — the proxy at
/// `.2`), waits
/// for the agent container, prints its log and exit status, and takes everything down.
fn play(tb: &Testbed, run: &str, octet: u8, with_proxy: bool) -> String {
    let c = tb.cyclix_bin();
    let var = format!(
        "{}_SERVICE_HOST",
        format!("cyclix-{run}-proxy")
            .to_ascii_uppercase()
            .replace('-', "_")
    );
    let proxy = if with_proxy {
        format!(
            "{{ cat out/secrets/credentials-secret.yaml; echo ---; cat out/run/proxy-configmap.yaml; echo ---; cat out/run/proxy-deployment.yaml; }} > proxy.yaml\n\
             timeout 60 podman kube play -q --network $NET:ip=10.214.{octet}.2 --network $NET-egress proxy.yaml >/dev/null"
        )
    } else {
        String::new()
    };
    let script = format!(
        r#"set -u
R={run}; T={TENANT}; NET=cyclix-$R; W=$(mktemp -d); cd $W
KEY=kube-e2e-secret-value-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
down() {{
  cd $W
  for y in agent.yaml proxy.yaml; do [ -f $y ] && timeout 60 podman kube down --force $y >/dev/null 2>&1; done
  podman network rm -f $NET $NET-egress >/dev/null 2>&1
  # The ConfigMaps' volumes, which `kube down` leaves (the runner's teardown removes them).
  podman volume ls -q --filter name=$NET- | xargs -r podman volume rm -f >/dev/null
  cd /; rm -rf $W
}}
trap down EXIT
b=$(mktemp -d); cp {c} $b/cyclix
podman image exists localhost/cyclix-runner:e2e-{run} || podman build -q --build-arg KUBECTL=no -t localhost/cyclix-runner:e2e-{run} -f /src/images/runner/Containerfile $b >/dev/null
rm -rf $b
cat > spec.yaml <<'Y'
tenant: {TENANT}
repo: {{ path: ~/e2e-kube-repo, base: main }}
task: {{ text: "say hello" }}
agent:
  image: localhost/cyclix-agent-python:latest
  unpinned_local_image: true
  command: [sh, -c, 'echo AGENT-STARTED on "$(git -C /work log --format=%s -1)"']
  timeout: 1m
  credentials:
    - {{ env: E2E_KUBE_KEY, host: api.example, header: x-api-key, paths: [/v1/messages] }}
gate:
  image: localhost/cyclix-agent-python:latest
  unpinned_local_image: true
  command: ["true"]
egress: {{ allow: [allowed.example], ports: [80] }}
Y
git init -q -b main repo && git -C repo -c user.name=t -c user.email=t@t commit -q --allow-empty -m base-of-$R
git -C repo branch cyclix/$T/$R && git -C repo bundle create -q ../repo.bundle cyclix/$T/$R
E2E_KUBE_KEY=$KEY {c} export kube $T --spec spec.yaml --run-id $R --runner-image localhost/cyclix-runner:e2e-{run} --out out --with-secrets 2>export.err || {{ cat export.err; exit 3; }}
# The value is only in the Secret file (mode 0600), never in a manifest or a notice.
echo "secret-mode=$(stat -c %a out/secrets/credentials-secret.yaml) in-secret=$(grep -c "$KEY" out/secrets/credentials-secret.yaml) elsewhere=$(cat out/run/* out/schedule/* export.err | grep -c "$KEY")"
{{ echo "apiVersion: v1"; echo "kind: ConfigMap"; echo "metadata: {{name: cyclix-$R-repo}}"; echo "binaryData:"; echo "  repo.bundle: $(base64 -w0 repo.bundle)"; }} > repo-configmap.yaml
podman network create --internal --subnet 10.214.{octet}.0/24 --ip-range 10.214.{octet}.128/25 --disable-dns $NET >/dev/null
podman network create $NET-egress >/dev/null
{proxy}
sed "s/\$({var})/10.214.{octet}.2/g" out/run/agent-job.yaml > agent-job.yaml
{{ cat out/run/run-configmap.yaml; echo ---; cat repo-configmap.yaml; echo ---; cat out/run/work-pvc.yaml; echo ---; cat agent-job.yaml; }} > agent.yaml
timeout 120 podman kube play -q --network $NET agent.yaml >/dev/null 2>play.err || {{ echo "kube play failed:"; cat play.err; }}
echo "exit=$(timeout 120 podman wait --condition=exited $NET-agent-pod-agent)"
podman logs $NET-agent-pod-agent 2>&1
podman image rm -f localhost/cyclix-runner:e2e-{run} >/dev/null
"#
    );
    expect_success(&tb.user_sh(&script), "play the exported run")
}

/// What is left of run `run` on the testbed: pods, containers, volumes, networks.
fn leftovers(tb: &Testbed, run: &str) -> String {
    expect_success(
        &tb.user_sh(&format!(
            "podman pod ps --format '{{{{.Name}}}}' | grep cyclix-{run}; \
             podman ps -a --format '{{{{.Names}}}}' | grep cyclix-{run}; \
             podman volume ls --format '{{{{.Name}}}}' | grep cyclix-{run}; \
             podman network ls --format '{{{{.Name}}}}' | grep cyclix-{run}; \
             podman images --format '{{{{.Repository}}}}:{{{{.Tag}}}}' | grep e2e-{run}; \
             podman secret ls --format '{{{{.Name}}}}' | grep cyclix-{run}; true"
        )),
        "list leftovers",
    )
}

fn probe_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter(|l| l.starts_with("{\"id\""))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn the_exported_agent_pod_passes_its_probes_under_podman_kube_play_and_leaves_nothing() {
    let _s = serial();
    let _g = shared();
    let tb = demo_ready();
    let out = play(tb, "kp-ok-1", 251, true);
    let probes = probe_lines(&out);
    let failed: Vec<&serde_json::Value> =
        probes.iter().filter(|p| p["verdict"] != "PASS").collect();
    assert!(failed.is_empty(), "probes failed:\n{out}");
    let ids: Vec<&str> = probes.iter().filter_map(|p| p["id"].as_str()).collect();
    assert_eq!(ids, cyclix::probe::profile::KUBERNETES_PROBES, "{out}");
    assert!(
        out.contains("\"summary\":true,\"pass\":25,\"fail\":0"),
        "{out}"
    );
    // The agent ran after the probes, in the clone of the run branch from the bundle.
    assert!(out.contains("AGENT-STARTED on base-of-kp-ok-1"), "{out}");
    assert!(out.contains("exit=0"), "{out}");
    // The credential: its Secret (played with the proxy, mounted only there) holds the value,
    // nothing else written or printed does; the agent's NO_PROXY names the proxy (N16 passed).
    assert!(
        out.contains("secret-mode=600 in-secret=1 elsewhere=0"),
        "{out}"
    );
    assert!(!out.contains("kube-e2e-secret-value"), "{out}");
    assert_eq!(leftovers(tb, "kp-ok-1"), "", "left behind");
}

#[test]
fn without_its_proxy_the_pods_probes_fail_and_the_agent_never_starts() {
    let _s = serial();
    let _g = shared();
    let tb = demo_ready();
    let out = play(tb, "kp-noproxy-1", 252, false);
    let probes = probe_lines(&out);
    let n8 = probes
        .iter()
        .find(|p| p["id"] == "N8")
        .unwrap_or_else(|| panic!("no N8:\n{out}"));
    assert_eq!(n8["verdict"], "FAIL", "{out}");
    // The deny probes still pass: the failure is the missing proxy, not the boundary.
    let n2 = probes
        .iter()
        .find(|p| p["id"] == "N2")
        .unwrap_or_else(|| panic!("no N2:\n{out}"));
    assert_eq!(n2["verdict"], "PASS", "{out}");
    assert!(out.contains("the agent does not start"), "{out}");
    assert!(!out.contains("AGENT-STARTED"), "{out}");
    assert!(out.contains("exit=1"), "{out}");
    assert_eq!(leftovers(tb, "kp-noproxy-1"), "", "left behind");
}
