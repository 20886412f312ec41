//! Tests of [`Git`] against real repositories in temporary directories, and of the parsers.

use super::*;

fn commit_in(dir: &Path, file: &str, msg: &str) {
    std::fs::write(dir.join(file), msg).expect("write");
    let d = dir.to_string_lossy();
    for args in [
        vec!["-C", &d, "add", "--all"],
        [
            vec!["-C", &d],
            IDENTITY.to_vec(),
            vec!["commit", "--quiet", "-m", msg],
        ]
        .concat(),
    ] {
        process::run("git", &args, None, GIT_QUERY_DEADLINE, "").expect("git");
    }
}

fn demo() -> (tempfile::TempDir, Git) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = Git::init_repo(
        &tmp.path().join("repo"),
        &[
            ("README.md", "demo\n"),
            ("calc/add.py", "def add(a, b):\n    return a + b\n"),
        ],
        "initial",
    )
    .expect("init");
    (tmp, repo)
}

#[test]
fn init_repo_makes_one_commit_on_main_with_fixed_identity() {
    let (_tmp, g) = demo();
    let sha = g.rev_parse_commit("main").expect("main");
    assert_eq!(sha.len(), 40, "{sha}");
    let out = process::run(
        "git",
        &[
            "-C",
            &g.repo().to_string_lossy(),
            "log",
            "--format=%an <%ae>|%s",
            "main",
        ],
        None,
        GIT_QUERY_DEADLINE,
        "",
    )
    .expect("log");
    assert_eq!(out.stdout, "cyclix <cyclix@localhost>|initial\n");
    assert!(g.repo().join("calc/add.py").is_file());
}

#[test]
fn init_repo_refuses_non_empty_dir_and_escaping_paths() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("x"), "x").expect("write");
    let e = Git::init_repo(tmp.path(), &[], "m").expect_err("non-empty");
    assert!(e.to_string().contains("not empty"), "{e}");
    let e = Git::init_repo(&tmp.path().join("r"), &[("../evil", "x")], "m").expect_err("escape");
    assert!(e.to_string().contains("without `..`"), "{e}");
    assert!(!tmp.path().join("evil").exists());
}

#[test]
fn missing_ref_names_repo_base_fix() {
    let (_tmp, g) = demo();
    let e = g.rev_parse_commit("no-such-branch").expect_err("missing");
    assert!(matches!(e, GitError::NoSuchRef { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("no-such-branch") && msg.contains("repo.base"),
        "{msg}"
    );
    // A ref that looks like an option is still a ref.
    let e = g
        .rev_parse_commit("--output=/tmp/x")
        .expect_err("option-like");
    assert!(matches!(e, GitError::NoSuchRef { .. }), "{e}");
}

#[test]
fn not_a_repository_is_a_command_error_with_stderr() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let e = Git::new(tmp.path()).worktrees().expect_err("not a repo");
    let msg = e.to_string();
    assert!(
        msg.contains("listing worktrees") && msg.contains("not a git repository"),
        "{msg}"
    );
}

#[test]
fn refs_are_listed_and_deleted_only_where_they_still_point() {
    let (tmp, g) = demo();
    let base = g.rev_parse_commit("main").expect("main");
    let wt = tmp.path().join("wt-r");
    g.worktree_add(&wt, "cyclix/acme/r", &base).expect("add");
    let refs = g.refs().expect("refs");
    assert!(
        refs.contains(&("refs/heads/main".to_string(), base.clone())),
        "{refs:?}"
    );
    assert!(refs.contains(&("refs/heads/cyclix/acme/r".to_string(), base.clone())));
    commit_in(&wt, "a.txt", "moved");
    // Moved since: kept.
    assert!(
        !g.delete_ref_at("refs/heads/cyclix/acme/r", &base)
            .expect("kept")
    );
    assert!(g.branch_exists("cyclix/acme/r").expect("exists"));
    g.worktree_remove(&wt).expect("remove");
    let tip = g.rev_parse_commit("cyclix/acme/r").expect("tip");
    assert!(
        g.delete_ref_at("refs/heads/cyclix/acme/r", &tip)
            .expect("deleted")
    );
    assert!(!g.branch_exists("cyclix/acme/r").expect("gone"));
    // Absent: nothing to do.
    assert!(
        !g.delete_ref_at("refs/heads/cyclix/acme/r", &tip)
            .expect("absent")
    );
    assert_eq!(
        parse_refs("refs/heads/a 1111\nrefs/tags/v1 2222\n"),
        vec![
            ("refs/heads/a".to_string(), "1111".to_string()),
            ("refs/tags/v1".to_string(), "2222".to_string())
        ]
    );
}

#[test]
fn worktree_lifecycle_commits_branches_and_idempotent_remove() {
    let (tmp, g) = demo();
    let base = g.rev_parse_commit("main").expect("main");
    let wt = tmp.path().join("wt-run1");
    g.worktree_add(&wt, "cyclix/acme/run1", &base).expect("add");
    assert!(wt.join("README.md").is_file());
    assert_eq!(g.worktrees().expect("list"), vec![wt.clone()]);
    assert!(g.branch_exists("cyclix/acme/run1").expect("exists"));
    assert!(!g.branch_exists("cyclix/acme/run2").expect("exists"));

    commit_in(&wt, "a.txt", "first change");
    commit_in(&wt, "b.txt", "second change");
    let commits = g.commits(&base, "cyclix/acme/run1").expect("commits");
    let subjects: Vec<&str> = commits.iter().map(|c| c.subject.as_str()).collect();
    assert_eq!(subjects, ["first change", "second change"]);
    assert!(g.commits(&base, "main").expect("none").is_empty());

    // The same branch again: refused with the fix, nothing created.
    let e = g
        .worktree_add(&tmp.path().join("wt-again"), "cyclix/acme/run1", &base)
        .expect_err("branch exists");
    assert!(matches!(e, GitError::BranchExists { .. }), "{e}");
    assert!(e.to_string().contains("branch -D"), "{e}");
    assert!(!tmp.path().join("wt-again").exists());

    assert_eq!(g.merge_or_rebase_in_progress(&wt).expect("state"), None);
    assert_eq!(
        g.list_branches("cyclix/acme/").expect("branches"),
        vec!["cyclix/acme/run1".to_string()]
    );
    assert_eq!(
        g.list_branches("other/").expect("branches"),
        Vec::<String>::new()
    );

    // A branch checked out in a worktree cannot be deleted: the error says what to do.
    let e = g
        .delete_branch("cyclix/acme/run1", true)
        .expect_err("in use");
    assert!(e.to_string().contains("remove its worktree first"), "{e}");

    g.worktree_remove(&wt).expect("remove");
    assert!(!wt.exists());
    assert!(g.worktrees().expect("list").is_empty());
    g.worktree_remove(&wt).expect("remove again is fine");
    // The result branch survives the worktree.
    assert_eq!(g.commits(&base, "cyclix/acme/run1").expect("kept").len(), 2);
    let e = g
        .delete_branch("cyclix/acme/run1", false)
        .expect_err("unmerged");
    assert!(matches!(e, GitError::Command { .. }), "{e}");
    assert!(g.delete_branch("cyclix/acme/run1", true).expect("delete"));
    assert!(
        !g.delete_branch("cyclix/acme/run1", true)
            .expect("idempotent")
    );
}

#[test]
fn worktree_remove_handles_a_deleted_directory() {
    let (tmp, g) = demo();
    let wt = tmp.path().join("wt");
    g.worktree_add(&wt, "b1", "main").expect("add");
    std::fs::remove_dir_all(&wt).expect("rm");
    g.worktree_remove(&wt).expect("prunes the stale entry");
    assert!(g.worktrees().expect("list").is_empty());
}

#[test]
fn hooks_never_run() {
    let (tmp, g) = demo();
    let marker = tmp.path().join("HOOK_RAN");
    let hooks = g.common_dir().expect("common dir").join("hooks");
    std::fs::create_dir_all(&hooks).expect("hooks dir");
    for hook in [
        "post-checkout",
        "reference-transaction",
        "pre-commit",
        "post-commit",
    ] {
        let h = hooks.join(hook);
        crate::process::write_executable(
            &h,
            &format!("#!/bin/sh\necho {hook} >> '{}'\n", marker.display()),
        );
    }
    // Control: plain git does run the planted hook, so the test can fail.
    let d = g.repo().to_string_lossy().into_owned();
    for args in [
        ["checkout", "--quiet", "-b", "control"],
        ["checkout", "--quiet", "main", "--"],
    ] {
        process::run(
            "git",
            &[&["-C", d.as_str()], &args[..]].concat(),
            None,
            GIT_QUERY_DEADLINE,
            "",
        )
        .expect("control checkout");
    }
    assert!(
        marker.exists(),
        "control: the planted hook should run under plain git"
    );
    std::fs::remove_file(&marker).expect("rm marker");

    let wt = tmp.path().join("wt");
    g.worktree_add(&wt, "cyclix/x", "main").expect("add");
    g.delete_branch("control", true).expect("delete");
    g.worktree_remove(&wt).expect("remove");
    assert!(
        !marker.exists(),
        "a hook ran: {:?}",
        std::fs::read_to_string(&marker)
    );
}

#[test]
fn in_progress_operations_are_named() {
    let (tmp, g) = demo();
    let wt = tmp.path().join("wt");
    g.worktree_add(&wt, "b", "main").expect("add");
    let gitdir = process::run(
        "git",
        &[
            "-C",
            &wt.to_string_lossy(),
            "rev-parse",
            "--path-format=absolute",
            "--git-dir",
        ],
        None,
        GIT_QUERY_DEADLINE,
        "",
    )
    .expect("git-dir")
    .stdout;
    std::fs::write(Path::new(gitdir.trim()).join("MERGE_HEAD"), "x\n").expect("write");
    let state = g.merge_or_rebase_in_progress(&wt).expect("state");
    assert_eq!(state.as_deref(), Some("a merge (MERGE_HEAD)"));
    // The main worktree is unaffected: states are per worktree.
    assert_eq!(g.merge_or_rebase_in_progress(g.repo()).expect("main"), None);
}

#[test]
fn parsers() {
    let z =
        "worktree /r\0HEAD abc\0branch refs/heads/main\0\0worktree /w/a b\0HEAD def\0detached\0\0";
    assert_eq!(parse_worktrees(z), vec![PathBuf::from("/w/a b")]);
    assert!(parse_worktrees("worktree /r\0bare\0\0").is_empty());
    let sha = "0123456789abcdef0123456789abcdef01234567";
    let log = format!("{sha}\u{1f}fix: a | b\n");
    assert_eq!(
        parse_log(&log, "t").expect("log"),
        vec![Commit {
            sha: sha.into(),
            subject: "fix: a | b".into()
        }]
    );
    assert!(parse_log("nonsense\n", "t").is_err());
    assert!(parse_log("xyz\u{1f}s\n", "t").is_err());
    assert_eq!(
        parse_branches(
            "refs/heads/cyclix/a\nrefs/heads/main\nrefs/heads/cyclix-b\n",
            "cyclix/"
        ),
        vec!["cyclix/a".to_string()]
    );
}
