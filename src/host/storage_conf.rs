//! Podman's `storage.conf` (containers-storage.conf(5)): the one reader of its values and of
//! the rootless graph root, used by `cyclix check`, the mount guard and the storage-lock
//! wait alike.

use std::path::{Path, PathBuf};

/// The value of `key = "value"` in the `[storage]` table of a `storage.conf` (a TOML subset:
/// podman's files are flat `key = "string"` lines): quotes (`"` or `'`) removed, a trailing
/// `# comment` after an unquoted value dropped; `None` when absent or empty.
#[must_use]
pub fn value(text: &str, key: &str) -> Option<String> {
    let mut in_storage = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_storage = l == "[storage]";
            continue;
        }
        if !in_storage {
            continue;
        }
        if let Some((k, v)) = l.split_once('=')
            && k.trim() == key
        {
            let v = v.trim();
            let v = match v.chars().next() {
                Some(q @ ('"' | '\'')) => v[1..].split(q).next().unwrap_or_default(),
                _ => v.split('#').next().unwrap_or_default().trim(),
            };
            return Some(v.to_string()).filter(|s| !s.is_empty());
        }
    }
    None
}

/// The graph root from `storage.conf` texts, highest precedence first: the user's file's
/// `graphroot`, then `rootless_storage_path` of the user's or the system's file (`$HOME` and
/// `$UID` expanded); `None` means podman's default, `$XDG_DATA_HOME/containers/storage`.
/// Pure.
#[must_use]
pub fn graphroot_from_conf(
    user_conf: Option<&str>,
    system_conf: Option<&str>,
    home: &Path,
    uid: u32,
) -> Option<PathBuf> {
    let expand = |v: String| {
        PathBuf::from(
            v.replace("$HOME", &home.display().to_string())
                .replace("$UID", &uid.to_string()),
        )
    };
    user_conf
        .and_then(|t| value(t, "graphroot").or_else(|| value(t, "rootless_storage_path")))
        .or_else(|| system_conf.and_then(|t| value(t, "rootless_storage_path")))
        .map(expand)
}

/// The rootless graph root of the user: `CONFIG_HOME/containers/storage.conf`,
/// `/etc/containers/storage.conf`, else `DATA_HOME/containers/storage`.
#[must_use]
pub fn graphroot(home: &Path, config_home: &Path, data_home: &Path, uid: u32) -> PathBuf {
    let user = std::fs::read_to_string(config_home.join("containers/storage.conf")).ok();
    let system = std::fs::read_to_string("/etc/containers/storage.conf").ok();
    graphroot_from_conf(user.as_deref(), system.as_deref(), home, uid)
        .unwrap_or_else(|| data_home.join("containers/storage"))
}

/// [`graphroot`] of the user `env` describes (this process's uid): where podman's storage and
/// its storage locks are.
#[must_use]
pub fn of(env: &crate::context::HostEnv) -> PathBuf {
    graphroot(
        &env.home,
        &env.config_home,
        &env.data_home,
        crate::host::namespaces::host_uid(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_from_the_storage_table_only() {
        let conf = "[storage]\ndriver = \"overlay\" # comment\nrunroot = /run/x # c\nempty = \"\"\n[storage.options]\ndriver = \"x\"\n";
        assert_eq!(value(conf, "driver").as_deref(), Some("overlay"));
        assert_eq!(value(conf, "runroot").as_deref(), Some("/run/x"));
        assert_eq!(value(conf, "empty"), None);
        assert_eq!(value(conf, "graphroot"), None);
        assert_eq!(
            value("[storage]\ngraphroot = '/a#b'\n", "graphroot").as_deref(),
            Some("/a#b")
        );
    }

    #[test]
    fn the_graph_root_follows_storage_conf() {
        let home = Path::new("/home/u");
        assert_eq!(graphroot_from_conf(None, None, home, 1000), None);
        let sys =
            "[storage]\ndriver = \"overlay\"\nrootless_storage_path = \"$HOME/podman-$UID\"\n";
        assert_eq!(
            graphroot_from_conf(None, Some(sys), home, 1000),
            Some(PathBuf::from("/home/u/podman-1000"))
        );
        let user = "[storage]\ngraphroot = \"/data/u/storage\"\n[storage.options]\ngraphroot = \"/nope\"\n";
        assert_eq!(
            graphroot_from_conf(Some(user), Some(sys), home, 1000),
            Some(PathBuf::from("/data/u/storage"))
        );
    }
}
