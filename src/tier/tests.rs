//! `tier`'s unit tests.

use super::*;

const ALL: [Tier; 3] = [Tier::Direct, Tier::Worktree, Tier::Container];

#[test]
fn table_is_ordered_and_complete() {
    for (i, f) in TIERS.iter().enumerate() {
        assert_eq!(f.tier, ALL[i]);
        assert_eq!(f.tier.facts(), f);
        assert_eq!(Tier::parse(f.tier.as_str()), Some(f.tier));
        assert!(
            !f.does_not_protect_against.is_empty(),
            "{} states no limits",
            f.tier
        );
    }
    assert_eq!(Tier::parse("none"), None);
}

#[test]
fn guarantees_grow_with_the_tier() {
    assert!(!Tier::Direct.facts().isolates_versions);
    assert!(Tier::Worktree.facts().isolates_versions && !Tier::Worktree.facts().isolates_rights);
    let c = Tier::Container.facts();
    assert!(c.isolates_versions && c.isolates_rights && c.network_restricted);
}

#[test]
fn floor_raises_never_lowers() {
    for t in ALL {
        assert_eq!(floor(t, false), t);
        assert!(floor(t, true) >= t);
        assert!(floor(t, true) >= Tier::Worktree);
    }
    assert_eq!(floor(Tier::Direct, true), Tier::Worktree);
    assert_eq!(floor(Tier::Container, true), Tier::Container);
}

#[test]
fn gate_refuses_container_without_runtime_and_never_downgrades() {
    let down = Runtime::Unusable("podman not on PATH".into());
    let err = gate(Tier::Container, false, &down).expect_err("must refuse");
    assert!(err.to_string().contains("podman not on PATH"));
    assert!(gate(Tier::Container, true, &down).is_err());
    for t in ALL {
        for legacy in [false, true] {
            for rt in [Runtime::Usable, down.clone()] {
                if let Ok(got) = gate(t, legacy, &rt) {
                    assert_eq!(got, floor(t, legacy), "gate changed the tier");
                    assert!(got >= t, "gate returned a weaker tier");
                }
            }
        }
    }
    assert_eq!(gate(Tier::Worktree, false, &down), Ok(Tier::Worktree));
    assert_eq!(
        gate(Tier::Container, false, &Runtime::Usable),
        Ok(Tier::Container)
    );
}
