//! model crate (placeholder; filled by its issue).
