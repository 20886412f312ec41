//! The effectful side of the probe suite: each `pN`/`nN` function observes (reads `/proc`,
//! calls syscalls with bad arguments, connects with deadlines, talks HTTP/1.1 to the proxy,
//! attempts mounts and writes) and hands the observation to the pure [`super::verdict`].
//!
//! Nothing here changes state outside the sandbox's own scratch space: writes are made under
//! `/tmp` or the project and removed at once; kernel knobs are only *opened* for writing,
//! never written; mounts that would succeed go to a fresh directory under `/tmp`.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs as _, UdpSocket};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::Path;
use std::time::{Duration, Instant};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::socket::{AddressFamily, SockFlag, SockProtocol, SockType, socket};
use nix::sys::stat::{Mode, SFlag, mknod};
use sha2::{Digest as _, Sha256};

use super::Context;
use super::sys::{self, TryCall};
use super::verdict::dns::Dns;
use super::verdict::filesystem::Mount;
use super::verdict::kernel::Masked;
use super::verdict::proxy::Reply;
use super::verdict::{Attempt, Judged};

mod v {
    pub use crate::probe::verdict::{
        credentials::*, dns::*, escape::*, filesystem::*, kernel::*, network::*, privilege::*,
        processes::*, proxy::*, sockets::*, *,
    };
}

/// Deadline of one network attempt (below the probe's 2 s).
const NET_TIMEOUT: Duration = Duration::from_secs(1);

fn io_attempt<T>(r: std::io::Result<T>) -> Attempt {
    match r {
        Ok(_) => Attempt::Ok,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) =>
        {
            Attempt::Timeout
        }
        Err(e) => e
            .raw_os_error()
            .map_or_else(|| Attempt::Missing(e.to_string()), Attempt::Errno),
    }
}

#[allow(clippy::needless_pass_by_value)] // takes the call's result as returned
fn nix_attempt<T>(r: nix::Result<T>) -> Attempt {
    match r {
        Ok(_) => Attempt::Ok,
        Err(e) => Attempt::Errno(e as i32),
    }
}

fn unique(tag: &str) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("probe-{tag}-{}-{n:x}", std::process::id())
}

fn status_fields(path: &str) -> BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Parses `/proc/self/mountinfo` (octal escapes like `\040` decoded).
#[must_use]
pub fn mountinfo() -> Vec<Mount> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(parse_mountinfo_line)
        .collect()
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = std::str::from_utf8(b.get(i + 1..i + 4).unwrap_or(&[]))
            .ok()
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        if let (b'\\', Some(n)) = (b[i], octal) {
            out.push(n);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One mountinfo line → [`Mount`].
#[must_use]
pub fn parse_mountinfo_line(l: &str) -> Option<Mount> {
    let (left, right) = l.split_once(" - ")?;
    let f: Vec<&str> = left.split(' ').collect();
    if f.len() < 6 {
        return None;
    }
    Some(Mount {
        root: unescape(f[3]),
        point: unescape(f[4]),
        opts: f[5].split(',').map(str::to_string).collect(),
        fstype: right.split(' ').next().unwrap_or("").to_string(),
    })
}

fn ns_inode(name: &str) -> Option<u64> {
    let l = std::fs::read_link(format!("/proc/self/ns/{name}")).ok()?;
    let s = l.to_string_lossy();
    s.split_once('[')?.1.trim_end_matches(']').parse().ok()
}

fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// The host uid that `uid` maps to, from our `uid_map`.
fn host_uid_of(uid: u32) -> Option<u32> {
    let m = std::fs::read_to_string("/proc/self/uid_map").ok()?;
    m.lines().find_map(|l| {
        let f: Vec<u64> = l
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        let (inside, outside, len) = (*f.first()?, *f.get(1)?, *f.get(2)?);
        let u = u64::from(uid);
        (u >= inside && u < inside + len).then(|| u32::try_from(outside + (u - inside)).ok())?
    })
}

// ---------------------------------------------------------------- P1–P24

/// P1.
#[must_use]
pub fn p1(_: &Context) -> Judged {
    let s = status_fields("/proc/self/status");
    let caps = s
        .into_iter()
        .filter(|(k, _)| k.starts_with("Cap"))
        .collect();
    v::p1(&caps)
}

/// P2.
#[must_use]
pub fn p2(_: &Context) -> Judged {
    let s = status_fields("/proc/self/status");
    v::p2(s.get("NoNewPrivs").map(String::as_str))
}

/// P3.
#[must_use]
pub fn p3(_: &Context) -> Judged {
    let s = status_fields("/proc/self/status");
    v::p3(
        s.get("Seccomp").map(String::as_str),
        s.get("Seccomp_filters").map(String::as_str),
    )
}

/// P4.
#[must_use]
pub fn p4(ctx: &Context) -> Judged {
    let label = std::fs::read_to_string("/proc/self/attr/current")
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO));
    v::p4(&label, ctx.lsm.as_deref())
}

/// P5.
#[must_use]
pub fn p5(ctx: &Context) -> Judged {
    let u = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
    let g = std::fs::read_to_string("/proc/self/gid_map").unwrap_or_default();
    v::p5(&u, &g, ns_inode("user"), ctx)
}

/// Setuid-root binaries P6 tries, in order; `passwd` waits on stdin, so its status can be
/// read while it runs.
pub const SETUID_CANDIDATES: &[&str] = &[
    "/usr/bin/passwd",
    "/usr/bin/chfn",
    "/usr/bin/chsh",
    "/bin/passwd",
];

/// P6.
#[must_use]
pub fn p6(_: &Context) -> Judged {
    let mut o = v::SetuidObs {
        own_euid: euid(),
        ..Default::default()
    };
    let bin = SETUID_CANDIDATES
        .iter()
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.uid() == 0 && m.mode() & 0o4000 != 0));
    let Some(bin) = bin else { return v::p6(&o) };
    o.binary = Some((*bin).to_string());
    let child = std::process::Command::new(bin)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            o.error = Some(format!("exec {bin}: {e}"));
            return v::p6(&o);
        }
    };
    let name = Path::new(bin)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let deadline = Instant::now() + Duration::from_millis(1200);
    let path = format!("/proc/{}/status", child.id());
    while Instant::now() < deadline {
        let s = status_fields(&path);
        if s.get("Name") == Some(&name) {
            let e = s
                .get("Uid")
                .and_then(|u| u.split_whitespace().nth(1)?.parse().ok());
            if let (Some(e), Some(cap)) = (e, s.get("CapEff")) {
                o.status = Some((e, cap.clone()));
                break;
            }
        }
        if s.is_empty() {
            o.error = Some(format!("{bin} exited before its status could be read"));
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if o.status.is_none() && o.error.is_none() {
        o.error = Some(format!("{bin} never showed its status"));
    }
    let _ = child.kill();
    let _ = child.wait();
    v::p6(&o)
}

/// P7.
#[must_use]
pub fn p7(_: &Context) -> Judged {
    let calls: Vec<(String, Attempt)> = TryCall::ALL
        .iter()
        .map(|c| (c.name().to_string(), Attempt::of(sys::try_call(*c))))
        .collect();
    v::p7(&calls)
}

fn scratch_dir(tag: &str) -> Result<String, Attempt> {
    let d = format!("/tmp/{}", unique(tag));
    std::fs::create_dir(&d).map_err(|e| Attempt::Missing(format!("creating {d}: {e}")))?;
    Ok(d)
}

fn try_mount(fstype: &str, data: Option<&str>, target: &str) -> Attempt {
    let r = mount(Some(fstype), target, Some(fstype), MsFlags::empty(), data);
    if r.is_ok() {
        let _ = nix::mount::umount(target);
    }
    nix_attempt(r)
}

/// P8.
#[must_use]
pub fn p8(_: &Context) -> Judged {
    let d = match scratch_dir("mnt") {
        Ok(d) => d,
        Err(a) => return v::p8(&[("scratch".into(), a)]),
    };
    let items = vec![
        ("tmpfs".to_string(), try_mount("tmpfs", None, &d)),
        (
            "cgroup".to_string(),
            try_mount("cgroup", Some("memory"), &d),
        ),
        ("proc".to_string(), try_mount("proc", None, &d)),
    ];
    let _ = std::fs::remove_dir(&d);
    v::p8(&items)
}

/// P9: runs `cyclix probe --child userns` (a fresh single-threaded process: `unshare` of a
/// user namespace fails with `EINVAL` in a threaded one) and reads its JSON answer.
#[must_use]
pub fn p9(_: &Context) -> Judged {
    let before = mountinfo().len();
    let mut o = match run_child("userns") {
        Ok(text) => serde_json::from_str(text.trim()).unwrap_or_else(|e| v::UsernsObs {
            error: Some(format!("unreadable answer {text:?}: {e}")),
            ..Default::default()
        }),
        Err(e) => v::UsernsObs {
            error: Some(e),
            ..Default::default()
        },
    };
    o.mounts_unchanged = mountinfo().len() == before;
    v::p9(&o)
}

fn run_child(what: &str) -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding our own binary: {e}"))?;
    let mut child = std::process::Command::new(exe)
        .args(["probe", "--child", what])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("spawning the child: {e}"))?;
    let deadline = Instant::now() + Duration::from_millis(1500);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("the child did not finish within 1.5 s".into());
            }
            Err(e) => return Err(format!("waiting for the child: {e}")),
        }
    }
    let mut s = String::new();
    if let Some(mut out) = child.stdout.take() {
        out.read_to_string(&mut s)
            .map_err(|e| format!("reading the child: {e}"))?;
    }
    Ok(s)
}

/// The `--child` side of the probes that need a fresh process. Prints one JSON line.
///
/// # Errors
/// An unknown child name; stdout failures.
pub fn child_main(what: &str) -> anyhow::Result<bool> {
    anyhow::ensure!(what == "userns", "unknown probe child `{what}`");
    let mut o = v::UsernsObs::default();
    let uid = euid();
    let gid = nix::unistd::getegid().as_raw();
    let r = nix_attempt(unshare(CloneFlags::CLONE_NEWUSER));
    o.unshare_user = Some(r.clone());
    if r == Attempt::Ok {
        let _ = std::fs::write("/proc/self/setgroups", "deny");
        let map = io_attempt(std::fs::write("/proc/self/uid_map", format!("0 {uid} 1")));
        let _ = std::fs::write("/proc/self/gid_map", format!("0 {gid} 1"));
        o.uid_map = Some(map);
        let m = nix_attempt(unshare(CloneFlags::CLONE_NEWNS));
        o.unshare_mnt = Some(m);
        if let Ok(d) = scratch_dir("userns") {
            o.mount_proc = Some(try_mount("proc", None, &d));
            o.mount_cgroup = Some(try_mount("cgroup2", None, &d));
            let _ = std::fs::remove_dir(&d);
        }
    }
    println!("{}", serde_json::to_string(&o)?);
    Ok(true)
}

/// P10.
#[must_use]
pub fn p10(_: &Context) -> Judged {
    let mut entries: Vec<String> = std::fs::read_dir("/dev")
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    if Path::new("/dev/net/tun").exists() {
        entries.push("net/tun".into());
    }
    let null_ok = std::fs::metadata("/dev/null")
        .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == nix::sys::stat::makedev(1, 3));
    let target = format!("/tmp/{}", unique("mknod"));
    let r = mknod(
        target.as_str(),
        SFlag::S_IFCHR,
        Mode::from_bits_truncate(0o600),
        nix::sys::stat::makedev(1, 3),
    );
    if r.is_ok() {
        let _ = std::fs::remove_file(&target);
    }
    v::p10(&v::DevObs {
        entries,
        null_ok,
        mknod: nix_attempt(r),
    })
}

/// P11.
#[must_use]
pub fn p11(_: &Context) -> Judged {
    let null = std::fs::metadata("/dev/null").map(|m| m.rdev()).ok();
    let items = v::MASKED_PATHS
        .iter()
        .map(|p| {
            let m = match std::fs::metadata(p) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Masked::Absent,
                Err(e) => Masked::Exposed(format!("stat: {e}")),
                Ok(m) if m.file_type().is_char_device() && Some(m.rdev()) == null => {
                    Masked::NullDev
                }
                Ok(m) if m.is_dir() => match std::fs::read_dir(p) {
                    Ok(mut rd) => {
                        if rd.next().is_none() {
                            Masked::EmptyDir
                        } else {
                            Masked::Exposed("a non-empty directory".into())
                        }
                    }
                    Err(e) => Masked::Exposed(format!("a directory we cannot list: {e}")),
                },
                Ok(_) => Masked::Exposed("a readable file".into()),
            };
            ((*p).to_string(), m)
        })
        .collect::<Vec<_>>();
    v::p11(&items)
}

/// Kernel knobs P12 opens for writing (no byte is written).
pub const KNOBS: &[&str] = &[
    "/proc/sys/kernel/core_pattern",
    "/proc/sysrq-trigger",
    "/sys/kernel/uevent_helper",
    "/sys/fs/cgroup/cgroup.procs",
];

/// P12.
#[must_use]
pub fn p12(_: &Context) -> Judged {
    let items: Vec<(String, Attempt)> = KNOBS
        .iter()
        .map(|p| {
            (
                (*p).to_string(),
                io_attempt(std::fs::OpenOptions::new().write(true).open(p)),
            )
        })
        .collect();
    v::p12(&items)
}

/// P13.
#[must_use]
pub fn p13(_: &Context) -> Judged {
    v::p13(&mountinfo())
}

fn create_remove(path: &str) -> Attempt {
    let r = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path);
    if r.is_ok() {
        let _ = std::fs::remove_file(path);
    }
    io_attempt(r)
}

/// P14.
#[must_use]
pub fn p14(_: &Context) -> Judged {
    let items = vec![
        (
            "/probe-root".to_string(),
            create_remove(&format!("/{}", unique("root"))),
        ),
        (
            "/usr/probe".to_string(),
            create_remove(&format!("/usr/{}", unique("usr"))),
        ),
    ];
    v::p14(&items)
}

fn write_cycle(dir: &str) -> Attempt {
    let p = format!("{dir}/.{}", unique("w"));
    let r = std::fs::write(&p, b"probe")
        .and_then(|()| std::fs::read(&p))
        .and_then(|b| {
            if b == b"probe" {
                Ok(())
            } else {
                Err(std::io::Error::other("read back differs"))
            }
        });
    let _ = std::fs::remove_file(&p);
    io_attempt(r)
}

/// P15.
#[must_use]
pub fn p15(_: &Context) -> Judged {
    let mounts = mountinfo();
    let items: Vec<v::ScratchObs> = ["/tmp", "/var/tmp", "/run", "/dev/shm"]
        .iter()
        .map(|d| v::ScratchObs {
            path: (*d).to_string(),
            write: write_cycle(d),
            mount: v::mount_at(&mounts, d).cloned(),
        })
        .collect();
    v::p15(&items)
}

/// P16.
#[must_use]
pub fn p16(ctx: &Context) -> Judged {
    let a = format!("{}/.{}", ctx.workdir, unique("a"));
    let b = format!("{}/.{}", ctx.workdir, unique("b"));
    let mut owner = None;
    let r = std::fs::write(&a, b"probe")
        .and_then(|()| {
            owner = std::fs::metadata(&a).ok().map(|m| m.uid());
            std::fs::rename(&a, &b)
        })
        .and_then(|()| std::fs::remove_file(&b));
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);
    let mounts = mountinfo();
    let own = euid();
    v::p16(
        &v::ProjectObs {
            cycle: io_attempt(r),
            owner,
            own_euid: own,
            host_uid_of_owner: owner.and_then(host_uid_of),
            mount: v::mount_at(&mounts, &ctx.workdir).cloned(),
        },
        ctx,
    )
}

/// P17: the user's git dir (its host path) does not exist in the sandbox; the positive
/// control writes in the private repository's own git dir.
#[must_use]
pub fn p17(ctx: &Context) -> Judged {
    let g = ctx.git_dir.trim_end_matches('/');
    let items = if g.is_empty() {
        vec![(
            ".git".to_string(),
            Attempt::Missing("context.git_dir is empty".into()),
        )]
    } else {
        let parent = std::path::Path::new(g)
            .parent()
            .map_or_else(|| "/".to_string(), |p| p.display().to_string());
        [
            g.to_string(),
            format!("{g}/config"),
            format!("{g}/hooks"),
            parent,
        ]
        .into_iter()
        .map(|p| {
            let a = io_attempt(std::fs::symlink_metadata(&p));
            (p, a)
        })
        .collect()
    };
    v::p17(&items, &write_cycle(&format!("{}/.git", ctx.workdir)))
}

/// P18.
#[must_use]
pub fn p18(ctx: &Context) -> Judged {
    v::p18(&mountinfo(), ctx)
}

/// P19: walks the tree (not `/proc`, `/sys`) for sockets, with a bound on time, after binding
/// a socket of its own in `/tmp` as the positive control.
#[must_use]
pub fn p19(_: &Context) -> Judged {
    let ctl = format!("/tmp/{}.sock", unique("sock"));
    let listener = std::os::unix::net::UnixListener::bind(&ctl);
    let deadline = Instant::now() + Duration::from_millis(1300);
    let mut o = v::SocketObs {
        complete: true,
        ..Default::default()
    };
    let mut stack = vec![std::path::PathBuf::from("/")];
    while let Some(dir) = stack.pop() {
        if Instant::now() > deadline {
            o.complete = false;
            break;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.filter_map(Result::ok) {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                if p != Path::new("/proc") && p != Path::new("/sys") && !p.ends_with(".git/objects")
                {
                    stack.push(p);
                }
            } else if ft.is_socket()
                // A bind-mounted socket shows the d_type of the placeholder file podman
                // created for the mount point; lstat sees the mounted socket itself.
                || std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_socket())
            {
                o.found.push(p.to_string_lossy().into_owned());
            }
        }
    }
    o.control_found = o.found.contains(&ctl);
    o.found.retain(|f| *f != ctl);
    drop(listener);
    let _ = std::fs::remove_file(&ctl);
    o.net_unix = std::fs::read_to_string("/proc/net/unix")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(7).map(str::to_string))
        .filter(|p| !p.contains(&ctl))
        .collect();
    o.env = [
        "SSH_AUTH_SOCK",
        "DBUS_SESSION_BUS_ADDRESS",
        "DBUS_SYSTEM_BUS_ADDRESS",
        "DOCKER_HOST",
        "CONTAINER_HOST",
        "XDG_RUNTIME_DIR",
    ]
    .iter()
    .filter(|k| std::env::var_os(k).is_some())
    .map(|k| (*k).to_string())
    .collect();
    v::p19(&o)
}

/// P20.
#[must_use]
pub fn p20(ctx: &Context) -> Judged {
    let ns = v::PRIVATE_NS
        .iter()
        .filter_map(|n| Some(((*n).to_string(), ns_inode(n)?)))
        .collect();
    let pids = std::fs::read_dir("/proc").map_or(0, |rd| {
        rd.filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .bytes()
                    .all(|b| b.is_ascii_digit())
            })
            .count()
    });
    let init_comm = std::fs::read_to_string("/proc/1/comm")
        .ok()
        .map(|s| s.trim().to_string());
    v::p20(
        &v::NsObs {
            ns,
            pids,
            init_comm,
        },
        ctx,
    )
}

/// P21.
#[must_use]
pub fn p21(ctx: &Context) -> Judged {
    let rd = |f: &str| {
        std::fs::read_to_string(format!("/sys/fs/cgroup/{f}"))
            .ok()
            .map(|s| s.trim().to_string())
    };
    v::p21(
        &v::CgroupObs {
            lines: std::fs::read_to_string("/proc/self/cgroup")
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect(),
            controllers: rd("cgroup.controllers").unwrap_or_default(),
            memory_max: rd("memory.max"),
            pids_max: rd("pids.max"),
            cpu_max: rd("cpu.max"),
        },
        ctx,
    )
}

fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b).iter().fold(String::new(), |mut s, x| {
        use std::fmt::Write as _;
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// P22: our environment and every readable `/proc/*/environ`.
#[must_use]
pub fn p22(ctx: &Context) -> Judged {
    let mut o = v::EnvObs::default();
    let mut files = vec!["/proc/self/environ".to_string()];
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.filter_map(Result::ok) {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.bytes().all(|b| b.is_ascii_digit()) {
                files.push(format!("/proc/{n}/environ"));
            }
        }
    }
    for f in files {
        let Ok(bytes) = std::fs::read(&f) else {
            continue;
        };
        o.sources += 1;
        for kv in bytes.split(|b| *b == 0).filter(|kv| !kv.is_empty()) {
            let (k, val) = match kv.iter().position(|b| *b == b'=') {
                Some(i) => (&kv[..i], &kv[i + 1..]),
                None => (kv, &[][..]),
            };
            o.vars.push((
                f.clone(),
                String::from_utf8_lossy(k).into_owned(),
                sha256_hex(val),
            ));
        }
    }
    v::p22(&o, ctx)
}

/// Describes a key (`type;uid;gid;perm;description`), or its errno.
fn describe(key: i32) -> String {
    let mut buf = [0u8; 512];
    match sys::keyctl_describe(key, &mut buf) {
        Ok(_) => String::from_utf8_lossy(buf.split(|b| *b == 0).next().unwrap_or(&[])).into_owned(),
        Err(e) => v::errno_name(e),
    }
}

/// Reads a keyring: its own description and the descriptions of the keys linked to it.
fn keyring(special: i32) -> v::Keyring {
    let mut buf = [0u8; 4096];
    let linked = sys::keyctl_read(special, &mut buf).map(|n| {
        let n = usize::try_from(n).unwrap_or(0).min(buf.len());
        buf[..n]
            .chunks_exact(4)
            .map(|c| {
                let id = i32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
                let d = describe(id);
                let mut inner = [0u8; 4096];
                let n = if d.starts_with("keyring;") {
                    sys::keyctl_read(id, &mut inner).map(|n| usize::try_from(n / 4).unwrap_or(0))
                } else {
                    Ok(1)
                };
                (d, n)
            })
            .collect()
    });
    v::Keyring {
        own: describe(special),
        linked,
    }
}

/// P23.
#[must_use]
pub fn p23(_: &Context) -> Judged {
    let null = std::fs::metadata("/dev/null").map(|m| m.rdev()).ok();
    let masked = std::fs::metadata("/proc/keys")
        .is_ok_and(|m| m.file_type().is_char_device() && Some(m.rdev()) == null);
    v::p23(masked, &keyring(-3), &keyring(-4))
}

/// P24.
#[must_use]
pub fn p24(_: &Context) -> Judged {
    let mut buf = vec![0u8; 4096];
    let syslog = Attempt::of(sys::syslog_read_all(&mut buf));
    let ks = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    let lines: Vec<&str> = ks.lines().take(5000).collect();
    let nonzero = lines
        .iter()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|a| a.bytes().any(|b| b != b'0'))
        })
        .count();
    v::p24(&v::KernelObs {
        syslog,
        dmesg_restrict: std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict")
            .ok()
            .map(|s| s.trim().to_string()),
        kallsyms: (lines.len(), nonzero),
        modules_dir: Path::new("/lib/modules").exists(),
    })
}

// ---------------------------------------------------------------- network

/// N1.
#[must_use]
pub fn n1(ctx: &Context) -> Judged {
    let mut o = v::RouteObs::default();
    if let Ok(ifs) = nix::ifaddrs::getifaddrs() {
        for i in ifs {
            let e = o.ifaces.entry(i.interface_name.clone()).or_default();
            if let Some(a) = i.address.as_ref().and_then(|a| a.as_sockaddr_in()) {
                e.push(a.ip().to_string());
            }
        }
    }
    match std::fs::read_to_string("/proc/net/route") {
        Ok(t) => {
            o.read_ok = true;
            for l in t.lines().skip(1) {
                let f: Vec<&str> = l.split_whitespace().collect();
                if f.len() > 7 && f[1] == "00000000" && f[7] == "00000000" {
                    o.defaults.push(format!("v4 via {} dev {}", f[2], f[0]));
                }
            }
        }
        Err(_) => o.read_ok = false,
    }
    for l in std::fs::read_to_string("/proc/net/ipv6_route")
        .unwrap_or_default()
        .lines()
    {
        let f: Vec<&str> = l.split_whitespace().collect();
        // dest, dest_len, ..., flags (8), dev (9); RTF_REJECT = 0x0200.
        if f.len() > 9 && f[0].bytes().all(|b| b == b'0') && f[1] == "00" {
            let flags = u32::from_str_radix(f[8], 16).unwrap_or(0);
            if flags & 0x0200 == 0 && f[9] != "lo" {
                o.defaults.push(format!("v6 dev {}", f[9]));
            }
        }
    }
    v::n1(&o, ctx)
}

fn tcp(addr: &str) -> Attempt {
    match addr.parse::<SocketAddr>() {
        Ok(a) => io_attempt(TcpStream::connect_timeout(&a, NET_TIMEOUT)),
        Err(e) => Attempt::Missing(format!("address {addr}: {e}")),
    }
}

fn udp(addr: &str) -> Attempt {
    let Ok(a) = addr.parse::<SocketAddr>() else {
        return Attempt::Missing(addr.into());
    };
    let bind = if a.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    match UdpSocket::bind(bind) {
        Ok(s) => io_attempt(s.connect(a).and_then(|()| s.send(b"probe"))),
        Err(e) => io_attempt::<()>(Err(e)),
    }
}

/// N2.
#[must_use]
pub fn n2(_: &Context) -> Judged {
    let items = vec![
        ("tcp 1.1.1.1:443".to_string(), tcp("1.1.1.1:443")),
        ("tcp 8.8.8.8:53".to_string(), tcp("8.8.8.8:53")),
        ("udp 8.8.8.8:53".to_string(), udp("8.8.8.8:53")),
        ("udp 8.8.8.8:443".to_string(), udp("8.8.8.8:443")),
    ];
    v::n2(&items)
}

/// N3.
#[must_use]
pub fn n3(_: &Context) -> Judged {
    let items = vec![(
        "tcp [2606:4700:4700::1111]:443".to_string(),
        tcp("[2606:4700:4700::1111]:443"),
    )];
    let global: Vec<String> = nix::ifaddrs::getifaddrs()
        .map(|ifs| {
            ifs.filter_map(|i| {
                i.address
                    .and_then(|a| a.as_sockaddr_in6().map(nix::sys::socket::SockaddrIn6::ip))
            })
            .filter(|ip| {
                let s = ip.segments();
                !(ip.is_loopback() || s[0] & 0xffc0 == 0xfe80 || s[0] & 0xfe00 == 0xfc00)
            })
            .map(|ip| ip.to_string())
            .collect()
        })
        .unwrap_or_default();
    v::n3(&items, &global)
}

/// N4.
#[must_use]
pub fn n4(_: &Context) -> Judged {
    let items = [
        "169.254.169.254:80",
        "100.100.100.200:80",
        "100.96.0.96:80",
        "100.80.80.80:80",
        "[fd00:ec2::254]:80",
    ]
    .iter()
    .map(|a| (format!("tcp {a}"), tcp(a)))
    .collect::<Vec<_>>();
    v::n4(&items)
}

/// Sends one raw HTTP/1.1 request line (+ `Host`) to the proxy and reads the reply head.
fn http(ctx: &Context, request_line: &str, host_header: &str) -> Reply {
    let Some((host, port)) = ctx.proxy_addr() else {
        return Reply::Failed(Attempt::Missing(format!(
            "proxy address in {}",
            ctx.proxy_url
        )));
    };
    let Ok(ip) = host.parse::<IpAddr>() else {
        return Reply::Failed(Attempt::Missing(format!(
            "proxy host {host} is not an IP address"
        )));
    };
    let mut stream = match TcpStream::connect_timeout(&SocketAddr::new(ip, port), NET_TIMEOUT) {
        Ok(s) => s,
        Err(e) => return Reply::Failed(io_attempt::<()>(Err(e))),
    };
    // A report-only proxy forwards would-be denials and answers unreachable targets after its
    // 1 s connect budget (measured 1.46 s for CONNECT 1.1.1.1:443): wait a little longer then.
    let read_ms = if ctx.report_only { 1900 } else { 1400 };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(read_ms)));
    let _ = stream.set_write_timeout(Some(NET_TIMEOUT));
    let req = format!(
        "{request_line} HTTP/1.1\r\nHost: {host_header}\r\nUser-Agent: cyclix-probe\r\nConnection: close\r\n\r\n"
    );
    if let Err(e) = stream.write_all(req.as_bytes()) {
        return Reply::Failed(io_attempt::<()>(Err(e)));
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    let head_end = loop {
        match stream.read(&mut chunk) {
            Ok(0) => break buf.windows(4).position(|w| w == b"\r\n\r\n"),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    // Read a little of the body if it is already there (CONNECT has none).
                    if !request_line.starts_with("CONNECT") && buf.len() < i + 4 + 64 {
                        let _ = stream.set_read_timeout(Some(Duration::from_millis(300)));
                        if let Ok(n) = stream.read(&mut chunk) {
                            buf.extend_from_slice(&chunk[..n]);
                        }
                    }
                    break Some(i);
                }
                if buf.len() > 16 * 1024 {
                    break None;
                }
            }
            Err(e) => {
                if buf.is_empty() {
                    return Reply::Failed(io_attempt::<()>(Err(e)));
                }
                break buf.windows(4).position(|w| w == b"\r\n\r\n");
            }
        }
    };
    let text = String::from_utf8_lossy(&buf).into_owned();
    let head = head_end.map_or(text.as_str(), |i| &text[..i.min(text.len())]);
    let mut lines = head.split("\r\n");
    let code = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok());
    let Some(code) = code else {
        return Reply::Failed(Attempt::Missing(format!(
            "no status line in {:?}",
            text.chars().take(80).collect::<String>()
        )));
    };
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let body = head_end.map_or(String::new(), |i| {
        text.get(i + 4..).unwrap_or("").chars().take(256).collect()
    });
    Reply::Status {
        code,
        error_header: header("X-Squid-Error"),
        location: header("Location"),
        body,
    }
}

fn get(ctx: &Context, url: &str) -> Reply {
    let host = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or("")
        .to_string();
    http(ctx, &format!("GET {url}"), &host)
}

fn connect(ctx: &Context, target: &str) -> Reply {
    http(ctx, &format!("CONNECT {target}"), target)
}

fn allowed_url(ctx: &Context) -> String {
    if ctx.allowed_port == 80 {
        format!("http://{}/", ctx.allowed_host)
    } else {
        format!("http://{}:{}/", ctx.allowed_host, ctx.allowed_port)
    }
}

/// A deny-all run (empty allowlist): no allowed host exists for positive controls.
fn deny_all(ctx: &Context) -> bool {
    ctx.allowed_host.is_empty()
}

fn control(ctx: &Context) -> Reply {
    if deny_all(ctx) {
        get(ctx, &format!("http://{}/", ctx.denied_host))
    } else {
        get(ctx, &allowed_url(ctx))
    }
}

fn denies(ctx: &Context, reqs: &[(String, Reply)]) -> Judged {
    if ctx.report_only {
        // Report-only (stated loudly in the run's record): name, port and IP-literal checks are
        // logged as `would_deny` instead of enforced; every request must still be ANSWERED by
        // the proxy at once (a status line, never a drop). The private-range and client checks
        // stay enforced: N5 and N11 keep the strict verdict.
        return v::report_only_answers(reqs);
    }
    if deny_all(ctx) {
        v::proxy_denies_all(reqs, &control(ctx))
    } else {
        v::proxy_denies(reqs, &control(ctx))
    }
}

/// The strict verdict even in report-only runs (private and metadata targets stay denied).
fn strict_denies(ctx: &Context, reqs: &[(String, Reply)]) -> Judged {
    if ctx.report_only {
        // Names are not checked before resolution in report-only: an unresolvable metadata
        // name gets the proxy's own 503. Either way the proxy must not forward it.
        return v::proxy_not_forwarded(reqs);
    }
    if deny_all(ctx) {
        v::proxy_denies_all(reqs, &control(ctx))
    } else {
        v::proxy_denies(reqs, &control(ctx))
    }
}

/// N5.
#[must_use]
pub fn n5(ctx: &Context) -> Judged {
    let items: Vec<(String, Reply)> = [
        "169.254.169.254:80",
        "metadata.google.internal:80",
        "100.100.100.200:80",
    ]
    .iter()
    .map(|t| (format!("CONNECT {t}"), connect(ctx, t)))
    .collect();
    strict_denies(ctx, &items)
}

/// N6.
#[must_use]
pub fn n6(ctx: &Context) -> Judged {
    let hci = ("host.containers.internal", 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.find(SocketAddr::is_ipv4))
        .map(|a| a.ip().to_string());
    let mut items = Vec::new();
    let mut targets = vec![ctx.gateway_ip.clone()];
    match &hci {
        Some(ip) => targets.push(ip.clone()),
        None => items.push((
            "host.containers.internal".to_string(),
            Attempt::Missing("not resolvable".into()),
        )),
    }
    for t in &targets {
        for port in [22, 80, 443, 2375, 5432, 6379, 10250] {
            items.push((format!("{t}:{port}"), tcp(&format!("{t}:{port}"))));
        }
    }
    let ctl = ctx
        .proxy_addr()
        .map_or(Attempt::Missing("proxy address".into()), |(h, p)| {
            tcp(&format!("{h}:{p}"))
        });
    v::n6(&items, &ctl)
}

fn resolver() -> Option<IpAddr> {
    std::fs::read_to_string("/etc/resolv.conf")
        .ok()?
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("nameserver")).then(|| w.next()?.parse().ok())?
        })
}

/// A minimal DNS A query over UDP with a 1 s deadline (rcode + A records).
fn dns_query(server: IpAddr, name: &str) -> Dns {
    let mut q: Vec<u8> = vec![0x5a, 0x17, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.trim_end_matches('.').split('.') {
        let Ok(n) = u8::try_from(label.len()) else {
            return Dns::Failed(Attempt::Missing(format!("label in {name}")));
        };
        q.push(n);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    let bind = if server.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let s = match UdpSocket::bind(bind) {
        Ok(s) => s,
        Err(e) => return Dns::Failed(io_attempt::<()>(Err(e))),
    };
    let _ = s.set_read_timeout(Some(NET_TIMEOUT));
    if let Err(e) = s
        .connect(SocketAddr::new(server, 53))
        .and_then(|()| s.send(&q))
    {
        return Dns::Failed(io_attempt::<()>(Err(e)));
    }
    let mut buf = [0u8; 1500];
    let n = match s.recv(&mut buf) {
        Ok(n) => n,
        Err(e) => return Dns::Failed(io_attempt::<()>(Err(e))),
    };
    parse_dns(&buf[..n], q.len())
}

/// Parses the rcode and the A records of a reply to our single-question query.
#[must_use]
pub fn parse_dns(b: &[u8], question_end: usize) -> Dns {
    if b.len() < 12 {
        return Dns::Failed(Attempt::Missing("short DNS reply".into()));
    }
    let rcode = b[3] & 0x0f;
    let ancount = usize::from(u16::from_be_bytes([b[6], b[7]]));
    let mut i = question_end;
    let mut addrs = Vec::new();
    for _ in 0..ancount {
        // name: a pointer (2 bytes) or labels
        while i < b.len() {
            if b[i] & 0xc0 == 0xc0 {
                i += 2;
                break;
            }
            if b[i] == 0 {
                i += 1;
                break;
            }
            i += 1 + usize::from(b[i]);
        }
        if i + 10 > b.len() {
            break;
        }
        let typ = u16::from_be_bytes([b[i], b[i + 1]]);
        let len = usize::from(u16::from_be_bytes([b[i + 8], b[i + 9]]));
        i += 10;
        if typ == 1 && len == 4 && i + 4 <= b.len() {
            addrs.push(format!("{}.{}.{}.{}", b[i], b[i + 1], b[i + 2], b[i + 3]));
        }
        i += len;
    }
    Dns::Reply { rcode, addrs }
}

/// N7.
#[must_use]
pub fn n7(ctx: &Context) -> Judged {
    let Some(server) = resolver() else {
        let f = Dns::Failed(Attempt::Missing("no nameserver in /etc/resolv.conf".into()));
        return v::n7(&f, &f, &udp("8.8.8.8:53"), ctx);
    };
    let ctl = dns_query(server, &ctx.proxy_name);
    let ext = dns_query(server, "example.com");
    v::n7(&ctl, &ext, &udp("8.8.8.8:53"), ctx)
}

/// N8.
#[must_use]
pub fn n8(ctx: &Context) -> Judged {
    if deny_all(ctx) {
        let d = &ctx.denied_host;
        return v::n8_deny_all(
            &get(ctx, &format!("http://{d}/")),
            &connect(ctx, &format!("{d}:443")),
        );
    }
    let g = control(ctx);
    let c = connect(ctx, &format!("{}:{}", ctx.allowed_host, ctx.allowed_port));
    v::n8(&g, &c)
}

/// N9.
#[must_use]
pub fn n9(ctx: &Context) -> Judged {
    // A deny-all run has no allowed port: try the usual TLS port on the denied host.
    let p = if deny_all(ctx) { 443 } else { ctx.allowed_port };
    let mut items = vec![
        (
            format!("CONNECT {}:{p}", ctx.denied_host),
            connect(ctx, &format!("{}:{p}", ctx.denied_host)),
        ),
        (
            format!("GET http://{}/", ctx.denied_host),
            get(ctx, &format!("http://{}/", ctx.denied_host)),
        ),
    ];
    for port in [22, 8080] {
        if port != p && !deny_all(ctx) {
            items.push((
                format!("CONNECT {}:{port}", ctx.allowed_host),
                connect(ctx, &format!("{}:{port}", ctx.allowed_host)),
            ));
        }
    }
    denies(ctx, &items)
}

/// N10.
#[must_use]
pub fn n10(ctx: &Context) -> Judged {
    let items: Vec<(String, Reply)> = [
        "1.1.1.1:443",
        "[::ffff:10.0.0.1]:443",
        "[64:ff9b::a00:1]:443",
        "[2002:a00:1::1]:443",
        "127.1:443",
        "0x7f000001:443",
        "2130706433:443",
        "0177.0.0.1:443",
    ]
    .iter()
    // Report-only forwards a public IP literal by design (logged as would_deny); the encodings
    // of private and loopback addresses must still never be forwarded.
    .filter(|t| !(ctx.report_only && **t == "1.1.1.1:443"))
    .map(|t| (format!("CONNECT {t}"), connect(ctx, t)))
    .collect();
    if ctx.report_only {
        strict_denies(ctx, &items)
    } else {
        denies(ctx, &items)
    }
}

/// N11.
#[must_use]
pub fn n11(ctx: &Context) -> Judged {
    let mut items = Vec::new();
    if let Some((h, p)) = ctx.proxy_addr() {
        items.push((
            format!("CONNECT {h}:{p}"),
            connect(ctx, &format!("{h}:{p}")),
        ));
        items.push((
            format!("GET http://{h}:{p}/"),
            get(ctx, &format!("http://{h}:{p}/")),
        ));
    }
    for r in &ctx.rebind_hosts {
        items.push((
            format!("GET http://{r}/"),
            get(ctx, &format!("http://{r}/")),
        ));
    }
    strict_denies(ctx, &items)
}

/// N12: name-matching edge cases against an exact allowlist entry: subdomains, look-alike
/// suffixes and prefixes are denied; case and a trailing dot are the same name (allowed).
#[must_use]
pub fn n12(ctx: &Context) -> Judged {
    if deny_all(ctx) {
        // No allowlist entry to mis-match: every look-alike of the denied host is denied.
        let d = &ctx.denied_host;
        let items: Vec<(String, Reply)> = [
            format!("sub.{d}"),
            d.to_ascii_uppercase(),
            format!("{d}."),
            format!("x{d}"),
        ]
        .iter()
        .map(|h| {
            (
                format!("GET http://{h}/"),
                get(ctx, &format!("http://{h}/")),
            )
        })
        .collect();
        return denies(ctx, &items);
    }
    let a = &ctx.allowed_host;
    let p = ctx.allowed_port;
    let port = if p == 80 {
        String::new()
    } else {
        format!(":{p}")
    };
    let lookalikes = [
        format!("sub.{a}"),
        format!("evil-{a}"),
        format!("{a}.evil.net"),
        format!("x{a}"),
    ];
    // Report-only forwards look-alikes (each may cost the proxy's 1 s DNS budget): one is
    // enough to show the proxy answers; the matching itself is unit-tested in render::proxy.
    let n = if ctx.report_only { 1 } else { lookalikes.len() };
    let deny: Vec<(String, Reply)> = lookalikes[..n]
        .iter()
        .map(|h| {
            (
                format!("GET http://{h}{port}/"),
                get(ctx, &format!("http://{h}{port}/")),
            )
        })
        .collect();
    let mut j = denies(ctx, &deny);
    let upper = get(ctx, &format!("http://{}{port}/", a.to_ascii_uppercase()));
    let dotted = get(ctx, &format!("http://{a}.{port}/"));
    j.expect
        .push_str("; UPPER-CASE and trailing-dot forms of the allowed host: 200");
    j.got = format!("{} upper={} dot={}", j.got, upper.text(), dotted.text());
    for (what, r) in [("upper-case", &upper), ("trailing dot", &dotted)] {
        if !matches!(r, Reply::Status { code: 200, .. }) {
            j.pass = false;
            j.detail = format!(
                "{} {what} form of the allowed host gave {}",
                j.detail,
                r.text()
            )
            .trim()
            .to_string();
        }
    }
    j
}

/// N13.
#[must_use]
pub fn n13(ctx: &Context) -> Judged {
    let url = if deny_all(ctx) {
        format!("http://{}/", ctx.denied_host)
    } else {
        allowed_url(ctx)
    };
    let r = http(ctx, &format!("GET {url}"), "10.0.0.1");
    v::n13(&r, &ctx.allowed_marker)
}

/// N14.
#[must_use]
pub fn n14(ctx: &Context) -> Judged {
    let redirect = ctx.redirect_url.as_ref().map(|u| get(ctx, u));
    let target = match &redirect {
        Some(Reply::Status {
            location: Some(l), ..
        }) => l.clone(),
        _ => format!("http://{}/", ctx.denied_host),
    };
    let follow_up = get(ctx, &target);
    if ctx.report_only {
        return v::report_only_answers(&[(format!("GET {target}"), follow_up)]);
    }
    v::n14(redirect.as_ref(), &follow_up)
}

/// N15: raw sockets, a route and a link change over rtnetlink, ICMP.
#[must_use]
pub fn n15(_: &Context) -> Judged {
    let mut items = vec![
        (
            "AF_PACKET".to_string(),
            nix_attempt(socket(
                AddressFamily::Packet,
                SockType::Raw,
                SockFlag::empty(),
                None,
            )),
        ),
        (
            "SOCK_RAW icmp".to_string(),
            nix_attempt(socket(
                AddressFamily::Inet,
                SockType::Raw,
                SockFlag::empty(),
                SockProtocol::Icmp,
            )),
        ),
    ];
    items.push(("RTM_NEWROUTE".to_string(), rtnetlink(24, &route_msg())));
    items.push((
        "RTM_NEWLINK eth0 down".to_string(),
        rtnetlink(16, &link_msg()),
    ));
    let ping = match socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::empty(),
        SockProtocol::Icmp,
    ) {
        Ok(fd) => {
            let s = UdpSocket::from(fd);
            io_attempt(s.send_to(&[8, 0, 0xf7, 0xff, 0, 0, 0, 0], "1.1.1.1:0"))
        }
        Err(e) => Attempt::Errno(e as i32),
    };
    items.push(("ping 1.1.1.1".to_string(), ping));
    v::n15(&items)
}

/// `rtmsg` for `ip route add 192.0.2.0/24 dev lo`: family, `dst_len`, `src_len`, tos, table,
/// protocol, scope, type, flags.
fn route_msg() -> Vec<u8> {
    let mut m = vec![
        u8::try_from(libc::AF_INET).unwrap_or(2),
        24,
        0,
        0,
        libc::RT_TABLE_MAIN,
        libc::RTPROT_BOOT,
        libc::RT_SCOPE_LINK,
        libc::RTN_UNICAST,
    ];
    m.extend_from_slice(&0u32.to_ne_bytes());
    // RTA_DST 192.0.2.0
    m.extend_from_slice(&8u16.to_ne_bytes());
    m.extend_from_slice(&1u16.to_ne_bytes());
    m.extend_from_slice(&[192, 0, 2, 0]);
    // RTA_OIF 1 (lo)
    m.extend_from_slice(&8u16.to_ne_bytes());
    m.extend_from_slice(&4u16.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m
}

/// `ifinfomsg` for `ip link set IFACE down` on the first non-lo interface.
fn link_msg() -> Vec<u8> {
    let idx = nix::net::if_::if_nameindex()
        .ok()
        .and_then(|l| {
            l.iter()
                .find(|i| i.name().to_bytes() != b"lo")
                .map(nix::net::if_::Interface::index)
        })
        .unwrap_or(2);
    let mut m = vec![u8::try_from(libc::AF_UNSPEC).unwrap_or(0), 0];
    m.extend_from_slice(&0u16.to_ne_bytes());
    m.extend_from_slice(&i32::try_from(idx).unwrap_or(2).to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // flags: not IFF_UP
    m.extend_from_slice(&1u32.to_ne_bytes()); // change: IFF_UP
    m
}

/// Sends one rtnetlink request (`NLM_F_REQUEST|NLM_F_ACK|NLM_F_CREATE|NLM_F_EXCL`) and returns
/// the kernel's answer: `Ok` for an ACK, `Errno` for an error message.
fn rtnetlink(msg_type: u16, payload: &[u8]) -> Attempt {
    use nix::sys::socket::{MsgFlags, NetlinkAddr, recv, sendto};
    use std::os::fd::AsRawFd as _;
    let fd = match socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    ) {
        Ok(fd) => fd,
        Err(e) => return Attempt::Errno(e as i32),
    };
    let len = u32::try_from(16 + payload.len()).unwrap_or(0);
    let mut m = Vec::new();
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&msg_type.to_ne_bytes());
    m.extend_from_slice(&(0x1u16 | 0x4 | 0x200 | 0x400).to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(payload);
    if let Err(e) = sendto(
        fd.as_raw_fd(),
        &m,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    ) {
        return Attempt::Errno(e as i32);
    }
    let _ = nix::sys::socket::setsockopt(
        &fd,
        nix::sys::socket::sockopt::ReceiveTimeout,
        &nix::sys::time::TimeVal::new(1, 0),
    );
    let mut buf = [0u8; 4096];
    match recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty()) {
        Ok(n) if n >= 20 && u16::from_ne_bytes([buf[4], buf[5]]) == 2 => {
            let err = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
            if err == 0 {
                Attempt::Ok
            } else {
                Attempt::Errno(-err)
            }
        }
        Ok(_) => Attempt::Missing("unexpected netlink answer".into()),
        Err(nix::errno::Errno::EAGAIN) => Attempt::Timeout,
        Err(e) => Attempt::Errno(e as i32),
    }
}

/// N16.
#[must_use]
pub fn n16(ctx: &Context) -> Judged {
    let env: BTreeMap<String, String> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "NO_PROXY",
        "no_proxy",
    ]
    .iter()
    .filter_map(|k| Some(((*k).to_string(), std::env::var(k).ok()?)))
    .collect();
    v::n16(&env, ctx)
}

/// E1: the escape attempts of issue 5 from inside: read the planted host key, create a file
/// outside the workdir at a host path, signal the host sentinel, connect to the host's user bus
/// and podman socket. Each must fail; the host checks the tripwires' effect independently.
#[must_use]
pub fn e1(ctx: &Context) -> Judged {
    let Some(e) = &ctx.escape else {
        return v::e1(&[]);
    };
    let mut items = vec![
        (format!("read {}", e.key), io_attempt(std::fs::read(&e.key))),
        (format!("create {}", e.outside), create_remove(&e.outside)),
        (
            format!("kill {}", e.sentinel_pid),
            // A pid that exists in our own namespace is one of ours, not the host sentinel:
            // never signal it; that attempt cannot be made here.
            if std::path::Path::new(&format!("/proc/{}", e.sentinel_pid)).exists() {
                Attempt::Missing(format!(
                    "pid {} exists inside the sandbox; not signalled",
                    e.sentinel_pid
                ))
            } else {
                nix_attempt(nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(e.sentinel_pid),
                    nix::sys::signal::Signal::SIGTERM,
                ))
            },
        ),
    ];
    for sock in &e.sockets {
        items.push((
            format!("connect {sock}"),
            io_attempt(std::os::unix::net::UnixStream::connect(sock)),
        ));
    }
    v::e1(&items)
}
