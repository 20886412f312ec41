//! The run's `build` phase (issue 15, item 1): after prepare has fixed the base commit and
//! before render, every image the spec builds from the project's files (`build:`) is built
//! from that commit (or found built from the same inputs), and the spec the run renders names
//! each by its digest tag. A failed build ends the run in this phase with podman's last lines
//! in the record; the build's proxy and networks carry the run's labels, so teardown's sweep
//! would find them even if the build's own cleanup did not run.

use std::path::Path;

use anyhow::Result;

use super::super::record::BuiltImageRecord;
use crate::images::build::{BuildFailed, Request};
use crate::run::seam::{RunHost, RunPodman};
use crate::spec::{Image, Spec};

/// Whether `spec` builds any image.
#[must_use]
pub fn has_builds(spec: &Spec) -> bool {
    std::iter::once(&spec.agent.image)
        .chain(std::iter::once(&spec.gate.image))
        .chain(spec.services.iter().map(|s| &s.image))
        .any(|i| i.build().is_some())
}

fn images_mut(spec: &mut Spec) -> Vec<&mut Image> {
    std::iter::once(&mut spec.agent.image)
        .chain(std::iter::once(&mut spec.gate.image))
        .chain(spec.services.iter_mut().map(|s| &mut s.image))
        .collect()
}

/// What the build phase did, for the record.
#[derive(Debug, Default)]
pub(crate) struct Built {
    /// Each image built or found built from the same inputs.
    pub(crate) images: Vec<BuiltImageRecord>,
    /// A failed build's last lines of podman output.
    pub(crate) build_log: Vec<String>,
}

/// The phase `build` of `inp`'s run when its spec builds an image: the spec to render, or
/// `None` when it builds nothing (no phase then); what it built goes into `out`.
///
/// # Errors
/// As [`build_images`], with `phase build`.
pub(crate) fn phase(
    r: &mut super::super::state::Recorder,
    inp: &super::super::inputs::RunInputs,
    host: &dyn RunHost,
    base: &str,
    out: &mut Built,
) -> Result<Option<Spec>> {
    if !has_builds(&inp.spec) {
        return Ok(None);
    }
    r.phase("build", || {
        build_images(
            &inp.spec,
            host,
            base,
            &inp.run_id,
            Some(&inp.interrupted),
            out,
        )
    })
    .map(Some)
}

/// `spec` with each built image's reference set to its digest tag, building what is missing
/// from `base` (`run_id` names and labels the build's objects; `stop` set kills a build); each
/// image goes into `built`.
///
/// # Errors
/// The first build that failed (then `built.build_log` holds podman's last lines).
pub(crate) fn build_images(
    spec: &Spec,
    host: &dyn RunPodman,
    base: &str,
    run_id: &str,
    stop: Option<&std::sync::atomic::AtomicBool>,
    built_out: &mut Built,
) -> Result<Spec> {
    let mut out = spec.clone();
    let repo = Path::new(&spec.repo.path);
    for image in images_mut(&mut out) {
        let Image::Build { reference, build } = image else {
            continue;
        };
        let req = Request {
            tenant: &spec.tenant,
            repo,
            base,
            build,
            repository: reference,
            id: run_id,
            stop,
        };
        match host.build_image(&req) {
            Ok(built) => {
                built_out.images.push(BuiltImageRecord {
                    role: build.role.clone(),
                    reference: built.reference.clone(),
                    built: built.built,
                });
                *reference = built.reference;
            }
            Err(e) => {
                if let Some(f) = e.downcast_ref::<BuildFailed>() {
                    built_out.build_log.clone_from(&f.tail);
                }
                return Err(e);
            }
        }
    }
    Ok(out)
}
