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
