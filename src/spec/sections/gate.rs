//! `gate:` the test container that decides whether a run's work is kept.

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::{Located, Pos};
use crate::spec::rules::argv::{self, argv};
use crate::spec::rules::durations::bounded_duration;
use crate::spec::rules::images::{self, RawImage, image};
use crate::spec::yaml::{Decoder, Node};
use crate::spec::{Diagnostic, Gate};

/// Gate timeout bounds and default, in seconds (10s–6h, default 10m).
const GATE_TIMEOUT: (u64, u64, u64) = (10, 6 * 3600, 10 * 60);

/// `gate:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawGate {
    /// The mapping.
    pub(crate) at: Pos,
    /// `gate.image` + `gate.unpinned_local_image`.
    pub(crate) image: RawImage,
    /// `gate.command`.
    pub(crate) command: Option<Located<Vec<Located<String>>>>,
    /// `gate.quick` (optional).
    pub(crate) quick: Option<Located<Vec<Located<String>>>>,
    /// `gate.timeout`.
    pub(crate) timeout: Option<Located<String>>,
    /// `gate.build`.
    pub(crate) build: Option<super::build::RawBuild>,
    /// `gate.protected` (optional).
    pub(crate) protected: Option<Located<Vec<Located<String>>>>,
}

/// The keys of `gate:`.
pub(crate) const KEYS: &[Key] = &[
    images::IMAGE_OR_BUILD,
    images::UNPINNED_LOCAL_IMAGE,
    super::build::BUILD,
    argv::COMMAND,
    Key::optional(
        "quick",
        Kind::StrList,
        "argv of a quick suite (default: `command`)",
    ),
    Key::optional(
        "timeout",
        Kind::Str(StrKind::Duration),
        "longest gate run (10s-6h, default 10m)",
    ),
    Key::optional(
        "protected",
        Kind::StrList,
        "paths or globs the gate takes from the base commit, whatever the agent did to them; with it the base's tests are counted one by one (docs/gate.md)",
    ),
];

/// Reads `gate:` at `path`.
pub(crate) fn decode(d: &mut Decoder, node: &Node, path: &str) -> Option<RawGate> {
    let f = d.mapping(node, path, KEYS)?;
    Some(RawGate {
        at: f.pos(),
        image: RawImage::decode(d, &f),
        command: d.strings(&f, "command"),
        quick: d.strings(&f, "quick"),
        timeout: d.string(&f, "timeout"),
        build: super::build::decode_in(d, &f),
        protected: d.strings(&f, "protected"),
    })
}

/// Validates `gate:`: image, argv, the optional quick argv and the timeout (default 10m).
pub(crate) fn validate(g: &RawGate, out: &mut Vec<Diagnostic>) -> Option<Gate> {
    let image = super::build::image_or_build(
        &g.image,
        g.build.as_ref(),
        "gate",
        |out| images::required(&g.at, &g.image, out).then(|| image(&g.image, out))?,
        out,
    );
    let command = argv(g.command.as_ref(), true, out);
    let quick = match g.quick.as_ref() {
        None => Some(None),
        Some(list) if list.value.is_empty() => {
            out.push(
                list.diag("`quick` is empty")
                    .hint("give the quick suite's argv, e.g. [python3, -m, pytest, -q, -x], or remove the key to use `gate.command`"),
            );
            None
        }
        Some(list) => argv(Some(list), true, out).map(Some),
    };
    let timeout_s = bounded_duration(g.timeout.as_ref(), GATE_TIMEOUT, out);
    let protected = protected(g.protected.as_ref(), out);
    Some(Gate {
        image: image?,
        command: command?,
        quick: quick?,
        timeout_s: timeout_s?,
        protected: protected?,
    })
}

/// `gate.protected`: a non-empty list of path patterns, each as `setup:` takes them
/// ([`super::paths`]); absent is empty (the gate runs the agent's tree as it is).
fn protected(
    raw: Option<&Located<Vec<Located<String>>>>,
    out: &mut Vec<Diagnostic>,
) -> Option<Vec<String>> {
    let Some(raw) = raw else {
        return Some(Vec::new());
    };
    if raw.value.is_empty() {
        out.push(raw.diag("`protected` is empty").hint(
            "list the tests and their configuration, e.g. [tests/, \"**/conftest.py\", pytest.ini], or remove the key",
        ));
        return None;
    }
    super::paths::list(
        Some(raw),
        super::paths::Globs::Pathspec,
        "write a path or glob relative to the repository, e.g. `tests/`, `**/conftest.py`, `pytest.ini`",
        out,
    )
}
