//! wire crate (placeholder; filled by its issue).
