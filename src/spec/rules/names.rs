//! Name rules shared by several sections and by the adapters: tenant and service names, run
//! ids, git ref names.

/// Checks a tenant or service name: `^[a-z][a-z0-9-]{0,30}$` and no trailing `-`. The name
/// becomes a systemd unit instance and part of container names, so it is stricter than
/// systemd's own rules (`src/basic/unit-name.c`) and never escaped.
///
/// # Errors
/// A lowercase message saying which rule the name breaks.
pub fn tenant_name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("name is empty".into());
    }
    if s.len() > 31 {
        return Err(format!(
            "name `{s}` is {} characters long; the limit is 31",
            s.len()
        ));
    }
    let Some(first) = s.chars().next() else {
        return Err("name is empty".into());
    };
    if !first.is_ascii_lowercase() {
        return Err(format!("name `{s}` must start with a lowercase letter a-z"));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "name `{s}` contains `{c}`; only a-z, 0-9 and `-` are allowed"
        ));
    }
    if s.ends_with('-') {
        return Err(format!("name `{s}` must not end with `-`"));
    }
    Ok(())
}

/// Checks a run id: `^[a-z0-9][a-z0-9-]{0,47}$`, no trailing `-`, no `--`.
///
/// # Errors
/// A lowercase message saying which rule the id breaks.
pub fn run_id(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("run id is empty".into());
    }
    if s.len() > 48 {
        return Err(format!(
            "run id `{s}` is {} characters long; the limit is 48",
            s.len()
        ));
    }
    if s.starts_with('-') {
        return Err(format!("run id `{s}` must start with a-z or 0-9"));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "run id `{s}` contains `{c}`; only a-z, 0-9 and `-` are allowed"
        ));
    }
    if s.ends_with('-') {
        return Err(format!("run id `{s}` must not end with `-`"));
    }
    if s.contains("--") {
        return Err(format!("run id `{s}` must not contain `--`"));
    }
    Ok(())
}

/// Checks a git ref name by the rules of git-check-ref-format(1), or a 7–64 digit hex commit
/// (which those rules accept as well). Stricter than git in one way: a leading `-` is refused
/// so the value can never be read as an option.
pub(crate) fn git_ref(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("the ref is empty".into());
    }
    if s.starts_with('-') {
        return Err(format!("`{s}` starts with `-`"));
    }
    if s == "@" {
        return Err("`@` alone is not a ref name".into());
    }
    if let Some(c) = s.chars().find(|c| {
        c.is_control()
            || matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\')
            || *c == '\u{7f}'
    }) {
        return Err(format!(
            "`{s}` contains `{}`, which git does not allow in a ref",
            c.escape_default()
        ));
    }
    if s.contains("..") {
        return Err(format!("`{s}` contains `..`"));
    }
    if s.contains("@{") {
        return Err(format!("`{s}` contains `@{{`"));
    }
    if s.ends_with('/') || s.starts_with('/') || s.contains("//") {
        return Err(format!("`{s}` has an empty path component"));
    }
    if s.ends_with('.') {
        return Err(format!("`{s}` ends with `.`"));
    }
    for comp in s.split('/') {
        if comp.starts_with('.') {
            return Err(format!("component `{comp}` of `{s}` starts with `.`"));
        }
        if comp.rsplit_once('.').is_some_and(|(_, ext)| ext == "lock") {
            return Err(format!("component `{comp}` of `{s}` ends with `.lock`"));
        }
    }
    Ok(())
}
