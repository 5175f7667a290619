//! Writing responses the gateway answers itself (errors, model list, health).

use crate::error::GatewayError;
use bytes::Bytes;
use pingora_http::ResponseHeader;
use pingora_proxy::Session;

/// Writes a complete JSON response. `close` ends the connection after it.
pub async fn json(
    session: &mut Session,
    status: u16,
    body: Vec<u8>,
    headers: &[(&'static str, String)],
    close: bool,
) -> pingora_error::Result<()> {
    let mut h = ResponseHeader::build(status, Some(headers.len() + 4))?;
    h.insert_header("content-type", "application/json")?;
    h.insert_header("content-length", body.len().to_string())?;
    for (k, v) in headers {
        h.append_header(*k, v.as_str())?;
    }
    if close {
        h.insert_header("connection", "close")?;
        session.set_keepalive(None);
    }
    session.write_response_header(Box::new(h), false).await?;
    session
        .write_response_body(Some(Bytes::from(body)), true)
        .await
}

/// Writes `err` as an OpenAI error response with its extra headers.
pub async fn error(
    session: &mut Session,
    err: &GatewayError,
    extra: &[(&'static str, String)],
    request_id: &str,
    close: bool,
) -> pingora_error::Result<()> {
    let r = err.response();
    let mut headers = r.headers.clone();
    headers.extend(extra.iter().cloned());
    headers.push(("x-request-id", request_id.to_string()));
    json(
        session,
        r.status,
        r.body,
        &headers,
        close || err.closes_connection(),
    )
    .await
}

/// The `/v1/models` list.
pub fn models_body(models: &[String]) -> Vec<u8> {
    let data: Vec<serde_json::Value> = models
        .iter()
        .map(|m| serde_json::json!({"id": m, "object": "model", "created": 0, "owned_by": "warmpath"}))
        .collect();
    serde_json::to_vec(&serde_json::json!({"object": "list", "data": data})).unwrap_or_default()
}
