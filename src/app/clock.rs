//! Time as the verbs print and name it: run ids from the clock, UTC timestamps, a timer's next
//! elapse for people, and the wall clock in ms.

use std::time::{SystemTime, UNIX_EPOCH};

/// A new run id: `YYYYMMDDtHHMMSS-xxxx` (UTC, 4 hex digits from the clock's nanoseconds and
/// the pid), 20 characters, valid for `spec::validate::run_id`.
#[must_use]
pub fn new_run_id(now: SystemTime, pid: u32) -> String {
    let d = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(i64::try_from(days).unwrap_or(0));
    let tag = (d.subsec_nanos() ^ pid.rotate_left(16)) & 0xffff;
    format!(
        "{y:04}{m:02}{day:02}t{:02}{:02}{:02}-{tag:04x}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `YYYY-MM-DD HH:MM:SS UTC` for a time in ms since the Unix epoch.
#[must_use]
pub fn utc_timestamp(ms: u128) -> String {
    let secs = u64::try_from(ms / 1000).unwrap_or(0);
    let (y, m, d) = civil_from_days(i64::try_from(secs / 86_400).unwrap_or(0));
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

pub(crate) fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// A timer's next elapse for people: the calendar time in UTC, or "on the manager's monotonic
/// clock in N s" for monotonic triggers.
pub(crate) fn elapse_text(n: crate::systemd::NextElapse) -> String {
    match (n.realtime_us, n.monotonic_us) {
        (Some(us), _) => utc_timestamp(u128::from(us / 1000)),
        (None, Some(us)) => format!("at {} s on the manager's monotonic clock", us / 1_000_000),
        (None, None) => "never".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn run_ids_are_valid_sortable_and_dated() {
        let t = UNIX_EPOCH + Duration::from_secs(1_796_039_172); // 2026-11-30T11:46:12Z
        let id = new_run_id(t, 4242);
        assert!(id.starts_with("20261130t114612-"), "{id}");
        assert_eq!(id.len(), 20);
        crate::spec::validate::run_id(&id).expect("valid run id");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(utc_timestamp(1_796_039_172_123), "2026-11-30 11:46:12 UTC");
    }
}
