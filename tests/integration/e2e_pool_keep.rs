//! The warm pool's keeper (`cyclix pool keep`, `cyclix-pool@TENANT.service`, issue 16) on the
//! real user manager: `cyclix install --tenant T` enables and starts it for a pooled tenant;
//! it fills the pool to size, a run claims warm and the keeper refills; a keeper killed by SIGKILL
//! mid-fill is restarted by its unit and converges (zero leftovers, the pool back at size); it
//! expires an idle environment; a dead ready one (its proxy stopped or killed) is destroyed by
//! `cyclix pool expire` and by the restarted keeper, which refills; with a schedule far away it keeps the pool empty and `status`
//! says until when; `install` of the pool set to 0 stops it and destroys the pool; `cyclix
//! uninstall` leaves no keeper and no pooled object. Each test waits on a condition with a
//! deadline (`timeout N sh -c 'until …'`), never a fixed sleep.

use crate::common::run::{leftovers, prepared, record};
use crate::common::tenant::Tenant;
use crate::common::testbed::{Testbed, expect_success};
use crate::e2e_pool::{drain, pool_files};

/// `cyclix ARGS` as cyx (must succeed); its stdout.
fn cyclix(tb: &Testbed, args: &str) -> String {
    expect_success(
        &tb.user_sh(&format!("{} {args}", tb.cyclix_bin())),
        &format!("cyclix {args}"),
    )
}

/// Waits up to `secs` for the shell condition `cond` (run as cyx) to hold; on the deadline
/// fails with `what`, the keeper's state and its journal.
pub(crate) fn wait(tb: &Testbed, t: &str, secs: u32, cond: &str, what: &str) {
    let out = tb.user_sh(&format!(
        "timeout {secs} sh -c '{}' && echo OK",
        format!("until {cond}; do sleep 0.2; done").replace('\'', "'\\''")
    ));
    if String::from_utf8_lossy(&out.stdout).trim() == "OK" {
        return;
    }
    let why = tb.user_sh(&format!(
        "systemctl --user status cyclix-pool@{t}.service --no-pager; cat $XDG_RUNTIME_DIR/cyclix/pool/{t}/keeper.json; \
         journalctl --user -u cyclix-pool@{t}.service --no-pager | tail -30"
    ));
    panic!(
        "{what}: not within {secs} s\n{out:?}\n{}",
        String::from_utf8_lossy(&why.stdout)
    );
}

/// The shell condition "T's pool holds exactly `n` ready and none being filled".
pub(crate) fn holds(t: &str, n: usize) -> String {
    let p = format!("$XDG_RUNTIME_DIR/cyclix/pool/{t}");
    format!(
        "[ \"$(ls {p}/ready 2>/dev/null | wc -l)\" = {n} ] && [ \"$(ls {p}/filling 2>/dev/null | wc -l)\" = 0 ]"
    )
}

/// The keeper's state file of `t` as JSON.
fn keeper_json(tb: &Testbed, t: &str) -> serde_json::Value {
    let text = expect_success(
        &tb.user_sh(&format!("cat $XDG_RUNTIME_DIR/cyclix/pool/{t}/keeper.json")),
        "read keeper.json",
    );
    serde_json::from_str(&text).expect("keeper.json is JSON")
}

/// `is-active` and `is-enabled` of `t`'s keeper.
fn keeper_unit(tb: &Testbed, t: &str) -> String {
    let out = tb.user_sh(&format!(
        "printf '%s %s' \"$(systemctl --user is-active cyclix-pool@{t}.service)\" \
         \"$(systemctl --user is-enabled cyclix-pool@{t}.service 2>&1 | head -1)\""
    ));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes (or with `None` removes) the test drop-in of `t`'s keeper and reloads the manager.
fn dropin(tb: &Testbed, t: &str, env: Option<&str>) {
    let d = format!("~/.config/systemd/user/cyclix-pool@{t}.service.d");
    let script = match env {
        Some(e) => format!(
            "mkdir -p {d} && printf '[Service]\\nEnvironment={e}\\n' > {d}/e2e.conf && systemctl --user daemon-reload"
        ),
        None => format!("rm -rf {d} && systemctl --user daemon-reload"),
    };
    expect_success(&tb.user_sh(&script), "keeper drop-in");
}

/// Sets `t`'s pool to size 0 and installs: the keeper is stopped and disabled and the pool
/// destroyed; asserts that nothing of `envs` is left.
fn put_away(tb: &Testbed, t: &str, envs: &[String]) {
    expect_success(
        &tb.user_sh(&format!(
            "sed -i 's/^  size: .*/  size: 0/' ~/.config/cyclix/tenants/{t}.yaml"
        )),
        "set the pool to 0",
    );
    let out = cyclix(tb, &format!("install --tenant {t}"));
    assert!(
        out.contains(&format!(
            "removed cyclix-pool@{t}.service (stopped, disabled)"
        )),
        "{out}"
    );
    assert!(
        keeper_unit(tb, t).starts_with("inactive "),
        "{}",
        keeper_unit(tb, t)
    );
    for state in ["ready", "filling", "expiring", "ledgers"] {
        assert_eq!(pool_files(tb, t, state), "", "{state}");
    }
    for e in envs {
        let left = leftovers(tb, e, t);
        assert!(left.trim().is_empty(), "left by {e}:\n{left}");
    }
}

/// The ready environments of `t`, one a line.
pub(crate) fn ready(tb: &Testbed, t: &str) -> Vec<String> {
    pool_files(tb, t, "ready")
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_keeper_fills_the_pool_a_run_claims_warm_and_the_keeper_refills_it() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-poolkeep")
        .extra_yaml("pool:\n  size: 2")
        .write(tb);
    drain(tb, &t);
    let out = cyclix(tb, &format!("install --tenant {t}"));
    assert!(
        out.contains(&format!("enabled and started cyclix-pool@{t}.service")),
        "{out}"
    );
    assert_eq!(keeper_unit(tb, &t), "active enabled");
    wait(tb, &t, 120, &holds(&t, 2), "the keeper fills the pool to 2");
    let first = ready(tb, &t);
    let status = cyclix(tb, &format!("status {t}"));
    assert!(
        status.contains("pool: size 2: 2 ready, 0 filling")
            && status.contains(&format!("cyclix-pool@{t}.service: active: keeping 2 ready")),
        "{status}"
    );
    // Its exit status also counts the host's other checks: only the pool's row matters here.
    let check = tb.user(&[
        &tb.cyclix_bin(),
        "check",
        "--quick",
        "--tenant",
        &t,
        "--json",
    ]);
    let check: serde_json::Value = serde_json::from_slice(&check.stdout).expect("check JSON");
    let row = check["checks"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["id"] == format!("pool:{t}")))
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["status"], "pass", "{row:#}");

    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert_eq!(rec["environment"]["pooled"], true, "{rec:#}");
    let claimed = rec["environment"]["id"].as_str().unwrap_or("").to_string();
    assert!(first.contains(&claimed), "{claimed} not in {first:?}");
    let left = leftovers(tb, &claimed, &t);
    assert!(left.trim().is_empty(), "left by {claimed}:\n{left}");
    // The keeper refills after the claim: two ready again, one of them new.
    wait(tb, &t, 120, &holds(&t, 2), "the keeper refills the pool");
    let now = ready(tb, &t);
    assert!(
        !now.contains(&claimed) && now.iter().any(|e| !first.contains(e)),
        "{first:?} -> {now:?}"
    );
    assert!(keeper_json(tb, &t)["filled"].as_u64() >= Some(3));
    let mut all = first;
    all.extend(now);
    put_away(tb, &t, &all);
}

#[test]
fn a_keeper_killed_mid_fill_is_restarted_and_converges_to_zero_leftovers() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-poolkill")
        .extra_yaml("pool:\n  size: 1")
        .write(tb);
    drain(tb, &t);
    // The keeper's fill holds once the environment runs, before it is ready.
    dropin(tb, &t, Some("CYCLIX_FAILPOINTS=pool.fill.held"));
    cyclix(tb, &format!("install --tenant {t}"));
    let p = format!("$XDG_RUNTIME_DIR/cyclix/pool/{t}");
    wait(
        tb,
        &t,
        120,
        &format!(
            "[ \"$(ls {p}/filling | wc -l)\" = 1 ] && e=$(ls {p}/filling) && \
             [ \"$(podman inspect --format {{{{.State.Status}}}} cyclix-$e-proxy 2>/dev/null)\" = running ]"
        ),
        "the keeper's fill is held with its environment up",
    );
    let dead = pool_files(tb, &t, "filling");
    // Positive control: the half-made environment's objects exist before the kill.
    let up = tb.user_sh(&format!(
        "podman pod exists cyclix-{dead} && echo pod; podman network exists cyclix-{dead} && echo net; \
         ls $XDG_RUNTIME_DIR/systemd/user/ | grep -c {dead}"
    ));
    let up = String::from_utf8_lossy(&up.stdout).into_owned();
    assert!(
        up.starts_with("pod\nnet\n") && !up.ends_with("\n0\n"),
        "{up}"
    );
    // The restarted keeper must not hold again.
    dropin(tb, &t, None);
    expect_success(
        &tb.user_sh(&format!(
            "systemctl --user kill -s KILL cyclix-pool@{t}.service"
        )),
        "SIGKILL the keeper",
    );
    wait(
        tb,
        &t,
        120,
        &format!("{} && ! ls {p}/ready | grep -qx {dead}", holds(&t, 1)),
        "the restarted keeper converges and refills",
    );
    let restarts = expect_success(
        &tb.user_sh(&format!(
            "systemctl --user show -p NRestarts --value cyclix-pool@{t}.service"
        )),
        "NRestarts",
    );
    assert!(
        restarts.trim().parse::<u32>().unwrap_or(0) >= 1,
        "{restarts}"
    );
    let left = leftovers(tb, &dead, &t);
    assert!(left.trim().is_empty(), "left by {dead}:\n{left}");
    let said = expect_success(
        &tb.user_sh(&format!(
            "journalctl --user -u cyclix-pool@{t}.service --no-pager -o cat"
        )),
        "the keeper's journal",
    );
    assert!(
        said.contains(&format!(
            "destroyed environment {dead}, left half-made by a filler that died"
        )),
        "{said}"
    );
    let (statuses, _) = crate::e2e_pool::leftover_statuses(tb, &dead);
    assert!(statuses.is_empty(), "{statuses:?}");
    let now = ready(tb, &t);
    put_away(tb, &t, &now);
}

#[test]
fn the_keeper_expires_an_idle_environment_and_fills_a_fresh_one() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-poolexp")
        .extra_yaml("pool:\n  size: 1\n  max_idle: 1m")
        .write(tb);
    drain(tb, &t);
    // max_idle 4 s instead of the spec's minimum of 1 min (debug builds only).
    dropin(tb, &t, Some("CYCLIX_POOL_MAX_IDLE_MS=4000"));
    cyclix(tb, &format!("install --tenant {t}"));
    wait(tb, &t, 120, &holds(&t, 1), "the keeper fills the pool");
    let first = ready(tb, &t);
    // The keeper's own mark that the expired one is gone (it says so after its objects are
    // destroyed), then a fresh one ready. Leaving `ready/` is not that mark: the keeper moves
    // it out before it destroys it (a full run of the suite saw its objects mid-teardown).
    wait(
        tb,
        &t,
        120,
        &format!(
            "journalctl --user -u cyclix-pool@{t}.service --no-pager -o cat | grep -qF 'environment {} expired (idle' && {} && ! ls $XDG_RUNTIME_DIR/cyclix/pool/{t}/ready | grep -qx {}",
            first[0],
            holds(&t, 1),
            first[0]
        ),
        "the keeper expires the idle one and fills another",
    );
    dropin(tb, &t, None);
    let left = leftovers(tb, &first[0], &t);
    assert!(left.trim().is_empty(), "left by {}:\n{left}", first[0]);
    let said = expect_success(
        &tb.user_sh(&format!(
            "journalctl --user -u cyclix-pool@{t}.service --no-pager -o cat"
        )),
        "the keeper's journal",
    );
    assert!(
        said.contains(&format!("environment {} expired (idle", first[0])),
        "{said}"
    );
    assert!(keeper_json(tb, &t)["expired"].as_u64() >= Some(1));
    let now = ready(tb, &t);
    put_away(tb, &t, &now);
}

#[test]
fn with_a_schedule_far_away_the_keeper_keeps_the_pool_empty_and_says_until_when() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    // A time that never comes during the test: 03:00 on 1 January.
    let t = Tenant::new("e2e-poolwarm")
        .extra_yaml(
            "pool:\n  size: 1\n  warm_before: 5m\nschedule:\n  on_calendar: \"*-01-01 03:00:00\"\n  persistent: false",
        )
        .write(tb);
    drain(tb, &t);
    let out = cyclix(tb, &format!("install --tenant {t}"));
    assert!(
        out.contains(&format!("enabled cyclix-run@{t}.timer")),
        "{out}"
    );
    wait(
        tb,
        &t,
        60,
        &format!("grep -q '\"state\": \"waiting\"' $XDG_RUNTIME_DIR/cyclix/pool/{t}/keeper.json"),
        "the keeper waits for warm_before",
    );
    let k = keeper_json(tb, &t);
    let elapse_s = expect_success(
        &tb.user_sh(&format!(
            "date -u +%s -d \"$(systemctl --user show -p NextElapseUSecRealtime --value cyclix-run@{t}.timer)\""
        )),
        "the timer's next elapse",
    );
    let next_ms: u128 = elapse_s.trim().parse::<u128>().expect("unix seconds") * 1000;
    assert_eq!(
        k["next_elapse_ms"].as_u64().map(u128::from),
        Some(next_ms),
        "{k:#}"
    );
    let from = next_ms - 300_000;
    assert_eq!(
        k["warm_from_ms"].as_u64().map(u128::from),
        Some(from),
        "{k:#}"
    );
    for state in ["ready", "filling"] {
        assert_eq!(pool_files(tb, &t, state), "", "{state}");
    }
    let ts = expect_success(
        &tb.user_sh(&format!(
            "date -u -d @{} '+%Y-%m-%d %H:%M:%S UTC'",
            from / 1000
        )),
        "format the time",
    );
    let status = cyclix(tb, &format!("status {t}"));
    assert!(
        status.contains(&format!(
            "cyclix-pool@{t}.service: active: waiting for warm_before until {}",
            ts.trim()
        )),
        "{status}"
    );
    // Positive control: without the schedule the same keeper fills the pool.
    expect_success(
        &tb.user_sh(&format!(
            "sed -i '/^schedule:/,$d' ~/.config/cyclix/tenants/{t}.yaml"
        )),
        "drop the schedule",
    );
    let out = cyclix(tb, &format!("install --tenant {t}"));
    assert!(
        out.contains(&format!("removed cyclix-run@{t}.timer")),
        "{out}"
    );
    wait(
        tb,
        &t,
        120,
        &holds(&t, 1),
        "the keeper fills once there is no schedule",
    );
    let now = ready(tb, &t);
    put_away(tb, &t, &now);
}

#[test]
fn uninstall_leaves_no_keeper_and_no_pooled_object() {
    // Exclusive: uninstall removes the templates every other test needs (put back below).
    let _exclusive = crate::common::testbed::exclusive();
    let tb = prepared();
    let t = Tenant::new("e2e-pooluni")
        .extra_yaml("pool:\n  size: 1")
        .write(tb);
    drain(tb, &t);
    cyclix(tb, &format!("install --tenant {t}"));
    wait(tb, &t, 120, &holds(&t, 1), "the keeper fills the pool");
    let env = ready(tb, &t);
    // Positive control: the environment's proxy runs.
    let up = tb.user_sh(&format!(
        "podman inspect --format '{{{{.State.Status}}}}' cyclix-{}-proxy",
        env[0]
    ));
    assert_eq!(
        String::from_utf8_lossy(&up.stdout).trim(),
        "running",
        "{up:?}"
    );
    let out = cyclix(tb, "uninstall");
    assert!(
        out.contains(&format!(
            "removed cyclix-pool@{t}.service (stopped, disabled); destroyed 1 environment(s) of its pool"
        )),
        "{out}"
    );
    let unit = keeper_unit(tb, &t);
    assert!(
        unit.starts_with("inactive ") && !unit.ends_with(" enabled"),
        "{unit}"
    );
    let left = leftovers(tb, &env[0], &t);
    assert!(left.trim().is_empty(), "left by {}:\n{left}", env[0]);
    for state in ["ready", "filling", "expiring", "ledgers"] {
        assert_eq!(pool_files(tb, &t, state), "", "{state}");
    }
    let tmpl = tb.user_sh("ls ~/.config/systemd/user/ | grep -c '^cyclix-pool' || true");
    assert_eq!(String::from_utf8_lossy(&tmpl.stdout).trim(), "0");
    // Put the templates back for the tests that follow (the demo tenant has no pool).
    expect_success(
        &tb.user_sh(&format!(
            "rm -f ~/.config/cyclix/tenants/{t}.yaml; {} install --tenant demo >/dev/null",
            tb.cyclix_bin()
        )),
        "reinstall",
    );
}

/// Makes directory `.1` of the testbed writable (mode 755) when dropped.
struct Writable<'a>(&'a Testbed, &'static str);

impl Drop for Writable<'_> {
    fn drop(&mut self) {
        let _ = self.0.user_sh(&format!("chmod 755 {}", self.1));
    }
}

#[test]
fn a_keeper_whose_fills_fail_retries_says_so_in_status_and_check_and_recovers() {
    // Exclusive: the runtime unit directory (where every fill installs its generated units) is
    // made read-only for a while.
    let _exclusive = crate::common::testbed::exclusive();
    let tb = prepared();
    let t = Tenant::new("e2e-poolfail")
        .extra_yaml("pool:\n  size: 1")
        .write(tb);
    drain(tb, &t);
    let q = "$XDG_RUNTIME_DIR/systemd/user";
    // Writable again whatever happens below: a panic in between must not leave every later
    // test's fill and run failing on a read-only unit directory.
    let _writable = Writable(tb, q);
    expect_success(
        &tb.user_sh(&format!("mkdir -p {q} && chmod 555 {q}")),
        "make the runtime unit directory read-only",
    );
    cyclix(tb, &format!("install --tenant {t}"));
    wait(
        tb,
        &t,
        60,
        &format!("grep -q '\"failures\": [1-9]' $XDG_RUNTIME_DIR/cyclix/pool/{t}/keeper.json"),
        "the keeper's fill fails and is written down",
    );
    let status = cyclix(tb, &format!("status {t}"));
    let check = tb.user(&[
        &tb.cyclix_bin(),
        "check",
        "--quick",
        "--tenant",
        &t,
        "--json",
    ]);
    expect_success(&tb.user_sh(&format!("chmod 755 {q}")), "writable again");
    assert!(
        status.contains(&format!(
            "cyclix-pool@{t}.service: active: cannot refill; last fill error"
        )) && status.contains("retries at")
            && status.contains("cannot refill: its last"),
        "{status}"
    );
    let check: serde_json::Value = serde_json::from_slice(&check.stdout).expect("check JSON");
    let row = check["checks"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["id"] == format!("pool:{t}")))
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["status"], "warn", "{row:#}");
    assert!(
        row["found"]
            .as_str()
            .unwrap_or("")
            .contains("cannot refill")
            && row["fix"]
                .as_str()
                .unwrap_or("")
                .contains(&format!("cyclix pool fill {t}")),
        "{row:#}"
    );
    // A failed fill leaves nothing half-made: no environment in filling/, no ledger.
    for state in ["ready", "filling", "ledgers"] {
        assert_eq!(pool_files(tb, &t, state), "", "{state}");
    }
    // Writable again: the next retry (a bounded backoff) fills, and the error is cleared.
    wait(
        tb,
        &t,
        120,
        &holds(&t, 1),
        "the keeper's retry fills the pool",
    );
    let k = keeper_json(tb, &t);
    assert!(k["failures"] == 0 && k.get("last_error").is_none(), "{k:#}");
    let check = tb.user(&[
        &tb.cyclix_bin(),
        "check",
        "--quick",
        "--tenant",
        &t,
        "--json",
    ]);
    let check: serde_json::Value = serde_json::from_slice(&check.stdout).expect("check JSON");
    let ok = check["checks"].as_array().is_some_and(|a| {
        a.iter()
            .any(|c| c["id"] == format!("pool:{t}") && c["status"] == "pass")
    });
    assert!(ok, "{check:#}");
    let now = ready(tb, &t);
    put_away(tb, &t, &now);
}

#[test]
fn a_keeper_stopped_mid_fill_finishes_the_fill_and_leaves_nothing_half_made() {
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-poolterm")
        .extra_yaml("pool:\n  size: 2")
        .write(tb);
    drain(tb, &t);
    cyclix(tb, &format!("install --tenant {t}"));
    let p = format!("$XDG_RUNTIME_DIR/cyclix/pool/{t}");
    // Stopped (SIGTERM) as soon as a fill is under way (positive control: its `filling/`).
    let out = expect_success(
        &tb.user_sh(&format!(
            "timeout 60 sh -c 'until [ \"$(ls {p}/filling 2>/dev/null | wc -l)\" = 1 ]; do sleep 0.05; done' && \
             ls {p}/filling && systemctl --user stop cyclix-pool@{t}.service && echo STOPPED"
        )),
        "stop the keeper mid-fill",
    );
    let mut lines = out.lines();
    let filling = lines.next().unwrap_or("").to_string();
    assert_eq!(lines.next(), Some("STOPPED"), "{out}");
    assert_eq!(pool_files(tb, &t, "filling"), "", "nothing half-made");
    let k = keeper_json(tb, &t);
    assert_eq!(k["state"], "stopped", "{k:#}");
    let said = expect_success(
        &tb.user_sh(&format!(
            "journalctl --user -u cyclix-pool@{t}.service --no-pager -o cat"
        )),
        "the keeper's journal",
    );
    assert!(said.contains("keeper stopped (SIGTERM)"), "{said}");
    // The fill under way was finished: it is ready (or, had it failed, destroyed).
    let ready_now = ready(tb, &t);
    if !ready_now.contains(&filling) {
        let left = leftovers(tb, &filling, &t);
        assert!(left.trim().is_empty(), "left by {filling}:\n{left}");
    }
    assert_eq!(keeper_unit(tb, &t), "inactive enabled");
    let mut all = ready_now;
    all.push(filling);
    put_away(tb, &t, &all);
}

/// The shell condition "`unit` is not active" (it stopped or failed).
fn not_active(unit: &str) -> String {
    format!("! systemctl --user is-active --quiet {unit}")
}

/// `unit`'s `ActiveState` (`systemctl --user is-active`).
fn active_state(tb: &Testbed, unit: &str) -> String {
    let out = tb.user_sh(&format!("systemctl --user is-active {unit}"));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_dead_ready_environment_is_destroyed_by_pool_expire_and_by_the_restarted_keeper_which_refills()
{
    let _shared = crate::common::testbed::shared();
    let tb = prepared();
    let t = Tenant::new("e2e-pooldead")
        .extra_yaml("pool:\n  size: 2")
        .write(tb);
    drain(tb, &t);
    cyclix(tb, &format!("install --tenant {t}"));
    wait(tb, &t, 120, &holds(&t, 2), "the keeper fills the pool to 2");
    let first = ready(tb, &t);
    let (a, b) = (first[0].clone(), first[1].clone());
    let mut all = first.clone();

    // A's proxy unit stopped: A is dead, and (positive control) still ready: nothing looks.
    let a_proxy = format!("cyclix-{a}-proxy.service");
    expect_success(
        &tb.user_sh(&format!("systemctl --user stop {a_proxy}")),
        "stop A's proxy unit",
    );
    wait(tb, &t, 60, &not_active(&a_proxy), "A's proxy unit stops");
    let state = active_state(tb, &a_proxy);
    assert!(
        ready(tb, &t).contains(&a),
        "positive control: {a} still ready"
    );
    let out = cyclix(tb, &format!("pool expire {t}"));
    assert!(
        out.contains(&format!(
            "pool {t}: environment {a} is dead (its proxy unit {a_proxy} is {state}) and destroyed"
        )),
        "{out}"
    );
    assert!(!out.contains(&b), "{b} is alive: {out}");
    assert!(!ready(tb, &t).contains(&a));
    let left = leftovers(tb, &a, &t);
    assert!(left.trim().is_empty(), "left by {a}:\n{left}");
    // Taking A out of ready/ wakes the keeper, which refills.
    wait(tb, &t, 120, &holds(&t, 2), "the keeper refills after A");
    all.extend(ready(tb, &t));

    // B's proxy container killed: dead, and (positive control) the running keeper leaves it
    // ready; its restart (as when the user manager restarts) destroys it and refills.
    let b_proxy = format!("cyclix-{b}-proxy.service");
    expect_success(
        &tb.user_sh(&format!("podman kill cyclix-{b}-proxy")),
        "kill B's proxy",
    );
    wait(tb, &t, 60, &not_active(&b_proxy), "B's proxy unit ends");
    let state = active_state(tb, &b_proxy);
    assert!(
        ready(tb, &t).contains(&b),
        "positive control: {b} still ready"
    );
    expect_success(
        &tb.user_sh(&format!("systemctl --user restart cyclix-pool@{t}.service")),
        "restart the keeper",
    );
    wait(
        tb,
        &t,
        120,
        &format!(
            "journalctl --user -u cyclix-pool@{t}.service --no-pager -o cat | grep -qF 'environment {b} is dead (its proxy unit {b_proxy} is {state}) and destroyed' && {} && ! ls $XDG_RUNTIME_DIR/cyclix/pool/{t}/ready | grep -qx {b} && \
             grep -q '\"state\": \"full\"' $XDG_RUNTIME_DIR/cyclix/pool/{t}/keeper.json",
            holds(&t, 2)
        ),
        "the restarted keeper destroys B, refills and says it is full",
    );
    let left = leftovers(tb, &b, &t);
    assert!(left.trim().is_empty(), "left by {b}:\n{left}");
    let now = ready(tb, &t);
    assert!(now.iter().any(|e| !all.contains(e)), "{all:?} -> {now:?}");
    let k = keeper_json(tb, &t);
    assert!(
        k["dead"] == 1 && k["state"] == "full" && k.get("last_error").is_none(),
        "{k:#}"
    );
    let status = cyclix(tb, &format!("status {t}"));
    assert!(
        status.contains("pool: size 2: 2 ready, 0 filling, 0 claimed, 0 expiring")
            && status.contains(&format!("cyclix-pool@{t}.service: active: keeping 2 ready")),
        "{status}"
    );

    let out = tb.user(&[&tb.cyclix_bin(), "run", &t]);
    let rec = record(tb, &t);
    assert!(out.status.success(), "{out:?}\n{rec:#}");
    assert_eq!(rec["result"], "passed", "{rec:#}");
    assert_eq!(rec["environment"]["pooled"], true, "{rec:#}");
    all.extend(now);
    wait(
        tb,
        &t,
        120,
        &holds(&t, 2),
        "the keeper refills after the run",
    );
    all.extend(ready(tb, &t));
    all.sort();
    all.dedup();
    put_away(tb, &t, &all);
}
