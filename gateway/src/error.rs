//! The gateway's one error type and its single mapping to HTTP status + OpenAI error JSON.

use std::time::Duration;

/// Which rate limit a tenant hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LimitKind {
    /// Requests per minute.
    Requests,
    /// Tokens per minute.
    Tokens,
    /// Concurrent requests.
    Concurrency,
}

impl LimitKind {
    /// Metric label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            LimitKind::Requests => "requests",
            LimitKind::Tokens => "tokens",
            LimitKind::Concurrency => "concurrency",
        }
    }
}

/// Everything that can go wrong while the gateway handles a request.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GatewayError {
    /// The body is not valid JSON or lacks required fields.
    #[error("invalid request body: {0}")]
    InvalidBody(String),
    /// The request is well-formed JSON but semantically invalid.
    #[error("{0}")]
    BadRequest(String),
    /// Body larger than the configured bound.
    #[error("request body exceeds {limit} bytes")]
    BodyTooLarge {
        /// Configured limit.
        limit: usize,
    },
    /// Header section larger than the configured bound.
    #[error("request headers exceed {limit} bytes")]
    HeadersTooLarge {
        /// Configured limit.
        limit: usize,
    },
    /// The client was too slow sending its request.
    #[error("timed out reading the request")]
    ClientTimeout,
    /// Both Content-Length and Transfer-Encoding, or another ambiguous framing.
    #[error("ambiguous request framing: {0}")]
    AmbiguousFraming(&'static str),
    /// Missing or unknown API key.
    #[error("invalid API key")]
    Unauthorized,
    /// The tenant may not use this model.
    #[error("the model `{0}` is not allowed for this API key")]
    ModelNotAllowed(String),
    /// No replica serves this model.
    #[error("the model `{0}` does not exist")]
    UnknownModel(String),
    /// The model exists, but none of its replicas serves this pass-through API (a pool's
    /// `apis`).
    #[error("the model `{model}` does not serve {api}: {why}")]
    ApiNotServed {
        /// The model requested.
        model: String,
        /// `embeddings`, `tokenize` or `detokenize`.
        api: &'static str,
        /// Why: no replica configured for it, or what the replica answered.
        why: String,
    },
    /// No route for this method/path.
    #[error("unknown endpoint {method} {path}")]
    NotFound {
        /// Request method.
        method: String,
        /// Request path.
        path: String,
    },
    /// A tenant limit was hit.
    #[error("rate limit reached for {} ({detail})", kind.as_str())]
    RateLimited {
        /// Which limit.
        kind: LimitKind,
        /// When the client may retry.
        retry_after: Duration,
        /// Human-readable detail.
        detail: String,
    },
    /// The client's address already holds `limits.max_connections_per_ip` connections.
    #[error("too many open connections from this address (at most {limit})")]
    TooManyConnections {
        /// Configured cap.
        limit: u32,
    },
    /// With shared state, the key store has not been read since this gateway started: no
    /// key can be checked against its revocations yet.
    #[error("API keys cannot be checked yet: this gateway has not read the shared key store; retry later")]
    KeyStoreUnavailable,
    /// The gateway is at its admission bound.
    #[error("the gateway is overloaded, retry later")]
    Overloaded {
        /// Suggested wait.
        retry_after: Duration,
    },
    /// The tenant's own flow queue is full (`crate::flow`): the tenant should slow down.
    #[error("too many requests waiting for this tenant (at most {limit})")]
    TenantQueueFull {
        /// The tenant's queue bound.
        limit: u32,
        /// Suggested wait.
        retry_after: Duration,
    },
    /// No replica can give the first token within the request's TTFT objective
    /// (`x-slo-ttft-ms` or the tenant's default), by the `warm` prediction or because the
    /// wait used it up: shed at once rather than served late.
    #[error("the time-to-first-token objective of {objective_ms} ms cannot be met (predicted {predicted_ms} ms)")]
    DeadlineUnmeetable {
        /// The objective.
        objective_ms: u64,
        /// The predicted time to first token (wait included).
        predicted_ms: u64,
    },
    /// The request asked for a priority class its tenant may not use.
    #[error("priority class `{0}` is not allowed for this API key")]
    ClassNotAllowed(String),
    /// No healthy replica can serve the model right now.
    #[error("no healthy replica serves `{0}`")]
    NoReplica(String),
    /// The replica failed before a response could be forwarded.
    #[error("upstream error: {0}")]
    Upstream(String),
    /// The replica did not answer in time.
    #[error("upstream timed out")]
    UpstreamTimeout,
    /// A Responses request's `previous_response_id` names no response this fleet keeps.
    #[error("Previous response with id '{0}' not found.")]
    PreviousResponseNotFound(String),
}

/// The parts of an HTTP error response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ErrorResponse {
    /// HTTP status code.
    pub status: u16,
    /// Extra headers (Retry-After, ...).
    pub headers: Vec<(&'static str, String)>,
    /// OpenAI-style error JSON.
    pub body: Vec<u8>,
}

impl GatewayError {
    /// HTTP status code of this error.
    pub(crate) fn status(&self) -> u16 {
        match self {
            GatewayError::InvalidBody(_)
            | GatewayError::BadRequest(_)
            | GatewayError::ApiNotServed { .. }
            | GatewayError::AmbiguousFraming(_)
            | GatewayError::PreviousResponseNotFound(_) => 400,
            GatewayError::Unauthorized => 401,
            GatewayError::ModelNotAllowed(_) | GatewayError::ClassNotAllowed(_) => 403,
            GatewayError::UnknownModel(_) | GatewayError::NotFound { .. } => 404,
            GatewayError::ClientTimeout => 408,
            GatewayError::BodyTooLarge { .. } => 413,
            GatewayError::HeadersTooLarge { .. } => 431,
            GatewayError::RateLimited { .. }
            | GatewayError::TooManyConnections { .. }
            | GatewayError::TenantQueueFull { .. } => 429,
            GatewayError::Overloaded { .. }
            | GatewayError::DeadlineUnmeetable { .. }
            | GatewayError::NoReplica(_)
            | GatewayError::KeyStoreUnavailable => 503,
            GatewayError::Upstream(_) => 502,
            GatewayError::UpstreamTimeout => 504,
        }
    }

    /// OpenAI `error.type`.
    pub(crate) fn error_type(&self) -> &'static str {
        match self.status() {
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            429 => "rate_limit_error",
            400 | 408 | 413 | 431 => "invalid_request_error",
            _ => "server_error",
        }
    }

    /// OpenAI `error.code`, a stable label also used in metrics.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            GatewayError::InvalidBody(_) => "invalid_body",
            GatewayError::BadRequest(_) => "bad_request",
            GatewayError::ClientTimeout => "client_timeout",
            GatewayError::BodyTooLarge { .. } => "body_too_large",
            GatewayError::HeadersTooLarge { .. } => "headers_too_large",
            GatewayError::AmbiguousFraming(_) => "ambiguous_framing",
            GatewayError::Unauthorized => "invalid_api_key",
            GatewayError::ModelNotAllowed(_) => "model_not_allowed",
            GatewayError::UnknownModel(_) => "model_not_found",
            GatewayError::ApiNotServed { .. } => "api_not_served",
            GatewayError::NotFound { .. } => "unknown_url",
            GatewayError::RateLimited { kind, .. } => match kind {
                LimitKind::Requests => "rate_limit_requests",
                LimitKind::Tokens => "rate_limit_tokens",
                LimitKind::Concurrency => "rate_limit_concurrency",
            },
            GatewayError::TooManyConnections { .. } => "too_many_connections",
            GatewayError::Overloaded { .. } => "overloaded",
            GatewayError::TenantQueueFull { .. } => "tenant_queue_full",
            GatewayError::DeadlineUnmeetable { .. } => "deadline_unmeetable",
            GatewayError::ClassNotAllowed(_) => "priority_not_allowed",
            GatewayError::KeyStoreUnavailable => "key_store_unavailable",
            GatewayError::NoReplica(_) => "no_replica",
            GatewayError::Upstream(_) => "upstream_error",
            GatewayError::UpstreamTimeout => "upstream_timeout",
            GatewayError::PreviousResponseNotFound(_) => "previous_response_not_found",
        }
    }

    /// Whether the client should close the connection after this error (the request body
    /// may not have been read, or the framing cannot be trusted).
    pub(crate) fn closes_connection(&self) -> bool {
        matches!(
            self,
            GatewayError::AmbiguousFraming(_)
                | GatewayError::ClientTimeout
                | GatewayError::BodyTooLarge { .. }
                | GatewayError::HeadersTooLarge { .. }
                | GatewayError::TooManyConnections { .. }
        )
    }

    /// OpenAI error JSON: `{"error":{"message","type","param","code"}}`.
    pub(crate) fn to_json(&self) -> Vec<u8> {
        let v = serde_json::json!({
            "error": {
                "message": self.to_string(),
                "type": self.error_type(),
                "param": match self {
                    GatewayError::PreviousResponseNotFound(_) => "previous_response_id".into(),
                    _ => serde_json::Value::Null,
                },
                "code": self.code(),
            }
        });
        serde_json::to_vec(&v).unwrap_or_default()
    }

    /// The complete HTTP response for this error.
    pub(crate) fn response(&self) -> ErrorResponse {
        let mut headers = Vec::new();
        match self {
            GatewayError::RateLimited { retry_after, .. }
            | GatewayError::TenantQueueFull { retry_after, .. }
            | GatewayError::Overloaded { retry_after } => {
                headers.push(("retry-after", retry_after_secs(*retry_after).to_string()));
            }
            GatewayError::NoReplica(_)
            | GatewayError::DeadlineUnmeetable { .. }
            | GatewayError::TooManyConnections { .. }
            | GatewayError::KeyStoreUnavailable => headers.push(("retry-after", "1".to_string())),
            _ => {}
        }
        ErrorResponse {
            status: self.status(),
            headers,
            body: self.to_json(),
        }
    }

    /// The SSE event that ends a broken stream: an `error` object, never `[DONE]`.
    pub(crate) fn to_sse_event(&self) -> Vec<u8> {
        let mut out = b"data: ".to_vec();
        out.extend_from_slice(&self.to_json());
        out.extend_from_slice(b"\n\n");
        out
    }
}

/// Retry-After in whole seconds, rounded up, at least 1.
pub(crate) fn retry_after_secs(d: Duration) -> u64 {
    let ms = d.as_millis() as u64;
    ms.div_ceil(1000).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_refusals_map_to_their_statuses() {
        let full = GatewayError::TenantQueueFull {
            limit: 2,
            retry_after: Duration::from_secs(1),
        }
        .response();
        assert_eq!(full.status, 429);
        assert_eq!(full.headers, vec![("retry-after", "1".to_string())]);
        let late = GatewayError::DeadlineUnmeetable {
            objective_ms: 200,
            predicted_ms: 350,
        };
        assert_eq!(late.status(), 503);
        assert_eq!(late.code(), "deadline_unmeetable");
        assert!(late.to_string().contains("200 ms"));
        let class = GatewayError::ClassNotAllowed("batch".into());
        assert_eq!(
            (class.status(), class.error_type()),
            (403, "permission_error")
        );
    }

    #[test]
    fn rate_limited_maps_to_429_with_retry_after() {
        let e = GatewayError::RateLimited {
            kind: LimitKind::Tokens,
            retry_after: Duration::from_millis(1500),
            detail: "x".into(),
        };
        let r = e.response();
        assert_eq!(r.status, 429);
        assert_eq!(r.headers, vec![("retry-after", "2".to_string())]);
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["error"]["type"], "rate_limit_error");
        assert_eq!(v["error"]["code"], "rate_limit_tokens");
    }

    #[test]
    fn sse_error_event_is_not_done() {
        let ev = GatewayError::Upstream("reset".into()).to_sse_event();
        let s = String::from_utf8(ev).unwrap();
        assert!(s.starts_with("data: {\"error\""));
        assert!(!s.contains("[DONE]"));
        assert!(s.ends_with("\n\n"));
    }

    #[test]
    fn framing_errors_close_the_connection() {
        assert!(GatewayError::AmbiguousFraming("cl+te").closes_connection());
        assert_eq!(GatewayError::AmbiguousFraming("cl+te").status(), 400);
        assert!(!GatewayError::Unauthorized.closes_connection());
    }
}
