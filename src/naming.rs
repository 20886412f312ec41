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
    /// The environment id (`io.cyclix.env=ENV`, issue 16): the networks, proxy and pod a run
    /// uses; on the cold path it is the run id.
    pub const ENV: &str = "io.cyclix.env";
    /// The tenant whose warm pool holds the object (`io.cyclix.pool=TENANT`), on pooled
    /// objects only.
    pub const POOL: &str = "io.cyclix.pool";
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

    /// The container of the gate's run on the base tree (`gate.protected`: docs/gate.md).
    #[must_use]
    pub fn gate_base(&self) -> String {
        self.role("gate-base")
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

    /// `cyclix-RUN-agent-deadline.timer`: the transient timer that stops a held agent at its
    /// deadline should cyclix be gone by then (`run::seam::RunProcs::stop_later`).
    #[must_use]
    pub fn agent_deadline(&self) -> String {
        format!("{}-deadline.timer", self.agent())
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

/// The Quadlet file of a container stem: `STEM.container` (its unit: [`container_unit`]).
#[must_use]
pub fn container_file(stem: &str) -> String {
    format!("{stem}.container")
}

/// The Quadlet file of a pod stem: `STEM.pod` (its unit: [`pod_unit`]); also how other
/// Quadlet files refer to the pod (`Pod=STEM.pod`).
#[must_use]
pub fn pod_file(stem: &str) -> String {
    format!("{stem}.pod")
}

/// The Quadlet file of a network stem: `STEM.network` (its unit: [`network_unit`]); also how
/// containers refer to it (`Network=STEM.network`).
#[must_use]
pub fn network_file(stem: &str) -> String {
    format!("{stem}.network")
}

/// The Quadlet file of a volume stem: `STEM.volume` (its unit: [`volume_unit`]); also how
/// containers refer to it (`Volume=STEM.volume:…`).
#[must_use]
pub fn volume_file(stem: &str) -> String {
    format!("{stem}.volume")
}

/// The run's database name for its services: `cyclix_<tenant>_<run>` with `-` as `_`, at
/// most 63 bytes (the `PostgreSQL` identifier limit, `NAMEDATALEN - 1`). When it would be
/// longer, the tenant part is shortened, never the run id, so the name stays unique per run
/// on the host (run ids are). A valid unquoted SQL identifier: lowercase letters, digits and
/// `_`, starting with a letter.
#[must_use]
pub fn database(tenant: &str, run_id: &str) -> String {
    const MAX: usize = 63;
    let run = run_id.replace('-', "_");
    let room = MAX.saturating_sub("cyclix__".len() + run.len());
    let tenant: String = tenant.replace('-', "_").chars().take(room).collect();
    format!("cyclix_{}_{run}", tenant.trim_end_matches('_'))
}

/// The file names of the static unit templates in `~/.config/systemd/user/`.
pub mod template {
    /// The template that runs a tenant (`cyclix-run@TENANT.service`).
    pub const RUN_SERVICE: &str = "cyclix-run@.service";
    /// The template of a tenant's schedule (`cyclix-run@TENANT.timer`).
    pub const RUN_TIMER: &str = "cyclix-run@.timer";
    /// The template the timer triggers (`cyclix-tick@TENANT.service`).
    pub const TICK_SERVICE: &str = "cyclix-tick@.service";
    /// The template the run unit's `OnFailure=` starts (`cyclix-notify@TENANT.service`).
    pub const NOTIFY_SERVICE: &str = "cyclix-notify@.service";
    /// The template that keeps a tenant's warm pool (`cyclix-pool@TENANT.service`, issue 16).
    pub const POOL_SERVICE: &str = "cyclix-pool@.service";
}

/// The drop-in of a tenant's run unit naming its notification:
/// `cyclix-run@TENANT.service.d/notify.conf`.
#[must_use]
pub fn notify_dropin(tenant: &str) -> String {
    format!("cyclix-run@{tenant}.service.d/notify.conf")
}

/// The drop-in of a tenant's timer carrying its schedule:
/// `cyclix-run@TENANT.timer.d/schedule.conf`.
#[must_use]
pub fn schedule_dropin(tenant: &str) -> String {
    format!("{}.d/schedule.conf", run_timer(tenant))
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
const SUFFIXES: [&str; 10] = [
    "-network",
    "-pod",
    "-volume",
    "-egress",
    "-agent",
    "-gate-base",
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
    // A drop-in directory names its unit: `cyclix-RUN-pod.service.d`.
    let name = name.strip_suffix(".d").unwrap_or(name);
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

/// The keeper of a tenant's warm pool: `cyclix-pool@TENANT.service` (`cyclix pool keep`).
#[must_use]
pub fn pool_service(tenant: &str) -> String {
    format!("cyclix-pool@{tenant}.service")
}

/// The network `cyclix check` creates for its own probe (`cyclix-check-NONCE`).
#[must_use]
pub fn check_network(nonce: &str) -> String {
    format!("{PREFIX}check-{nonce}")
}

#[cfg(test)]
mod tests;
