//! Issue 11, "mounts validated at the right depth", on the real stack: a declared read-only
//! mount below the home directory (the README's `~/datasets/x`) runs, passes every probe (P18
//! allows it because the probe context declares it) and the agent reads it; a mount of the
//! project root is refused before anything of a run exists, naming `mounts[0].source` and a
//! fix; a git directory deeper than `spec validate`'s walk is found by `cyclix check` and by
//! the run's preflight. (Podman's storage from `podman info` is covered by unit tests over
//! facts: on the testbed it lies below `~/.local/share` and `/run`, which validate refuses.)

use crate::common::run::{leftovers, prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

/// The text the agent checks for in the mounted file.
const MARKER: &str = "cyclix-e2e-mount-marker-4711";

#[test]
fn a_read_only_mount_below_home_runs_passes_the_probes_and_the_agent_reads_it() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    expect_success(
        &tb.user_sh(&format!(
            "set -e; rm -rf ~/datasets/e2e-mx; mkdir -p ~/datasets/e2e-mx/sub; \
             echo {MARKER} > ~/datasets/e2e-mx/sub/hello.txt"
        )),
        "create the data set",
    );
    // The agent fails (and so the run) unless it reads the marker through /mnt/x and cannot
    // write there; then it does the demo's fix.
    let t = Tenant::new("e2e-mount-ro").agent_cmd(&format!(
            "[sh, -c, \"grep -q {MARKER} /mnt/x/sub/hello.txt && ! touch /mnt/x/w 2>/dev/null && exec cyclix-demo-agent\"]"
        )).extra_yaml("mounts:\n  - { source: ~/datasets/e2e-mx, target: /mnt/x, read_only: true }").write(tb);
    let c = tb.cyclix_bin();
    let validate = tb.user_sh(&format!(
        "{c} spec validate ~/.config/cyclix/tenants/{t}.yaml"
    ));
    assert!(validate.status.success(), "spec validate: {validate:?}");
    let out = start(tb, &t);
    let rec = record(tb, &t);
    assert!(out.status.success(), "the run failed: {out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    crate::e2e_boundary::assert_all_probes_pass(&rec);
    let p18 = rec["probes"]
        .as_array()
        .and_then(|p| p.iter().find(|x| x["id"] == "P18"))
        .expect("P18 reported");
    assert_eq!(p18["verdict"], "PASS", "{p18:#}");
    assert_eq!(rec["agent_exit"].as_i64(), Some(0), "{rec:#}");
    let run_id = rec["run_id"].as_str().expect("run id");
    let left = leftovers(tb, run_id, &t);
    assert!(
        left.trim().is_empty(),
        "left behind by run {run_id}:\n{left}"
    );
}

#[test]
fn a_writable_mount_of_the_project_root_is_refused_before_anything_exists() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-mount-repo")
        .extra_yaml(
            "mounts:\n  - { source: ~/src/e2e-mount-repo, target: /mnt/p, read_only: false }",
        )
        .write(tb);
    let c = tb.cyclix_bin();
    let out = tb.user_sh(&format!(
        "rm -rf ~/.local/state/cyclix/runs/{t} ~/.local/share/cyclix/worktrees/{t}
         {c} spec validate ~/.config/cyclix/tenants/{t}.yaml; echo \"rc=$?\"
         {c} run {t}; echo \"rc=$?\"
         {c} check --quick --tenant {t}; echo \"rc=$?\""
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rcs: Vec<&str> = stdout.lines().filter(|l| l.starts_with("rc=")).collect();
    assert_eq!(
        rcs,
        ["rc=1", "rc=1", "rc=1"],
        "findings exit 1:\n{stdout}\n{stderr}"
    );
    let want = format!(
        "/home/cyx/.config/cyclix/tenants/{t}.yaml:15:15: mounts[0].source: mount source `/home/cyx/src/{t}` is the project repository"
    );
    // Once from `spec validate`, once from `run` (it loads the same spec), once in the check
    // table's FAIL line for spec:T.
    assert_eq!(stderr.matches(&want).count(), 2, "{stderr}");
    assert_eq!(
        stderr
            .matches("fix: remove this mount: the agent already works on a private checkout of the project at /work")
            .count(),
        2,
        "{stderr}"
    );
    assert!(stdout.contains(&want), "check names it: {stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("FAIL") && l.contains(&format!("spec:{t}"))),
        "{stdout}"
    );
    // Nothing of a run: no record, no worktree, no container, no network, no run branch.
    let rest = expect_success(
        &tb.user_sh(&format!(
            "ls -A ~/.local/state/cyclix/runs/{t} ~/.local/share/cyclix/worktrees/{t} 2>/dev/null
             podman ps -a -q --filter label=io.cyclix.tenant={t}
             podman network ls -q --filter label=io.cyclix.tenant={t}
             git -C ~/src/{t} branch --list 'cyclix/*'; true"
        )),
        "list what a run would have made",
    );
    assert!(
        rest.trim().is_empty(),
        "the refused run left something:\n{rest}"
    );
}

#[test]
fn a_git_dir_deep_in_a_source_is_found_by_check_and_by_the_run_not_by_validate() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    expect_success(
        &tb.user_sh(
            "set -e; rm -rf ~/datasets/e2e-deep; mkdir -p ~/datasets/e2e-deep/a/b/c/d/e/f; \
             git init -q ~/datasets/e2e-deep/a/b/c/d/e/f/clone",
        ),
        "create a data set with a clone deep inside",
    );
    let t = Tenant::new("e2e-mount-deep")
        .extra_yaml("mounts:\n  - { source: ~/datasets/e2e-deep, target: /mnt/d }")
        .write(tb);
    let c = tb.cyclix_bin();
    let out = tb.user_sh(&format!(
        "rm -rf ~/.local/state/cyclix/runs/{t}
         {c} spec validate ~/.config/cyclix/tenants/{t}.yaml; echo \"rc=$?\"
         {c} check --quick --tenant {t}; echo \"rc=$?\"
         {c} run {t}; echo \"rc=$?\"
         ls -A ~/.local/state/cyclix/runs/{t} 2>/dev/null; true"
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let rcs: Vec<&str> = stdout.lines().filter(|l| l.starts_with("rc=")).collect();
    assert_eq!(rcs, ["rc=0", "rc=1", "rc=1"], "{stdout}\n{stderr}");
    assert!(
        stderr.contains("note: mounts[0].source: mount source `/home/cyx/datasets/e2e-deep` was not searched to the end"),
        "validate says its walk stopped: {stderr}"
    );
    let want = format!(
        "/home/cyx/.config/cyclix/tenants/{t}.yaml:15:15: mounts[0].source: mount source `/home/cyx/datasets/e2e-deep` contains a git directory `/home/cyx/datasets/e2e-deep/a/b/c/d/e/f/clone/.git`"
    );
    assert!(stdout.contains(&want), "check: {stdout}");
    assert!(stderr.contains(&want), "run: {stderr}");
    assert!(
        stderr.contains("fix: mount a directory without a git repository in it"),
        "{stderr}"
    );
    assert!(
        !stdout.lines().any(|l| l.ends_with(".json")),
        "a run refused in preflight writes no record: {stdout}"
    );
}
