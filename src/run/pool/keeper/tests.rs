//! `keeper`'s unit tests: the decision at its edges.

use super::*;

const MIN: u128 = 60_000;
const NOW: u128 = 1_800_000_000_000;

fn facts(schedule: Schedule) -> Facts {
    Facts {
        now_ms: NOW,
        size: 2,
        ready_ms: Vec::new(),
        filling: 0,
        max_idle_ms: 120 * MIN,
        warm_before_ms: 10 * MIN,
        schedule,
        retry_at_ms: None,
    }
}

#[test]
fn without_a_schedule_the_pool_is_kept_full() {
    let d = decide(&facts(Schedule::None));
    assert!(d.fill && !d.expire, "{d:?}");
    assert_eq!((d.want, d.warm_from_ms, d.wake_ms), (2, None, NOW));
    // Full: nothing to do until the oldest ready one expires.
    let mut f = facts(Schedule::None);
    f.ready_ms = vec![NOW - 30 * MIN, NOW - MIN];
    let d = decide(&f);
    assert!(!d.fill && !d.expire, "{d:?}");
    assert_eq!(d.wake_ms, NOW + MAX_WAIT_MS);
    // One being filled counts: one ready + one filling is full.
    f.ready_ms = vec![NOW];
    f.filling = 1;
    assert!(!decide(&f).fill);
    f.filling = 0;
    assert!(decide(&f).fill, "one short");
}

#[test]
fn the_wait_is_the_next_deadline_capped() {
    let mut f = facts(Schedule::None);
    f.ready_ms = vec![NOW, NOW];
    // max_idle (2 h) is past the cap: the keeper reads the timer again within MAX_WAIT_MS.
    assert_eq!(decide(&f).wake_ms, NOW + MAX_WAIT_MS);
    f.max_idle_ms = MIN;
    assert_eq!(decide(&f).wake_ms, NOW + MIN);
}

#[test]
fn an_environment_idle_exactly_max_idle_expires_and_one_short_of_it_does_not() {
    let mut f = facts(Schedule::None);
    f.ready_ms = vec![NOW - 120 * MIN, NOW];
    let d = decide(&f);
    assert!(
        d.expire && !d.fill,
        "expire first, then decide the fill: {d:?}"
    );
    assert_eq!(d.wake_ms, NOW);
    f.ready_ms = vec![NOW - 120 * MIN + 1, NOW];
    let d = decide(&f);
    assert!(!d.expire && !d.fill, "{d:?}");
    assert_eq!(d.wake_ms, NOW + 1);
}

#[test]
fn warm_before_keeps_the_pool_empty_until_the_window_and_full_inside_it() {
    // The timer fires in 1 h, warm_before 10 min: empty until 50 min from now.
    let next = NOW + 60 * MIN;
    let d = decide(&facts(Schedule::Next(next)));
    assert!(!d.fill && !d.expire, "{d:?}");
    assert_eq!(d.want, 0);
    assert_eq!(d.warm_from_ms, Some(next - 10 * MIN));
    assert_eq!(d.wake_ms, NOW + MAX_WAIT_MS.min(50 * MIN));
    // A ready one left from before the window is not destroyed early: only max_idle does.
    let mut f = facts(Schedule::Next(next));
    f.ready_ms = vec![NOW - MIN];
    let d = decide(&f);
    assert!(!d.expire && !d.fill, "{d:?}");
    // One ms before the window: still empty; at its first ms: fill.
    f.ready_ms.clear();
    f.now_ms = next - 10 * MIN - 1;
    let d = decide(&f);
    assert!(!d.fill, "{d:?}");
    assert_eq!(d.wake_ms, next - 10 * MIN);
    f.now_ms = next - 10 * MIN;
    let d = decide(&f);
    assert!(d.fill && d.want == 2 && d.warm_from_ms.is_none(), "{d:?}");
    // An elapse already past (not yet moved on) is inside the window.
    f.now_ms = next + 1;
    assert!(decide(&f).fill);
}

#[test]
fn warm_before_zero_fills_only_at_the_elapse_and_a_window_longer_than_the_wait_fills_at_once() {
    let mut f = facts(Schedule::Next(NOW + MIN));
    f.warm_before_ms = 0;
    let d = decide(&f);
    assert!(!d.fill);
    assert_eq!(d.warm_from_ms, Some(NOW + MIN));
    f.warm_before_ms = 24 * 60 * MIN;
    assert!(decide(&f).fill);
}

#[test]
fn a_timer_without_a_next_elapse_fills_nothing_and_is_read_again_soon() {
    let d = decide(&facts(Schedule::Pending));
    assert!(!d.fill && d.want == 0, "{d:?}");
    assert_eq!(d.wake_ms, NOW + PENDING_WAIT_MS);
}

#[test]
fn a_failed_fill_is_retried_after_its_backoff_only() {
    let mut f = facts(Schedule::None);
    f.retry_at_ms = Some(NOW + 5_000);
    let d = decide(&f);
    assert!(!d.fill, "{d:?}");
    assert_eq!(d.wake_ms, NOW + 5_000);
    f.retry_at_ms = Some(NOW);
    assert!(decide(&f).fill, "due now");
    // A full pool does not wake for a pending retry.
    f.retry_at_ms = Some(NOW + 5_000);
    f.ready_ms = vec![NOW, NOW];
    f.max_idle_ms = 120 * MIN;
    assert_eq!(decide(&f).wake_ms, NOW + MAX_WAIT_MS);
}

#[test]
fn the_backoff_doubles_and_is_bounded() {
    assert_eq!(backoff_ms(0), BACKOFF_FIRST_MS);
    assert_eq!(backoff_ms(1), 5_000);
    assert_eq!(backoff_ms(2), 10_000);
    assert_eq!(backoff_ms(4), 40_000);
    assert_eq!(backoff_ms(7), BACKOFF_MAX_MS);
    assert_eq!(backoff_ms(u32::MAX), BACKOFF_MAX_MS);
}

#[test]
fn size_zero_keeps_nothing() {
    let mut f = facts(Schedule::None);
    f.size = 0;
    let d = decide(&f);
    assert!(!d.fill && d.want == 0, "{d:?}");
}

#[test]
fn the_state_file_round_trips_and_says_what_the_keeper_waits_for() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(KeeperState::read(dir.path()).expect("read"), None);
    let s = KeeperState {
        pid: 7,
        updated_ms: NOW,
        state: "waiting".into(),
        want: 0,
        warm_from_ms: Some(NOW + 50 * MIN),
        next_elapse_ms: Some(NOW + 60 * MIN),
        next_wake_ms: NOW + 10 * MIN,
        ..KeeperState::default()
    };
    s.write(dir.path()).expect("write");
    assert_eq!(
        KeeperState::read(dir.path()).expect("read"),
        Some(s.clone())
    );
    let ts = |ms: u128| format!("T{}", (ms - NOW) / MIN);
    assert_eq!(
        s.line(NOW, &ts),
        "waiting for warm_before until T50 (the timer's next elapse is T60)"
    );
    let failed = KeeperState {
        state: "retrying".into(),
        last_error: "starting x.service: failed".into(),
        last_error_ms: NOW,
        failures: 2,
        retry_at_ms: Some(NOW + 10 * MIN),
        ..s
    };
    assert_eq!(
        failed.line(NOW, &ts),
        "cannot refill; last fill error (T0, 2 in a row): starting x.service: failed; retries at T10"
    );
    std::fs::write(KeeperState::path(dir.path()), "{").expect("write");
    assert!(KeeperState::read(dir.path()).is_err());
}
