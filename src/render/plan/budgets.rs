//! The pull policy and the start and stop budgets of a run's units (field report B06). Pure.

use crate::spec::Image;

/// Seconds podman waits after SIGTERM before SIGKILL (`StopTimeout=`, `podman stop --time`).
pub const STOP_TIMEOUT_S: u64 = 10;

/// systemd's stop budget, strictly above [`STOP_TIMEOUT_S`] (field report B06).
pub const UNIT_STOP_TIMEOUT_S: u64 = 30;

/// Start budget when the image must already be local (`Pull=never`).
pub const START_TIMEOUT_LOCAL_S: u64 = 60;

/// Start budget when a pinned image may have to be pulled first (`Pull=missing`, B06).
pub const START_TIMEOUT_PULL_S: u64 = 600;

/// Whether `image` is a local one, never pulled (`Pull=never`): a local build or one built
/// from the project's files; a pinned one may be pulled.
pub(crate) fn is_local(image: &Image) -> bool {
    matches!(image, Image::UnpinnedLocal { .. } | Image::Build { .. })
}

/// The start budget of a unit running `image`: longer when it may have to be pulled.
pub(super) fn start_timeout(image: &Image) -> u64 {
    if is_local(image) {
        START_TIMEOUT_LOCAL_S
    } else {
        START_TIMEOUT_PULL_S
    }
}
