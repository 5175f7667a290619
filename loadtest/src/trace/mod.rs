//! Trace files: the Mooncake FAST'25 JSONL traces and the Azure 2023 CSV traces.
//!
//! Parsing errors are typed and always name the file line (1-based) that failed, so a bad
//! row in a 20k-line trace is found at once.

mod azure;
mod error;
mod mooncake;

pub use azure::{parse_azure, parse_azure_timestamp_ms, AzureRow};
pub use error::{read_trace_text, TraceError};
pub use mooncake::{parse_mooncake, MooncakeRow, MOONCAKE_BLOCK_TOKENS};
