//! How systemd supervises a run: its units by role, in start and in stop order (the units'
//! budgets are `budgets`'). Pure.

use serde::Serialize;

use super::services::ServicePlan;
use super::topology::{NetworkPlan, VolumePlan};
use crate::naming::{self, RunNames};
use crate::spec::Spec;

/// The units a run creates, by role. Names are systemd unit names (`*.service`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct UnitNames {
    /// Infrastructure started before the agent, in order (proxy pulls in both networks; the
    /// pod and services come up with the agent). Empty for non-container tiers.
    pub infra: Vec<String>,
    /// The agent's unit.
    pub agent: String,
    /// The gate's unit.
    pub gate: String,
    /// The unit of the gate's run on the base tree (`gate.protected`), if the spec has one.
    pub gate_base: Option<String>,
    /// Every unit of the run, in stop order (agent and gate first, networks last), including
    /// the generated `-network`/`-pod`/`-volume` oneshots that must be stopped too (testbed
    /// NOTES).
    pub all: Vec<String>,
    /// The run's services, in spec order (empty for non-container tiers).
    pub services: Vec<ServicePlan>,
}

/// The units of a container run: the proxy and the services start before the agent; every
/// unit is stopped agent and gate first, then the services, the proxy, the pod, the volumes
/// and the networks last.
pub(super) fn container_units(
    names: &RunNames,
    spec: &Spec,
    volumes: &[VolumePlan],
    networks: &[NetworkPlan],
    services: Vec<ServicePlan>,
) -> UnitNames {
    let svc = naming::container_unit;
    let service_units = spec.services.iter().map(|s| svc(&names.service(&s.name)));
    let mut infra = vec![svc(&names.proxy())];
    infra.extend(service_units.clone());
    let gate_base = (!spec.gate.protected.is_empty()).then(|| svc(&names.gate_base()));
    let mut all = vec![svc(&names.agent()), svc(&names.gate())];
    all.extend(gate_base.clone());
    all.extend(service_units);
    all.push(svc(&names.proxy()));
    all.push(naming::pod_unit(&names.base()));
    all.extend(volumes.iter().map(|v| naming::volume_unit(&v.stem)));
    all.extend(networks.iter().map(|n| naming::network_unit(&n.stem)));
    UnitNames {
        infra,
        agent: svc(&names.agent()),
        gate: svc(&names.gate()),
        gate_base,
        all,
        services,
    }
}

/// The units of a host-tier run: the agent's and the gate's, nothing else.
pub(super) fn host_units(names: &RunNames) -> UnitNames {
    let (agent, gate) = (
        naming::container_unit(&names.agent()),
        naming::container_unit(&names.gate()),
    );
    UnitNames {
        infra: Vec::new(),
        all: vec![agent.clone(), gate.clone()],
        agent,
        gate,
        gate_base: None,
        services: Vec::new(),
    }
}
