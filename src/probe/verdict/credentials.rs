//! Credentials (P22, P23): secrets in environments, keys in keyrings.

use super::{Judged, errno_name, judged};
use crate::probe::Context;

/// What P22 saw: variables of our environment and of every readable `/proc/*/environ`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvObs {
    /// (source, NAME, sha256 of the value in lowercase hex).
    pub vars: Vec<(String, String, String)>,
    /// How many environ files were read (positive control: at least our own).
    pub sources: usize,
}

/// Name fragments that mark a secret or a host handle (§2 P22), matched case-insensitively.
pub const SECRET_MARKS: &[&str] = &[
    "pass",
    "secret",
    "key",
    "token",
    "aws_",
    "github_",
    "ssh_auth_sock",
    "dbus_session",
    "xdg_runtime_dir",
];

/// How a passing P22 line's `detail` starts when it records variables merely named like a
/// watched one (the agent's doing during the watch); the host copies them into the run record.
pub const NAMED_ONLY: &str = "named like a watched variable, not its value (the agent's doing): ";

/// P22: no forbidden value; no forbidden name where the name decides; no secret-looking name
/// that is not allowed before the agent runs (during the watch such a name is the agent's
/// doing and listed like a named-only one).
///
/// A forbidden name whose value is watched by sha256 (`ctx.value_watched_env_names`) and does
/// not carry it is, during the watch (`ctx.watch`), the agent's doing: it passes and is listed
/// in the detail after [`NAMED_ONLY`]. Before the agent runs, or for a name whose value is too
/// short to check, the name alone fails. Values are compared whole (sha256); the host-side scan
/// also finds a watched value inside a longer one.
#[must_use]
pub fn p22(o: &EnvObs, ctx: &Context) -> Judged {
    let mut why = Vec::new();
    let mut named_only = Vec::new();
    if o.sources == 0 || o.vars.is_empty() {
        why.push("positive control failed: no environment could be read".to_string());
    }
    let mut names: Vec<String> = Vec::new();
    for (src, name, hash) in &o.vars {
        let lower = name.to_ascii_lowercase();
        let allowed = ctx.allowed_env_names.contains(name);
        let forbidden_value = ctx
            .forbidden_env_sha256
            .iter()
            .any(|h| h.eq_ignore_ascii_case(hash));
        if forbidden_value {
            why.push(format!("{src}: {name} carries a forbidden value"));
        } else if ctx.forbidden_env_names.contains(name) {
            if ctx.watch && ctx.value_watched_env_names.contains(name) {
                named_only.push(format!("{src}: {name}"));
            } else {
                why.push(format!("{src}: forbidden name {name}"));
            }
        } else if !allowed && SECRET_MARKS.iter().any(|m| lower.contains(m)) {
            // Before the agent runs every variable is cyclix's, so such a name may be a leak;
            // while it works, its own programs set them (aider's litellm sets
            // TIKTOKEN_CACHE_DIR, measured) and the values decide: recorded, not a failure.
            if ctx.watch {
                named_only.push(format!("{src}: {name}"));
            } else {
                why.push(format!("{src}: secret-looking name {name}"));
            }
        }
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    why.dedup();
    let pass = why.is_empty();
    let detail = if pass && !named_only.is_empty() {
        format!("{NAMED_ONLY}{}", named_only.join(", "))
    } else {
        why.join("; ")
    };
    judged(
        "no forbidden name or value; secret-looking names only if allowlisted",
        format!("{} sources, names {}", o.sources, names.join(",")),
        pass,
        detail,
    )
}

/// A key linked to a keyring: its description and, for a keyring, how many keys it holds
/// (`Ok(1)` for a plain key; the errno when it cannot be read).
pub type LinkedKey = (String, Result<usize, i32>);

/// A keyring as P23 saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyring {
    /// Its own description (`keyring;UID;GID;PERM;NAME`) or the errno name.
    pub own: String,
    /// The keys linked to it: (description, how many keys a linked keyring holds — `Ok(1)`
    /// for a plain key), or the `KEYCTL_READ` errno.
    pub linked: Result<Vec<LinkedKey>, i32>,
}

/// P23: `/proc/keys` masked; the session and user keyrings hold no key (an errno such as
/// `EACCES` also shows nothing readable).
///
/// Policy (measured: a process started with `podman exec` has the session keyring `_ses` of
/// the exec'ing user's systemd unit, which links the host user's user keyring `_uid.UID` with
/// full user permissions): a linked *keyring* is accepted only when it is empty (or
/// unreadable); any plain key, or a linked keyring holding keys, is a FAIL because the agent
/// could read the host user's keys.
#[must_use]
pub fn p23(proc_keys_masked: bool, session: &Keyring, user: &Keyring) -> Judged {
    let t = |k: &Keyring| match &k.linked {
        Ok(l) => format!("[{}] linked {l:?}", k.own),
        Err(e) => format!("[{}] {}", k.own, errno_name(*e)),
    };
    // The one key allowed: systemd's `invocation_id` user key, which a unit with
    // `KeyringMode=private` (cyclix-run@.service) gets in its fresh session keyring
    // (systemd.exec(5)); a unit id, not a secret. Any other key fails.
    let empty = |k: &Keyring| match &k.linked {
        Ok(l) => l.iter().all(|(d, n)| {
            (d.starts_with("keyring;") && matches!(n, Ok(0) | Err(_)))
                || (d.starts_with("user;") && d.ends_with(";invocation_id"))
        }),
        Err(_) => true,
    };
    judged(
        "/proc/keys masked; @s and @u hold no key",
        format!(
            "/proc/keys {}; @s {}; @u {}",
            if proc_keys_masked {
                "masked"
            } else {
                "READABLE"
            },
            t(session),
            t(user)
        ),
        proc_keys_masked && empty(session) && empty(user),
        "",
    )
}
