//! What a warm (pooled) environment holds, as pure facts the pool (`run::pool`) and a
//! claiming run's bring-up (`run::phases::bring_up`) both use: which services a fill starts,
//! and which of the environment's files the claiming run replaces.

/// Whether a fill starts service `s` (issue 16): it needs no secret (`env` empty), does not
/// run the work tree, which only a run has, and its image is not built by the run (`build:`,
/// from the run's base commit). The others are installed by the fill and started by the
/// claiming run, as in a cold run. Pure.
#[must_use]
pub fn poolable(s: &crate::spec::Service) -> bool {
    s.env.is_empty() && !s.worktree && !matches!(s.image, crate::spec::Image::Build { .. })
}

/// Whether a fill makes and holds the agent container (issue 33, `run::pool::held`): every
/// service is one the fill starts ([`poolable`]: the agent's unit pulls its services in, and
/// one that needs a secret or the work tree must wait for the run) and the agent's image is
/// not built by the run (its tag gets the build's digest: another unit file). Otherwise the
/// fill only installs the agent's file and the claiming run makes the container, as a cold
/// run does. Pure.
#[must_use]
pub fn holds_agent(spec: &crate::spec::Spec) -> bool {
    spec.services.iter().all(poolable)
        && !matches!(spec.agent.image, crate::spec::Image::Build { .. })
}

/// The Quadlet files of environment (run) `id` that the fill installs without starting them
/// and the claiming run replaces when it renders them otherwise (`phases::bring_up::install`):
/// the agent's and the gates' `.container` (the run's setup binds, the binary it mounts; the
/// gate's run on the base tree with `gate.protected`) and those of the `services` the fill
/// does not start ([`poolable`]). Pure.
#[must_use]
pub fn replaced_by_the_run(id: &str, services: &[crate::spec::Service]) -> Vec<String> {
    let n = crate::naming::RunNames::new(id);
    [n.agent(), n.gate(), n.gate_base()]
        .into_iter()
        .chain(
            services
                .iter()
                .filter(|s| !poolable(s))
                .map(|s| n.service(&s.name)),
        )
        .map(|c| crate::naming::container_file(&c))
        .collect()
}
