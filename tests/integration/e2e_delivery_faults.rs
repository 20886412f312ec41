//! Delivery under faults of the remote (issue 36 item 3): the result says what happened. A
//! remote that cannot store the push, or is gone, is an error of phase `deliver` (exit 2,
//! outcome `failed`), never a refusal that blames the lease; a push that landed is recorded as
//! landed even when reading it back fails. The remote is `git daemon` on the testbed's outside
//! address (see `e2e_delivery.rs`). Each fault is made while the run is paused at the start of
//! its `deliver` phase (fail point `phase.deliver=pause`), so it meets the push and nothing
//! earlier; the positive control is the same tenant's run pushing to the whole remote.

use crate::common::run::{arm, prepared, record_of, run_paused};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};
use crate::e2e_delivery::{bare, dl_tenant, local_tip, remote_tip, s};

/// An agent that fixes the demo bug when it is there and always adds a commit of its own.
const NOTE_AGENT: &str = "[sh, -c, \"cyclix-demo-agent >/dev/null 2>&1 || true; date +%s%N >> notes.txt && git add notes.txt && git commit -qm note\"]";

/// A tenant delivering to the fresh bare repository `repo` on the fixed branch `branch`,
/// armed to pause at the start of `deliver`.
fn tenant(tb: &Testbed, name: &str, repo: &str, branch: &str) -> String {
    bare(tb, repo);
    let t = dl_tenant(
        tb,
        &Tenant::new(name)
            .agent_cmd(NOTE_AGENT)
            .extra_yaml(&format!("delivery:\n  remote: deliver\n  branch: {branch}")),
        repo,
    );
    arm(tb, &t, "phase.deliver=pause");
    t
}

/// `fault` run as root on the testbed (the remote's files are root's: git daemon runs as root).
fn as_root(tb: &Testbed, fault: &str) {
    expect_success(&tb.root_sh(fault), "make the remote's fault");
}

#[test]
fn a_remote_that_cannot_store_the_push_or_is_gone_is_an_error_in_deliver_and_nothing_is_lost() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let branch = "cyclix/e2e-dl-broken/nightly";
    let t = tenant(tb, "e2e-dl-broken", "dl-broken", branch);
    let r = "/srv/git/dl-broken.git";

    // Unwritable: the objects directory replaced by a file while the run is at `deliver`.
    let (run, status) = run_paused(tb, &t, "phase.deliver", |_| {
        as_root(
            tb,
            &format!("mv {r}/objects {r}/objects.away && touch {r}/objects"),
        );
    });
    let rec = record_of(tb, &t, &run);
    let d = &rec["delivery"];
    assert_eq!(rec["result"], "error", "{rec:#}");
    assert_eq!(status, "2", "an error, exit 2: {rec:#}");
    assert_eq!(s(d, "outcome"), "failed", "{rec:#}");
    let why = s(d, "reason");
    assert!(
        why.contains("did not get through: fatal:"),
        "git's own words: {why}"
    );
    assert!(!why.contains("lease"), "the lease is not blamed: {why}");
    assert!(
        rec["phases"]
            .as_array()
            .and_then(|p| p.iter().find(|p| p["name"] == "deliver"))
            .is_some_and(|p| p["outcome"] != "ok"),
        "phase deliver failed: {rec:#}"
    );
    // Nothing lost: the run's commits are on its local branch; the remote has no branch.
    let local = local_tip(tb, &t, s(&rec, "branch"));
    assert!(
        rec["commits"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["sha"] == local.as_str())),
        "{local} is the run's commit: {rec:#}"
    );
    as_root(
        tb,
        &format!("rm -f {r}/objects && mv {r}/objects.away {r}/objects"),
    );
    assert_eq!(remote_tip(tb, "dl-broken", branch), "");

    // The positive control: the remote whole again, the same tenant's run pushes.
    let (run, status) = run_paused(tb, &t, "phase.deliver", |_| {});
    let rec = record_of(tb, &t, &run);
    assert_eq!(
        (rec["result"].as_str(), status.as_str()),
        (Some("passed"), "0"),
        "{rec:#}"
    );
    assert_eq!(s(&rec["delivery"], "outcome"), "pushed", "{rec:#}");

    // Gone: the repository deleted while the run is at `deliver`.
    let (run, status) = run_paused(tb, &t, "phase.deliver", |_| {
        as_root(tb, &format!("mv {r} {r}.gone"));
    });
    let rec = record_of(tb, &t, &run);
    as_root(tb, &format!("rm -rf {r}.gone"));
    arm(tb, &t, "");
    let d = &rec["delivery"];
    assert_eq!(
        (rec["result"].as_str(), status.as_str()),
        (Some("error"), "2"),
        "{rec:#}"
    );
    assert_eq!(s(d, "outcome"), "failed", "{rec:#}");
    assert!(!s(d, "reason").contains("lease"), "{rec:#}");
    let summary = expect_success(
        &tb.user_sh(&format!("{} status {t}", tb.cyclix_bin())),
        "status",
    );
    assert!(
        summary.contains("delivery: FAILED to reach or write"),
        "{summary}"
    );
}

#[test]
fn a_push_that_landed_is_recorded_as_landed_when_the_read_back_fails() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let branch = "cyclix/e2e-dl-readback/nightly";
    let t = tenant(tb, "e2e-dl-readback", "dl-readback", branch);
    let r = "/srv/git/dl-readback.git";
    // The remote takes the push, then goes away before the run reads it back: a
    // post-receive hook moves the repository once the ref is updated.
    let (run, status) = run_paused(tb, &t, "phase.deliver", |_| {
        as_root(
            tb,
            &format!(
                "printf '#!/bin/sh\\nmv {r} {r}.away\\n' > {r}/hooks/post-receive && chmod +x {r}/hooks/post-receive"
            ),
        );
    });
    let rec = record_of(tb, &t, &run);
    as_root(tb, &format!("mv {r}.away {r} && rm {r}/hooks/post-receive"));
    arm(tb, &t, "");
    let d = &rec["delivery"];
    assert_eq!(
        (rec["result"].as_str(), status.as_str()),
        (Some("passed"), "0"),
        "{rec:#}"
    );
    assert_eq!(s(d, "outcome"), "pushed", "{rec:#}");
    assert!(
        s(d, "reason").contains("reading"),
        "the failed read-back is said: {rec:#}"
    );
    // The remote answers again: what landed is what the record says.
    let tip = remote_tip(tb, "dl-readback", branch);
    assert_eq!(s(d, "pushed_tip"), tip, "{rec:#}");
    assert_eq!(tip, local_tip(tb, &t, s(&rec, "branch")));
}
