//! Anthropic's error shape, `{"type":"error","error":{"type","message"}}`: the one mapping
//! from the gateway's [`GatewayError`] (and from a replica's OpenAI error body) for this
//! endpoint. The status stays the gateway's; the `error.type` follows it.

use crate::error::GatewayError;
use serde_json::{json, Value};

/// Anthropic's `error.type` for an HTTP status.
pub(crate) fn error_type(status: u16) -> &'static str {
    match status {
        400 | 408 | 413 | 422 | 431 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

/// The error object for `status` and `message`.
fn object(status: u16, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message}})
}

/// The Anthropic error body of a gateway error (its status is [`GatewayError::status`]).
pub(crate) fn body(e: &GatewayError) -> Vec<u8> {
    serde_json::to_vec(&object(e.status(), &e.to_string())).unwrap_or_default()
}

/// A replica's error answer (OpenAI's `{"error":{"message"}}`, or anything else) as an
/// Anthropic error body with the same status.
pub(crate) fn from_upstream(status: u16, upstream: &[u8]) -> Vec<u8> {
    let v: Option<Value> = serde_json::from_slice(upstream).ok();
    let message = v
        .as_ref()
        .and_then(|v| v.pointer("/error/message").or_else(|| v.get("message")))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| {
            let text = String::from_utf8_lossy(upstream);
            let text: String = text.chars().take(512).collect();
            format!("the model server answered {status}: {text}")
        });
    serde_json::to_vec(&object(status, &message)).unwrap_or_default()
}

/// The `event: error` of a stream, from an OpenAI-shaped error object seen in the chat
/// stream (the replica's, or the gateway's own).
pub(crate) fn stream_event(openai: &Value) -> Vec<u8> {
    let message = openai
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("the stream failed");
    // The gateway's own codes tell an overload from other failures.
    let status = match openai.pointer("/error/code").and_then(Value::as_str) {
        Some("overloaded" | "no_replica") => 503,
        Some("upstream_timeout") => 504,
        _ => 500,
    };
    let mut out = b"event: error\ndata: ".to_vec();
    out.extend_from_slice(&serde_json::to_vec(&object(status, message)).unwrap_or_default());
    out.extend_from_slice(b"\n\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parsed(b: &[u8]) -> Value {
        serde_json::from_slice(b).unwrap()
    }

    #[test]
    fn gateway_errors_map_to_anthropic_types() {
        for (e, ty) in [
            (
                GatewayError::BadRequest("x".into()),
                "invalid_request_error",
            ),
            (GatewayError::Unauthorized, "authentication_error"),
            (
                GatewayError::ModelNotAllowed("m".into()),
                "permission_error",
            ),
            (GatewayError::UnknownModel("m".into()), "not_found_error"),
            (
                GatewayError::RateLimited {
                    kind: crate::error::LimitKind::Tokens,
                    retry_after: Duration::from_secs(1),
                    detail: "d".into(),
                },
                "rate_limit_error",
            ),
            (
                GatewayError::Overloaded {
                    retry_after: Duration::from_secs(1),
                },
                "overloaded_error",
            ),
            (GatewayError::Upstream("reset".into()), "api_error"),
        ] {
            let v = parsed(&body(&e));
            assert_eq!(v["type"], "error");
            assert_eq!(v["error"]["type"], ty, "{e}");
            assert_eq!(v["error"]["message"], e.to_string());
        }
    }

    #[test]
    fn upstream_error_bodies_keep_their_message() {
        let v = parsed(&from_upstream(
            400,
            br#"{"error":{"message":"prompt too long","type":"invalid_request_error"}}"#,
        ));
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["message"], "prompt too long");
        let v = parsed(&from_upstream(500, b"<html>boom</html>"));
        assert_eq!(v["error"]["type"], "api_error");
        assert!(v["error"]["message"].as_str().unwrap().contains("boom"));
    }
}
