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
//! needs `CAP_SYS_PTRACE` in the probe's namespace (measured: `e2e_attacks_stream_and_watch`). The host's own binary keeps its mode; the probe's `W0` line
//! checks the effect (dumpable 0) on every watch round.
//!
//! Why it must be static: a dynamically linked binary is started by the program interpreter its
//! `PT_INTERP` names, and inside the container that path is the IMAGE's — its `ld.so`, which
//! reads the image's `/etc/ld.so.preload`, an `LD_PRELOAD` in the image's environment and the
//! image's libc: image code inside agent-wait and the watch probes, able to forge their report.
//! `.cargo/config.toml` links cyclix static (static-pie); [`copy`] refuses a binary that names
//! an interpreter (`e2e_attacks_image_loader`: an image whose preload every dynamic program loads).
//!
//! One copy per binary (keyed by device, inode, size and mtime of the running executable),
//! below `$XDG_RUNTIME_DIR/cyclix/bin/` (a tmpfs, emptied at logout; P18 flags a bind from
//! below `/home`); written to a temporary file and renamed into place, so concurrent runs
//! share it safely.

use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

/// The mode of the copy: execute only, for everyone.
pub const MODE: u32 = 0o111;

/// The mode of the copy tier `gvisor`'s agent mounts: readable and executable. gVisor's kernel
/// reads an ELF file to load it and refuses to execute one it cannot read ("failed to exec
/// pid1: Permission denied", seen with Debian's runsc 0.0~20240729), so the execve-time
/// non-dumpable mark [`MODE`] buys is not to be had there: the probes' `PR_SET_DUMPABLE 0` in
/// `main` is their only guard under gVisor, and the window between execve and it stays
/// (docs/tiers.md says so). The binary holds nothing secret (it is the public program).
pub const READABLE_MODE: u32 = 0o555;

/// The name of the copy of a binary with these metadata (`cyclix-DEV-INO-SIZE-MTIMENS`). Pure.
#[must_use]
pub fn name(dev: u64, ino: u64, size: u64, mtime_ns: i128) -> String {
    format!("cyclix-{dev:x}-{ino:x}-{size}-{mtime_ns}")
}

/// The copy of the binary this process runs (`/proc/self/exe`, proc(5): the running file even
/// after an upgrade replaced or deleted its path, which a long-lived `cyclix pool keep`
/// outlives) below `runtime_dir/cyclix/bin/`, made if missing, for tier `tier`: mode [`READABLE_MODE`] for `gvisor`, whose kernel cannot
/// execute an unreadable file, [`MODE`] for the others. The two copies have their own names.
///
/// # Errors
/// As [`copy`].
pub fn copy_running_for(runtime_dir: &Path, tier: crate::tier::Tier) -> Result<PathBuf> {
    copy_running_with(
        runtime_dir,
        if tier == crate::tier::Tier::Gvisor {
            READABLE_MODE
        } else {
            MODE
        },
    )
}

fn copy_running_with(runtime_dir: &Path, mode: u32) -> Result<PathBuf> {
    let shown = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    copy_as(Path::new("/proc/self/exe"), &shown, runtime_dir, mode)
}

/// The execute-only copy of `bin` below `runtime_dir/cyclix/bin/`, made if missing.
///
/// # Errors
/// `bin` cannot be read, names a program interpreter ([`refuse_interpreter`]), or the copy
/// cannot be written.
#[cfg(test)]
pub(crate) fn copy(bin: &Path, runtime_dir: &Path) -> Result<PathBuf> {
    copy_as(bin, bin, runtime_dir, MODE)
}

/// [`copy`] of the file `bin` (read through this path), named `shown` in errors.
fn copy_as(bin: &Path, shown: &Path, runtime_dir: &Path, mode: u32) -> Result<PathBuf> {
    let m = std::fs::metadata(bin).with_context(|| format!("reading {}", shown.display()))?;
    let mtime_ns = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
    let dir = runtime_dir.join("cyclix/bin");
    let mut file = name(m.dev(), m.ino(), m.size(), mtime_ns);
    if mode != MODE {
        file.push_str("-readable");
    }
    let target = dir.join(file);
    if let Ok(t) = std::fs::metadata(&target)
        && t.size() == m.size()
        && t.mode() & 0o7777 == mode
    {
        // In use again: [`prune`] by another binary leaves it alone for a while.
        touch(&target);
        return Ok(target);
    }
    let mut src =
        std::fs::File::open(bin).with_context(|| format!("opening {}", shown.display()))?;
    let mut head = Vec::with_capacity(HEAD_BYTES);
    (&mut src)
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut head)
        .with_context(|| format!("reading {}", shown.display()))?;
    refuse_interpreter(shown, &head)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir)
        .with_context(|| format!("creating a file in {}", dir.display()))?;
    tmp.as_file_mut()
        .write_all(&head)
        .and_then(|()| std::io::copy(&mut src, tmp.as_file_mut()).map(drop))
        .with_context(|| format!("copying {} to {}", shown.display(), dir.display()))?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("making the copy in {} execute-only", dir.display()))?;
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("syncing the copy in {}", dir.display()))?;
    tmp.persist(&target)
        .with_context(|| format!("renaming the copy to {}", target.display()))?;
    prune(&dir, &target);
    Ok(target)
}

/// How much of the binary [`refuse_interpreter`] reads: the ELF header, the program headers and
/// the interpreter's path sit in the first page or two of every linker's output (bytes).
const HEAD_BYTES: usize = 64 * 1024;

/// Refuses `head` (the first bytes of `bin`) unless it is an ELF64 file whose program headers
/// name no interpreter (`PT_INTERP`, elf(5)): a static binary, which the kernel starts without
/// anything of the container's filesystem. Pure.
///
/// # Errors
/// `head` is no ELF64 file, or its program headers cannot be read within it, or it names an
/// interpreter (the error says which, and how to build cyclix static).
pub fn refuse_interpreter(bin: &Path, head: &[u8]) -> Result<()> {
    use object::read::elf::{FileHeader as _, ProgramHeader as _};
    let not_elf = |e: object::read::Error| {
        anyhow::anyhow!(
            "{} is not an ELF64 executable whose program headers cyclix can read ({e}); only a \
             static cyclix binary is mounted into the agent's container; fix: run the binary \
             `cargo build` writes",
            bin.display()
        )
    };
    let header = object::elf::FileHeader64::<object::Endianness>::parse(head).map_err(not_elf)?;
    let endian = header.endian().map_err(not_elf)?;
    for ph in header.program_headers(endian, head).map_err(not_elf)? {
        if ph.p_type(endian) == object::elf::PT_INTERP {
            let interp = ph
                .interpreter(endian, head)
                .ok()
                .flatten()
                .map_or_else(|| "?".into(), String::from_utf8_lossy);
            anyhow::bail!(
                "{} is linked dynamically (its program interpreter is {interp}); inside the agent's \
                 container the image's own {interp} would start it, with the image's \
                 /etc/ld.so.preload, LD_PRELOAD and libc, so cyclix refuses to mount it; fix: \
                 build cyclix with the project's .cargo/config.toml (static: `cargo build`, \
                 `cargo build --release`) and without a RUSTFLAGS variable, which replaces that \
                 file's `-C target-feature=+crt-static`",
                bin.display()
            );
        }
    }
    Ok(())
}

/// How long a copy no process made or used stays before [`prune`] removes it (s): two binaries
/// can be alive at once (a keeper started before an upgrade, runs of the new binary), and each
/// uses its copy between making it and its container's start, seconds later.
pub const UNUSED_FOR_S: u64 = 600;

/// Sets `path`'s modification time to now (the copy is execute-only: no handle can be opened;
/// `utimensat(2)` needs only ownership). Best effort.
fn touch(path: &Path) {
    use nix::sys::stat::{UtimensatFlags, utimensat};
    use nix::sys::time::TimeSpec;
    let now = TimeSpec::UTIME_NOW;
    let _ = utimensat(
        nix::fcntl::AT_FDCWD,
        path,
        &now,
        &now,
        UtimensatFlags::FollowSymlink,
    );
}

/// Removes the copies of other binaries in `dir` that no process made or used in the last
/// [`UNUSED_FOR_S`], so copies do not pile up per build (a debug build is ~130 MiB of tmpfs).
/// A run still using an old copy keeps it: its container holds the bind-mounted inode. Best
/// effort.
fn prune(dir: &Path, keep: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now();
    for p in rd.filter_map(Result::ok).map(|e| e.path()) {
        let ours = p
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("cyclix-"));
        let unused = std::fs::metadata(&p)
            .and_then(|m| m.modified())
            .is_ok_and(|t| {
                now.duration_since(t)
                    .is_ok_and(|d| d.as_secs() >= UNUSED_FOR_S)
            });
        if ours && p != keep && unused {
            let _ = std::fs::remove_file(&p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 (little endian) with one `PT_LOAD`, and a `PT_INTERP` naming `interp`.
    fn elf(interp: Option<&str>) -> Vec<u8> {
        let phnum: u16 = if interp.is_some() { 2 } else { 1 };
        let mut b = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0];
        b.resize(16, 0);
        b.extend(3u16.to_le_bytes()); // ET_DYN
        b.extend(62u16.to_le_bytes()); // EM_X86_64
        b.extend(1u32.to_le_bytes());
        b.extend(0u64.to_le_bytes()); // e_entry
        b.extend(64u64.to_le_bytes()); // e_phoff
        b.extend(0u64.to_le_bytes()); // e_shoff
        b.extend(0u32.to_le_bytes());
        for v in [64u16, 56, phnum, 64, 0, 0] {
            b.extend(v.to_le_bytes());
        }
        let after = 64 + 56 * u64::from(phnum);
        let mut ph = |p_type: u32, off: u64, size: u64| {
            b.extend(p_type.to_le_bytes());
            b.extend(4u32.to_le_bytes());
            for v in [off, off, off, size, size, 8] {
                b.extend(v.to_le_bytes());
            }
        };
        ph(1, 0, after);
        if let Some(i) = interp {
            ph(3, after, i.len() as u64 + 1);
            b.extend(i.as_bytes());
            b.push(0);
        }
        b
    }

    #[test]
    fn a_binary_that_names_an_interpreter_is_refused_and_a_static_one_is_not() {
        let p = Path::new("/x/cyclix");
        refuse_interpreter(p, &elf(None)).expect("static");
        let e = refuse_interpreter(p, &elf(Some("/lib64/ld-linux-x86-64.so.2")))
            .expect_err("dynamic")
            .to_string();
        assert!(
            e.contains("/x/cyclix is linked dynamically")
                && e.contains("/lib64/ld-linux-x86-64.so.2")
                && e.contains("RUSTFLAGS"),
            "{e}"
        );
        for junk in [&b"#!/bin/sh\n"[..], b"\x7fELF not really", b""] {
            let e = refuse_interpreter(p, junk)
                .expect_err("no ELF64")
                .to_string();
            assert!(e.contains("is not an ELF64 executable"), "{e}");
        }
        let d = tempfile::tempdir().expect("tmp");
        let bin = d.path().join("bin");
        std::fs::write(&bin, elf(Some("/lib/ld.so"))).expect("write");
        assert!(copy(&bin, d.path()).is_err());
        assert!(!d.path().join("cyclix/bin").exists(), "nothing half-made");
    }

    /// The build's own output: this test binary is linked like cyclix (`.cargo/config.toml`),
    /// so it must name no interpreter; the host's `/bin/sh` (dynamic on Debian) is the positive
    /// control that the check sees one.
    #[test]
    fn this_build_is_static_and_the_hosts_shell_is_not() {
        let head = |p: &Path| {
            let mut h = Vec::new();
            std::fs::File::open(p)
                .expect("open")
                .take(HEAD_BYTES as u64)
                .read_to_end(&mut h)
                .expect("read");
            h
        };
        let me = std::env::current_exe().expect("exe");
        refuse_interpreter(&me, &head(&me)).expect("this build is static");
        let sh = Path::new("/bin/sh");
        let e = refuse_interpreter(sh, &head(sh)).expect_err("/bin/sh is dynamic");
        assert!(e.to_string().contains("linked dynamically"), "{e}");
    }

    #[test]
    fn the_copy_is_execute_only_and_made_once() {
        let d = tempfile::tempdir().expect("tmp");
        let bin = d.path().join("bin");
        std::fs::write(&bin, elf(None)).expect("write");
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
        std::fs::write(dir.join("cyclix-5-6-7-8"), b"recent").expect("a copy in use");
        let hour_ago = nix::sys::time::TimeSpec::new(
            i64::try_from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .expect("clock")
                    .as_secs(),
            )
            .expect("secs")
                - 3600,
            0,
        );
        nix::sys::stat::utimensat(
            nix::fcntl::AT_FDCWD,
            &dir.join("cyclix-1-2-3-4"),
            &hour_ago,
            &hour_ago,
            nix::sys::stat::UtimensatFlags::FollowSymlink,
        )
        .expect("age the old copy");
        std::fs::write(dir.join(".tmpXYZ"), b"another cyclix copying").expect("tmp");
        let bin = d.path().join("bin");
        std::fs::write(&bin, [elf(None), b"new".to_vec()].concat()).expect("write");
        let new = copy(&bin, d.path()).expect("copy");
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        left.sort();
        // The old one goes; one another binary made or used a moment ago stays.
        let mut want = vec![dir.join(".tmpXYZ"), new, dir.join("cyclix-5-6-7-8")];
        want.sort();
        assert_eq!(left, want);
    }
}
