//! `baseline:` a basic test of the project's environment, run before the agent (issue 15,
//! item 4): when it fails the run ends `setup_broken` and the agent never starts.

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::Located;
use crate::spec::rules::argv::{self, argv};
use crate::spec::rules::durations::bounded_duration;
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Baseline, Diagnostic};

/// Baseline timeout bounds and default, in seconds (1s–1h, default 5m).
const BASELINE_TIMEOUT: (u64, u64, u64) = (1, 3600, 5 * 60);

/// `baseline:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawBaseline {
    /// `baseline.command`.
    pub(crate) command: Option<Located<Vec<Located<String>>>>,
    /// `baseline.timeout`.
    pub(crate) timeout: Option<Located<String>>,
}

/// The keys of `baseline:`.
pub(crate) const KEYS: &[Key] = &[
    argv::COMMAND,
    Key::optional(
        "timeout",
        Kind::Str(StrKind::Duration),
        "longest baseline run (1s-1h, default 5m)",
    ),
];

/// Reads `baseline:` at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawBaseline> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawBaseline {
        command: d.strings(&f, "command"),
        timeout: d.string(&f, "timeout"),
    })
}

/// Validates `baseline:`: the argv and the timeout (default 5m).
pub(crate) fn validate(b: &RawBaseline, out: &mut Vec<Diagnostic>) -> Option<Baseline> {
    let command = argv(b.command.as_ref(), true, out);
    let timeout_s = bounded_duration(b.timeout.as_ref(), BASELINE_TIMEOUT, out);
    Some(Baseline {
        command: command?,
        timeout_s: timeout_s?,
    })
}
