//! stats crate (placeholder; filled by its issue).
