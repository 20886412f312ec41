//! The base inventories of a tenant's gate, kept between its runs (docs/gate.md): the gate's
//! run on a base tree gives the same per-test results for the same tree, gate image and argv,
//! so a nightly run from an unchanged base reads them instead of running the suite twice.
//!
//! One JSON file per key in the tenant's records directory (`gate-base/KEY.json`,
//! [`crate::layout::RunFiles::gate_base_cache`]), written atomically by cyclix from the results
//! of the base's own code (the agent's code never runs on the base tree); the newest
//! [`KEPT`] are kept. A file that cannot be read, or whose inputs differ from the key's, is
//! ignored: the suite runs again.

use std::path::Path;

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::twin::TestCase;

/// How many base inventories a tenant keeps.
pub const KEPT: usize = 16;

/// The cache file's format version.
const VERSION: u32 = 1;

/// What decides a base inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inputs {
    /// The base commit's tree.
    pub tree: String,
    /// The gate image's id.
    pub image: String,
    /// The gate's argv.
    pub argv: Vec<String>,
}

impl Inputs {
    /// The cache key: the SHA-256 of the format version and the inputs, lowercase hex.
    #[must_use]
    pub fn key(&self) -> String {
        let mut h = sha2::Sha256::new();
        h.update(format!("cyclix-gate-base/{VERSION}\0").as_bytes());
        h.update(self.tree.as_bytes());
        h.update(b"\0");
        h.update(self.image.as_bytes());
        for a in &self.argv {
            h.update(b"\0");
            h.update(a.as_bytes());
        }
        h.finalize().iter().fold(String::new(), |mut s, b| {
            use std::fmt::Write as _;
            let _ = write!(s, "{b:02x}");
            s
        })
    }
}

/// One kept base inventory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cached {
    /// [`VERSION`].
    pub version: u32,
    /// What it was made from.
    pub inputs: Inputs,
    /// The run that ran the gate on the base tree.
    pub run_id: String,
    /// The gate's exit status there.
    pub exit: i32,
    /// Its test cases.
    pub tests: Vec<TestCase>,
}

/// The kept inventory of `inputs` in `dir`, if there is a readable one made from exactly
/// those inputs.
#[must_use]
pub fn load(dir: &Path, inputs: &Inputs) -> Option<Cached> {
    let path = dir.join(format!("{}.json", inputs.key()));
    let bytes = std::fs::read(&path).ok()?;
    match serde_json::from_slice::<Cached>(&bytes) {
        Ok(c) if c.version == VERSION && c.inputs == *inputs => Some(c),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!("ignoring the gate's base inventory {}: {e}", path.display());
            None
        }
    }
}

/// Keeps `cached` in `dir` (created), then removes all but the newest [`KEPT`] files.
///
/// # Errors
/// The directory or the file could not be written.
pub fn store(dir: &Path, cached: &Cached) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("{}.json", cached.inputs.key()));
    let json = serde_json::to_vec(cached).context("serialising the gate's base inventory")?;
    crate::atomic::write(&path, &json)?;
    let mut files: Vec<(std::time::SystemTime, std::path::PathBuf)> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    files.sort();
    let excess = files.len().saturating_sub(KEPT);
    for (_, old) in files.into_iter().take(excess) {
        let _ = std::fs::remove_file(old);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twin::TestOutcome;

    fn inputs(tree: &str) -> Inputs {
        Inputs {
            tree: tree.into(),
            image: "i".repeat(64),
            argv: vec!["pytest".into(), "-q".into()],
        }
    }

    #[test]
    fn an_inventory_is_found_again_only_for_the_same_inputs_and_the_newest_are_kept() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("gate-base");
        let c = Cached {
            version: VERSION,
            inputs: inputs("a"),
            run_id: "r1".into(),
            exit: 1,
            tests: vec![TestCase {
                name: "t::x".into(),
                outcome: TestOutcome::Failed,
            }],
        };
        assert_eq!(load(&dir, &c.inputs), None);
        store(&dir, &c).expect("stored");
        assert_eq!(load(&dir, &c.inputs), Some(c.clone()));
        let mut other = inputs("a");
        other.argv.push("-x".into());
        assert_eq!(load(&dir, &other), None, "another argv is another key");
        // A file under the right name with other inputs inside is not believed.
        std::fs::copy(
            dir.join(format!("{}.json", c.inputs.key())),
            dir.join(format!("{}.json", other.key())),
        )
        .expect("copy");
        assert_eq!(load(&dir, &other), None);
        for i in 0..KEPT + 3 {
            let mut more = c.clone();
            more.inputs = inputs(&format!("t{i}"));
            store(&dir, &more).expect("stored");
        }
        assert_eq!(std::fs::read_dir(&dir).expect("ls").count(), KEPT);
    }
}
