//! store crate (placeholder; filled by its issue).
