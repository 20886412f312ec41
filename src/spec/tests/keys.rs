//! The closed schema: duplicate, unknown (with the nearest key) and missing keys.

use super::*;

// --- §4 "Duplicate keys" ---

#[test]
fn duplicate_keys_name_both_lines() {
    assert_eq!(
        one(&plus("tenant: other\n")),
        d(
            13,
            1,
            "tenant",
            "duplicate key `tenant` (first defined at line 1)"
        )
    );
    assert_eq!(
        one(&plus("\"tenant\": other\n")),
        d(
            13,
            1,
            "tenant",
            "duplicate key `tenant` (first defined at line 1)"
        )
    );
    assert_eq!(
        one(&with("  base: main", "  base: main\n  base: dev")),
        d(
            5,
            3,
            "repo.base",
            "duplicate key `base` (first defined at line 4)"
        )
    );
}

// --- §4 "Unknown keys / typos" ---

#[test]
fn delivery_is_optional_and_its_keys_are_checked_like_the_others() {
    assert!(
        ok(&base()).delivery.is_none(),
        "absent: the local branch only"
    );
    let s = ok(&plus("delivery:\n  remote: origin\n"));
    let dl = s.delivery.expect("delivery");
    assert_eq!(
        (
            dl.remote.as_str(),
            dl.branch.as_deref(),
            dl.push,
            dl.lock_wait_s
        ),
        ("origin", None, true, 600)
    );
    let s = ok(&plus(
        "delivery:\n  remote: up-stream.1\n  branch: cyclix/acme/nightly\n  push: false\n  allow_paths: [.github/workflows/]\n  hold_paths: [deploy/, \"**/secrets.yaml\", Makefile]\n  lock_wait: 0s\n",
    ));
    let dl = s.delivery.expect("delivery");
    assert_eq!(dl.branch.as_deref(), Some("cyclix/acme/nightly"));
    assert_eq!(
        dl.hold_paths,
        vec!["deploy/", "**/secrets.yaml", "Makefile"]
    );
    assert_eq!((dl.push, dl.lock_wait_s), (false, 0));
}

#[test]
fn delivery_keys_are_reported_with_position_message_and_fix() {
    let cases = [
        (
            "delivery:\n  remote: origin\n  brnach: x\n",
            d(15, 3, "delivery.brnach", "unknown key `brnach`"),
            Some("did you mean `branch`?"),
        ),
        (
            "delivery:\n  branch: x\n",
            d(14, 3, "delivery.remote", "missing required key `remote`"),
            Some("add `remote: origin` (a remote of the repository)"),
        ),
        (
            "delivery:\n  remote: \"git@github.com:a/b.git\"\n",
            d(
                14,
                11,
                "delivery.remote",
                "invalid remote: `git@github.com:a/b.git` contains `@`: give the remote's name, not a URL or path",
            ),
            None,
        ),
        (
            "delivery:\n  remote: origin\n  branch: \"main..x\"\n",
            d(
                15,
                11,
                "delivery.branch",
                "invalid branch: `main..x` contains `..`",
            ),
            None,
        ),
        (
            "delivery:\n  remote: origin\n  branch: refs/heads/x\n",
            d(
                15,
                11,
                "delivery.branch",
                "invalid branch: `refs/heads/x` is not a plain branch name",
            ),
            None,
        ),
        (
            "delivery:\n  remote: origin\n  allow_paths: [../etc/]\n",
            d(
                15,
                17,
                "delivery.allow_paths[0]",
                "`../etc/` has an empty, `.` or `..` component",
            ),
            None,
        ),
        (
            "delivery:\n  remote: origin\n  hold_paths: [\"*.yml\"]\n",
            d(
                15,
                16,
                "delivery.hold_paths[0]",
                "`*.yml` contains `*`: only a leading `**/` is a pattern",
            ),
            None,
        ),
        (
            "delivery:\n  remote: origin\n  lock_wait: 7h\n",
            d(
                15,
                14,
                "delivery.lock_wait",
                "duration `7h` is out of range",
            ),
            Some("use a duration from 0s to 6h"),
        ),
        (
            "delivery:\n  remote: origin\n  push: yes\n",
            d(
                15,
                9,
                "delivery.push",
                "expected `true` or `false`, found `yes`",
            ),
            None,
        ),
    ];
    for (extra, want, hint) in cases {
        let text = plus(extra);
        assert_eq!(one(&text), want, "{extra}");
        if let Some(h) = hint {
            assert_eq!(
                err(&text).diagnostics[0].hint.as_deref(),
                Some(h),
                "{extra}"
            );
        }
    }
    let direct = with("gate:", "tier: direct\ngate:") + "delivery:\n  remote: origin\n";
    let (line, _, path, msg) = one(&direct);
    assert_eq!((line, path.as_str()), (15, "delivery"), "{msg}");
    assert!(msg.contains("tier `direct`"), "{msg}");
}

#[test]
fn unknown_keys_name_the_path_and_the_nearest_key() {
    let cases = [
        (
            plus("egres:\n  allow: []\n"),
            d(13, 1, "egres", "unknown key `egres`"),
            "did you mean `egress`?",
        ),
        (
            plus("netwrok: open\n"),
            d(13, 1, "netwrok", "unknown key `netwrok`"),
            "valid keys here: tenant, repo, tier, worktree_isolation, task, agent, gate, egress, mounts, services, schedule, delivery, setup, baseline, notify, pool",
        ),
        (
            with(
                "  command: [agent, --run]",
                "  command: [agent, --run]\n  cap_add: [ALL]",
            ),
            d(10, 3, "agent.cap_add", "unknown key `cap_add`"),
            "valid keys here: image, unpinned_local_image, build, command, preset, model, max_turns, api_host, env, timeout, resources, credentials, runtime_class",
        ),
        (
            with("  command: [agent, --run]", "  comand: [agent]"),
            d(9, 3, "agent.comand", "unknown key `comand`"),
            "did you mean `command`?",
        ),
        (
            plus("schedule:\n  oncalendar: daily\n"),
            d(14, 3, "schedule.oncalendar", "unknown key `oncalendar`"),
            "did you mean `on_calendar`?",
        ),
    ];
    for (text, want, hint) in cases {
        let e = err(&text);
        let first = e
            .diagnostics
            .iter()
            .find(|x| x.message.starts_with("unknown key"))
            .expect("unknown key reported");
        assert_eq!(
            (
                first.line.unwrap_or(0),
                first.column.unwrap_or(0),
                first.path.clone(),
                first.message.clone()
            ),
            want
        );
        assert_eq!(first.hint.as_deref(), Some(hint));
    }
}

#[test]
fn missing_required_keys_are_reported_at_the_parent() {
    let e = err(&with("  base: main\n", ""));
    assert_eq!(e.diagnostics.len(), 1, "{e}");
    let m = &e.diagnostics[0];
    assert_eq!(
        (m.line, m.path.as_str(), m.message.as_str()),
        (Some(3), "repo.base", "missing required key `base`")
    );
    let messages: Vec<String> = err("tenant: acme\n")
        .diagnostics
        .into_iter()
        .map(|d| format!("{}: {}", d.path, d.message))
        .collect();
    assert_eq!(
        messages,
        [
            "repo: missing required key `repo`",
            "task: missing required key `task`",
            "agent: missing required key `agent`",
            "gate: missing required key `gate`"
        ]
    );
    assert_eq!(one(""), d(1, 1, "", "the spec is empty"));
    assert_eq!(
        one("- a\n"),
        d(
            1,
            1,
            "",
            "expected a mapping (`key: value` lines), found a sequence"
        )
    );
}

#[test]
fn odd_keys_are_shown_escaped() {
    assert_eq!(
        one(&plus("\"a\\nb\": 1\n")),
        d(13, 1, "a\\nb", "unknown key `a\\nb`")
    );
    assert_eq!(one(&plus("1: x\n")), d(13, 1, "1", "unknown key `1`"));
}
