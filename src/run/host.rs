//! The real [`RunHost`]: git through [`crate::git`], podman through [`crate::podman`], the
//! journal through [`crate::journal`] (`journalctl --user`: the journal has no stable D-Bus
//! API for reading entries).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result};

use super::boundary::ProcessEnv;
use super::procs;
use super::seam::{RunJournal, RunPodman, RunProcs};
use crate::inventory::{Kind, Leftover};
use crate::naming;

/// `pid`'s environment from the NUL-separated bytes of `/proc/PID/environ`.
fn process_env(pid: u32, comm: String, raw: &[u8]) -> ProcessEnv {
    let vars = raw
        .split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .filter_map(|e| {
            let eq = e.iter().position(|b| *b == b'=')?;
            Some((
                String::from_utf8_lossy(&e[..eq]).into_owned(),
                e[eq + 1..].to_vec(),
            ))
        })
        .collect();
    ProcessEnv {
        pid,
        comm,
        vars,
        unreadable: None,
    }
}

/// Deadline for reading the environments of the non-dumpable processes inside the rootless
/// user namespace (one `podman unshare`).
const UNSHARE_READ_DEADLINE: Duration = Duration::from_secs(10);
use crate::podman::Podman;

/// Deadline for removing a run's private repository as plain files: 300 s (a 10,000-deep
/// tree takes about a second).
pub const REMOVE_TREE_DEADLINE: Duration = Duration::from_secs(300);

/// Delegates to [`Git`], [`Podman`] and [`crate::journal`].
#[derive(Debug, Default)]
pub struct RealRunHost {
    podman: Podman,
    /// Podman's graph root (where its storage locks are); `None`: never look.
    graphroot: Option<PathBuf>,
    /// The spec file and the user's directories for [`RunHost::check_mounts`]; `None`: no
    /// guard (a host built without it).
    mount_guard: Option<(String, crate::context::HostEnv)>,
    /// The output readers of the run's agent and gate, by unit ([`RunJournal::follow_output`]).
    followers: std::sync::Mutex<Vec<(String, super::output::Follower)>>,
    /// Pass the agent's and the gate's lines on to stderr (cyclix runs under its run unit,
    /// whose stderr is the journal); off by default.
    output_to_journal: bool,
}

impl RealRunHost {
    /// With the podman binary found on `$PATH`.
    #[must_use]
    pub fn new() -> Self {
        RealRunHost {
            podman: Podman::new(),
            graphroot: None,
            mount_guard: None,
            followers: std::sync::Mutex::new(Vec::new()),
            output_to_journal: false,
        }
    }

    /// Passes the agent's and the gate's lines (redacted, within the limits) on to stderr
    /// when `on` (stderr is the journal: [`crate::context::journal_stream`]).
    #[must_use]
    pub fn with_output_to_journal(mut self, on: bool) -> Self {
        self.output_to_journal = on;
        self
    }

    /// Checks the spec's mounts again right before the run (see [`RunHost::check_mounts`]);
    /// `file` is the spec's path, named in the refusal.
    #[must_use]
    pub fn with_mount_guard(mut self, file: String, env: crate::context::HostEnv) -> Self {
        self.mount_guard = Some((file, env));
        self
    }

    /// One sweep of the run's labelled podman objects (see `remove_run_objects`).
    fn sweep_run_objects(&self, run_id: &str) -> Result<()> {
        let l = listing(&self.podman, &naming::run_filter(run_id), None)?;
        // Pods first: `pod rm --force` takes its containers, the infra one included, which
        // `podman rm` refuses alone ("is the infra container of pod … and cannot be removed
        // without removing the pod": measured after the user manager died, when the units
        // could not remove anything). Then the other containers, networks, volumes. Every
        // kind is tried; the errors are joined.
        let pods: Vec<String> = l.pods.into_iter().map(|p| p.id).collect();
        let containers: Vec<String> = l
            .containers
            .into_iter()
            .filter(|c| !c.is_infra)
            .map(|c| c.id)
            .collect();
        let networks: Vec<String> = l.networks.into_iter().map(|n| n.name).collect();
        let volumes: Vec<String> = l.volumes.into_iter().map(|v| v.name).collect();
        let errors: Vec<String> = [
            self.podman.rm_pods(&pods),
            self.podman.rm_containers(&containers),
            self.podman.rm_networks(&networks),
            self.podman.rm_volumes(&volumes),
        ]
        .into_iter()
        .filter_map(|r| r.err().map(|e| format!("{e:#}")))
        .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            anyhow::bail!("{}", errors.join("; "))
        }
    }

    /// Looks for holders of the storage locks below `graphroot` (see
    /// [`super::storage_lock::graphroot`]).
    #[must_use]
    pub fn with_graphroot(mut self, graphroot: PathBuf) -> Self {
        self.graphroot = Some(graphroot);
        self
    }
}

/// Everything of runs that podman lists.
struct Listing {
    containers: Vec<crate::podman::ContainerInfo>,
    pods: Vec<crate::podman::PodInfo>,
    networks: Vec<crate::podman::NetworkInfo>,
    volumes: Vec<crate::podman::VolumeInfo>,
    secrets: Vec<String>,
}

/// Lists the containers, pods, networks and volumes labelled `label` (a podman label filter)
/// and, with `secrets`, the secrets whose names start with it, with one podman process per
/// kind, all at once: each podman call costs 40-60 ms on the testbed, mostly its own start-up,
/// so five in a row were most of the audit (bench/run, issue 7).
fn listing(pm: &Podman, label: &str, secrets: Option<&str>) -> Result<Listing> {
    std::thread::scope(|scope| {
        let containers = scope.spawn(|| pm.containers(label));
        let pods = scope.spawn(|| pm.pods(label));
        let networks = scope.spawn(|| pm.networks(label));
        let volumes = scope.spawn(|| pm.volumes(label));
        let names = secrets.map(|prefix| scope.spawn(move || pm.secrets(prefix)));
        let panicked = |what: &str| anyhow::anyhow!("listing the run's {what} panicked");
        Ok(Listing {
            containers: containers.join().map_err(|_| panicked("containers"))??,
            pods: pods.join().map_err(|_| panicked("pods"))??,
            networks: networks.join().map_err(|_| panicked("networks"))??,
            volumes: volumes.join().map_err(|_| panicked("volumes"))??,
            secrets: match names {
                Some(h) => h.join().map_err(|_| panicked("secrets"))??,
                None => Vec::new(),
            },
        })
    })
}

/// What podman holds of cyclix's runs, as leftovers tied to the run their label (a secret:
/// its name) carries: one run's (`run_id`) or, with `None`, every run's (`cyclix leftovers`).
/// In order: containers (detail: their state), pods, networks, volumes, secrets.
///
/// # Errors
/// podman failed.
pub fn podman_leftovers(pm: &Podman, run_id: Option<&str>) -> Result<Vec<Leftover>> {
    let (label, prefix) = match run_id {
        Some(r) => (naming::run_filter(r), naming::RunNames::new(r).prefix()),
        None => (naming::label::RUN.to_string(), naming::PREFIX.to_string()),
    };
    let l = listing(pm, &label, Some(&prefix))?;
    let run_of = |labels: &crate::podman::Labels| labels.get(naming::label::RUN).cloned();
    let mut out = Vec::new();
    for c in l.containers {
        out.push(Leftover {
            run: run_of(&c.labels),
            ..Leftover::new(Kind::Container, c.names.join(","), None).with_detail(c.state)
        });
    }
    for p in l.pods {
        out.push(Leftover {
            run: run_of(&p.labels),
            ..Leftover::new(Kind::Pod, p.name, None)
        });
    }
    for n in l.networks {
        out.push(Leftover {
            run: run_of(&n.labels),
            ..Leftover::new(Kind::Network, n.name, None)
        });
    }
    for v in l.volumes {
        out.push(Leftover {
            run: run_of(&v.labels),
            ..Leftover::new(Kind::Volume, v.name, None)
        });
    }
    for s in l.secrets {
        let run = naming::run_of_secret(&s).map(str::to_string);
        out.push(Leftover {
            run,
            ..Leftover::new(Kind::Secret, s, None)
        });
    }
    Ok(out)
}

impl RunPodman for RealRunHost {
    fn remove_tree(&self, path: &Path) -> Result<()> {
        if std::fs::symlink_metadata(path).is_err() {
            return Ok(());
        }
        self.podman.unshare_rm_tree(path, REMOVE_TREE_DEADLINE)?;
        Ok(())
    }
    fn remove_trees(&self, paths: &[&Path]) -> Result<()> {
        let there: Vec<&Path> = paths
            .iter()
            .copied()
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .collect();
        self.podman.unshare_rm_trees(&there, REMOVE_TREE_DEADLINE)?;
        Ok(())
    }
    fn export_bundle(&self, req: &super::import::ExportRequest) -> Result<super::import::Export> {
        let image = self.podman.image_id(crate::images::GIT_IMAGE)?;
        let code = super::import::run_export(
            &self.podman,
            &image,
            req,
            "bundle",
            super::import::BUNDLE_CAP,
        )?;
        super::import::bundle_outcome(code).map_err(anyhow::Error::msg)
    }
    fn fill_tree(&self, req: &super::import::FillRequest) -> Result<()> {
        let image = self.podman.image_id(crate::images::GIT_IMAGE)?;
        super::import::run_fill(&self.podman, &image, req)
    }
    fn image_id(&self, reference: &str) -> Result<String> {
        Ok(self.podman.image_id(reference)?)
    }
    fn export_diff(&self, req: &super::import::ExportRequest) -> Result<usize> {
        let image = self.podman.image_id(crate::images::GIT_IMAGE)?;
        let code =
            super::import::run_export(&self.podman, &image, req, "diff", super::import::DIFF_CAP)?;
        if code != 0 {
            anyhow::bail!("the uncommitted-diff container's git exited {code}");
        }
        let bytes =
            std::fs::read(&req.out).with_context(|| format!("reading {}", req.out.display()))?;
        Ok(super::import::files_in_diff(&bytes))
    }
    fn kill_build_steps(&self, run_id: &str) {
        crate::images::build::kill_steps(run_id, self.graphroot.as_deref());
    }
    fn build_image(
        &self,
        req: &crate::images::build::Request<'_>,
    ) -> Result<crate::images::build::Built> {
        crate::images::build::build(req, &mut |line| crate::stderrln!("{line}"))
    }
    fn secret_create(&self, name: &str, value: &[u8], labels: &[(String, String)]) -> Result<()> {
        let l: Vec<(&str, &str)> = labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Ok(self.podman.secret_create(name, value, &l)?)
    }
    fn secret_remove(&self, name: &str) -> Result<()> {
        self.podman.secret_rm(name)?;
        Ok(())
    }
    fn remove_run_objects(&self, run_id: &str) -> Result<()> {
        // One forced removal by label, no listing first (issue 33 item 4): the audit's listing
        // after it is what proves nothing is left.
        let Err(fast) = self.podman.rm_labelled(&naming::run_filter(run_id)) else {
            return Ok(());
        };
        tracing::warn!("removing run {run_id}'s podman objects by label: {fast:#}; by listing");
        // After the user manager died (and `podman system migrate`), podman removed the
        // run's containers but failed on their gone network namespaces ("netavark: setns:
        // IO error"), and left the emptied pod: measured. A second sweep over a fresh listing
        // finishes it; only what still fails then is an error.
        match self.sweep_run_objects(run_id) {
            Ok(()) => Ok(()),
            Err(first) => {
                tracing::warn!("removing run {run_id}'s podman objects, once more: {first:#}");
                self.sweep_run_objects(run_id)
                    .map_err(|e| anyhow::anyhow!("{e:#} (the first sweep: {first:#})"))
            }
        }
    }
    fn inventory(&self, run_id: &str) -> Result<Vec<Leftover>> {
        podman_leftovers(&self.podman, Some(run_id))
    }
    fn used_subnets(&self) -> Result<Vec<String>> {
        Ok(self
            .podman
            .all_networks()?
            .into_iter()
            .flat_map(|n| n.subnets)
            .collect())
    }
    fn generate_units(&self, sources: &[&Path], out: &Path) -> Result<String> {
        let generator = crate::host::facts::find_generator().with_context(|| {
            format!(
                "no podman-user-generator in {} (or it is masked): Quadlet's generator is \
                 needed to make the run's units (`cyclix check` tells how to install it)",
                crate::host::facts::USER_GENERATOR_DIRS.join(", ")
            )
        })?;
        Ok(crate::podman::quadlet::generate_units(
            &generator, sources, out,
        )?)
    }
    fn probe(
        &self,
        container: &str,
        only: &[&str],
        watch: bool,
        deadline: Duration,
    ) -> Result<(i32, String)> {
        let ctx = format!(
            "{}/{}",
            crate::render::plan::CTL_PATH,
            crate::render::plan::PROBE_CONTEXT_FILE
        );
        let joined = only.join(",");
        let mut argv = vec![
            crate::render::plan::CYCLIX_BIN_PATH,
            "probe",
            "--context",
            ctx.as_str(),
        ];
        if !only.is_empty() {
            argv.extend(["--only", joined.as_str()]);
        }
        if watch {
            argv.push("--watch");
        }
        let out = self.podman.exec(container, &argv, deadline)?;
        Ok((out.status.code().unwrap_or(-1), out.stdout))
    }
    fn held_probe(
        &self,
        _container: &str,
        report: &Path,
        deadline: Duration,
    ) -> Result<(i32, String)> {
        let read = super::report_fifo::read(report, deadline);
        // Removed whatever the read gave (already, after agent-wait's first line): no second report.
        let removed = match std::fs::remove_file(report) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            r => r.with_context(|| format!("removing the probe report FIFO {}", report.display())),
        };
        let text = read?;
        removed?;
        Ok((super::report_fifo::exit_of(&text), text))
    }
    fn hand_over(&self, fifo: &Path, vars: &[(String, Vec<u8>)], deadline: Duration) -> Result<()> {
        super::handover::give(fifo, vars, deadline)
    }
    fn baseline(
        &self,
        container: &str,
        argv: &[String],
        env: &[(String, Vec<u8>)],
        deadline: Duration,
    ) -> Result<(i32, String)> {
        // The last lines (the phase keeps its own tail of them, secrets replaced).
        const KEEP: usize = 200;
        let words: Vec<&str> = argv.iter().map(String::as_str).collect();
        let env = env
            .iter()
            .map(|(k, v)| {
                std::str::from_utf8(v)
                    .map(|v| (k.as_str(), v))
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "the value of `{k}` is not UTF-8: podman cannot pass it to the baseline"
                        )
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        let (code, lines) = self
            .podman
            .exec_streamed(container, &words, &env, deadline, KEEP)?;
        Ok((code, lines.join("\n")))
    }
    fn gvisor_members(
        &self,
        container: &str,
        runsc: &crate::tier::runsc::OciRuntime,
    ) -> Result<Vec<super::seam::Member>> {
        Ok(self
            .podman
            .gvisor_processes(container, &runsc.path)?
            .into_iter()
            .map(|(pid, comm)| super::seam::Member {
                pid,
                comm,
                init: pid == 1,
            })
            .collect())
    }
    fn container_members(
        &self,
        container: &str,
        known: &[u32],
    ) -> Result<Vec<super::seam::Member>> {
        let proc_root = Path::new("/proc");
        let init = *known.iter().min().ok_or_else(|| {
            anyhow::anyhow!("no process of container {container} was seen to start the look from")
        })?;
        // The PID namespace, from the first of `known` whose link the user may read (a preset's
        // uid in a keep-id pod may deny it); none: the cgroup tree alone, where every process
        // of the container (and `podman exec`'s) is unless moved out by someone allowed to.
        let mut sorted = known.to_vec();
        sorted.sort_unstable();
        let link = sorted
            .iter()
            .find_map(|p| std::fs::read_link(proc_root.join(p.to_string()).join("ns/pid")).ok())
            .map(|l| l.to_string_lossy().into_owned())
            .unwrap_or_default();
        let pidns = link
            .strip_prefix("pid:[")
            .and_then(|l| l.strip_suffix(']'))
            .unwrap_or("none");
        let scan = procs::namespaces(proc_root).context("listing /proc")?;
        let members =
            procs::container_processes(proc_root, Path::new("/sys/fs/cgroup"), init, pidns, &scan)
                .with_context(|| format!("reading the processes of {container} from /proc"))?;
        // A zombie runs nothing and holds no file: an ended probe child not reaped yet. One
        // that ended meanwhile (no status) is gone.
        Ok(members
            .into_iter()
            .filter_map(|(pid, comm)| {
                let status =
                    std::fs::read_to_string(proc_root.join(pid.to_string()).join("status")).ok()?;
                let field = |k: &str| {
                    status
                        .lines()
                        .find_map(|l| l.strip_prefix(k))
                        .map(str::trim)
                };
                if field("State:").is_some_and(|s| s.starts_with('Z')) {
                    return None;
                }
                let init = field("NSpid:")
                    .and_then(|n| n.split_whitespace().last())
                    .is_some_and(|n| n == "1");
                Some(super::seam::Member { pid, comm, init })
            })
            .collect())
    }
    fn sandbox_environ(&self, container: &str) -> Result<Vec<ProcessEnv>> {
        let mut out = Vec::new();
        let mut denied: Vec<(u32, String, String)> = Vec::new();
        for (pid, comm) in self.podman.top_hpids(container)? {
            // A process that exited between the listing and the read is simply gone; any
            // other error leaves a live process unseen, which the scan reports.
            match std::fs::read(format!("/proc/{pid}/environ")) {
                Ok(raw) => out.push(process_env(pid, comm, &raw)),
                Err(e)
                    if e.kind() == std::io::ErrorKind::NotFound
                        || e.raw_os_error() == Some(libc::ESRCH) => {}
                // A non-dumpable process of a keep-id pod (a preset's uid): root of the
                // rootless namespace can read it, all of them in one call below.
                Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                    denied.push((pid, comm, e.to_string()));
                }
                Err(e) => out.push(ProcessEnv {
                    pid,
                    comm,
                    vars: Vec::new(),
                    unreadable: Some(e.to_string()),
                }),
            }
        }
        if denied.is_empty() {
            return Ok(out);
        }
        let pids: Vec<u32> = denied.iter().map(|(p, _, _)| *p).collect();
        let read = self.podman.unshare_environs(&pids, UNSHARE_READ_DEADLINE);
        for (pid, comm, why) in denied {
            let got = match &read {
                Ok(recs) => recs
                    .iter()
                    .find(|(p, _)| *p == pid)
                    .and_then(|(_, b)| b.clone()),
                Err(_) => None,
            };
            match got {
                Some(raw) => out.push(process_env(pid, comm, &raw)),
                None if !Path::new(&format!("/proc/{pid}")).exists() => {}
                None => out.push(ProcessEnv {
                    pid,
                    comm,
                    vars: Vec::new(),
                    unreadable: Some(match &read {
                        Ok(_) => format!("{why}; unreadable in the rootless namespace too"),
                        Err(e) => format!("{why}; in the rootless namespace: {e}"),
                    }),
                }),
            }
        }
        Ok(out)
    }
    fn network_members(&self, network: &str) -> Result<Vec<String>> {
        Ok(self.podman.network_containers(network)?)
    }
}

impl RunJournal for RealRunHost {
    fn unit_journal(&self, unit: &str) -> Result<Vec<String>> {
        crate::journal::unit_messages(unit)
    }
    fn unit_stdout_journal(&self, unit: &str) -> Result<Vec<String>> {
        crate::journal::identifier_info_messages(unit.strip_suffix(".service").unwrap_or(unit))
    }
    fn follow_output(&self, mut f: super::output::OutputFollow) -> Result<()> {
        f.journal &= self.output_to_journal;
        let unit = f.unit.clone();
        let follower = super::output::Follower::start(f)?;
        self.followers
            .lock()
            .map_err(|_| anyhow::anyhow!("the output readers' lock is poisoned"))?
            .push((unit, follower));
        Ok(())
    }
    fn output(&self, unit: &str) -> Result<super::output::Captured> {
        let follower = {
            let mut all = self
                .followers
                .lock()
                .map_err(|_| anyhow::anyhow!("the output readers' lock is poisoned"))?;
            all.iter()
                .position(|(u, _)| u == unit)
                .map(|i| all.remove(i).1)
        };
        follower.map_or_else(
            || Ok(super::output::Captured::default()),
            super::output::Follower::finish,
        )
    }
    fn end_outputs(&self) {
        let all: Vec<_> = match self.followers.lock() {
            Ok(mut f) => f.drain(..).collect(),
            Err(_) => return,
        };
        for (unit, f) in all {
            if let Err(e) = f.finish() {
                crate::stderrln!("warning: the output of {unit}: {e:#}");
            }
        }
    }
}

impl RunProcs for RealRunHost {
    fn check_mounts(&self, spec: &crate::spec::Spec) -> Result<()> {
        if let Some((file, env)) = &self.mount_guard
            && let Some(refusal) = crate::host::mount_scan::run_refusal(spec, file, env)
        {
            anyhow::bail!("mounts refused right before the run:\n{refusal}");
        }
        Ok(())
    }
    fn run_processes(&self, run_id: &str) -> Result<Vec<Leftover>> {
        let needle = naming::RunNames::new(run_id).base();
        let sentinel = super::tripwire::sentinel_name(run_id);
        let procs: Vec<procs::Proc> =
            procs::processes_naming(Path::new("/proc"), &needle, std::process::id())
                .into_iter()
                .filter(|p| procs::is_workload(p, &sentinel))
                .collect();
        let own =
            std::fs::read_to_string("/proc/self/cgroup").context("reading /proc/self/cgroup")?;
        let cgroups = procs::user_manager_cgroup(&own)
            .map(|rel| {
                procs::cgroups_naming(
                    &Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/')),
                    &needle,
                )
            })
            .unwrap_or_default();
        Ok(procs::findings(&procs, &cgroups, run_id))
    }
    fn kill_sentinel(&self, run_id: &str) -> Result<usize> {
        let name = super::tripwire::sentinel_name(run_id);
        let mut n = 0;
        for p in procs::processes_naming(Path::new("/proc"), &name, std::process::id()) {
            // Only cyclix's own `sleep`, started with exactly this argv[0].
            if p.argv0 == name && p.comm == "sleep" {
                let pid = nix::unistd::Pid::from_raw(i32::try_from(p.pid).unwrap_or(i32::MAX));
                if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).is_ok() {
                    n += 1;
                }
            }
        }
        Ok(n)
    }
    // statvfs's field types differ between targets (u64 here, u32 on some 32-bit ones).
    #[allow(clippy::useless_conversion)]
    fn fs_space(&self, path: &Path) -> Result<super::space::FsSpace> {
        let s = nix::sys::statvfs::statvfs(path)
            .with_context(|| format!("statvfs {}", path.display()))?;
        let frsize = u64::from(s.fragment_size());
        Ok(super::space::FsSpace {
            avail: u64::from(s.blocks_available()).saturating_mul(frsize),
            total: u64::from(s.blocks()).saturating_mul(frsize),
            fsid: u64::from(s.filesystem_id()),
        })
    }
    fn storage_lock_holders(&self, run: Option<&str>) -> Result<Vec<super::storage_lock::Holder>> {
        match &self.graphroot {
            Some(g) => super::storage_lock::holders_outside(g, run),
            None => Ok(Vec::new()),
        }
    }
}

mod git;
