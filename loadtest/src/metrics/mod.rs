//! Request records and the summary with vLLM `bench serve` definitions:
//!
//! * TTFT: first streamed token - send.
//! * TPOT: (E2E - TTFT) / (output tokens - 1), per request with more than one output token.
//! * ITL: every gap between streamed tokens/chunks, pooled over all requests.
//! * E2E latency: last token - send.
//! * Duration: first send to last completion; throughputs divide by it.
//! * Goodput: completed requests meeting every given SLO, per second.
//! * Cache hit rate (inference-perf's, token-weighted): sum of cached prompt tokens / sum of
//!   prompt tokens over completed requests.
//! * Per class (`classes`, requests with a class label such as mixed's `short` / `long`):
//!   the same TTFT, TPOT, ITL and E2E definitions over each class's requests.

pub mod admission;
pub mod classes;
pub mod disagg;
pub mod order;
mod record;
pub mod regional;
pub mod rollout;
mod stats;
mod summary;
pub mod tier;
pub mod timeseries;
pub mod windows;

pub use record::{ErrorKind, RequestRecord};
pub use stats::{mean, percentile, std_dev, Distribution};
pub use summary::{Slo, Summary};
