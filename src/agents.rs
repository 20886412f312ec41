//! Real agent CLIs as presets (issue 14): one row of data per CLI ([`presets`]) and the
//! parsers of the CLIs' output streams ([`stream`]) and their view for a person ([`stream_view`]); the text that tells the agent where it is
//! is `render::prompt`. Below `spec` (which resolves a preset), so nothing here reads a spec. Pure: the spec resolves a preset into plain agent fields (image, argv,
//! variables, a credential, a uid), render never sees a preset, and the run reads the agent's
//! journal through [`stream::report`].
//!
//! Facts about each CLI (packages, headless flags, variables, hosts): the project's
//! `research/agents.md` and what the testbed's stand-in measured (docs/agents.md).

pub mod presets;
pub mod stream;
pub mod stream_view;

pub use presets::{CHEAPEST, PRESETS, Preset, TaskInput, find};
pub use stream::{AgentReport, StreamKind, Usage};
