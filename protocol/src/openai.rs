//! OpenAI-compatible request and response shapes served by the replica and proxied by the
//! gateway: chat completions, text completions, model list, usage and the error body.
//!
//! Only the fields Warmpath reads or writes are typed; unknown request fields are ignored
//! (as OpenAI-compatible servers do). Consumers may only add optional fields.

use serde::{Deserialize, Serialize};

/// `POST`: chat completions.
pub const PATH_CHAT_COMPLETIONS: &str = "/v1/chat/completions";
/// `POST`: text completions.
pub const PATH_COMPLETIONS: &str = "/v1/completions";
/// `GET`: the model list.
pub const PATH_MODELS: &str = "/v1/models";

// === requests ===

/// Message content: a plain string or a list of typed parts (only `text` parts are used).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// `"content": "hello"`.
    Text(String),
    /// `"content": [{"type":"text","text":"hello"}]`.
    Parts(Vec<ContentPart>),
}

impl MessageContent {
    /// The text of the content, parts concatenated.
    pub fn to_text(&self) -> String {
        match self {
            MessageContent::Text(s) => s.clone(),
            MessageContent::Parts(parts) => {
                parts.iter().filter_map(|p| p.text.as_deref()).collect()
            }
        }
    }
}

/// One typed content part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContentPart {
    /// Part type, e.g. `text`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default)]
    pub text: Option<String>,
}

/// One chat message of a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestMessage {
    /// `system`, `user`, `assistant`, ...
    pub role: String,
    /// The message content (`null` reads as empty).
    #[serde(default)]
    pub content: Option<MessageContent>,
}

/// `stop`: one string or several.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StopSpec {
    /// A single stop string.
    One(String),
    /// Several stop strings.
    Many(Vec<String>),
}

impl StopSpec {
    /// The stop strings as a list.
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            StopSpec::One(s) => vec![s.clone()],
            StopSpec::Many(v) => v.clone(),
        }
    }
}

/// `stream_options`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Send a final chunk with `usage` (and empty `choices`).
    #[serde(default)]
    pub include_usage: bool,
}

/// Sampling and streaming fields shared by both completion endpoints.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplingFields {
    /// Maximum tokens to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Newer name of `max_tokens` (chat); wins when both are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    /// Sampling temperature; 0 is greedy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Top-k sampling (extension, as in vLLM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// Sampling seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Stop strings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<StopSpec>,
    /// Stream the answer as server-sent events.
    #[serde(default)]
    pub stream: bool,
    /// Streaming options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Keep generating past end-of-sequence tokens until `max_tokens` (extension, as in
    /// vLLM; used by benchmarks and tests that need a fixed output length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
    /// Continue a stream another replica started (Warmpath replicas only; only the
    /// gateway sends it, see [`crate::continuation`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmpath_continuation: Option<crate::continuation::Continuation>,
}

/// `POST /v1/chat/completions` body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionRequest {
    /// Model name.
    pub model: String,
    /// The conversation.
    pub messages: Vec<RequestMessage>,
    /// Sampling and streaming fields.
    #[serde(flatten)]
    pub sampling: SamplingFields,
}

/// `prompt` of a text completion: text or token ids.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PromptInput {
    /// A text prompt.
    Text(String),
    /// A prompt given as token ids.
    Tokens(Vec<u32>),
}

/// `POST /v1/completions` body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    /// Model name.
    pub model: String,
    /// The prompt.
    pub prompt: PromptInput,
    /// Sampling and streaming fields.
    #[serde(flatten)]
    pub sampling: SamplingFields,
}

// === responses ===

/// Cached-token accounting of the prompt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: u32,
}

/// Token usage of one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Generated tokens.
    pub completion_tokens: u32,
    /// Sum of the two.
    pub total_tokens: u32,
    /// Details of the prompt tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
}

/// A message of a response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResponseMessage {
    /// Always `assistant`.
    pub role: String,
    /// Generated text.
    pub content: String,
}

/// One choice of a chat completion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatChoice {
    /// Choice index (always 0: `n` > 1 is not supported).
    pub index: u32,
    /// The answer.
    pub message: ResponseMessage,
    /// `stop` or `length`.
    pub finish_reason: Option<String>,
}

/// Chat completion response (`object = "chat.completion"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionResponse {
    /// Response id.
    pub id: String,
    /// `chat.completion`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// Model name.
    pub model: String,
    /// The choices.
    pub choices: Vec<ChatChoice>,
    /// Token usage.
    pub usage: Usage,
}

/// Incremental message content in a stream chunk.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatDelta {
    /// `assistant` on the first chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// New text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// One choice of a chat stream chunk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatChunkChoice {
    /// Choice index.
    pub index: u32,
    /// The new content.
    pub delta: ChatDelta,
    /// Set on the last content chunk.
    pub finish_reason: Option<String>,
}

/// Chat stream chunk (`object = "chat.completion.chunk"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionChunk {
    /// Response id (same on every chunk).
    pub id: String,
    /// `chat.completion.chunk`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// Model name.
    pub model: String,
    /// Choices (empty on the usage chunk).
    pub choices: Vec<ChatChunkChoice>,
    /// Usage, only on the final chunk when `stream_options.include_usage` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// One choice of a text completion (or of its stream chunk).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompletionChoice {
    /// Generated text (the increment, in a chunk).
    pub text: String,
    /// Choice index.
    pub index: u32,
    /// `stop`, `length`, or `null` in a non-final chunk.
    pub finish_reason: Option<String>,
}

/// Text completion response or stream chunk (`object = "text_completion"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompletionResponse {
    /// Response id.
    pub id: String,
    /// `text_completion`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// Model name.
    pub model: String,
    /// The choices (empty on a stream's usage chunk).
    pub choices: Vec<CompletionChoice>,
    /// Usage (always in a full response; in a stream only on the final chunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// One entry of `GET /v1/models`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelCard {
    /// Model name.
    pub id: String,
    /// `model`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// Owner label.
    pub owned_by: String,
}

/// `GET /v1/models` response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelList {
    /// `list`.
    pub object: String,
    /// The models.
    pub data: Vec<ModelCard>,
}

/// The body of every error: `{"error":{"message","type","param","code"}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorResponse {
    /// The error.
    pub error: ErrorDetail,
}

/// OpenAI error detail.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Human-readable message.
    pub message: String,
    /// Error class, e.g. `invalid_request_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The offending parameter, if any.
    pub param: Option<String>,
    /// Machine-readable code, e.g. `model_not_found`.
    pub code: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_request_parses_string_and_part_content() {
        let r: ChatCompletionRequest = serde_json::from_str(
            r#"{"model":"m","messages":[{"role":"user","content":"hi"},
            {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
            "max_tokens":5,"stream":true,"stream_options":{"include_usage":true},"stop":"x"}"#,
        )
        .unwrap();
        assert_eq!(r.messages[0].content.as_ref().unwrap().to_text(), "hi");
        assert_eq!(r.messages[1].content.as_ref().unwrap().to_text(), "ab");
        assert_eq!(r.sampling.max_tokens, Some(5));
        assert!(r.sampling.stream);
        assert_eq!(r.sampling.stop.unwrap().to_vec(), vec!["x".to_string()]);
    }

    #[test]
    fn error_and_usage_shapes() {
        let e = ErrorResponse {
            error: ErrorDetail {
                message: "m".into(),
                kind: "invalid_request_error".into(),
                param: None,
                code: Some("c".into()),
            },
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"error":{"message":"m","type":"invalid_request_error","param":null,"code":"c"}}"#
        );
        let u = Usage {
            prompt_tokens: 3,
            completion_tokens: 2,
            total_tokens: 5,
            prompt_tokens_details: Some(PromptTokensDetails { cached_tokens: 0 }),
        };
        let s = serde_json::to_string(&u).unwrap();
        assert!(s.contains(r#""prompt_tokens_details":{"cached_tokens":0}"#));
    }

    #[test]
    fn completion_prompt_accepts_text_or_ids() {
        let r: CompletionRequest =
            serde_json::from_str(r#"{"model":"m","prompt":[1,2,3]}"#).unwrap();
        assert_eq!(r.prompt, PromptInput::Tokens(vec![1, 2, 3]));
        assert!(serde_json::from_str::<CompletionRequest>(r#"{"model":"m","prompt":5}"#).is_err());
    }
}
