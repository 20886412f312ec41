//! The paths no extra mount may touch, and the rule that compares a mount source with them.
//!
//! Owns: the protected-path set (the tenant's repository and its git dir, credentials and
//! configuration in the home directory, shell histories, cyclix's own config, state, data and
//! runtime directories, podman's storage) and the one comparison every caller uses: a source
//! is refused when it **is**, **contains** or **lies inside** a protected path, compared
//! component-wise. A read-only `~/.local/share` exposes podman's secrets and every run's work
//! tree; a writable project root hands over git config and hooks: the kind is refused, not the
//! case.
//!
//! Pure: no file system, no environment, no processes. What needs the file system (the git
//! dirs inside a source, canonical forms of the protected paths, podman's real storage paths
//! from `podman info`) is gathered by `host::mount_scan` and handed in as [`Protected`] values.

use super::rules::paths::{components, is_within};
use super::{Diagnostic, Mount, Spec};

/// How much of the tree around a protected path is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The path, everything below it and every ancestor (a mount of any of them exposes it).
    Whole,
    /// The path and its ancestors only; below it is allowed (the home directory: `~/datasets/x`
    /// is a fine mount, `~` and `/home` are not).
    ItselfAndAbove,
}

/// One protected host path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    /// Absolute, normalised host path.
    pub path: String,
    /// What it is, for the message: "your SSH keys", "podman's storage (graph root)".
    pub what: String,
    /// How far the protection reaches.
    pub scope: Scope,
}

impl Protected {
    /// A path protected as a whole (itself, below and above).
    #[must_use]
    pub fn whole(path: impl Into<String>, what: impl Into<String>) -> Self {
        Protected {
            path: path.into(),
            what: what.into(),
            scope: Scope::Whole,
        }
    }
}

/// How a source relates to the protected path it hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// The source is the protected path.
    Is,
    /// The source is an ancestor of the protected path.
    Contains,
    /// The source lies below the protected path.
    Inside,
}

/// A source that hits a protected path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict<'a> {
    /// How.
    pub relation: Relation,
    /// Which.
    pub protected: &'a Protected,
}

/// Files and directories in the home directory that no sandbox may see, even read-only, as
/// `(path relative to home, what)`: keys and tokens, git's configuration (its hooks and
/// `core.fsmonitor` run on the host), the XDG trees (the tenants' env files, podman's storage
/// and secrets, cyclix's work trees and records) and shell histories.
pub const HOME_PROTECTED: &[(&str, &str)] = &[
    (".ssh", "your SSH keys"),
    (".gnupg", "your GnuPG keys"),
    (".gitconfig", "your git configuration"),
    (".git-credentials", "your git credentials"),
    (".config/git", "your git configuration"),
    (
        ".config",
        "your configuration directory (tenant env files, podman's config)",
    ),
    (
        ".local/share",
        "your data directory (podman's storage and secrets, cyclix's work trees)",
    ),
    (
        ".local/state",
        "your state directory (cyclix's run records)",
    ),
    (".aws", "your AWS credentials"),
    (".azure", "your Azure credentials"),
    (".kube", "your Kubernetes credentials"),
    (".docker", "your Docker credentials"),
    (".netrc", "your .netrc credentials"),
    (".password-store", "your password store"),
    (".bash_history", "a shell history"),
    (".zsh_history", "a shell history"),
    (".zhistory", "a shell history"),
    (".sh_history", "a shell history"),
    (".history", "a shell history"),
    (".python_history", "a shell history"),
    (".node_repl_history", "a shell history"),
    (".psql_history", "a shell history"),
    (".mysql_history", "a shell history"),
    (".sqlite_history", "a shell history"),
    (".lesshst", "a shell history"),
    (".viminfo", "an editor history"),
    (".local/share/fish/fish_history", "a shell history"),
];

/// The protected paths that follow from the home directory alone: the home directory itself
/// (and its ancestors) and [`HOME_PROTECTED`].
#[must_use]
pub fn home_paths(home: &str) -> Vec<Protected> {
    let home = home.trim_end_matches('/');
    let mut v = vec![Protected {
        path: if home.is_empty() {
            "/".into()
        } else {
            home.to_string()
        },
        what: "your home directory".into(),
        scope: Scope::ItselfAndAbove,
    }];
    v.extend(
        HOME_PROTECTED
            .iter()
            .map(|(rel, what)| Protected::whole(format!("{home}/{rel}"), *what)),
    );
    v
}

/// The tenant's repository and its `.git`.
#[must_use]
pub fn repo_paths(repo: &str) -> Vec<Protected> {
    let repo = repo.trim_end_matches('/');
    vec![
        Protected::whole(repo, "the project repository"),
        Protected::whole(format!("{repo}/.git"), "the project's git directory"),
    ]
}

/// Where cyclix keeps its own files (`cyclix` below each of the XDG directories it uses).
#[must_use]
pub fn cyclix_paths(
    config: &str,
    data: &str,
    state: &str,
    runtime: Option<&str>,
) -> Vec<Protected> {
    let mut v = vec![
        Protected::whole(
            format!("{config}/cyclix"),
            "cyclix's configuration (tenant specs and env files)",
        ),
        Protected::whole(
            format!("{data}/cyclix"),
            "cyclix's data (every run's work tree)",
        ),
        Protected::whole(format!("{state}/cyclix"), "cyclix's state (run records)"),
    ];
    if let Some(r) = runtime {
        v.push(Protected::whole(
            format!("{r}/cyclix"),
            "cyclix's runtime directory (run control files)",
        ));
    }
    v
}

/// Podman's storage as `podman info` (or `storage.conf`) names it: graph root (images,
/// containers and, below it, the secrets), run root and volume path. Empty entries are skipped.
#[must_use]
pub fn podman_paths(graph_root: &str, run_root: &str, volume_path: &str) -> Vec<Protected> {
    [
        (
            graph_root,
            "podman's storage (graph root, with its secrets)",
        ),
        (run_root, "podman's run root"),
        (volume_path, "podman's volume storage"),
    ]
    .into_iter()
    .filter(|(p, _)| p.starts_with('/'))
    .map(|(p, what)| Protected::whole(normalise(p), what))
    .collect()
}

/// `p` with `//`, `.` and a trailing `/` collapsed (protected paths come from the host, which
/// may spell them loosely).
fn normalise(p: &str) -> String {
    let comps: Vec<&str> = components(p).into_iter().filter(|c| *c != ".").collect();
    format!("/{}", comps.join("/"))
}

/// The protected path `source` hits, if any: an exact hit first, then the deepest path the
/// source lies inside, then the first one it contains.
#[must_use]
pub fn conflict<'a>(source: &str, protected: &'a [Protected]) -> Option<Conflict<'a>> {
    let hit = |relation, protected| {
        Some(Conflict {
            relation,
            protected,
        })
    };
    if let Some(p) = protected
        .iter()
        .find(|p| components(&p.path) == components(source))
    {
        return hit(Relation::Is, p);
    }
    if let Some(p) = protected
        .iter()
        .filter(|p| p.scope == Scope::Whole && is_within(source, &p.path))
        .max_by_key(|p| components(&p.path).len())
    {
        return hit(Relation::Inside, p);
    }
    protected
        .iter()
        .find(|p| is_within(&p.path, source))
        .and_then(|p| hit(Relation::Contains, p))
}

/// The message and fix for a source that hits a protected path.
#[must_use]
pub fn explain(source: &str, c: &Conflict<'_>) -> (String, String) {
    let p = c.protected;
    let how = match c.relation {
        Relation::Is => "is",
        Relation::Contains => "contains",
        Relation::Inside => "lies inside",
    };
    let message = format!(
        "mount source `{source}` {how} {} `{}`, which no sandbox may see, read-only or not",
        p.what, p.path
    );
    let fix = if p.what.starts_with("the project") {
        "remove this mount: the agent already works on a private checkout of the project at /work"
            .to_string()
    } else if p.scope == Scope::ItselfAndAbove {
        format!(
            "mount a directory below `{}` that holds only the data the agent needs (e.g. ~/datasets/NAME)",
            p.path
        )
    } else {
        format!(
            "mount a directory that holds only the data the agent needs, outside `{}` (e.g. ~/datasets/NAME)",
            p.path
        )
    };
    (message, fix)
}

/// A diagnostic at mount `index`'s source (its position is kept in the validated [`Mount`]).
#[must_use]
pub fn diagnostic(index: usize, m: &Mount, message: String, fix: String) -> Diagnostic {
    Diagnostic::at(
        m.source_line,
        m.source_column,
        &format!("mounts[{index}].source"),
        message,
    )
    .hint(fix)
}

/// One diagnostic per mount of `spec` whose source hits one of `protected`.
#[must_use]
pub fn refusals(spec: &Spec, protected: &[Protected]) -> Vec<Diagnostic> {
    spec.mounts
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            let c = conflict(&m.source, protected)?;
            let (message, fix) = explain(&m.source, &c);
            Some(diagnostic(i, m, message, fix))
        })
        .collect()
}

/// The message and fix for a source that is, contains or lies inside a git directory found on
/// the host (`found`: the git dir, `how`: `is`, `contains` or `lies inside`).
#[must_use]
pub fn explain_git(source: &str, how: &str, found: &str) -> (String, String) {
    (
        format!(
            "mount source `{source}` {how} a git directory `{found}`, whose config and hooks run on the host; no sandbox may see one, read-only or not"
        ),
        "mount a directory without a git repository in it (copy the data out, or mount a subdirectory that holds no `.git`)".into(),
    )
}

#[cfg(test)]
mod tests;
