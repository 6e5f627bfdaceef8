//! The CLI's `lab::Observer` is `report`'s terminal progress view.

pub use report::progress::Progress;
