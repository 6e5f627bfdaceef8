//! The integration tests of `attrib`, one module per former test binary, linked once
//! (each test binary is a link of the whole dependency graph: issue 36, CI time).

mod child;
mod explain;
mod fake_proc;
mod new_thread;
mod procfs;
