//! What a build reads from the base commit: the Containerfile's text (or, for
//! `devcontainer:`, the one its `devcontainer.json` makes), the context's tree and the build
//! args, with the git object ids that go into the image's digest.

use std::path::Path;

use anyhow::Result;

use super::{MAX_CONTAINERFILE, Request, devcontainer, short};
use crate::git::Git;

/// A build's inputs at its base commit.
#[derive(Debug, Clone)]
pub(super) struct Inputs {
    /// The file named in messages (the Containerfile, or the devcontainer.json).
    pub(super) file: String,
    /// The Containerfile text podman builds.
    pub(super) text: String,
    /// The context's tree id.
    pub(super) context_id: String,
    /// The build args.
    pub(super) args: Vec<(String, String)>,
    /// The digest's lines so far (files, context, args).
    pub(super) parts: Vec<String>,
}

/// The id of `path` in `commit` when it is of `kind` (`blob`, `tree`), else an input error
/// naming `what` (the spec key or devcontainer field) and the fix.
fn object(git: &Git, req: &Request<'_>, path: &str, kind: &str, what: &str) -> Result<String> {
    match git.object_at(req.base, path)? {
        Some((k, id)) if k == kind => Ok(id),
        _ => Err(crate::exit::input(format!(
            "{} build: `{path}` is not a {} in the base commit {}; fix: commit it, or correct {what} (spec line {})",
            req.build.role,
            if kind == "tree" { "directory" } else { "file" },
            short(req.base),
            req.build.line
        ))),
    }
}

/// Reads `req`'s inputs (`dir`: scratch space).
///
/// # Errors
/// A missing file or directory, a refused devcontainer.json (input errors); git failures.
pub(super) fn read(git: &Git, req: &Request<'_>, dir: &Path) -> Result<Inputs> {
    let b = req.build;
    let mut parts = Vec::new();
    let (containerfile, context, args, tail, image) = match &b.devcontainer {
        None => (
            b.containerfile.clone(),
            b.context.clone(),
            b.args.clone(),
            String::new(),
            None,
        ),
        Some(dc) => {
            let id = object(git, req, dc, "blob", "`devcontainer:`")?;
            parts.push(format!("devcontainer {dc} {id}"));
            let text = git.blob_text(&id, MAX_CONTAINERFILE, dir)?;
            let d = devcontainer::parse(&text, dc)
                .map_err(|e| crate::exit::input(format!("{} build: {e}", b.role)))?;
            let tail = d.tail_lines();
            (
                d.dockerfile.clone().unwrap_or_default(),
                d.context.clone(),
                d.args.clone(),
                tail,
                d.image.clone(),
            )
        }
    };
    let (file, mut text) = if let Some(img) = &image {
        (
            b.devcontainer.clone().unwrap_or_default(),
            format!("FROM {img}\n"),
        )
    } else {
        let what = if b.devcontainer.is_some() {
            "`build.dockerfile` in the devcontainer.json"
        } else {
            "`containerfile:`"
        };
        let id = object(git, req, &containerfile, "blob", what)?;
        parts.push(format!("containerfile {containerfile} {id}"));
        (containerfile, git.blob_text(&id, MAX_CONTAINERFILE, dir)?)
    };
    if !tail.is_empty() {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&tail);
    }
    let what = if b.devcontainer.is_some() {
        "`build.context` in the devcontainer.json"
    } else {
        "`context:`"
    };
    let context_id = object(git, req, &context, "tree", what)?;
    parts.push(format!("context {context} {context_id}"));
    parts.extend(args.iter().map(|(k, v)| format!("arg {k}={v}")));
    parts.push(format!("text {}", super::inputs_digest(&[text.clone()])));
    Ok(Inputs {
        file,
        text,
        context_id,
        args,
        parts,
    })
}
