//! `setup:`, `baseline:` and `delivery.allow_setup_changes` (issue 15).

use super::*;

#[test]
fn setup_and_baseline_are_read_with_their_defaults() {
    let s = ok(&plus(
        "setup: [Containerfile, ci/, \"**/*.lock\", ci/]\nbaseline:\n  command: [make, check]\n",
    ));
    assert_eq!(
        s.setup,
        ["Containerfile", "ci/", "**/*.lock"],
        "duplicates dropped"
    );
    let b = s.baseline.expect("baseline");
    assert_eq!(
        (b.command, b.timeout_s),
        (vec!["make".into(), "check".into()], 300)
    );
    assert!(ok(&base()).setup.is_empty() && ok(&base()).baseline.is_none());
    let s = ok(&plus(
        "delivery:\n  remote: origin\n  allow_setup_changes: true\n",
    ));
    assert!(s.delivery.expect("delivery").allow_setup_changes);
}

#[test]
fn bad_setup_paths_and_baselines_name_line_key_and_fix() {
    assert_eq!(
        one(&plus("setup: [ok, /etc/passwd]\n")),
        d(13, 13, "setup[1]", "`/etc/passwd` is absolute")
    );
    let e = err(&plus("setup: [.git/hooks/pre-commit]\n"));
    assert!(e.to_string().contains("inside `.git`"), "{e}");
    assert!(e.to_string().contains("relative to the repository"), "{e}");
    assert_eq!(
        one(&plus("baseline:\n  timeout: 5m\n")),
        d(14, 3, "baseline.command", "missing required key `command`")
    );
    assert_eq!(
        one(&plus("baseline:\n  command: [make]\n  timeout: 2h\n")),
        d(15, 12, "baseline.timeout", "duration `2h` is out of range")
    );
}

#[test]
fn gate_protected_is_read_as_setup_paths_are() {
    let s = ok(&with(
        "  command: [make, test]\n",
        "  command: [make, test]\n  protected: [tests/, \"**/conftest.py\", pytest.ini, tests/]\n",
    ));
    assert_eq!(
        s.gate.protected,
        ["tests/", "**/conftest.py", "pytest.ini"],
        "duplicates dropped"
    );
    assert!(
        ok(&base()).gate.protected.is_empty(),
        "absent: nothing protected"
    );
}

#[test]
fn bad_protected_paths_an_empty_list_and_a_host_tier_name_line_key_and_fix() {
    let protected = |list: &str| {
        with(
            "  command: [make, test]\n",
            &format!("  command: [make, test]\n  protected: {list}\n"),
        )
    };
    assert_eq!(
        one(&protected("[ok, ../tests]")),
        d(
            13,
            19,
            "gate.protected[1]",
            "`../tests` has an empty, `.` or `..` component"
        )
    );
    let e = err(&protected("[]"));
    assert!(e.to_string().contains("`protected` is empty"), "{e}");
    let e = err(&protected("[.git/config]"));
    assert!(e.to_string().contains("inside `.git`"), "{e}");
    let e = err(&format!("{}tier: worktree\n", protected("[tests/]")));
    assert!(
        e.to_string()
            .contains("`gate.protected` needs tier `container`"),
        "{e}"
    );
    assert!(e.to_string().contains("use `tier: container`"), "{e}");
}
