//! A submitted generation request waiting for its tokens, and the API shape its answer
//! takes: what the reader (`super::reader`) and the answer (`super::respond`) share.

use super::resume::Resumed;
use crate::server::worker::SeqEvent;
use tokio::sync::mpsc::UnboundedReceiver;
use warmpath_text::StreamDecoder;

/// Which API shape to answer in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completion,
}

/// A submitted request waiting for its tokens.
#[derive(Debug)]
pub struct Job {
    /// Answer shape.
    pub endpoint: Endpoint,
    /// Model name echoed back.
    pub model: String,
    /// Prompt length.
    pub prompt_tokens: usize,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Send a usage chunk at the end of a stream.
    pub include_usage: bool,
    /// Incremental detokenizer.
    pub decoder: StreamDecoder,
    /// The engine loop's events for this request.
    pub rx: UnboundedReceiver<SeqEvent>,
    /// Where the answer starts (a continuation of a migrated stream, or nothing yet).
    pub resume: Resumed,
    /// Tag each SSE event with its tokens (the gateway asked, for stream migration).
    pub tag_tokens: bool,
}
