//! The integration tests of `server`, one module per former test binary, linked once
//! (each test binary is a link of the whole dependency graph: issue 36, CI time).

mod bounds;
mod common;
mod placement;
mod serve;
mod staged;
