//! Host adapters: facts and checks that need the file system.
//!
//! Owns: I/O about the host that pure modules must not do (`paths`: the symlink walk over
//! paths that get bind-mounted; `facts`: everything `cyclix check` reads), and the pure
//! verdicts over those facts (`checks`).

pub mod ca_certs;
pub mod checks;
pub mod facts;
pub mod mount_scan;
pub mod namespaces;
pub mod paths;
pub mod storage_conf;
