//! The single-host adapter of [`super::Cluster`]: `podman kube play` (rootless podman ≥ 5),
//! the proof of `cyclix kube-run` on the testbed. Each [`Cluster::apply`] is one play, its
//! YAML on stdin (Secret values never in an argument or a file). What stands in for a
//! cluster here, and only here:
//! - podman has no Services: the run's internal network `cyclix-RUN` (internal, no DNS) and
//!   its egress network `cyclix-RUN-egress` are made by the adapter on its first play; the
//!   proxy Deployment is played on both with the fixed address `.2` of the internal subnet,
//!   which replaces the kubelet's Service variable `$(CYCLIX_RUN_PROXY_SERVICE_HOST)` in the
//!   objects played after it;
//! - podman has no NetworkPolicy: a Job whose Pod carries `io.cyclix.network: none` (the gate,
//!   the collector) is played with `--network none`; every other Pod on the internal network;
//!   Services and NetworkPolicies are not played (podman ignores them);
//! - a Job's end is its main container's exit (`podman wait`), its log `podman logs`.
//!
//! Deleting a run: `podman kube down --force` of every play (Secret values blanked: `down`
//! needs only names), then a sweep of the run's labelled pods and volumes, the played
//! ConfigMaps' and Secrets' names, and the two networks.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use super::{APPLY_DEADLINE, Cluster, DELETE_DEADLINE, JobEnd, QUERY_DEADLINE, names};
use crate::naming::RunNames;
use crate::naming::label;
use crate::process;
use crate::render::kube::{KubeNames, NO_NETWORK_LABEL};

/// One slice of a wait: how long an interrupt may go unseen.
const WAIT_SLICE: Duration = Duration::from_secs(2);

/// The kinds `podman kube play` creates something for.
const PLAYED: [&str; 6] = [
    "Pod",
    "Deployment",
    "Job",
    "ConfigMap",
    "Secret",
    "PersistentVolumeClaim",
];

/// The podman adapter of one run.
#[derive(Debug)]
pub struct PodmanPlay {
    run_id: String,
    /// Set when the run is asked to stop (SIGTERM, SIGINT): a wait ends at its next slice.
    stop: Arc<AtomicBool>,
    /// The proxy's address on the internal network, once the networks exist.
    proxy_ip: RefCell<Option<String>>,
    /// Each play's YAML, Secret values blanked, for `kube down`.
    plays: RefCell<Vec<String>>,
    /// Jobs whose Pod did not start because an init container failed, and how.
    failed_jobs: RefCell<Vec<(String, String)>>,
    /// The played ConfigMaps: a later play whose Pod mounts one gets it again (podman
    /// resolves a `configMap` volume within its own play).
    config_maps: RefCell<Vec<Value>>,
    /// Names of the played ConfigMaps, Secrets and claims (volumes and secrets podman made).
    played_names: RefCell<Vec<(String, String)>>,
}

fn podman(
    args: &[&str],
    stdin: Option<&[u8]>,
    deadline: Duration,
    out: Option<(&Path, u64)>,
) -> Result<process::Output> {
    Ok(process::run_with(
        "podman",
        args,
        &process::Opts {
            stdin,
            deadline,
            hint: "is podman (rootless, ≥ 5) installed?",
            stdout_file: out,
            ..process::Opts::default()
        },
    )?)
}

fn podman_ok(
    args: &[&str],
    stdin: Option<&[u8]>,
    deadline: Duration,
    what: &str,
) -> Result<String> {
    let o = podman(args, stdin, deadline, None)?;
    if !o.status.success() {
        bail!("podman {what} failed ({}): {}", o.status, o.stderr.trim());
    }
    Ok(o.stdout)
}

/// `objects` as a YAML stream (JSON documents are YAML).
fn stream(objects: &[Value]) -> Result<String> {
    let mut s = String::new();
    for o in objects {
        s.push_str("---\n");
        s.push_str(&serde_json::to_string(o).context("serialising an object")?);
        s.push('\n');
    }
    Ok(s)
}

/// `o` with every Secret value blanked (what `kube down` is given).
fn blanked(o: &Value) -> Value {
    let mut o = o.clone();
    if o["kind"] == "Secret" {
        for key in ["stringData", "data"] {
            if let Some(m) = o.get_mut(key).and_then(Value::as_object_mut) {
                for v in m.values_mut() {
                    *v = Value::String(String::new());
                }
            }
        }
    }
    o
}

/// Whether a Job's or Deployment's Pod mounts the ConfigMap named `name`.
fn mounts_config_map(o: &Value, name: &Value) -> bool {
    o["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .is_some_and(|v| v.iter().any(|v| v["configMap"]["name"] == *name))
}

/// podman's words for a Pod whose init container failed (`init container ID exited with
/// code N`), as the Job's failure.
fn init_failure(stderr: &str) -> Option<String> {
    let at = stderr.find("init container ")?;
    let rest = &stderr[at..];
    let code = rest
        .split("exited with code ")
        .nth(1)?
        .split_whitespace()
        .next()?;
    Some(format!("an init container of its Pod exited {code}"))
}

/// The address `.2` of an IPv4 subnet `A.B.C.D/N`.
fn second_address(subnet: &str) -> Option<String> {
    let (net, _) = subnet.trim().split_once('/')?;
    let ip: std::net::Ipv4Addr = net.parse().ok()?;
    Some(std::net::Ipv4Addr::from(u32::from(ip) + 2).to_string())
}

impl PodmanPlay {
    /// The adapter for run `run_id`.
    #[must_use]
    pub fn new(run_id: &str, stop: Arc<AtomicBool>) -> Self {
        Self {
            run_id: run_id.to_string(),
            stop,
            proxy_ip: RefCell::new(None),
            plays: RefCell::new(Vec::new()),
            played_names: RefCell::new(Vec::new()),
            failed_jobs: RefCell::new(Vec::new()),
            config_maps: RefCell::new(Vec::new()),
        }
    }

    /// `podman wait --condition=CONDITION NAME` ([`PodmanPlay::sliced`]); a wait that fails
    /// is an error naming the container.
    fn wait_for(
        &self,
        name: &str,
        condition: &str,
        deadline: Duration,
        what: &str,
    ) -> Result<process::Output> {
        let o = self.sliced(
            &["wait", &format!("--condition={condition}"), name],
            deadline,
            what,
        )?;
        if !o.status.success() {
            bail!(
                "podman wait {name} failed ({}): {}",
                o.status,
                o.stderr.trim()
            );
        }
        Ok(o)
    }

    /// Runs `podman ARGS` (a `podman wait`) in slices of [`WAIT_SLICE`] until it ends, the
    /// run is interrupted or `deadline` passed.
    fn sliced(&self, args: &[&str], deadline: Duration, what: &str) -> Result<process::Output> {
        let began = std::time::Instant::now();
        loop {
            if self.stop.load(Ordering::Relaxed) {
                bail!("interrupted while waiting for {what}");
            }
            let left = deadline.saturating_sub(began.elapsed());
            if left.is_zero() {
                bail!("{what} did not end within {} s", deadline.as_secs());
            }
            let r = process::run_with(
                "podman",
                args,
                &process::Opts {
                    deadline: left.min(WAIT_SLICE),
                    hint: "is podman (rootless, ≥ 5) installed?",
                    ..process::Opts::default()
                },
            );
            match r {
                Ok(o) => return Ok(o),
                Err(process::ProcessError::Deadline { .. }) => {}
                Err(e) => return Err(e).with_context(|| format!("waiting for {what}")),
            }
        }
    }

    fn net(&self) -> String {
        format!("cyclix-{}", self.run_id)
    }

    fn networks(&self) -> Result<String> {
        if let Some(ip) = self.proxy_ip.borrow().as_ref() {
            return Ok(ip.clone());
        }
        let net = self.net();
        let lab = format!("--label={}={}", label::RUN, self.run_id);
        podman_ok(
            &[
                "network",
                "create",
                "--internal",
                "--disable-dns",
                &lab,
                &net,
            ],
            None,
            QUERY_DEADLINE,
            &format!("creating the run's network {net}"),
        )?;
        let egress = format!("{net}-egress");
        podman_ok(
            &["network", "create", &lab, &egress],
            None,
            QUERY_DEADLINE,
            &format!("creating the run's network {egress}"),
        )?;
        let subnet = podman_ok(
            &[
                "network",
                "inspect",
                "--format",
                "{{range .Subnets}}{{.Subnet}} {{end}}",
                &net,
            ],
            None,
            QUERY_DEADLINE,
            &format!("reading the subnet of {net}"),
        )?;
        let ip = subnet
            .split_whitespace()
            .find_map(second_address)
            .with_context(|| {
                format!(
                    "network {net} has no IPv4 subnet (podman said `{}`)",
                    subnet.trim()
                )
            })?;
        *self.proxy_ip.borrow_mut() = Some(ip.clone());
        Ok(ip)
    }
}

impl Cluster for PodmanPlay {
    fn name(&self) -> &'static str {
        "podman"
    }

    fn apply(&self, objects: &[Value]) -> Result<()> {
        let played: Vec<&Value> = objects
            .iter()
            .filter(|o| PLAYED.iter().any(|k| o["kind"] == *k))
            .collect();
        if played.is_empty() {
            return Ok(());
        }
        let ip = self.networks()?;
        let var = format!(
            "$({})",
            KubeNames(RunNames::new(&self.run_id)).proxy_host_var()
        );
        let mut objs = Vec::new();
        for o in &played {
            let text = serde_json::to_string(o).context("serialising an object")?;
            objs.push(
                serde_json::from_str::<Value>(&text.replace(&var, &ip))
                    .context("re-reading an object")?,
            );
        }
        for cm in self.config_maps.borrow().iter() {
            let n = &cm["metadata"]["name"];
            let defined = objs
                .iter()
                .any(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == *n);
            if !defined && objs.iter().any(|o| mounts_config_map(o, n)) {
                objs.insert(0, cm.clone());
            }
        }
        for o in &objs {
            if o["kind"] == "ConfigMap"
                && !self
                    .config_maps
                    .borrow()
                    .iter()
                    .any(|c| c["metadata"]["name"] == o["metadata"]["name"])
            {
                self.config_maps.borrow_mut().push(o.clone());
            }
        }
        let net = self.net();
        let network: Vec<String> = if objs.iter().any(|o| o["kind"] == "Deployment") {
            vec![
                format!("--network={net}:ip={ip}"),
                format!("--network={net}-egress"),
            ]
        } else if objs.iter().any(|o| {
            o["kind"] == "Job"
                && o["spec"]["template"]["metadata"]["labels"][NO_NETWORK_LABEL] == "none"
        }) {
            vec!["--network=none".into()]
        } else {
            vec![format!("--network={net}")]
        };
        for o in &objs {
            if matches!(
                o["kind"].as_str(),
                Some("ConfigMap" | "Secret" | "PersistentVolumeClaim")
            ) {
                let n = o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                self.played_names
                    .borrow_mut()
                    .push((o["kind"].as_str().unwrap_or_default().to_string(), n));
            }
        }
        let yaml = stream(&objs)?;
        let down = stream(&objs.iter().map(blanked).collect::<Vec<_>>())?;
        self.plays.borrow_mut().push(down);
        let mut args = vec!["kube", "play", "--quiet"];
        args.extend(network.iter().map(String::as_str));
        args.push("-");
        let o = podman(&args, Some(yaml.as_bytes()), APPLY_DEADLINE, None)
            .with_context(|| format!("kube play of {}", names(objects)))?;
        if o.status.success() {
            return Ok(());
        }
        // An init container that fails makes `kube play` fail; on a cluster the Job's Pod
        // fails and the Job with it: so here too, and the wait reads it.
        let job = objs
            .iter()
            .find(|o| o["kind"] == "Job")
            .and_then(|o| o["metadata"]["name"].as_str());
        if let (Some(job), Some(why)) = (job, init_failure(&o.stderr)) {
            self.failed_jobs.borrow_mut().push((job.to_string(), why));
            return Ok(());
        }
        bail!(
            "podman kube play of {} failed ({}): {}",
            names(objects),
            o.status,
            o.stderr.trim()
        )
    }

    fn wait_available(&self, deployment: &str, container: &str, deadline: Duration) -> Result<()> {
        // A played Deployment's Pod is `NAME-pod`, its containers `NAME-pod-CONTAINER`.
        let name = format!("{deployment}-pod-{container}");
        self.wait_for(
            &name,
            "running",
            deadline,
            &format!("Deployment {deployment} (container {name})"),
        )
        .map(drop)
    }

    fn wait_job(&self, job: &str, container: &str, deadline: Duration) -> Result<JobEnd> {
        if let Some((_, why)) = self.failed_jobs.borrow().iter().find(|(j, _)| j == job) {
            return Ok(JobEnd::Failed(why.clone()));
        }
        let name = format!("{job}-pod-{container}");
        let o = self.wait_for(
            &name,
            "exited",
            deadline,
            &format!("Job {job} (container {name})"),
        )?;
        match o.stdout.trim() {
            "0" => Ok(JobEnd::Complete),
            code => Ok(JobEnd::Failed(format!(
                "its container {container} exited {code}"
            ))),
        }
    }

    fn log(&self, job: &str, container: &str, out: &Path, cap: u64) -> Result<()> {
        let name = format!("{job}-pod-{container}");
        let o = podman(&["logs", &name], None, QUERY_DEADLINE, Some((out, cap)))?;
        if !o.status.success() {
            bail!(
                "podman logs {name} failed ({}): {}",
                o.status,
                o.stderr.trim()
            );
        }
        // The container's stderr comes on podman's stderr: appended, as `kubectl logs` merges it.
        if !o.stderr.is_empty() {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(out)
                .with_context(|| format!("opening {}", out.display()))?;
            let room = usize::try_from(cap).unwrap_or(usize::MAX);
            let e = o.stderr.as_bytes();
            f.write_all(&e[..e.len().min(room)])
                .with_context(|| format!("writing {}", out.display()))?;
        }
        Ok(())
    }

    fn delete_run(&self, run_id: &str, _secrets: &[String]) -> Result<()> {
        let mut errors = Vec::new();
        for play in self.plays.borrow().iter().rev() {
            if let Err(e) = podman_ok(
                &["kube", "down", "--force", "-"],
                Some(play.as_bytes()),
                DELETE_DEADLINE,
                "kube down",
            ) {
                errors.push(format!("{e:#}"));
            }
        }
        let sel = format!("label={}={run_id}", label::RUN);
        let pods = podman_ok(
            &["pod", "ps", "-q", "--filter", &sel],
            None,
            QUERY_DEADLINE,
            "listing the run's pods",
        )?;
        for p in pods.split_whitespace() {
            if let Err(e) = podman_ok(
                &["pod", "rm", "-f", p],
                None,
                DELETE_DEADLINE,
                &format!("removing pod {p}"),
            ) {
                errors.push(format!("{e:#}"));
            }
        }
        // A played Secret is a podman secret and, mounted, a volume of its name too; a
        // ConfigMap or a claim a volume.
        for (kind, n) in self.played_names.borrow().iter() {
            let mut rm: Vec<(&str, [&str; 3])> = vec![("volume", ["volume", "rm", "--force"])];
            if kind == "Secret" {
                rm.push(("secret", ["secret", "rm", "--ignore"]));
            }
            for (what, args) in rm {
                let mut a = args.to_vec();
                a.push(n);
                let o = podman(&a, None, QUERY_DEADLINE, None)?;
                if !o.status.success() && !o.stderr.contains("no such") {
                    errors.push(format!("removing {what} {n}: {}", o.stderr.trim()));
                }
            }
        }
        let net = self.net();
        for n in [net.clone(), format!("{net}-egress")] {
            let o = podman(
                &["network", "rm", "--force", &n],
                None,
                QUERY_DEADLINE,
                None,
            )?;
            if !o.status.success() && !o.stderr.contains("unable to find network") {
                errors.push(format!("removing network {n}: {}", o.stderr.trim()));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            bail!("deleting run {run_id}: {}", errors.join("; "))
        }
    }

    fn leftovers(&self, run_id: &str, _secrets: &[String]) -> Result<Vec<String>> {
        let sel = format!("label={}={run_id}", label::RUN);
        let mut left = Vec::new();
        for (kind, args) in [
            (
                "pod",
                vec!["pod", "ps", "--format", "{{.Name}}", "--filter", &sel],
            ),
            (
                "container",
                vec!["ps", "-a", "--format", "{{.Names}}", "--filter", &sel],
            ),
            (
                "volume",
                vec!["volume", "ls", "--format", "{{.Name}}", "--filter", &sel],
            ),
        ] {
            let out = podman_ok(
                &args,
                None,
                QUERY_DEADLINE,
                &format!("listing the run's {kind}s"),
            )?;
            left.extend(out.split_whitespace().map(|n| format!("{kind}/{n}")));
        }
        let volumes = podman_ok(
            &["volume", "ls", "--format", "{{.Name}}"],
            None,
            QUERY_DEADLINE,
            "listing volumes",
        )?;
        let secrets = podman_ok(
            &["secret", "ls", "--format", "{{.Name}}"],
            None,
            QUERY_DEADLINE,
            "listing secrets",
        )?;
        for (_, n) in self.played_names.borrow().iter() {
            for (list, what) in [(&secrets, "secret"), (&volumes, "volume")] {
                let entry = format!("{what}/{n}");
                if list.split_whitespace().any(|v| v == n) && !left.contains(&entry) {
                    left.push(entry);
                }
            }
        }
        let nets = podman_ok(
            &["network", "ls", "--format", "{{.Name}}"],
            None,
            QUERY_DEADLINE,
            "listing networks",
        )?;
        let net = self.net();
        for n in nets.split_whitespace() {
            if n == net || n == format!("{net}-egress") {
                left.push(format!("network/{n}"));
            }
        }
        Ok(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_values_are_blanked_for_kube_down_and_the_proxy_takes_the_second_address() {
        let s =
            json!({"kind": "Secret", "metadata": {"name": "x"}, "stringData": {"k": "value-1"}});
        let b = blanked(&s);
        assert_eq!(b["stringData"]["k"], "");
        assert!(!stream(&[b]).expect("yaml").contains("value-1"));
        assert_eq!(second_address("10.89.3.0/24").as_deref(), Some("10.89.3.2"));
        assert_eq!(second_address("fd00::/64"), None);
        assert_eq!(
            init_failure("Error: encountered while bringing up pod p: init container abc exited with code 128").as_deref(),
            Some("an init container of its Pod exited 128")
        );
        assert_eq!(init_failure("Error: no such image"), None);
        let job = json!({"kind": "Job", "spec": {"template": {"spec": {"volumes": [{"name": "b", "configMap": {"name": "cm"}}]}}}});
        assert!(mounts_config_map(&job, &json!("cm")));
        assert!(!mounts_config_map(&job, &json!("other")));
    }
}
