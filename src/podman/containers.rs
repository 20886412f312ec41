//! Containers: a one-shot `podman run --rm` (to the terminal or a file), forced removal,
//! `exec`, `top`, and removing a tree inside the user namespace.

use std::time::Duration;

use super::{HINT, PODMAN_QUERY_DEADLINE, Podman, PodmanError, Result, check_name, parse_top};
use crate::process;

/// How long `runsc ps` may take.
pub const GVISOR_PS_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

impl Podman {
    /// Runs a throwaway container and returns its output whatever its exit status:
    /// `podman run --rm --label K=V… RUN_ARGS… -- IMAGE ARGV…`. `deadline` bounds it.
    ///
    /// # Errors
    /// [`PodmanError::Command`] when podman cannot be started or runs past `deadline`;
    /// [`PodmanError::BadName`] for an image that starts with `-`.
    pub fn run_rm(
        &self,
        labels: &[(&str, &str)],
        run_args: &[&str],
        image: &str,
        argv: &[&str],
        deadline: Duration,
    ) -> Result<process::Output> {
        check_name("image reference", image)?;
        let label_args = label_args(labels);
        let cmd = run_argv(&["run", "--rm"], &label_args, run_args, image, argv);
        process::run_status(&self.bin, &cmd, None, deadline, HINT).map_err(|source| {
            PodmanError::Command {
                action: format!("running a container of {image}"),
                source,
            }
        })
    }

    /// [`Podman::run_rm`] with the container's stdout written to the new file `out` (mode
    /// 0600) instead of captured, and the client killed once it has written more than `cap`
    /// bytes ([`process::ProcessError::TooLarge`]). The container itself is named `name`, so a
    /// caller whose client was killed (deadline, cap) removes it with `podman rm -f NAME`.
    ///
    /// # Errors
    /// As [`Podman::run_rm`], plus the cap.
    #[allow(clippy::too_many_arguments)]
    pub fn run_rm_to_file(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        run_args: &[&str],
        image: &str,
        argv: &[&str],
        deadline: Duration,
        out: (&std::path::Path, u64),
    ) -> Result<process::Output> {
        check_name("image reference", image)?;
        check_name("container", name)?;
        let label_args = label_args(labels);
        let cmd = run_argv(
            &["run", "--rm", "--name", name],
            &label_args,
            run_args,
            image,
            argv,
        );
        process::run_with(
            &self.bin,
            &cmd,
            &process::Opts {
                deadline,
                hint: HINT,
                stdout_file: Some(out),
                ..process::Opts::default()
            },
        )
        .map_err(|source| PodmanError::Command {
            action: format!("running container {name} of {image}"),
            source,
        })
    }

    /// Removes the container `name` at once if it exists (`podman rm --force --ignore
    /// --time 0`).
    ///
    /// # Errors
    /// [`PodmanError::Command`].
    pub fn rm_force(&self, name: &str) -> Result<()> {
        check_name("container", name)?;
        self.run(
            &["rm", "--force", "--ignore", "--time", "0", name],
            None,
            PODMAN_QUERY_DEADLINE,
            || format!("removing container {name}"),
        )?;
        Ok(())
    }

    /// Removes the tree `path` as plain files from inside the rootless user namespace
    /// (`podman unshare rm -rf --one-file-system -- PATH`): there the user is root over every
    /// file of its sub-uids, so files a container's non-root user made (owned by a sub-uid),
    /// directories made unreadable (mode 000), FIFOs and very deep trees all go. Symlinks are
    /// removed, never followed. `deadline` bounds it.
    ///
    /// # Errors
    /// [`PodmanError::Command`]: podman failed, `rm` failed, or the deadline passed.
    pub fn unshare_rm_tree(&self, path: &std::path::Path, deadline: Duration) -> Result<()> {
        self.unshare_rm_trees(&[path], deadline)
    }

    /// [`Self::unshare_rm_tree`] for every tree of `paths` in ONE `podman unshare rm` (a
    /// podman start is about 30 ms on the testbed: a run's teardown removes two or three
    /// trees). Nothing to do for an empty list. `deadline` bounds the whole call.
    ///
    /// # Errors
    /// [`PodmanError::Command`]: podman failed, `rm` failed on any of them (the message names
    /// them all), or the deadline passed.
    pub fn unshare_rm_trees(&self, paths: &[&std::path::Path], deadline: Duration) -> Result<()> {
        if paths.is_empty() {
            return Ok(());
        }
        let words: Vec<std::borrow::Cow<'_, str>> =
            paths.iter().map(|p| p.to_string_lossy()).collect();
        let mut argv = vec!["unshare", "rm", "-rf", "--one-file-system", "--"];
        argv.extend(words.iter().map(AsRef::as_ref));
        self.run(&argv, None, deadline, || {
            let named: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            format!("removing {} (podman unshare rm -rf)", named.join(", "))
        })?;
        Ok(())
    }

    /// The environments of host processes `pids` read from inside the rootless user namespace
    /// in ONE `podman unshare` (a shell loop printing each `/proc/PID/environ` through `od` as
    /// hex, so no byte the sandbox chose can forge the framing): for processes the host user
    /// cannot read directly, made non-dumpable (an execute-only binary) inside a nested keep-id
    /// user namespace, whose `mm->user_ns` the host user holds no `CAP_SYS_PTRACE` in, while
    /// root of the rootless namespace does (measured with podman 5.4 on the testbed; ptrace(2)
    /// "Ptrace access mode checking"). One call whatever the count: a crowd of such processes
    /// costs one podman start (about 50 ms), not one each. `None` for a pid still unreadable
    /// (or gone). `deadline` bounds the whole call.
    ///
    /// # Errors
    /// [`PodmanError::Command`]: podman failed or the deadline passed.
    pub fn unshare_environs(
        &self,
        pids: &[u32],
        deadline: Duration,
    ) -> Result<Vec<(u32, Option<Vec<u8>>)>> {
        const LOOP: &str = "for p in \"$@\"; do echo \"pid $p\"; od -An -v -tx1 \"/proc/$p/environ\" 2>/dev/null || echo unreadable; done";
        let words: Vec<String> = pids.iter().map(u32::to_string).collect();
        let mut argv = vec!["unshare", "sh", "-c", LOOP, "sh"];
        argv.extend(words.iter().map(String::as_str));
        let out = self.run(&argv, None, deadline, || {
            format!(
                "reading the environment of {} process(es) in the rootless user namespace (podman unshare)",
                pids.len()
            )
        })?;
        Ok(parse_environs(&out.stdout))
    }

    /// Runs `argv` inside the running container `container` (`podman exec`) and returns its
    /// output whatever its exit status.
    ///
    /// # Errors
    /// [`PodmanError::Command`] when podman cannot run or the deadline passes.
    pub fn exec(
        &self,
        container: &str,
        argv: &[&str],
        deadline: Duration,
    ) -> Result<process::Output> {
        check_name("container", container)?;
        let mut cmd = vec!["exec", container];
        cmd.extend_from_slice(argv);
        process::run_status(&self.bin, &cmd, None, deadline, HINT).map_err(|source| {
            PodmanError::Command {
                action: format!(
                    "running {} in container {container}",
                    argv.first().copied().unwrap_or("")
                ),
                source,
            }
        })
    }

    /// [`Podman::exec`] whose output is kept as it comes: the exit code and the last `keep`
    /// lines (stdout and stderr as they came), and on the deadline the lines printed up to the
    /// kill in the error ([`crate::process::ProcessError::Deadline`]'s `tail`). Each of `env`
    /// (name, value) is given as `--env NAME`, its value in podman's own environment: never in
    /// an argv.
    ///
    /// # Errors
    /// [`PodmanError::Command`]: podman cannot start, or the deadline passed.
    pub fn exec_streamed(
        &self,
        container: &str,
        argv: &[&str],
        env: &[(&str, &str)],
        deadline: Duration,
        keep: usize,
    ) -> Result<(i32, Vec<String>)> {
        check_name("container", container)?;
        let mut cmd = vec!["exec"];
        for (k, _) in env {
            cmd.extend(["--env", k]);
        }
        cmd.push(container);
        cmd.extend_from_slice(argv);
        let values: Vec<(&str, Option<&str>)> = env.iter().map(|(k, v)| (*k, Some(*v))).collect();
        let out = process::run_streaming(
            &self.bin,
            &cmd,
            &values,
            deadline,
            HINT,
            keep,
            None,
            &mut |_| {},
        )
        .map_err(|source| PodmanError::Command {
            action: format!(
                "running {} in container {container}",
                argv.first().copied().unwrap_or("")
            ),
            source,
        })?;
        Ok((out.status.code().unwrap_or(-1), out.tail))
    }

    /// The full id of `container` (`podman container inspect --format {{.Id}}`).
    ///
    /// # Errors
    /// [`PodmanError::Command`] (no such container), [`PodmanError::Output`].
    pub fn container_id(&self, container: &str) -> Result<String> {
        check_name("container", container)?;
        self.query(
            &[
                "container",
                "inspect",
                "--format",
                "{{.Id}}",
                "--",
                container,
            ],
            &format!("reading the id of container {container}"),
            |out| {
                let id = out.trim();
                if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                    Ok(id.to_string())
                } else {
                    Err(serde::de::Error::custom(format!(
                        "not a container id: {id:?}"
                    )))
                }
            },
        )
    }

    /// The processes of the tier-`gvisor` container `container` as gVisor's kernel lists
    /// them: `(pid in the sandbox, command)` from `RUNSC --root $XDG_RUNTIME_DIR/runsc ps ID`
    /// (runsc asks the sandbox's Sentry over its control socket; podman gives a rootless
    /// runtime its state directory below `$XDG_RUNTIME_DIR`, named after the runtime: seen with
    /// podman 5.4 and 4.3), within [`GVISOR_PS_DEADLINE`].
    ///
    /// # Errors
    /// The container's id cannot be read, `$XDG_RUNTIME_DIR` is unset, runsc failed or printed
    /// no process table (`tier::runsc::parse_ps`).
    pub fn gvisor_processes(&self, container: &str, runsc: &str) -> Result<Vec<(u32, String)>> {
        let id = self.container_id(container)?;
        let action = format!("listing the processes of {container} with runsc ps");
        let root = std::env::var_os("XDG_RUNTIME_DIR").ok_or_else(|| PodmanError::Output {
            action: action.clone(),
            detail: "XDG_RUNTIME_DIR is not set: runsc's state cannot be found".into(),
        })?;
        let root_arg = format!(
            "--root={}",
            std::path::Path::new(&root).join("runsc").display()
        );
        let opts = crate::process::Opts {
            deadline: GVISOR_PS_DEADLINE,
            hint: "is gVisor's runsc installed?",
            ..crate::process::Opts::default()
        };
        let out =
            crate::process::run_with_ok(runsc, &[&root_arg, "ps", &id], &opts).map_err(|e| {
                PodmanError::Output {
                    action: action.clone(),
                    detail: e.to_string(),
                }
            })?;
        crate::tier::runsc::parse_ps(&out.stdout)
            .map_err(|detail| PodmanError::Output { action, detail })
    }

    /// The host pids and command names of the processes in `container` (`podman top CONTAINER
    /// hpid comm`), as the host sees them.
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    ///
    /// A process that exits while podman reads it makes `podman top` fail with exit 125 and
    /// `read /proc/PID/FILE: no such process` (seen with `stat` and `cmdline` when P6's child
    /// ended mid-listing) or `… no such file or directory`: that is asked again, at most
    /// [`TOP_TRIES`] times in all.
    pub fn top_hpids(&self, container: &str) -> Result<Vec<(u32, String)>> {
        check_name("container", container)?;
        let mut tries = 1;
        loop {
            let got = self.query(
                &["top", container, "hpid", "comm"],
                &format!("listing the processes of container {container}"),
                |out| Ok(parse_top(out)),
            );
            match got {
                Err(e) if tries < TOP_TRIES && vanished(&e) => tries += 1,
                other => return other,
            }
        }
    }
}

/// The records of [`Podman::unshare_environs`]: `pid N` lines, each followed by `od` hex lines
/// or `unreadable`. Pure.
fn parse_environs(out: &str) -> Vec<(u32, Option<Vec<u8>>)> {
    let mut recs: Vec<(u32, Option<Vec<u8>>)> = Vec::new();
    for line in out.lines() {
        if let Some(p) = line
            .strip_prefix("pid ")
            .and_then(|p| p.trim().parse().ok())
        {
            recs.push((p, Some(Vec::new())));
        } else if let Some((_, bytes)) = recs.last_mut() {
            if line.trim() == "unreadable" {
                *bytes = None;
            } else if let Some(b) = bytes.as_mut() {
                b.extend(
                    line.split_whitespace()
                        .filter_map(|h| u8::from_str_radix(h, 16).ok()),
                );
            }
        }
    }
    recs
}

/// `KEY=VALUE` for each label.
fn label_args(labels: &[(&str, &str)]) -> Vec<String> {
    labels.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// The argv of `podman run`: `head`, a `--label` per label, `run_args`, `--`, the image and its
/// command.
fn run_argv<'a>(
    head: &[&'a str],
    label_args: &'a [String],
    run_args: &[&'a str],
    image: &'a str,
    argv: &[&'a str],
) -> Vec<&'a str> {
    let mut cmd = head.to_vec();
    for l in label_args {
        cmd.extend(["--label", l.as_str()]);
    }
    cmd.extend(run_args);
    cmd.push("--");
    cmd.push(image);
    cmd.extend(argv);
    cmd
}

#[cfg(test)]
mod environ_tests {
    #[test]
    fn od_records_parse_per_pid_and_unreadable_is_none() {
        let out = "pid 12\n 41 3d 31 00 42\n 3d 32 00\npid 13\nunreadable\npid 14\n";
        assert_eq!(
            super::parse_environs(out),
            [
                (12, Some(b"A=1\0B=2\0".to_vec())),
                (13, None),
                (14, Some(Vec::new()))
            ]
        );
    }
}

/// How many times [`Podman::top_hpids`] asks when a process vanished under `podman top`.
pub const TOP_TRIES: u32 = 3;

/// Whether `e` is `podman top` failing on a process that exited while it read it: a
/// `/proc/PID/…` path followed by `: no such process` or `: no such file or directory`,
/// whichever file of the process podman was reading. Pure.
fn vanished(e: &PodmanError) -> bool {
    matches!(e, PodmanError::Command { .. }) && names_a_vanished_process(&e.to_string())
}

/// Whether `text` holds `/proc/DIGITS/REST: no such process` (or `: no such file or
/// directory`), REST having no space or colon. Pure.
fn names_a_vanished_process(text: &str) -> bool {
    text.match_indices("/proc/").any(|(at, m)| {
        let rest = &text[at + m.len()..];
        let pid_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let Some(file) = rest[pid_len..].strip_prefix('/').filter(|_| pid_len > 0) else {
            return false;
        };
        let end = file
            .find(|c: char| c == ':' || c.is_whitespace())
            .unwrap_or(file.len());
        end > 0
            && [": no such process", ": no such file or directory"]
                .iter()
                .any(|errno| file[end..].starts_with(errno))
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt as _;

    use super::*;

    fn failed(stderr: &str) -> PodmanError {
        PodmanError::Command {
            action: "listing the processes of container c".into(),
            source: process::ProcessError::Failed {
                argv: "podman top c hpid comm".into(),
                status: std::process::ExitStatus::from_raw(125 << 8),
                stderr: stderr.into(),
                stdout: String::new(),
            },
        }
    }

    #[test]
    fn only_a_process_that_vanished_under_podman_top_is_asked_again() {
        assert!(vanished(&failed(
            "Error: read /proc/38/stat: no such process"
        )));
        // The CI run of stop 26: the same race, another file of the process.
        assert!(vanished(&failed(
            "Error: read /proc/39/cmdline: no such process"
        )));
        assert!(vanished(&failed(
            "Error: open /proc/40/status: no such file or directory"
        )));
        assert!(!vanished(&failed(
            "Error: read /proc/self: no such process"
        )));
        assert!(!vanished(&failed("Error: read /proc/41/: no such process")));
        assert!(!vanished(&failed(
            "Error: read /proc/42/stat: permission denied"
        )));
        assert!(!vanished(&failed(
            "Error: no container with name or ID \"c\" found"
        )));
        assert!(!vanished(&PodmanError::Output {
            action: "a".into(),
            detail: "/stat: no such process".into(),
        }));
    }
}
