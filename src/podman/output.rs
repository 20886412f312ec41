//! What cyclix reads from podman, and the pure parsers of its JSON (`--format json`, or
//! `--format '{{json .}}'` lines), tested against output captured from podman 5.4.2
//! (`tests/fixtures/podman/`).

use serde::Deserialize;

use super::Labels;

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
    /// The networks it is attached to by name (podman's `Networks`; empty for a pod's member,
    /// which shares its infra container's).
    pub networks: Vec<String>,
    /// A running container's namespaces that another container can join with
    /// `--network/--pid/--ipc/--uts container:X` (podman ps `--ns`: `Net`, `Pidns`, `Ipc`,
    /// `Uts`), as (kind, inode) sorted by kind; empty when not listed or not running.
    pub namespaces: Vec<(String, String)>,
    /// A running container's first process, as the host sees it (podman's `Pid`; `None`
    /// when it is not running: podman prints 0).
    pub pid: Option<u32>,
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
    /// Its infra container's full id (podman's `InfraId`; `None` for a pod made without one).
    pub infra: Option<String>,
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
    #[serde(default)]
    networks: Option<Vec<String>>,
    #[serde(default)]
    namespaces: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pid: u32,
}

/// The kinds of [`ContainerInfo::namespaces`]: what `podman run --network/--pid/--ipc/--uts
/// container:X` shares (podman-run(1)); `User` is every rootless container's alike, `Mnt` and
/// `Cgroup` cannot be joined that way.
pub const JOINABLE_NAMESPACES: &[&str] = &["Ipc", "Net", "Pidns", "Uts"];

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct PodEntry {
    id: String,
    name: String,
    status: String,
    #[serde(default, deserialize_with = "labels")]
    labels: Labels,
    #[serde(default)]
    infra_id: String,
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
            networks: e.networks.unwrap_or_default(),
            namespaces: e
                .namespaces
                .into_iter()
                .filter(|(k, v)| JOINABLE_NAMESPACES.contains(&k.as_str()) && !v.is_empty())
                .collect(),
            pid: Some(e.pid).filter(|p| *p != 0),
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
            infra: Some(e.infra_id).filter(|i| !i.is_empty()),
        })
        .collect())
}

/// Parses `podman network inspect --format json`: the names of the attached containers,
/// sorted; `None` when no network in it has a `containers` key, which podman < 5 does not
/// print (podman 4.3.1, Debian 12: measured on the bookworm testbed): the caller then asks
/// `podman ps` (see [`parse_container_names`]).
///
/// # Errors
/// The JSON does not have podman 5.4's shape.
pub fn parse_network_containers(json: &str) -> serde_json::Result<Option<Vec<String>>> {
    let v: Vec<serde_json::Value> = serde_json::from_str(json)?;
    let maps: Vec<_> = v
        .iter()
        .filter_map(|n| n.get("containers").and_then(serde_json::Value::as_object))
        .collect();
    if maps.is_empty() && v.iter().all(|n| n.get("containers").is_none()) {
        return Ok(None);
    }
    let mut names: Vec<String> = maps
        .into_iter()
        .flat_map(|m| {
            m.values().filter_map(|c| {
                c.get("name")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_string)
            })
        })
        .collect();
    names.sort();
    Ok(Some(names))
}

/// The names of a pod's containers in `podman pod inspect --format json` (an object, or an
/// array of one since podman 5), sorted.
///
/// # Errors
/// Not JSON.
pub fn parse_pod_containers(json: &str) -> serde_json::Result<Vec<String>> {
    let v: serde_json::Value = serde_json::from_str(json)?;
    let pods = match v {
        serde_json::Value::Array(a) => a,
        o => vec![o],
    };
    let mut names: Vec<String> = pods
        .iter()
        .filter_map(|p| p.get("Containers").and_then(serde_json::Value::as_array))
        .flatten()
        .filter_map(|c| c.get("Name").and_then(serde_json::Value::as_str))
        .map(str::to_string)
        .collect();
    names.sort();
    Ok(names)
}

/// The names of the containers in `podman ps -a --format json` (infra containers included),
/// sorted: the members of a network on podman < 5 (`--filter network=NAME`).
///
/// # Errors
/// The JSON does not have podman's `ps` shape.
pub fn parse_container_names(json: &str) -> serde_json::Result<Vec<String>> {
    let mut names: Vec<String> = parse_containers(json)?
        .into_iter()
        .flat_map(|c| c.names)
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
    /// `store.graphRoot`: podman's image and container store (its secrets are below it);
    /// never mountable into a sandbox (`spec::mount_guard`).
    pub graph_root: String,
    /// `store.runRoot`: podman's per-boot state.
    pub run_root: String,
    /// `store.volumePath`: where named volumes live.
    pub volume_path: String,
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
        graph_root: s("/store/graphRoot"),
        run_root: s("/store/runRoot"),
        volume_path: s("/store/volumePath"),
    })
}

/// Parses the output of `podman --version` (`podman version 5.4.2`) into `"5.4.2"`.
#[must_use]
pub fn parse_version_line(text: &str) -> Option<String> {
    let line = text.lines().next()?.trim();
    let v = line.strip_prefix("podman version ")?.trim();
    (!v.is_empty() && v.starts_with(|c: char| c.is_ascii_digit())).then(|| v.to_string())
}
