//! `cyclix images build`: builds cyclix's images (egress proxy, Python agent, `PostgreSQL`,
//! git) with podman from the Containerfiles embedded in the binary; `--preset P` builds one
//! agent preset image instead, offline, from the pinned package files of
//! `images/agents/packages.lock` (see [`run_preset`]).

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result};
use sha2::Digest as _;

use super::image_builds::build_images;
use crate::exit::{self, Outcome};
use crate::images;
use crate::images::agents::{self, Algo, Package};
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
        "images/proxy/cyclix-proxy-start",
        include_str!("../../images/proxy/cyclix-proxy-start"),
    ),
    (
        "images/proxy/cyclix-budget",
        include_str!("../../images/proxy/cyclix-budget"),
    ),
    (
        "images/proxy/ERR_CYCLIX_BUDGET",
        include_str!("../../images/proxy/ERR_CYCLIX_BUDGET"),
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
        crate::outln!("built {tag} ({})", id.get(..12).unwrap_or(&id));
    }
    Ok(Outcome::Ok)
}

/// `cyclix images build [--preset P | --tenant T]`: [`run_preset`], [`run_tenant`] or [`run`].
///
/// # Errors
/// As theirs.
pub fn dispatch(
    preset: Option<&str>,
    tenant: Option<&str>,
    packages: &Path,
    env: impl Fn() -> Result<crate::context::HostEnv>,
) -> Result<Outcome> {
    match (preset, tenant) {
        (Some(p), _) => run_preset(p, packages),
        (None, Some(t)) => run_tenant(&env()?, t),
        (None, None) => run(),
    }
}

/// `cyclix images build --tenant TENANT`: builds the images tenant's spec builds from the
/// project's files (`build:`), from its base ref's commit, as a run would (or reports them up
/// to date), so the run's `build` phase finds them.
///
/// # Errors
/// No such tenant or an invalid spec (input errors); a refused input or a failed build (its
/// last lines of podman output in the message); git or podman failures.
pub fn run_tenant(env: &crate::context::HostEnv, tenant: &str) -> Result<Outcome> {
    super::tenant::check_name(tenant)?;
    let path = super::tenant::tenant_spec_path(env, tenant);
    if !path.exists() {
        return Err(exit::input(format!(
            "no tenant `{tenant}`: {} does not exist; write its spec (docs/spec.md)",
            path.display()
        )));
    }
    let spec = super::spec_file::load_spec(&path, env)?.map_err(|e| exit::input(e.to_string()))?;
    if !crate::run::phases::build::has_builds(&spec) {
        crate::outln!("tenant {tenant} builds no image (no `build:` in its spec)");
        return Ok(Outcome::Ok);
    }
    let commit = crate::git::Git::new(&spec.repo.path).rev_parse_commit(&spec.repo.base)?;
    let id = super::clock::new_run_id(std::time::SystemTime::now(), std::process::id());
    for b in build_images(&spec, &commit, &id)?.1 {
        crate::outln!(
            "{} {}",
            if b.built { "built" } else { "up to date" },
            b.reference
        );
    }
    Ok(Outcome::Ok)
}

/// The label on a preset image holding the sha256 of its inputs (the embedded Containerfile,
/// the base image's id, the preset's lock lines): equal inputs, no rebuild.
pub const INPUTS_LABEL: &str = "io.cyclix.inputs";

/// The label naming the lock line the image's CLI was installed from, `NAME@VERSION` as in the
/// lock (`@openai/codex@0.171.0-linux-x64`); `io.cyclix.package` names the release
/// (`@openai/codex@0.171.0`).
pub const FILE_LABEL: &str = "io.cyclix.package.file";

/// `cyclix images build --preset PRESET --packages DIR`: builds
/// [`agents::preset_image`]`(PRESET)` from the embedded `images/agents/PRESET/Containerfile`,
/// FROM [`images::AGENT_PYTHON_IMAGE`] (built by plain `cyclix images build`), with no network.
///
/// The package files come from the content-addressed cache `DIR/ALGO/HEX` that
/// `scripts/fetch-agent-packages PRESET` fills (`DIR`: `--packages`, else `$CYCLIX_PACKAGES`,
/// else `/var/tmp/cyclix-packages`; inside the testbed `/opt/cyclix-packages`). Each file is
/// hashed while it is copied into the build context, and the copy is used only if its digest is
/// the lock's; the Containerfile checks it once more. The CLI's file is `package.tgz` in the
/// context (its digest the `PKG_DIGEST` build argument); further lines of the preset go to
/// `packages/FILE` (the URL's file name: pip needs a wheel's own name), listed with their digests
/// in `packages/SHA512SUMS` and `packages/SHA256SUMS` (`sha512sum -c` format) for that check.
/// The packages are checked every time; the build is skipped (`up to date TAG`) when the tag's
/// [`INPUTS_LABEL`] matches.
///
/// # Errors
/// An unknown preset, a missing package file, a file whose digest is not the lock's, a missing
/// base image (each an [`exit::InputError`] naming the package, the lock line and the fix);
/// I/O or podman failures.
pub fn run_preset(preset: &str, packages_dir: &Path) -> Result<Outcome> {
    let Some(containerfile) = agents::containerfile(preset) else {
        let known: Vec<&str> = agents::PRESET_CONTAINERFILES
            .iter()
            .map(|(p, _)| *p)
            .collect();
        return Err(exit::input(format!(
            "--preset {preset}: no such preset image (known: {}); fix: pick one of them",
            known.join(", ")
        )));
    };
    let pkgs = agents::packages(preset)?;
    let (Some(cli), Some(tag)) = (pkgs.first(), agents::preset_image(preset)) else {
        return Err(exit::input(format!(
            "--preset {preset}: no package line in {}; fix: add the CLI's line",
            agents::LOCK_PATH
        )));
    };
    let dir = tempfile::tempdir().context("creating a build context")?;
    let (mut sha512sums, mut sha256sums) = (String::new(), String::new());
    for (i, pkg) in pkgs.iter().enumerate() {
        let rel = if i == 0 {
            "package.tgz".to_string()
        } else {
            let sums = match pkg.algo {
                Algo::Sha512 => &mut sha512sums,
                Algo::Sha256 => &mut sha256sums,
            };
            sums.extend([&*pkg.hex, "  ", pkg.file_name(), "\n"]);
            format!("packages/{}", pkg.file_name())
        };
        copy_verified(
            pkg,
            &packages_dir.join(pkg.cache_rel()),
            &dir.path().join(rel),
        )?;
    }
    if pkgs.len() > 1 {
        std::fs::write(dir.path().join("packages/SHA512SUMS"), sha512sums)?;
        std::fs::write(dir.path().join("packages/SHA256SUMS"), sha256sums)?;
    }
    let podman = Podman::new();
    if !podman.image_exists(images::AGENT_PYTHON_IMAGE)? {
        return Err(exit::input(format!(
            "the preset images build FROM {}, which is not in local storage; fix: run \
             `cyclix images build` first",
            images::AGENT_PYTHON_IMAGE
        )));
    }
    // Everything the image is made of; an image of the tag built from the same inputs is kept
    // (a rebuild would miss buildah's layer cache, whose key for a bind-mounted package is the
    // file's identity in the fresh context, and leave a dangling copy of several 100 MB).
    let base_id = podman.image_id(images::AGENT_PYTHON_IMAGE)?;
    let mut inputs = sha2::Sha256::new();
    for part in [containerfile, &base_id]
        .into_iter()
        .chain(pkgs.iter().map(|p| p.text.as_str()))
    {
        inputs.update(part.as_bytes());
        inputs.update([0]);
    }
    let inputs = hex(&inputs.finalize());
    if podman.image_label(&tag, INPUTS_LABEL)?.as_deref() == Some(inputs.as_str()) {
        let id = podman.image_id(&tag)?;
        crate::outln!("up to date {tag} ({})", id.get(..12).unwrap_or(&id));
        return Ok(Outcome::Ok);
    }
    let file = dir.path().join("Containerfile");
    std::fs::write(&file, containerfile).with_context(|| format!("writing {}", file.display()))?;
    let digest = cli.digest();
    let (release_name, release_version) = cli.release();
    let file_label = format!("{}@{}", cli.name, cli.version);
    let id = podman.build_with_args(
        &tag,
        &file,
        dir.path(),
        &[
            ("PKG_NAME", release_name),
            ("PKG_VERSION", release_version),
            ("PKG_DIGEST", &digest),
        ],
        &[(INPUTS_LABEL, &inputs), (FILE_LABEL, &file_label)],
        BUILD_DEADLINE,
    )?;
    crate::outln!("built {tag} ({})", id.get(..12).unwrap_or(&id));
    Ok(Outcome::Ok)
}

/// Copies `src` to `dest` while hashing it; a missing `src` or a digest other than the lock's
/// is an input error naming the package, its lock line and the fix (and leaves only the
/// temporary build context, which is dropped).
fn copy_verified(pkg: &Package, src: &Path, dest: &Path) -> Result<()> {
    let line = format!("{}:{}: {}", agents::LOCK_PATH, pkg.line, pkg.text);
    let fix = format!(
        "fix: run `scripts/fetch-agent-packages {}` on a host with internet (it fills \
         $CYCLIX_PACKAGES, default /var/tmp/cyclix-packages) or pass --packages DIR holding \
         {} (inside the project's testbed: --packages /opt/cyclix-packages)",
        pkg.preset,
        pkg.cache_rel()
    );
    let mut input = match std::fs::File::open(src) {
        Ok(f) => f,
        Err(e) => {
            return Err(exit::input(format!(
                "package {}@{} of preset {} is missing: {}: {e}\n  lock line {line}\n  {fix}",
                pkg.name,
                pkg.version,
                pkg.preset,
                src.display()
            )));
        }
    };
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut out =
        std::fs::File::create(dest).with_context(|| format!("creating {}", dest.display()))?;
    let mut h512 = sha2::Sha512::new();
    let mut h256 = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = input
            .read(&mut buf)
            .with_context(|| format!("reading {}", src.display()))?;
        if n == 0 {
            break;
        }
        let chunk = buf.get(..n).context("invariant: read within the buffer")?;
        match pkg.algo {
            Algo::Sha512 => h512.update(chunk),
            Algo::Sha256 => h256.update(chunk),
        }
        out.write_all(chunk)
            .with_context(|| format!("writing {}", dest.display()))?;
    }
    out.flush()?;
    let got: String = match pkg.algo {
        Algo::Sha512 => hex(&h512.finalize()),
        Algo::Sha256 => hex(&h256.finalize()),
    };
    if got != pkg.hex {
        return Err(exit::input(format!(
            "package {}@{} of preset {}: {} has {} {got}, the lock says {}: refused\n  lock line \
             {line}\n  fix: delete the file and run `scripts/fetch-agent-packages {}`",
            pkg.name,
            pkg.version,
            pkg.preset,
            src.display(),
            pkg.algo.name(),
            pkg.hex,
            pkg.preset
        )));
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}
