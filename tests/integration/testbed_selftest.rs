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
    // `/src/target/debug/cyclix` links to the static build below the target triple's
    // directory (build.rs), which `readlink -f` gives.
    assert!(
        on_path.starts_with(&format!("{}\ncyclix ", tb.cyclix_bin())),
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

/// The model-API stand-in on `api.example` (`testbed/fixtures/standin_api.py`) plays a scripted
/// one-tool-call conversation for the Anthropic Messages and the `OpenAI` Responses API, streamed
/// (SSE) and JSON, over TLS with the test CA, and records each request's step, side flag and
/// whether the script's expected text came back in a tool result. The client is
/// `testbed/fixtures/standin_client.py` (Python's urllib: no agent CLI involved).
#[test]
fn standin_plays_a_scripted_turn_for_anthropic_and_responses() {
    let tb = Testbed::get();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let model = format!("selftest-{}-{nanos}", std::process::id());
    let script = r#"{"tool_calls": ["echo one"], "expect_in_tool_result": "one-out", "final_text": "selftest final", "usage": {"input_tokens": 31, "output_tokens": 7}}"#;
    expect_success(
        &tb.root_sh(&format!(
            "printf '%s' '{script}' >/run/testbed-api/scripts/{model}.json"
        )),
        "write the stand-in script",
    );
    let out = expect_success(
        &tb.user(&[
            "timeout",
            "60",
            "python3",
            &format!("{}/testbed/fixtures/standin_client.py", tb.src()),
            &model,
        ]),
        "standin_client.py",
    );
    let got: serde_json::Value = serde_json::from_str(&out).expect("client output is JSON");
    for (api, tool, args) in [
        (
            "anthropic",
            "Bash",
            serde_json::json!({"command": "echo one", "description": "stand-in step"}),
        ),
        (
            "responses",
            "exec_command",
            serde_json::json!({"cmd": "echo one"}),
        ),
    ] {
        for (form, ctype) in [
            ("stream", "text/event-stream"),
            ("json", "application/json"),
        ] {
            let play = &got[api][form];
            assert_eq!(play["call"]["ctype"], ctype, "{api} {form}: {play}");
            assert_eq!(play["call"]["name"], tool, "{api} {form} tool: {play}");
            assert_eq!(play["call"]["args"], args, "{api} {form} args: {play}");
            assert_eq!(play["final"]["ctype"], ctype, "{api} {form}: {play}");
            assert_eq!(
                play["final"]["text"], "selftest final",
                "{api} {form}: {play}"
            );
            assert_eq!(
                play["final"]["usage"],
                serde_json::json!([31, 7]),
                "{api} {form}: {play}"
            );
        }
    }
    assert_eq!(got["anthropic"]["stream"]["call"]["stop"], "tool_use");
    assert_eq!(got["anthropic"]["stream"]["final"]["stop"], "end_turn");
    assert_eq!(
        got["side"], "stand-in: side",
        "a request without tools: {got}"
    );

    let results = expect_success(
        &tb.root_sh(&format!("cat /run/testbed-api/results/{model}.jsonl")),
        "stand-in results",
    );
    let rows: Vec<serde_json::Value> = results
        .lines()
        .map(|l| serde_json::from_str(l).expect("results line is JSON"))
        .collect();
    let main: Vec<_> = rows.iter().filter(|r| r["side"] == false).collect();
    assert_eq!(main.len(), 8, "2 APIs x 2 forms x 2 steps: {results}");
    for r in &main {
        let step = r["step"].as_u64().expect("step");
        assert_eq!(
            r["expect_found"],
            step == 1,
            "expect_found only with the tool result: {r}"
        );
    }
    assert_eq!(
        rows.iter().filter(|r| r["side"] == true).count(),
        1,
        "{results}"
    );
}
