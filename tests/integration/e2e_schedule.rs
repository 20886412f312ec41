//! Timers follow the specs (issue 19, item 2), on the real user manager: `cyclix install`
//! removes the timer and drop-in of a tenant whose spec lost its `schedule` or is gone, and a
//! paused tenant's timer stays off across `install` until `cyclix resume`. Every step checks
//! systemd itself (`is-enabled`, `is-active`) and the drop-in file, not only cyclix's words.
//! `install` runs with `--tenant` only: the testbed is shared with tests whose tenants have
//! schedules of their own.

use crate::common::run::prepared;
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};

/// `is-enabled` and `is-active` of the tenant's timer, and whether its drop-in exists.
fn timer_state(tb: &Testbed, t: &str) -> String {
    let out = tb.user_sh(&format!(
        "printf '%s %s %s' \"$(systemctl --user is-enabled cyclix-run@{t}.timer 2>&1 | head -1)\" \
         \"$(systemctl --user is-active cyclix-run@{t}.timer)\" \
         \"$(test -e ~/.config/systemd/user/cyclix-run@{t}.timer.d/schedule.conf && echo dropin || echo no-dropin)\""
    ));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn cyclix(tb: &Testbed, words: &[&str]) -> String {
    let bin = tb.cyclix_bin();
    let mut command = vec![bin.as_str()];
    command.extend_from_slice(words);
    expect_success(&tb.user(&command), &format!("cyclix {}", words.join(" ")))
}

#[test]
fn install_converges_timers_on_the_specs_and_a_pause_holds_until_resume() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    // A time that never comes during the test: 03:00 on 1 January.
    let scheduled = Tenant::new("e2e-sched")
        .extra_yaml("schedule:\n  on_calendar: \"*-01-01 03:00:00\"\n  persistent: false");
    let t = scheduled.write(tb);
    let out = cyclix(tb, &["install", "--tenant", &t]);
    assert!(
        out.contains(&format!("enabled cyclix-run@{t}.timer: next elapse")),
        "{out}"
    );
    assert_eq!(
        timer_state(tb, &t),
        "enabled active dropin",
        "after install"
    );

    // Paused: off at once, and `install` keeps it off and says why.
    let out = cyclix(tb, &["pause", &t]);
    assert!(out.contains(&format!("paused {t}")), "{out}");
    let off = timer_state(tb, &t);
    assert!(
        off.ends_with(" inactive no-dropin") && !off.starts_with("enabled"),
        "after pause: {off}"
    );
    // A second pause changes nothing and is no error (it was exit 2, "unit not found").
    let again = cyclix(tb, &["pause", &t]);
    assert!(again.contains(&format!("{t} is already paused")), "{again}");
    let out = cyclix(tb, &["install", "--tenant", &t]);
    assert!(out.contains("not installed: the tenant is paused"), "{out}");
    assert_eq!(timer_state(tb, &t), off, "install must honour the pause");
    let status = cyclix(tb, &["status", &t]);
    assert!(
        status.contains(&format!("{t} is paused (paused at ")),
        "{status}"
    );
    // The timer started by hand while paused: its tick starts no run.
    let tick = tb.user(&[&tb.cyclix_bin(), "tick", &t]);
    assert!(tick.status.success(), "{tick:?}");
    assert!(
        String::from_utf8_lossy(&tick.stderr).contains("is paused"),
        "{tick:?}"
    );
    let active = tb.user_sh(&format!(
        "systemctl --user is-active cyclix-run@{t}.service"
    ));
    assert_eq!(String::from_utf8_lossy(&active.stdout).trim(), "inactive");

    let out = cyclix(tb, &["resume", &t]);
    assert!(
        out.contains(&format!("resumed {t}")) && out.contains("next elapse"),
        "{out}"
    );
    assert_eq!(timer_state(tb, &t), "enabled active dropin", "after resume");

    // The schedule removed from the spec: install removes the timer and its drop-in.
    Tenant::new("e2e-sched").write(tb);
    let out = cyclix(tb, &["install", "--tenant", &t]);
    assert!(
        out.contains(&format!("removed cyclix-run@{t}.timer"))
            && out.contains("no `schedule` any more"),
        "{out}"
    );
    let gone = timer_state(tb, &t);
    assert!(
        gone.ends_with(" inactive no-dropin") && !gone.starts_with("enabled"),
        "{gone}"
    );
    // A tenant with no schedule (no timer the manager knows) is paused all the same, exit 0:
    // it was exit 2 with the marker written (half done).
    let out = cyclix(tb, &["pause", &t]);
    assert!(out.contains(&format!("paused {t}")), "{out}");
    cyclix(tb, &["resume", &t]);

    // The spec deleted: install still finds the installed timer and removes it.
    scheduled.write(tb);
    cyclix(tb, &["install", "--tenant", &t]);
    assert_eq!(
        timer_state(tb, &t),
        "enabled active dropin",
        "scheduled again"
    );
    expect_success(
        &tb.user_sh(&format!("rm ~/.config/cyclix/tenants/{t}.yaml")),
        "delete the spec",
    );
    let out = cyclix(tb, &["install", "--tenant", &t]);
    assert!(out.contains("its spec is gone"), "{out}");
    let gone = timer_state(tb, &t);
    assert!(
        gone.ends_with(" inactive no-dropin") && !gone.starts_with("enabled"),
        "{gone}"
    );
}

/// No silent drift (issue 32 item 2): a schedule removed from the spec, a `notify:` added to
/// it and a unit template changed since `install` are each named by `check` and `status`
/// before anyone runs `install`, which prints them as its plan and converges them; after it,
/// `check` passes its `install` row (the positive control that the row can pass at all is the
/// first check, right after an install). Exclusive: it changes a shared unit template.
#[test]
fn check_and_status_name_what_install_would_change_and_install_converges_it() {
    let _alone = crate::common::testbed::exclusive();
    let tb = prepared();
    let schedule = "schedule:\n  on_calendar: \"*-01-01 03:00:00\"\n  persistent: false";
    let t = Tenant::new("e2e-drift").extra_yaml(schedule).write(tb);
    let c = tb.cyclix_bin();
    let row = |what: &str| {
        let out = expect_success(
            &tb.user_sh(&format!(
                "{c} check --quick --tenant {t} --json | python3 -c 'import json,sys; r=[x for x in json.load(sys.stdin)[\"checks\"] if x[\"id\"]==\"install\"][0]; print(r[\"status\"]); print(r[\"found\"])'"
            )),
            what,
        );
        let (status, found) = out.split_once('\n').unwrap_or((out.as_str(), ""));
        (status.trim().to_string(), found.trim().to_string())
    };
    // `--tenant`: an install of every tenant would start the keepers of other tests' pools.
    let _ = cyclix(tb, &["install", "--tenant", &t]);
    let (status, found) = row("right after install");
    assert_eq!(status, "pass", "{found}");
    // The three drifts.
    Tenant::new("e2e-drift")
        .extra_yaml("notify:\n  command: [\"true\"]")
        .write(tb);
    expect_success(
        &tb.user_sh("echo '# changed since install' >> ~/.config/systemd/user/cyclix-run@.service"),
        "a template changed since install",
    );
    let (status, found) = row("after the drift");
    assert_eq!(status, "warn", "{found}");
    let timer =
        format!("cyclix-run@{t}.timer is still installed, but its spec has no `schedule` any more");
    let notify = format!("cyclix-run@{t}.service.d/notify.conf is not installed");
    let template = "cyclix-run@.service differs from what this cyclix writes";
    for want in [timer.as_str(), notify.as_str(), template] {
        assert!(found.contains(want), "check names `{want}`: {found}");
    }
    let status_text = expect_success(&tb.user(&[&c, "status", &t]), "status");
    for want in [timer.as_str(), notify.as_str(), template] {
        assert!(
            status_text.contains(want),
            "status names `{want}`: {status_text}"
        );
    }
    let installed = cyclix(tb, &["install", "--tenant", &t]);
    let plan = installed.split("\nwrote").next().unwrap_or_default();
    assert!(
        plan.starts_with("plan: ")
            && plan.contains(&timer)
            && plan.contains(&notify)
            && plan.contains(template),
        "install prints its plan first: {installed}"
    );
    let (status, found) = row("after install");
    assert_eq!(status, "pass", "install converged: {found}");
}
