//! `cyclix prune` on real runs (issue 19, item 10): five runs of one tenant, each with its run
//! branch; the one merged into `repo.base` and the pushed one go with their records, the
//! unmerged ones only with `--keep-branches N` (older than the newest N branches: issue 32
//! item 3) or `--force`, the newest never; `--dry-run` changes nothing and says what a prune
//! would do.

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
    for _ in 0..5 {
        let out = start(tb, &t);
        let rec = record(tb, &t);
        assert!(out.status.success(), "{out:?}\n{rec:#}");
        assert_eq!(rec["result"], "passed", "{rec:#}");
        runs.push(rec["run_id"].as_str().expect("run id").to_owned());
    }
    let branch = |r: &str| format!("cyclix/{t}/{r}");
    // Run 1 merged into main; run 2 pushed (a remote-tracking ref holds it); runs 3 and 4 are
    // the only copies of their work; run 5 the newest.
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
    for r in &runs[2..4] {
        assert!(
            dry_out.contains(&format!(
                "kept run {r}: branch {} is not in the history of main and not pushed",
                branch(r)
            )),
            "{dry_out}"
        );
    }
    // The dry run's count is what would go, not what was chosen (issue 32 item 3: it said 4).
    assert!(
        dry_out.contains(&format!(
            "{t}: 2 of 5 runs would go; 2 chosen but kept (see above)"
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
        runs[2..]
            .iter()
            .map(|r| format!("{r}.json"))
            .collect::<Vec<_>>(),
        "{after}"
    );
    assert_eq!(
        branches.split_whitespace().collect::<Vec<_>>(),
        runs[2..].iter().map(|r| branch(r)).collect::<Vec<_>>(),
        "{after}"
    );

    // Nightly branches: the newest two runs' branches stay (runs 4 and 5), run 3's goes
    // without --force; the dry run says exactly that and changes nothing.
    let kb = |dry: &str| {
        let o = tb.user_sh(&format!("{c} prune {t} --keep 1 --keep-branches 2{dry}"));
        assert!(o.status.success(), "{o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let kb_dry = kb(" --dry-run");
    let gone3 = format!(
        "run {} of {t}: record and logs, branch {} (not merged and not pushed: older than the newest 2 such run branches (--keep-branches 2))",
        runs[2],
        branch(&runs[2])
    );
    let kept4 = format!(
        "kept run {}: branch {} is not in the history of main and not pushed, and is among the newest 2 run branches",
        runs[3],
        branch(&runs[3])
    );
    assert!(
        kb_dry.contains(&format!("would prune {gone3}"))
            && kb_dry.contains(&kept4)
            && kb_dry.contains(&format!("{t}: 1 of 3 runs would go; 1 chosen but kept")),
        "{kb_dry}"
    );
    assert_eq!(state("after the --keep-branches dry run"), after);
    // A branch the user committed on since the run is the only copy of that work: kept, named.
    let b3 = branch(&runs[2]);
    expect_success(
        &tb.user_sh(&format!(
            "set -e; cd ~/src/{t}; git checkout -q {b3}; \
             git -c user.name=u -c user.email=u@example.com commit -q --allow-empty -m 'my work on the run'; \
             git checkout -q main"
        )),
        "a user's commit on run 3's branch",
    );
    let moved = kb(" --dry-run");
    assert!(
        moved.contains(&format!(
            "kept run {}: branch {b3} moved since the run (its tip is not the run's last commit",
            runs[2]
        )) && moved.contains(&format!("{t}: 0 of 3 runs would go; 2 chosen but kept")),
        "{moved}"
    );
    expect_success(
        &tb.user_sh(&format!(
            "git -C ~/src/{t} update-ref refs/heads/{b3} {b3}~1"
        )),
        "the user takes the commit back",
    );
    let kb_out = kb("");
    assert!(
        kb_out.contains(&format!("pruned {gone3}")) && kb_out.contains(&kept4),
        "{kb_out}"
    );
    let after_kb = state("after --keep-branches");
    assert_eq!(
        after_kb.split_whitespace().collect::<Vec<_>>(),
        [
            format!("{}.json", runs[3]),
            format!("{}.json", runs[4]),
            branch(&runs[3]),
            branch(&runs[4])
        ],
        "{after_kb}"
    );

    let forced = tb.user_sh(&format!("{c} prune {t} --keep 1 --force"));
    assert!(forced.status.success(), "{forced:?}");
    let last = state("after --force");
    assert_eq!(
        last.split_whitespace().collect::<Vec<_>>(),
        [format!("{}.json", runs[4]), branch(&runs[4])],
        "the newest run stays: {last}"
    );
    // `cyclix status` still shows the last run.
    let status = expect_success(&tb.user_sh(&format!("{c} status {t}")), "status");
    assert!(status.contains(&runs[4]), "{status}");
    let zero = tb.user_sh(&format!("{c} prune {t} --keep 0"));
    assert_eq!(zero.status.code(), Some(1), "{zero:?}");
    assert!(
        String::from_utf8_lossy(&zero.stderr).contains("the newest run is always kept"),
        "{zero:?}"
    );
}
