//! The integration tests of `lab`, one module per former test binary, linked once
//! (each test binary is a link of the whole dependency graph: issue 36, CI time).

mod measure;
mod stages;
mod sweep_store;
