//! The record's part about a delivery (`delivery:` in the spec): how it ended and why
//! (`run::phases::deliver` decides; this is what the record keeps of it).

use serde::{Deserialize, Serialize};

/// One secret found in the delivered patches: where and what kind, never the value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SecretHit {
    /// The file the hit is in (`b/` side of the patch), or `commit SHA message`.
    pub file: String,
    /// What was found: `value of secret NAME` or a key format (`private key`, …).
    pub kind: String,
}

/// How a delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The run did not get to its delivery (it did not pass, or failed before).
    NotReached,
    /// The run made no commits: nothing to deliver.
    NothingToDeliver,
    /// Everything checked, nothing sent (`push: false`).
    NotPushed,
    /// Held: paths or secrets the delivery must not carry; kept on the local branch.
    Held,
    /// The push was refused (the lease, or the remote's policy: a hook declined it); kept on
    /// the local branch.
    Refused,
    /// The push could not reach or write the remote (it is gone, unreachable, or cannot store
    /// the objects or the ref): an error of phase `deliver`; kept on the local branch.
    Failed,
    /// Pushed.
    Pushed,
}

/// The `delivery` object of the run record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    /// The remote's name in the user's repository.
    pub remote: String,
    /// The remote's push URL, credentials removed.
    pub url: String,
    /// The branch on the remote.
    pub branch: String,
    /// The remote tip the run started from; `None`: the branch did not exist (the push must
    /// create it).
    pub expected: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// Why it was held or refused, or what else is worth saying.
    pub reason: Option<String>,
    /// The remote tip after the push (read back from the remote).
    pub pushed_tip: Option<String>,
    /// Touched paths that held the delivery.
    pub held_paths: Vec<String>,
    /// Secrets found in the delivered diff: file and kind, never the value.
    pub secret_hits: Vec<SecretHit>,
    /// How long the run waited for the branch lock, in ms.
    pub lock_wait_ms: u128,
    /// When the push started and ended, in ms since the Unix epoch.
    pub push_start_ms: Option<u128>,
    /// See `push_start_ms`.
    pub push_end_ms: Option<u128>,
}

impl DeliveryRecord {
    /// One line for the run summary.
    #[must_use]
    pub fn summary(&self) -> String {
        let short = |s: &str| s.get(..12).unwrap_or(s).to_owned();
        let target = format!("{} {} ({})", self.remote, self.branch, self.url);
        let why = self
            .reason
            .as_deref()
            .map_or_else(String::new, |r| format!(": {r}"));
        match self.outcome {
            Outcome::Pushed => format!(
                "pushed {} to {target}{}{why}",
                self.pushed_tip.as_deref().map_or_else(String::new, short),
                self.expected.as_deref().map_or_else(
                    || " (new branch)".to_owned(),
                    |e| format!(" (from {})", short(e))
                )
            ),
            Outcome::Failed => format!("FAILED to reach or write {target}{why}"),
            Outcome::NotReached => format!("not reached for {target}{why}"),
            Outcome::NothingToDeliver => format!("nothing to deliver to {target}"),
            Outcome::NotPushed => format!("checked, not pushed (push: false) to {target}"),
            Outcome::Held => format!("HELD for {target}{why}"),
            Outcome::Refused => format!("REFUSED by {target}{why}"),
        }
    }
}

/// What a delivery needs to know of its run ([`super::RunRecord::delivery_facts`]): where
/// the commits are, whether there are any, and what they change that must be held.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeliveryFacts {
    /// The run branch in the user's repository.
    pub branch: String,
    /// The commit the run started from.
    pub base: String,
    /// Whether the run branch has commits.
    pub has_commits: bool,
    /// The setup paths the commits change.
    pub setup_changes: Vec<String>,
    /// The protected paths the commits change.
    pub protected_changes: Vec<String>,
}
