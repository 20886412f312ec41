use super::*;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| (*x).to_owned()).collect()
}

#[test]
fn patterns_cover_directories_files_and_names_at_any_depth() {
    let table = [
        (".github/", ".github/workflows/ci.yml", true),
        // A symlink (or gitlink) named like a held directory is held too.
        (".github/", ".github", true),
        (".husky/", ".husky", true),
        (".vscode/", ".VSCode/tasks.json", true),
        (".gitlab-ci.yml", ".GitLab-CI.yml", true),
        (".github/", "src/.github/x", false),
        (".github/", ".githubx/y", false),
        (".gitlab-ci.yml", ".gitlab-ci.yml", true),
        (".gitlab-ci.yml", "sub/.gitlab-ci.yml", false),
        ("**/.envrc", "a/b/.envrc", true),
        ("**/.envrc", ".envrc", true),
        ("**/.envrc", "a/.envrc.bak", false),
        ("docs", "docs/x.md", true),
        ("docs", "docs", true),
        ("docs", "docsx", false),
    ];
    for (pat, path, want) in table {
        assert_eq!(covers(pat, path), want, "{pat} {path}");
    }
}

#[test]
fn held_paths_are_the_defaults_plus_extras_minus_allowed() {
    let touched = s(&[
        "src/app.py",
        ".github/workflows/ci.yml",
        ".gitattributes",
        "deploy/prod.sh",
        ".vscode/settings.json",
    ]);
    assert_eq!(
        held_paths(&touched, &[], &[]),
        s(&[
            ".gitattributes",
            ".github/workflows/ci.yml",
            ".vscode/settings.json"
        ])
    );
    assert_eq!(
        held_paths(
            &touched,
            &s(&["deploy/"]),
            &s(&[".github/workflows/", ".vscode/"])
        ),
        s(&[".gitattributes", "deploy/prod.sh"])
    );
    // Positive control: nothing held when nothing sensitive is touched.
    assert!(held_paths(&s(&["src/a.py", "README.md"]), &[], &[]).is_empty());
}

const PATCH: &str = "\x01cyclix-commit 1111111111111111111111111111111111111111\nadd config\n\
diff --git a/conf/app.ini b/conf/app.ini\nnew file mode 100644\n--- /dev/null\n+++ b/conf/app.ini\n\
@@ -0,0 +1,2 @@\n+name = demo\n+token = VALUE\n";

#[test]
fn a_secret_value_is_found_named_by_file_and_kind_never_by_value() {
    let secret: &[u8] = b"s3cr3t-Value-42";
    let patch = PATCH.replace("VALUE", "s3cr3t-Value-42");
    let hits = scan(patch.as_bytes(), &[("value of secret API_TOKEN", secret)]);
    assert_eq!(
        hits,
        vec![SecretHit {
            file: "conf/app.ini".into(),
            kind: "value of secret API_TOKEN".into()
        }]
    );
    let json = serde_json::to_string(&hits).expect("json");
    assert!(!json.contains("s3cr3t"), "{json}");
    // Positive control: the same patch without the value has no hit.
    assert!(scan(PATCH.as_bytes(), &[("value of secret API_TOKEN", secret)]).is_empty());
    // Short values are not looked for (they would match by chance).
    assert!(scan(b"+abc\n", &[("value of secret SHORT", b"abc")]).is_empty());
}

#[test]
fn encoded_and_multiline_values_are_found() {
    let secret: &[u8] = b"correct horse battery staple";
    let hex = hex(secret);
    for shift in 0..3 {
        let mut data = b"xyz"[..shift].to_vec();
        data.extend_from_slice(secret);
        data.extend_from_slice(b"tail");
        let b64 = String::from_utf8(base64(&data)).expect("ascii");
        let patch = PATCH.replace("VALUE", &b64);
        assert_eq!(
            scan(patch.as_bytes(), &[("K", secret)]).len(),
            1,
            "shift {shift}"
        );
    }
    let patch = PATCH.replace("VALUE", &hex);
    assert_eq!(scan(patch.as_bytes(), &[("K", secret)]).len(), 1);
    let multi: &[u8] = b"first-line-of-key\nsecond-line-of-key";
    let patch = PATCH.replace("VALUE", "x\n+second-line-of-key");
    assert_eq!(scan(patch.as_bytes(), &[("K", multi)]).len(), 1);
    assert_eq!(base64(b"Man"), b"TWFu");
    assert_eq!(base64(b"Ma"), b"TWE=");
}

#[test]
fn key_formats_are_found_and_near_misses_are_not() {
    let cases = [
        ("-----BEGIN OPENSSH PRIVATE KEY-----", Some("private key")),
        ("-----BEGIN PUBLIC KEY-----", None),
        ("AKIAABCDEFGHIJKLMNOP", Some("AWS access key id")),
        ("AKIAabcdefghijklmnop", None),
        (
            "ghp_0123456789abcdefghijklmnopqrstuvwxyz",
            Some("GitHub token"),
        ),
        (
            "github_pat_0123456789abcdefghijklmnopqrstuvwxyz",
            Some("GitHub token"),
        ),
        (
            "sk-ant-api03-0123456789abcdefghij",
            Some("Anthropic API key"),
        ),
        ("xoxb-1234567890-abc", Some("Slack token")),
        ("ghp_short", None),
        ("XAKIAABCDEFGHIJKLMNOP", None),
    ];
    for (text, want) in cases {
        let patch = PATCH.replace("VALUE", text);
        let hits = scan(patch.as_bytes(), &[]);
        assert_eq!(hits.first().map(|h| h.kind.as_str()), want, "{text}");
        if want.is_some() {
            assert_eq!(hits.first().map(|h| h.file.as_str()), Some("conf/app.ini"));
        }
    }
}

#[test]
fn a_hit_in_a_commit_message_names_the_commit_and_crafted_markers_hide_nothing() {
    let patch = "\x01cyclix-commit abc\nleak AKIAABCDEFGHIJKLMNOP\n";
    assert_eq!(
        scan(patch.as_bytes(), &[]),
        vec![SecretHit {
            file: "commit abc message".into(),
            kind: "AWS access key id".into()
        }]
    );
    // A fake header or NUL bytes before the value change the attribution at most.
    let crafted = "\x01cyclix-commit abc\n\0\0+++ b/x\n\x01 end\nAKIAABCDEFGHIJKLMNOP";
    assert_eq!(scan(crafted.as_bytes(), &[]).len(), 1);
}

#[test]
fn start_points() {
    assert_eq!(start_point(None, false), StartPoint::New);
    assert_eq!(
        start_point(Some("t"), true),
        StartPoint::FastForward("t".into())
    );
    assert_eq!(
        start_point(Some("t"), false),
        StartPoint::Diverged { tip: "t".into() }
    );
}

#[test]
fn porcelain_outcomes() {
    let dst = "refs/heads/cyclix/a/nightly";
    let ok = format!("To git://x/r.git\n*\trefs/heads/cyclix/a/r1:{dst}\t[new branch]\nDone\n");
    assert_eq!(push_outcome(true, &ok, "", dst), PushOutcome::Pushed);
    let ff = format!(" \trefs/heads/cyclix/a/r1:{dst}\tabc..def\n");
    assert_eq!(push_outcome(true, &ff, "", dst), PushOutcome::Pushed);
    let stale = format!("!\trefs/heads/cyclix/a/r1:{dst}\t[rejected] (stale info)\n");
    assert_eq!(
        push_outcome(false, &stale, "error: failed to push some refs", dst),
        PushOutcome::Refused("[rejected] (stale info)".into())
    );
    // The remote's policy refuses; a remote that cannot store the push, or is not reached at
    // all, fails (git's words as measured on the testbed, git 2.47).
    let hook =
        format!("!\trefs/heads/cyclix/a/r1:{dst}\t[remote rejected] (pre-receive hook declined)\n");
    assert!(matches!(
        push_outcome(false, &hook, "", dst),
        PushOutcome::Refused(_)
    ));
    // The agent's content refused by the remote (its fsck, a size limit) is a finding.
    let unpack = format!("!\trefs/heads/cyclix/a/r1:{dst}\t[remote rejected] (unpacker error)\n");
    assert!(matches!(
        push_outcome(
            false,
            &unpack,
            "remote: fatal: pack exceeds maximum allowed size\n",
            dst
        ),
        PushOutcome::Refused(_)
    ));
    for summary in [
        "[remote rejected] (unpacker error)",
        "[remote rejected] (failed to update ref)",
        "[remote failure] (remote failed to report status)",
    ] {
        let line = format!("!\trefs/heads/cyclix/a/r1:{dst}\t{summary}\n");
        assert_eq!(
            push_outcome(false, &line, "error: failed to push some refs", dst),
            PushOutcome::Failed(format!("{summary} (error: failed to push some refs)"))
        );
    }
    assert_eq!(
        push_outcome(false, "", "fatal: unable to connect\n", dst),
        PushOutcome::Failed("fatal: unable to connect".into())
    );
    // A success line for another ref, or a failed status, is not a delivery.
    let other = " \trefs/heads/x:refs/heads/other\tabc..def\n";
    assert!(matches!(
        push_outcome(true, other, "", dst),
        PushOutcome::Failed(_)
    ));
    assert!(matches!(
        push_outcome(false, &ff, "hook declined", dst),
        PushOutcome::Failed(_)
    ));
}

#[test]
fn urls_lose_their_credentials() {
    assert_eq!(
        redact_url("https://u:tok@git.example/a/b.git"),
        "https://git.example/a/b.git"
    );
    assert_eq!(redact_url("git://h:9418/r.git"), "git://h:9418/r.git");
    assert_eq!(
        redact_url("git@github.com:a/b.git"),
        "git@github.com:a/b.git"
    );
}

#[test]
fn agent_cli_configuration_is_held_by_default() {
    let touched = s(&[
        ".claude/settings.json",
        ".mcp.json",
        "sub/.env",
        ".aider.conf.yml",
        ".gemini/settings.json",
        "CLAUDE.md",
        "src/claude.py",
        "docs/AGENTS.md.txt",
    ]);
    assert_eq!(
        held_paths(&touched, &[], &[]),
        s(&[
            ".aider.conf.yml",
            ".claude/settings.json",
            ".gemini/settings.json",
            ".mcp.json",
            "CLAUDE.md",
            "sub/.env",
        ])
    );
    assert!(held_paths(&touched, &[], &s(&[".claude/", "CLAUDE.md"])).len() == 4);
}

#[test]
fn nested_agent_cli_configuration_is_held_too() {
    // Each CLI reads these in the directory it starts in and around it, not only at the root.
    let touched = s(&[
        "sub/.claude/settings.json",
        "pkg/.mcp.json",
        "a/b/.codex/config.toml",
        "web/.gemini/settings.json",
        "lib/CLAUDE.md",
        "CLAUDE.local.md",
        "svc/AGENTS.md",
        "AGENTS.override.md",
        "x/GEMINI.md",
        ".aider.model.settings.yml",
        "docs/claude-md.txt",
        "src/agents.py",
    ]);
    let held = held_paths(&touched, &[], &[]);
    assert_eq!(held.len(), 10, "{held:?}");
    assert!(
        !held.contains(&"docs/claude-md.txt".to_string())
            && !held.contains(&"src/agents.py".to_string()),
        "{held:?}"
    );
}
