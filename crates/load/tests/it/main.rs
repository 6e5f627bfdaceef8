//! The integration tests of `load`, one module per former test binary, linked once
//! (each test binary is a link of the whole dependency graph: issue 36, CI time).

mod calibrate;
mod common;
mod engine;
mod real_servers;
