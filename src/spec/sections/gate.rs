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
    Some(Gate {
        image: image?,
        command: command?,
        quick: quick?,
        timeout_s: timeout_s?,
    })
}
