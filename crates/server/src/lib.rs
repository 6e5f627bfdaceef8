//! server crate (placeholder; filled by its issue).
