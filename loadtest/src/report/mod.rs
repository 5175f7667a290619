//! Report outputs: the terminal table, JSON files and plots.

pub mod class_table;
pub mod disagg_table;
pub mod json;
pub mod plot;
pub mod region_table;
pub mod table;
pub mod tier_table;
pub mod window_table;

use crate::metrics::{RequestRecord, Summary};

/// One run (or one policy of a simulation) with its records.
#[derive(Debug)]
pub struct RunReport {
    /// The summary (JSON object).
    pub summary: Summary,
    /// Per-request records.
    pub records: Vec<RequestRecord>,
}
