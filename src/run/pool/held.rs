//! A pooled environment's agent container (issue 33): made and started by the fill, held in
//! `cyclix agent-wait --claim` (blocked in `open(2)` of the control directory's claim FIFO, no
//! clock running) with nothing of a run in it: its work tree is an empty directory bound at
//! `/work`, its task file is empty, its variables come at the go (`run::handover`), the canary
//! and the credentials never reach it. The claiming run fills the work tree and the task in
//! place (the binds keep their inodes), checks the container against what the fill recorded
//! here, and wakes it (`run::claim_fifo::wake`); the whole probe suite then runs in it as in any run.
//!
//! What the claim compares ([`HeldAgent`]): exactly two processes (podman's init and
//! agent-wait; one running another binary than the claiming cyclix's is replaced, not
//! refused), agent-wait still blocked in `openat`, the container's mount table
//! (`/proc/PID/mountinfo`) byte for byte, every entry of every place its file system can be
//! written (its writable `tmpfs` mounts but the pod's `/dev/shm`, read through
//! `/proc/PID/root`, and its overlay upper layer), agent-wait's command line and environment
//! and the files podman binds in from its own directories by content, and the host's side (the
//! empty work tree and task, the claim FIFO): a process added, a mount changed or a file
//! written while it idled refuses the environment. The fill's own first look must hold only
//! what podman makes ([`first_look_wrong`]). The claim FIFO itself is `run::claim_fifo`.

use std::path::Path;

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

/// What the fill recorded of the held agent container (in the pool's state file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldAgent {
    /// Its container (`cyclix-ENV-agent`).
    pub container: String,
    /// SHA-256 of agent-wait's `/proc/PID/mountinfo` once it was held.
    pub mounts: String,
    /// Every entry of its writable places ([`listing`]), one line each, sorted.
    pub files: Vec<String>,
    /// Its overlay upper layer on the host (`podman inspect`'s `GraphDriver.Data.UpperDir`).
    pub upper: String,
    /// `DEV:INO` of the claim FIFO agent-wait waits on (a FIFO put in its place would be
    /// woken instead: attack review; one made after the fill's was removed may get its inode
    /// number back, which this does not see: the run then fails in its probe phase, waiting
    /// for a report agent-wait never writes).
    #[serde(default)]
    pub claim: String,
}

/// The names podman's init runs under in a container with `RunInit=true` (catatonit, mounted
/// as `/run/podman-init`).
pub const INIT_PROCESSES: &[&str] = &["catatonit", "podman-init"];

/// agent-wait's name (`comm` of `/cyclix/bin/cyclix`).
pub const AGENT_WAIT_PROCESS: &str = "cyclix";

/// At most this many entries in the listing of a held container's writable places: more is
/// refused (nothing of the fill puts more than a few there).
pub const MAX_ENTRIES: usize = 4096;

/// The mount points of `mountinfo` (proc(5)'s format) a process of the container could write
/// files into and the fill could list: every `tmpfs` mounted read-write, outside `/proc` and
/// `/sys` (their tmpfs masks are read-only or empty), but `/dev/shm`: the pod's, shared with
/// its pooled services (one IPC namespace: a database's segments come and go there). Pure.
#[must_use]
pub fn writable_tmpfs(mountinfo: &str) -> Vec<String> {
    let mut out: Vec<String> = mountinfo
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split(' ').collect();
            let (point, opts) = (*f.get(4)?, *f.get(5)?);
            let fstype = right.split(' ').next()?;
            let rw = opts.split(',').any(|o| o == "rw");
            let masked = ["/proc", "/sys"]
                .iter()
                .any(|m| point == *m || point.starts_with(&format!("{m}/")))
                || point == "/dev/shm";
            (fstype == "tmpfs" && rw && !masked).then(|| unescape(point))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A mountinfo path with its octal escapes (`\040` for a space) decoded. Pure.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line per entry under `root` (not following symlinks, not leaving `root`'s file
/// system: a mount point below it is left out, its file system is another place):
/// `TAG/REL TYPE MODE UID:GID SIZE MTIME_NS`, sorted; `tag` prefixes the relative paths. A
/// directory that cannot be read is an error (the look fails closed).
///
/// # Errors
/// An entry cannot be read, or there are more than [`MAX_ENTRIES`].
pub fn listing(root: &Path, tag: &str, out: &mut Vec<String>) -> Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let top =
        std::fs::symlink_metadata(root).with_context(|| format!("reading {}", root.display()))?;
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let entries =
            std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))?;
        for e in entries {
            let e = e.with_context(|| format!("listing {}", dir.display()))?;
            let m = std::fs::symlink_metadata(e.path())
                .with_context(|| format!("reading {}", e.path().display()))?;
            if m.dev() != top.dev() {
                continue;
            }
            let name = format!("{rel}/{}", e.file_name().to_string_lossy());
            let kind = match m.file_type() {
                t if t.is_dir() => "d",
                t if t.is_symlink() => "l",
                t if t.is_file() => "f",
                _ => "o",
            };
            out.push(format!(
                "{tag}{name} {kind} {:o} {}:{} {} {}",
                m.mode(),
                m.uid(),
                m.gid(),
                if kind == "d" { 0 } else { m.size() },
                m.mtime() * 1_000_000_000 + m.mtime_nsec()
            ));
            if out.len() > MAX_ENTRIES {
                bail!("more than {MAX_ENTRIES} entries under {}", root.display());
            }
            if kind == "d" {
                stack.push((e.path(), name));
            }
        }
    }
    Ok(())
}

/// The pid among `procs` (pid, `comm`) of the container whose init is `init` that is
/// agent-wait, when they are exactly podman's init and agent-wait; else why not. Pure.
///
/// # Errors
/// Another process, a missing one, or more.
pub fn agent_wait_pid(init: u32, procs: &[(u32, String)]) -> std::result::Result<u32, String> {
    let all = || {
        procs
            .iter()
            .map(|(p, c)| format!("{c} (pid {p})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let init_ok = procs
        .iter()
        .any(|(p, c)| *p == init && INIT_PROCESSES.contains(&c.as_str()));
    let others: Vec<&(u32, String)> = procs.iter().filter(|(p, _)| *p != init).collect();
    match others.as_slice() {
        [(pid, comm)] if init_ok && comm == AGENT_WAIT_PROCESS => Ok(*pid),
        _ => Err(format!(
            "runs {}: the fill left exactly its init and agent-wait",
            all()
        )),
    }
}

/// What one look at a held agent container sees: agent-wait's pid, its mount table's digest,
/// the listing of its writable places ([`listing`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// agent-wait's host pid.
    pub pid: u32,
    /// SHA-256 of its `/proc/PID/mountinfo`.
    pub mounts: String,
    /// The listing of its writable tmpfs mounts and of the upper layer `upper`.
    pub files: Vec<String>,
}

/// Looks at the held container whose init is host pid `init` and whose processes are `procs`
/// (`run::procs::container_processes`), with its overlay upper layer at `upper`.
///
/// # Errors
/// The processes are not exactly init and agent-wait, or a file of `/proc` or the upper
/// layer cannot be read.
pub fn look(init: u32, procs: &[(u32, String)], upper: &Path) -> Result<Seen> {
    let pid = agent_wait_pid(init, procs).map_err(anyhow::Error::msg)?;
    let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))
        .with_context(|| format!("reading the mount table of agent-wait (pid {pid})"))?;
    let mut files = Vec::new();
    let root = format!("/proc/{pid}/root");
    for point in writable_tmpfs(&mountinfo) {
        let at = Path::new(&root).join(point.trim_start_matches('/'));
        // A file bound from a tmpfs (podman's `/dev/null`, ...) is no place to write files.
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
            listing(&at, &point, &mut files)?;
        }
    }
    listing(upper, "upper:", &mut files)?;
    // What podman bound read-only from its own directories (the host user can edit them on
    // the host: attack review) and agent-wait's own command line and environment, by content.
    for (tag, path) in [
        ("environ", format!("/proc/{pid}/environ")),
        ("cmdline", format!("/proc/{pid}/cmdline")),
    ]
    .into_iter()
    .chain(BOUND_FILES.iter().map(|f| (*f, format!("{root}{f}"))))
    {
        let bytes = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
        files.push(format!("content:{tag} {}", sha256(&bytes)));
    }
    files.sort();
    Ok(Seen {
        pid,
        mounts: sha256(mountinfo.as_bytes()),
        files,
    })
}

/// The files podman binds read-only into a container from its own directories, compared by
/// content ([`look`]).
pub const BOUND_FILES: &[&str] = &[
    "/etc/hostname",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/run/.containerenv",
];

/// SHA-256 of `bytes`, lower-case hex.
fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("{:x}", sha2::Sha256::digest(bytes))
}

/// What in the fill's first look `files` ([`look`]) is not what podman makes for a container
/// that runs nothing but agent-wait (attack review: a host process that wrote into it between
/// its start and the look would be recorded as filled): anything in its `/tmp`, `/var/tmp`
/// and `/dev/shm`; in `/run` anything but podman's `.containerenv` (empty), `lock/`,
/// `lock/subsys/` and `podman-init`; in `/dev` anything but podman's device nodes, links and
/// mount points; in another writable tmpfs anything at all; in its upper layer anything but
/// directories, symlinks, empty files (the binds' mount points) and podman's `/etc/passwd`
/// and `/etc/group`. Pure.
#[must_use]
pub fn first_look_wrong(files: &[String]) -> Vec<String> {
    const RUN: &[&str] = &[
        "/run/.containerenv",
        "/run/lock",
        "/run/lock/subsys",
        "/run/podman-init",
    ];
    const DEV: &[&str] = &[
        "core", "fd", "full", "mqueue", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin",
        "stdout", "tty", "urandom", "zero",
    ];
    files
        .iter()
        .filter(|l| {
            let mut w = l.split(' ');
            let (path, kind, size) = (
                w.next().unwrap_or_default(),
                w.next().unwrap_or_default(),
                w.nth(2).unwrap_or_default(),
            );
            let ok = if path.starts_with("content:") {
                true
            } else if let Some(p) = path.strip_prefix("upper:") {
                matches!(kind, "d" | "l")
                    || (kind == "f" && (size == "0" || ["/etc/passwd", "/etc/group"].contains(&p)))
            } else if let Some(name) = path.strip_prefix("/dev/") {
                DEV.contains(&name)
            } else if path.starts_with("/run/") {
                RUN.contains(&path)
                    && (path != "/run/.containerenv" || (kind == "f" && size == "0"))
            } else {
                false
            };
            !ok
        })
        .map(|l| l.split(' ').next().unwrap_or_default().to_string())
        .collect()
}

/// The processes (pid, `comm`) of the container whose first process is host pid `init`
/// ([`crate::run::procs::container_processes`], by its PID namespace and cgroup).
///
/// # Errors
/// `/proc` or the cgroup tree cannot be read (the container does not run).
pub fn processes(init: u32) -> Result<Vec<(u32, String)>> {
    let link = std::fs::read_link(format!("/proc/{init}/ns/pid"))
        .with_context(|| format!("reading the PID namespace of pid {init}"))?;
    let link = link.to_string_lossy();
    let pidns = link
        .strip_prefix("pid:[")
        .and_then(|l| l.strip_suffix(']'))
        .with_context(|| format!("not a PID namespace link: {link}"))?;
    let proc_root = Path::new("/proc");
    let scan = crate::run::procs::namespaces(proc_root).context("listing /proc")?;
    crate::run::procs::container_processes(
        proc_root,
        Path::new("/sys/fs/cgroup"),
        init,
        pidns,
        &scan,
    )
    .with_context(|| format!("reading the processes of the container of pid {init}"))
}

/// Whether agent-wait (host pid `pid`) is blocked in `openat(2)`, i.e. still waiting for its
/// claim (`/proc/PID/syscall`'s first field).
///
/// # Errors
/// The file cannot be read.
pub fn blocked_in_open(pid: u32) -> Result<bool> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/syscall"))
        .with_context(|| format!("reading /proc/{pid}/syscall"))?;
    Ok(s.split(' ').next() == Some(&libc::SYS_openat.to_string()))
}

/// What differs between the fill's record `rec` and a look `now` (none: empty). Pure.
#[must_use]
pub fn wrong(rec: &HeldAgent, now: &Seen) -> Vec<String> {
    let mut out = Vec::new();
    if rec.mounts != now.mounts {
        out.push(format!(
            "the agent container {}'s mounts changed since the fill",
            rec.container
        ));
    }
    let added: Vec<&String> = now
        .files
        .iter()
        .filter(|l| !rec.files.contains(l))
        .collect();
    let gone: Vec<&String> = rec
        .files
        .iter()
        .filter(|l| !now.files.contains(l))
        .collect();
    if !added.is_empty() || !gone.is_empty() {
        let path = |l: &&String| l.split(' ').next().unwrap_or_default().to_string();
        let mut paths: Vec<String> = added.iter().chain(&gone).map(path).collect();
        paths.sort();
        paths.dedup();
        out.push(format!(
            "files of the agent container {} were written since the fill: {}",
            rec.container,
            paths.join(", ")
        ));
    }
    out
}

/// `DEV:INO` of `path` (not following a symlink).
///
/// # Errors
/// It cannot be read.
pub fn dev_ino(path: &Path) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::symlink_metadata(path).map(|m| format!("{}:{}", m.dev(), m.ino()))
}

/// What is wrong on the host's side of a held container of run dir `run_dir` and work tree
/// `worktree`: the work tree must be an empty directory, the task file an empty regular file
/// with one name, the control directory hold nothing but the claim FIFO, that FIFO the one
/// the fill made (`claim`: its `DEV:INO`; empty: not compared). Empty when nothing is.
#[must_use]
pub fn host_side_wrong(run_dir: &Path, worktree: &Path, claim: &str) -> Vec<String> {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    let mut out = Vec::new();
    match std::fs::symlink_metadata(worktree) {
        Ok(m) if m.is_dir() => {
            if std::fs::read_dir(worktree).map_or(true, |mut d| d.next().is_some()) {
                out.push(format!("the work tree {} is not empty", worktree.display()));
            }
        }
        _ => out.push(format!(
            "the work tree {} is not the empty directory the fill made",
            worktree.display()
        )),
    }
    let task = run_dir.join(crate::render::plan::TASK_FILE);
    match std::fs::symlink_metadata(&task) {
        Ok(m) if m.is_file() && m.len() == 0 && m.nlink() == 1 => {}
        _ => out.push(format!(
            "the task file {} is not the fill's empty file",
            task.display()
        )),
    }
    let ctl = run_dir.join(crate::render::plan::CTL_DIR);
    let names: Vec<(String, bool)> = std::fs::read_dir(&ctl)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| {
                    let fifo = e.file_type().is_ok_and(|t| t.is_fifo());
                    (e.file_name().to_string_lossy().into_owned(), fifo)
                })
                .collect()
        })
        .unwrap_or_default();
    let fifo = ctl.join(crate::render::plan::CLAIM_FILE);
    if !claim.is_empty() && dev_ino(&fifo).ok().as_deref() != Some(claim) {
        out.push(format!(
            "the claim FIFO {} is not the one the fill made",
            fifo.display()
        ));
    }
    if names != [(crate::render::plan::CLAIM_FILE.to_string(), true)] {
        out.push(format!(
            "the control directory {} holds {:?}, the fill left only the claim FIFO",
            ctl.display(),
            names.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()
        ));
    }
    out
}

#[cfg(test)]
mod tests;
