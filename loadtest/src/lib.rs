//! loadtest crate (in progress).
