//! `cyclix egress suggest TENANT [--runs N] [--json]` (issue 32 item 7): the hosts the
//! proxy refused the agent in the tenant's last runs for not being on the allowlist, with how
//! often, on which ports, and the first URL asked for, and the `egress.allow` entries that
//! would allow them — each an exact name, checked by the spec's own host rule (a name, not an
//! address or a single label) and written as the rule stores it (ASCII: an internationalised
//! name as its `xn--` form, said so). Never a wildcard: the agent picks the names it asks for,
//! and a wildcard over them could cover names anyone can register (`*.amazonaws.com` holds
//! public suffixes such as `s3.amazonaws.com`; attack review). It never edits the spec: what the agent asked for is untrusted data, and a
//! person decides.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use serde::Serialize;

use crate::context::HostEnv;
use crate::exit::Outcome;
use crate::run::record::RunRecord;

/// One refused host and what would allow it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suggestion {
    /// The host as asked for, normalised (lower case, no trailing dot).
    pub host: String,
    /// How many requests the proxy refused for it.
    pub refused: usize,
    /// The ports asked for.
    pub ports: BTreeSet<u16>,
    /// The first URL asked for (the oldest of the runs read), and its run.
    pub first_url: String,
    /// The run of that first URL.
    pub first_run: String,
    /// The `egress.allow` entry that would allow it, or why none is suggested.
    pub allow: std::result::Result<String, String>,
}

/// The suggestions from `runs` (newest first, as `history::records` gives them): the
/// agent's requests refused `domain_not_allowlisted`, one per normalised host, most refused
/// first. Pure.
#[must_use]
pub fn suggestions(runs: &[RunRecord]) -> Vec<Suggestion> {
    let mut by_host: BTreeMap<String, Suggestion> = BTreeMap::new();
    // Oldest first, so the first URL is the first asked for.
    for r in runs.iter().rev() {
        for d in &r.egress_decisions {
            let text = |k: &str| d.get(k).and_then(serde_json::Value::as_str).unwrap_or("");
            let by_agent = matches!(text("by"), "agent" | "");
            if !by_agent || text("reason") != "domain_not_allowlisted" {
                continue;
            }
            // Squid's log is the agent's text: made printable (no escapes, no line breaks).
            let host =
                crate::text::printable(text("host").trim_end_matches('.')).to_ascii_lowercase();
            if host.is_empty() || host == "-" {
                continue;
            }
            let s = by_host.entry(host.clone()).or_insert_with(|| Suggestion {
                allow: allow_entry(&host),
                host,
                refused: 0,
                ports: BTreeSet::new(),
                first_url: crate::text::printable(text("url")),
                first_run: r.run_id.clone(),
            });
            s.refused += 1;
            if let Ok(p) = text("port").parse() {
                s.ports.insert(p);
            }
        }
    }
    let mut v: Vec<Suggestion> = by_host.into_values().collect();
    v.sort_by(|a, b| b.refused.cmp(&a.refused).then_with(|| a.host.cmp(&b.host)));
    v
}

/// The allowlist entry for `host`, checked by the spec's host rule and written as it stores
/// the name (ASCII; an internationalised name in its `xn--` form, named as such): `Err(why)`
/// for what the allowlist cannot hold (an address, a malformed or single-label name).
fn allow_entry(host: &str) -> std::result::Result<String, String> {
    match crate::spec::rules::hosts::host_pattern(host)? {
        crate::spec::HostPattern::Exact(ascii) if ascii == host => Ok(ascii),
        crate::spec::HostPattern::Exact(ascii) => Ok(format!(
            "{ascii}   # IDN: what the agent asked for is not plain ASCII; check this is the host you mean"
        )),
        crate::spec::HostPattern::Subdomains(_) => Err("a wildcard is never suggested".to_string()),
    }
}

/// `cyclix egress suggest`.
///
/// # Errors
/// An unknown tenant, stdout failures.
pub fn suggest(env: &HostEnv, tenant: &str, runs: usize, json: bool) -> Result<Outcome> {
    super::tenant::run_unit(env, tenant)?;
    let (records, bad) =
        super::history::records(&crate::layout::records_root(&env.state_home), Some(tenant));
    let read: Vec<RunRecord> = records.into_iter().take(runs.max(1)).collect();
    let found = suggestions(&read);
    if json {
        let v = serde_json::json!({"schema": "cyclix-egress-suggest/1", "tenant": tenant,
            "runs_read": read.len(), "unreadable": bad, "refused": found});
        crate::outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(Outcome::Ok);
    }
    for b in &bad {
        crate::outln!("unreadable record: {b}");
    }
    if found.is_empty() {
        crate::outln!(
            "{tenant}: the proxy refused no host for being off the allowlist in the last {} run(s)",
            read.len()
        );
        return Ok(Outcome::Ok);
    }
    crate::outln!(
        "{tenant}: hosts the proxy refused (not on the allowlist) in the last {} run(s):",
        read.len()
    );
    for s in &found {
        let ports: Vec<String> = s.ports.iter().map(u16::to_string).collect();
        crate::outln!(
            "  {}  {} refused, port(s) {}, first: {} (run {})",
            s.host,
            s.refused,
            ports.join(","),
            s.first_url,
            s.first_run
        );
    }
    let lines: Vec<&str> = found
        .iter()
        .filter_map(|s| s.allow.as_deref().ok())
        .collect();
    if !lines.is_empty() {
        crate::outln!(
            "to allow them, add to `egress.allow` in {} (after checking each is one the agent needs; cyclix edits nothing):",
            super::tenant::tenant_spec_path(env, tenant).display()
        );
        for l in lines {
            crate::outln!("    - {l}");
        }
    }
    for s in found.iter().filter(|s| s.allow.is_err()) {
        if let Err(why) = &s.allow {
            crate::outln!("  not suggested: {}: {why}", s.host);
        }
    }
    Ok(Outcome::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, decisions: Vec<serde_json::Value>) -> RunRecord {
        let mut r = RunRecord::new("t", id, "container".into());
        r.egress_decisions = decisions;
        r
    }

    fn refused(host: &str, port: &str, url: &str, by: &str) -> serde_json::Value {
        serde_json::json!({"by": by, "reason": "domain_not_allowlisted", "host": host, "port": port, "url": url})
    }

    #[test]
    fn refused_hosts_are_counted_normalised_and_checked_by_the_spec_rule() {
        let newest = run(
            "r2",
            vec![
                refused("PyPI.org.", "443", "pypi.org:443", "agent"),
                refused("intranet", "80", "http://intranet/", "agent"),
                // The probes' own denials are not the agent's needs.
                refused("denied.example", "80", "http://denied.example/", "probe"),
                serde_json::json!({"by": "agent", "reason": "port_not_allowed", "host": "pypi.org", "port": "22"}),
            ],
        );
        let oldest = run(
            "r1",
            vec![refused(
                "pypi.org",
                "80",
                "http://pypi.org/simple/x",
                "agent",
            )],
        );
        let s = suggestions(&[newest, oldest]);
        assert_eq!(s.len(), 2, "{s:#?}");
        assert_eq!(s[0].host, "pypi.org");
        assert_eq!(s[0].refused, 2);
        assert_eq!(s[0].ports, BTreeSet::from([80, 443]));
        assert_eq!(
            (s[0].first_url.as_str(), s[0].first_run.as_str()),
            ("http://pypi.org/simple/x", "r1")
        );
        assert_eq!(s[0].allow, Ok("pypi.org".to_string()));
        // What the allowlist cannot hold is not suggested, with the rule's reason.
        assert_eq!(s[1].host, "intranet");
        assert!(s[1].allow.is_err(), "{:?}", s[1].allow);
    }

    #[test]
    fn a_name_is_suggested_as_the_rule_stores_it_and_escapes_never_reach_the_terminal() {
        // An internationalised look-alike: its xn-- form, said to be one.
        let idn = suggestions(&[run(
            "r1",
            vec![refused("руpi.org", "80", "http://x/", "agent")],
        )]);
        let line = idn[0].allow.as_ref().expect("a valid name");
        assert!(line.starts_with("xn--") && line.contains("# IDN"), "{line}");
        // A wildcard the agent asked for is never suggested.
        let w = suggestions(&[run(
            "r1",
            vec![refused("*.amazonaws.com", "80", "x", "agent")],
        )]);
        assert!(w[0].allow.is_err(), "{:?}", w[0].allow);
        // A terminal escape in the host is made printable, and then is no host name.
        let esc = suggestions(&[run(
            "r1",
            vec![refused("a\u{1b}[2Jb.example", "80", "x", "agent")],
        )]);
        assert!(!esc[0].host.contains('\u{1b}'), "{:?}", esc[0].host);
        assert!(esc[0].allow.is_err(), "{:?}", esc[0].allow);
    }
}
