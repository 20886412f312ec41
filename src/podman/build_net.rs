//! What an image build from a project's files needs of podman (issue 15, item 1): its two
//! networks, the proxy container between them, and the build itself with its output shown as
//! it comes.

use std::path::Path;
use std::time::Duration;

use super::{HINT, PODMAN_QUERY_DEADLINE, Podman, PodmanError, Result, check_name};
use crate::process::{self, ProcessError};

/// What [`Podman::build_streamed`] builds.
#[derive(Clone)]
pub struct BuildCall<'a> {
    /// The tag.
    pub tag: &'a str,
    /// The Containerfile.
    pub containerfile: &'a Path,
    /// The context directory.
    pub context: &'a Path,
    /// The network namespace (`/proc/PID/ns/net`) of a container on the build's internal
    /// network. podman itself runs in it (`podman unshare nsenter --net=PATH -- podman build
    /// …`) and so do the `RUN` steps (`--network=ns:PATH`; rootless buildah cannot attach a
    /// step to a named network itself: "cannot use networks as rootless"). A step's own
    /// `RUN --network=host` is the namespace of the build process, so it is this one too,
    /// and so is every fetch podman makes (`ADD <url>`, a pull, a base image's `ONBUILD`
    /// trigger): nothing of the build reaches the host's network (attack review 17).
    pub netns: &'a str,
    /// The build's own `TMPDIR` (an empty directory). buildah keeps the directories of
    /// `RUN --mount=type=cache` under it (`buildah-cache-UID`, otherwise in `/var/tmp`, shared
    /// by every build of the user): a cache is this build's alone, so no build (another
    /// tenant's, an earlier run's Containerfile) leaves content in it that the inputs digest
    /// does not cover (attack review 17).
    pub tmpdir: &'a Path,
    /// `--build-arg NAME=VALUE` (public values).
    pub args: &'a [(String, String)],
    /// The run's stop (SIGTERM or SIGINT to cyclix) and what ends the build's work then (its
    /// `RUN` steps killed, so podman fails the step and removes its working container itself);
    /// the build is killed if it has not ended 10 s later (`process::run_streaming`).
    pub stop: Option<(&'a std::sync::atomic::AtomicBool, &'a dyn Fn())>,
    /// `--label KEY=VALUE`.
    pub labels: &'a [(&'a str, &'a str)],
    /// Bounds the whole build.
    pub deadline: Duration,
}

impl std::fmt::Debug for BuildCall<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildCall")
            .field("tag", &self.tag)
            .field("containerfile", &self.containerfile)
            .field("netns", &self.netns)
            .finish_non_exhaustive()
    }
}

impl Podman {
    /// Creates network `name` with `labels`, `--internal` when `internal`
    /// (`podman network create [--internal] --label K=V… -- NAME`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::BadName`].
    pub fn network_create(
        &self,
        name: &str,
        internal: bool,
        labels: &[(&str, &str)],
    ) -> Result<()> {
        if internal {
            return self.network_create_internal(name, labels);
        }
        check_name("network name", name)?;
        let label_args: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut args: Vec<&str> = vec!["network", "create"];
        for l in &label_args {
            args.extend(["--label", l]);
        }
        args.extend(["--", name]);
        self.run(&args, None, PODMAN_QUERY_DEADLINE, || {
            format!("creating network {name}")
        })?;
        Ok(())
    }

    /// Starts the detached container `name` of `image` with `run_args` and `labels`
    /// (`podman run -d --name NAME --label K=V… RUN_ARGS… -- IMAGE COMMAND…`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::BadName`].
    pub fn run_detached(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        run_args: &[&str],
        image: &str,
        command: &[&str],
    ) -> Result<()> {
        check_name("container", name)?;
        check_name("image reference", image)?;
        let label_args: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut cmd: Vec<&str> = vec!["run", "-d", "--name", name];
        for l in &label_args {
            cmd.extend(["--label", l]);
        }
        cmd.extend(run_args);
        cmd.extend(["--", image]);
        cmd.extend(command);
        self.run(&cmd, None, PODMAN_QUERY_DEADLINE, || {
            format!("starting container {name} of {image}")
        })?;
        Ok(())
    }

    /// The IPv4 address of container `name` on network `network`.
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`] (not attached).
    pub fn container_ip(&self, name: &str, network: &str) -> Result<String> {
        check_name("container", name)?;
        let format = format!("{{{{(index .NetworkSettings.Networks {network:?}).IPAddress}}}}");
        let action = || format!("reading the address of {name} on {network}");
        let out = self.run(
            &[
                "inspect",
                "--type",
                "container",
                "--format",
                &format,
                "--",
                name,
            ],
            None,
            PODMAN_QUERY_DEADLINE,
            action,
        )?;
        let ip = out.stdout.trim();
        if ip.is_empty() || ip.parse::<std::net::Ipv4Addr>().is_err() {
            return Err(PodmanError::Output {
                action: action(),
                detail: format!("not an IPv4 address: {ip:?}"),
            });
        }
        Ok(ip.to_string())
    }

    /// The first subnet of network `name` in CIDR form.
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn network_subnet(&self, name: &str) -> Result<String> {
        check_name("network", name)?;
        let action = || format!("reading the subnet of network {name}");
        let out = self.run(
            &[
                "network",
                "inspect",
                "--format",
                "{{range .Subnets}}{{.Subnet}} {{end}}",
                "--",
                name,
            ],
            None,
            PODMAN_QUERY_DEADLINE,
            action,
        )?;
        out.stdout
            .split_whitespace()
            .find(|s| s.contains('.'))
            .map(str::to_string)
            .ok_or_else(|| PodmanError::Output {
                action: action(),
                detail: format!("no IPv4 subnet in {:?}", out.stdout.trim()),
            })
    }

    /// The host pid of container `name`'s first process (`.State.Pid`; 0 when not running).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn container_pid(&self, name: &str) -> Result<u32> {
        let action = || format!("reading the pid of {name}");
        let text = self.inspect_container(name, "{{.State.Pid}}", &action)?;
        running_pid(&text, &text, &action)
    }

    /// The host pid of container `name`'s first process and its overlay upper layer on the
    /// host (`.State.Pid`, `.GraphDriver.Data.UpperDir`), in one `podman inspect`.
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`] (not running, or no upper layer).
    pub fn pid_and_upper_dir(&self, name: &str) -> Result<(u32, String)> {
        let action = || format!("reading the pid and upper layer of {name}");
        let text = self.inspect_container(
            name,
            "{{.State.Pid}} {{.GraphDriver.Data.UpperDir}}",
            &action,
        )?;
        match text.split_once(' ') {
            Some((pid, upper)) if upper.starts_with('/') => {
                Ok((running_pid(pid, &text, &action)?, upper.to_string()))
            }
            _ => Err(PodmanError::Output {
                action: action(),
                detail: format!("no pid and upper layer in {text:?}"),
            }),
        }
    }

    /// `podman inspect --type container --format FORMAT -- NAME`'s output, trimmed.
    fn inspect_container(
        &self,
        name: &str,
        format: &str,
        action: &dyn Fn() -> String,
    ) -> Result<String> {
        check_name("container", name)?;
        let out = self.run(
            &[
                "inspect",
                "--type",
                "container",
                "--format",
                format,
                "--",
                name,
            ],
            None,
            PODMAN_QUERY_DEADLINE,
            action,
        )?;
        Ok(out.stdout.trim().to_string())
    }

    /// What container `name` has logged so far (stdout and stderr).
    ///
    /// # Errors
    /// [`PodmanError::Command`].
    pub fn logs(&self, name: &str) -> Result<String> {
        check_name("container", name)?;
        let out = self.run(&["logs", "--", name], None, PODMAN_QUERY_DEADLINE, || {
            format!("reading the log of {name}")
        })?;
        Ok(format!("{}{}", out.stdout, out.stderr))
    }

    /// Removes image `reference` if it exists (`podman image rm --force --ignore`).
    ///
    /// # Errors
    /// [`PodmanError::Command`].
    pub fn image_remove(&self, reference: &str) -> Result<()> {
        check_name("image reference", reference)?;
        self.run(
            &["image", "rm", "--force", "--ignore", "--", reference],
            None,
            PODMAN_QUERY_DEADLINE,
            || format!("removing image {reference}"),
        )?;
        Ok(())
    }

    /// Removes directory `dir` and everything in it as root of the user namespace
    /// (`podman unshare rm -rf -- DIR`): a build's cache may hold files of subordinate ids
    /// the user cannot remove itself.
    ///
    /// # Errors
    /// [`PodmanError::Command`].
    pub fn unshare_remove(&self, dir: &Path) -> Result<()> {
        let d = dir.to_string_lossy();
        check_name("directory", &d)?;
        self.run(
            &["unshare", "rm", "-rf", "--", &d],
            None,
            PODMAN_QUERY_DEADLINE,
            || format!("removing {d}"),
        )?;
        Ok(())
    }

    /// The full ids of the containers podman does not manage itself (buildah's working
    /// containers: `podman ps --all --external`).
    ///
    /// # Errors
    /// podman cannot run or runs past its deadline.
    pub fn external_containers(&self) -> Result<Vec<String>> {
        let out = self.run(
            &[
                "ps",
                "--all",
                "--external",
                "--no-trunc",
                "--format",
                "{{.ID}}",
            ],
            None,
            PODMAN_QUERY_DEADLINE,
            || "listing the external containers".to_string(),
        )?;
        Ok(out
            .stdout
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(str::to_owned)
            .collect())
    }

    /// Kills (SIGKILL) every process in the network namespace of process `holder` that runs in
    /// a PID namespace of its own (neither the host's, where podman itself runs in that network
    /// namespace, nor the holder's): a build's `RUN` steps (each in a scope of its own that no
    /// kill of podman reaches, measured). podman then fails the step and removes its working
    /// container itself. Looked at from inside the rootless user
    /// namespace (`podman unshare`), so a step running as another user inside is seen and
    /// killed too. Returns how many were killed.
    ///
    /// # Errors
    /// podman cannot run or runs past its deadline.
    pub fn kill_in_netns_of(&self, holder: u32) -> Result<u32> {
        let pid = holder.to_string();
        let script = r#"ns=$(readlink "/proc/$1/ns/net") || exit 0
hp=$(readlink "/proc/$1/ns/pid"); me=$(readlink /proc/self/ns/pid); n=0
for d in /proc/[0-9]*; do p=${d#/proc/}; [ "$p" = "$1" ] && continue
  [ "$(readlink "$d/ns/net" 2>/dev/null)" = "$ns" ] || continue
  pp=$(readlink "$d/ns/pid" 2>/dev/null); [ "$pp" = "$me" ] || [ "$pp" = "$hp" ] && continue
  kill -KILL "$p" 2>/dev/null && n=$((n+1)); done; echo "$n""#;
        let out = self.run(
            &["unshare", "sh", "-c", script, "sh", &pid],
            None,
            PODMAN_QUERY_DEADLINE,
            || format!("killing the processes in the network namespace of {pid}"),
        )?;
        Ok(out.stdout.trim().parse().unwrap_or(0))
    }

    /// Builds `call` (`TMPDIR=TMP podman unshare setpriv --pdeathsig KILL nsenter --net=NETNS --
    /// podman build --network=ns:NETNS
    /// --layers=false --force-rm --pull=never --tag TAG --file FILE --build-arg …  --label …
    /// -- CONTEXT`), handing each line of podman's output to `on_line` as it comes; returns
    /// the last `keep` lines, and whether it succeeded. `--layers=false` and `--force-rm`: a
    /// failed build leaves no intermediate image or container behind. `--pull=never`: the
    /// build has no route to a registry, its bases are local beforehand.
    ///
    /// # Errors
    /// [`PodmanError::Command`] when podman cannot start or runs past the deadline;
    /// [`PodmanError::BadName`] when `netns` is not `/proc/PID/ns/net`.
    pub fn build_streamed(
        &self,
        call: &BuildCall<'_>,
        keep: usize,
        on_line: &mut dyn FnMut(&str),
    ) -> Result<(bool, Vec<String>)> {
        check_name("image tag", call.tag)?;
        let pid = call
            .netns
            .strip_prefix("/proc/")
            .and_then(|r| r.strip_suffix("/ns/net"));
        if !pid.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) {
            return Err(PodmanError::BadName {
                what: "network namespace (/proc/PID/ns/net)",
                name: call.netns.to_string(),
            });
        }
        let file = call.containerfile.to_string_lossy();
        let context = call.context.to_string_lossy();
        let enter = format!("--net={}", call.netns);
        let net = format!("--network=ns:{}", call.netns);
        let pairs: Vec<String> = call.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let labels: Vec<String> = call
            .labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        // cyclix's death (SIGKILL) takes `podman unshare` with it (PR_SET_PDEATHSIG), and so
        // the build (the setpriv below): a build never runs on without its run (issue 36).
        let mut argv: Vec<&str> = vec![
            "--pdeathsig",
            "KILL",
            "--",
            &self.bin,
            "unshare",
            // The build dies with `podman unshare` (which the deadline kills): otherwise it
            // ran on, reparented (measured).
            "setpriv",
            "--pdeathsig",
            "KILL",
            "nsenter",
            &enter,
            "--",
            &self.bin,
            "build",
            &net,
            "--layers=false",
            "--force-rm",
            "--pull=never",
            "--tag",
            call.tag,
            "--file",
            &file,
        ];
        for p in &pairs {
            argv.extend(["--build-arg", p.as_str()]);
        }
        for l in &labels {
            argv.extend(["--label", l.as_str()]);
        }
        argv.extend(["--", &context]);
        let tmpdir = call.tmpdir.to_string_lossy();
        let env = [("TMPDIR", Some(tmpdir.as_ref()))];
        let out = process::run_streaming(
            "setpriv",
            &argv,
            &env,
            call.deadline,
            HINT,
            keep,
            call.stop,
            on_line,
        )
        .map_err(|source: ProcessError| PodmanError::Command {
            action: format!("building image {}", call.tag),
            source,
        })?;
        Ok((out.status.success(), out.tail))
    }
}

/// `pid` as a running container's pid (not 0), else an error about `text` for `action`.
fn running_pid(pid: &str, text: &str, action: &dyn Fn() -> String) -> Result<u32> {
    match pid.parse::<u32>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(PodmanError::Output {
            action: action(),
            detail: format!("not a running pid: {text:?}"),
        }),
    }
}
