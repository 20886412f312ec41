//! Rendering: spec + run → the files a run needs. Pure: no fs, no env, no processes.

pub mod proxy;
