//! `cyclix tier describe [TIER] [--json]`: the isolation tiers from the one table.

use std::fmt::Write as _;

use anyhow::Result;

use super::print_out;
use crate::exit::Outcome;
use crate::probe::Profile;
use crate::render::kube::limits::NOT_ENFORCED;
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
        let _ = writeln!(s, "  gate: {}", f.gate);
        let _ = writeln!(s, "  egress: {}", f.egress);
        let _ = writeln!(s, "  does not protect against:");
        for d in f.does_not_protect_against {
            let _ = writeln!(s, "    - {d}");
        }
        if f.tier == Tier::Gvisor {
            let _ = writeln!(
                s,
                "  needs: gVisor's runsc (Debian 12/13: `apt install runsc`; or $CYCLIX_RUNSC naming it); `cyclix check` proves it with a throwaway container"
            );
            let _ = writeln!(
                s,
                "  proof: {} (docs/tiers.md)",
                Profile::Gvisor.statement()
            );
        }
        if f.tier == Tier::Container {
            let _ = writeln!(
                s,
                "  on Kubernetes (`cyclix export kube`, docs/kubernetes.md): {}",
                Profile::Kubernetes.statement()
            );
            let _ = writeln!(s, "  Kubernetes does not enforce the way Podman does:");
            for d in NOT_ENFORCED {
                let _ = writeln!(s, "    - {d}");
            }
        }
    }
    s
}

/// The JSON form: the tier facts, the container tier with a `kubernetes` object (its probe
/// profile and what Kubernetes does not enforce the way Podman does).
fn tier_json(facts: &[&TierFacts]) -> Result<String> {
    let mut v = serde_json::to_value(facts)?;
    if let Some(list) = v.as_array_mut() {
        for t in list {
            if t["tier"] == "gvisor" {
                t["probe_profile"] = serde_json::json!({
                    "profile": Profile::Gvisor,
                    "statement": Profile::Gvisor.statement(),
                    "probes": crate::probe::profile::GVISOR_PROBES,
                    "left_out": crate::probe::profile::GVISOR_LEFT_OUT,
                });
            }
            if t["tier"] == "container" {
                t["kubernetes"] = serde_json::json!({
                    "probe_profile": Profile::Kubernetes,
                    "statement": Profile::Kubernetes.statement(),
                    "probes": crate::probe::profile::KUBERNETES_PROBES,
                    "not_enforced": NOT_ENFORCED,
                });
            }
        }
    }
    Ok(format!("{}\n", serde_json::to_string_pretty(&v)?))
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
        tier_json(&facts)?
    } else {
        tier_text(&facts)
    })?;
    Ok(Outcome::Ok)
}
