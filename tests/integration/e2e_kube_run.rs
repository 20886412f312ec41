//! `cyclix kube-run` on the testbed (issue 17, item 2): the runner drives one whole run
//! through the `podman kube play` adapter of its `Cluster` seam — the repository bundle made
//! from the user's repository into the run's ConfigMap, the credential Secret made from the
//! runner's environment, the proxy and the agent Job played, the probe suite passing in the
//! Pod, the agent committing, the gate Job on a clean export, the collector's bundle read from
//! its log and imported into the user's repository as the run branch, every object deleted
//! and the deletion audited, the branch delivered to the spec's remote. The failure mode: an agent whose branch no longer descends from
//! the base (a rewritten history) — the collector's bundle breaks the import's contract, the
//! import refuses it, the record says so, no branch appears, nothing of the run is left; and a
//! runner stopped by SIGTERM while the agent runs still deletes everything (`interrupted`).
//!
//! The plays run one at a time with `e2e_kube`'s (its `serial`: podman 5.4's `Text file busy`
//! on the copied cyclix binary in parallel plays; seen here too, 1 of 2 parallel runs).
//!
//! What podman stands in for (the adapter's module doc): Services (the proxy's fixed address
//! on the run's network), NetworkPolicy (the gate and the collector on `--network none`).

use crate::common::run::demo_ready;
use crate::common::testbed::{Testbed, expect_success, shared};
use crate::e2e_kube::serial;

const TENANT: &str = "e2e-kuberun";

/// Runs `cyclix kube-run` for run `run` with the agent's shell command `agent`; prints the
/// runner's output and exit status, the run branch's subjects in the user's repository, the
/// record, and what of the run is left.
fn kube_run(tb: &Testbed, run: &str, agent: &str, deliver: bool) -> String {
    kube_run_with(
        tb,
        run,
        agent,
        &Opts {
            deliver,
            ..Opts::default()
        },
    )
}

/// How a test's run differs from the plain one.
#[derive(Default)]
struct Opts {
    /// The spec has `delivery:` to a bare remote.
    deliver: bool,
    /// The runner gets SIGTERM once the agent's container runs.
    interrupt: bool,
    /// MiB of incompressible bytes in the base of the user's repository.
    big_mib: u32,
    /// The agent's image (default the demo's Python image).
    agent_image: Option<&'static str>,
    /// A file `agent.sh` with this text in the base of the user's repository.
    agent_file: Option<&'static str>,
}

/// [`kube_run`] with `o`.
fn kube_run_with(tb: &Testbed, run: &str, agent: &str, o: &Opts) -> String {
    let Opts {
        deliver,
        interrupt,
        big_mib,
        agent_image,
        agent_file,
    } = *o;
    // Written by the test's shell from base64: no quoting of its text.
    let agent_file = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(agent_file.unwrap_or_default())
    };
    let agent_image = agent_image.unwrap_or("localhost/cyclix-agent-python:latest");
    let stop = if interrupt {
        // Bounded by its timeout: the agent's container appears once its Pod is played.
        "timeout 120 sh -c 'until podman wait --condition=running cyclix-$0-agent-pod-agent >/dev/null 2>&1; do sleep 0.2; done' $R; kill -TERM $P"
    } else {
        ""
    };
    let delivery = if deliver {
        "delivery: { remote: deliver }"
    } else {
        ""
    };
    let c = tb.cyclix_bin();
    let script = format!(
        r#"set -u
R={run}; T={TENANT}; W=$(mktemp -d); cd $W
KEY=kube-run-secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
IMG=localhost/cyclix-runner:e2e-$R
trap 'cd /; rm -rf $W; podman image rm -f $IMG >/dev/null 2>&1' EXIT
b=$(mktemp -d); cp {c} $b/cyclix
podman build -q --build-arg KUBECTL=no -t $IMG -f /src/images/runner/Containerfile $b >/dev/null || exit 3
rm -rf $b
git init -q -b main repo
[ {big_mib} = 0 ] || {{ head -c {big_mib}M /dev/urandom > repo/big.bin && git -C repo add big.bin; }}
[ -z "{agent_file}" ] || {{ echo "{agent_file}" | base64 -d > repo/agent.sh && git -C repo add agent.sh; }}
git -C repo -c user.name=t -c user.email=t@t commit -q --allow-empty -m base-of-$R
git init -q --bare remote.git && git -C repo remote add deliver $W/remote.git
cat > spec.yaml <<Y
tenant: $T
repo: {{ path: $W/repo, base: main }}
task: {{ text: "commit a file" }}
agent:
  image: {agent_image}
  unpinned_local_image: true
  command: [sh, -c, '{agent}']
  timeout: 1m
  credentials:
    - {{ env: E2E_KUBE_KEY, host: api.example, header: x-api-key, paths: [/v1/messages] }}
gate:
  image: localhost/cyclix-agent-python:latest
  unpinned_local_image: true
  command: [sh, -c, 'test -f hello.txt && test ! -e .git && echo GATE-SAW-HELLO']
egress: {{ allow: [allowed.example], ports: [80] }}
{delivery}
Y
E2E_KUBE_KEY=$KEY timeout 300 {c} kube-run $T --spec spec.yaml --cluster podman --run-id $R --runner-image $IMG >out.txt 2>err.txt &
P=$!
{stop}
wait $P
echo "rc=$?"
cat out.txt err.txt
echo "--- branch"
git -C repo log --format=%s refs/heads/cyclix/$T/$R -- 2>&1
echo "--- remote: $(git -C remote.git rev-parse --verify -q refs/heads/cyclix/$T/$R)"
echo "--- record"
cat ~/.local/state/cyclix/runs/$T/$R.json
echo
echo "--- secret: $(grep -rc "$KEY" ~/.local/state/cyclix/runs/$T/ out.txt err.txt | grep -v ':0$' | wc -l)"
echo "--- left"
podman pod ps --format '{{{{.Name}}}}' | grep "cyclix-$R"
podman ps -a --format '{{{{.Names}}}}' | grep "cyclix-$R"
podman volume ls --format '{{{{.Name}}}}' | grep "cyclix-$R"
podman network ls --format '{{{{.Name}}}}' | grep "cyclix-$R"
podman secret ls --format '{{{{.Name}}}}' | grep "cyclix-$R"
echo "--- end"
"#
    );
    expect_success(&tb.user_sh(&script), "cyclix kube-run on the testbed")
}

fn record(out: &str) -> serde_json::Value {
    let rec = out
        .split("--- record\n")
        .nth(1)
        .and_then(|s| s.split("\n--- secret").next())
        .unwrap_or_else(|| panic!("no record:\n{out}"));
    serde_json::from_str(rec).unwrap_or_else(|e| panic!("{e}: {rec}\n{out}"))
}

fn left(out: &str) -> &str {
    out.split("--- left\n")
        .nth(1)
        .and_then(|s| s.split("--- end").next())
        .unwrap_or("missing")
}

#[test]
fn kube_run_does_a_whole_run_through_podman_kube_play_imports_and_delivers_the_run_branch() {
    let _s = serial();
    let _g = shared();
    let tb = demo_ready();
    // A repository of 20 MiB goes in (21 ConfigMaps of 1 MiB, joined in the Pod) and a change
    // of 13 MiB comes back (3 collector Jobs of 6 MiB, each log under the kubelet's 10 MiB; the
    // middle part too). 50 MiB in and 20 MiB out passed the same way, by hand, here and on a
    // real cluster (docs/kubernetes.md); CI keeps the parts, not the size.
    let out = kube_run_with(
        tb,
        "kr-ok-1",
        "wc -c < big.bin | grep -qx 20971520 && echo hello > hello.txt && head -c 13M /dev/urandom > change.bin && git add hello.txt change.bin && git -c user.name=a -c user.email=a@a commit -qm agent-says-hello && echo AGENT-COMMITTED",
        &Opts {
            deliver: true,
            big_mib: 20,
            ..Opts::default()
        },
    );
    assert!(out.contains("rc=0"), "{out}");
    let rec = record(&out);
    assert_eq!(rec["result"], "passed", "{out}");
    // The probes passed in the Pod before the agent started.
    let probes = rec["probes"].as_array().expect("probes");
    let ids: Vec<&str> = probes.iter().filter_map(|p| p["id"].as_str()).collect();
    assert_eq!(ids, cyclix::probe::profile::KUBERNETES_PROBES, "{out}");
    assert!(probes.iter().all(|p| p["verdict"] == "PASS"), "{out}");
    assert!(
        rec["agent_log"].to_string().contains("AGENT-COMMITTED"),
        "{out}"
    );
    // The gate judged the clean export (the file, no .git).
    assert!(
        rec["gate_log"].to_string().contains("GATE-SAW-HELLO"),
        "{out}"
    );
    // The collector's bundle came out and was imported as the run branch, on the base.
    assert_eq!(rec["import"]["outcome"], "imported", "{out}");
    let branch = out
        .split("--- branch\n")
        .nth(1)
        .and_then(|s| s.split("--- remote").next())
        .expect("branch");
    assert_eq!(branch, "agent-says-hello\nbase-of-kr-ok-1\n", "{out}");
    assert_eq!(rec["commits"][0]["subject"], "agent-says-hello", "{out}");
    // Both ways in parts: the record says how many.
    let notices = rec["notices"].to_string();
    assert!(
        notices.contains("in 21 ConfigMap(s)") && notices.contains("from 3 collector Job(s)"),
        "{notices}"
    );
    // Delivered with `cyclix run`'s delivery code: the remote has the imported tip.
    let tip = rec["import"]["tip"].as_str().expect("tip");
    assert!(out.contains(&format!("--- remote: {tip}\n")), "{out}");
    assert_eq!(rec["delivery"]["outcome"], "pushed", "{out}");
    // The credential's value went only into the Secret (on stdin), never a record or output.
    assert!(out.contains("--- secret: 0"), "{out}");
    assert_eq!(rec["leftovers"], serde_json::json!([]), "{out}");
    assert_eq!(left(&out), "", "left behind:\n{out}");
}

#[test]
fn a_rewritten_history_is_refused_at_import_and_nothing_of_the_run_is_left() {
    let _s = serial();
    let _g = shared();
    let tb = demo_ready();
    // The agent replaces its branch with a history that does not start at the base: the
    // collector's bundle then has no prerequisite, which the import's contract refuses.
    let out = kube_run(
        tb,
        "kr-orphan-1",
        "git checkout -q --orphan tmp && echo x > hello.txt && git add hello.txt && git -c user.name=a -c user.email=a@a commit -qm orphan && git for-each-ref \"--format=%(refname)\" refs/heads/cyclix | while read r; do git update-ref \"\\$r\" HEAD; done; echo AGENT-REWROTE",
        false,
    );
    let rec = record(&out);
    assert!(out.contains("rc=1"), "{out}");
    assert_eq!(rec["result"], "agent_failed", "{out}");
    assert_eq!(rec["import"]["outcome"], "refused", "{out}");
    assert!(
        rec["import"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("prerequisites"),
        "{out}"
    );
    // The gate still ran (it judged the agent's tree); no branch reached the user's repository.
    assert!(
        out.contains("--- branch\nfatal:") || out.contains("unknown revision"),
        "{out}"
    );
    assert_eq!(left(&out), "", "left behind:\n{out}");
}

#[test]
fn a_stopped_runner_still_deletes_everything_of_the_run_and_says_interrupted() {
    let _s = serial();
    let _g = shared();
    let tb = demo_ready();
    let out = kube_run_with(
        tb,
        "kr-stop-1",
        "echo AGENT-SLEEPING; sleep 120",
        &Opts {
            interrupt: true,
            ..Opts::default()
        },
    );
    // SIGTERM (the runner Pod deleted, Ctrl-C) during the agent's wait: exit 3, the record
    // says interrupted, and the teardown ran anyway.
    assert!(out.contains("rc=3"), "{out}");
    let rec = record(&out);
    assert_eq!(rec["result"], "interrupted", "{out}");
    assert!(rec["causes"].to_string().contains("wait-agent"), "{out}");
    assert_eq!(rec["leftovers"], serde_json::json!([]), "{out}");
    assert_eq!(left(&out), "", "left behind:\n{out}");
}

#[test]
fn an_agent_image_the_host_does_not_have_ends_the_run_at_once_naming_it() {
    let _s = serial();
    let _g = shared();
    let tb = demo_ready();
    // podman kube play refuses the agent's Pod at once (a `localhost/` image is never pulled):
    // the run ends in `apply-agent`, naming the image, never waiting for the Job's deadline,
    // and deletes what it made.
    let out = kube_run_with(
        tb,
        "kr-noimg-1",
        "echo NEVER",
        &Opts {
            agent_image: Some("localhost/cyclix-absent-e2e:never"),
            ..Opts::default()
        },
    );
    assert!(out.contains("rc=2"), "{out}");
    let rec = record(&out);
    assert_eq!(rec["result"], "error", "{out}");
    assert_eq!(rec["failed_phase"], "apply-agent", "{out}");
    assert!(
        rec["error"]
            .as_str()
            .unwrap_or_default()
            .contains("localhost/cyclix-absent-e2e:never"),
        "{out}"
    );
    assert_eq!(rec["leftovers"], serde_json::json!([]), "{out}");
    assert_eq!(left(&out), "", "left behind:\n{out}");
}

/// The agent of the attack review's F1 (issue 34): it removes a blob of its own history (one
/// the gate's checkout never needs), makes its repository a partial clone whose promisor
/// remote is `ext::` a program of its own, and allows `ext` in its `.git/config` (which
/// outranks `protocol.allow=never`). Before the fix, the collector's `git bundle create`
/// started the program to fetch the blob, and it wrote a forged status line and bundle ahead
/// of the collector's own. Its positive control: the same repository read with the old
/// options in the agent's own container starts the program (`CONTROL-EVIL-RAN`).
const PROMISOR_AGENT: &str = r#"set -e
git config user.name a; git config user.email a@a
head -c 1000 /dev/urandom > x.bin; git add x.bin; git commit -qm c0
B=$(git rev-parse HEAD:x.bin)
git rm -q x.bin; echo hello > hello.txt; git add hello.txt; git commit -qm c1
rm -f .git/objects/$(echo $B | cut -c1-2)/$(echo $B | cut -c3-)
printf '#!/bin/sh\necho "cyclix-collect 4" > /proc/1/fd/1\ntouch /work/.git/evil-ran 2>/dev/null\nexit 1\n' > .git/evil.sh
chmod +x .git/evil.sh
git config core.repositoryformatversion 1
git config extensions.partialClone origin
git config remote.origin.promisor true
git config remote.origin.partialclonefilter blob:none
git config protocol.ext.allow always
git config remote.origin.url "ext::sh /work/.git/evil.sh"
git -c protocol.allow=never -c pack.threads=1 bundle create --quiet /tmp/pc.bundle HEAD~2..HEAD 2>/dev/null || true
[ -e .git/evil-ran ] && echo CONTROL-EVIL-RAN
rm -f .git/evil-ran
git config remote.origin.url "ext::sh /repo/.git/evil.sh"
echo AGENT-PLANTED
"#;

#[test]
fn a_promisor_remote_of_the_agents_own_starts_no_program_in_the_collector() {
    let _s = serial();
    let _g = shared();
    let tb = demo_ready();
    let out = kube_run_with(
        tb,
        "kr-promisor-1",
        "sh agent.sh",
        &Opts {
            agent_file: Some(PROMISOR_AGENT),
            ..Opts::default()
        },
    );
    let rec = record(&out);
    let agent_log = rec["agent_log"].to_string();
    // Positive control: the payload is live (it ran in the agent's own container).
    assert!(
        agent_log.contains("CONTROL-EVIL-RAN") && agent_log.contains("AGENT-PLANTED"),
        "{out}"
    );
    // In the collector no program started: git could not bundle the history with its blob
    // gone (status 6), and no forged line reached the log (that would be a refusal of a log
    // holding more lines than the script prints).
    assert_eq!(rec["import"]["outcome"], "export-failed", "{out}");
    let reason = rec["import"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("status `6`"), "{out}");
    assert_eq!(rec["result"], "agent_failed", "{out}");
    assert!(
        out.contains("--- branch\nfatal:") || out.contains("unknown revision"),
        "{out}"
    );
    assert_eq!(left(&out), "", "left behind:\n{out}");
}
