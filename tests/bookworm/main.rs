//! The bookworm e2e subset (issue 18, item 1): cyclix's plain backend on Debian 12 as users
//! have it (systemd 252, rootless podman 4.3.1 without Quadlet, slirp4netns, netavark 1.4 and
//! aardvark-dns 1.4), on the testbed's bookworm flavour (`TB_SUITE=bookworm`; the harness picks
//! it from this binary's name, see `common::testbed`). `scripts/test` runs this binary after
//! the trixie suite, with the trixie testbed down (one testbed at a time).

// Test scripts are built up with format!: readability over an allocation.
#![allow(clippy::format_push_string)]

#[allow(dead_code)]
#[path = "../integration/common/mod.rs"]
mod common;
mod deb;
mod plain_backend;
