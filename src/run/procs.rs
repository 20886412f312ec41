//! What a run can leave in the host's process table and cgroup tree (field report B11:
//! conmon, pasta or rootlessport left behind after the unit stops; the run's cgroup).
//!
//! Everything a run starts is named after it: its units and containers are `cyclix-RUN-…`
//! (conmon carries the container name in its argv, `-n cyclix-RUN-agent`), and the escape
//! sentinel's `argv[0]` is `cyclix-RUN-sentinel`. So a leftover process is one whose
//! `/proc/PID/cmdline` contains `cyclix-RUN`, and a leftover cgroup is a directory named
//! after one of the run's units under the user manager's cgroup (`user@UID.service`). The
//! readers take the `/proc` and cgroup roots as arguments so the unit tests use a temp dir.

use crate::inventory::{Kind, Leftover};
use std::path::{Path, PathBuf};

/// How deep below `user@UID.service` cgroups are searched (`app.slice/UNIT/…`: Quadlet's
/// units sit at depth 2, podman's `libpod-payload` sub-cgroups below them).
const CGROUP_DEPTH: usize = 4;

/// The longest command line a finding quotes, in bytes.
const CMDLINE_MAX: usize = 160;

/// One process: pid, `comm`, NUL-separated argv turned into a space-joined line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    /// Host pid.
    pub pid: u32,
    /// `/proc/PID/comm`.
    pub comm: String,
    /// The argv, joined by spaces.
    pub cmdline: String,
    /// `argv[0]`.
    pub argv0: String,
}

/// The process names of podman's helpers that outlive a unit when a workload is started
/// outside its Quadlet unit (B11), as `/proc/PID/comm` shows them (15 bytes at most).
pub const HELPERS: &[&str] = &[
    "conmon",
    "pasta",
    "pasta.avx2",
    "rootlessport",
    "slirp4netns",
];

/// Whether `p` is a workload of run `run_id` rather than, say, a user's
/// `journalctl -u cyclix-RUN-agent` or the script that started cyclix: one of podman's
/// [`HELPERS`] or the run's escape sentinel (`argv[0]` `sentinel`). Anything else of the run
/// shows up through its cgroup.
#[must_use]
pub fn is_workload(p: &Proc, sentinel: &str) -> bool {
    HELPERS.contains(&p.comm.as_str()) || p.argv0 == sentinel
}

/// Every process under `proc_root` (normally `/proc`) whose command line contains `needle`,
/// except `self_pid`. Processes that end while being read are skipped.
#[must_use]
pub fn processes_naming(proc_root: &Path, needle: &str, self_pid: u32) -> Vec<Proc> {
    let Ok(rd) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut out: Vec<Proc> = rd
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != self_pid)
        .filter_map(|pid| {
            let dir = proc_root.join(pid.to_string());
            let raw = std::fs::read(dir.join("cmdline")).ok()?;
            let args: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let cmdline = args.join(" ");
            if !cmdline.contains(needle) {
                return None;
            }
            let comm = std::fs::read_to_string(dir.join("comm"))
                .map(|c| c.trim_end().to_string())
                .unwrap_or_default();
            Some(Proc {
                pid,
                comm,
                argv0: args.first().cloned().unwrap_or_default(),
                cmdline,
            })
        })
        .collect();
    out.sort_by_key(|p| p.pid);
    out
}

/// The user manager's cgroup (`/user.slice/user-1000.slice/user@1000.service`) from the
/// text of `/proc/self/cgroup` (cgroup v2 line `0::PATH`), if this process runs below one.
#[must_use]
pub fn user_manager_cgroup(proc_self_cgroup: &str) -> Option<String> {
    let path = proc_self_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))?;
    let mut acc = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        acc.push('/');
        acc.push_str(part);
        if part.starts_with("user@") && part.ends_with(".service") {
            return Some(acc);
        }
    }
    None
}

/// Cgroup directories below `root` (at most [`CGROUP_DEPTH`] levels) whose name contains
/// `needle`, with the number of processes in each (`cgroup.procs` lines; 0 when unreadable).
#[must_use]
pub fn cgroups_naming(root: &Path, needle: &str) -> Vec<(PathBuf, usize)> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.filter_map(Result::ok) {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let p = e.path();
            if e.file_name().to_string_lossy().contains(needle) {
                let n = std::fs::read_to_string(p.join("cgroup.procs"))
                    .map_or(0, |t| t.lines().count());
                out.push((p, n));
            } else if depth + 1 < CGROUP_DEPTH {
                stack.push((p, depth + 1));
            }
        }
    }
    out.sort();
    out
}

/// How deep below a container's cgroup [`container_processes`] looks (a container cannot make
/// sub-cgroups with a read-only cgroup tree; this bounds the walk all the same).
const CONTAINER_CGROUP_DEPTH: usize = 16;

/// The processes of a running container, from the host's `/proc` (`proc_root`) and cgroup
/// tree (`cgroup_root`, normally `/sys/fs/cgroup`), without a podman process (issue 33: the
/// claim's check costs one listing). It sees every process `podman top C hpid comm` gives a
/// host pid (psgo's: in the PID namespace and the first process's cgroup) and more. A process
/// is the container's when it is in the container's PID namespace (`/proc/PID/ns/pid` is
/// `pid:[PIDNS]`, podman ps `--ns`'s `Pidns`) or in the cgroup of the container's first
/// process `init` (podman's `Pid`) or below it (where a process in a PID namespace nested in
/// the container's still is). Each once, by pid, with its `comm`; one that ends while being
/// read is skipped.
///
/// `namespaces` is one look at every process's namespaces ([`namespaces`]), shared by the
/// containers looked at together (the host's `/proc` is read once, not once each).
///
/// # Errors
/// `init`'s cgroup cannot be read (it ended: the container does not run), or the cgroup tree
/// cannot be listed.
pub fn container_processes(
    proc_root: &Path,
    cgroup_root: &Path,
    init: u32,
    pidns: &str,
    namespaces: &[Namespaces],
) -> std::io::Result<Vec<(u32, String)>> {
    let own = std::fs::read_to_string(proc_root.join(init.to_string()).join("cgroup"))?;
    let rel = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("process {init} has no cgroup v2 line in its /proc/{init}/cgroup"),
            )
        })?;
    let mut members = std::collections::BTreeSet::new();
    let mut stack = vec![(cgroup_root.join(rel.trim_start_matches('/')), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs"))?;
        members.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        if depth + 1 < CONTAINER_CGROUP_DEPTH {
            for e in std::fs::read_dir(&dir)?.filter_map(Result::ok) {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push((e.path(), depth + 1));
                }
            }
        }
    }
    let ns = format!("pid:[{pidns}]");
    members.extend(namespaces.iter().filter(|n| n.pid_ns == ns).map(|n| n.pid));
    Ok(members
        .into_iter()
        .filter_map(|pid| {
            let comm =
                std::fs::read_to_string(proc_root.join(pid.to_string()).join("comm")).ok()?;
            Some((pid, comm.trim_end_matches('\n').to_string()))
        })
        .collect())
}

/// One process's PID and network namespaces, as its `/proc/PID/ns/` links name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespaces {
    /// Host pid.
    pub pid: u32,
    /// `/proc/PID/ns/pid`'s target, `pid:[INODE]`.
    pub pid_ns: String,
    /// `/proc/PID/ns/net`'s target, `net:[INODE]`; `None` when it cannot be read (the process
    /// ended between the two reads).
    pub net_ns: Option<String>,
}

/// Every process under `proc_root` (normally `/proc`) with its PID and network namespaces
/// ([`Namespaces`]); a process whose PID namespace link cannot be read (another user's, or one
/// that ended) is left out. The one look [`container_processes`] and [`strangers`] share.
///
/// # Errors
/// `proc_root` cannot be listed.
pub fn namespaces(proc_root: &Path) -> std::io::Result<Vec<Namespaces>> {
    Ok(std::fs::read_dir(proc_root)?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let link = |ns: &str| {
                std::fs::read_link(e.path().join("ns").join(ns))
                    .ok()
                    .map(|l| l.to_string_lossy().into_owned())
            };
            Some(Namespaces {
                pid,
                pid_ns: link("pid")?,
                net_ns: link("net"),
            })
        })
        .collect())
}

/// The processes of `scan` in one of the network namespaces `held` (inodes, as podman ps
/// `--ns` gives a container's `Net`) that are not among `members` (the processes of the
/// containers those namespaces belong to, [`container_processes`]): a process that entered a
/// container's network namespace from outside it (`nsenter -U -n -t PID` from a unit of its
/// own: in no PID namespace or cgroup of the container, it sees and makes the container's
/// connections). Each with the inode it holds, by pid. Pure.
#[must_use]
pub fn strangers(
    scan: &[Namespaces],
    held: &[&str],
    members: &std::collections::BTreeSet<u32>,
) -> Vec<(u32, String)> {
    let held: Vec<String> = held.iter().map(|i| format!("net:[{i}]")).collect();
    let mut out: Vec<(u32, String)> = scan
        .iter()
        .filter(|n| !members.contains(&n.pid))
        .filter_map(|n| {
            let net = n.net_ns.as_ref()?;
            held.contains(net).then(|| (n.pid, net.clone()))
        })
        .collect();
    out.sort();
    out
}

/// When this user's manager (`systemd --user`, `user@UID.service`) started, in ms since the
/// epoch: the process of `uid` whose `comm` is `systemd` and whose argv has `--user`, its start
/// (`/proc/PID/stat` field 22, clock ticks since boot) plus the boot time (`btime` of
/// `/proc/stat`, whole seconds: up to 1 s early). `None` when no user manager runs or `/proc`
/// cannot tell. Convergence compares it with a dead run's start: a manager younger than the
/// run died (or was restarted) mid-run (issue 20 item 2).
#[must_use]
pub fn user_manager_started_ms(proc_root: &Path, uid: u32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt as _;
    let btime = std::fs::read_to_string(proc_root.join("stat"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok())?;
    let tick = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|t| u64::try_from(t).ok())
        .filter(|t| *t > 0)?;
    std::fs::read_dir(proc_root)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .filter(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                let mut words = c.split(|b| *b == 0);
                words.next().is_some_and(|w| w.ends_with(b"systemd"))
                    && words.any(|w| w == b"--user")
            })
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|stat| start_ticks(&stat))
        .min()
        .map(|ticks| btime * 1000 + ticks * 1000 / tick)
}

/// Field 22 (`starttime`, clock ticks after boot) of a `/proc/PID/stat` line. Pure.
#[must_use]
pub fn start_ticks(stat: &str) -> Option<u64> {
    // After `PID (COMM)`, fields start at 3 (state): starttime is the 20th of the rest.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// The findings for run `run_id`: leftover processes and cgroups, as the audit words them.
#[must_use]
pub fn findings(procs: &[Proc], cgroups: &[(PathBuf, usize)], run_id: &str) -> Vec<Leftover> {
    let run = Some(run_id);
    let mut out: Vec<Leftover> = procs
        .iter()
        .map(|p| {
            let mut line = p.cmdline.clone();
            if line.len() > CMDLINE_MAX {
                let mut cut = CMDLINE_MAX;
                while !line.is_char_boundary(cut) {
                    cut -= 1;
                }
                line.truncate(cut);
                line.push('…');
            }
            Leftover::new(
                Kind::Process,
                format!("{} ({}): {line}", p.pid, p.comm),
                run,
            )
        })
        .collect();
    out.extend(cgroups.iter().map(|(p, n)| {
        Leftover::new(
            Kind::Cgroup,
            format!("{} ({n} processes)", p.display()),
            run,
        )
    }));
    out
}

/// The identity of host process `hpid`'s executable: `DEV:INO` of the file `/proc/HPID/exe`
/// names (the host user owns the rootless user namespace, so it may look).
///
/// # Errors
/// The process is gone or its executable cannot be looked at.
pub fn executable(hpid: u32) -> std::io::Result<String> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(format!("/proc/{hpid}/exe")).map(|m| format!("{}:{}", m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(root: &Path, pid: u32, comm: &str, argv: &[&str]) {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(&d).expect("dir");
        std::fs::write(d.join("comm"), format!("{comm}\n")).expect("comm");
        let mut raw = argv.join("\0").into_bytes();
        raw.push(0);
        std::fs::write(d.join("cmdline"), raw).expect("cmdline");
    }

    #[test]
    fn a_containers_processes_are_its_pid_namespaces_and_its_cgroups_and_no_others() {
        let t = tempfile::tempdir().expect("tmp");
        let (proc_root, cg) = (t.path().join("proc"), t.path().join("cg"));
        let ns = |pid: u32, inode: &str| {
            let d = proc_root.join(pid.to_string()).join("ns");
            std::fs::create_dir_all(&d).expect("ns");
            std::os::unix::fs::symlink(format!("pid:[{inode}]"), d.join("pid")).expect("link");
            std::os::unix::fs::symlink(format!("net:[{inode}0]"), d.join("net")).expect("link");
        };
        let payload = "user.slice/u.service/app.slice/c-proxy.service/libpod-payload-1";
        for (pid, comm, inode) in [
            (10, "podman-init", "7"),
            (11, "squid", "7"),
            (12, "sleep", "8"), // in a PID namespace nested in the container's: its cgroup
            (13, "nsenter-d", "7"), // joined the PID namespace from outside: another cgroup
            (20, "squid", "9"), // another container's
        ] {
            fake_proc(&proc_root, pid, comm, &[comm]);
            ns(pid, inode);
        }
        std::fs::write(
            proc_root.join("10/cgroup"),
            format!("1:cpu:/\n0::/{payload}\n"),
        )
        .expect("cgroup");
        std::fs::create_dir_all(cg.join(payload).join("nested")).expect("cg");
        std::fs::write(cg.join(payload).join("cgroup.procs"), "10\n11\n").expect("procs");
        std::fs::write(cg.join(payload).join("nested/cgroup.procs"), "12\n99\n").expect("procs");
        let namespaces = namespaces(&proc_root).expect("namespaces");
        let got = container_processes(&proc_root, &cg, 10, "7", &namespaces).expect("look");
        assert_eq!(
            got,
            vec![
                (10, "podman-init".to_string()),
                (11, "squid".to_string()),
                (12, "sleep".to_string()),
                (13, "nsenter-d".to_string()),
            ],
            "99 ended (no /proc entry): skipped"
        );
        assert!(
            container_processes(&proc_root, &cg, 55, "7", &namespaces).is_err(),
            "a first process that is gone: the container does not run"
        );
        assert_eq!(
            namespaces
                .iter()
                .find(|n| n.pid == 13)
                .and_then(|n| n.net_ns.clone()),
            Some("net:[70]".to_string()),
            "the network namespace is read in the same look"
        );
    }

    #[test]
    fn a_process_in_a_held_network_namespace_outside_the_containers_is_a_stranger() {
        let n = |pid: u32, pidns: &str, net: Option<&str>| Namespaces {
            pid,
            pid_ns: format!("pid:[{pidns}]"),
            net_ns: net.map(|i| format!("net:[{i}]")),
        };
        let scan = [
            n(10, "7", Some("70")), // the container's own
            n(11, "7", Some("70")),
            n(30, "1", Some("70")), // `nsenter -U -n` from outside: the host's PID namespace
            n(31, "1", Some("1")),  // a host process
            n(32, "9", Some("90")), // another container's
            n(33, "1", None),       // ended between the reads
        ];
        let members = [10, 11].into_iter().collect();
        assert_eq!(
            strangers(&scan, &["70"], &members),
            vec![(30, "net:[70]".to_string())]
        );
        assert_eq!(
            strangers(&scan, &["70", "90"], &members),
            vec![(30, "net:[70]".to_string()), (32, "net:[90]".to_string())],
            "a namespace held by no member: every process in it is a stranger"
        );
        assert!(strangers(&scan, &[], &members).is_empty());
    }

    #[test]
    fn processes_naming_the_run_are_found_and_others_and_self_are_not() {
        let t = tempfile::tempdir().expect("tmp");
        fake_proc(
            t.path(),
            10,
            "conmon",
            &["/usr/bin/conmon", "-n", "cyclix-r1-agent"],
        );
        fake_proc(
            t.path(),
            11,
            "conmon",
            &["/usr/bin/conmon", "-n", "cyclix-r2-agent"],
        );
        fake_proc(t.path(), 12, "sleep", &["cyclix-r1-sentinel", "86400"]);
        fake_proc(
            t.path(),
            13,
            "cyclix",
            &["cyclix", "leftovers", "cyclix-r1"],
        );
        std::fs::create_dir_all(t.path().join("self")).expect("self");
        fake_proc(
            t.path(),
            14,
            "journalctl",
            &["journalctl", "-u", "cyclix-r1-agent"],
        );
        let found: Vec<Proc> = processes_naming(t.path(), "cyclix-r1", 13)
            .into_iter()
            .filter(|p| is_workload(p, "cyclix-r1-sentinel"))
            .collect();
        let pids: Vec<u32> = found.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [10, 12]);
        assert_eq!(found[1].argv0, "cyclix-r1-sentinel");
        let f = crate::inventory::texts(&findings(&found, &[], "r1"));
        assert_eq!(
            f[0],
            "process 10 (conmon): /usr/bin/conmon -n cyclix-r1-agent"
        );
    }

    #[test]
    fn the_user_manager_cgroup_is_read_from_proc_self_cgroup() {
        assert_eq!(
            user_manager_cgroup(
                "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-cyclix\\x2drun.slice/cyclix-run@demo.service\n"
            )
            .as_deref(),
            Some("/user.slice/user-1000.slice/user@1000.service")
        );
        assert_eq!(user_manager_cgroup("0::/system.slice/foo.service\n"), None);
        assert_eq!(user_manager_cgroup("1:name=systemd:/x\n"), None);
    }

    #[test]
    fn cgroups_named_after_the_run_are_found_with_their_process_count() {
        let t = tempfile::tempdir().expect("tmp");
        let unit = t.path().join("app.slice/cyclix-r1-agent.service");
        std::fs::create_dir_all(unit.join("libpod-payload-x")).expect("dirs");
        std::fs::write(unit.join("cgroup.procs"), "5\n6\n").expect("procs");
        std::fs::create_dir_all(t.path().join("app.slice/cyclix-r2-agent.service")).expect("other");
        let deep = t.path().join("a/b/c/d/cyclix-r1-deep.service");
        std::fs::create_dir_all(&deep).expect("deep");
        let found = cgroups_naming(t.path(), "cyclix-r1");
        assert_eq!(found, vec![(unit.clone(), 2)]);
        assert_eq!(
            crate::inventory::texts(&findings(&[], &found, "r1")),
            vec![format!("cgroup {} (2 processes)", unit.display())]
        );
    }

    #[test]
    fn long_command_lines_are_cut_on_a_char_boundary() {
        let p = Proc {
            pid: 1,
            comm: "x".into(),
            cmdline: "é".repeat(200),
            argv0: String::new(),
        };
        let f = crate::inventory::texts(&findings(&[p], &[], "r1"));
        assert!(f[0].ends_with('…') && f[0].len() < 200, "{}", f[0]);
    }

    #[test]
    fn the_start_time_is_field_22_of_stat_after_the_comm() {
        // Captured on the testbed: `systemd --user`'s stat (starttime 4466611).
        let stat = "336 (systemd) S 1 336 336 0 -1 4194560 2264 0 0 0 9 3 0 0 20 0 1 0 4466611 21131264 2803 18446744073709551615";
        assert_eq!(start_ticks(stat), Some(4_466_611));
        assert_eq!(
            start_ticks("9 (a) b) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77 1"),
            Some(77)
        );
        assert_eq!(start_ticks("garbage"), None);
    }
}
