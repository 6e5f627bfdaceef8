//! host crate (placeholder; filled by its issue).
