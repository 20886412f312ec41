//! `repo:` the project's git work tree and the base runs start from.

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::names::git_ref;
use crate::spec::rules::paths::{exposes_host, mount_path};
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Diagnostic, Repo, SpecContext};

/// `repo:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawRepo {
    /// The mapping.
    pub(crate) at: Pos,
    /// `repo.path`.
    pub(crate) path: Option<Located<String>>,
    /// `repo.base`.
    pub(crate) base: Option<Located<String>>,
}

/// The keys of `repo:`.
pub(crate) const KEYS: &[Key] = &[
    Key::required(
        "path",
        Kind::Str(StrKind::Line),
        "the project's git work tree (absolute or `~/`)",
        Some("`path: ~/src/PROJECT` (the git work tree)"),
    ),
    Key::required(
        "base",
        Kind::Str(StrKind::Line),
        "the branch, tag or commit runs start from",
        Some("`base: main` (the branch or commit runs start from)"),
    ),
];

/// Reads `repo:` at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawRepo> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawRepo {
        at: f.pos(),
        path: d.string(&f, "path"),
        base: d.string(&f, "base"),
    })
}

/// Validates `repo:`: the project path (mount rules, never the host's secrets) and the base ref.
pub(crate) fn validate(r: &RawRepo, ctx: &SpecContext, out: &mut Vec<Diagnostic>) -> Option<Repo> {
    // The project is bind-mounted read-write into the sandbox: same path rules as a mount.
    let path = r.path.as_ref().and_then(|p| {
        let norm = mount_path(p, Some(&ctx.home), out)?;
        if let Some(reason) = exposes_host(&norm, ctx) {
            out.push(
                p.diag(format!("project path `{norm}` {reason}"))
                    .hint("point `repo.path` at the project's git work tree"),
            );
            return None;
        }
        Some(norm)
    });
    let base = r.base.as_ref().and_then(|b| {
        git_ref(&b.value)
            .map_err(|e| {
                out.push(b.diag(format!("invalid base: {e}")).hint(
                    "give a branch or tag name (`main`, `release/1.2`) or a 7-64 digit hex commit id",
                ));
            })
            .ok()
            .map(|()| b.value.clone())
    });
    Some(Repo {
        path: path?,
        base: base?,
        path_line: r.path.as_ref().map_or(r.at.line, |p| p.line),
        base_line: r.base.as_ref().map_or(r.at.line, |b| b.line),
    })
}
