//! `cyclix images build`: builds cyclix's images (egress proxy, Python agent, `PostgreSQL`,
//! git) with podman from the Containerfiles embedded in the binary.

use std::time::Duration;

use anyhow::{Context as _, Result};

use crate::exit::Outcome;
use crate::images;
use crate::podman::Podman;

/// The files `cyclix images build` needs, embedded: (path in the build context, contents).
const IMAGE_CONTEXT: &[(&str, &str)] = &[
    (
        "Containerfile.python",
        include_str!("../../Containerfile.python"),
    ),
    (
        "images/agent/cyclix-demo-agent",
        include_str!("../../images/agent/cyclix-demo-agent"),
    ),
    (
        "images/proxy/Containerfile",
        include_str!("../../images/proxy/Containerfile"),
    ),
    (
        "images/proxy/cyclix-sni-eq",
        include_str!("../../images/proxy/cyclix-sni-eq"),
    ),
    (
        "images/postgres/Containerfile",
        include_str!("../../images/postgres/Containerfile"),
    ),
    (
        "images/git/Containerfile",
        include_str!("../../images/git/Containerfile"),
    ),
    (
        "images/postgres/cyclix-postgres-entrypoint",
        include_str!("../../images/postgres/cyclix-postgres-entrypoint"),
    ),
];

/// Deadline for one image build.
pub const BUILD_DEADLINE: Duration = Duration::from_secs(900);

/// `cyclix images build`: builds the proxy, the Python agent and the `PostgreSQL` service image
/// from the embedded Containerfiles (offline when the base image is local).
///
/// # Errors
/// I/O or podman failures.
pub fn run() -> Result<Outcome> {
    let dir = tempfile::tempdir().context("creating a build context")?;
    for (rel, text) in IMAGE_CONTEXT {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(
            p.parent()
                .context("invariant: context files have a parent")?,
        )?;
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
    }
    let exe = dir.path().join("images/agent/cyclix-demo-agent");
    std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let podman = Podman::new();
    for (tag, file, ctx) in [
        (
            images::PROXY_IMAGE,
            "images/proxy/Containerfile",
            "images/proxy",
        ),
        (images::AGENT_PYTHON_IMAGE, "Containerfile.python", "."),
        (
            images::POSTGRES_IMAGE,
            "images/postgres/Containerfile",
            "images/postgres",
        ),
        (images::GIT_IMAGE, "images/git/Containerfile", "images/git"),
    ] {
        let id = podman.build(
            tag,
            &dir.path().join(file),
            &dir.path().join(ctx),
            BUILD_DEADLINE,
        )?;
        println!("built {tag} ({})", id.get(..12).unwrap_or(&id));
    }
    Ok(Outcome::Ok)
}
