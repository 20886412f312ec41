//! Host adapters: facts and checks that need the file system.
//!
//! Owns: I/O about the host that pure modules must not do (`paths`: the symlink walk over
//! paths that get bind-mounted).

pub mod paths;
