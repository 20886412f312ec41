//! Egress allowlist entries: exact hosts and leading wildcards, normalised.

use crate::spec::HostPattern;

/// Parses one egress allowlist entry: an exact host (`pypi.org`) or a leading wildcard
/// (`*.pythonhosted.org`, any name strictly below it).
///
/// Normalises: lowercase, one trailing dot stripped, IDN converted to punycode (UTS 46 via the
/// `idna` crate, STD3 rules). Rejects: empty entries, schemes, paths, userinfo, ports (they go
/// in `egress.ports`), IP literals in any encoding (`1.2.3.4`, `[::1]`, `127.1`, `0x7f000001`,
/// `2130706433`, `0177.0.0.1`: any name whose last label is numeric, as the WHATWG URL
/// parser reads it), a bare `*`, `*` anywhere but a leading `*.` (`*x.com`, `a.*.com`),
/// single-label names (`localhost`, `*.com`), a wildcard over a public suffix (`*.co.uk`,
/// `*.github.io`: the `psl` crate's copy of the Public Suffix List, ICANN and private
/// sections), whitespace and labels outside `[a-z0-9-]`.
///
/// # Errors
/// A lowercase message saying what is wrong with the entry.
pub fn host_pattern(s: &str) -> Result<HostPattern, String> {
    if s.is_empty() {
        return Err("empty host".into());
    }
    if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("`{s}` contains whitespace or a control character"));
    }
    if s.contains("://") {
        return Err(format!("`{s}` has a scheme; write the host name only"));
    }
    if s.contains('/') {
        return Err(format!("`{s}` has a path; write the host name only"));
    }
    if s.contains('@') {
        return Err(format!("`{s}` has a user part; write the host name only"));
    }
    if s.starts_with('[') || s.matches(':').count() > 1 {
        return Err(format!(
            "`{s}` is an IP address; only host names are allowed"
        ));
    }
    if s.contains(':') {
        return Err(format!(
            "`{s}` has a port; write the host name only and list ports in `egress.ports`"
        ));
    }
    if s == "*" || s == "*." {
        return Err("a bare `*` would allow every host".into());
    }
    let (wildcard, rest) = match s.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    if rest.contains('*') {
        return Err(format!(
            "`{s}`: `*` is allowed only as a leading `*.` (as in `*.example.com`)"
        ));
    }
    let rest = rest.strip_suffix('.').unwrap_or(rest);
    if rest.is_empty() {
        return Err(format!("`{s}` has no host name"));
    }
    let ascii = idna::domain_to_ascii_strict(rest)
        .map_err(|_| format!("`{s}` is not a valid host name"))?;
    let labels: Vec<&str> = ascii.split('.').collect();
    for label in &labels {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!(
                "`{s}` is not a valid host name (label `{label}`): use a-z, 0-9 and `-`"
            ));
        }
    }
    if labels.last().is_some_and(|l| is_numeric_label(l)) {
        return Err(format!(
            "`{s}` is an IP address; only host names are allowed"
        ));
    }
    if labels.len() < 2 {
        return Err(if wildcard {
            format!("`{s}` is too broad: it covers a whole top-level domain")
        } else {
            format!("`{s}` is a single-label name; write a fully qualified host name")
        });
    }
    if wildcard && psl::domain(ascii.as_bytes()).is_none() {
        return Err(format!(
            "`{s}` is too broad: `{ascii}` is a public suffix (Public Suffix List), so anyone can register a name below it"
        ));
    }
    Ok(if wildcard {
        HostPattern::Subdomains(ascii)
    } else {
        HostPattern::Exact(ascii)
    })
}

/// Whether a label is a number the way URL parsers read IPv4 parts: decimal, octal (leading 0)
/// or hex (`0x`, possibly empty).
pub(crate) fn is_numeric_label(label: &str) -> bool {
    if let Some(hex) = label.strip_prefix("0x") {
        return hex.chars().all(|c| c.is_ascii_hexdigit());
    }
    !label.is_empty() && label.chars().all(|c| c.is_ascii_digit())
}
