//! The integration test binary (Cargo.toml `[[test]] name = "integration"`): one binary, one
//! module per feature, shared helpers in `common/`. Tests that need the real stack (systemd user
//! manager, rootless Podman 5, Quadlet) get it from [`common::testbed::Testbed::get`].

mod common;
mod testbed_selftest;
