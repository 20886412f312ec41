//! `agent.build`, `gate.build`, `services[i].build`: an image built from the project's own
//! setup files (issue 15, item 1) instead of an `image:` reference. The paths are relative to
//! the repository and read from the run's base commit, never from a work tree; the image is
//! tagged `localhost/cyclix-build-TENANT-ROLE:DIGEST` by a digest of everything that goes into
//! it (`images::build`). Its network goes only through a proxy of its own with `egress` as
//! the allowlist.

use std::collections::BTreeSet;

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::hosts::host_pattern;
use crate::spec::yaml::{Decoder, Fields, Node};
use crate::spec::{Build, Diagnostic, Image};

/// The most `args` a build takes.
const MAX_ARGS: usize = 64;

/// `build:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawBuild {
    /// The mapping.
    pub(crate) at: Pos,
    /// `containerfile`.
    pub(crate) containerfile: Option<Located<String>>,
    /// `devcontainer`.
    pub(crate) devcontainer: Option<Located<String>>,
    /// `context`.
    pub(crate) context: Option<Located<String>>,
    /// `args`.
    pub(crate) args: Option<Located<crate::spec::yaml::StrMap>>,
    /// `egress`.
    pub(crate) egress: Option<Located<Vec<Located<String>>>>,
    /// `timeout`.
    pub(crate) timeout: Option<Located<String>>,
}

/// `build.timeout`: 1 m to 6 h, default 30 m (min, max, default in s).
const BUILD_TIMEOUT: (u64, u64, u64) = (60, 6 * 3600, 30 * 60);

/// The keys of a `build:` mapping.
pub(crate) const KEYS: &[Key] = &[
    Key::optional(
        "containerfile",
        Kind::Str(StrKind::Line),
        "the Containerfile (or Dockerfile), relative to the repository, as of the base commit",
    ),
    Key::optional(
        "devcontainer",
        Kind::Str(StrKind::Line),
        "a devcontainer.json instead (image, build.dockerfile/context/args, containerEnv, remoteUser only)",
    ),
    Key::optional(
        "context",
        Kind::Str(StrKind::Line),
        "the build context directory, relative to the repository (default `.`), as of the base commit",
    ),
    Key::optional(
        "args",
        Kind::StrMap,
        "build arguments (`--build-arg NAME=VALUE`; public values, never secrets)",
    ),
    Key::optional(
        "egress",
        Kind::StrList,
        "hosts the build may reach through its own proxy (ports 80 and 443; default: none)",
    ),
    Key::optional(
        "timeout",
        Kind::Str(StrKind::Line),
        "how long the image's build may take before it is killed and the run fails in phase build (1m to 6h; default 30m)",
    ),
];

/// The `build` key of `agent:`, `gate:` and `services[i]`.
pub(crate) const BUILD: Key = Key::optional(
    "build",
    Kind::Map(KEYS),
    "build the image from the project's Containerfile at the base commit (instead of `image`)",
);

/// Reads the `build` key of `f`, when it has one.
pub(crate) fn decode_in(d: &mut Decoder, f: &Fields<'_>) -> Option<RawBuild> {
    d.section(f, "build", decode)
}

fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawBuild> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawBuild {
        at: f.pos(),
        containerfile: d.string(&f, "containerfile"),
        devcontainer: d.string(&f, "devcontainer"),
        context: d.string(&f, "context"),
        args: d.string_map(&f, "args"),
        egress: d.strings(&f, "egress"),
        timeout: d.string(&f, "timeout"),
    })
}

/// The image of a mapping that takes `image` or `build` (exactly one): `image` validated by
/// `image_rule`, or a [`Image::Build`] whose tag the top level names (`name_builds`).
/// `role` is the build's role (`agent`, `gate`, `service-NAME`).
pub(crate) fn image_or_build(
    image: &crate::spec::rules::images::RawImage,
    build: Option<&RawBuild>,
    role: &str,
    image_rule: impl FnOnce(&mut Vec<Diagnostic>) -> Option<Image>,
    out: &mut Vec<Diagnostic>,
) -> Option<Image> {
    match (build, &image.image) {
        (None, _) => image_rule(out),
        (Some(_), Some(i)) => {
            out.push(
                i.diag("both `image` and `build` are set").hint(
                    "keep one: `build` builds the image from the repository, `image` names one",
                ),
            );
            None
        }
        (Some(b), None) => {
            if let Some(f) = &image.unpinned_local_image {
                out.push(
                    f.diag("`unpinned_local_image` has no meaning with `build`")
                        .hint("remove it: a built image is tagged by the digest of its inputs"),
                );
                return None;
            }
            validate(b, role, out).map(|b| Image::Build {
                reference: String::new(),
                build: Box::new(b),
            })
        }
    }
}

/// `containerfile` or `devcontainer` (exactly one): the Containerfile's path (empty with a
/// devcontainer) and the devcontainer.json's.
fn files(b: &RawBuild, out: &mut Vec<Diagnostic>) -> (Option<String>, Option<String>) {
    let path_of = |c: &Located<String>, out: &mut Vec<Diagnostic>| {
        repo_path(&c.value, false)
            .map_err(|e| {
                out.push(c.diag(e).hint(
                    "write the file's path relative to the repository, e.g. `Containerfile` or `.devcontainer/devcontainer.json`",
                ));
            })
            .ok()
    };
    match (&b.containerfile, &b.devcontainer) {
        (Some(c), None) => (path_of(c, out), None),
        (None, Some(d)) => {
            if b.context.is_some() || b.args.is_some() {
                out.push(
                    d.diag("`context` and `args` come from the devcontainer.json")
                        .hint("set them as `build.context` and `build.args` in the devcontainer.json, or use `containerfile:`"),
                );
            }
            (Some(String::new()), path_of(d, out))
        }
        (Some(_), Some(d)) => {
            out.push(
                d.diag("both `containerfile` and `devcontainer` are set")
                    .hint("keep one"),
            );
            (None, None)
        }
        (None, None) => {
            out.push(
                Diagnostic {
                    path: format!("{}.containerfile", b.at.path),
                    ..b.at.diag("missing required key `containerfile` (or `devcontainer`)")
                }
                .hint("add `containerfile: Containerfile`, or `devcontainer: .devcontainer/devcontainer.json`"),
            );
            (None, None)
        }
    }
}

/// Validates one `build:` mapping.
pub(crate) fn validate(b: &RawBuild, role: &str, out: &mut Vec<Diagnostic>) -> Option<Build> {
    let before = out.len();
    let (containerfile, devcontainer) = files(b, out);
    let context = match &b.context {
        None => Some(".".to_string()),
        Some(c) => repo_path(&c.value, true)
            .map_err(|e| {
                out.push(
                    c.diag(e)
                        .hint("write a directory relative to the repository, e.g. `.` or `app/`"),
                );
            })
            .ok(),
    };
    let mut args = Vec::new();
    if let Some(list) = &b.args {
        if list.value.len() > MAX_ARGS {
            out.push(
                list.diag(format!(
                    "{} build args (at most {MAX_ARGS})",
                    list.value.len()
                ))
                .hint("pass fewer arguments; put settings into the Containerfile"),
            );
        }
        for (k, v) in &list.value {
            if !arg_name(&k.value) {
                out.push(
                    k.diag(format!(
                        "build arg `{}` is not a name",
                        k.value.escape_debug()
                    ))
                    .hint("name it like a variable: [A-Za-z_][A-Za-z0-9_]*"),
                );
            } else if is_proxy_arg(&k.value) {
                out.push(
                    k.diag(format!("build arg `{}` is set by cyclix (the build's proxy)", k.value))
                        .hint("remove it: the build reaches the hosts of `build.egress` through cyclix's proxy"),
                );
            } else {
                args.push((k.value.clone(), v.value.clone()));
            }
        }
    }
    args.sort();
    let mut egress = BTreeSet::new();
    if let Some(list) = &b.egress {
        for entry in &list.value {
            match host_pattern(&entry.value) {
                Ok(p) => {
                    egress.insert(p);
                }
                Err(msg) => out.push(
                    entry
                        .diag(format!("invalid build egress entry: {msg}"))
                        .hint("write an exact host (`registry.npmjs.org`) or a leading wildcard (`*.example.org`)"),
                ),
            }
        }
    }
    let timeout_s =
        crate::spec::rules::durations::bounded_duration(b.timeout.as_ref(), BUILD_TIMEOUT, out);
    if out.len() != before {
        return None;
    }
    Some(Build {
        timeout_s: timeout_s?,
        role: role.to_string(),
        containerfile: containerfile?,
        devcontainer,
        context: context?,
        args,
        egress: egress.into_iter().collect(),
        line: b.at.line,
    })
}

/// `[A-Za-z_][A-Za-z0-9_]*`, at most 128 bytes.
fn arg_name(s: &str) -> bool {
    s.len() <= 128
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The build args cyclix sets itself (buildah's predefined proxy arguments).
pub(crate) fn is_proxy_arg(name: &str) -> bool {
    matches!(
        name.to_ascii_lowercase().as_str(),
        "http_proxy" | "https_proxy" | "ftp_proxy" | "no_proxy" | "all_proxy"
    )
}

/// A path relative to the repository: `/`-separated, no `..`, `.` or empty component (but
/// `.` alone when `dir_ok`), nothing under `.git`, no control character or backslash. A
/// trailing `/` is dropped.
fn repo_path(s: &str, dir_ok: bool) -> Result<String, String> {
    if dir_ok && (s == "." || s == "./") {
        return Ok(".".to_string());
    }
    let body = s.strip_suffix('/').unwrap_or(s);
    if body.is_empty() {
        return Err(format!("`{s}` names no path"));
    }
    if s.starts_with('/') {
        return Err(format!("`{s}` is absolute"));
    }
    if let Some(c) = s
        .chars()
        .find(|c| *c == '\\' || c.is_control() || *c == ':')
    {
        return Err(format!("`{}` contains {c:?}", s.escape_debug()));
    }
    for comp in body.split('/') {
        if comp.is_empty() || comp == "." || comp == ".." {
            return Err(format!("`{s}` has an empty, `.` or `..` component"));
        }
        if comp.eq_ignore_ascii_case(".git") {
            return Err(format!("`{s}` is inside `.git`"));
        }
    }
    Ok(body.to_string())
}

/// Gives every built image of `spec` its tag without the digest,
/// `localhost/cyclix-build-TENANT-ROLE` (the run adds `:DIGEST` when it builds), and makes
/// each Containerfile a setup path (`setup:`: bound read-only, held at delivery; issue 15,
/// item 2). The context is not: it is usually the whole project.
pub(crate) fn name_builds(spec: &mut crate::spec::Spec) {
    let tenant = spec.tenant.clone();
    let mut files = Vec::new();
    for image in std::iter::once(&mut spec.agent.image)
        .chain(std::iter::once(&mut spec.gate.image))
        .chain(spec.services.iter_mut().map(|s| &mut s.image))
    {
        if let Image::Build { reference, build } = image {
            *reference = format!("{}-{tenant}-{}", BUILD_REPOSITORY, build.role);
            files.extend(
                std::iter::once(build.containerfile.clone())
                    .chain(build.devcontainer.clone())
                    .filter(|f| !f.is_empty()),
            );
        }
    }
    for f in files {
        if !spec.setup.contains(&f) {
            spec.setup.push(f);
        }
    }
}

/// The repository part every built image's name starts with.
pub const BUILD_REPOSITORY: &str = "localhost/cyclix-build";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_paths_are_relative_plain_and_outside_git() {
        assert_eq!(
            repo_path("Containerfile", false).as_deref(),
            Ok("Containerfile")
        );
        assert_eq!(repo_path("app/", true).as_deref(), Ok("app"));
        assert_eq!(repo_path(".", true).as_deref(), Ok("."));
        for bad in [
            "",
            ".",
            "/etc/x",
            "a/../b",
            "./a",
            ".git/config",
            "a\\b",
            "a:b",
        ] {
            assert!(repo_path(bad, false).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn proxy_args_are_cyclixs() {
        assert!(is_proxy_arg("HTTPS_PROXY"));
        assert!(is_proxy_arg("no_proxy"));
        assert!(!is_proxy_arg("NODE_ENV"));
    }
}
