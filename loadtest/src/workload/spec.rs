//! What every workload generator produces: [`RequestSpec`]s, or a [`WorkloadError`].

use crate::prompt::Prompt;
use crate::trace::TraceError;

/// One request to send.
#[derive(Clone, Debug)]
pub struct RequestSpec {
    /// Index in send order.
    pub id: u64,
    /// Group / session / user id (for the per-request log).
    pub group: u64,
    /// Scheduled arrival, ms since the start (ignored in closed loop).
    pub arrival_ms: f64,
    /// Prompt content.
    pub prompt: Prompt,
    /// Output tokens to generate.
    pub output_tokens: u32,
    /// Class label carried into the report (mixed: `short` / `long`); `None` = unclassed.
    pub class: Option<&'static str>,
    /// Leading prompt segments sent as the chat system message (`--api chat`); 0 = the whole
    /// prompt is one user message.
    pub system_segments: usize,
}

impl RequestSpec {
    /// Prompt tokens.
    pub fn prompt_tokens(&self) -> u32 {
        self.prompt.tokens()
    }
}

/// Why a workload could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The trace is unreadable or malformed.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A knob is out of range.
    #[error("invalid workload setting: {0}")]
    Invalid(String),
}

/// Scales a token length by `1/scale`, keeping at least one token.
pub(crate) fn scale_len(len: u32, scale: f64) -> u32 {
    ((len as f64 / scale).round() as u32).max(1)
}
