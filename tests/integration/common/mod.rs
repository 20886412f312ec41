//! Helpers shared by the integration tests.

pub mod run;
pub mod tenant;
pub mod testbed;
