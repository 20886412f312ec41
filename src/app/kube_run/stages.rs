//! The pure-ish parts of `cyclix kube-run`: which exported objects go in which stage, what
//! the agent's log says (the probe lines), and the collector's log turned into an import.

use std::path::Path;

use anyhow::{Context as _, Result};
use serde_json::Value;

use crate::render::kube::Manifest;
use crate::render::kube::gate::COLLECT_MARK;
use crate::run::record::{ImportRecord, RunRecord};

/// The run's objects by stage, in apply order.
#[derive(Debug, Default)]
pub(super) struct Stages {
    /// The proxy (its ConfigMap, Service, Deployment) and the NetworkPolicies: first, so the
    /// Service exists before the agent's Pod (its address is a Service variable) and the
    /// policies before any Pod they select.
    pub proxy: Vec<Value>,
    /// The run's ConfigMap, the work volume, the agent Job.
    pub agent: Vec<Value>,
    /// The gate Job, once the agent Job completed.
    pub gate: Vec<Value>,
    /// The collector Job, once the gate Job ended.
    pub collect: Vec<Value>,
}

/// Splits the export's `run/` manifests into stages (the `schedule/` ones are the CronJob's,
/// not a run's).
pub(super) fn split(manifests: &[Manifest]) -> Stages {
    let mut s = Stages::default();
    for m in manifests {
        let Some(file) = m.file.strip_prefix("run/") else {
            continue;
        };
        let to = if file.starts_with("proxy-") || file.starts_with("netpol-") {
            &mut s.proxy
        } else if file == "gate-job.yaml" {
            &mut s.gate
        } else if file == "collect-job.yaml" {
            &mut s.collect
        } else {
            &mut s.agent
        };
        to.push(m.object.clone());
    }
    s
}

/// The Secrets by stage: the proxy's credentials, and the agent's (and services') variables.
pub(super) fn split_secrets(secrets: &[Value]) -> (Vec<Value>, Vec<Value>) {
    secrets
        .iter()
        .cloned()
        .partition(|o| o["metadata"]["labels"][crate::naming::label::ROLE] == "proxy")
}

/// Puts the agent log's probe lines (`{"id":…}`; the summary line is dropped) into `rec.probes` and the
/// rest's last lines into `rec.agent_log`.
pub(super) fn read_agent_log(lines: &[String], rec: &mut RunRecord) {
    let mut rest = Vec::new();
    // The suite runs before the agent in the same process, and its summary line ends it:
    // what follows is the agent's, which may print lines that look like verdicts.
    let mut suite = true;
    for l in lines {
        match serde_json::from_str::<Value>(l) {
            Ok(v) if suite && v.get("id").is_some() => rec.probes.push(v),
            Ok(v) if suite && v.get("summary").is_some() => suite = false,
            _ => rest.push(l.clone()),
        }
    }
    let skip = rest.len().saturating_sub(super::LOG_LINES);
    rec.agent_log = rest.into_iter().skip(skip).collect();
}

/// Whether the probe lines say a probe failed (or there were none: the suite never ran).
pub(super) fn probes_failed(probes: &[Value]) -> bool {
    probes.is_empty() || probes.iter().any(|p| p["verdict"] != "PASS")
}

/// The refusal of a run whose probe suite failed in the agent Pod: the failed probes, each with
/// its detail (or what it got), or that the suite never ran.
pub(super) fn probe_refusal(probes: &[Value]) -> String {
    let failed: Vec<String> = probes
        .iter()
        .filter(|p| p["verdict"] != "PASS")
        .map(|p| {
            format!(
                "{} ({})",
                p["id"].as_str().unwrap_or("?"),
                crate::text::printable(
                    p["detail"]
                        .as_str()
                        .or(p["got"].as_str())
                        .unwrap_or_default()
                )
            )
        })
        .collect();
    if failed.is_empty() {
        "the probe suite did not run in the agent Pod: the agent did not start".into()
    } else {
        format!(
            "a probe failed in the agent Pod: {}; the agent did not start",
            failed.join(", ")
        )
    }
}

/// The most bytes of a collector's log: a part of `part_size` bytes in base64 and its status
/// line.
pub(super) fn collect_log_cap(part_size: u64) -> u64 {
    part_size / 3 * 4 + 4096
}

/// What one collector's log says (untrusted: the agent's repository was its input).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Collected {
    /// A bundle: its whole size in bytes and SHA-256 (lowercase hex), as the collector
    /// printed them, and the part it carried.
    Part {
        /// Bytes of the whole bundle.
        size: u64,
        /// SHA-256 of the whole bundle, hex.
        sha256: String,
        /// This collector's part.
        bytes: Vec<u8>,
    },
    /// No bundle: the import's outcome (`branch-gone`, `no-commits`, `export-failed`,
    /// `refused`) and why.
    Nothing {
        /// The import record's outcome.
        outcome: &'static str,
        /// Why, in the user's words.
        reason: String,
    },
}

/// Reads the log of a collector ([`crate::render::kube::gate::collect_script`]) of the run
/// branch `branch`. The log must be exactly what the script prints — its status line first,
/// then, with status 0, one line of base64 and nothing else: a line before, after or
/// between them was written by something other than the script (the attack review of issue
/// 34 forged a status line ahead of the script's own), and the log is refused.
pub(super) fn read_collect_log(text: &[u8], branch: &str) -> Collected {
    use base64::Engine as _;
    let nothing = |outcome, reason| Collected::Nothing { outcome, reason };
    let mut lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let status = lines
        .first()
        .and_then(|l| std::str::from_utf8(l).ok())
        .and_then(|l| l.strip_prefix(COLLECT_MARK))
        .map(|n| n.trim().to_string());
    let Some(status) = status else {
        return nothing(
            "export-failed",
            format!("the collector's log does not start with its `{COLLECT_MARK}` line"),
        );
    };
    let words: Vec<&str> = status.split_whitespace().collect();
    let expected = if words.first() == Some(&"0") { 2 } else { 1 };
    if lines.len() != expected {
        return nothing(
            "refused",
            format!(
                "the collector's log holds {} lines where its script prints {expected}: something else wrote to it",
                lines.len()
            ),
        );
    }
    match words.as_slice() {
        ["0", size, sha] => {
            let Ok(size) = size.parse::<u64>() else {
                return nothing(
                    "refused",
                    "the collector's bundle size is not a number".into(),
                );
            };
            if size == 0 {
                return nothing("refused", "the collector's bundle is empty".into());
            }
            if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                return nothing(
                    "refused",
                    "the collector's SHA-256 is not 64 hex digits".into(),
                );
            }
            let body: Vec<u8> = lines[1]
                .iter()
                .copied()
                .filter(|b| !b.is_ascii_whitespace())
                .collect();
            match base64::engine::general_purpose::STANDARD.decode(&body) {
                Ok(bytes) => Collected::Part {
                    size,
                    sha256: sha.to_ascii_lowercase(),
                    bytes,
                },
                Err(e) => nothing(
                    "refused",
                    format!("the collector's bundle is not base64: {e}"),
                ),
            }
        }
        ["3"] => nothing(
            "branch-gone",
            format!(
                "the agent deleted or renamed its branch {branch} in its repository: nothing to import"
            ),
        ),
        ["4"] => nothing("no-commits", String::new()),
        ["5"] => nothing(
            "export-failed",
            "the collector could not read the run's own repository bundle".into(),
        ),
        _ => nothing(
            "export-failed",
            format!(
                "the collector's git could not bundle the agent's repository (status `{}`: the agent may have broken it)",
                crate::text::printable(&status.chars().take(40).collect::<String>())
            ),
        ),
    }
}

/// Checks part `index` (of bytes `part_size` each) of a bundle against what the first
/// collector said (`size`, `sha256`) and appends it to `joined`; `Err` says why the parts do
/// not make that bundle.
pub(super) fn join_part(
    joined: &mut Vec<u8>,
    index: u64,
    part_size: u64,
    first: (u64, &str),
    this: Collected,
) -> std::result::Result<(), String> {
    let (size, sha256) = first;
    let Collected::Part {
        size: s,
        sha256: h,
        bytes,
    } = this
    else {
        return Err(format!(
            "collector {index} found no bundle where collector 0 found one of {size} bytes"
        ));
    };
    if s != size || h != sha256 {
        return Err(format!(
            "collector {index} made another bundle ({s} bytes, SHA-256 {h}) than collector 0 ({size} bytes, {sha256})"
        ));
    }
    let want = size.saturating_sub(index * part_size).min(part_size);
    if bytes.len() as u64 != want {
        return Err(format!(
            "part {index} holds {} bytes, not {want}: its log was cut (a kubelet's `containerLogMaxSize` under {} bytes rotates it)",
            bytes.len(),
            collect_log_cap(part_size)
        ));
    }
    joined.extend_from_slice(&bytes);
    if index + 1 == size.div_ceil(part_size) {
        let got = crate::run::boundary::sha256_hex(joined);
        if got != sha256 {
            return Err(format!(
                "the joined parts have SHA-256 {got}, not the collector's {sha256}"
            ));
        }
    }
    Ok(())
}

/// Writes the run's bundle `bytes` to `bundle` and imports it into `repo` as
/// `refs/heads/BRANCH` with the import code of `cyclix run` ([`crate::git::bundle::import`]:
/// header contract, `git bundle verify`, fetch with fsck, create-only ref).
///
/// # Errors
/// Writing the bundle file, git could not run; a refusal is an [`ImportRecord`].
pub(super) fn import_bundle(
    bytes: &[u8],
    bundle: &Path,
    repo: &Path,
    branch: &str,
    base: &str,
) -> Result<ImportRecord> {
    let mut out = ImportRecord::default();
    write_new(bundle, bytes)?;
    let dest = format!("refs/heads/{branch}");
    match crate::git::bundle::import(repo, bundle, &dest, base, &dest)? {
        Ok(tip) => {
            out.tip = tip;
            "imported".clone_into(&mut out.outcome);
        }
        Err(why) => {
            "refused".clone_into(&mut out.outcome);
            out.reason = why.0;
        }
    }
    Ok(out)
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests;
