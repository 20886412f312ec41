//! A pure subset check of systemd calendar expressions (`schedule.on_calendar`).

use std::collections::BTreeSet;

/// A pure subset check of a systemd calendar expression (systemd.time(7)). Accepts the
/// shorthands (except `minutely`) and `[WEEKDAYS] [DATE] [TIME] [TIMEZONE]` with `*`, numbers,
/// `a..b`, lists and `/step`; refuses anything that fires more often than every 5 minutes.
/// `systemd-analyze calendar` verifies the expression again on the testbed.
pub(crate) fn calendar(s: &str) -> Result<(), String> {
    let unsupported = || format!("calendar expression `{s}` is not supported");
    if s.trim().is_empty() {
        return Err("the calendar expression is empty".into());
    }
    if s.len() > 256 {
        return Err("the calendar expression is longer than 256 characters".into());
    }
    if s.chars().any(|c| c.is_control() || !c.is_ascii()) {
        return Err(format!(
            "calendar expression `{}` contains a control or non-ASCII character",
            s.escape_default()
        ));
    }
    let lower = s.to_ascii_lowercase();
    match lower.as_str() {
        "minutely" => {
            return Err(format!(
                "`{s}` runs every minute; the shortest interval is 5 minutes"
            ));
        }
        "hourly" | "daily" | "weekly" | "monthly" | "yearly" | "annually" | "quarterly"
        | "semiannually" => return Ok(()),
        _ => {}
    }
    let mut tokens: Vec<&str> = s.split_whitespace().collect();
    if tokens.is_empty() {
        return Err(unsupported());
    }
    if is_weekday_spec(tokens[0]) {
        tokens.remove(0);
    }
    if let Some(last) = tokens.last()
        && (*last == "UTC" || (last.contains('/') && !last.contains([':', '-', '*'])))
    {
        tokens.pop();
    }
    let mut date = None;
    let mut time = None;
    for t in tokens {
        if t.contains(':') && time.is_none() {
            time = Some(t);
        } else if t.contains('-') && date.is_none() && time.is_none() {
            date = Some(t);
        } else {
            return Err(unsupported());
        }
    }
    if let Some(d) = date {
        let parts: Vec<&str> = d.split('-').collect();
        let ranges: &[(u32, u32)] = match parts.len() {
            3 => &[(1970, 2199), (1, 12), (1, 31)],
            2 => &[(1, 12), (1, 31)],
            _ => return Err(unsupported()),
        };
        for (p, (lo, hi)) in parts.iter().zip(ranges) {
            calendar_field(p, *lo, *hi).ok_or_else(unsupported)?;
        }
    }
    let Some(time) = time else {
        // A date or weekday without a time fires once a day at 00:00.
        return Ok(());
    };
    let parts: Vec<&str> = time.split(':').collect();
    let (hour, minute, second) = match parts.as_slice() {
        [h, m] => (*h, *m, "0"),
        [h, m, sec] => (*h, *m, *sec),
        _ => return Err(unsupported()),
    };
    calendar_field(hour, 0, 23).ok_or_else(unsupported)?;
    let minutes = calendar_field(minute, 0, 59).ok_or_else(unsupported)?;
    let seconds = calendar_field(second, 0, 59).ok_or_else(unsupported)?;
    let too_often = || format!("`{s}` runs more often than every 5 minutes");
    if seconds.len() > 1 {
        return Err(too_often());
    }
    // The smallest gap between firing minutes, across the hour boundary too.
    if minutes.len() > 1 {
        let mut gaps: Vec<u32> = minutes.windows(2).map(|w| w[1] - w[0]).collect();
        if let (Some(first), Some(last)) = (minutes.first(), minutes.last()) {
            gaps.push(60 - last + first);
        }
        if gaps.iter().any(|g| *g < 5) {
            return Err(too_often());
        }
    }
    Ok(())
}

/// Expands one calendar field (`*`, `5`, `1..5`, `0/15`, `*/10`, lists of those) into the sorted
/// values it matches within `lo..=hi`; `None` when the syntax is outside the subset.
pub(crate) fn calendar_field(f: &str, lo: u32, hi: u32) -> Option<Vec<u32>> {
    let mut values = BTreeSet::new();
    for item in f.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, st)) => (r, Some(st.parse::<u32>().ok().filter(|n| *n > 0)?)),
            None => (item, None),
        };
        let num = |x: &str| -> Option<u32> {
            (!x.is_empty() && x.len() <= 4 && x.chars().all(|c| c.is_ascii_digit()))
                .then(|| x.parse().ok())
                .flatten()
                .filter(|n| (lo..=hi).contains(n))
        };
        let (start, end) = if range == "*" {
            (lo, hi)
        } else if let Some((a, b)) = range.split_once("..") {
            (num(a)?, num(b)?)
        } else {
            let a = num(range)?;
            (a, if step.is_some() { hi } else { a })
        };
        if start > end {
            return None;
        }
        let step = step.unwrap_or(1) as usize;
        values.extend((start..=end).step_by(step));
    }
    Some(values.into_iter().collect())
}

/// `Mon`, `Mon..Fri`, `Sat,Sun` (English names, short or long, any case).
pub(crate) fn is_weekday_spec(t: &str) -> bool {
    const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
    const LONG: [&str; 7] = [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ];
    let day = |d: &str| {
        let d = d.to_ascii_lowercase();
        DAYS.contains(&d.as_str()) || LONG.contains(&d.as_str())
    };
    t.split(',').all(|item| match item.split_once("..") {
        Some((a, b)) => day(a) && day(b),
        None => day(item),
    })
}
