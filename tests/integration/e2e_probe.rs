//! The boundary probe suite (`cyclix probe`, security-cases §2) on the real stack, probe by
//! probe: deliberately weakened containers must make the matching probe FAIL, with the fully
//! hardened container as the positive control. (Every probe passing inside a real run's agent
//! container, as cyclix runs them before the agent, is `e2e_boundary`.)

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::common::run::demo_ready;
use crate::common::testbed::{Testbed, expect_success};

/// The tests of this module run one at a time: the keyring test puts a key into the testbed
/// user's keyring, which every `podman exec` of the other tests would see (P23).
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

fn lines(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

/// Runs `cyclix probe --only ID` as the command of a fresh container with the agent's
/// hardening (from the rendered unit: `--cap-drop=all --security-opt=no-new-privileges
/// --read-only --init --tmpfs=/tmp:…`), plus `extra` podman flags that weaken or replace it.
fn probe_in(tb: &Testbed, flags: &str, id: &str) -> serde_json::Value {
    let script = format!(
        r#"set -u
{ctx}
podman run --rm --network=none {flags} --tmpfs=/tmp:rw,nosuid,nodev,mode=1777,size=1g \
  --mount=type=bind,source={c},destination=/cyclix/bin/cyclix,readonly=true \
  --mount=type=bind,source=/tmp/weak/ctx.json,destination=/cyclix/ctx.json,readonly=true \
  localhost/cyclix-agent-python:latest /cyclix/bin/cyclix probe --only {id} --context /cyclix/ctx.json
echo "rc=$?"
"#,
        c = tb.cyclix_bin(),
        ctx = context_script("/tmp/weak", "10.213.1")
    );
    let out = tb.user_sh(&script);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let all = lines(&stdout);
    let r = all
        .iter()
        .find(|v| v["id"] == id)
        .unwrap_or_else(|| {
            panic!(
                "no {id} line:\n{stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .clone();
    let rc = if r["verdict"] == "PASS" {
        "rc=0"
    } else {
        "rc=1"
    };
    assert!(
        stdout.contains(rc),
        "exit code must follow the verdict: {stdout}"
    );
    r
}

/// Shell lines writing `DIR/ctx.json`, a probe context for a sandbox on `SUB.0/24` whose
/// proxy is `SUB.2:3128`, with the testbed user's namespaces and uid.
fn context_script(dir: &str, sub: &str) -> String {
    format!(
        r#"ns=$(for n in pid net mnt ipc uts cgroup user; do printf '"%s":%s,' $n $(readlink /proc/self/ns/$n | tr -dc 0-9); done)
mkdir -p {dir}; cat > {dir}/ctx.json <<CTX
{{"proxy_url":"http://{sub}.2:3128","proxy_name":"none","subnet":"{sub}.0/24","gateway_ip":"{sub}.1",
 "allowed_host":"allowed.example","allowed_port":80,"denied_host":"denied.example",
 "host_namespaces":{{${{ns%,}}}},"host_uid":$(id -u)}}
CTX"#
    )
}

const HARDENED: &str = "--cap-drop=all --security-opt=no-new-privileges --read-only --init";

#[test]
fn weakened_containers_make_the_matching_probe_fail() {
    let _serial = serial();
    let _shared = crate::common::testbed::shared();
    let tb = demo_ready();
    // Positive controls: the same container with the full hardening passes both probes.
    assert_eq!(probe_in(tb, HARDENED, "P1")["verdict"], "PASS");
    assert_eq!(probe_in(tb, HARDENED, "P19")["verdict"], "PASS");

    // Without --cap-drop=all: podman's default capability set is visible in CapEff/CapBnd.
    let weak = probe_in(
        tb,
        "--security-opt=no-new-privileges --read-only --init",
        "P1",
    );
    assert_eq!(weak["verdict"], "FAIL", "{weak}");
    assert!(
        weak["detail"]
            .as_str()
            .is_some_and(|d| d.contains("CapEff")),
        "{weak}"
    );

    // The user bus (could start host units) bind-mounted in.
    let bus = probe_in(
        tb,
        &format!(
            "{HARDENED} --mount=type=bind,source=$XDG_RUNTIME_DIR/bus,destination=/run/user/1000/bus"
        ),
        "P19",
    );
    assert_eq!(bus["verdict"], "FAIL", "{bus}");
    assert!(
        bus["got"]
            .as_str()
            .is_some_and(|g| g.contains("/run/user/1000/bus")),
        "{bus}"
    );

    // Without no-new-privileges: P2 sees NoNewPrivs 0.
    let nnp = probe_in(tb, "--cap-drop=all --read-only --init", "P2");
    assert_eq!(nnp["verdict"], "FAIL", "{nnp}");
    // Without --read-only: P14 creates a file on the root filesystem.
    let rw = probe_in(
        tb,
        "--cap-drop=all --security-opt=no-new-privileges --init",
        "P14",
    );
    assert_eq!(rw["verdict"], "FAIL", "{rw}");
}

#[test]
fn a_key_in_the_host_users_keyring_is_visible_to_podman_exec_and_p23_catches_it() {
    let _serial = serial();
    // The key is visible to every `podman exec` of the testbed user meanwhile: no run may probe.
    let _alone = crate::common::testbed::exclusive();
    // Measured: a process started by `podman exec` inherits the exec'ing unit's session
    // keyring `_ses`, which links the host user's user keyring `_uid.UID` with full user
    // permissions; the container's own init gets crun's fresh, empty keyring instead. So a
    // key the host user holds is readable by anything cyclix `podman exec`s into the sandbox.
    let tb = demo_ready();
    let script = format!(
        r#"set -u
ns=$(for n in pid net mnt ipc uts cgroup user; do printf '"%s":%s,' $n $(readlink /proc/self/ns/$n | tr -dc 0-9); done)
mkdir -p /tmp/kr; cat > /tmp/kr/ctx.json <<CTX
{{"proxy_url":"http://10.213.1.2:3128","proxy_name":"none","subnet":"10.213.1.0/24","gateway_ip":"10.213.1.1",
 "allowed_host":"allowed.example","allowed_port":80,"denied_host":"denied.example",
 "host_namespaces":{{${{ns%,}}}},"host_uid":$(id -u)}}
CTX
name=e2e-probe-kr-$$
podman run -d --name $name --network=none {HARDENED} \
  --mount=type=bind,source={c},destination=/cyclix/bin/cyclix,readonly=true \
  --mount=type=bind,source=/tmp/kr/ctx.json,destination=/cyclix/ctx.json,readonly=true \
  localhost/cyclix-agent-python:latest sleep infinity >/dev/null
echo "before: $(podman exec $name /cyclix/bin/cyclix probe --only P23 --context /cyclix/ctx.json | head -1)"
# add_key("user", "e2e-probe", "s3cret", 6, KEY_SPEC_USER_KEYRING) — x86_64 syscall 248.
python3 -c 'import ctypes; l=ctypes.CDLL(None); print("key", l.syscall(248, b"user", b"e2e-probe", b"s3cret", 6, ctypes.c_int(-4)))'
echo "after: $(podman exec $name /cyclix/bin/cyclix probe --only P23 --context /cyclix/ctx.json | head -1)"
# KEYCTL_CLEAR (7) of the user keyring: leave the testbed user's keyring as it was.
python3 -c 'import ctypes; l=ctypes.CDLL(None); print("clear", l.syscall(250, 7, ctypes.c_int(-4)))'
podman rm -f -t 0 $name >/dev/null
"#,
        c = tb.cyclix_bin()
    );
    let out = expect_success(&tb.user_sh(&script), "P23 before/after a host key");
    let line = |tag: &str| -> serde_json::Value {
        let l = out
            .lines()
            .find_map(|l| l.strip_prefix(tag))
            .unwrap_or_else(|| panic!("no `{tag}` line:\n{out}"));
        serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"))
    };
    let before = line("before: ");
    let after = line("after: ");
    assert_eq!(before["verdict"], "PASS", "{before}");
    assert_eq!(after["verdict"], "FAIL", "{after}");
    assert!(
        after["got"]
            .as_str()
            .is_some_and(|g| g.contains("_uid.") && g.contains("Ok(1)")),
        "{after}"
    );
    assert!(
        out.contains("clear 0"),
        "the key must be cleared again:\n{out}"
    );
}

/// The script of the late-proxy test: a `cyclix probe` container and an agent-wait one (the
/// run's own path, its report through the FIFO) start before the proxy listens; then a proxy
/// container that never listens, for the control. The late proxy's container runs from the
/// start, its listener held until the test opens `/open/now`: once both probes say they wait,
/// only a file's creation and a `bind` stand between them and the proxy (a `podman run` and an
/// interpreter's start there raced their 10 s wait on a loaded host).
fn late_proxy_script(tb: &crate::common::testbed::Testbed) -> String {
    format!(
        r#"set -u
net=e2e-lateproxy; sub=10.77.251
cleanup() {{ podman rm -f -t 0 e2e-lateprobe e2e-lateprobe0 e2e-lateaw e2e-lateproxy >/dev/null 2>&1; podman network rm -f $net >/dev/null 2>&1; }}
cleanup; trap cleanup EXIT
podman network create --internal --subnet $sub.0/24 $net >/dev/null
{ctx}
rm -rf /tmp/lateproxy/open; mkdir -p /tmp/lateproxy/open
podman run -d --name e2e-lateproxy --network $net:ip=$sub.2 --read-only --cap-drop=all \
  --mount=type=bind,source=/tmp/lateproxy/open,destination=/open,readonly=true \
  localhost/cyclix-agent-python:latest python3 -c "import http.server, os, time
while not os.path.exists('/open/now'): time.sleep(0.02)
http.server.ThreadingHTTPServer(('$sub.2', 3128), http.server.SimpleHTTPRequestHandler).serve_forever()" >/dev/null
probe() {{
  podman run -d --name $1 --network $net:ip=$sub.3 {HARDENED} --tmpfs=/tmp:rw,nosuid,nodev,mode=1777,size=1g \
    --mount=type=bind,source={c},destination=/cyclix/bin/cyclix,readonly=true \
    --mount=type=bind,source=/tmp/lateproxy/ctx.json,destination=/cyclix/ctx.json,readonly=true \
    localhost/cyclix-agent-python:latest /cyclix/bin/cyclix probe --only N6 --context /cyclix/ctx.json >/dev/null
}}
# Both probe containers start side by side (each waits at most PROXY_WAIT from its own start,
# and the proxy starts only once both say they wait: no start of one eats the other's wait).
probe e2e-lateprobe &
first=$!
# The run's own path: agent-wait hands its report through the FIFO, as in a run's probe phase
# (the host's side played by this shell: read the hello, unlink the FIFO, read the rest, go).
ctl=/tmp/lateproxy/ctl; rm -rf $ctl; mkdir -m 0777 $ctl; cp /tmp/lateproxy/ctx.json $ctl/probe.json
chmod 0644 $ctl/probe.json; mkfifo -m 0666 $ctl/report
{{ exec 3<$ctl/report; read -r hello <&3; rm $ctl/report; cat <&3 > /tmp/lateproxy/aw.out; touch $ctl/go; }} &
reader=$!
podman run -d --name e2e-lateaw --network $net:ip=$sub.4 {HARDENED} --tmpfs=/tmp:rw,nosuid,nodev,mode=1777,size=1g \
  --mount=type=bind,source={c},destination=/cyclix/bin/cyclix,readonly=true \
  --mount=type=bind,source=$ctl,destination=/cyclix/ctl,readonly=true \
  localhost/cyclix-agent-python:latest /cyclix/bin/cyclix agent-wait --go /cyclix/ctl/go \
  --report /cyclix/ctl/report --timeout-s 60 -- true >/dev/null
wait $first
seen=no; aw_seen=no
for i in $(seq 1 300); do
  podman logs e2e-lateprobe 2>&1 | grep -q 'cyclix probe: the proxy at .* does not accept connections yet' && seen=yes
  podman logs e2e-lateaw 2>&1 | grep -q 'cyclix agent-wait: the proxy at .* does not accept connections yet' && aw_seen=yes
  [ $seen$aw_seen = yesyes ] && break
  sleep 0.1
done
echo "waiting_seen=$seen"
echo "aw_waiting_seen=$aw_seen"
touch /tmp/lateproxy/open/now
echo "late_rc=$(podman wait e2e-lateprobe)"
echo "aw_rc=$(podman wait e2e-lateaw)"
wait $reader
podman logs e2e-lateprobe 2>/dev/null | sed 's/^/late: /'
sed 's/^/aw: /' /tmp/lateproxy/aw.out
podman rm -f -t 0 e2e-lateprobe e2e-lateaw e2e-lateproxy >/dev/null
# The proxy's container is up, but nothing in it ever listens (squid that never starts).
podman run -d --name e2e-lateproxy --network $net:ip=$sub.2 --read-only --cap-drop=all \
  localhost/cyclix-agent-python:latest sleep 600 >/dev/null
probe e2e-lateprobe0
echo "never_rc=$(podman wait e2e-lateprobe0)"
podman logs e2e-lateprobe0 2>/dev/null | sed 's/^/never: /'
podman logs e2e-lateprobe0 2>&1 >/dev/null | sed 's/^/never_err: /'
"#,
        c = tb.cyclix_bin(),
        ctx = context_script("/tmp/lateproxy", "10.77.251")
    )
}

/// The suite waits for a proxy that listens late (the proxy unit starts beside the agent's,
/// and squid listens only after its entrypoint made the run's CA: a run under load probed
/// before, and every proxy probe got `ECONNREFUSED`). A container on an internal network runs
/// `cyclix probe --only N6` (whose positive control connects to the proxy) before anything
/// listens at the proxy's address; once its stderr says it waits, a listener starts there and
/// N6 passes, the summary naming the wait. The positive control: with a proxy container in
/// which nothing ever listens, the same probe fails on its control (`ECONNREFUSED`) after the bounded wait, which the summary
/// names too.
#[test]
fn the_probes_wait_for_a_proxy_that_listens_late_and_fail_on_one_that_never_does() {
    let _shared = crate::common::testbed::shared();
    let tb = demo_ready();
    let script = late_proxy_script(tb);
    let out = expect_success(&tb.user_sh(&script), "a late proxy and none");
    let json = |prefix: &str, pick: &dyn Fn(&serde_json::Value) -> bool| {
        out.lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| pick(v))
            .unwrap_or_else(|| panic!("no {prefix} line:\n{out}"))
    };
    let n6 = |v: &serde_json::Value| v["id"] == "N6";
    let sum = |v: &serde_json::Value| v["summary"] == true;
    assert_eq!(crate::common::kv(&out, "waiting_seen"), "yes", "{out}");
    let late = json("late: ", &n6);
    assert_eq!(late["verdict"], "PASS", "{late}\n{out}");
    assert_eq!(crate::common::kv(&out, "late_rc"), "0", "{out}");
    assert!(
        json("late: ", &sum)["proxy_wait_ms"].as_u64().unwrap_or(0) > 0,
        "the summary names the wait:\n{out}"
    );
    // The run's own probe run (agent-wait's report through the FIFO) waits the same way: its
    // N6 passes against the late proxy and its summary names the wait; then the go lets it
    // exec its command.
    assert_eq!(crate::common::kv(&out, "aw_waiting_seen"), "yes", "{out}");
    let aw = json("aw: ", &n6);
    assert_eq!(aw["verdict"], "PASS", "{aw}\n{out}");
    assert!(
        json("aw: ", &sum)["proxy_wait_ms"].as_u64().unwrap_or(0) > 0,
        "agent-wait's summary names the wait:\n{out}"
    );
    assert_eq!(crate::common::kv(&out, "aw_rc"), "0", "{out}");
    // The positive control: nothing ever listens, the wait ends and the control fails.
    let never = json("never: ", &n6);
    assert_eq!(never["verdict"], "FAIL", "{never}\n{out}");
    assert!(
        never["got"]
            .as_str()
            .is_some_and(|g| g.contains("control=ECONNREFUSED")),
        "{never}"
    );
    assert_eq!(crate::common::kv(&out, "never_rc"), "1", "{out}");
    assert!(
        json("never: ", &sum)["proxy_wait_ms"].as_u64().unwrap_or(0)
            >= u64::try_from(cyclix::probe::suite::PROXY_WAIT.as_millis()).unwrap_or(u64::MAX),
        "the bounded wait ran out:\n{out}"
    );
    assert!(
        out.contains(
            "never_err: cyclix probe: the proxy at 10.77.251.2:3128 accepted no connection"
        ),
        "stderr says the proxy never listened:\n{out}"
    );
}
