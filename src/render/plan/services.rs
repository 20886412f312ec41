//! The run's services: their ports, database name and environment, their containers in the
//! pod and the per-run volumes holding their data. Pure.

use serde::Serialize;

use super::budgets::{is_local, start_timeout};
use super::topology::{Bind, ContainerPlan, Net, VolumeMount, VolumePlan, WORKDIR};
use super::{RunContext, labels, tmpfs_tmp};
use crate::naming::{self, RunNames};
use crate::spec::Spec;

/// The address services listen on inside the pod (the pod's loopback, shared by its
/// containers): the agent reaches a service at `127.0.0.1:PORT`.
pub const SERVICE_HOST: &str = "127.0.0.1";

/// The ports cyclix picks from for a service without a fixed `port` (inclusive), below the
/// kernel's ephemeral range (32768–60999) so no outgoing connection in the pod can hold one.
pub const PICKED_PORTS: (u16, u16) = (20_000, 29_999);

/// One service of the run as the orchestrator, the record and the agent see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServicePlan {
    /// The spec's name (`db`).
    pub name: String,
    /// Its spec key (`services[0]`), for error messages.
    pub key: String,
    /// Its unit (`cyclix-R-svc-db.service`).
    pub unit: String,
    /// Where the agent reaches it: `127.0.0.1`.
    pub host: String,
    /// The port it listens on in the pod.
    pub port: u16,
    /// The run's database name for it ([`database_name`]).
    pub database: String,
    /// The podman volume holding its data, when the spec gives `data`.
    pub volume: Option<String>,
    /// The health check's argv, when the spec gives one.
    pub health: Option<Vec<String>>,
    /// The unit's start budget in seconds (`TimeoutStartSec=`): the image's start budget plus
    /// the health check's ([`crate::spec::Health::budget_s`]).
    pub start_timeout_s: u64,
    /// The agent's environment variable holding `HOST:PORT` (`CYCLIX_SERVICE_DB`).
    pub env_var: String,
    /// It runs the project: the work tree bound read-only at `/work`, its working directory
    /// (`services[i].worktree: read_only`).
    pub worktree: bool,
}

/// The run's database name ([`naming::database`]).
pub use crate::naming::database as database_name;

/// The ports `cyclix render` shows for `spec`'s services (nothing is reserved): each
/// service's fixed `port`, else the next free one from [`PICKED_PORTS`] in spec order.
#[must_use]
pub fn preview_ports(spec: &Spec) -> Vec<u16> {
    let fixed: Vec<u16> = spec.services.iter().filter_map(|s| s.port).collect();
    let mut next = PICKED_PORTS.0;
    spec.services
        .iter()
        .map(|s| {
            s.port.unwrap_or_else(|| {
                while fixed.contains(&next) {
                    next += 1;
                }
                next += 1;
                next - 1
            })
        })
        .collect()
}

/// The services' containers and the per-run volumes they mount.
pub(super) fn service_containers(
    spec: &Spec,
    run: &RunContext,
    services: &[ServicePlan],
) -> (Vec<ContainerPlan>, Vec<VolumePlan>) {
    let mut containers = Vec::new();
    let mut volumes = Vec::new();
    for (i, (s, p)) in spec.services.iter().zip(services).enumerate() {
        let mut c = service_container(spec, run, i, s, p);
        if s.worktree {
            // The project's app reaches the other services as the agent does (its database).
            for o in services.iter().filter(|o| o.name != p.name) {
                c.env.extend([
                    (o.env_var.clone(), format!("{}:{}", o.host, o.port)),
                    (format!("{}_PORT", o.env_var), o.port.to_string()),
                    (format!("{}_DATABASE", o.env_var), o.database.clone()),
                ]);
            }
        }
        if let (Some(target), Some(stem)) = (&s.data, &p.volume) {
            c.volumes.push(VolumeMount {
                volume: volumes.len(),
                target: target.clone(),
            });
            volumes.push(VolumePlan { stem: stem.clone() });
        }
        containers.push(c);
    }
    (containers, volumes)
}

pub(super) fn service_plans(spec: &Spec, run: &RunContext) -> Vec<ServicePlan> {
    let database = database_name(&spec.tenant, &run.run_id);
    spec.services
        .iter()
        .zip(&run.service_ports)
        .enumerate()
        .map(|(i, (s, port))| {
            let stem = RunNames::new(&run.run_id).service(&s.name);
            ServicePlan {
                name: s.name.clone(),
                key: format!("services[{i}]"),
                unit: naming::container_unit(&stem),
                host: SERVICE_HOST.into(),
                port: *port,
                database: database.clone(),
                volume: s.data.as_ref().map(|_| naming::data_volume(&stem)),
                health: s.health.as_ref().map(|h| h.command.clone()),
                start_timeout_s: start_timeout(&s.image)
                    + s.health.as_ref().map_or(0, crate::spec::Health::budget_s),
                env_var: format!(
                    "CYCLIX_SERVICE_{}",
                    s.name.to_ascii_uppercase().replace('-', "_")
                ),
                worktree: s.worktree,
            }
        })
        .collect()
}

fn service_container(
    spec: &Spec,
    run: &RunContext,
    i: usize,
    s: &crate::spec::Service,
    p: &ServicePlan,
) -> ContainerPlan {
    let r = &run.run_id;
    ContainerPlan {
        stem: RunNames::new(r).service(&s.name),
        description: format!(
            "cyclix run {r} (tenant {}): service {}",
            spec.tenant, s.name
        ),
        image: s.image.reference().to_string(),
        pull_never: is_local(&s.image),
        net: Net::Pod,
        // The project's own app: the run's work tree, read-only, as it is while the agent
        // works on it. Never writable: the agent is the tree's one writer.
        binds: if s.worktree {
            vec![Bind {
                source: run.worktree.clone(),
                target: WORKDIR.into(),
                read_only: true,
            }]
        } else {
            Vec::new()
        },
        tmpfs: vec![tmpfs_tmp()],
        env: service_env(s, p),
        secret_files: Vec::new(),
        secrets: s
            .env
            .iter()
            .map(|v| (RunNames::new(r).secret(v), v.clone()))
            .collect(),
        handed_over: Vec::new(),
        exec: s.command.clone(),
        exec_key: format!("services[{i}].command"),
        exec_key_offset: 0,
        replaces_entrypoint: false,
        workdir: s.worktree.then(|| WORKDIR.to_string()),
        labels: labels(spec, run, &format!("service-{}", s.name)),
        memory_bytes: None,
        cpu_millis: None,
        pids: None,
        runtime_max_s: None,
        start_timeout_s: p.start_timeout_s,
        stop_signal: None,
        volumes: Vec::new(),
        health: s.health.clone(),
        user: None,
        log_file: None,
        oci_runtime: None,
    }
}

/// What a service is told about its run (documented in docs/services.md): cyclix's own
/// names, and the `PostgreSQL` conventional ones so a stock `PostgreSQL` image and its tools
/// (`postgres`, `pg_isready`, `psql`) use the run's port, database and data directory.
fn service_env(s: &crate::spec::Service, p: &ServicePlan) -> Vec<(String, String)> {
    let mut env = vec![
        ("HOME".to_string(), "/tmp".to_string()),
        ("CYCLIX_SERVICE".into(), s.name.clone()),
        ("CYCLIX_HOST".into(), p.host.clone()),
        ("CYCLIX_PORT".into(), p.port.to_string()),
        ("CYCLIX_DATABASE".into(), p.database.clone()),
    ];
    if let Some(d) = &s.data {
        env.push(("CYCLIX_DATA".into(), d.clone()));
    }
    env.extend([
        ("PGHOST".to_string(), p.host.clone()),
        ("PGPORT".into(), p.port.to_string()),
        ("PGDATABASE".into(), p.database.clone()),
        ("POSTGRES_DB".into(), p.database.clone()),
    ]);
    if let Some(d) = &s.data {
        env.push(("PGDATA".into(), d.clone()));
    }
    env
}
