//! Facts about podman and Quadlet: the podman side of the check (version, cached by binary;
//! `podman info`; images; the outcome test) and the Quadlet generator.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::{
    Fact, GatherInput, ImageFact, OutcomeFacts, QUADLET_GENERATOR, QUICK_DEADLINE, SLOW_DEADLINE,
    StorageFacts, TenantFacts, USER_GENERATOR_DIRS, image_in_store, is_executable_file,
    needed_images, outcome_test, read_image_store,
};
use crate::podman::{Podman, PodmanInfo};
use crate::process;

/// podman on `$PATH`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodmanFacts {
    /// The path found on `$PATH`; `None` when there is none.
    pub path: Option<String>,
    /// What `podman --version` said (`"5.4.2"`); `None` when podman was not found.
    pub version: Option<Fact<String>>,
    /// `--quick` took the version from the cache for this exact binary instead of running it.
    pub version_cached: bool,
}

/// The Quadlet user generator.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QuadletFacts {
    /// The directories searched, in systemd's order.
    pub searched: Vec<String>,
    /// The first `podman-user-generator` found.
    pub generator: Option<String>,
    /// What `GENERATOR -version` said; `None` when there is no generator.
    pub version: Option<Fact<String>>,
    /// Without `--quick`: whether `QUADLET_UNIT_DIRS=TMP GENERATOR -dryrun -user` turned a
    /// scratch `probe.container` into `probe.service` (B01); `None` when not run.
    pub dryrun: Option<Fact<bool>>,
}

#[derive(Default)]
pub(super) struct PodmanSide {
    pub(super) version: Option<Fact<String>>,
    pub(super) version_cached: bool,
    pub(super) info: Option<Fact<PodmanInfo>>,
    pub(super) uid_map: Option<Fact<Vec<String>>>,
    pub(super) tenants: Vec<TenantFacts>,
    pub(super) outcome: Option<Fact<OutcomeFacts>>,
    pub(super) gvisor_proof: Option<Fact<super::GvisorProof>>,
}

/// Everything that runs podman, in one thread: version, then (full mode) info, image presence,
/// the outcome test and, when runsc was found (`host::facts::gvisor::look`), the gVisor proof.
pub(super) fn podman_side(
    path: Option<&str>,
    input: &GatherInput<'_>,
    storage: &StorageFacts,
) -> PodmanSide {
    let podman = path.map(Podman::with_bin);
    let cache = input
        .env
        .runtime_dir
        .as_ref()
        .map(|d| d.join("cyclix/podman-version.json"));
    let mut version_cached = false;
    let version = podman.as_ref().map(|p| {
        let key = path.and_then(binary_key);
        if input.quick
            && let (Some(key), Some(cache)) = (&key, &cache)
            && let Some(v) = cached_version(cache, key)
        {
            version_cached = true;
            return Ok(v);
        }
        let v = p.version_line(QUICK_DEADLINE).map_err(|e| e.to_string())?;
        if let (Some(key), Some(cache)) = (key, &cache) {
            store_version(cache, key, &v);
        }
        Ok(v)
    });
    let store = if input.quick {
        Some(read_image_store(storage))
    } else {
        None
    };
    let tenants = input
        .tenants
        .iter()
        .map(|t| {
            let images = t.spec.as_ref().map_or_else(
                |_| Vec::new(),
                |spec| {
                    needed_images(spec)
                        .into_iter()
                        .map(|(role, reference, pinned)| {
                            let present = match (&podman, &store) {
                                (_, Some(store)) => store
                                    .as_ref()
                                    .map(|s| image_in_store(s, &reference))
                                    .map_err(Clone::clone),
                                (Some(p), None) => {
                                    p.image_exists(&reference).map_err(|e| e.to_string())
                                }
                                (None, None) => Err("podman is not on $PATH".to_string()),
                            };
                            ImageFact {
                                role,
                                reference,
                                pinned,
                                present,
                            }
                        })
                        .collect()
                },
            );
            TenantFacts {
                name: t.name.clone(),
                file: t.file.clone(),
                spec: t.spec.clone(),
                images,
                env: t.env.clone(),
                base: t.base.clone(),
                keeper: t.keeper.clone(),
                task: t.task.clone(),
            }
        })
        .collect();
    let slow = match (&podman, input.quick) {
        (Some(p), false) => slow_side(p),
        _ => SlowSide::default(),
    };
    PodmanSide {
        version,
        version_cached,
        info: slow.info,
        uid_map: slow.uid_map,
        tenants,
        outcome: slow.outcome,
        gvisor_proof: slow.gvisor_proof,
    }
}

/// What only the full check asks podman.
#[derive(Default)]
struct SlowSide {
    info: Option<Fact<PodmanInfo>>,
    uid_map: Option<Fact<Vec<String>>>,
    outcome: Option<Fact<OutcomeFacts>>,
    gvisor_proof: Option<Fact<super::GvisorProof>>,
}

/// The full check's podman work, in parallel: `podman info` and the uid map, the outcome test
/// and, when runsc was found (`host::facts::gvisor::look`), the gVisor proof.
fn slow_side(p: &Podman) -> SlowSide {
    std::thread::scope(|scope| {
        let info = scope.spawn(|| {
            let info = p.info(SLOW_DEADLINE).map_err(|e| e.to_string());
            let map = p
                .unshare_uid_map(SLOW_DEADLINE)
                .map(|m| m.lines().map(|l| l.trim().to_string()).collect())
                .map_err(|e| e.to_string());
            (info, map)
        });
        let gvisor = scope.spawn(|| {
            let runsc = crate::host::facts::gvisor::look().ok()?;
            Some(super::gvisor_proof(p, &runsc))
        });
        let outcome = outcome_test(p);
        let (info, map) = info.join().unwrap_or_else(|_| {
            let e = "the podman info thread panicked".to_string();
            (Err(e.clone()), Err(e))
        });
        let gvisor_proof = gvisor
            .join()
            .unwrap_or_else(|_| Some(Err("the gVisor proof thread panicked".into())));
        SlowSide {
            info: Some(info),
            uid_map: Some(map),
            outcome: Some(outcome),
            gvisor_proof,
        }
    })
}

/// What identifies an installed binary: a package upgrade or a different file changes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BinaryKey {
    /// The path found on `$PATH`.
    pub path: String,
    /// Device and inode of the file it resolves to.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i128,
    /// Status change time, ns since the epoch.
    pub ctime_ns: i128,
}

#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct CachedVersion {
    pub(super) key: BinaryKey,
    pub(super) version: String,
}

pub(super) fn binary_key(path: &str) -> Option<BinaryKey> {
    let m = fs::metadata(path).ok()?;
    Some(BinaryKey {
        path: path.to_string(),
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        ctime_ns: i128::from(m.ctime()) * 1_000_000_000 + i128::from(m.ctime_nsec()),
    })
}

/// The podman version `--quick` remembered for exactly this binary (same path, inode, size,
/// mtime and ctime), from `$XDG_RUNTIME_DIR/cyclix/podman-version.json` (a tmpfs: gone at
/// reboot). Saves the 25 ms of `podman --version`; a different or upgraded binary misses.
pub(super) fn cached_version(cache: &Path, key: &BinaryKey) -> Option<String> {
    let text = fs::read_to_string(cache).ok()?;
    let c: CachedVersion = serde_json::from_str(&text).ok()?;
    (c.key == *key).then_some(c.version)
}

pub(super) fn store_version(cache: &Path, key: BinaryKey, version: &str) {
    let Some(dir) = cache.parent() else { return };
    let Ok(text) = serde_json::to_string(&CachedVersion {
        key,
        version: version.to_string(),
    }) else {
        return;
    };
    // Best effort: a cache that cannot be written only costs the next --quick 25 ms.
    let ok =
        fs::create_dir_all(dir).is_ok() && crate::atomic::write(cache, text.as_bytes()).is_ok();
    if !ok {
        tracing::debug!(cache = %cache.display(), "cannot write the podman version cache");
    }
}

/// The Quadlet user generator the user manager runs ([`first_generator`] over systemd's user
/// generator directories, [`USER_GENERATOR_DIRS`]).
#[must_use]
pub fn find_generator() -> Option<String> {
    first_generator(&USER_GENERATOR_DIRS)
}

/// The `podman-user-generator` systemd runs from `dirs` (in its order): the first entry of
/// that name decides, as in systemd (systemd.generator(7)). `None` when there is none, when
/// the first is masked (a link to `/dev/null`: the admin turned Quadlet off for every user
/// manager) or is not an executable file.
#[must_use]
pub fn first_generator(dirs: &[&str]) -> Option<String> {
    let first = dirs
        .iter()
        .map(|d| Path::new(d).join(QUADLET_GENERATOR))
        .find(|p| p.symlink_metadata().is_ok())?;
    let masked = fs::canonicalize(&first).is_ok_and(|t| t == Path::new("/dev/null"));
    (!masked && is_executable_file(&first)).then(|| first.to_string_lossy().into_owned())
}

/// Runs the generator in user dry-run mode over a scratch directory holding only
/// `probe.container` (`env QUADLET_UNIT_DIRS=DIR GENERATOR -dryrun -user`): `Ok(true)` when it
/// printed the `---probe.service---` unit (B01).
pub(super) fn quadlet_dryrun(generator: &str) -> Fact<bool> {
    let dir = tempfile::tempdir().map_err(|e| format!("creating a scratch unit dir: {e}"))?;
    fs::write(
        dir.path().join("probe.container"),
        "[Container]\nImage=localhost/cyclix-check-probe:latest\nExec=true\n",
    )
    .map_err(|e| format!("writing the probe unit: {e}"))?;
    let dirs = format!("QUADLET_UNIT_DIRS={}", dir.path().display());
    let out = process::run(
        "env",
        &[&dirs, generator, "-dryrun", "-user"],
        None,
        QUICK_DEADLINE,
        "",
    )
    .map_err(|e| e.to_string())?;
    Ok(out.stdout.contains("---probe.service---"))
}
