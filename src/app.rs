//! The orchestrator: one function per subcommand. (This branch carries only the `unit` group.)

pub mod unit_cmd;
