//! Helpers shared by the integration tests.

pub mod run;
pub mod testbed;
