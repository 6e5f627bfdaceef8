//! load crate (placeholder; filled by its issue).
