//! Host and container paths: component-wise normalisation, the roots never mounted or read,
//! the home directory's secret stores.

use crate::spec::located::Located;
use crate::spec::{Diagnostic, SpecContext};

/// Roots never mounted into a sandbox or read for a task: kernel and device interfaces and
/// runtime directories holding sockets (the podman and D-Bus sockets among them).
pub(crate) fn denied_root<'a>(norm: &str, ctx: &'a SpecContext) -> Option<&'a str> {
    [
        "/proc",
        "/sys",
        "/dev",
        "/run",
        "/var/run",
        ctx.runtime_dir.as_str(),
    ]
    .into_iter()
    .find(|denied| !denied.is_empty() && is_within(norm, denied))
}

/// Directories in the home directory that hold credentials or state no sandbox may see, even
/// read-only: keys, tokens, the tenants' env files (`~/.config`), podman's storage (with its
/// secrets), cyclix's worktrees and records. The rule for `repo.path` (bound at `/work`);
/// `mounts:` sources follow the wider [`mount_guard`] set.
pub(crate) const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".config",
    ".local/share/containers",
    ".local/share/cyclix/worktrees",
    ".local/state/cyclix",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".password-store",
];

/// Why bind-mounting `norm` would hand the sandbox part of the host, if it would: `/`, the home
/// directory or one of its ancestors, or a [`denied_root`].
pub(crate) fn exposes_host(norm: &str, ctx: &SpecContext) -> Option<String> {
    if norm == "/" || is_within(&ctx.home, norm) {
        return Some("would expose your whole home directory (~/.ssh included)".into());
    }
    if let Some(dir) = HOME_SECRETS
        .iter()
        .find(|d| is_within(norm, &format!("{}/{d}", ctx.home)))
    {
        return Some(format!(
            "is under ~/{dir}, which holds credentials or cyclix's own state (other tenants' secrets, records, podman storage)"
        ));
    }
    denied_root(norm, ctx)
        .map(|denied| format!("is under {denied}, which is never mounted into a sandbox"))
}

/// Normalises a host path (`task.file`): see [`normalize_path`].
pub(crate) fn host_path(
    p: &Located<String>,
    ctx: &SpecContext,
    out: &mut Vec<Diagnostic>,
) -> Option<String> {
    match normalize_path(&p.value, Some(&ctx.home)) {
        Ok(n) => Some(n),
        Err((msg, hint)) => {
            out.push(p.diag(msg).hint(hint));
            None
        }
    }
}

/// Normalises a mount path and refuses the characters that would inject podman mount
/// options (`:`, `,`, `=`; security-cases §4 "podman -v option injection").
pub(crate) fn mount_path(
    p: &Located<String>,
    home: Option<&str>,
    out: &mut Vec<Diagnostic>,
) -> Option<String> {
    if let Some(c) = p.value.chars().find(|c| matches!(c, ':' | ',' | '=')) {
        out.push(
            p.diag(format!("mount path `{}` contains `{c}`", p.value))
                .hint("`:`, `,` and `=` would change podman's mount options; rename the directory or mount its parent"),
        );
        return None;
    }
    match normalize_path(&p.value, home) {
        Ok(n) => Some(n),
        Err((msg, hint)) => {
            out.push(p.diag(msg).hint(hint));
            None
        }
    }
}

/// Normalises an absolute path component-wise: `~/` expands to `home` (when given), `//` and
/// `.` components collapse, a trailing `/` goes. Refuses relative paths, `~user`, and `..`
/// components (never resolved, so `proj/../other` cannot escape a check).
///
/// Returns `Err((message, fix))`.
pub(crate) fn normalize_path(p: &str, home: Option<&str>) -> Result<String, (String, String)> {
    let expanded;
    let path = if p == "~" || p.starts_with("~/") {
        let Some(home) = home else {
            return Err((
                format!("`{p}`: `~` is not allowed here"),
                "write an absolute path".into(),
            ));
        };
        expanded = format!("{home}/{}", p.trim_start_matches('~'));
        expanded.as_str()
    } else if p.starts_with('~') {
        return Err((
            format!("`{p}`: `~user` paths are not supported"),
            "write an absolute path or one starting with `~/`".into(),
        ));
    } else {
        p
    };
    if !path.starts_with('/') {
        return Err((
            format!("`{p}` is a relative path"),
            format!("write an absolute path or one under your home, e.g. `~/{p}`"),
        ));
    }
    let mut comps = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                return Err((
                    format!("`{p}` contains a `..` component"),
                    "write the path without `..`".into(),
                ));
            }
            c => comps.push(c),
        }
    }
    Ok(format!("/{}", comps.join("/")))
}

/// The components of a normalised absolute path.
pub(crate) fn components(p: &str) -> Vec<&str> {
    p.split('/').filter(|c| !c.is_empty()).collect()
}

/// Whether normalised `path` is `root` or below it, compared component-wise
/// (`/p/proj-evil` is not within `/p/proj`).
pub(crate) fn is_within(path: &str, root: &str) -> bool {
    let p = components(path);
    let r = components(root);
    p.len() >= r.len() && p.iter().zip(&r).all(|(a, b)| a == b)
}
