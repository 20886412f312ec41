//! Environment variable names handed to a container (`agent.env`, `services[i].env`).

use std::collections::BTreeMap;

use crate::spec::Diagnostic;
use crate::spec::located::Located;

/// Proxy variables the agent must never override (any letter case): cyclix sets them to the
/// run's egress proxy (security-cases §2 N16, §4 "Env vars").
pub(crate) const PROXY_VARS: [&str; 5] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "FTP_PROXY",
];

/// Variables that carry the address of a host socket or of the user's session (issue 18,
/// item 8): the sandbox has none of these sockets, and a value handed in would point the agent
/// at the host's (ssh-agent, D-Bus, the display, podman, systemd's notify and journal streams).
pub(crate) const SESSION_VARS: [&str; 20] = [
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "XDG_SESSION_ID",
    "WAYLAND_DISPLAY",
    "DISPLAY",
    "XAUTHORITY",
    "PULSE_SERVER",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "NOTIFY_SOCKET",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
    "JOURNAL_STREAM",
    "INVOCATION_ID",
    "TMUX",
];

/// Checks an environment variable name handed to a container: `[A-Z_][A-Z0-9_]*`, and not one
/// of the denied names: `LD_*` (dynamic loader), the proxy variables in any case
/// (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`, `ALL_PROXY`, `FTP_PROXY`), the host-socket and
/// session variables ([`SESSION_VARS`]), `PATH`, `HOME`, and `CYCLIX_*` (cyclix's own).
///
/// # Errors
/// A lowercase message naming the rule.
pub fn env_name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("variable name is empty".into());
    }
    let upper = s.to_ascii_uppercase();
    if PROXY_VARS.contains(&upper.as_str()) {
        return Err(format!(
            "`{s}` is not allowed: cyclix sets the proxy variables to the run's egress proxy"
        ));
    }
    let first_ok = s
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_');
    if !first_ok
        || !s
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    {
        return Err(format!(
            "`{s}` is not a valid variable name; use [A-Z_][A-Z0-9_]* (uppercase letters, digits, `_`)"
        ));
    }
    if s.starts_with("LD_") {
        return Err(format!(
            "`{s}` is not allowed: LD_* variables control the dynamic loader"
        ));
    }
    if SESSION_VARS.contains(&s) {
        return Err(format!(
            "`{s}` is not allowed: it names a host socket or the user's session, which the sandbox must not reach"
        ));
    }
    if s == "PATH" || s == "HOME" {
        return Err(format!("`{s}` is not allowed: the image defines it"));
    }
    if s.starts_with("CYCLIX_") {
        return Err(format!(
            "`{s}` is not allowed: CYCLIX_* variables are set by cyclix"
        ));
    }
    Ok(())
}

/// Validates a list of env names: each valid, none twice.
pub(crate) fn env_list(
    list: Option<&Located<Vec<Located<String>>>>,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let Some(list) = list else {
        return Some(Vec::new());
    };
    let before = out.len();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for name in &list.value {
        if let Err(e) = env_name(&name.value) {
            out.push(name.diag(e).hint(
                "list only the NAMES of variables the agent needs (e.g. ANTHROPIC_API_KEY); cyclix passes their values as secrets",
            ));
        } else if let Some(line) = seen.get(name.value.as_str()) {
            out.push(
                name.diag(format!(
                    "`{}` is listed twice (first at line {line})",
                    name.value
                ))
                .hint("list each variable once"),
            );
        } else {
            seen.insert(&name.value, name.line);
        }
    }
    (out.len() == before).then(|| list.value.iter().map(|n| n.value.clone()).collect())
}
