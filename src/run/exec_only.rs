//! The execute-only copy of the cyclix binary that the agent container mounts (issue 13 item 3:
//! the in-sandbox watch probes cannot be traced or read by the agent).
//!
//! Why a copy, mode `0111`: the watch probes run as the agent's uid (they check what the agent
//! can do), so only the kernel's dumpable flag stands between them and the agent's `ptrace`,
//! `/proc/PID/mem`, `/proc/PID/environ` and `/proc/PID/fd` (ptrace(2), "Ptrace access mode
//! checking"). `prctl(PR_SET_DUMPABLE, 0)` in `main` comes too late: between execve and that
//! call the process is dumpable, and a tracer that attached in that window stays attached. When
//! the executed file is not readable by the process, execve itself marks it non-dumpable
//! (`would_dump` → `BINPRM_FLAGS_ENFORCE_NONDUMP` in fs/exec.c), under the same
//! `cred_guard_mutex` that `PTRACE_ATTACH` takes: there is no window. Inside the container the
//! file's owner (the host user) is the agent's uid and the agent has no capabilities
//! (`DropCapability=all`), so mode `0111` makes it unreadable to every process there; the bind
//! mount is read-only, so the agent cannot `chmod` it back (`EROFS`). An ELF binary needs no
//! read permission to be executed. Root of a nested user namespace the agent makes (`unshare
//! -Ur` works as a preset's uid under keep-id) CAN read the file, since it maps the owner and
//! holds `CAP_DAC_OVERRIDE` there; that reveals only the public binary: the probe `podman exec`
//! starts is marked non-dumpable with ITS credentials, and reading it from the nested namespace
//! needs `CAP_SYS_PTRACE` in the probe's namespace (measured: `e2e_attacks14`). The host's own binary keeps its mode; the probe's `W0` line
//! checks the effect (dumpable 0) on every watch round.
//!
//! One copy per binary (keyed by device, inode, size and mtime of the running executable),
//! below `$XDG_RUNTIME_DIR/cyclix/bin/` (a tmpfs, emptied at logout; P18 flags a bind from
//! below `/home`); written to a temporary file and renamed into place, so concurrent runs
//! share it safely.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

/// The mode of the copy: execute only, for everyone.
pub const MODE: u32 = 0o111;

/// The name of the copy of a binary with these metadata (`cyclix-DEV-INO-SIZE-MTIMENS`). Pure.
#[must_use]
pub fn name(dev: u64, ino: u64, size: u64, mtime_ns: i128) -> String {
    format!("cyclix-{dev:x}-{ino:x}-{size}-{mtime_ns}")
}

/// The execute-only copy of `bin` below `runtime_dir/cyclix/bin/`, made if missing.
///
/// # Errors
/// `bin` cannot be read, or the copy cannot be written.
pub fn copy(bin: &Path, runtime_dir: &Path) -> Result<PathBuf> {
    let m = std::fs::metadata(bin).with_context(|| format!("reading {}", bin.display()))?;
    let mtime_ns = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
    let dir = runtime_dir.join("cyclix/bin");
    let target = dir.join(name(m.dev(), m.ino(), m.size(), mtime_ns));
    if let Ok(t) = std::fs::metadata(&target)
        && t.size() == m.size()
        && t.mode() & 0o7777 == MODE
    {
        return Ok(target);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    let mut src = std::fs::File::open(bin).with_context(|| format!("opening {}", bin.display()))?;
    std::io::copy(&mut src, tmp.as_file_mut())
        .with_context(|| format!("copying {} to {}", bin.display(), dir.display()))?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(MODE))
        .with_context(|| format!("making the copy in {} execute-only", dir.display()))?;
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("syncing the copy in {}", dir.display()))?;
    tmp.persist(&target)
        .with_context(|| format!("renaming the copy to {}", target.display()))?;
    prune(&dir, &target);
    Ok(target)
}

/// Removes the copies of other (older) binaries in `dir`, so one copy is kept, not one per
/// build (a debug build is ~130 MiB of tmpfs). A run still using an old copy keeps it: its
/// container holds the bind-mounted inode. Best effort.
fn prune(dir: &Path, keep: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for p in rd.filter_map(Result::ok).map(|e| e.path()) {
        let ours = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("cyclix-"));
        if ours && p != keep {
            let _ = std::fs::remove_file(&p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_execute_only_and_made_once() {
        let d = tempfile::tempdir().expect("tmp");
        let bin = d.path().join("bin");
        std::fs::write(&bin, b"\x7fELF not really").expect("write");
        let a = copy(&bin, d.path()).expect("copy");
        assert_eq!(std::fs::metadata(&a).expect("meta").mode() & 0o7777, MODE);
        assert!(a.starts_with(d.path().join("cyclix/bin")));
        let b = copy(&bin, d.path()).expect("again");
        assert_eq!(a, b);
        assert_eq!(
            std::fs::read_dir(d.path().join("cyclix/bin"))
                .expect("dir")
                .count(),
            1,
            "no second copy, no temporary file left"
        );
    }

    #[test]
    fn a_new_binary_replaces_the_copy_of_the_old_one() {
        let d = tempfile::tempdir().expect("tmp");
        let dir = d.path().join("cyclix/bin");
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("cyclix-1-2-3-4"), b"old").expect("old copy");
        std::fs::write(dir.join(".tmpXYZ"), b"another cyclix copying").expect("tmp");
        let bin = d.path().join("bin");
        std::fs::write(&bin, b"\x7fELF new").expect("write");
        let new = copy(&bin, d.path()).expect("copy");
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        left.sort();
        assert_eq!(left, [dir.join(".tmpXYZ"), new]);
    }
}
