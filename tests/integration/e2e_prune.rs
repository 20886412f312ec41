//! `cyclix prune` on real runs (issue 19, item 10): four runs of one tenant, each with its run
//! branch; the one merged into `repo.base` and the pushed one go with their records, the
//! unmerged one only with `--force`, the newest never; `--dry-run` changes nothing.

use crate::common::run::{prepared, record, start};
use crate::common::tenant::Tenant;
use crate::common::testbed::expect_success;

#[test]
fn prune_takes_merged_and_pushed_runs_keeps_the_only_copy_without_force_and_the_newest() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-prune").write(tb);
    // The tenant's runs are these four only (an earlier suite on a kept testbed left more).
    expect_success(
        &tb.user_sh(&format!("rm -rf ~/.local/state/cyclix/runs/{t}")),
        "forget earlier runs",
    );
    let mut runs = Vec::new();
    for _ in 0..4 {
        let out = start(tb, &t);
        let rec = record(tb, &t);
        assert!(out.status.success(), "{out:?}\n{rec:#}");
        assert_eq!(rec["result"], "passed", "{rec:#}");
        runs.push(rec["run_id"].as_str().expect("run id").to_owned());
    }
    let branch = |r: &str| format!("cyclix/{t}/{r}");
    // Run 1 merged into main; run 2 pushed (a remote-tracking ref holds it); run 3 is the
    // only copy of its work; run 4 the newest.
    expect_success(
        &tb.user_sh(&format!(
            "set -e; cd ~/src/{t}; git -c user.name=t -c user.email=t@example.com merge -q --no-edit {b1}
             rm -rf /tmp/prune-remote.git; git init -q --bare /tmp/prune-remote.git
             git remote add o /tmp/prune-remote.git; git push -q o {b2}; git fetch -q o",
            b1 = branch(&runs[0]),
            b2 = branch(&runs[1]),
        )),
        "merge run 1, push run 2",
    );
    let c = tb.cyclix_bin();
    let state = |what: &str| {
        expect_success(
            &tb.user_sh(&format!(
                "cd ~/.local/state/cyclix/runs/{t} && ls *.json | grep -v latest | sort | tr '\\n' ' '; echo; git -C ~/src/{t} branch --list 'cyclix/*' --format='%(refname:short)' | sort | tr '\\n' ' '"
            )),
            what,
        )
    };
    let before = state("before");
    let dry = tb.user_sh(&format!("{c} prune {t} --keep 1 --dry-run"));
    let dry_out = String::from_utf8_lossy(&dry.stdout).into_owned();
    assert!(dry.status.success(), "{dry:?}");
    for r in &runs[..2] {
        assert!(
            dry_out.contains(&format!("would prune run {r} of {t}")),
            "{dry_out}"
        );
    }
    assert!(
        dry_out.contains(&format!(
            "kept run {}: branch {} is not in the history of main and not pushed",
            runs[2],
            branch(&runs[2])
        )),
        "{dry_out}"
    );
    // The dry run's count is what would go, not what was chosen (issue 32 item 3: it said 3).
    assert!(
        dry_out.contains(&format!(
            "{t}: 2 of 4 runs would go; 1 chosen but kept (see above)"
        )),
        "{dry_out}"
    );
    assert_eq!(
        state("after the dry run"),
        before,
        "--dry-run changes nothing"
    );

    let once = tb.user_sh(&format!("{c} prune {t} --keep 1"));
    let once_out = String::from_utf8_lossy(&once.stdout).into_owned();
    assert!(once.status.success(), "{once:?}");
    assert!(
        once_out.contains(&format!(
            "pruned run {} of {t}: record and logs, branch {} (in the history of main)",
            runs[0],
            branch(&runs[0])
        )) && once_out.contains(&format!(
            "pruned run {} of {t}: record and logs, branch {} (pushed, in o/",
            runs[1],
            branch(&runs[1])
        )),
        "{once_out}"
    );
    let after = state("after prune");
    let (recs, branches) = after.split_once('\n').expect("two lines");
    assert_eq!(
        recs.split_whitespace().collect::<Vec<_>>(),
        [format!("{}.json", runs[2]), format!("{}.json", runs[3])],
        "{after}"
    );
    assert_eq!(
        branches.split_whitespace().collect::<Vec<_>>(),
        [branch(&runs[2]), branch(&runs[3])],
        "{after}"
    );

    let forced = tb.user_sh(&format!("{c} prune {t} --keep 1 --force"));
    assert!(forced.status.success(), "{forced:?}");
    let last = state("after --force");
    assert_eq!(
        last.split_whitespace().collect::<Vec<_>>(),
        [format!("{}.json", runs[3]), branch(&runs[3])],
        "the newest run stays: {last}"
    );
    // `cyclix status` still shows the last run.
    let status = expect_success(&tb.user_sh(&format!("{c} status {t}")), "status");
    assert!(status.contains(&runs[3]), "{status}");
    let zero = tb.user_sh(&format!("{c} prune {t} --keep 0"));
    assert_eq!(zero.status.code(), Some(1), "{zero:?}");
    assert!(
        String::from_utf8_lossy(&zero.stderr).contains("the newest run is always kept"),
        "{zero:?}"
    );
}
