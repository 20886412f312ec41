//! gVisor's `runsc` as tier `gvisor` runs it, as data: the runtime podman is given (path,
//! version, runtime flags) and the pure decisions over what the host adapter
//! (`host::facts::gvisor`) found. Pure.
//!
//! Sources: runsc(8) flags `--network=host` (use the network namespace the container is in:
//! rootless runsc refuses its own netstack in a namespace it did not make, "cannot run with
//! network enabled in root network namespace") and `--ignore-cgroups` (runsc's cgroup setup
//! needs the `memory` controller delegated, "mandatory cgroup controller \"memory\" is
//! missing"; seen on the testbed, whose user manager delegates none); podman(1) `--runtime`,
//! `--runtime-flag`.

use serde::{Deserialize, Serialize};

/// The runtime flag every tier-`gvisor` container gets: the pod's network namespace, served by
/// the host kernel's network stack (the run's internal network and proxy bound it).
pub const NETWORK_HOST: &str = "network=host";

/// The runtime flag that lets the sandbox open a host FIFO in its mounts (runsc's default:
/// none): the agent's `cyclix agent-wait` waits for its go and its claim on FIFOs in the
/// read-only control directory cyclix binds in (`render::plan::CTL_PATH`), which gVisor refuses
/// otherwise (`open`: "Operation not permitted", seen with runsc 0.0~20240729). It lets open
/// what exists; it creates nothing on the host.
pub const HOST_FIFO_OPEN: &str = "host-fifo=open";

/// The runtime flag that makes runsc apply the OCI spec's seccomp filter (podman's default
/// profile) inside the sandbox too (runsc's default: it does not; P3 sees `Seccomp 2` then).
pub const OCI_SECCOMP: &str = "oci-seccomp";

/// The annotation that makes runsc start a sandbox of the container's own: podman 4.3 marks a
/// pod's container `io.kubernetes.cri-o.ContainerType=container` with the infra container's id
/// as its `SandboxID`, and runsc then tries to join that sandbox, which runs on the default
/// runtime ("cannot load sandbox: … .state: no such file or directory", exit 127; seen on the
/// bookworm testbed). A user annotation of the same key wins.
pub const SANDBOX_ANNOTATION: &str = "io.kubernetes.cri-o.ContainerType=sandbox";

/// The runtime flag for a user manager without the `memory` or `pids` controller delegated:
/// runsc sets no cgroup limits then (as podman's own cannot either).
pub const IGNORE_CGROUPS: &str = "ignore-cgroups";

/// The OCI runtime the agent and the gate run on under tier `gvisor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OciRuntime {
    /// Absolute path of `runsc`.
    pub path: String,
    /// What `runsc --version` said of itself (`0.0~20240729.0`).
    pub version: String,
    /// runsc's flags (`network=host`, maybe `ignore-cgroups`), each passed as
    /// `--runtime-flag=FLAG`.
    pub flags: Vec<String>,
}

impl OciRuntime {
    /// What `cyclix render`, `spec render` and `export` show for a tier-`gvisor` spec when no
    /// run looked at this host: `runsc` as podman finds it, with `network=host`.
    #[must_use]
    pub fn preview() -> Self {
        Self {
            path: "runsc".to_string(),
            version: String::new(),
            flags: vec![
                NETWORK_HOST.to_string(),
                HOST_FIFO_OPEN.to_string(),
                OCI_SECCOMP.to_string(),
            ],
        }
    }

    /// podman's options for it (global options, accepted after `run` too): `--runtime=PATH`,
    /// one `--runtime-flag=FLAG` per flag, and [`SANDBOX_ANNOTATION`].
    #[must_use]
    pub fn podman_args(&self) -> Vec<String> {
        std::iter::once(format!("--runtime={}", self.path))
            .chain(self.flags.iter().map(|f| format!("--runtime-flag={f}")))
            .chain(std::iter::once(format!(
                "--annotation={SANDBOX_ANNOTATION}"
            )))
            .collect()
    }

    /// One line for records and `cyclix check`: `runsc 0.0~20240729.0 (/usr/bin/runsc;
    /// runtime flags network=host, ignore-cgroups)`.
    #[must_use]
    pub fn describe(&self) -> String {
        format!(
            "runsc {} ({}; runtime flags {})",
            if self.version.is_empty() {
                "(version not read)"
            } else {
                &self.version
            },
            self.path,
            self.flags.join(", ")
        )
    }
}

/// The processes `runsc ps` lists (its table: `UID PID PPID C TTY STIME TIME CMD`, the command
/// name last): `(pid in the sandbox, command)`, in its order. A line that is not such a row
/// is an error, never skipped. Pure.
///
/// # Errors
/// The header is missing or a row does not have a pid and a command.
pub fn parse_ps(table: &str) -> Result<Vec<(u32, String)>, String> {
    let mut lines = table.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().unwrap_or("");
    let cols: Vec<&str> = header.split_whitespace().collect();
    if cols.get(1) != Some(&"PID") || cols.last() != Some(&"CMD") {
        return Err(format!(
            "`runsc ps` printed no process table (first line {header:?})"
        ));
    }
    lines
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match (f.get(1).and_then(|p| p.parse().ok()), f.last()) {
                (Some(pid), Some(cmd)) if f.len() >= cols.len() => Ok((pid, (*cmd).to_string())),
                _ => Err(format!(
                    "`runsc ps` printed a row cyclix cannot read: {l:?}"
                )),
            }
        })
        .collect()
}

/// The version in `runsc --version`'s first line (`runsc version 0.0~20240729.0`).
#[must_use]
pub fn parse_version(stdout: &str) -> Option<String> {
    let first = stdout.lines().next()?.trim();
    let v = first.strip_prefix("runsc version ")?.trim();
    (!v.is_empty() && !v.contains(char::is_whitespace)).then(|| v.to_string())
}

/// runsc's flags given the controllers the user manager delegates (its `cgroup.controllers`):
/// always [`NETWORK_HOST`], [`HOST_FIFO_OPEN`] and [`OCI_SECCOMP`]; [`IGNORE_CGROUPS`] when `memory` or `pids`
/// is not among them.
#[must_use]
pub fn runtime_flags(delegated: &[String]) -> Vec<String> {
    let has = |c: &str| delegated.iter().any(|d| d == c);
    let mut flags = vec![
        NETWORK_HOST.to_string(),
        HOST_FIFO_OPEN.to_string(),
        OCI_SECCOMP.to_string(),
    ];
    if !(has("memory") && has("pids")) {
        flags.push(IGNORE_CGROUPS.to_string());
    }
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_runscs_own_first_line_only() {
        assert_eq!(
            parse_version("runsc version 0.0~20240729.0\nspec: 1.2.0\n").as_deref(),
            Some("0.0~20240729.0")
        );
        assert_eq!(parse_version("runc version 1.1.5\n"), None);
        assert_eq!(parse_version(""), None);
        assert_eq!(parse_version("runsc version \n"), None);
    }

    #[test]
    fn the_sentrys_process_table_is_read_row_by_row_and_a_strange_row_refused() {
        let t = "UID       PID       PPID      C         TTY       STIME     TIME      CMD\n\
                 0         1         0         3         ?         17:26     30ms      catatonit\n\
                 0         2         1         1         ?         17:26     10ms      cyclix\n";
        assert_eq!(
            parse_ps(t),
            Ok(vec![
                (1, "catatonit".to_string()),
                (2, "cyclix".to_string())
            ])
        );
        assert!(parse_ps("").is_err());
        assert!(parse_ps("[1,2,3]").is_err());
        let short = "UID PID PPID C TTY STIME TIME CMD\n0 x 0 3 ? 17:26 30ms sh\n";
        assert!(parse_ps(short).is_err());
    }

    #[test]
    fn cgroups_are_ignored_only_without_memory_or_pids_delegated() {
        let s = |v: &[&str]| v.iter().map(|x| (*x).to_string()).collect::<Vec<_>>();
        let base = [NETWORK_HOST, HOST_FIFO_OPEN, OCI_SECCOMP];
        let ignoring = [NETWORK_HOST, HOST_FIFO_OPEN, OCI_SECCOMP, IGNORE_CGROUPS];
        assert_eq!(runtime_flags(&s(&["cpu", "memory", "pids"])), s(&base));
        assert_eq!(runtime_flags(&s(&["memory", "pids"])), s(&base));
        assert_eq!(runtime_flags(&s(&["memory"])), s(&ignoring));
        assert_eq!(runtime_flags(&[]), s(&ignoring));
    }

    #[test]
    fn podman_gets_the_path_and_one_option_per_flag() {
        let r = OciRuntime {
            path: "/usr/bin/runsc".into(),
            version: "0.0~20240729.0".into(),
            flags: vec![NETWORK_HOST.into(), IGNORE_CGROUPS.into()],
        };
        assert_eq!(
            r.podman_args(),
            [
                "--runtime=/usr/bin/runsc",
                "--runtime-flag=network=host",
                "--runtime-flag=ignore-cgroups",
                "--annotation=io.kubernetes.cri-o.ContainerType=sandbox"
            ]
        );
        assert_eq!(
            r.describe(),
            "runsc 0.0~20240729.0 (/usr/bin/runsc; runtime flags network=host, ignore-cgroups)"
        );
    }
}
