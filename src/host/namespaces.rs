//! The host's own namespace identities (`readlink /proc/self/ns/*`), recorded before a run so
//! the probes can show the sandbox's namespaces differ (security-cases P5, P20).

/// Namespace kinds compared by the probes.
pub const KINDS: [&str; 7] = ["pid", "net", "mnt", "ipc", "uts", "cgroup", "user"];

/// `(kind, link target)` pairs such as `("net", "net:[4026531840]")`; kinds that cannot be read
/// are left out (the probe then has nothing to compare and fails that comparison).
#[must_use]
pub fn host_namespaces() -> Vec<(String, String)> {
    KINDS
        .iter()
        .filter_map(|k| {
            std::fs::read_link(format!("/proc/self/ns/{k}"))
                .ok()
                .map(|t| ((*k).to_string(), t.to_string_lossy().into_owned()))
        })
        .collect()
}

/// The host's LSM as the probe context names it: `apparmor` when `AppArmor` is enabled,
/// `selinux` when `SELinux` is mounted, else `None` (read from sysfs).
#[must_use]
pub fn host_lsm() -> Option<String> {
    let apparmor = std::fs::read_to_string("/sys/module/apparmor/parameters/enabled")
        .is_ok_and(|v| v.trim() == "Y");
    if apparmor {
        Some("apparmor".into())
    } else if std::path::Path::new("/sys/fs/selinux/enforce").exists() {
        Some("selinux".into())
    } else {
        None
    }
}

/// The invoking user's uid (owner of `/proc/self`).
#[must_use]
pub fn host_uid() -> u32 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_namespaces() {
        let ns = host_namespaces();
        let net = ns
            .iter()
            .find(|(k, _)| k == "net")
            .expect("net namespace readable");
        assert!(net.1.starts_with("net:["), "{net:?}");
    }
}
