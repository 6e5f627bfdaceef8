//! The integration tests of `host`, one module per former test binary, linked once
//! (each test binary is a link of the whole dependency graph: issue 36, CI time).

mod common;
mod doctor;
mod facts;
mod isolate;
mod isolate_real;
mod mitigate;
