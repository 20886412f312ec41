//! The real binary, as a user runs it: exit codes 0/1/2, messages naming `file:line:key`.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::tenant::Tenant;

mod bad_input;
mod schema;

fn cyclix(args: &[&str]) -> Output {
    let home = tempfile::tempdir().expect("tmp home");
    let runtime = tempfile::tempdir().expect("tmp runtime");
    Command::new(env!("CARGO_BIN_EXE_cyclix"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("HOME", home.path())
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env_remove("XDG_CONFIG_HOME")
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .output()
        .expect("run cyclix")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn spec_validate_accepts_a_good_spec() {
    let o = cyclix(&["spec", "validate", "tests/fixtures/spec/good.yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("ok (tenant acme, tier container)"));
}

#[test]
fn spec_validate_names_file_line_and_key_and_exits_1() {
    let o = cyclix(&["spec", "validate", "tests/fixtures/spec/bad-keys.yaml"]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains("tests/fixtures/spec/bad-keys.yaml:14:1: egres: unknown key `egres`"),
        "{err}"
    );
    assert!(err.contains("did you mean `egress`?"), "{err}");
}

#[test]
fn spec_validate_json_lists_diagnostics() {
    let o = cyclix(&[
        "spec",
        "validate",
        "--json",
        "tests/fixtures/spec/bad-types.yaml",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let first = &v["diagnostics"][0];
    assert_eq!(first["line"], 1);
    assert_eq!(first["path"], "tenant");
}

#[test]
fn spec_validate_refuses_what_quadlet_would_mangle() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = dir.path().join("semi.yaml");
    let spec = Tenant::new("semi")
        .image("localhost/a")
        .task("x")
        .agent_cmd("[find, ., -exec, rm, '{}', ';']")
        .gate_cmd("[true1]")
        .no_timeouts();
    std::fs::write(&p, spec.yaml()).expect("write");
    let o = cyclix(&["spec", "validate", p.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("agent.command[5]"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn a_usage_error_exits_2_with_the_usage() {
    // docs/verbs.md and src/exit.rs: a wrong command line is exit 2 (clap's usage error).
    let o = cyclix(&["run", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("--no-such-flag") && err.contains("Usage:"),
        "{err}"
    );
}

#[test]
fn missing_file_is_a_tool_failure_exit_2() {
    let o = cyclix(&["spec", "validate", "/nonexistent/spec.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("/nonexistent/spec.yaml"));
}

#[test]
fn oversized_file_is_refused_before_parsing() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = dir.path().join("big.yaml");
    std::fs::write(&p, "# x\n".repeat(70_000)).expect("write");
    let o = cyclix(&["spec", "validate", p.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("larger than 262144 bytes"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn tier_describe_json_has_the_four_tiers_from_one_table() {
    let o = cyclix(&["tier", "describe", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let tiers: Vec<&str> = v
        .as_array()
        .expect("array")
        .iter()
        .map(|t| t["tier"].as_str().expect("tier"))
        .collect();
    assert_eq!(tiers, ["direct", "worktree", "container", "gvisor"]);
    for (t, f) in v
        .as_array()
        .expect("array")
        .iter()
        .zip(cyclix::tier::TIERS.iter())
    {
        assert_eq!(t["isolates_rights"], f.isolates_rights);
        assert_eq!(
            t["does_not_protect_against"]
                .as_array()
                .expect("list")
                .len(),
            f.does_not_protect_against.len()
        );
    }
    let human = text(&cyclix(&["tier", "describe", "container"]).stdout);
    assert!(
        human.contains("does not protect against:") && human.contains("kernel"),
        "{human}"
    );
}

#[test]
fn render_demo_to_stdout_and_to_a_directory() {
    let o = cyclix(&["render", "--demo", "--run-id", "demo-1", "--stdout"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for f in [
        "quadlet/cyclix-demo-1.network",
        "quadlet/cyclix-demo-1-agent.container",
        "run/squid.conf",
        "user/cyclix-run@.service",
    ] {
        assert!(out.contains(&format!("# ==> {f} <==")), "{f} missing");
    }
    assert!(
        text(&o.stderr).contains("NOT pinned by digest"),
        "the unpinned opt-out must be loud"
    );
    let dir = tempfile::tempdir().expect("tmp");
    let o = cyclix(&[
        "render",
        "--demo",
        "--run-id",
        "demo-1",
        "--backend",
        "plain",
        "--out",
        dir.path().to_str().expect("utf8"),
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert!(Path::new(&dir.path().join("units/cyclix-demo-1-agent.service")).is_file());
}

#[test]
fn render_rejects_a_bad_run_id() {
    let o = cyclix(&["render", "--demo", "--run-id", "Bad_ID", "--stdout"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("--run-id"));
}

#[test]
fn a_run_of_a_tenant_without_a_spec_is_a_finding_naming_the_path_and_the_fix() {
    let o = cyclix(&["run", "nosuch"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("no spec for tenant `nosuch` at ")
            && err.contains(".config/cyclix/tenants/nosuch.yaml")
            && err.contains("cyclix demo setup"),
        "{err}"
    );
}

#[test]
fn twin_refuses_a_host_tier_and_names_the_fix() {
    let dir = tempfile::tempdir().expect("tmp");
    let spec = dir.path().join("min.yaml");
    let yaml = std::fs::read_to_string("tests/fixtures/spec/minimal.yaml")
        .expect("fixture")
        .replace("tenant: min\n", "tenant: min\ntier: worktree\n");
    std::fs::write(&spec, yaml).expect("spec");
    let o = cyclix(&["twin", "min", "--spec", &spec.display().to_string()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("tier `worktree`") && err.contains("set `tier: container`"),
        "{err}"
    );
    assert!(
        o.stdout.is_empty(),
        "nothing was built: {}",
        text(&o.stdout)
    );
}

#[test]
fn drill_names_the_escapes_for_an_unknown_one_and_refuses_a_host_tier() {
    let o = cyclix(&["drill", "min", "--only", "ssh"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--only: unknown escape `ssh`; the escapes are ssh-key, write-outside"),
        "{err}"
    );
    // A host tier: the agent has the user's rights, so the drill's escapes would be real.
    let home = tempfile::tempdir().expect("tmp home");
    let runtime = tempfile::tempdir().expect("tmp runtime");
    let repo = home.path().join("repo");
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("git");
        assert!(o.status.success(), "git {args:?}: {}", text(&o.stderr));
    };
    std::fs::create_dir_all(&repo).expect("repo");
    git(&["init", "-q", "-b", "main"]);
    git(&["commit", "-q", "--allow-empty", "-m", "base"]);
    let tenants = home.path().join(".config/cyclix/tenants");
    std::fs::create_dir_all(&tenants).expect("tenants");
    let yaml = std::fs::read_to_string("tests/fixtures/spec/minimal.yaml")
        .expect("fixture")
        .replace("tenant: min\n", "tenant: min\ntier: worktree\n")
        .replace("/srv/min", &repo.display().to_string())
        .replace("base: 0123abc", "base: main")
        .replace("{ file: ~/tasks/min.md }", "{ text: hi }");
    std::fs::write(tenants.join("min.yaml"), yaml).expect("spec");
    let o = Command::new(env!("CARGO_BIN_EXE_cyclix"))
        .args(["drill", "min"])
        .env("HOME", home.path())
        .env("XDG_RUNTIME_DIR", runtime.path())
        .env_remove("XDG_CONFIG_HOME")
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
        .output()
        .expect("run cyclix");
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("min.yaml: tenant min has `tier: worktree`")
            && err.contains("fix: set `tier: container`"),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "{}", text(&o.stdout));
    assert!(
        !home.path().join(".ssh").exists()
            && std::fs::read_dir(runtime.path()).expect("rt").count() == 0,
        "nothing was planted"
    );
}

#[test]
fn images_build_preset_refuses_an_unknown_preset_and_names_a_missing_package() {
    let o = cyclix(&["images", "build", "--preset", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("--preset nope: no such preset image (known: claude-code, codex"),
        "{}",
        text(&o.stderr)
    );
    let empty = tempfile::tempdir().expect("tmp");
    let dir = empty.path().to_str().expect("utf-8");
    let o = cyclix(&["images", "build", "--preset", "codex", "--packages", dir]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    let pkg = &cyclix::images::agents::packages("codex").expect("lock")[0];
    for want in [
        format!(
            "package @openai/codex@{} of preset codex is missing: {dir}/sha512/{}",
            pkg.version, pkg.hex
        ),
        format!(
            "lock line images/agents/packages.lock:{}: codex npm @openai/codex",
            pkg.line
        ),
        "fix: run `scripts/fetch-agent-packages codex`".to_string(),
    ] {
        assert!(err.contains(&want), "missing {want:?} in:\n{err}");
    }
}

#[test]
fn a_closed_stdout_is_no_error_and_no_panic() {
    // `cyclix status | head -1` panicked (exit 101) when head had gone: stdout's reader is
    // closed before cyclix writes a byte here, for a verb that prints with `outln!` (init)
    // and one that prints through `print_out` (spec schema).
    let home = tempfile::tempdir().expect("tmp home");
    let repo = home.path().join("shop");
    std::fs::create_dir_all(&repo).expect("repo");
    let git = Command::new("git")
        .args(["init", "-q", "-b", "main"])
        .current_dir(&repo)
        .status()
        .expect("git");
    assert!(git.success());
    for argv in [
        vec![
            "init".to_string(),
            "shop".into(),
            "--repo".into(),
            repo.display().to_string(),
        ],
        vec!["spec".into(), "schema".into()],
    ] {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let o = Command::new(env!("CARGO_BIN_EXE_cyclix"))
            .args(&argv)
            .env("HOME", home.path())
            .env_remove("XDG_CONFIG_HOME")
            .stdout(writer)
            .output()
            .expect("run cyclix");
        assert_eq!(o.status.code(), Some(0), "{argv:?}: {}", text(&o.stderr));
        assert!(o.stderr.is_empty(), "{argv:?}: {}", text(&o.stderr));
    }
    assert!(
        home.path()
            .join(".config/cyclix/tenants/shop.yaml")
            .exists(),
        "init did its work before it printed"
    );
}

#[test]
fn logs_and_runs_refuse_a_tenant_that_does_not_exist() {
    // `cyclix logs shpo` said "shpo has no run yet; cyclix start shpo starts one" and `cyclix
    // runs shpo` "no runs recorded", exit 0: a mistyped name is named as `status` names it.
    let home = tempfile::tempdir().expect("tmp home");
    for verb in ["logs", "runs"] {
        let o = Command::new(env!("CARGO_BIN_EXE_cyclix"))
            .args([verb, "shpo"])
            .env("HOME", home.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_STATE_HOME")
            .output()
            .expect("run cyclix");
        assert_eq!(o.status.code(), Some(1), "{verb}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("no tenant `shpo`"),
            "{verb}: {}",
            text(&o.stderr)
        );
    }
    // A tenant whose records outlived its spec still has a history.
    let records = home.path().join(".local/state/cyclix/runs/old");
    std::fs::create_dir_all(&records).expect("records");
    let o = Command::new(env!("CARGO_BIN_EXE_cyclix"))
        .args(["runs", "old"])
        .env("HOME", home.path())
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_STATE_HOME")
        .output()
        .expect("run cyclix");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn runs_svg_refuses_a_missing_directory_and_draws_no_runs_as_a_picture() {
    // `cyclix runs TENANT --svg FILE` (issue 32 item 5) without the testbed: the directory
    // check, the options clap refuses, and a tenant with no record yet (e2e_runs_svg draws a
    // real run).
    let home = tempfile::tempdir().expect("tmp home");
    std::fs::create_dir_all(home.path().join(".local/state/cyclix/runs/old")).expect("records");
    let runs = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cyclix"))
            .arg("runs")
            .args(args)
            .env("HOME", home.path())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_STATE_HOME")
            .output()
            .expect("run cyclix")
    };
    let missing = home.path().join("no-such-dir/runs.svg");
    let o = runs(&["old", "--svg", missing.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains(&format!(
            "the directory {} does not exist (create it first)",
            home.path().join("no-such-dir").display()
        )),
        "{}",
        text(&o.stderr)
    );
    assert!(!missing.exists());
    let file = home.path().join("runs.svg");
    let o = runs(&["old", "--svg", file.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        format!("wrote {}: 0 runs of old, 0 phases\n", file.display())
    );
    let svg = std::fs::read_to_string(&file).expect("the picture");
    let doc = roxmltree::Document::parse(&svg).expect("SVG is XML");
    assert!(doc.root_element().has_tag_name("svg"));
    assert!(svg.contains("no runs recorded"), "{svg}");
    // A directory as FILE, --json with --svg, --last 0: refused.
    let o = runs(&["old", "--svg", home.path().to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("it is a directory"),
        "{}",
        text(&o.stderr)
    );
    // A symlink (or a device, a FIFO) as FILE is refused, not replaced by the rename (attack
    // review: as root, `--svg /dev/stdout` replaced the device's link); the link stays.
    let link = home.path().join("link.svg");
    std::os::unix::fs::symlink(&file, &link).expect("symlink");
    let o = runs(&["old", "--svg", link.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("it is not a regular file"),
        "{}",
        text(&o.stderr)
    );
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("the link")
            .file_type()
            .is_symlink()
    );
    // `-`: the picture on stdout, what was written on stderr, no file named `-`.
    let o = runs(&["old", "--svg", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).starts_with("<svg "), "{}", text(&o.stdout));
    assert!(
        text(&o.stderr).contains("wrote the picture to stdout: 0 runs of old"),
        "{}",
        text(&o.stderr)
    );
    for bad in [
        &["old", "--json", "--svg", "x.svg"][..],
        &["old", "--last", "0"],
    ] {
        let o = runs(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", text(&o.stderr));
    }
    let o = runs(&["old", "--last", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "no runs recorded\n");
}

#[test]
fn check_tenant_fails_repo_for_a_base_that_names_no_commit() {
    // `repo.base: mian` passed `spec validate` and `check --tenant`, then the run failed in
    // prepare: `check` resolves it in the real repository (`repo:T`).
    // HOME, and a runtime dir apart from it (a project under the runtime dir is refused).
    let home = tempfile::Builder::new()
        .prefix("cyx-home")
        .tempdir()
        .expect("tmp home");
    let runtime = tempfile::tempdir().expect("tmp runtime");
    let repo = home.path().join("src/min");
    std::fs::create_dir_all(&repo).expect("repo");
    for args in [
        &["init", "-q", "-b", "main"][..],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "base",
        ],
    ] {
        let o = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("git");
        assert!(o.status.success(), "git {args:?}: {}", text(&o.stderr));
    }
    let tenants = home.path().join(".config/cyclix/tenants");
    std::fs::create_dir_all(&tenants).expect("tenants");
    let status = |base: &str| {
        let yaml = std::fs::read_to_string("tests/fixtures/spec/minimal.yaml")
            .expect("fixture")
            .replace("/srv/min", &repo.display().to_string())
            .replace("base: 0123abc", &format!("base: {base}"))
            .replace("{ file: ~/tasks/min.md }", "{ text: hi }");
        std::fs::write(tenants.join("min.yaml"), yaml).expect("spec");
        let o = Command::new(env!("CARGO_BIN_EXE_cyclix"))
            .args(["check", "--quick", "--json", "--tenant", "min"])
            .env("HOME", home.path())
            .env_remove("XDG_CONFIG_HOME")
            .env("XDG_RUNTIME_DIR", runtime.path())
            .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
            .output()
            .expect("run cyclix");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("check --json");
        let c = v["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .find(|c| c["id"] == "repo:min")
            .cloned()
            .unwrap_or_else(|| panic!("no repo:min in {v:#}"));
        (
            c["status"].as_str().unwrap_or_default().to_string(),
            c["found"].to_string(),
        )
    };
    let (st, found) = status("mian");
    assert_eq!(st, "fail", "{found}");
    assert!(found.contains("repo.base `mian`"), "{found}");
    assert_eq!(
        status("main").0,
        "pass",
        "positive control: the real branch"
    );
}
