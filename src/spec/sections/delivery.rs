//! `delivery:` pushing a run's branch to a remote of the repository, and which paths it may
//! or may not touch.

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::durations::bounded_duration;
use crate::spec::rules::names::git_ref;
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Delivery, Diagnostic};
use crate::tier::Tier;

/// `delivery.lock_wait`: (min, max, default) in seconds.
const LOCK_WAIT: (u64, u64, u64) = (0, 6 * 3600, 10 * 60);

/// `delivery:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawDelivery {
    /// The mapping.
    pub(crate) at: Pos,
    /// `remote`.
    pub(crate) remote: Option<Located<String>>,
    /// `branch`.
    pub(crate) branch: Option<Located<String>>,
    /// `push`.
    pub(crate) push: Option<Located<bool>>,
    /// `allow_paths`.
    pub(crate) allow_paths: Option<Located<Vec<Located<String>>>>,
    /// `hold_paths`.
    pub(crate) hold_paths: Option<Located<Vec<Located<String>>>>,
    /// `lock_wait`, e.g. `10m`.
    pub(crate) lock_wait: Option<Located<String>>,
    /// `allow_setup_changes`.
    pub(crate) allow_setup_changes: Option<Located<bool>>,
}

/// The keys of `delivery:`.
pub(crate) const KEYS: &[Key] = &[
    Key::required(
        "remote",
        Kind::Str(StrKind::Line),
        "the remote of the repository to push to",
        Some("`remote: origin` (a remote of the repository)"),
    ),
    Key::optional(
        "branch",
        Kind::Str(StrKind::Line),
        "the branch to push (default `cyclix/TENANT/RUN`)",
    ),
    Key::optional("push", Kind::Bool, "push the run's branch (default true)"),
    Key::optional(
        "allow_paths",
        Kind::StrList,
        "paths a delivered run may change",
    ),
    Key::optional(
        "hold_paths",
        Kind::StrList,
        "paths whose changes hold the delivery for review",
    ),
    Key::optional(
        "lock_wait",
        Kind::Str(StrKind::Duration),
        "longest wait for the repository lock (0-6h, default 10m)",
    ),
    Key::optional(
        "allow_setup_changes",
        Kind::Bool,
        "deliver a run whose commits change a `setup` path (default false: held)",
    ),
];

/// Reads `delivery:` at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawDelivery> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawDelivery {
        at: f.pos(),
        remote: d.string(&f, "remote"),
        branch: d.string(&f, "branch"),
        push: d.boolean(&f, "push"),
        allow_paths: d.strings(&f, "allow_paths"),
        hold_paths: d.strings(&f, "hold_paths"),
        lock_wait: d.string(&f, "lock_wait"),
        allow_setup_changes: d.boolean(&f, "allow_setup_changes"),
    })
}

/// Validates `delivery:`; refused for tier `direct`, which has no run branch.
pub(crate) fn validate(
    d: &RawDelivery,
    tier: Option<Tier>,
    out: &mut Vec<Diagnostic>,
) -> Option<Delivery> {
    if tier == Some(Tier::Direct) {
        out.push(
            d.at.diag(
                "tier `direct` has no run branch to deliver: its agent commits on your checkout",
            )
            .hint("remove `delivery:` or use tier `worktree` or `container`"),
        );
        return None;
    }
    let remote = d.remote.as_ref().and_then(|r| {
        remote_name(&r.value)
            .map_err(|e| {
                out.push(r.diag(format!("invalid remote: {e}")).hint(
                    "name a remote of the repository (`git remote` lists them), e.g. `origin`",
                ));
            })
            .ok()
            .map(|()| r.value.clone())
    });
    let branch = match &d.branch {
        None => Some(None),
        Some(b) => branch_name(&b.value)
            .map_err(|e| {
                out.push(b.diag(format!("invalid branch: {e}")).hint(
                    "give a branch name without `refs/heads/`, e.g. `cyclix/acme/nightly`; leave it out for `cyclix/TENANT/RUN`",
                ));
            })
            .ok()
            .map(|()| Some(b.value.clone())),
    };
    let allow_paths = path_list(d.allow_paths.as_ref(), out);
    let hold_paths = path_list(d.hold_paths.as_ref(), out);
    let lock_wait_s = bounded_duration(d.lock_wait.as_ref(), LOCK_WAIT, out);
    Some(Delivery {
        remote: remote?,
        branch: branch?,
        push: d.push.as_ref().is_none_or(|b| b.value),
        allow_paths: allow_paths?,
        hold_paths: hold_paths?,
        lock_wait_s: lock_wait_s?,
        allow_setup_changes: d.allow_setup_changes.as_ref().is_some_and(|b| b.value),
    })
}

/// A remote name as `git remote add` takes it, restricted to `[A-Za-z0-9._-]` (no URL: the
/// remote's URL, credentials and ssh settings come from the user's repository).
fn remote_name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("the name is empty".into());
    }
    if s.starts_with(['-', '.']) {
        let first = s.chars().next().unwrap_or('-');
        return Err(format!("`{s}` starts with `{first}`"));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "`{s}` contains `{}`: give the remote's name, not a URL or path",
            c.escape_default()
        ));
    }
    git_ref(s)
}

/// A branch name on the remote: a valid ref name (`git check-ref-format --branch`), not
/// `HEAD`, not spelled as a full ref.
fn branch_name(s: &str) -> Result<(), String> {
    git_ref(s)?;
    if s == "HEAD" || s.starts_with("refs/") {
        return Err(format!("`{s}` is not a plain branch name"));
    }
    Ok(())
}

/// `delivery.allow_paths` / `hold_paths` by the one path rule ([`super::paths`]): each `dir/`
/// (a directory and everything below), `path` (one file) or `**/name` (a file or directory
/// name at any depth); no other glob character.
fn path_list(
    raw: Option<&Located<Vec<Located<String>>>>,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    super::paths::list(
        raw,
        super::paths::Globs::LeadingOnly,
        "write a path relative to the repository: `dir/`, `file` or `**/name`, e.g. `.github/workflows/`",
        out,
    )
}
