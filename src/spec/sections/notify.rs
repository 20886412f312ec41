//! `notify:` who is told when a run needs a person (issue 18, item 6): an argv run on the host
//! by `cyclix-notify@TENANT.service` through the run unit's `OnFailure=` (and `OnSuccess=` when
//! asked), with the run's summary as JSON on its stdin.

use crate::spec::keys::{Key, Kind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::argv::argv;
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Diagnostic, Notify};

/// `notify:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawNotify {
    /// The mapping.
    pub(crate) at: Pos,
    /// `command`.
    pub(crate) command: Option<Located<Vec<Located<String>>>>,
    /// `on_success`.
    pub(crate) on_success: Option<Located<bool>>,
}

/// The keys of `notify:`.
pub(crate) const KEYS: &[Key] = &[
    Key::required(
        "command",
        Kind::StrList,
        "argv run on the host (outside any sandbox) with the run summary as JSON on stdin",
        Some("`command: [sendmail, you@example.com]`"),
    ),
    Key::optional(
        "on_success",
        Kind::Bool,
        "also when a run passes (default false: only failures, refusals, leftovers)",
    ),
];

/// Reads `notify:` at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawNotify> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawNotify {
        at: f.pos(),
        command: d.strings(&f, "command"),
        on_success: d.boolean(&f, "on_success"),
    })
}

/// Validates `notify:`: the argv (as `gate.command`), `on_success` (default false).
pub(crate) fn validate(n: &RawNotify, out: &mut Vec<Diagnostic>) -> Option<Notify> {
    let _ = &n.at;
    Some(Notify {
        command: argv(n.command.as_ref(), true, out)?,
        on_success: n.on_success.as_ref().is_some_and(|b| b.value),
    })
}
