//! Durations (`90s`, `30m`, `1h30m`) and their per-key bounds.

use std::fmt::Write as _;

use crate::spec::Diagnostic;
use crate::spec::located::Located;

/// Parses a duration string `^(\d+h)?(\d+m)?(\d+s)?$` (non-empty, parts in that order) into
/// seconds: `90s`, `30m`, `2h`, `1h30m`. Ranges are the caller's rule.
///
/// # Errors
/// A lowercase message when the string has another shape or overflows.
pub fn duration_s(s: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "`{s}` is not a duration; write hours, minutes and seconds like `90s`, `30m`, `1h30m`"
        )
    };
    if s.is_empty() {
        return Err(bad());
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    let mut last_unit = 0; // 0 = none yet, 1 = h, 2 = m, 3 = s: units must ascend
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let (rank, factor) = match c {
            'h' => (1, 3600),
            'm' => (2, 60),
            's' => (3, 1),
            _ => return Err(bad()),
        };
        if digits.is_empty() || rank <= last_unit {
            return Err(bad());
        }
        let n: u64 = digits.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(factor)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("`{s}` is too long a duration"))?;
        digits.clear();
        last_unit = rank;
    }
    if !digits.is_empty() {
        return Err(format!(
            "`{s}` has no unit; add one: `{digits}s`, `{digits}m` or `{digits}h`"
        ));
    }
    Ok(total)
}

/// A duration within `(min, max, default)` seconds.
pub(crate) fn bounded_duration(
    raw: Option<&Located<String>>,
    (min, max, default): (u64, u64, u64),
    out: &mut Vec<Diagnostic>,
) -> Option<u64> {
    let Some(raw) = raw else {
        return Some(default);
    };
    let range = format!("{} to {}", show_duration(min), show_duration(max));
    match duration_s(&raw.value) {
        Ok(s) if (min..=max).contains(&s) => Some(s),
        Ok(_) => {
            out.push(
                raw.diag(format!("duration `{}` is out of range", raw.value))
                    .hint(format!("use a duration from {range}")),
            );
            None
        }
        Err(e) => {
            out.push(
                raw.diag(e)
                    .hint(format!("use a duration from {range}, e.g. `30m`")),
            );
            None
        }
    }
}

/// Seconds as the shortest duration string (`90s` → `1m30s`, `0` → `0s`).
pub(crate) fn show_duration(s: u64) -> String {
    if s == 0 {
        return "0s".into();
    }
    let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60);
    let mut out = String::new();
    for (n, unit) in [(h, 'h'), (m, 'm'), (sec, 's')] {
        if n > 0 {
            let _ = write!(out, "{n}{unit}");
        }
    }
    out
}
