//! `mounts:` extra host directories bound under `/mnt/`, and the rules on their sources.

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::{Located, Pos};
use crate::spec::mount_guard;
use crate::spec::rules::paths::{components, denied_root, is_within, mount_path};
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Diagnostic, Mount, Repo, SpecContext};

/// One entry of `mounts:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawMount {
    /// The entry.
    pub(crate) at: Pos,
    /// `source`.
    pub(crate) source: Option<Located<String>>,
    /// `target`.
    pub(crate) target: Option<Located<String>>,
    /// `read_only`.
    pub(crate) read_only: Option<Located<bool>>,
}

/// The keys of one `mounts:` entry.
pub(crate) const KEYS: &[Key] = &[
    Key::required(
        "source",
        Kind::Str(StrKind::Line),
        "the host directory (absolute or `~/`)",
        None,
    ),
    Key::required(
        "target",
        Kind::Str(StrKind::Line),
        "where it appears in the sandbox, under /mnt/",
        None,
    ),
    Key::optional("read_only", Kind::Bool, "mount read-only (default true)"),
];

/// Reads one `mounts:` entry at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawMount> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawMount {
        at: f.pos(),
        source: d.string(&f, "source"),
        target: d.string(&f, "target"),
        read_only: d.boolean(&f, "read_only"),
    })
}

/// Validates `mounts:`: sources (denied roots, protected paths, `.git`, sockets, writable
/// only inside the project) and targets (under /mnt/, no overlaps).
pub(crate) fn validate(
    raw: &[RawMount],
    repo: Option<&Repo>,
    ctx: &SpecContext,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<Mount>> {
    let before = out.len();
    let mut result = Vec::new();
    let mut targets: Vec<(String, &Located<String>)> = Vec::new();
    for m in raw {
        let read_only = m.read_only.as_ref().is_none_or(|b| b.value);
        let source = m.source.as_ref().and_then(|s| {
            let norm = mount_path(s, Some(&ctx.home), out)?;
            mount_source_rules(s, &norm, read_only, m.read_only.as_ref(), repo, ctx, out)
                .then_some(norm)
        });
        let target = m.target.as_ref().and_then(|t| {
            let norm = mount_path(t, None, out)?;
            let comps = components(&norm);
            if comps.first() != Some(&"mnt") || comps.len() < 2 {
                out.push(
                    t.diag(format!("mount target `{norm}` is not under /mnt/"))
                        .hint("mount extra data at a path such as /mnt/data"),
                );
                return None;
            }
            for (other, at) in &targets {
                if is_within(&norm, other) || is_within(other, &norm) {
                    out.push(
                        t.diag(format!(
                            "mount target `{norm}` overlaps `{other}` (line {})",
                            at.line
                        ))
                        .hint("give every mount its own directory under /mnt/"),
                    );
                    return None;
                }
            }
            targets.push((norm.clone(), t));
            Some(norm)
        });
        if let (Some(source), Some(target), Some(at)) = (source, target, m.source.as_ref()) {
            result.push(Mount {
                source,
                target,
                read_only,
                source_line: at.line,
                source_column: at.column,
            });
        }
    }
    (out.len() == before).then_some(result)
}

/// The protected paths validation can name alone (see [`super::mount_guard`]): the home
/// directory and what it holds, the project and its `.git`, cyclix's runtime directory. The
/// XDG directories as set, podman's real storage and git dirs on disk are added by
/// `host::mount_scan`.
fn protected(repo: Option<&Repo>, ctx: &SpecContext) -> Vec<mount_guard::Protected> {
    let mut v = mount_guard::home_paths(&ctx.home);
    if let Some(repo) = repo {
        v.extend(mount_guard::repo_paths(&repo.path));
    }
    let home = ctx.home.trim_end_matches('/');
    v.extend(mount_guard::cyclix_paths(
        &format!("{home}/.config"),
        &format!("{home}/.local/share"),
        &format!("{home}/.local/state"),
        (!ctx.runtime_dir.is_empty()).then_some(ctx.runtime_dir.as_str()),
    ));
    v
}

/// Source rules for a mount; reports and returns false when one is broken.
fn mount_source_rules(
    s: &Located<String>,
    norm: &str,
    read_only: bool,
    ro_flag: Option<&Located<bool>>,
    repo: Option<&Repo>,
    ctx: &SpecContext,
    out: &mut Vec<Diagnostic>,
) -> bool {
    if let Some(denied) = denied_root(norm, ctx) {
        out.push(
            s.diag(format!(
                "mount source `{norm}` is under {denied}, which is never mounted into a sandbox"
            ))
            .hint("mount a directory with only the data the agent needs"),
        );
        return false;
    }
    let protected = protected(repo, ctx);
    if let Some(c) = mount_guard::conflict(norm, &protected) {
        let (message, fix) = mount_guard::explain(norm, &c);
        out.push(s.diag(message).hint(fix));
        return false;
    }
    let comps = components(norm);
    if let Some(i) = comps.iter().position(|c| *c == ".git") {
        let found = format!("/{}", comps.get(..=i).unwrap_or_default().join("/"));
        let how = if i + 1 == comps.len() {
            "is"
        } else {
            "lies inside"
        };
        let (message, fix) = mount_guard::explain_git(norm, how, &found);
        out.push(s.diag(message).hint(fix));
        return false;
    }
    let file_name = norm.rsplit('/').next().unwrap_or_default();
    if file_name.to_ascii_lowercase().ends_with(".sock") {
        out.push(
            s.diag(format!(
                "mount source `{norm}` looks like a container-engine socket; mounting it hands over the host, even read-only"
            ))
            .hint("remove this mount"),
        );
        return false;
    }
    if !read_only
        && let Some(repo) = repo
        && !is_within(norm, &repo.path)
    {
        let message = format!(
            "writable mount `{norm}` is outside the project `{}`",
            repo.path
        );
        out.push(
            ro_flag
                .map_or_else(|| s.diag(message.clone()), |f| f.diag(message.clone()))
                .hint("set `read_only: true`: the agent writes only to its checkout at /work"),
        );
        return false;
    }
    true
}
