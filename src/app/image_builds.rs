//! Images built from a tenant's project files at a commit, outside a run (`images build
//! --tenant`, `twin`): each spec image with `build:` built (or found built from the same
//! inputs) and the spec naming it by its digest tag.

use std::path::Path;

use anyhow::Result;

/// `spec` with every image it builds (`build:`) built from `commit` (or found built from
/// the same inputs) and named by its digest tag, and what was done; progress on stderr.
/// `id` names the builds' proxy and networks.
///
/// # Errors
/// As [`crate::images::build::build`].
pub(crate) fn build_images(
    spec: &crate::spec::Spec,
    commit: &str,
    id: &str,
) -> Result<(crate::spec::Spec, Vec<crate::images::build::Built>)> {
    let mut out = spec.clone();
    let mut done = Vec::new();
    let repo = Path::new(&spec.repo.path);
    for image in std::iter::once(&mut out.agent.image)
        .chain(std::iter::once(&mut out.gate.image))
        .chain(out.services.iter_mut().map(|s| &mut s.image))
    {
        let crate::spec::Image::Build { reference, build } = image else {
            continue;
        };
        let req = crate::images::build::Request {
            tenant: &spec.tenant,
            repo,
            base: commit,
            build,
            repository: reference,
            id,
            // No run to stop: a SIGTERM ends this process, and the build dies with it.
            stop: None,
        };
        let built = crate::images::build::build(&req, &mut |l| crate::stderrln!("{l}"))?;
        reference.clone_from(&built.reference);
        done.push(built);
    }
    Ok((out, done))
}
