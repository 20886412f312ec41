//! `cyclix tier describe [TIER] [--json]`: the isolation tiers from the one table.

use std::fmt::Write as _;

use anyhow::Result;

use super::print_out;
use crate::exit::Outcome;
use crate::tier::{TIERS, Tier, TierFacts};

/// The human form of `tier describe`.
#[must_use]
pub fn tier_text(facts: &[&TierFacts]) -> String {
    let yn = |b: bool| if b { "yes" } else { "no" };
    let mut s = String::new();
    for f in facts {
        let _ = writeln!(s, "{}: {}", f.tier, f.summary);
        let _ = writeln!(s, "  isolates versions:  {}", yn(f.isolates_versions));
        let _ = writeln!(s, "  isolates rights:    {}", yn(f.isolates_rights));
        let _ = writeln!(s, "  network restricted: {}", yn(f.network_restricted));
        let _ = writeln!(s, "  use when: {}", f.use_when);
        let _ = writeln!(s, "  does not protect against:");
        for d in f.does_not_protect_against {
            let _ = writeln!(s, "    - {d}");
        }
    }
    s
}

/// Describes `tier`, or every tier, as text or JSON on stdout.
///
/// # Errors
/// stdout is closed.
pub fn run(tier: Option<Tier>, json: bool) -> Result<Outcome> {
    let facts: Vec<&TierFacts> = match tier {
        Some(t) => vec![t.facts()],
        None => TIERS.iter().collect(),
    };
    print_out(&if json {
        format!("{}\n", serde_json::to_string_pretty(&facts)?)
    } else {
        tier_text(&facts)
    })?;
    Ok(Outcome::Ok)
}
