//! Sizes and counts: plain decimal integers, memory sizes (`2G`) and CPU amounts (`1.5`).

/// Memory limit bounds, in bytes (16 MiB–1 TiB).
pub(crate) const MEMORY_RANGE: (u64, u64) = (16 << 20, 1 << 40);

/// CPU limit bounds, in thousandths of a CPU (0.01–256).
pub(crate) const CPU_MILLI_RANGE: (u32, u32) = (10, 256_000);

/// A plain decimal integer as written (`-1`, `443`); `None` for anything else.
pub(crate) fn decimal_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A byte count: a plain decimal (`4096`) or `<N>K`, `<N>M`, `<N>G` (powers of 1024), at
/// least 1.
pub(crate) fn byte_count(s: &str) -> Result<u64, String> {
    let bad = || format!("`{s}` is not a size like `4096`, `512K` or `10M`");
    let (num, shift) = match s.chars().last() {
        Some('K') => (&s[..s.len() - 1], 10),
        Some('M') => (&s[..s.len() - 1], 20),
        Some('G') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|n| *n >= 1)
        .ok_or_else(bad)
}

/// Memory size `<N>[K|M|G|T]` (powers of 1024) in bytes, within [`MEMORY_RANGE`].
pub(crate) fn memory(s: &str) -> Result<u64, String> {
    let bad = || format!("memory `{s}` is not a size like `512M` or `2G`");
    let Some(unit) = s.chars().last() else {
        return Err(bad());
    };
    let num = &s[..s.len() - unit.len_utf8()];
    let shift = match unit {
        'K' => 10,
        'M' => 20,
        'G' => 30,
        'T' => 40,
        _ => return Err(bad()),
    };
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let (lo, hi) = MEMORY_RANGE;
    let n: u64 = num.parse().map_err(|_| bad())?;
    let bytes = n
        .checked_mul(1 << shift)
        .filter(|b| (lo..=hi).contains(b))
        .ok_or_else(|| format!("memory `{s}` is out of range: must be between 16M and 1T"))?;
    Ok(bytes)
}

/// CPUs as a plain decimal (`0.5`, `2`) in thousandths, within [`CPU_MILLI_RANGE`].
pub(crate) fn cpu_millis(s: &str) -> Result<u32, String> {
    let out_of_range = || format!("cpus `{s}` is out of range: must be between 0.01 and 256");
    if s.starts_with('-') {
        return Err(out_of_range());
    }
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits_ok = |d: &str| d.chars().all(|c| c.is_ascii_digit());
    if int.is_empty() || !digits_ok(int) || !digits_ok(frac) || (s.contains('.') && frac.is_empty())
    {
        return Err(format!("cpus `{s}` is not a decimal number like `1.5`"));
    }
    let frac_trimmed = frac.trim_end_matches('0');
    if frac_trimmed.len() > 3 {
        return Err(format!("cpus `{s}` has more than 3 decimal places"));
    }
    let whole: u64 = int.parse().map_err(|_| out_of_range())?;
    let mut frac_milli: u64 = 0;
    for (i, c) in frac_trimmed.chars().enumerate() {
        let d = u64::from(c.to_digit(10).unwrap_or(0));
        frac_milli += d * [100, 10, 1][i];
    }
    let millis = whole
        .checked_mul(1000)
        .and_then(|w| w.checked_add(frac_milli))
        .and_then(|m| u32::try_from(m).ok())
        .ok_or_else(out_of_range)?;
    let (lo, hi) = CPU_MILLI_RANGE;
    if !(lo..=hi).contains(&millis) {
        return Err(out_of_range());
    }
    Ok(millis)
}
