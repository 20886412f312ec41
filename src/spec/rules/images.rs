//! Image references and their opt-out flag, shared by `agent`, `gate` and `services[i]`: the
//! two key entries, the raw form, its decoding and the pinning rules.

use crate::spec::keys::{Key, Kind, StrKind};
use crate::spec::located::Located;
use crate::spec::yaml::{Decoder, Fields};
use crate::spec::{Diagnostic, Image};

/// `image`: the container image, pinned by digest; required unless the mapping has `build`
/// ([`required`] says so, as the decoder does for a required key).
pub(crate) const IMAGE_OR_BUILD: Key = Key::optional(
    "image",
    Kind::Str(StrKind::Line),
    "container image, pinned by digest: REGISTRY/NAME@sha256:<64 hex> (or `build`)",
);

/// Whether `raw` has its `image`; if not, reports it missing in the mapping at `at` (with
/// `build` as the other fix).
pub(crate) fn required(
    at: &crate::spec::located::Pos,
    raw: &RawImage,
    out: &mut Vec<Diagnostic>,
) -> bool {
    if raw.image.is_some() {
        return true;
    }
    out.push(
        Diagnostic {
            path: format!("{}.image", at.path),
            ..at.diag("missing required key `image`")
        }
        .hint("add `image: NAME@sha256:<64 hex>`, or `build: { containerfile: Containerfile }`"),
    );
    false
}
/// `unpinned_local_image`: the loud opt-out for a local build.
pub(crate) const UNPINNED_LOCAL_IMAGE: Key = Key::optional(
    "unpinned_local_image",
    Kind::Bool,
    "allow a `localhost/` image without a digest (a local build)",
);

/// An image reference and its opt-out flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawImage {
    /// `image`.
    pub(crate) image: Option<Located<String>>,
    /// `unpinned_local_image`.
    pub(crate) unpinned_local_image: Option<Located<bool>>,
}

impl RawImage {
    /// Reads [`IMAGE`] and [`UNPINNED_LOCAL_IMAGE`] from a mapping that has both in its table.
    pub(crate) fn decode(d: &mut Decoder, f: &Fields<'_>) -> RawImage {
        RawImage {
            image: d.string(f, "image"),
            unpinned_local_image: d.boolean(f, "unpinned_local_image"),
        }
    }
}

/// Validates an image reference and its opt-out flag.
pub(crate) fn image(raw: &RawImage, out: &mut Vec<Diagnostic>) -> Option<Image> {
    let Some(img) = &raw.image else {
        // Missing `image` was reported by the decoder.
        return None;
    };
    let flag = raw.unpinned_local_image.as_ref();
    let unpinned_ok = flag.is_some_and(|f| f.value);
    let reference = img.value.as_str();
    let (name, digest) = match reference.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (reference, None),
    };
    if let Err(e) = image_name(name) {
        out.push(
            img.diag(format!("invalid image reference `{reference}`: {e}"))
                .hint("write REGISTRY/NAME@sha256:<64 hex>, e.g. ghcr.io/acme/agent@sha256:…"),
        );
        return None;
    }
    match digest {
        Some(d) => {
            let hex = d.strip_prefix("sha256:");
            let ok = hex.is_some_and(|h| {
                h.len() == 64
                    && h.chars()
                        .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
            });
            if !ok {
                out.push(
                    img.diag(format!(
                        "image digest `{d}` is not `sha256:` and 64 lowercase hex digits"
                    ))
                    .hint(
                        "copy the digest from `podman image inspect --format '{{.Digest}}' IMAGE`",
                    ),
                );
                return None;
            }
            if let Some(f) = flag.filter(|f| f.value) {
                out.push(
                    f.diag("`unpinned_local_image: true` is set but the image is pinned by digest")
                        .hint("remove `unpinned_local_image`, so the flag never claims an unpinned image"),
                );
                return None;
            }
            Some(Image::Pinned {
                reference: reference.to_owned(),
            })
        }
        None if unpinned_ok => {
            if name.starts_with("localhost/") {
                Some(Image::UnpinnedLocal {
                    reference: reference.to_owned(),
                })
            } else {
                let message = format!(
                    "`unpinned_local_image: true` is only allowed for `localhost/` images, not `{reference}`"
                );
                out.push(
                    flag.map_or_else(|| img.diag(message.clone()), |f| f.diag(message.clone()))
                        .hint("pin the image by digest: NAME@sha256:<64 hex>"),
                );
                None
            }
        }
        None => {
            out.push(
                img.diag(format!("image `{reference}` is not pinned by digest"))
                    .hint(if name.starts_with("localhost/") {
                        "pin it (NAME@sha256:<64 hex>) or, for a local build, set `unpinned_local_image: true`"
                    } else {
                        "pin it: NAME@sha256:<64 hex> (`podman image inspect --format '{{.Digest}}' IMAGE`)"
                    }),
            );
            None
        }
    }
}

/// Checks the name part (`registry/path[:tag]`) of an image reference.
pub(crate) fn image_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':')))
    {
        return Err(format!("`{c}` is not allowed in an image name"));
    }
    let parts: Vec<&str> = name.split('/').collect();
    let last = parts.len() - 1;
    for (i, part) in parts.iter().enumerate() {
        let is_domain = i == 0
            && last > 0
            && (part.contains('.') || part.contains(':') || *part == "localhost");
        let part = if i == last {
            match part.split_once(':') {
                Some((p, tag)) => {
                    let tag_ok = !tag.is_empty()
                        && tag.len() <= 128
                        && !tag.starts_with(['.', '-'])
                        && tag
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
                    if !tag_ok {
                        return Err(format!("invalid tag `{tag}`"));
                    }
                    p
                }
                None => part,
            }
        } else {
            part
        };
        let ok = if is_domain {
            !part.is_empty() && !part.starts_with(['.', '-', ':'])
        } else {
            !part.is_empty()
                && !part.contains(':')
                && part.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
                })
                && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                && part.ends_with(|c: char| c.is_ascii_alphanumeric())
        };
        if !ok {
            return Err(format!("invalid path component `{part}`"));
        }
    }
    Ok(())
}
