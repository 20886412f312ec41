//! `cyclix check` on the testbed (issue 4): every check passes on the healthy testbed and the
//! outcome test really runs a container; each injected fault fails exactly its own check, with
//! its fix.
//!
//! Faults never touch what concurrently running tests use (cyx's files, linger, newuidmap,
//! the Quadlet generator). Each runs cyclix in a transient system service of the testbed's
//! PID 1 whose mount namespace carries the fault (`BindReadOnlyPaths=` of a doctored
//! `/etc/subuid`, `TemporaryFileSystem=` over the generator directory, a `PATH` without podman
//! or with an old-podman shim), or as a second user created for the test and deleted at its
//! end (linger, a runtime dir of another user). Fault files live in a `mktemp -d` directory
//! removed by a shell trap, users by a drop guard, so a failing test still cleans up.

use std::process::Command;

use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// The environment of cyx's real session, for a service that runs as cyx without one.
const CYX_ENV: &str = "-E HOME=/home/cyx -E USER=cyx -E XDG_RUNTIME_DIR=/run/user/1000 \
     -E DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus \
     -E PATH=/usr/local/bin:/usr/bin:/bin";

/// A tenant spec whose image nobody has (tier container), and a scheduled worktree tenant.
const ABSENT_IMAGE: &str = "localhost/cyclix-check-absent:latest";

/// The smallest tenant `name` with `image` for its agent and gate (no timeouts).
fn spec(name: &str, image: &str) -> Tenant {
    Tenant::new(name)
        .image(image)
        .task("hi")
        .agent_cmd("[run]")
        .gate_cmd("[test]")
        .no_timeouts()
}

/// A root shell snippet that makes `user`'s `~/src/NAME` a git repository with a commit on
/// `main`, owned by `user`: what a tenant spec of [`spec`] names, so `repo:NAME` passes and a
/// test's one failure stays the only one.
fn repo_sh(user: &str, name: &str) -> String {
    format!(
        "R=/home/{user}/src/{name}; rm -rf \"$R\"; install -d -o {user} -g {user} /home/{user}/src \"$R\"; \
         runuser -u {user} -- git -C \"$R\" init -q -b main; \
         runuser -u {user} -- git -C \"$R\" -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m base\n"
    )
}

/// Runs `cyclix check ARGS` inside: `setup` (root bash; `$D` is a fresh directory readable by
/// all, removed at exit), then `systemd-run UNIT_ARGS -- PREFIX CYCLIX check ARGS --json`.
/// Returns the exit code and the JSON report.
fn run_check(
    tb: &Testbed,
    setup: &str,
    unit_args: &str,
    prefix: &str,
    args: &str,
) -> (i32, serde_json::Value) {
    let script = format!(
        r#"set -euo pipefail
D=$(mktemp -d /tmp/cyclix-check-fault.XXXXXX); chmod 755 "$D"; trap 'rm -rf "$D"' EXIT
mkdir -p "$D/config/cyclix/tenants"
{setup}
chmod -R a+rX "$D"
rc=0
systemd-run --wait --pipe --quiet --collect {unit_args} -- {prefix}{bin} check {args} --json || rc=$?
exit $rc"#,
        bin = tb.cyclix_bin()
    );
    let out = tb.root_sh(&script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "check did not print JSON ({e}); exit {:?}\n--- stdout ---\n{stdout}--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

fn failed(report: &serde_json::Value) -> Vec<String> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| c["id"].as_str().expect("id").to_string())
        .collect()
}

fn check<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id} in {report:#}"))
}

/// Asserts exit 1, that `id` is the only failed check, and that its found + fix contain
/// `found` and `fix`.
fn expect_only_failure(
    (code, report): &(i32, serde_json::Value),
    id: &str,
    found: &str,
    fix: &str,
) {
    assert_eq!(failed(report), [id], "{report:#}");
    assert_eq!(*code, 1, "a failed check exits 1: {report:#}");
    let c = check(report, id);
    let f = c["found"].as_str().unwrap_or_default();
    let x = c["fix"].as_str().unwrap_or_default();
    assert!(f.contains(found), "{id}: found {f:?} lacks {found:?}");
    assert!(x.contains(fix), "{id}: fix {x:?} lacks {fix:?}");
}

/// As cyx, outside its session, with the fault in the unit's own view of the host.
fn as_cyx(tb: &Testbed, setup: &str, props: &str, args: &str) -> (i32, serde_json::Value) {
    let unit = format!(
        "-p User=cyx -p WorkingDirectory=/home/cyx {CYX_ENV} -E XDG_CONFIG_HOME=$D/config {props}"
    );
    run_check(tb, setup, &unit, "", args)
}

/// A second user for one test (name, uid), removed on drop even if the test panics.
struct TempUser<'a> {
    tb: &'a Testbed,
    name: &'static str,
}

impl<'a> TempUser<'a> {
    fn new(tb: &'a Testbed, name: &'static str, uid: u32) -> TempUser<'a> {
        // userdel first: a previous, killed test process may have left it.
        expect_success(
            &tb.root_sh(&format!(
                "userdel -f -r {name} >/dev/null 2>&1 || true; useradd -m -u {uid} -s /bin/bash {name}"
            )),
            &format!("create user {name}"),
        );
        TempUser { tb, name }
    }
}

impl Drop for TempUser<'_> {
    fn drop(&mut self) {
        // useradd added its sub-id lines; userdel removes them again.
        let _ = self.tb.root_sh(&format!(
            "loginctl terminate-user {n} 2>/dev/null || true; userdel -f -r {n} >/dev/null 2>&1 || true",
            n = self.name
        ));
    }
}

/// As `user` in a real logind session of its own (`PAMName=login`: `pam_systemd` starts its
/// user manager and sets `XDG_RUNTIME_DIR` and the bus address), without linger; `env` (e.g.
/// `XDG_RUNTIME_DIR=...`) is applied by `env(1)` after PAM, so it wins.
fn in_session(tb: &Testbed, user: &str, setup: &str, env: &str) -> (i32, serde_json::Value) {
    let unit = format!(
        "-p User={user} -p PAMName=login -p WorkingDirectory=/home/{user} \
         -E XDG_CONFIG_HOME=$D/config"
    );
    let prefix = if env.is_empty() {
        String::new()
    } else {
        format!("env {env} ")
    };
    run_check(tb, setup, &unit, &prefix, "--quick")
}

#[test]
fn every_check_passes_on_the_testbed_and_the_outcome_test_runs_a_container() {
    // Not beside the Debian package's test (`e2e_deb`): `install` would take its templates.
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    // cyx's real session; an empty tenant directory so other tests' tenants do not count,
    // installed (else the `install` row warns that the unit templates are not written yet).
    let out = tb.user_sh(&format!(
        "D=$(mktemp -d); trap 'rm -rf $D' EXIT; XDG_CONFIG_HOME=$D {c} install >/dev/null && XDG_CONFIG_HOME=$D {c} check --json",
        c = tb.cyclix_bin()
    ));
    let stdout = expect_success(&out, "cyclix check on the testbed");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(report["schema"], "cyclix-check/1");
    assert_eq!(report["ok"], true);
    for c in report["checks"].as_array().expect("checks") {
        assert_eq!(c["status"], "pass", "{c:#}");
        assert!(c["fix"].is_null(), "{c:#}");
    }
    let outcome = check(&report, "outcome");
    let found = outcome["found"].as_str().expect("found");
    assert!(
        found.contains("started and ran `true`")
            && found.contains("192.0.2.1:80 unreachable")
            && found.contains("nothing left"),
        "{found}"
    );
    // The outcome test's objects are gone: nothing carries the check label.
    let left = expect_success(
        &tb.user_sh(
            "podman ps -aq --filter label=io.cyclix.check; podman network ls -q --filter label=io.cyclix.check",
        ),
        "list check objects",
    );
    assert_eq!(left.trim(), "", "the outcome test left objects behind");
    // The table form says the same, exit 0.
    let out = tb.user_sh(&format!(
        "D=$(mktemp -d); trap 'rm -rf $D' EXIT; XDG_CONFIG_HOME=$D {} check --quick",
        tb.cyclix_bin()
    ));
    let table = expect_success(&out, "cyclix check --quick");
    assert!(table.contains("this host can run cyclix"), "{table}");
    assert!(
        !table.contains('\x1b'),
        "no colour when stdout is not a terminal"
    );
}

#[test]
fn a_tenant_with_pinned_present_images_passes_spec_and_images() {
    let tb = Testbed::get();
    // Every container-tier run needs cyclix's proxy image (built, never pulled).
    let script = format!(
        r#"set -euo pipefail
podman image exists localhost/cyclix-proxy:latest || {bin} images build >/dev/null
D=$(mktemp -d); trap 'rm -rf "$D"' EXIT; mkdir -p "$D/cyclix/tenants"
R=~/src/pinned; rm -rf "$R"; git init -q -b main "$R"; git -C "$R" -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m base
digest=$(podman image inspect --format '{{{{.Digest}}}}' docker.io/library/busybox:latest)
cat > "$D/cyclix/tenants/pinned.yaml" <<EOF
{}EOF
for mode in --quick ""; do XDG_CONFIG_HOME=$D {bin} check $mode --tenant pinned --json; echo; done"#,
        spec("pinned", "docker.io/library/busybox@$digest")
            .pinned()
            .yaml(),
        bin = tb.cyclix_bin()
    );
    let out = expect_success(&tb.user_sh(&script), "check a pinned tenant");
    let reports: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&out)
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("two JSON reports");
    assert_eq!(reports.len(), 2, "{out}");
    for r in &reports {
        for id in ["spec:pinned", "images:pinned"] {
            assert_eq!(check(r, id)["status"], "pass", "{r:#}");
        }
        assert!(
            check(r, "images:pinned")["found"]
                .as_str()
                .unwrap_or_default()
                .contains("present and pinned: docker.io/library/busybox@sha256:"),
            "{r:#}"
        );
        assert_eq!(r["ok"], true, "{r:#}");
    }
}

#[test]
fn b09_limits_the_user_manager_cannot_enforce_fail_the_check_as_cyclix_run_refuses_them() {
    // The testbed delegates no controllers to user managers (testbed/README.md). `cyclix run`
    // refuses such a tenant (run::limits), so the check fails for it, with the same fix.
    let tb = Testbed::get();
    let setup = format!(
        "{}cat > \"$D/config/cyclix/tenants/big.yaml\" <<'EOF'\n{}EOF",
        repo_sh("cyx", "big"),
        spec("big", "localhost/x:latest")
            .agent_key("resources: { memory: 2G, pids: 512 }")
            .tier("worktree")
            .yaml()
    );
    let (code, report) = as_cyx(tb, &setup, "", "--quick");
    assert_eq!(failed(&report), ["cgroup-delegation"], "{report:#}");
    assert_eq!(code, 1, "a failed check exits 1");
    let c = check(&report, "cgroup-delegation");
    assert_eq!(c["status"], "fail", "{c:#}");
    assert!(
        c["found"]
            .as_str()
            .unwrap_or_default()
            .contains("limits that cannot be enforced: big: memory, big: pids (`cyclix run` refuses these tenants)"),
        "{c:#}"
    );
    assert!(
        c["fix"].as_str().unwrap_or_default().contains("Delegate="),
        "{c:#}"
    );
}

#[test]
fn b10_no_subuid_line_fails_subuid_with_the_usermod_fix() {
    let tb = Testbed::get();
    let r = as_cyx(
        tb,
        "grep -v '^cyx:' /etc/subuid > \"$D/subuid\" || true",
        "-p BindReadOnlyPaths=$D/subuid:/etc/subuid",
        "--quick",
    );
    expect_only_failure(
        &r,
        "subuid",
        "has no line for cyx",
        "sudo usermod --add-subuids",
    );
}

#[test]
fn b10_too_small_subgid_range_fails_subgid() {
    let tb = Testbed::get();
    let r = as_cyx(
        tb,
        "echo cyx:200000:1000 > \"$D/subgid\"",
        "-p BindReadOnlyPaths=$D/subgid:/etc/subgid",
        "--quick",
    );
    expect_only_failure(&r, "subgid", "has 1000 ids", "sudo usermod --add-subgids");
}

#[test]
fn b10_newuidmap_without_setuid_or_caps_fails_newuidmap() {
    let tb = Testbed::get();
    let r = as_cyx(
        tb,
        "cp /usr/bin/newuidmap \"$D/newuidmap\"; chmod 0755 \"$D/newuidmap\"",
        "-p BindReadOnlyPaths=$D/newuidmap:/usr/bin/newuidmap",
        "--quick",
    );
    expect_only_failure(
        &r,
        "newuidmap",
        "neither setuid root nor has cap_setuid",
        "setcap cap_setuid=ep /usr/bin/newuidmap",
    );
}

#[test]
fn b01_missing_quadlet_generator_fails_quadlet_naming_the_directories() {
    let tb = Testbed::get();
    let r = as_cyx(
        tb,
        "",
        "-p TemporaryFileSystem=/usr/lib/systemd/user-generators:ro",
        "--quick",
    );
    expect_only_failure(
        &r,
        "quadlet",
        "no podman-user-generator in /run/systemd/user-generators, /etc/systemd/user-generators, \
         /usr/local/lib/systemd/user-generators, /usr/lib/systemd/user-generators",
        "podman-user-generator",
    );
}

#[test]
fn podman_missing_from_path_fails_podman() {
    let tb = Testbed::get();
    let r = as_cyx(
        tb,
        "mkdir \"$D/bin\"; for f in /usr/bin/*; do [ \"${f##*/}\" = podman ] || ln -s \"$f\" \"$D/bin/\"; done",
        "-E PATH=$D/bin",
        "--quick",
    );
    expect_only_failure(&r, "podman", "not on $PATH", "install podman");
}

#[test]
fn tier_container_without_runtime_is_a_fail_not_a_warning() {
    let tb = Testbed::get();
    let setup = format!(
        "mkdir \"$D/bin\"; for f in /usr/bin/*; do [ \"${{f##*/}}\" = podman ] || ln -s \"$f\" \"$D/bin/\"; done\n\
         cat > \"$D/config/cyclix/tenants/acme.yaml\" <<'EOF'\n{}EOF",
        spec("acme", "localhost/tb-busybox:latest").yaml()
    );
    let (code, report) = as_cyx(tb, &setup, "-E PATH=$D/bin", "--quick --tenant acme");
    assert_eq!(code, 1);
    let c = check(&report, "spec:acme");
    assert_eq!(c["status"], "fail", "{c:#}");
    assert!(
        c["found"]
            .as_str()
            .unwrap_or_default()
            .contains("tier `container` is configured but no usable container runtime"),
        "{c:#}"
    );
}

#[test]
fn podman_older_than_the_floor_fails_podman() {
    let tb = Testbed::get();
    let r = as_cyx(
        tb,
        "mkdir \"$D/bin\"; printf '#!/bin/sh\\n[ \"$1\" = --version ] && { echo \"podman version 4.2.0\"; exit 0; }\\nexec /usr/bin/podman \"$@\"\\n' > \"$D/bin/podman\"; chmod 755 \"$D/bin/podman\"",
        "-E PATH=$D/bin:/usr/local/bin:/usr/bin:/bin",
        "--quick",
    );
    expect_only_failure(
        &r,
        "podman",
        "podman 4.2.0 is older than cyclix's floor 4.3",
        "upgrade podman",
    );
}

#[test]
fn an_image_not_present_fails_images_with_the_build_command() {
    let tb = Testbed::get();
    let setup = format!(
        "{}cat > \"$D/config/cyclix/tenants/ghost.yaml\" <<'EOF'\n{}EOF",
        repo_sh("cyx", "ghost"),
        spec("ghost", ABSENT_IMAGE).yaml()
    );
    // Full mode: image presence through `podman image exists`, and the outcome test.
    let r = as_cyx(tb, &setup, "", "");
    expect_only_failure(
        &r,
        "images:ghost",
        &format!("agent {ABSENT_IMAGE}"),
        &format!("podman build -t {ABSENT_IMAGE}"),
    );
    // --quick reads the image store instead, with the same verdict.
    let r = as_cyx(tb, &setup, "", "--quick");
    expect_only_failure(&r, "images:ghost", "image store", ABSENT_IMAGE);
}

#[test]
fn b08_no_linger_with_a_scheduled_tenant_fails_linger() {
    let tb = Testbed::get();
    let user = TempUser::new(tb, "cyxnl", 1501);
    // A worktree tenant needs no images, so only linger can fail.
    let setup = format!(
        "{}cat > \"$D/config/cyclix/tenants/nightly.yaml\" <<'EOF'\n{}EOF",
        repo_sh(user.name, "nightly"),
        spec("nightly", "localhost/x:latest")
            .tier("worktree")
            .extra_yaml("schedule: { on_calendar: \"*-*-* 02:00:00\" }")
            .yaml()
    );
    let r = in_session(tb, user.name, &setup, "");
    expect_only_failure(
        &r,
        "linger",
        "tenants nightly are scheduled",
        "loginctl enable-linger cyxnl",
    );
}

#[test]
fn b09_unreachable_user_bus_fails_user_manager_and_linger_is_still_read() {
    let tb = Testbed::get();
    let r = as_cyx(
        tb,
        "",
        "-E DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent/bus",
        "--quick",
    );
    expect_only_failure(
        &r,
        "user-manager",
        "unix:path=/nonexistent/bus",
        "loginctl enable-linger cyx",
    );
    // logind is on the system bus: linger is read even without the user bus.
    assert_eq!(check(&r.1, "linger")["status"], "pass", "{:#}", r.1);
}

#[test]
fn b09_runtime_dir_of_another_user_fails_runtime_dir() {
    let tb = Testbed::get();
    let user = TempUser::new(tb, "cyxrd", 1502);
    // As after `su` without `-`: XDG_RUNTIME_DIR still names someone else's (cyx's) dir.
    let r = in_session(tb, user.name, "", "XDG_RUNTIME_DIR=/run/user/1000");
    expect_only_failure(
        &r,
        "runtime-dir",
        "$XDG_RUNTIME_DIR is /run/user/1000 (owned by uid 1000), not /run/user/1502",
        "machinectl shell cyxrd@",
    );
}

/// On the host (no testbed): the JSON schema's shape, and exit 2 when cyclix itself fails.
#[test]
fn json_schema_on_any_host_and_exit_2_when_cyclix_fails() {
    let home = tempfile::tempdir().expect("tmp home");
    let out = Command::new(env!("CARGO_BIN_EXE_cyclix"))
        .args(["check", "--quick", "--json"])
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .output()
        .expect("run cyclix");
    let code = out.status.code();
    assert!(matches!(code, Some(0 | 1)), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["schema"], "cyclix-check/1");
    assert_eq!(v["quick"], true);
    let checks = v["checks"].as_array().expect("checks");
    assert_eq!(checks[0]["id"], "podman");
    assert_eq!(checks.last().expect("last")["id"], "outcome");
    let fails = checks.iter().filter(|c| c["status"] == "fail").count();
    assert_eq!(v["summary"]["fail"], fails);
    assert_eq!(v["ok"], fails == 0);
    assert_eq!(code, Some(i32::from(fails != 0)));
    for c in checks {
        let s = c["status"].as_str().expect("status");
        assert!(["pass", "warn", "fail", "skip"].contains(&s), "{c}");
        assert_eq!(c["fix"].is_null(), matches!(s, "pass" | "skip"), "{c}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cyclix"))
        .args(["check", "--quick"])
        .env_remove("HOME")
        .output()
        .expect("run cyclix");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// Runs `cyclix check ARGS --json` in cyx's real session with `env` (shell assignments; `$D`
/// is a fresh directory, removed at exit, the config home is `$D/config`) after `setup` (bash,
/// as cyx). Returns the exit code and the report.
fn check_in_session(tb: &Testbed, setup: &str, env: &str, args: &str) -> (i32, serde_json::Value) {
    let out = tb.user_sh(&format!(
        "set -euo pipefail\nD=$(mktemp -d); trap 'rm -rf \"$D\"' EXIT; mkdir -p \"$D/config/cyclix/tenants\"\n\
         {setup}\nrc=0; env {env} XDG_CONFIG_HOME=\"$D/config\" {} check {args} --json || rc=$?\nexit $rc",
        tb.cyclix_bin()
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "check did not print JSON ({e}); exit {:?}\n--- stdout ---\n{stdout}--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), report)
}

/// `(gVisor's release, the host's)` from a passed `gvisor` check's "uname -r X, the host's Y".
fn kernels(found: &str) -> (String, String) {
    let rest = found
        .split_once("(uname -r ")
        .unwrap_or_else(|| panic!("no `uname -r` in {found:?}"))
        .1;
    let (inside, rest) = rest
        .split_once(", the host's ")
        .expect("the host's release");
    let host = rest.split([';', ')']).next().unwrap_or_default();
    (inside.to_string(), host.to_string())
}

/// The testbed has Debian's runsc (testbed.sh PKGS): `gvisor` passes naming its version, its
/// runtime flags and a throwaway container that saw a kernel release other than the host's,
/// and the container is gone.
#[test]
fn gvisor_passes_with_runscs_version_and_a_kernel_other_than_the_hosts() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    let facts = expect_success(
        &tb.user_sh("runsc --version | head -n1; uname -r"),
        "runsc --version and uname -r",
    );
    let mut lines = facts.lines();
    let version = lines
        .next()
        .and_then(|l| l.strip_prefix("runsc version "))
        .expect("runsc names its version")
        .trim()
        .to_string();
    let host = lines.next().expect("uname -r").trim().to_string();
    let (code, report) = check_in_session(tb, "", "", "");
    let c = check(&report, "gvisor");
    let found = c["found"].as_str().unwrap_or_default();
    assert_eq!(c["status"], "pass", "{c:#}");
    assert_eq!(code, 0, "{report:#}");
    assert!(
        found.starts_with(&format!(
            "runsc {version} (/usr/bin/runsc; runtime flags network=host"
        )),
        "{found}"
    );
    assert!(
        found.contains("a throwaway container ran on gVisor's kernel"),
        "{found}"
    );
    let (inside, reported_host) = kernels(found);
    assert_eq!(reported_host, host, "{found}");
    assert!(!inside.is_empty() && inside != host, "{found}");
    // The testbed's user manager delegates no memory/pids controller (testbed/README.md).
    assert!(
        found.contains("ignore-cgroups") && found.contains("sets no cgroup limits"),
        "{found}"
    );
    let left = expect_success(
        &tb.user_sh("podman ps -aq --filter label=io.cyclix.check"),
        "list check containers",
    );
    assert_eq!(left.trim(), "", "the gVisor proof left its container");
}

/// Positive control of the proof: a "runsc" that answers `--version` as runsc does but runs
/// the container on crun (the host's kernel) fails `gvisor`, naming both releases.
#[test]
fn a_runsc_that_runs_on_the_hosts_kernel_fails_gvisor() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    let shim = r#"cat > "$D/runsc" <<'EOF'
#!/bin/sh
[ "$1" = --version ] && { echo "runsc version 0.0~shim"; exit 0; }
for a; do shift; case $a in --network=*|--host-fifo=*|--oci-seccomp|--ignore-cgroups) ;; *) set -- "$@" "$a" ;; esac; done
exec /usr/bin/crun "$@"
EOF
chmod 755 "$D" "$D/runsc""#;
    let (code, report) = check_in_session(tb, shim, "CYCLIX_RUNSC=\"$D/runsc\"", "");
    assert_eq!(failed(&report), ["gvisor"], "{report:#}");
    assert_eq!(code, 1);
    let c = check(&report, "gvisor");
    let found = c["found"].as_str().unwrap_or_default();
    assert!(
        found.starts_with("runsc 0.0~shim (") && found.contains("ran on the HOST's kernel"),
        "{found}"
    );
    let fix = c["fix"].as_str().unwrap_or_default();
    assert!(
        fix.contains("--runtime-flag=network=host") && fix.contains("uname -r"),
        "{fix}"
    );
}

/// runsc unavailable (`$CYCLIX_RUNSC` names nothing): a tenant with `tier: gvisor` fails
/// `gvisor` with the install fix (and its own spec check: `cyclix run` refuses it); with no
/// such tenant the tier is only said to be unavailable.
#[test]
fn runsc_missing_fails_gvisor_only_for_a_tenant_with_tier_gvisor() {
    let _shared = crate::common::testbed::shared();
    let tb = Testbed::get();
    let missing = "CYCLIX_RUNSC=/nonexistent/runsc";
    let (_, report) = check_in_session(tb, "", missing, "--quick");
    let c = check(&report, "gvisor");
    assert_eq!(c["status"], "pass", "{c:#}");
    assert!(
        c["found"]
            .as_str()
            .unwrap_or_default()
            .starts_with("tier gvisor is unavailable ($CYCLIX_RUNSC is /nonexistent/runsc"),
        "{c:#}"
    );
    let setup = format!(
        "cat > \"$D/config/cyclix/tenants/sealed.yaml\" <<'EOF'\n{}EOF",
        spec("sealed", "localhost/tb-busybox:latest")
            .tier("gvisor")
            .yaml()
    );
    let (code, report) = check_in_session(tb, &setup, missing, "--quick --tenant sealed");
    assert_eq!(code, 1, "{report:#}");
    let f = failed(&report);
    assert!(
        f.contains(&"gvisor".to_string()) && f.contains(&"spec:sealed".to_string()),
        "{report:#}"
    );
    let c = check(&report, "gvisor");
    assert!(
        c["found"]
            .as_str()
            .unwrap_or_default()
            .contains("tenant(s) sealed ask for it"),
        "{c:#}"
    );
    assert!(
        c["fix"]
            .as_str()
            .unwrap_or_default()
            .contains("`sudo apt install runsc`"),
        "{c:#}"
    );
    assert!(
        check(&report, "spec:sealed")["found"]
            .as_str()
            .unwrap_or_default()
            .contains("tier `gvisor` is configured but gVisor's runsc is not usable"),
        "{report:#}"
    );
}
