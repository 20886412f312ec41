//! Images built from a project's own setup files (`agent.build`, `gate.build`,
//! `services[].build`; issue 15, item 1).
//!
//! What goes in is read from the run's base commit in the user's repository, never from a
//! work tree: the Containerfile's blob and the context's tree (`git archive` into a fresh
//! directory). The image is tagged `localhost/cyclix-build-TENANT-ROLE:DIGEST`, where DIGEST
//! covers every input ([`inputs_digest`]: the Containerfile's and the context's object ids,
//! the build args, the ids of the local base images, the pinned references, the build's
//! allowlist), so unchanged inputs reuse the image and a changed one builds a new one.
//!
//! The build's `RUN` steps have one network: an internal one (no route out) whose only other
//! member is a squid proxy rendered like a run's (`render::proxy::squid_conf`) with
//! `build.egress` as its allowlist (ports 80 and 443), reached through the `http_proxy` /
//! `https_proxy` build args. podman itself builds inside that network namespace
//! ([`crate::podman::BuildCall::netns`]), so a step's `RUN --network=host`, `ADD <url>` and a
//! base image's `ONBUILD` trigger have no other way out either (attack review 17). Base images
//! must be local or pinned by digest (a pinned one is pulled before the build) and `ADD <url>`
//! is refused ([`containerfile::bases`]), each with a clear error up front. Whatever
//! the outcome, the proxy, both networks and the context directory are removed; podman builds
//! with `--layers=false --force-rm`, so a failed build leaves no image.

pub mod containerfile;
pub mod devcontainer;
mod inputs;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use sha2::Digest as _;

use crate::git::Git;
use crate::naming::{RunNames, label};
use crate::podman::{BuildCall, Podman};
use crate::spec::{Build, Egress};

/// The label on a built image holding the full digest of its inputs.
pub const INPUTS_LABEL: &str = "io.cyclix.build.inputs";

/// Deadline of pulling one pinned base image before the build.
const PULL_DEADLINE: Duration = Duration::from_secs(600);

/// How long the build's proxy may take to listen.
const PROXY_READY: Duration = Duration::from_secs(30);

/// The most bytes of a Containerfile cyclix reads (1 MiB).
const MAX_CONTAINERFILE: u64 = 1024 * 1024;

/// The largest build context, as a tar archive (4 GiB).
const MAX_CONTEXT: u64 = 4 * 1024 * 1024 * 1024;

/// Lines of podman's output kept for the record of a failed build.
pub const TAIL_LINES: usize = 40;

/// The port the build's proxy listens on.
const PROXY_PORT: u16 = 3128;

/// One image to build.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The tenant (the image's name and labels).
    pub tenant: &'a str,
    /// The user's repository.
    pub repo: &'a Path,
    /// The commit whose files are built (the run's base).
    pub base: &'a str,
    /// What to build.
    pub build: &'a Build,
    /// The tag without its digest (`localhost/cyclix-build-TENANT-ROLE`).
    pub repository: &'a str,
    /// The id the build's objects are named and labelled with (`cyclix-ID-build…`,
    /// `io.cyclix.run=ID`): the run's id, so its teardown sweeps them too.
    pub id: &'a str,
    /// The run's stop (SIGTERM or SIGINT): the build is killed once it is set.
    pub stop: Option<&'a std::sync::atomic::AtomicBool>,
}

/// A built (or reused) image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// `REPOSITORY:DIGEST`.
    pub reference: String,
    /// Whether it was built now (`false`: the image of these inputs was there).
    pub built: bool,
}

/// Why a build failed, with podman's last lines (for the run record).
#[derive(Debug, thiserror::Error)]
#[error("building {role} image {tag} from {containerfile} failed; podman's last lines:\n{}", tail.join("\n"))]
pub struct BuildFailed {
    /// The build's role.
    pub role: String,
    /// The tag it would have had.
    pub tag: String,
    /// The Containerfile, repository-relative.
    pub containerfile: String,
    /// podman's last output lines.
    pub tail: Vec<String>,
}

/// The sha256 (hex) of a build's inputs, each on its own line.
#[must_use]
pub fn inputs_digest(parts: &[String]) -> String {
    let mut h = sha2::Sha256::new();
    h.update(b"cyclix-build-v1\n");
    for p in parts {
        h.update(p.as_bytes());
        h.update(b"\n");
    }
    h.finalize().iter().fold(String::new(), |mut s, b| {
        use std::fmt::Write as _;
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Builds `req` unless an image of the same inputs exists; `progress` gets every line of
/// podman's output as it comes and cyclix's own steps.
///
/// # Errors
/// An input error naming the spec's key or the Containerfile's line and the fix (a missing
/// file, a base that is neither local nor pinned, `ADD <url>`); [`BuildFailed`] with podman's
/// last lines; git or podman failures.
#[allow(clippy::too_many_lines)] // one build, step by step
pub fn build(req: &Request<'_>, progress: &mut dyn FnMut(&str)) -> Result<Built> {
    let b = req.build;
    let git = Git::new(req.repo);
    let scratch = tempfile::tempdir().context("creating a build directory")?;
    let inputs::Inputs {
        file,
        text,
        context_id,
        args: build_args,
        mut parts,
    } = inputs::read(&git, req, scratch.path())?;
    let bases = containerfile::bases(&text, &file, &build_args)
        .map_err(|e| crate::exit::input(format!("{} build: {e}", b.role)))?;
    let podman = Podman::new();
    for base in &bases {
        if base.pinned {
            // Pulled here, on the host's network: the build itself has none but its proxy.
            if !podman.image_exists(&base.reference)? {
                progress(&format!("pulling pinned base {}", base.reference));
                podman.image_pull(&base.reference, PULL_DEADLINE)?;
            }
            parts.push(format!("base {}", base.reference));
            continue;
        }
        if !podman.image_exists(&base.reference)? {
            return Err(crate::exit::input(format!(
                "{} build: {}:{}: `{}` is neither in podman's local storage nor pinned by digest; a pull would happen outside the build's proxy: refused; fix: pin it (`{}@sha256:<64 hex>`, `podman image inspect --format '{{{{.Digest}}}}'`) or make it local first (`podman pull`, `podman load`)",
                b.role, file, base.line, base.reference, base.reference
            )));
        }
        let id = podman.image_id(&base.reference)?;
        parts.push(format!("base {} {id}", base.reference));
    }
    parts.extend(b.egress.iter().map(|h| format!("egress {h:?}")));
    let digest = inputs_digest(&parts);
    let tag = format!("{}:{}", req.repository, digest.get(..32).unwrap_or(&digest));
    if podman.image_exists(&tag)? {
        progress(&format!(
            "{} image {tag} is up to date (inputs unchanged)",
            b.role
        ));
        return Ok(Built {
            reference: tag,
            built: false,
        });
    }
    progress(&format!(
        "building {} image {tag} from {} at {}",
        b.role,
        file,
        short(req.base)
    ));
    let archive = scratch.path().join("context.tar");
    git.archive_tree(&context_id, &archive, MAX_CONTEXT)?;
    let ctx_dir = scratch.path().join("context");
    std::fs::create_dir(&ctx_dir).context("creating the build context")?;
    let tarball = std::fs::File::open(&archive).context("opening the context archive")?;
    tar::Archive::new(tarball)
        .unpack(&ctx_dir)
        .context("unpacking the build context")?;
    std::fs::remove_file(&archive).context("removing the context archive")?;
    let cf = scratch.path().join("Containerfile");
    std::fs::write(&cf, &text).context("writing the Containerfile")?;
    let tmpdir = scratch.path().join("tmp");
    std::fs::create_dir(&tmpdir).context("creating the build's TMPDIR")?;
    let net = Net::new(req.id);
    let result = net.up(&podman, req, scratch.path()).and_then(|proxy| {
        let ns = net.holder_ns(&podman)?;
        let url = format!("http://{proxy}:{PROXY_PORT}");
        let mut args = build_args.clone();
        for k in ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"] {
            args.push((k.to_string(), url.clone()));
        }
        let labels = [(INPUTS_LABEL, digest.as_str()), (label::TENANT, req.tenant)];
        let end_steps = || kill_steps_of(&podman, &net.holder);
        let call = BuildCall {
            tag: &tag,
            containerfile: &cf,
            context: &ctx_dir,
            netns: &ns,
            tmpdir: &tmpdir,
            args: &args,
            labels: &labels,
            deadline: Duration::from_secs(b.timeout_s),
            stop: req.stop.map(|s| (s, &end_steps as &dyn Fn())),
        };
        let role = b.role.clone();
        // A step's output is the Containerfile's (the agent's, once merged): control and bidi
        // characters are replaced before it reaches a terminal, the journal or the record
        // (an OSC or CSI sequence in a `RUN` step's output: attack review 17).
        let (ok, tail) = podman.build_streamed(&call, TAIL_LINES, &mut |l| {
            progress(&format!("[build {role}] {}", crate::text::printable(l)));
        })?;
        let tail: Vec<String> = tail.iter().map(|l| crate::text::printable(l)).collect();
        if ok {
            Ok(())
        } else {
            Err(BuildFailed {
                role: b.role.clone(),
                tag: tag.clone(),
                containerfile: file.clone(),
                tail,
            }
            .into())
        }
    });
    let down = net.down(&podman);
    let cache = podman.unshare_remove(&tmpdir);
    if result.is_err() {
        // `--layers=false`: nothing of a failed build is committed; this is for a build that
        // was killed between its commit and its tag.
        let _ = podman.image_remove(&tag);
    }
    result?;
    down?;
    cache?;
    Ok(Built {
        reference: tag,
        built: true,
    })
}

/// The build's networks, proxy and network holder, by name.
struct Net {
    internal: String,
    egress: String,
    proxy: String,
    holder: String,
    id: String,
}

impl Net {
    fn new(id: &str) -> Self {
        let n = RunNames::new(id);
        Net {
            internal: n.role("build"),
            egress: n.role("build-egress"),
            proxy: n.role("build-proxy"),
            holder: n.role("build-net"),
            id: id.to_string(),
        }
    }

    /// Creates both networks and starts the proxy; its address on the internal network.
    fn up(&self, podman: &Podman, req: &Request<'_>, dir: &Path) -> Result<String> {
        let labels = [
            (label::TENANT, req.tenant),
            (label::RUN, self.id.as_str()),
            (label::ROLE, "build"),
        ];
        podman.network_create(&self.internal, true, &labels)?;
        podman.network_create(&self.egress, false, &labels)?;
        let subnet = podman.network_subnet(&self.internal)?;
        let egress = Egress {
            allow: req.build.egress.clone(),
            ports: vec![80, 443],
            // Debian's and other package mirrors answer plain HTTP on 80.
            http_ports: vec![80],
            report_only: false,
            ca_certs: Vec::new(),
        };
        let conf = crate::render::proxy::squid_conf(&crate::render::proxy::ProxyPlan {
            egress: &egress,
            agent_subnet: &subnet,
            listen_port: PROXY_PORT,
            credentials: &[],
            placeholders: &[],
            ca_files: 0,
            // Its log is podman's build output, never read as a run's decisions.
            log_key: crate::render::plan::PREVIEW_LOG_KEY,
        });
        let conf_path = dir.join("squid.conf");
        std::fs::write(&conf_path, conf).context("writing the build proxy's squid.conf")?;
        std::fs::set_permissions(
            &conf_path,
            std::os::unix::fs::PermissionsExt::from_mode(0o644),
        )?;
        let volume = format!(
            "{}:{}:ro",
            conf_path.display(),
            crate::render::plan::PROXY_CONF_PATH
        );
        let nets = [
            format!("--network={}", self.internal),
            format!("--network={}", self.egress),
        ];
        podman.run_detached(
            &self.proxy,
            &labels,
            &[
                &nets[0],
                &nets[1],
                "--read-only",
                "--cap-drop=ALL",
                "--security-opt=no-new-privileges",
                "--pull=never",
                "-v",
                &volume,
            ],
            crate::images::PROXY_IMAGE,
            &[],
        )?;
        // The holder of the steps' namespace: on the internal network only, doing nothing.
        podman.run_detached(
            &self.holder,
            &labels,
            &[
                &nets[0],
                "--read-only",
                "--cap-drop=ALL",
                "--security-opt=no-new-privileges",
                "--pull=never",
                "--entrypoint=/bin/sleep",
            ],
            crate::images::PROXY_IMAGE,
            &["infinity"],
        )?;
        let ip = podman.container_ip(&self.proxy, &self.internal)?;
        let start = Instant::now();
        loop {
            let log = podman.logs(&self.proxy)?;
            if log.contains("Accepting") {
                return Ok(ip);
            }
            if start.elapsed() > PROXY_READY {
                anyhow::bail!(
                    "the build's proxy {} did not listen within {} s; its log:\n{}",
                    self.proxy,
                    PROXY_READY.as_secs(),
                    log.lines().rev().take(10).collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `/proc/PID/ns/net` of the holder: the namespace podman builds in.
    fn holder_ns(&self, podman: &Podman) -> Result<String> {
        Ok(format!(
            "/proc/{}/ns/net",
            podman.container_pid(&self.holder)?
        ))
    }

    /// Removes the proxy, the holder and both networks (each step tried; the first error
    /// returned).
    fn down(&self, podman: &Podman) -> Result<()> {
        kill_steps_of(podman, &self.holder);
        let a = podman.rm_force(&self.proxy);
        let b = podman.rm_force(&self.holder);
        let c = podman.rm_networks(&[self.internal.clone(), self.egress.clone()]);
        a?;
        b?;
        c?;
        Ok(())
    }
}

/// Kills what still runs in the network namespace of the build holder `holder` (a `RUN` step
/// of a build that was stopped, ran past its deadline or whose cyclix died); best effort: a
/// holder that is gone has nothing left in its namespace to find.
fn kill_steps_of(podman: &Podman, holder: &str) {
    if let Ok(pid) = podman.container_pid(holder)
        && pid != 0
        && let Ok(n) = podman.kill_in_netns_of(pid)
        && n > 0
    {
        tracing::warn!("killed {n} process(es) of the build still running in {holder}'s network");
    }
}

/// Kills the `RUN` steps of run `id`'s build, if its holder is still there (a run whose cyclix
/// died mid-build: its convergence calls this before the holder is removed by label), and
/// removes buildah's working containers of that build. A working container carries no label
/// of the run, but buildah notes the network namespace its steps join (`buildah.json`'s
/// `NamespaceOptions`, below podman's `graphroot`): the build holder's `/proc/PID/ns/net`.
pub fn kill_steps(id: &str, graphroot: Option<&Path>) {
    let podman = Podman::new();
    let holder = Net::new(id).holder;
    let Ok(pid) = podman.container_pid(&holder) else {
        return;
    };
    let ns = format!("/proc/{pid}/ns/net");
    // The build itself first, or it commits what its steps did: the `podman build` (and its
    // nsenter and setpriv) that `podman unshare`'s re-executed child ran on after a SIGKILL
    // of cyclix, reparented, with no parent death to see (measured: a killed run's
    // `RUN sleep 271` ran to its end and the image was tagged 271 s later).
    let n = kill_builders(Path::new("/proc"), &ns);
    if n > 0 {
        tracing::warn!("killed {n} process(es) of run {id}'s build (podman build joining {ns})");
    }
    kill_steps_of(&podman, &holder);
    let Some(graphroot) = graphroot else {
        return;
    };
    for c in podman.external_containers().unwrap_or_default() {
        if working_container_in(graphroot, &c).as_deref() == Some(ns.as_str()) {
            match podman.rm_force(&c) {
                Ok(()) => tracing::warn!("removed the working container {c} of run {id}'s build"),
                Err(e) => {
                    tracing::warn!("removing the working container {c} of run {id}'s build: {e:#}");
                }
            }
        }
    }
}

/// Kills (SIGKILL) this user's processes under `proc` whose argv joins the network namespace
/// `ns` the way a build does (`--network=ns:NS`, nsenter's `--net=NS`): the build of a run
/// whose holder that is. Returns how many were killed.
fn kill_builders(proc: &Path, ns: &str) -> usize {
    let marks = [format!("--network=ns:{ns}"), format!("--net={ns}")];
    let me = std::process::id();
    let mut n = 0;
    for d in std::fs::read_dir(proc).into_iter().flatten().flatten() {
        let Some(pid) = d.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if u32::try_from(pid).ok() == Some(me) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(d.path().join("cmdline")) else {
            continue;
        };
        let joins = cmdline
            .split(|b| *b == 0)
            .any(|a| marks.iter().any(|m| a == m.as_bytes()));
        if joins
            && nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            )
            .is_ok()
        {
            n += 1;
        }
    }
    n
}

/// The network namespace path buildah noted for container `id` (its full id), from
/// `GRAPHROOT/*-containers/ID/userdata/buildah.json`; `None` for a container that is not
/// buildah's or names none.
fn working_container_in(graphroot: &Path, id: &str) -> Option<String> {
    let dirs = std::fs::read_dir(graphroot).ok()?;
    for d in dirs.flatten() {
        if !d.file_name().to_string_lossy().ends_with("-containers") {
            continue;
        }
        let f = d.path().join(id).join("userdata").join("buildah.json");
        let Ok(bytes) = std::fs::read(&f) else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
        return v["NamespaceOptions"].as_array()?.iter().find_map(|o| {
            (o["Name"] == "network")
                .then(|| o["Path"].as_str().map(str::to_owned))
                .flatten()
        });
    }
    None
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_build_joining_a_holders_netns_is_killed_and_another_is_not() {
        use std::os::unix::process::ExitStatusExt as _;
        // Two real processes, and a /proc of their own whose `cmdline`s say what each joins
        // (the real /proc is the machine's: other processes, other tests).
        let spawn = || {
            std::process::Command::new("sleep")
                .arg("60")
                .spawn()
                .expect("spawn")
        };
        let (mut ours, mut other) = (spawn(), spawn());
        let proc = tempfile::tempdir().expect("tmp");
        let cmdline = |child: &std::process::Child, ns: &str| {
            let d = proc.path().join(child.id().to_string());
            std::fs::create_dir_all(&d).expect("dir");
            let argv = format!("podman\0build\0--network=ns:{ns}\0--tag\0t\0");
            std::fs::write(d.join("cmdline"), argv).expect("cmdline");
        };
        cmdline(&ours, "/proc/41/ns/net");
        cmdline(&other, "/proc/42/ns/net");
        assert_eq!(kill_builders(proc.path(), "/proc/41/ns/net"), 1);
        assert_eq!(ours.wait().expect("wait").signal(), Some(9));
        // The positive control of the match: the other namespace's process runs on.
        assert!(other.try_wait().expect("try_wait").is_none());
        let _ = other.kill();
        let _ = other.wait();
    }

    use super::*;

    #[test]
    fn the_digest_changes_with_any_input_and_only_then() {
        let a = vec!["containerfile C 1".to_string(), "arg A=1".to_string()];
        let mut b = a.clone();
        assert_eq!(inputs_digest(&a), inputs_digest(&b));
        b.push("arg B=2".into());
        assert_ne!(inputs_digest(&a), inputs_digest(&b));
        let c = vec!["containerfile C 2".to_string(), "arg A=1".to_string()];
        assert_ne!(inputs_digest(&a), inputs_digest(&c));
        assert_eq!(inputs_digest(&a).len(), 64);
    }
}
