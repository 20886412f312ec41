//! Facts about images and storage: the images a tenant needs, podman's `storage.conf` and its
//! image store's `images.json`.

use std::fs;
use std::path::Path;

use super::Fact;
use crate::context::HostEnv;
use crate::spec::{Image, Spec};

/// The storage driver.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StorageFacts {
    /// `overlay`, `vfs`, ...; `None` when neither configured nor visible in the store.
    pub driver: Option<String>,
    /// Where the driver was read (a `storage.conf`, the store directory, or `podman info`).
    pub source: String,
    /// The image store's root (`graphroot`).
    pub graphroot: String,
}

/// A tenant and its images.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantFacts {
    /// The tenant name (from the file name).
    pub name: String,
    /// The spec file.
    pub file: String,
    /// The validated spec, or the validation report.
    pub spec: Fact<Spec>,
    /// Images a run of this tenant needs (agent, gate, services, and the proxy for tier
    /// `container`), with presence.
    pub images: Vec<ImageFact>,
    /// The variables the spec names and where they are set.
    pub env: Vec<super::EnvNeed>,
    /// The commit `repo.base` names ([`super::TenantInput::base`]).
    pub base: Option<Fact<String>>,
    /// The keeper of its warm pool ([`super::TenantInput::keeper`]).
    pub keeper: Option<super::KeeperFact>,
    /// Whether its `task.file` can be read ([`super::TenantInput::task`]).
    pub task: Option<Fact<()>>,
}

/// One image a tenant needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFact {
    /// `agent`, `gate`, `service NAME` or `proxy`.
    pub role: String,
    /// The reference.
    pub reference: String,
    /// Pinned by digest.
    pub pinned: bool,
    /// Whether local storage has it, or why that could not be read.
    pub present: Fact<bool>,
}

/// The images a run of `spec` needs: (role, reference, pinned); not those it builds from
/// the project's files. Only tier `container` runs containers (and its proxy).
#[must_use]
pub fn needed_images(spec: &Spec) -> Vec<(String, String, bool)> {
    if !crate::tier::floor(spec.tier, spec.legacy_worktree_isolation).is_sandboxed() {
        return Vec::new();
    }
    let one = |role: String, image: &Image| {
        (
            role,
            image.reference().to_string(),
            matches!(image, Image::Pinned { .. }),
        )
    };
    let mut v = vec![
        ("agent".to_string(), &spec.agent.image),
        ("gate".to_string(), &spec.gate.image),
    ];
    for s in &spec.services {
        v.push((format!("service {}", s.name), &s.image));
    }
    // An image built from the project's files (`build:`) is made by the run itself.
    let mut v: Vec<(String, String, bool)> = v
        .into_iter()
        .filter(|(_, i)| i.build().is_none())
        .map(|(role, i)| one(role, i))
        .collect();
    v.push((
        "proxy".into(),
        crate::images::PROXY_IMAGE.to_string(),
        false,
    ));
    v
}

pub use crate::host::storage_conf::value as storage_conf_value;

pub(super) fn storage_facts(env: &HostEnv) -> StorageFacts {
    let user_conf = env.config_home.join("containers/storage.conf");
    let user_text = fs::read_to_string(&user_conf).ok();
    // The same graph root the run's storage-lock wait looks at (`rootless_storage_path`
    // included).
    let graphroot = crate::host::storage_conf::of(env)
        .to_string_lossy()
        .into_owned();
    let mut confs = vec![(user_conf.to_string_lossy().into_owned(), user_text)];
    for sys in [
        "/etc/containers/storage.conf",
        "/usr/share/containers/storage.conf",
    ] {
        confs.push((sys.to_string(), fs::read_to_string(sys).ok()));
    }
    for (file, text) in &confs {
        if let Some(driver) = text
            .as_deref()
            .and_then(|t| storage_conf_value(t, "driver"))
        {
            return StorageFacts {
                driver: Some(driver),
                source: file.clone(),
                graphroot,
            };
        }
    }
    // Not configured: podman picks one and records it in the store's layout.
    for driver in ["overlay", "btrfs", "zfs", "vfs"] {
        let dir = Path::new(&graphroot).join(format!("{driver}-images"));
        if dir.is_dir() {
            return StorageFacts {
                driver: Some(driver.to_string()),
                source: dir.to_string_lossy().into_owned(),
                graphroot,
            };
        }
    }
    StorageFacts {
        driver: None,
        source: "no storage.conf sets a driver and the store is empty".to_string(),
        graphroot,
    }
}

/// An image of the store's `images.json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct StoredImage {
    /// Full names with tags (`docker.io/library/busybox:latest`).
    #[serde(default)]
    pub names: Vec<String>,
    /// Manifest digests (`sha256:...`).
    #[serde(default)]
    pub digests: Vec<String>,
    /// The main manifest digest.
    #[serde(default)]
    pub digest: String,
}

pub(super) fn read_image_store(storage: &StorageFacts) -> Fact<Vec<StoredImage>> {
    let driver = storage.driver.as_deref().unwrap_or("overlay");
    let file = Path::new(&storage.graphroot).join(format!("{driver}-images/images.json"));
    match fs::read_to_string(&file) {
        Ok(text) => {
            serde_json::from_str(&text).map_err(|e| format!("reading {}: {e}", file.display()))
        }
        // No store yet: no images.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(format!("reading {}: {e}", file.display())),
    }
}

/// Whether `reference` is among `images` (c/storage's `images.json`): a digest reference
/// matches a stored digest, a tag reference a stored name (`:latest` implied, unqualified
/// names as `docker.io/library/NAME`).
#[must_use]
pub fn image_in_store(images: &[StoredImage], reference: &str) -> bool {
    if let Some((_, digest)) = reference.split_once('@') {
        return images
            .iter()
            .any(|i| i.digest == digest || i.digests.iter().any(|d| d == digest));
    }
    let last = reference.rsplit('/').next().unwrap_or(reference);
    let tagged = if last.contains(':') {
        reference.to_string()
    } else {
        format!("{reference}:latest")
    };
    let first = tagged.split('/').next().unwrap_or_default();
    let qualified = if tagged.contains('/')
        && (first.contains('.') || first.contains(':') || first == "localhost")
    {
        tagged
    } else if tagged.contains('/') {
        format!("docker.io/{tagged}")
    } else {
        format!("docker.io/library/{tagged}")
    };
    images.iter().any(|i| i.names.contains(&qualified))
}
