//! What `cyclix install` puts where users already are, on the real testbed (issue 18): the man
//! pages (`man cyclix`, the unit templates' pages, and `systemd-analyze verify` finding every
//! `Documentation=man:` link), bash completion through the installed completion function
//! (verbs and the tenant names from the spec directory), journald fields (`journalctl --user
//! CYCLIX_RUN=R` finds the run's lines), `cyclix runs --json`, `cyclix init` writing a spec
//! that validates and names the installed schema, and `cyclix uninstall` leaving no unit file
//! (nor page, completion or schema) while specs and records stay. One setup, one run.
//! Exclusive: uninstall removes the templates every other run needs (they are put back).

use crate::common::run::{prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// `man` finds pages below `~/.local/share/man` through `~/.local/bin` in `PATH` (man-db's
/// `bin` → `share/man` mapping), as on a Debian login with `~/.local/bin`.
const PATH: &str =
    "export PATH=$HOME/.local/bin:$PATH; mkdir -p ~/.local/bin; export MANPAGER=cat MANWIDTH=100;";

fn sh(tb: &Testbed, script: &str, what: &str) -> String {
    expect_success(&tb.user_sh(&format!("{PATH} {script}")), what)
}

/// `man` shows cyclix(1) and a unit template's page, and `systemd-analyze verify` finds
/// every `Documentation=man:` link of the installed templates (a dangling one is reported).
fn man_pages_resolve(tb: &Testbed, t: &str) {
    // Man pages: cyclix(1), a verb, a unit template's page, and every man: link resolves.
    let page = sh(tb, "man cyclix", "man cyclix");
    assert!(
        page.contains("cyclix-runs(1)") || page.contains("runs"),
        "{page}"
    );
    let unit = sh(tb, "man 5 cyclix-run@.service", "man 5 cyclix-run@.service");
    assert!(unit.contains("ExecStart=@CYCLIX@ run %i"), "{unit}");
    let verify = format!(
        "D=$(mktemp -d); for u in cyclix-run@.service cyclix-tick@.service; do \
           cp ~/.config/systemd/user/$u $D/${{u/@/@{t}}}; done; \
         systemd-analyze --user verify $D/cyclix-run@{t}.service $D/cyclix-tick@{t}.service 2>&1; \
         sed -i 's|^Documentation=.*|Documentation=man:cyclix-no-such-page(1)|' $D/cyclix-run@{t}.service; \
         echo CONTROL; systemd-analyze --user verify $D/cyclix-run@{t}.service 2>&1; true"
    );
    let out = sh(
        tb,
        &verify,
        "systemd-analyze verify the installed templates",
    );
    let (real, control) = out.split_once("CONTROL").expect("marker");
    assert_eq!(
        real.trim(),
        "",
        "verify must be silent: every man: link resolves"
    );
    // Positive control: a link to a page that does not exist is reported.
    assert!(control.contains("cyclix-no-such-page"), "{control}");
}

/// `journalctl --user CYCLIX_RUN=R` shows the run's lines from its unit, each with the tenant
/// and a phase; another run id shows none.
fn journal_has_the_run(tb: &Testbed, t: &str, run_id: &str) {
    let journal = sh(
        tb,
        &format!(
            "journalctl --user CYCLIX_RUN={run_id} -o json --output-fields=MESSAGE,CYCLIX_TENANT,CYCLIX_PHASE,_SYSTEMD_USER_UNIT"
        ),
        "journalctl CYCLIX_RUN",
    );
    let lines: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str(l).expect("journal JSON"))
        .collect();
    let phases: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["CYCLIX_PHASE"].as_str())
        .collect();
    for p in ["prepare", "agent", "teardown", "audit"] {
        assert!(phases.contains(&p), "phase {p} not in {phases:?}");
    }
    assert!(
        lines.iter().all(|l| l["CYCLIX_TENANT"] == t
            && l["_SYSTEMD_USER_UNIT"] == format!("cyclix-run@{t}.service")),
        "{journal}"
    );
    let other = sh(
        tb,
        "journalctl --user CYCLIX_RUN=no-such-run -o cat | wc -l",
        "journalctl other run",
    );
    assert_eq!(other.trim(), "0");
}

/// The completion function's candidates for the words `line` (the last one being completed).
fn complete(tb: &Testbed, line: &str) -> Vec<String> {
    let script = format!(
        "source ~/.local/share/bash-completion/completions/cyclix; \
         COMP_WORDS=({line}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); COMP_TYPE=9; \
         _clap_complete_cyclix cyclix \"${{COMP_WORDS[COMP_CWORD]}}\" cyclix; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\""
    );
    sh(tb, &script, &format!("complete `{line}`"))
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn install_brings_man_pages_completion_journal_fields_history_init_and_uninstall() {
    let _exclusive = crate::common::testbed::exclusive();
    let tb = prepared();
    let c = tb.cyclix_bin();
    let t = Tenant::new("e2e-docs")
        .agent_cmd(r#"[sh, -c, "echo e2e-docs agent gives up; exit 3"]"#)
        .extra_yaml("notify:\n  command: [sh, -c, 'cat > ~/e2e-docs-notify.json']")
        .write(tb);
    sh(tb, "rm -f ~/e2e-docs-notify.json", "clear the notify file");
    let out = sh(tb, &format!("{c} install --tenant {t}"), "install");
    assert!(out.contains("man pages below"), "{out}");
    assert!(
        out.contains(&format!(
            "cyclix-run@{t}.service.d/notify.conf (notify: sh -c"
        )),
        "{out}"
    );

    man_pages_resolve(tb, &t);

    // Completion through the installed function: verbs, then the tenants with a spec.
    let verbs = complete(tb, "cyclix ''");
    for v in ["run", "install", "runs", "uninstall", "completions", "init"] {
        assert!(verbs.iter().any(|w| w == v), "{v} not in {verbs:?}");
    }
    assert!(
        !verbs.iter().any(|w| w == "probe"),
        "hidden verb offered: {verbs:?}"
    );
    let tenants = complete(tb, "cyclix start e2e-do");
    assert_eq!(tenants.as_slice(), std::slice::from_ref(&t), "tenant names");

    // A failing run: its lines in the journal carry CYCLIX_RUN, CYCLIX_TENANT, CYCLIX_PHASE.
    let run = start(tb, &t);
    assert!(
        !run.status.success(),
        "the agent fails, so the run unit fails"
    );
    let rec = record(tb, &t);
    assert_eq!(rec["result"], "agent_failed", "{rec:#}");
    let run_id = rec["run_id"].as_str().expect("run id").to_owned();
    journal_has_the_run(tb, &t, &run_id);

    // The run unit failed, so its OnFailure= ran the notify command with the summary on stdin
    // (started by systemd after the failure: waited for within a deadline).
    let told = sh(
        tb,
        "timeout 60 sh -c 'until test -s ~/e2e-docs-notify.json; do sleep 0.2; done'; cat ~/e2e-docs-notify.json",
        "the notify command's stdin",
    );
    let told: serde_json::Value = serde_json::from_str(&told).expect("summary JSON");
    assert_eq!(told["schema"], "cyclix-notify/1", "{told:#}");
    assert_eq!(told["run_id"], run_id.as_str(), "{told:#}");
    assert_eq!(told["result"], "agent_failed", "{told:#}");
    assert_eq!(told["cause"], "the agent exited 3", "{told:#}");

    // The history lists the run, with its result and cause.
    let runs = sh(tb, &format!("{c} runs {t} --json"), "runs --json");
    let runs: serde_json::Value = serde_json::from_str(&runs).expect("runs JSON");
    assert_eq!(runs["schema"], "cyclix-runs/1");
    let mine = runs["runs"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["run_id"] == run_id.as_str()))
        .unwrap_or_else(|| panic!("{run_id} not in {runs:#}"));
    assert_eq!(mine["result"], "agent_failed");
    assert!(
        mine["duration_ms"].as_u64().is_some_and(|d| d > 0),
        "{mine}"
    );

    // init: a spec that validates and names the installed schema.
    let init = format!(
        "rm -f ~/.config/cyclix/tenants/e2e-docinit.yaml; \
         {c} init e2e-docinit --repo ~/src/{t} && {c} spec validate ~/.config/cyclix/tenants/e2e-docinit.yaml && \
         head -1 ~/.config/cyclix/tenants/e2e-docinit.yaml && python3 -m json.tool ~/.local/share/cyclix/spec.schema.json >/dev/null && echo SCHEMA-OK; \
         {c} init e2e-docinit --repo ~/src/{t}; echo rc=$?"
    );
    let out = sh(tb, &init, "init");
    assert!(
        out.contains("ok (tenant e2e-docinit, tier container)"),
        "{out}"
    );
    assert!(
        out.contains(
            "# yaml-language-server: $schema=file:///home/cyx/.local/share/cyclix/spec.schema.json"
        ),
        "{out}"
    );
    assert!(
        out.contains("SCHEMA-OK") && out.ends_with("rc=1\n"),
        "{out}"
    );

    // uninstall: no unit file, page, completion or schema left; specs and records stay.
    let out = sh(tb, &format!("{c} uninstall"), "uninstall");
    assert!(out.contains("left as they were"), "{out}");
    let left = sh(
        tb,
        &format!(
            "ls ~/.config/systemd/user/ | grep -c '^cyclix' ; \
             systemctl --user list-unit-files 'cyclix-*' --no-legend | wc -l; \
             ls ~/.local/share/man/man1/cyclix* ~/.local/share/bash-completion/completions/cyclix ~/.local/share/cyclix/spec.schema.json 2>/dev/null | wc -l; \
             test -f ~/.config/cyclix/tenants/{t}.yaml && test -f ~/.local/state/cyclix/runs/{t}/{run_id}.json && echo KEPT; \
             rm -f ~/.config/cyclix/tenants/e2e-docinit.yaml; true"
        ),
        "what uninstall left",
    );
    assert_eq!(left, "0\n0\n0\nKEPT\n", "after uninstall");
    // Put the templates back for the tests that follow.
    sh(
        tb,
        &format!("{c} install --tenant demo >/dev/null"),
        "reinstall",
    );
}

/// The README's "Your own repository, in the testbed" block, as a newcomer runs it in the
/// testbed's shell (issue 32 item 1): a repository another user owns (as the bind of the
/// user's own is) is copied, the starter spec edited as the block says, and the run passes
/// with the block's one commit on its branch. The block is read from README.md, so a change
/// that breaks it fails here.
#[test]
fn the_readme_quickstart_in_the_testbed_ends_in_a_passed_run_of_the_users_repository() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let readme = include_str!("../../README.md");
    let block = readme
        .split("<!-- quickstart-in-testbed:")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("README.md holds the quickstart-in-testbed block");
    assert!(block.contains("/mnt/shop"), "{block}");
    // The user's repository: root's, as a read-only bind of the host user's would be to cyx.
    expect_success(
        &tb.root_sh(
            "set -e; rm -rf /tmp/readme-shop; mkdir -p /tmp/readme-shop/tests; cd /tmp/readme-shop; \
             git init -q -b main; printf 'def test_sum():\\n    assert sum([1, 2]) == 3\\n' > tests/test_sum.py; \
             git add .; git -c user.name=u -c user.email=u@example.com commit -qm 'a project'",
        ),
        "the user's repository",
    );
    let out = sh(
        tb,
        &format!(
            "set -euo pipefail; systemctl --user stop cyclix-run@shop.service || true; \
             rm -rf ~/readme-src ~/.config/cyclix/tenants/shop.yaml ~/.local/state/cyclix/runs/shop\n{}",
            // A directory that does not exist yet, as `~/src` in a fresh home (attack review:
            // the block began with a `cp` into it; other tests' repositories are in ~/src).
            block
                .replace("/mnt/shop", "/tmp/readme-shop")
                .replace("~/src", "~/readme-src")
        ),
        "the README's block",
    );
    assert!(
        out.contains("(tenant shop, tier container): passed") && out.contains("+1 commit on"),
        "{out}"
    );
    let rec = record(tb, "shop");
    assert_eq!(
        rec["commits"][0]["subject"], "A first cyclix run",
        "{rec:#}"
    );
    let left = crate::common::run::leftovers(tb, rec["run_id"].as_str().expect("id"), "shop");
    assert!(left.is_empty(), "leftovers: {left}");
}
