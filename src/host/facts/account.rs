//! Facts about the user account: uid and name, `$XDG_RUNTIME_DIR`, subordinate ids and the
//! id mappers, and the user manager's cgroup controllers.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt as _};
use std::path::PathBuf;

use super::*;
use crate::process;

/// `$XDG_RUNTIME_DIR`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeDirFacts {
    /// The value as set; `None` when unset.
    pub value: Option<String>,
    /// Whether it is an existing directory.
    pub is_dir: bool,
    /// Its owner's uid, when it exists.
    pub owner: Option<u32>,
    /// Its permission bits (e.g. `0o700`), when it exists.
    pub mode: Option<u32>,
}

/// One line of `/etc/subuid` or `/etc/subgid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubIdEntry {
    /// User name or numeric uid as written.
    pub owner: String,
    /// First id of the range.
    pub start: u64,
    /// Number of ids.
    pub count: u64,
}

/// A sub-id file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubIds {
    /// Its path.
    pub file: String,
    /// Its well-formed lines, or why it could not be read.
    pub entries: Fact<Vec<SubIdEntry>>,
}

/// `newuidmap` / `newgidmap`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdMapper {
    /// `newuidmap` or `newgidmap`.
    pub name: String,
    /// Where it was found on `$PATH`.
    pub path: Option<String>,
    /// Owned by root with the setuid bit (after following links).
    pub setuid_root: bool,
    /// `getcap PATH` output when it is not setuid root (e.g. `cap_setuid=ep`), or why it
    /// could not be read; `None` when setuid root or missing.
    pub caps: Option<Fact<String>>,
}

/// cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupFacts {
    /// File system type mounted at `/sys/fs/cgroup` (`cgroup2` = unified v2).
    pub fs_type: Option<String>,
    /// The user manager's `cgroup.controllers` path.
    pub file: String,
    /// The controllers listed there, or why it could not be read.
    pub delegated: Fact<Vec<String>>,
}

pub(super) fn read_uid() -> Option<u32> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|u| u.parse().ok())
}

pub(super) fn user_name(uid: u32) -> Option<String> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let name = f.next()?;
        let _ = f.next()?;
        (f.next()?.parse::<u32>().ok()? == uid).then(|| name.to_string())
    })
}

pub(super) fn runtime_dir_facts(value: Option<&str>) -> RuntimeDirFacts {
    let meta = value.and_then(|v| fs::metadata(v).ok());
    RuntimeDirFacts {
        value: value.map(str::to_string),
        is_dir: meta.as_ref().is_some_and(fs::Metadata::is_dir),
        owner: meta.as_ref().map(MetadataExt::uid),
        mode: meta.as_ref().map(|m| m.permissions().mode() & 0o7777),
    }
}

/// Parses a sub-id file: `OWNER:START:COUNT` lines; comments, blank and malformed lines are
/// skipped (as shadow-utils does).
#[must_use]
pub fn parse_subids(text: &str) -> Vec<SubIdEntry> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                return None;
            }
            let mut f = l.split(':');
            let owner = f.next()?.to_string();
            let start = f.next()?.trim().parse().ok()?;
            let count = f.next()?.trim().parse().ok()?;
            (f.next().is_none() && !owner.is_empty()).then_some(SubIdEntry {
                owner,
                start,
                count,
            })
        })
        .collect()
}

pub(super) fn read_subids(file: &str) -> SubIds {
    SubIds {
        file: file.to_string(),
        entries: fs::read_to_string(file)
            .map(|t| parse_subids(&t))
            .map_err(|e| format!("reading {file}: {e}")),
    }
}

pub(super) fn id_mapper(name: &str, path: &[PathBuf]) -> IdMapper {
    let found = which(name, path);
    let meta = found.as_ref().and_then(|p| fs::metadata(p).ok());
    let setuid_root = meta
        .as_ref()
        .is_some_and(|m| m.uid() == 0 && m.permissions().mode() & 0o4000 != 0);
    let caps = match (&found, setuid_root) {
        (Some(p), false) => Some(read_caps(p, path)),
        _ => None,
    };
    IdMapper {
        name: name.to_string(),
        path: found,
        setuid_root,
        caps,
    }
}

/// File capabilities through `getcap` (std has no xattr API and cyclix forbids `unsafe`).
pub(super) fn read_caps(file: &str, path: &[PathBuf]) -> Fact<String> {
    let mut dirs = path.to_vec();
    dirs.extend(["/usr/sbin", "/sbin"].iter().map(PathBuf::from));
    let getcap = which("getcap", &dirs).ok_or_else(|| {
        "getcap is not installed, so file capabilities cannot be read".to_string()
    })?;
    let out =
        process::run(&getcap, &[file], None, QUICK_DEADLINE, "").map_err(|e| e.to_string())?;
    // `FILE cap_setuid=ep` (libcap ≥ 2.4x) or `FILE = cap_setuid+ep` (older); empty: none.
    Ok(out
        .stdout
        .trim()
        .strip_prefix(file)
        .unwrap_or(out.stdout.trim())
        .trim()
        .trim_start_matches('=')
        .trim()
        .to_string())
}

/// The cgroup facts of `uid`'s user manager (also read by `cyclix run` before a run with
/// resource limits).
#[must_use]
pub fn cgroup_facts(uid: u32) -> CgroupFacts {
    let fs_type = fs::read_to_string("/proc/self/mounts").ok().and_then(|m| {
        m.lines().find_map(|l| {
            let mut f = l.split_whitespace();
            let _src = f.next()?;
            (f.next()? == "/sys/fs/cgroup").then(|| f.next().map(str::to_string))?
        })
    });
    let file =
        format!("/sys/fs/cgroup/user.slice/user-{uid}.slice/user@{uid}.service/cgroup.controllers");
    let delegated = fs::read_to_string(&file)
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .map_err(|e| format!("reading {file}: {e}"));
    CgroupFacts {
        fs_type,
        file,
        delegated,
    }
}
