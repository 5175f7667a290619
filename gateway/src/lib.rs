//! gateway crate (in progress).
