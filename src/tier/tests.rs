//! `tier`'s unit tests.

use super::*;

const ALL: [Tier; 4] = [Tier::Direct, Tier::Worktree, Tier::Container, Tier::Gvisor];

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
    let g = Tier::Gvisor.facts();
    assert!(g.isolates_versions && g.isolates_rights && g.network_restricted);
    assert!(Tier::Gvisor > Tier::Container && Tier::Gvisor.is_sandboxed());
    assert!(Tier::Container.is_sandboxed() && !Tier::Worktree.is_sandboxed());
    // Says what it is not: a gVisor escape and the host network stack of `network=host`.
    let limits = g.does_not_protect_against.join("\n");
    assert!(limits.contains("gVisor escape") && limits.contains("network=host"));
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
    let no_runsc = Runtime::Unusable("runsc is not on $PATH".into());
    let err = gate(Tier::Container, false, &down, &Runtime::Usable).expect_err("must refuse");
    assert!(err.to_string().contains("podman not on PATH"));
    assert!(gate(Tier::Container, true, &down, &Runtime::Usable).is_err());
    for t in ALL {
        for legacy in [false, true] {
            for rt in [Runtime::Usable, down.clone()] {
                for g in [Runtime::Usable, no_runsc.clone()] {
                    if let Ok(got) = gate(t, legacy, &rt, &g) {
                        assert_eq!(got, floor(t, legacy), "gate changed the tier");
                        assert!(got >= t, "gate returned a weaker tier");
                    }
                }
            }
        }
    }
    assert_eq!(
        gate(Tier::Worktree, false, &down, &no_runsc),
        Ok(Tier::Worktree)
    );
    assert_eq!(
        gate(Tier::Container, false, &Runtime::Usable, &no_runsc),
        Ok(Tier::Container)
    );
}

#[test]
fn gvisor_without_runsc_is_refused_never_run_as_container() {
    let no_runsc = Runtime::Unusable("runsc is not on $PATH".into());
    let err = gate(Tier::Gvisor, false, &Runtime::Usable, &no_runsc).expect_err("must refuse");
    let text = err.to_string();
    assert!(
        text.contains("runsc is not on $PATH") && text.contains("apt install runsc"),
        "{text}"
    );
    // Positive control: the same spec with a usable runsc gets exactly tier gvisor.
    assert_eq!(
        gate(Tier::Gvisor, false, &Runtime::Usable, &Runtime::Usable),
        Ok(Tier::Gvisor)
    );
    // No podman at all: the container runtime's refusal, naming the tier.
    let down = Runtime::Unusable("podman not on PATH".into());
    let err = gate(Tier::Gvisor, false, &down, &Runtime::Usable).expect_err("must refuse");
    assert!(err.to_string().contains("tier `gvisor`"));
}
