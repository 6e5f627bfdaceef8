//! The integration tests of `store`, one module per former test binary, linked once
//! (each test binary is a link of the whole dependency graph: issue 36, CI time).

mod default_path;
mod processes;
mod props;
mod read_only;
mod store;
mod typed_runs;
