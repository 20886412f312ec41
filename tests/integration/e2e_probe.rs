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
ns=$(for n in pid net mnt ipc uts cgroup user; do printf '"%s":%s,' $n $(readlink /proc/self/ns/$n | tr -dc 0-9); done)
mkdir -p /tmp/weak; cat > /tmp/weak/ctx.json <<CTX
{{"proxy_url":"http://10.213.1.2:3128","proxy_name":"none","subnet":"10.213.1.0/24","gateway_ip":"10.213.1.1",
 "allowed_host":"allowed.example","allowed_port":80,"denied_host":"denied.example",
 "host_namespaces":{{${{ns%,}}}},"host_uid":$(id -u)}}
CTX
podman run --rm --network=none {flags} --tmpfs=/tmp:rw,nosuid,nodev,mode=1777,size=1g \
  --mount=type=bind,source={c},destination=/cyclix/bin/cyclix,readonly=true \
  --mount=type=bind,source=/tmp/weak/ctx.json,destination=/cyclix/ctx.json,readonly=true \
  localhost/cyclix-agent-python:latest /cyclix/bin/cyclix probe --only {id} --context /cyclix/ctx.json
echo "rc=$?"
"#,
        c = tb.cyclix_bin()
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
  localhost/cyclix-agent-python:latest sleep 30 >/dev/null
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
