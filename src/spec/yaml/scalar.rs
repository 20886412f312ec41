//! How YAML 1.2 and YAML 1.1 read a plain scalar: the readings that make an unquoted value
//! something other than a string (`no`, `0755`, `1:20`, `2024-01-01`, `~`, `1e3`).

/// How YAML reads a plain scalar that is not a string: `(kind, who, reading)`, e.g.
/// `("boolean", "YAML 1.1", "false")` for `no`. `None` when every YAML version reads it as a
/// string. Covers YAML 1.2 core and YAML 1.1 (booleans y/n/yes/no/on/off, octal `0755`, binary,
/// underscores, base 60, timestamps).
pub(crate) fn plain_reading(raw: &str) -> Option<(&'static str, &'static str, String)> {
    const Y11: &str = "YAML 1.1";
    const Y: &str = "YAML";
    match raw {
        "~" | "null" | "Null" | "NULL" => return Some(("null", Y, "null (no value)".into())),
        "true" | "True" | "TRUE" => return Some(("boolean", Y, "true".into())),
        "false" | "False" | "FALSE" => return Some(("boolean", Y, "false".into())),
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => {
            return Some(("boolean", Y11, "true".into()));
        }
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
            return Some(("boolean", Y11, "false".into()));
        }
        _ => {}
    }
    let unsigned = raw.strip_prefix(['-', '+']).unwrap_or(raw);
    let lower = unsigned.to_ascii_lowercase();
    if matches!(lower.as_str(), ".inf") {
        return Some(("float", Y, "infinity".into()));
    }
    if matches!(unsigned, ".nan" | ".NaN" | ".NAN") {
        return Some(("float", Y, "not-a-number".into()));
    }
    let radix = |digits: &str, base: u32| -> Option<String> {
        let clean: String = digits.chars().filter(|c| *c != '_').collect();
        (!clean.is_empty())
            .then(|| u128::from_str_radix(&clean, base).ok())
            .flatten()
            .map(|n| n.to_string())
    };
    if let Some(hex) = unsigned.strip_prefix("0x") {
        return radix(hex, 16).map(|n| ("integer", Y, n));
    }
    if let Some(oct) = unsigned.strip_prefix("0o") {
        return radix(oct, 8).map(|n| ("integer", Y, n));
    }
    if let Some(bin) = unsigned.strip_prefix("0b") {
        return radix(bin, 2).map(|n| ("integer", Y11, n));
    }
    let digits_ = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == '_');
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    if digits(unsigned) {
        if unsigned.len() > 1
            && unsigned.starts_with('0')
            && let Some(n) = radix(unsigned, 8)
        {
            return Some(("integer", Y11, format!("octal {n}")));
        }
        let sign = if raw.starts_with('-') { "-" } else { "" };
        let n = unsigned.trim_start_matches('0');
        return Some((
            "integer",
            Y,
            format!("{sign}{}", if n.is_empty() { "0" } else { n }),
        ));
    }
    if digits_(unsigned) && unsigned.starts_with(|c: char| c.is_ascii_digit()) {
        return radix(unsigned, 10).map(|n| ("integer", Y11, n));
    }
    if let Some(kind) = base60(unsigned) {
        return Some((kind, Y11, "a base-60 number".into()));
    }
    if is_timestamp(raw) {
        return Some(("date", Y11, "a timestamp".into()));
    }
    // Floats: YAML 1.2 core `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`, and 1.1's
    // underscores.
    let (mantissa, exponent) = match lower.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (lower.as_str(), None),
    };
    let exp_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    let (int, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let mantissa_ok = match frac {
        Some(f) => {
            (int.is_empty() || digits_(int))
                && (f.is_empty() || digits_(f))
                && !(int.is_empty() && f.is_empty())
        }
        None => digits_(int) && exponent.is_some(),
    };
    if mantissa_ok && exp_ok {
        let clean: String = raw.chars().filter(|c| *c != '_').collect();
        let reading = clean
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map_or_else(|| "a number".to_owned(), |f| f.to_string());
        let who = if raw.contains('_') { Y11 } else { Y };
        return Some(("float", who, reading));
    }
    None
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_digit())
}

fn digits_underscores(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_digit()) && s.chars().all(|c| c.is_ascii_digit() || c == '_')
}

/// YAML 1.1 base-60 numbers: `1:20` (integer 80), `1:20.5` (float). Returns the kind.
fn base60(unsigned: &str) -> Option<&'static str> {
    let (head, rest) = unsigned.split_once(':')?;
    let parts: Vec<&str> = rest.split(':').collect();
    let (last, mids) = parts.split_last()?;
    let (last_int, frac) = match last.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (*last, None),
    };
    let sixty = |p: &str| all_digits(p) && p.len() <= 2 && p.parse::<u32>().is_ok_and(|n| n < 60);
    let ok = digits_underscores(head)
        && mids.iter().all(|p| sixty(p))
        && sixty(last_int)
        && frac.is_none_or(|f| f.chars().all(|c| c.is_ascii_digit() || c == '_'));
    ok.then_some(if frac.is_some() { "float" } else { "integer" })
}

/// YAML 1.1 timestamps: `2024-01-01`, `2024-1-1`, `2024-01-01T02:00:00Z`, `2024-01-01 02:00`.
fn is_timestamp(raw: &str) -> bool {
    let mut parts = raw.splitn(3, '-');
    let (Some(year), Some(month), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let day: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let tail = &rest[day.len()..];
    year.len() == 4
        && all_digits(year)
        && (1..=2).contains(&month.len())
        && all_digits(month)
        && (1..=2).contains(&day.len())
        && (tail.is_empty() || tail.starts_with(['T', 't', ' ']) && tail.contains(':'))
}
