//! The aider and Gemini CLI presets' wrappers (offline, no testbed): a work tree holding a file
//! the CLI would load as its own configuration (measured: planted ones took effect in the next
//! run, docs/agents.md) makes the wrapper refuse to start, exit 2, naming the file; without one
//! the wrapper execs the CLI with the preset's words and the run's (the positive control: a
//! stand-in CLI on PATH prints its argv).

use std::process::Command;

/// Runs `preset`'s argv (`sh -c SCRIPT NAME --model m`) in a fresh work tree holding `planted`
/// (if any), with a stand-in `cli` on PATH; returns (exit code, stdout, stderr).
fn run(preset: &str, cli: &str, planted: Option<&str>) -> (i32, String, String) {
    let row = cyclix::agents::presets::find(preset).expect("row");
    let work = tempfile::tempdir().expect("tempdir");
    let bin = tempfile::tempdir().expect("tempdir");
    let stub = bin.path().join(cli);
    crate::common::write_executable(&stub, "#!/bin/sh\necho STUB-RAN \"$@\"\n");
    if let Some(p) = planted {
        let path = work.path().join(p);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, "X=1\n").expect("plant");
    }
    let argv = row.argv(Some("m"), None, "/cyclix/task.md");
    let home = work.path().join("home");
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(work.path())
        .env("PATH", format!("{}:/usr/bin:/bin", bin.path().display()))
        .env("HOME", &home)
        .env("OPENAI_API_BASE", "http://127.0.0.1:9/v1")
        .output()
        .expect("run the wrapper");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn aider_and_gemini_wrappers_refuse_a_work_tree_that_would_configure_the_cli() {
    let cases = [
        (
            "aider",
            "aider",
            &[
                ".env",
                ".aider.conf.yml",
                ".aider.model.settings.yml",
                ".aider.model.metadata.json",
            ][..],
        ),
        (
            "gemini-cli",
            "gemini",
            &[".gemini/settings.json", ".gemini/.env"][..],
        ),
    ];
    for (preset, cli, files) in cases {
        // Positive control: with no such file the CLI runs with the preset's words.
        let (code, out, err) = run(preset, cli, None);
        assert_eq!(code, 0, "{preset}: {err}");
        assert!(out.starts_with("STUB-RAN "), "{preset}: {out}");
        assert!(out.contains("--model m"), "{preset}: {out}");
        for f in files {
            let (code, out, err) = run(preset, cli, Some(f));
            assert_eq!(code, 2, "{preset} {f}: {out} {err}");
            assert!(
                !out.contains("STUB-RAN"),
                "{preset} {f}: the CLI must not start: {out}"
            );
            assert!(
                err.contains(&format!("/{f} would configure it")) && err.contains("remove it"),
                "{preset} {f}: {err}"
            );
        }
    }
}
