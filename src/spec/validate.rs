//! Semantic validation of a decoded spec: the public face of the rules other modules reuse.
//!
//! The rules themselves live by section (`spec/sections/*.rs`: each section's `validate`) and,
//! when shared, by value kind (`spec/rules/*.rs`). This module keeps the public paths the rest
//! of the crate uses (`validate::tenant_name`, `validate::run_id`, `validate::duration_s`, ...).
//! Pure: no file system, no environment, no processes. Checks that need the file system (the
//! symlink walk over mount sources) live in `host::paths`.
//!
//! Every rule reports into a shared list, so one pass shows every problem in the file.

pub use super::located::{Located, Pos};
pub use super::rules::durations::duration_s;
pub use super::rules::env::env_name;
pub use super::rules::hosts::host_pattern;
pub use super::rules::names::{run_id, tenant_name};
pub use super::sections::services::SERVICE_RESERVED_ENV;
pub use super::suggest::nearest;
