//! Errors of the serving layer, and the one place they become HTTP responses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use warmpath_protocol::openai::{ErrorDetail, ErrorResponse};

/// Errors that stop the server from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A flag has an unusable value.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The model failed to load.
    #[error("engine failed: {0}")]
    Engine(String),
    /// Binding or serving the socket failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The engine thread ended unexpectedly.
    #[error("the engine loop stopped")]
    EngineStopped,
}

/// Errors answered to an API client, each with its OpenAI error shape and HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not valid JSON.
    #[error("invalid JSON body: {0}")]
    InvalidJson(String),
    /// The body is JSON but misses a field or has a field of the wrong type.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A field is missing or has an invalid value.
    #[error("{message}")]
    InvalidParam {
        /// The offending field.
        param: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// `model` names a model this replica does not serve.
    #[error("The model `{0}` does not exist")]
    ModelNotFound(String),
    /// The prompt (plus `max_tokens`) does not fit the context window.
    #[error("This model's maximum context length is {max_context} tokens, but the request needs {requested} tokens ({prompt} in the prompt)")]
    ContextExceeded {
        /// Context window in tokens.
        max_context: usize,
        /// Prompt tokens.
        prompt: usize,
        /// Prompt plus completion tokens.
        requested: usize,
    },
    /// The request can never fit the KV pool.
    #[error("the request needs {needed} KV pages but the pool has {total}")]
    Capacity {
        /// Pages the request needs.
        needed: usize,
        /// Pages in the pool.
        total: usize,
    },
    /// The engine is not running.
    #[error("the engine is not available")]
    Unavailable,
    /// The engine failed while computing the request.
    #[error("inference failed: {0}")]
    Internal(String),
    /// No route matches.
    #[error("no route for {0}")]
    NotFound(String),
    /// A replica-to-replica request without a valid transfer signature.
    #[error("unauthorized: {0}")]
    Unauthorized(String),
}

impl ApiError {
    /// HTTP status, OpenAI error type, param and code of this error.
    fn parts(&self) -> (StatusCode, &'static str, Option<&'static str>, &'static str) {
        match self {
            ApiError::InvalidJson(_) => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                None,
                "invalid_json",
            ),
            ApiError::InvalidRequest(_) => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                None,
                "invalid_request",
            ),
            ApiError::InvalidParam { param, .. } => (
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some(param),
                "invalid_value",
            ),
            ApiError::ModelNotFound(_) => (
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                Some("model"),
                "model_not_found",
            ),
            ApiError::ContextExceeded { .. } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                Some("messages"),
                "context_length_exceeded",
            ),
            ApiError::Capacity { .. } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                None,
                "kv_capacity_exceeded",
            ),
            ApiError::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                None,
                "engine_unavailable",
            ),
            ApiError::Internal(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                None,
                "internal_error",
            ),
            ApiError::NotFound(_) => (
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                None,
                "not_found",
            ),
            ApiError::Unauthorized(_) => (
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                None,
                "invalid_transfer_signature",
            ),
        }
    }

    /// The OpenAI error body (also sent as a terminal SSE event mid-stream).
    pub fn body(&self) -> ErrorResponse {
        let (_, kind, param, code) = self.parts();
        ErrorResponse {
            error: ErrorDetail {
                message: self.to_string(),
                kind: kind.to_string(),
                param: param.map(str::to_string),
                code: Some(code.to_string()),
            },
        }
    }

    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        self.parts().0
    }
}

impl ApiError {
    /// Classifies a body deserialisation error: syntax errors are invalid JSON, the rest
    /// (missing fields, wrong types) invalid requests, naming the field at `path` (`.` for
    /// the top level).
    pub fn from_json(e: &serde_json::Error, path: &str) -> Self {
        use serde_json::error::Category;
        match e.classify() {
            Category::Data if path.is_empty() || path == "." => {
                ApiError::InvalidRequest(e.to_string())
            }
            Category::Data => ApiError::InvalidRequest(format!("field `{path}`: {e}")),
            Category::Syntax | Category::Eof | Category::Io => ApiError::InvalidJson(e.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(error = %self, "request failed");
        } else {
            tracing::debug!(error = %self, "request rejected");
        }
        (status, Json(self.body())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_codes() {
        let e = ApiError::ModelNotFound("x".into());
        assert_eq!(e.status(), StatusCode::NOT_FOUND);
        assert_eq!(e.body().error.code.as_deref(), Some("model_not_found"));
        let e = ApiError::ContextExceeded {
            max_context: 8,
            prompt: 9,
            requested: 10,
        };
        assert_eq!(e.status(), StatusCode::PAYLOAD_TOO_LARGE);
        assert!(e
            .body()
            .error
            .message
            .contains("maximum context length is 8"));
        let e = ApiError::InvalidParam {
            param: "messages",
            message: "m".into(),
        };
        assert_eq!(e.body().error.param.as_deref(), Some("messages"));
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
    }
}
