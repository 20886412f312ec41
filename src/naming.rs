//! Every name and label of a run, in one pure module, with their parsers (their inverses,
//! round-trip tested below).
//!
//! A run's podman objects, Quadlet files, systemd units, secrets and git branch all carry its
//! run id (DESIGN.md "names contain the run id"): `cyclix-RUN` is the pod and the internal
//! network, `cyclix-RUN-ROLE` the containers (`agent`, `gate`, `proxy`, `svc-NAME`), the
//! egress network and the secrets (`cyclix-RUN-VAR`). Quadlet derives unit names from file
//! names (podman-systemd.unit(5), "Pod units": `X.pod` → `X-pod.service`; `X.network` →
//! `X-network.service`; `X.volume` → `X-volume.service`; `X.container` → `X.service`).
//! Everything that builds one of these calls this module, and everything that reads one back
//! (convergence, `cyclix leftovers`) calls its parsers.

/// The prefix of every object, unit and secret name of a run.
pub const PREFIX: &str = "cyclix-";

/// Podman labels on every object of a run (`--label`, Quadlet `Label=`).
pub mod label {
    /// The tenant (`io.cyclix.tenant=TENANT`).
    pub const TENANT: &str = "io.cyclix.tenant";
    /// The run id (`io.cyclix.run=RUN`): teardown and the audit remove/list by it.
    pub const RUN: &str = "io.cyclix.run";
    /// The object's role in the run (`agent`, `gate`, `proxy`, `service`, …).
    pub const ROLE: &str = "io.cyclix.role";
    /// Objects of `cyclix check`'s own probes (not of a run).
    pub const CHECK: &str = "io.cyclix.check";
}

/// The podman label filter that selects a run's objects: `io.cyclix.run=RUN`.
#[must_use]
pub fn run_filter(run_id: &str) -> String {
    format!("{}={run_id}", label::RUN)
}

/// The labels every object of a run carries, in their rendered order (tenant, run, role).
#[must_use]
pub fn run_labels(tenant: &str, run_id: &str, role: &str) -> Vec<(String, String)> {
    vec![
        (label::TENANT.into(), tenant.into()),
        (label::RUN.into(), run_id.into()),
        (label::ROLE.into(), role.into()),
    ]
}

/// The names of one run's objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunNames<'a> {
    run_id: &'a str,
}

impl<'a> RunNames<'a> {
    /// The names of run `run_id`.
    #[must_use]
    pub fn new(run_id: &'a str) -> Self {
        RunNames { run_id }
    }

    /// `cyclix-RUN`: the pod, the internal network, and the stem of every other name.
    #[must_use]
    pub fn base(&self) -> String {
        format!("{PREFIX}{}", self.run_id)
    }

    /// `cyclix-RUN-ROLE`: a container or the egress network (`agent`, `gate`, `proxy`,
    /// `egress`, `sentinel`, `infra`).
    #[must_use]
    pub fn role(&self, role: &str) -> String {
        format!("{PREFIX}{}-{role}", self.run_id)
    }

    /// The agent container's name (and its Quadlet file stem).
    #[must_use]
    pub fn agent(&self) -> String {
        self.role("agent")
    }

    /// The gate container's name.
    #[must_use]
    pub fn gate(&self) -> String {
        self.role("gate")
    }

    /// The egress proxy container's name.
    #[must_use]
    pub fn proxy(&self) -> String {
        self.role("proxy")
    }

    /// The egress network (not internal; only the proxy is on it).
    #[must_use]
    pub fn egress(&self) -> String {
        self.role("egress")
    }

    /// The pod's infra container (`--infra-name`, podman-pod-create(1)).
    #[must_use]
    pub fn infra(&self) -> String {
        self.role("infra")
    }

    /// `cyclix-RUN-svc-NAME`: a service container.
    #[must_use]
    pub fn service(&self, name: &str) -> String {
        format!("{PREFIX}{}-svc-{name}", self.run_id)
    }

    /// `cyclix-RUN-VAR`: the podman secret holding variable `VAR` for this run.
    #[must_use]
    pub fn secret(&self, var: &str) -> String {
        format!("{PREFIX}{}-{var}", self.run_id)
    }

    /// The prefix every name of this run starts with, `cyclix-RUN-` (the pod and the
    /// internal network are exactly [`RunNames::base`]).
    #[must_use]
    pub fn prefix(&self) -> String {
        format!("{PREFIX}{}-", self.run_id)
    }

    /// Whether `name` (an object, unit or file name) is this run's: [`RunNames::base`],
    /// or it followed by `-…` or `.…`.
    #[must_use]
    pub fn owns(&self, name: &str) -> bool {
        name.strip_prefix(PREFIX)
            .and_then(|r| r.strip_prefix(self.run_id))
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['-', '.']))
    }
}

/// The data volume of a service container with stem `stem`: `STEM-data`.
#[must_use]
pub fn data_volume(service_stem: &str) -> String {
    format!("{service_stem}-data")
}

/// The systemd unit of a `.container` stem: `STEM.service`.
#[must_use]
pub fn container_unit(stem: &str) -> String {
    format!("{stem}.service")
}

/// The systemd unit Quadlet generates from a `.pod` stem: `STEM-pod.service`.
#[must_use]
pub fn pod_unit(stem: &str) -> String {
    format!("{stem}-pod.service")
}

/// The systemd unit Quadlet generates from a `.network` stem: `STEM-network.service`.
#[must_use]
pub fn network_unit(stem: &str) -> String {
    format!("{stem}-network.service")
}

/// The systemd unit Quadlet generates from a `.volume` stem: `STEM-volume.service`.
#[must_use]
pub fn volume_unit(stem: &str) -> String {
    format!("{stem}-volume.service")
}

/// The systemd unit of a rendered file (Quadlet's naming for `.container`, `.pod`,
/// `.network`, `.volume`; a `.service` is itself). `None`: not a unit file (e.g. a drop-in
/// or the proxy's config).
#[must_use]
pub fn unit_of_file(file: &str) -> Option<String> {
    let (stem, ext) = file.rsplit_once('.')?;
    Some(match ext {
        "container" => container_unit(stem),
        "pod" => pod_unit(stem),
        "network" => network_unit(stem),
        "volume" => volume_unit(stem),
        "service" => file.to_string(),
        _ => return None,
    })
}

/// The suffixes a run's names end with after the run id (one of them at most, after a
/// `-svc-NAME` part is cut): the inverse of [`RunNames`] and the unit functions.
const SUFFIXES: [&str; 9] = [
    "-network",
    "-pod",
    "-volume",
    "-egress",
    "-agent",
    "-gate",
    "-proxy",
    "-sentinel",
    "-infra",
];

/// The run id in a run's object, unit or file name (`cyclix-RUN-agent.container` → `RUN`,
/// `cyclix-RUN-svc-db-data-volume.service` → `RUN`); `None` when the name is not cyclix's.
/// Run ids have no `-svc-` and end in four hex digits, so the cut is unambiguous
/// (`spec::validate::run_id`).
#[must_use]
pub fn run_of(name: &str) -> Option<String> {
    let rest = name.strip_prefix(PREFIX)?;
    let mut stem = match rest.rsplit_once('.') {
        Some((s, ext)) if !ext.contains('-') => s,
        _ => rest,
    }
    .to_string();
    if let Some(i) = stem.find("-svc-") {
        stem.truncate(i);
    }
    for _ in 0..2 {
        if let Some(s) = SUFFIXES.iter().find_map(|x| stem.strip_suffix(x)) {
            stem = s.to_string();
        }
    }
    (!stem.is_empty()).then_some(stem)
}

/// The run id in a secret's name `cyclix-RUN-VAR` (a variable name has no `-`); `None`
/// when the name is not cyclix's.
#[must_use]
pub fn run_of_secret(name: &str) -> Option<&str> {
    name.strip_prefix(PREFIX)
        .and_then(|r| r.rsplit_once('-'))
        .map(|(r, _)| r)
        .filter(|r| !r.is_empty())
}

/// The run branch: `cyclix/TENANT/RUN`.
#[must_use]
pub fn branch(tenant: &str, run_id: &str) -> String {
    format!("cyclix/{tenant}/{run_id}")
}

/// The tenant and run id of a run branch (short name or `refs/heads/…`); `None` otherwise.
#[must_use]
pub fn parse_branch(name: &str) -> Option<(&str, &str)> {
    let short = name.strip_prefix("refs/heads/").unwrap_or(name);
    let (tenant, run) = short.strip_prefix("cyclix/")?.split_once('/')?;
    (!tenant.is_empty() && !run.is_empty() && !run.contains('/')).then_some((tenant, run))
}

/// The template instance that runs a tenant: `cyclix-run@TENANT.service`.
#[must_use]
pub fn run_service(tenant: &str) -> String {
    format!("cyclix-run@{tenant}.service")
}

/// The tenant's schedule: `cyclix-run@TENANT.timer`.
#[must_use]
pub fn run_timer(tenant: &str) -> String {
    format!("cyclix-run@{tenant}.timer")
}

/// The tenant of a `cyclix-run@TENANT.service` / `.timer` instance; `None` otherwise.
#[must_use]
pub fn tenant_of_instance(unit: &str) -> Option<&str> {
    let inst = unit.strip_prefix("cyclix-run@")?;
    let t = inst
        .strip_suffix(".service")
        .or_else(|| inst.strip_suffix(".timer"))?;
    (!t.is_empty()).then_some(t)
}

/// The network `cyclix check` creates for its own probe (`cyclix-check-NONCE`).
#[must_use]
pub fn check_network(nonce: &str) -> String {
    format!("{PREFIX}check-{nonce}")
}

#[cfg(test)]
mod tests {
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
    fn instances_round_trip_and_labels_are_in_order() {
        assert_eq!(tenant_of_instance(&run_service("acme")), Some("acme"));
        assert_eq!(tenant_of_instance(&run_timer("acme")), Some("acme"));
        assert_eq!(tenant_of_instance("cyclix-run@.timer"), None);
        assert_eq!(tenant_of_instance("cyclix-tick@acme.service"), None);
        assert_eq!(run_filter("r1"), "io.cyclix.run=r1");
        let l = run_labels("acme", "r1", "agent");
        assert_eq!(l[0], ("io.cyclix.tenant".into(), "acme".into()));
        assert_eq!(l[2].1, "agent");
        assert_eq!(check_network("n1"), "cyclix-check-n1");
    }
}
