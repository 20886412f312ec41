//! The integration test binary: golden render tests, field-report tests, architecture guard,
//! CLI tests, and the end-to-end tests on the testbed.

mod architecture;
mod cli;
mod field_reports;
mod golden;
