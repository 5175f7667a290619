//! Writing responses the gateway answers itself (errors, model list, health).

use super::ctx::RequestCtx;
use crate::error::GatewayError;
use crate::headers::{self, HeaderPairs};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use pingora_http::ResponseHeader;
use pingora_proxy::Session;

/// Writes a complete JSON response. `close` ends the connection after it.
pub(crate) async fn json(
    session: &mut Session,
    status: u16,
    body: Vec<u8>,
    extra: &[(HeaderName, HeaderValue)],
    close: bool,
) -> pingora_error::Result<()> {
    let mut h = ResponseHeader::build_no_case(status, Some(extra.len() + 4))?;
    let map = &mut h.headers;
    map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    map.insert(CONTENT_LENGTH, HeaderValue::from(body.len() as u64));
    for (k, v) in extra {
        map.append(k.clone(), v.clone());
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

/// The error body for `err` in the request's API: Anthropic's shape on `/v1/messages`,
/// OpenAI's everywhere else.
pub(crate) fn error_body(ctx: &RequestCtx, err: &GatewayError) -> Vec<u8> {
    match ctx.messages {
        Some(_) => crate::api::messages::error::body(err),
        None => err.to_json(),
    }
}

/// Writes `err` (its status and headers, with `body`: [`error_body`]) with extra headers.
pub(crate) async fn error(
    session: &mut Session,
    err: &GatewayError,
    body: Vec<u8>,
    extra: &[(HeaderName, HeaderValue)],
    request_id: &HeaderValue,
    close: bool,
) -> pingora_error::Result<()> {
    let r = err.response();
    let mut all: HeaderPairs = Vec::with_capacity(r.headers.len() + extra.len() + 1);
    for (k, v) in &r.headers {
        all.push((HeaderName::from_static(k), headers::text(v)));
    }
    all.extend(extra.iter().cloned());
    all.push((headers::REQUEST_ID, request_id.clone()));
    json(
        session,
        r.status,
        body,
        &all,
        close || err.closes_connection(),
    )
    .await
}

/// The `/v1/models` list.
pub(crate) fn models_body(models: &[String]) -> Vec<u8> {
    let data: Vec<serde_json::Value> = models
        .iter()
        .map(|m| serde_json::json!({"id": m, "object": "model", "created": 0, "owned_by": "warmpath"}))
        .collect();
    serde_json::to_vec(&serde_json::json!({"object": "list", "data": data})).unwrap_or_default()
}
