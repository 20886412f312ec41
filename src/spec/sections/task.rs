//! `task:` the prompt for the agent, inline or from a file.

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::paths::{denied_root, host_path};
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Diagnostic, SpecContext, Task};

/// `task:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawTask {
    /// The mapping.
    pub(crate) at: Pos,
    /// `task.text` (may contain newlines).
    pub(crate) text: Option<Located<String>>,
    /// `task.file`.
    pub(crate) file: Option<Located<String>>,
}

/// The keys of `task:` (exactly one of them).
pub(crate) const KEYS: &[Key] = &[
    Key::optional(
        "text",
        Kind::Str(StrKind::Text),
        "the prompt, inline (may span lines)",
    ),
    Key::optional(
        "file",
        Kind::Str(StrKind::Line),
        "a file holding the prompt (absolute or `~/`)",
    ),
];

/// Reads `task:` at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawTask> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawTask {
        at: f.pos(),
        text: d.string(&f, "text"),
        file: d.string(&f, "file"),
    })
}

/// Validates `task:`: exactly one of `text` (non-empty) and `file` (a readable host path).
pub(crate) fn validate(t: &RawTask, ctx: &SpecContext, out: &mut Vec<Diagnostic>) -> Option<Task> {
    match (&t.text, &t.file) {
        (Some(_), Some(file)) => {
            out.push(
                file.diag("`task` has both `text` and `file`")
                    .hint("keep exactly one of `task.text` and `task.file`"),
            );
            None
        }
        (None, None) => {
            out.push(
                t.at.diag("`task` needs `text` or `file`")
                    .hint("add `text: |` with the prompt, or `file: ~/tasks/NAME.md`"),
            );
            None
        }
        (Some(text), None) => {
            if text.value.trim().is_empty() {
                out.push(
                    text.diag("task text is empty")
                        .hint("write the prompt for the agent"),
                );
                None
            } else {
                Some(Task::Text(text.value.clone()))
            }
        }
        (None, Some(file)) => {
            let norm = host_path(file, ctx, out)?;
            if let Some(denied) = denied_root(&norm, ctx) {
                out.push(
                    file.diag(format!("task file `{norm}` is under {denied}"))
                        .hint("keep task files in an ordinary directory, e.g. ~/tasks/"),
                );
                return None;
            }
            Some(Task::File(norm))
        }
    }
}
