//! The only place that runs podman: version, images, builds, secrets, and the inventory and
//! removal of a run's objects by label.
//!
//! Every call goes through [`crate::process`] with a deadline ([`PODMAN_QUERY_DEADLINE`],
//! [`PODMAN_REMOVE_DEADLINE`], or the caller's for [`Podman::build`]). Output that cyclix reads
//! is JSON (`--format json`, or `--format '{{json .}}'` where podman 5.4 has no JSON mode) and
//! is parsed by the pure `parse_*` functions, which are tested against output captured from
//! podman 5.4.2 (`tests/fixtures/podman/`). Errors carry the argv, podman's stderr and what
//! cyclix was doing; a podman that cannot be started gets the hint "is podman installed?".
//!
//! Secret values travel on podman's stdin (`podman secret create NAME -`), never in argv.
//!
//! Removal is idempotent: removing what is already gone is success. Facts observed on podman
//! 5.4.2 (testbed): `rm -f -i`, `pod rm -f -i`, `network rm -f` and `volume rm -f` exit 0 for
//! missing names, also mixed with existing ones; `secret rm` exits 125 with `no such secret`
//! (its `--ignore` flag is missing from podman 4.3, so cyclix matches the message instead).
//! Nothing here reads the journal.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::process::{self, ProcessError};

/// Deadline of a podman query or a small change (version, ps, ls, exists, secret create/rm):
/// 30 s. Podman's first call after boot migrates storage and can take seconds.
pub const PODMAN_QUERY_DEADLINE: Duration = Duration::from_secs(30);

/// Deadline of one removal call (`rm`, `pod rm`, `network rm`, `volume rm`): 60 s. Removal uses
/// `--time 0`, so no call waits for a container's stop timeout.
pub const PODMAN_REMOVE_DEADLINE: Duration = Duration::from_secs(60);

const HINT: &str = " (is podman installed and on $PATH? `cyclix check` tells)";

/// Why a podman operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PodmanError {
    /// podman failed, timed out or could not be started.
    #[error("{action}: {source}")]
    Command {
        /// What cyclix was doing, naming the object ("creating secret cyclix-r1-KEY").
        action: String,
        /// The process failure (argv, status, stderr, hint).
        #[source]
        source: ProcessError,
    },
    /// podman's output did not have the shape podman 5.4 documents and prints.
    #[error(
        "{action}: cannot read podman's output ({detail}); `cyclix check` shows the podman \
         version in use"
    )]
    Output {
        /// What cyclix was doing.
        action: String,
        /// The parse failure.
        detail: String,
    },
    /// A name podman would read as an option.
    #[error("{what} `{name}` starts with `-`: use a name that starts with a letter or digit")]
    BadName {
        /// The kind of object.
        what: &'static str,
        /// The name.
        name: String,
    },
}

/// Result of this module.
pub type Result<T> = std::result::Result<T, PodmanError>;

/// Labels as podman prints them (`null` when there are none).
pub type Labels = BTreeMap<String, String>;

/// A container of [`Podman::containers`] (`podman ps -a --format json`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ContainerInfo {
    /// Full container id (64 hex digits).
    pub id: String,
    /// Names (podman prints a list; one in practice).
    pub names: Vec<String>,
    /// `created`, `running`, `exited`, `stopping`, … (podman's `State`).
    pub state: String,
    /// Labels.
    pub labels: Labels,
    /// Id of the pod the container belongs to, if any.
    pub pod: Option<String>,
    /// Whether it is a pod's infra container (removed with its pod, not by itself).
    pub is_infra: bool,
}

/// A pod of [`Podman::pods`] (`podman pod ps --format json`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PodInfo {
    /// Full pod id.
    pub id: String,
    /// Name.
    pub name: String,
    /// `Created`, `Running`, `Degraded`, `Exited`, … (podman's `Status`).
    pub status: String,
    /// Labels.
    pub labels: Labels,
}

/// A network of [`Podman::networks`] (`podman network ls --format json`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NetworkInfo {
    /// Full network id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Whether it was created `--internal` (no route out).
    pub internal: bool,
    /// Its subnets in CIDR form (`10.89.0.0/24`).
    pub subnets: Vec<String>,
    /// Labels.
    pub labels: Labels,
}

/// A volume of [`Podman::volumes`] (`podman volume ls --format json`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VolumeInfo {
    /// Name (volumes have no separate id).
    pub name: String,
    /// Labels.
    pub labels: Labels,
}

fn labels<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Labels, D::Error> {
    Ok(Option::<Labels>::deserialize(d)?.unwrap_or_default())
}

fn list<T: serde::de::DeserializeOwned>(json: &str) -> serde_json::Result<Vec<T>> {
    // podman prints `[]` for no objects; accept `null` and empty output as well.
    if json.trim().is_empty() {
        return Ok(Vec::new());
    }
    Ok(serde_json::from_str::<Option<Vec<T>>>(json)?.unwrap_or_default())
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct PsEntry {
    id: String,
    #[serde(default)]
    names: Option<Vec<String>>,
    state: String,
    #[serde(default, deserialize_with = "labels")]
    labels: Labels,
    #[serde(default)]
    pod: String,
    #[serde(default)]
    is_infra: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct PodEntry {
    id: String,
    name: String,
    status: String,
    #[serde(default, deserialize_with = "labels")]
    labels: Labels,
}

#[derive(Deserialize)]
struct NetworkEntry {
    id: String,
    name: String,
    #[serde(default)]
    internal: bool,
    #[serde(default)]
    subnets: Option<Vec<SubnetEntry>>,
    #[serde(default, deserialize_with = "labels")]
    labels: Labels,
}

#[derive(Deserialize)]
struct SubnetEntry {
    subnet: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct VolumeEntry {
    name: String,
    #[serde(default, deserialize_with = "labels")]
    labels: Labels,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct VersionOutput {
    client: VersionClient,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct VersionClient {
    version: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct SecretEntry {
    name: String,
}

/// Parses `podman ps -a --format json`.
///
/// # Errors
/// The JSON does not have podman 5.4's shape.
pub fn parse_containers(json: &str) -> serde_json::Result<Vec<ContainerInfo>> {
    Ok(list::<PsEntry>(json)?
        .into_iter()
        .map(|e| ContainerInfo {
            id: e.id,
            names: e.names.unwrap_or_default(),
            state: e.state,
            labels: e.labels,
            pod: Some(e.pod).filter(|p| !p.is_empty()),
            is_infra: e.is_infra,
        })
        .collect())
}

/// Parses `podman pod ps --format json`.
///
/// # Errors
/// The JSON does not have podman 5.4's shape.
pub fn parse_pods(json: &str) -> serde_json::Result<Vec<PodInfo>> {
    Ok(list::<PodEntry>(json)?
        .into_iter()
        .map(|e| PodInfo {
            id: e.id,
            name: e.name,
            status: e.status,
            labels: e.labels,
        })
        .collect())
}

/// Parses `podman network inspect --format json`: the names of the attached containers,
/// sorted.
///
/// # Errors
/// The JSON does not have podman 5.4's shape.
pub fn parse_network_containers(json: &str) -> serde_json::Result<Vec<String>> {
    let v: Vec<serde_json::Value> = serde_json::from_str(json)?;
    let mut names: Vec<String> = v
        .iter()
        .filter_map(|n| n.get("containers").and_then(serde_json::Value::as_object))
        .flat_map(|m| {
            m.values().filter_map(|c| {
                c.get("name")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_string)
            })
        })
        .collect();
    names.sort();
    Ok(names)
}

/// Parses `podman top CONTAINER hpid comm`: a header line, then `PID COMMAND` rows.
#[must_use]
pub fn parse_top(out: &str) -> Vec<(u32, String)> {
    out.lines()
        .skip(1)
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let pid = it.next()?.parse().ok()?;
            Some((pid, it.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

/// Parses `podman network ls --format json` (netavark's lowercase keys).
///
/// # Errors
/// The JSON does not have podman 5.4's shape.
pub fn parse_networks(json: &str) -> serde_json::Result<Vec<NetworkInfo>> {
    Ok(list::<NetworkEntry>(json)?
        .into_iter()
        .map(|e| NetworkInfo {
            id: e.id,
            name: e.name,
            internal: e.internal,
            subnets: e
                .subnets
                .unwrap_or_default()
                .into_iter()
                .map(|s| s.subnet)
                .collect(),
            labels: e.labels,
        })
        .collect())
}

/// Parses `podman volume ls --format json`.
///
/// # Errors
/// The JSON does not have podman 5.4's shape.
pub fn parse_volumes(json: &str) -> serde_json::Result<Vec<VolumeInfo>> {
    Ok(list::<VolumeEntry>(json)?
        .into_iter()
        .map(|e| VolumeInfo {
            name: e.name,
            labels: e.labels,
        })
        .collect())
}

/// Parses `podman version --format json` into the client version (`"5.4.2"`).
///
/// # Errors
/// The JSON has no `Client.Version`.
pub fn parse_version(json: &str) -> serde_json::Result<String> {
    Ok(serde_json::from_str::<VersionOutput>(json)?.client.version)
}

/// Parses `podman secret ls --format '{{json .}}'` (one JSON object per line; podman 5.4's
/// `secret ls --format json` prints the word `json`) into the secret names.
///
/// # Errors
/// A line that is not such an object.
pub fn parse_secret_names(json_lines: &str) -> serde_json::Result<Vec<String>> {
    json_lines
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<SecretEntry>(l).map(|s| s.name))
        .collect()
}

/// What `cyclix check` reads from `podman info --format json` (podman 5.4 key names).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct PodmanInfo {
    /// `version.Version`, e.g. `"5.4.2"`.
    pub version: String,
    /// `host.ociRuntime.name`, e.g. `"crun"`.
    pub oci_runtime: String,
    /// `host.ociRuntime.path`.
    pub oci_runtime_path: String,
    /// `host.networkBackend`: `"netavark"` or `"cni"`.
    pub network_backend: String,
    /// `host.networkBackendInfo.dns.path`: aardvark-dns, empty when absent.
    pub dns_path: String,
    /// `host.pasta.executable`, empty when absent.
    pub pasta: String,
    /// `host.slirp4netns.executable`, empty when absent.
    pub slirp4netns: String,
    /// `host.cgroupManager`: `"systemd"` or `"cgroupfs"`.
    pub cgroup_manager: String,
    /// `host.cgroupVersion`: `"v2"` or `"v1"`.
    pub cgroup_version: String,
    /// `host.cgroupControllers`: the controllers podman can use (empty: none delegated).
    pub cgroup_controllers: Vec<String>,
    /// `host.security.rootless`.
    pub rootless: bool,
    /// `store.graphDriverName`, e.g. `"overlay"`.
    pub graph_driver: String,
}

/// Parses `podman info --format json` (podman 5.4's lowerCamelCase keys; missing keys become
/// empty strings).
///
/// # Errors
/// The text is not a JSON object.
pub fn parse_info(json: &str) -> serde_json::Result<PodmanInfo> {
    let v: serde_json::Value = serde_json::from_str(json)?;
    if !v.is_object() {
        return Err(serde::de::Error::custom("podman info is not a JSON object"));
    }
    let s = |ptr: &str| {
        v.pointer(ptr)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    Ok(PodmanInfo {
        version: s("/version/Version"),
        oci_runtime: s("/host/ociRuntime/name"),
        oci_runtime_path: s("/host/ociRuntime/path"),
        network_backend: s("/host/networkBackend"),
        dns_path: s("/host/networkBackendInfo/dns/path"),
        pasta: s("/host/pasta/executable"),
        slirp4netns: s("/host/slirp4netns/executable"),
        cgroup_manager: s("/host/cgroupManager"),
        cgroup_version: s("/host/cgroupVersion"),
        cgroup_controllers: v
            .pointer("/host/cgroupControllers")
            .and_then(serde_json::Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(serde_json::Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        rootless: v
            .pointer("/host/security/rootless")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false),
        graph_driver: s("/store/graphDriverName"),
    })
}

/// Parses the output of `podman --version` (`podman version 5.4.2`) into `"5.4.2"`.
#[must_use]
pub fn parse_version_line(text: &str) -> Option<String> {
    let line = text.lines().next()?.trim();
    let v = line.strip_prefix("podman version ")?.trim();
    (!v.is_empty() && v.starts_with(|c: char| c.is_ascii_digit())).then(|| v.to_string())
}

fn check_name(what: &'static str, name: &str) -> Result<()> {
    if name.starts_with('-') {
        Err(PodmanError::BadName {
            what,
            name: name.to_string(),
        })
    } else {
        Ok(())
    }
}

/// The podman command-line client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Podman {
    bin: String,
}

impl Default for Podman {
    fn default() -> Self {
        Self::new()
    }
}

impl Podman {
    /// `podman` from `$PATH`.
    #[must_use]
    pub fn new() -> Self {
        Self::with_bin("podman")
    }

    /// A given podman binary (a path or a name looked up in `$PATH`).
    #[must_use]
    pub fn with_bin(bin: impl Into<String>) -> Self {
        Self { bin: bin.into() }
    }

    /// The binary this client runs.
    #[must_use]
    pub fn bin(&self) -> &str {
        &self.bin
    }

    fn run(
        &self,
        args: &[&str],
        stdin: Option<&[u8]>,
        deadline: Duration,
        action: impl Fn() -> String,
    ) -> Result<process::Output> {
        process::run(&self.bin, args, stdin, deadline, HINT).map_err(|source| {
            PodmanError::Command {
                action: action(),
                source,
            }
        })
    }

    fn query<T>(
        &self,
        args: &[&str],
        action: &str,
        parse: impl Fn(&str) -> serde_json::Result<T>,
    ) -> Result<T> {
        let out = self.run(args, None, PODMAN_QUERY_DEADLINE, || action.to_string())?;
        parse(&out.stdout).map_err(|e| PodmanError::Output {
            action: action.to_string(),
            detail: e.to_string(),
        })
    }

    /// The client version (`podman version --format json` → `Client.Version`, e.g. `"5.4.2"`).
    ///
    /// # Errors
    /// [`PodmanError::Command`] (podman missing: the hint says so), [`PodmanError::Output`].
    pub fn version(&self) -> Result<String> {
        self.query(
            &["version", "--format", "json"],
            "reading the podman version",
            parse_version,
        )
    }

    /// The version `podman --version` prints (`"5.4.2"`): the cheapest way to ask podman,
    /// about 25 ms on the testbed against 130 ms for `podman info`. `deadline` bounds it.
    ///
    /// # Errors
    /// [`PodmanError::Command`] (podman missing: the hint says so), [`PodmanError::Output`].
    pub fn version_line(&self, deadline: Duration) -> Result<String> {
        let action = "reading the podman version (podman --version)";
        let out = self.run(&["--version"], None, deadline, || action.to_string())?;
        parse_version_line(&out.stdout).ok_or_else(|| PodmanError::Output {
            action: action.to_string(),
            detail: format!(
                "expected `podman version X.Y.Z`, got {:?}",
                out.stdout.trim()
            ),
        })
    }

    /// `podman info --format json`, parsed; `deadline` bounds it (the first call after boot can
    /// migrate storage and take seconds).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn info(&self, deadline: Duration) -> Result<PodmanInfo> {
        let action = "reading podman info";
        let out = self.run(&["info", "--format", "json"], None, deadline, || {
            action.to_string()
        })?;
        parse_info(&out.stdout).map_err(|e| PodmanError::Output {
            action: action.to_string(),
            detail: e.to_string(),
        })
    }

    /// The uid map of podman's rootless user namespace (`podman unshare cat
    /// /proc/self/uid_map`): one line means podman found no sub-uid range for the user (B10).
    ///
    /// # Errors
    /// [`PodmanError::Command`] (e.g. newuidmap cannot set the map up).
    pub fn unshare_uid_map(&self, deadline: Duration) -> Result<String> {
        let out = self.run(
            &["unshare", "cat", "/proc/self/uid_map"],
            None,
            deadline,
            || "reading podman's user namespace map (podman unshare)".to_string(),
        )?;
        Ok(out.stdout)
    }

    /// Creates network `name` with `--internal` (no route out) and `labels`
    /// (`podman network create --internal --label K=V… -- NAME`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::BadName`].
    pub fn network_create_internal(&self, name: &str, labels: &[(&str, &str)]) -> Result<()> {
        check_name("network name", name)?;
        let label_args: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut args: Vec<&str> = vec!["network", "create", "--internal"];
        for l in &label_args {
            args.extend(["--label", l]);
        }
        args.extend(["--", name]);
        self.run(&args, None, PODMAN_QUERY_DEADLINE, || {
            format!("creating internal network {name}")
        })?;
        Ok(())
    }

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
        let label_args: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut cmd: Vec<&str> = vec!["run", "--rm"];
        for l in &label_args {
            cmd.extend(["--label", l]);
        }
        cmd.extend(run_args);
        cmd.push("--");
        cmd.push(image);
        cmd.extend(argv);
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
        let label_args: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut cmd: Vec<&str> = vec!["run", "--rm", "--name", name];
        for l in &label_args {
            cmd.extend(["--label", l]);
        }
        cmd.extend(run_args);
        cmd.push("--");
        cmd.push(image);
        cmd.extend(argv);
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
        let p = path.to_string_lossy();
        self.run(
            &["unshare", "rm", "-rf", "--one-file-system", "--", &p],
            None,
            deadline,
            || format!("removing {} (podman unshare rm -rf)", path.display()),
        )?;
        Ok(())
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

    /// The host pids and command names of the processes in `container` (`podman top CONTAINER
    /// hpid comm`), as the host sees them.
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn top_hpids(&self, container: &str) -> Result<Vec<(u32, String)>> {
        check_name("container", container)?;
        self.query(
            &["top", container, "hpid", "comm"],
            &format!("listing the processes of container {container}"),
            |out| Ok(parse_top(out)),
        )
    }

    /// Names of the containers attached to network `name` (`podman network inspect`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn network_containers(&self, name: &str) -> Result<Vec<String>> {
        check_name("network", name)?;
        self.query(
            &["network", "inspect", "--format", "json", "--", name],
            &format!("inspecting network {name}"),
            parse_network_containers,
        )
    }

    /// The id of local image `reference` (`podman image inspect --format {{.Id}}`): running by
    /// id pins the image for the call. Never pulls.
    ///
    /// # Errors
    /// [`PodmanError::Command`] (the image is missing: `cyclix images build` builds it),
    /// [`PodmanError::Output`].
    pub fn image_id(&self, reference: &str) -> Result<String> {
        check_name("image reference", reference)?;
        let action = || {
            format!(
                "looking up the id of image {reference} (missing? `cyclix images build` builds it)"
            )
        };
        let out = self.run(
            &["image", "inspect", "--format", "{{.Id}}", "--", reference],
            None,
            PODMAN_QUERY_DEADLINE,
            action,
        )?;
        let id = out.stdout.trim();
        if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(id.to_string())
        } else {
            Err(PodmanError::Output {
                action: action(),
                detail: format!("not an image id: {id:?}"),
            })
        }
    }

    /// Whether image `reference` is in local storage (`podman image exists`: exit 0 yes, 1 no).
    /// Never pulls.
    ///
    /// # Errors
    /// [`PodmanError::Command`] for any other exit (125: an invalid reference).
    pub fn image_exists(&self, reference: &str) -> Result<bool> {
        check_name("image reference", reference)?;
        let action = || format!("looking up image {reference}");
        let out = process::run_status(
            &self.bin,
            &["image", "exists", "--", reference],
            None,
            PODMAN_QUERY_DEADLINE,
            HINT,
        )
        .map_err(|source| PodmanError::Command {
            action: action(),
            source,
        })?;
        match out.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(PodmanError::Command {
                action: action(),
                source: ProcessError::Failed {
                    argv: format!("{} image exists -- {reference}", self.bin),
                    status: out.status,
                    stderr: out.stderr.trim().to_string(),
                    stdout: out.stdout,
                },
            }),
        }
    }

    /// Builds `containerfile` with `context_dir` as context and tags it `tag`
    /// (`podman build --pull=missing --quiet --tag TAG --file FILE CONTEXT`); returns the image
    /// id. `--pull=missing` pulls a base image only when it is not in local storage, so the same
    /// call works online and offline (the testbed imports its bases; a missing base offline fails
    /// with the registry's DNS error). `deadline` bounds the whole build.
    ///
    /// # Errors
    /// [`PodmanError::Command`] (the build failed or ran past `deadline`; stderr has podman's
    /// reason), [`PodmanError::Output`] (no image id printed).
    pub fn build(
        &self,
        tag: &str,
        containerfile: &Path,
        context_dir: &Path,
        deadline: Duration,
    ) -> Result<String> {
        check_name("image tag", tag)?;
        let file = containerfile.to_string_lossy();
        let context = context_dir.to_string_lossy();
        let action = || {
            format!(
                "building image {tag} from {} (a base image that is not local must be \
                 pullable: `podman pull` it or load it first)",
                containerfile.display()
            )
        };
        let out = self.run(
            &[
                "build",
                "--pull=missing",
                "--quiet",
                "--tag",
                tag,
                "--file",
                &file,
                "--",
                &context,
            ],
            None,
            deadline,
            action,
        )?;
        out.stdout
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
            .ok_or_else(|| PodmanError::Output {
                action: action(),
                detail: "no image id on stdout".into(),
            })
    }

    /// Creates podman secret `name` holding `value`, with `labels`
    /// (`podman secret create --label K=V… -- NAME -`, the value on stdin, never in argv). An
    /// existing secret of that name is an error (no `--replace`: names carry the run id).
    ///
    /// # Errors
    /// [`PodmanError::Command`] (e.g. `secret name in use`), [`PodmanError::BadName`].
    pub fn secret_create(&self, name: &str, value: &[u8], labels: &[(&str, &str)]) -> Result<()> {
        check_name("secret name", name)?;
        let label_args: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut args: Vec<&str> = vec!["secret", "create"];
        for l in &label_args {
            args.extend(["--label", l]);
        }
        args.extend(["--", name, "-"]);
        self.run(&args, Some(value), PODMAN_QUERY_DEADLINE, || {
            format!("creating secret {name}")
        })?;
        Ok(())
    }

    /// Removes secret `name` (`podman secret rm -- NAME`). Returns `false` when it did not exist
    /// (podman 5.4: exit 125, `no such secret`), so teardown can call it twice.
    ///
    /// # Errors
    /// [`PodmanError::Command`] for other failures.
    pub fn secret_rm(&self, name: &str) -> Result<bool> {
        check_name("secret name", name)?;
        match self.run(
            &["secret", "rm", "--", name],
            None,
            PODMAN_QUERY_DEADLINE,
            || format!("removing secret {name}"),
        ) {
            Ok(_) => Ok(true),
            Err(PodmanError::Command {
                source: ProcessError::Failed { ref stderr, .. },
                ..
            }) if stderr.contains("no such secret") => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The names of the secrets starting with `name_prefix`, in podman's order
    /// (`podman secret ls --format '{{json .}}'`; `secret ls` has no label filter in 5.4).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn secrets(&self, name_prefix: &str) -> Result<Vec<String>> {
        let mut names = self.query(
            &["secret", "ls", "--format", "{{json .}}"],
            "listing podman secrets",
            parse_secret_names,
        )?;
        names.retain(|n| n.starts_with(name_prefix));
        Ok(names)
    }

    /// All containers, running or not, carrying `label` (`key=value`, or a bare `key` for any
    /// value): `podman ps -a --filter label=LABEL --format json`.
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn containers(&self, label: &str) -> Result<Vec<ContainerInfo>> {
        let filter = format!("label={label}");
        self.query(
            &["ps", "--all", "--filter", &filter, "--format", "json"],
            &format!("listing containers labelled {label}"),
            parse_containers,
        )
    }

    /// Pods carrying `label` (`podman pod ps --filter label=LABEL --format json`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn pods(&self, label: &str) -> Result<Vec<PodInfo>> {
        let filter = format!("label={label}");
        self.query(
            &["pod", "ps", "--filter", &filter, "--format", "json"],
            &format!("listing pods labelled {label}"),
            parse_pods,
        )
    }

    /// Networks carrying `label` (`podman network ls --filter label=LABEL --format json`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn networks(&self, label: &str) -> Result<Vec<NetworkInfo>> {
        let filter = format!("label={label}");
        self.query(
            &["network", "ls", "--filter", &filter, "--format", "json"],
            &format!("listing networks labelled {label}"),
            parse_networks,
        )
    }

    /// Every network (`podman network ls --format json`), e.g. to find a free subnet.
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn all_networks(&self) -> Result<Vec<NetworkInfo>> {
        self.query(
            &["network", "ls", "--format", "json"],
            "listing networks",
            parse_networks,
        )
    }

    /// Volumes carrying `label` (`podman volume ls --filter label=LABEL --format json`).
    ///
    /// # Errors
    /// [`PodmanError::Command`], [`PodmanError::Output`].
    pub fn volumes(&self, label: &str) -> Result<Vec<VolumeInfo>> {
        let filter = format!("label={label}");
        self.query(
            &["volume", "ls", "--filter", &filter, "--format", "json"],
            &format!("listing volumes labelled {label}"),
            parse_volumes,
        )
    }

    fn remove(&self, what: &'static str, base: &[&str], ids: &[String]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        for id in ids {
            check_name(what, id)?;
        }
        let mut args = base.to_vec();
        args.push("--");
        args.extend(ids.iter().map(String::as_str));
        self.run(&args, None, PODMAN_REMOVE_DEADLINE, || {
            format!("removing {what}s {}", ids.join(" "))
        })?;
        Ok(())
    }

    /// Removes containers (ids or names) with their anonymous volumes, killing running ones
    /// without a grace period (`podman rm --force --volumes --ignore --time 0`). Missing ones are
    /// fine. An infra container goes with its pod ([`Podman::rm_pods`]).
    ///
    /// # Errors
    /// [`PodmanError::Command`].
    pub fn rm_containers(&self, ids: &[String]) -> Result<()> {
        self.remove(
            "container",
            &["rm", "--force", "--volumes", "--ignore", "--time", "0"],
            ids,
        )
    }

    /// Removes pods (ids or names) and their containers
    /// (`podman pod rm --force --ignore --time 0`). Missing ones are fine.
    ///
    /// # Errors
    /// [`PodmanError::Command`].
    pub fn rm_pods(&self, ids: &[String]) -> Result<()> {
        self.remove(
            "pod",
            &["pod", "rm", "--force", "--ignore", "--time", "0"],
            ids,
        )
    }

    /// Removes networks (ids or names) and any container still using them
    /// (`podman network rm --force`; exit 0 for missing names on 5.4).
    ///
    /// # Errors
    /// [`PodmanError::Command`].
    pub fn rm_networks(&self, ids: &[String]) -> Result<()> {
        self.remove("network", &["network", "rm", "--force"], ids)
    }

    /// Removes volumes even if in use (`podman volume rm --force`; exit 0 for missing names on
    /// 5.4).
    ///
    /// # Errors
    /// [`PodmanError::Command`].
    pub fn rm_volumes(&self, ids: &[String]) -> Result<()> {
        self.remove("volume", &["volume", "rm", "--force"], ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PS: &str = include_str!("../tests/fixtures/podman/ps.json");
    const POD_PS: &str = include_str!("../tests/fixtures/podman/pod-ps.json");
    const NETWORK_LS: &str = include_str!("../tests/fixtures/podman/network-ls.json");
    const VOLUME_LS: &str = include_str!("../tests/fixtures/podman/volume-ls.json");
    const VERSION: &str = include_str!("../tests/fixtures/podman/version.json");
    const SECRET_LS: &str = include_str!("../tests/fixtures/podman/secret-ls.jsonl");
    const EMPTY: &str = include_str!("../tests/fixtures/podman/empty-list.json");

    fn run_labels() -> Labels {
        [("io.cyclix.run", "r1"), ("io.cyclix.tenant", "acme")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn containers_from_podman_5_4() {
        let cs = parse_containers(PS).expect("parse");
        let names: Vec<(&str, &str, bool)> = cs
            .iter()
            .map(|c| (c.names[0].as_str(), c.state.as_str(), c.is_infra))
            .collect();
        assert_eq!(
            names,
            [
                ("c8728495906c-infra", "exited", true),
                ("cyclix-r1-agent", "running", false),
                ("cyclix-r1-gate", "created", false),
            ]
        );
        let agent = &cs[1];
        assert_eq!(
            agent.id,
            "9144f0b89dfafbb927f2b92a2d769a2f932edff00d62864b146082095d069c29"
        );
        assert_eq!(agent.labels, run_labels());
        assert_eq!(
            agent.pod.as_deref(),
            Some("c8728495906c6f5717722b112e73ec8cf37d92baf15e1f992b756164dfcd6f13")
        );
        assert_eq!(cs[2].pod, None);
        // The infra container also carries podman's own label.
        assert_eq!(
            cs[0].labels.get("io.buildah.version").map(String::as_str),
            Some("1.39.3")
        );
    }

    #[test]
    fn pods_networks_volumes_from_podman_5_4() {
        let pods = parse_pods(POD_PS).expect("pods");
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].name, "cyclix-r1");
        assert_eq!(pods[0].status, "Degraded");
        assert_eq!(pods[0].labels, run_labels());

        let nets = parse_networks(NETWORK_LS).expect("networks");
        assert_eq!(
            nets,
            [NetworkInfo {
                id: "5315be72fe89af5158592a39a28f0321f030ff9500565e6dc7a10b54c58f9e82".into(),
                name: "cyclix-r1-int".into(),
                internal: true,
                subnets: vec!["10.89.0.0/24".into()],
                labels: run_labels(),
            }]
        );

        let vols = parse_volumes(VOLUME_LS).expect("volumes");
        assert_eq!(
            vols,
            [VolumeInfo {
                name: "cyclix-r1-vol".into(),
                labels: run_labels(),
            }]
        );
    }

    #[test]
    fn empty_and_null_lists() {
        assert!(parse_containers(EMPTY).expect("[]").is_empty());
        assert!(parse_pods(EMPTY).expect("[]").is_empty());
        assert!(parse_networks(EMPTY).expect("[]").is_empty());
        assert!(parse_volumes(EMPTY).expect("[]").is_empty());
        assert!(parse_containers("null").expect("null").is_empty());
        assert!(parse_volumes("").expect("empty").is_empty());
        assert!(parse_secret_names("").expect("empty").is_empty());
        // A container without labels: podman prints `"Labels": null`.
        let c = parse_containers(r#"[{"Id":"a","Names":["n"],"State":"created","Labels":null}]"#)
            .expect("null labels");
        assert!(c[0].labels.is_empty());
    }

    #[test]
    fn version_and_secrets_from_podman_5_4() {
        assert_eq!(parse_version(VERSION).expect("version"), "5.4.2");
        assert_eq!(
            parse_secret_names(SECRET_LS).expect("secrets"),
            ["cyclix-r1-KEY"]
        );
    }

    #[test]
    fn info_and_version_line_from_podman_5_4() {
        let info = parse_info(include_str!("../tests/fixtures/podman/info.json")).expect("info");
        assert_eq!(info.version, "5.4.2");
        assert_eq!(info.oci_runtime, "crun");
        assert_eq!(info.network_backend, "netavark");
        assert_eq!(info.dns_path, "/usr/lib/podman/aardvark-dns");
        assert_eq!(info.pasta, "/usr/bin/pasta");
        assert_eq!(info.cgroup_manager, "systemd");
        assert_eq!(info.cgroup_version, "v2");
        assert!(info.rootless);
        assert_eq!(info.graph_driver, "overlay");
        assert!(parse_info("[]").is_err());
        assert_eq!(
            parse_version_line("podman version 5.4.2\n").as_deref(),
            Some("5.4.2")
        );
        assert_eq!(
            parse_version_line("podman version 4.3.1").as_deref(),
            Some("4.3.1")
        );
        assert_eq!(parse_version_line("docker version 20"), None);
        assert_eq!(parse_version_line(""), None);
    }

    #[test]
    fn wrong_shapes_are_errors() {
        assert!(parse_containers(r#"{"Id":"x"}"#).is_err());
        assert!(parse_pods(r#"[{"Name":"p"}]"#).is_err());
        assert!(parse_version("json").is_err());
        // What `podman secret ls --format json` really prints on 5.4.
        assert!(parse_secret_names("json\n").is_err());
    }

    #[test]
    fn missing_podman_names_the_fix() {
        let p = Podman::with_bin("/nonexistent/podman");
        let e = p.version().expect_err("missing binary");
        let msg = e.to_string();
        assert!(
            msg.contains("reading the podman version")
                && msg.contains("is podman installed")
                && msg.contains("cyclix check"),
            "{msg}"
        );
        // Removing nothing runs nothing, so it succeeds even without podman.
        p.rm_containers(&[]).expect("nothing to remove");
    }

    #[test]
    fn failures_carry_argv_and_stderr_and_never_the_secret() {
        // A stand-in binary: prints to stderr and fails, like podman does.
        let tmp = tempfile::tempdir().expect("tempdir");
        let bin = tmp.path().join("podman");
        std::fs::write(
            &bin,
            "#!/bin/sh\ncat >/dev/null\necho 'Error: no secret with name or id \"x\": no such secret' >&2\nexit 125\n",
        )
        .expect("write");
        let mut perm = std::fs::metadata(&bin).expect("meta").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&bin, perm).expect("chmod");
        let p = Podman::with_bin(bin.to_string_lossy());
        assert!(!p.secret_rm("x").expect("missing is fine"));
        let e = p
            .secret_create("cyclix-r1-KEY", b"s3cret-value", &[("io.cyclix.run", "r1")])
            .expect_err("fails");
        let msg = e.to_string();
        assert!(
            msg.contains("creating secret cyclix-r1-KEY")
                && msg.contains("secret create --label io.cyclix.run=r1 -- cyclix-r1-KEY -")
                && msg.contains("no such secret"),
            "{msg}"
        );
        assert!(!format!("{e:?}").contains("s3cret-value"), "{e:?}");
        let e = p.secret_rm("-rf").expect_err("option-like");
        assert!(matches!(e, PodmanError::BadName { .. }), "{e}");
    }
}
