//! `naming`'s unit tests.

use super::*;

const RUN: &str = "20261130t124702-4efb";

#[test]
fn every_name_of_a_run_parses_back_to_its_run() {
    let n = RunNames::new(RUN);
    let svc = n.service("my-db");
    let names = [
        n.base(),
        n.agent(),
        n.gate(),
        n.proxy(),
        n.egress(),
        n.infra(),
        n.role("sentinel"),
        svc.clone(),
        data_volume(&svc),
        n.secret("API_KEY"),
        format!("{}.container", n.agent()),
        format!("{}.pod", n.base()),
        format!("{}.network", n.egress()),
        format!("{}.volume", data_volume(&svc)),
        pod_unit(&n.base()),
        format!("{}.d", pod_unit(&n.base())),
        network_unit(&n.base()),
        network_unit(&n.egress()),
        volume_unit(&data_volume(&svc)),
        container_unit(&svc),
    ];
    for name in names {
        assert!(n.owns(&name), "{name}");
        if name == n.secret("API_KEY") {
            assert_eq!(run_of_secret(&name), Some(RUN));
            continue; // a secret's VAR is not a role: parsed by its own parser
        }
        assert_eq!(run_of(&name).as_deref(), Some(RUN), "{name}");
    }
}

#[test]
fn names_of_other_runs_and_strangers_are_not_ours() {
    let n = RunNames::new("r1");
    assert!(!n.owns("cyclix-r10-agent"));
    assert!(!n.owns("cyclix-r"));
    assert!(!n.owns("other-r1-agent"));
    assert_eq!(run_of("podman-xyz"), None);
    assert_eq!(run_of("cyclix-"), None);
    assert_eq!(
        run_of("cyclix-20261130t124702-4efb-sentinel.x").as_deref(),
        Some(RUN)
    );
}

#[test]
fn unit_files_map_to_the_units_quadlet_generates() {
    assert_eq!(
        unit_of_file("cyclix-r1-agent.container").as_deref(),
        Some("cyclix-r1-agent.service")
    );
    assert_eq!(
        unit_of_file("cyclix-r1.pod").as_deref(),
        Some("cyclix-r1-pod.service")
    );
    assert_eq!(
        unit_of_file("cyclix-r1-egress.network").as_deref(),
        Some("cyclix-r1-egress-network.service")
    );
    assert_eq!(
        unit_of_file("cyclix-r1-gate.service").as_deref(),
        Some("cyclix-r1-gate.service")
    );
    for stem in ["cyclix-r1-agent", "cyclix-r1-svc-db-data"] {
        assert_eq!(
            unit_of_file(&container_file(stem)),
            Some(container_unit(stem))
        );
        assert_eq!(unit_of_file(&pod_file(stem)), Some(pod_unit(stem)));
        assert_eq!(unit_of_file(&network_file(stem)), Some(network_unit(stem)));
        assert_eq!(unit_of_file(&volume_file(stem)), Some(volume_unit(stem)));
        assert_eq!(run_of(&volume_file(stem)).as_deref(), Some("r1"));
    }
    assert_eq!(
        schedule_dropin("acme"),
        "cyclix-run@acme.timer.d/schedule.conf"
    );
    assert_eq!(unit_of_file("squid.conf"), None);
    assert_eq!(unit_of_file("noext"), None);
}

#[test]
fn branches_round_trip() {
    let b = branch("acme", RUN);
    assert_eq!(b, "cyclix/acme/20261130t124702-4efb");
    assert_eq!(parse_branch(&b), Some(("acme", RUN)));
    assert_eq!(
        parse_branch(&format!("refs/heads/{b}")),
        Some(("acme", RUN))
    );
    assert_eq!(parse_branch("main"), None);
    assert_eq!(parse_branch("cyclix/acme"), None);
    assert_eq!(parse_branch("cyclix/acme/r/x"), None);
}

#[test]
fn instances_and_labels_are_in_order() {
    assert_eq!(run_service("acme"), "cyclix-run@acme.service");
    assert_eq!(run_timer("acme"), "cyclix-run@acme.timer");
    assert_eq!(run_filter("r1"), "io.cyclix.run=r1");
    let l = run_labels("acme", "r1", "agent");
    assert_eq!(l[0], ("io.cyclix.tenant".into(), "acme".into()));
    assert_eq!(l[2].1, "agent");
    assert_eq!(check_network("n1"), "cyclix-check-n1");
}

#[test]
fn database_names_are_per_run_identifiers_of_at_most_63_bytes() {
    assert_eq!(
        database("e2e-svc-pg", "20261130t140126-a979"),
        "cyclix_e2e_svc_pg_20261130t140126_a979"
    );
    let long_tenant = "a".repeat(31);
    let long_run = format!("r{}", "0".repeat(47));
    let n = database(&long_tenant, &long_run);
    assert_eq!(n.len(), 63, "{n}");
    assert!(n.ends_with(&long_run), "the run id is never cut: {n}");
    // Two runs of one tenant never share a name, also when the tenant part is cut.
    assert_ne!(database(&long_tenant, &format!("{long_run}1")[1..]), n);
    // A tenant part cut right after a `-` leaves no `__`.
    let n = database("ab-cdefgh", &format!("r{}", "0".repeat(44)));
    assert!(!n.contains("__"), "{n}");
    for n in [n, database("x", "1")] {
        assert!(n.len() <= 63);
        assert!(n.starts_with(|c: char| c.is_ascii_lowercase()));
        assert!(
            n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "{n}"
        );
    }
}
