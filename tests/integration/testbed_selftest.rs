//! The testbed provides the production stack cyclix targets, and the harness passes argv,
//! output and exit codes through. Every later e2e test builds on these facts.

use crate::common::testbed::{Testbed, expect_success};

#[test]
fn testbed_provides_systemd_257_rootless_podman_5_and_quadlet() {
    let tb = Testbed::get();

    // The harness runs as cyx (uid 1000) and as root; exit codes come back unchanged.
    let who = expect_success(&tb.user_sh("id -un; id -u"), "id as cyx");
    assert_eq!(who, "cyx\n1000\n");
    assert_eq!(expect_success(&tb.root_sh("id -u"), "id as root"), "0\n");
    assert_eq!(
        tb.user_sh("exit 7").status.code(),
        Some(7),
        "user exit code"
    );
    assert_eq!(
        tb.root_sh("exit 9").status.code(),
        Some(9),
        "root exit code"
    );

    // `cyclix` is on PATH inside, and it is this checkout's build (issue 19 item 1).
    let on_path = expect_success(
        &tb.user_sh("readlink -f \"$(command -v cyclix)\"; cyclix --version"),
        "cyclix on PATH",
    );
    assert!(
        on_path.starts_with("/src/target/debug/cyclix\ncyclix "),
        "cyclix on PATH: {on_path}"
    );

    // The systemd 257 user manager is reachable over cyx's user bus.
    let version = expect_success(
        &tb.user(&[
            "busctl",
            "--user",
            "get-property",
            "org.freedesktop.systemd1",
            "/org/freedesktop/systemd1",
            "org.freedesktop.systemd1.Manager",
            "Version",
        ]),
        "user manager Version over D-Bus",
    );
    assert!(
        version.starts_with("s \"257"),
        "user manager version: {version}"
    );

    // Podman 5.x, rootless, on cgroup v2 with the systemd cgroup manager.
    let info = expect_success(
        &tb.user(&[
            "podman",
            "info",
            "--format",
            "{{.Version.Version}} {{.Host.Security.Rootless}} {{.Host.CgroupsVersion}} {{.Host.CgroupManager}}",
        ]),
        "podman info",
    );
    let fields: Vec<&str> = info.split_whitespace().collect();
    assert!(
        matches!(fields.as_slice(), [v, "true", "v2", "systemd"] if v.starts_with("5.")),
        "podman info: {info}"
    );

    // Quadlet is installed where systemd's user generator runs it from.
    expect_success(
        &tb.user(&["/usr/libexec/podman/quadlet", "-version"]),
        "quadlet -version",
    );

    // A rootless container runs offline from the imported busybox image; its exit code passes
    // through podman, systemd-run and the harness.
    expect_success(
        &tb.user(&[
            "podman",
            "run",
            "--rm",
            "--network",
            "none",
            "busybox",
            "true",
        ]),
        "podman run busybox true",
    );
    let failed = tb.user(&[
        "podman",
        "run",
        "--rm",
        "--network",
        "none",
        "busybox",
        "false",
    ]);
    assert_eq!(failed.status.code(), Some(1), "podman run busybox false");

    // The project root is visible read-only at /src, including the host-built binary.
    let src = tb.src();
    let script = format!(
        "test -r {src}/Cargo.toml && test -x {bin} && ! touch {src}/.tb-write-probe 2>/dev/null",
        bin = tb.cyclix_bin()
    );
    expect_success(
        &tb.root_sh(&script),
        "read-only /src with the cyclix binary",
    );
}
