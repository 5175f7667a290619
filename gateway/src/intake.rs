//! The request phase: routing table, framing and size checks, authentication, the bounded
//! body read, parsing, tenant limits, the routing plan and admission. Everything here is
//! decided before any byte goes to a replica.

use crate::error::GatewayError;
use crate::limits;
use crate::plan;
use crate::proxy::RequestCtx;
use crate::request::{self, Endpoint};
use crate::respond;
use crate::response::ResponseTracker;
use crate::state::AppState;
use pingora_proxy::Session;
use std::time::{Duration, Instant};

/// What the request phase concluded.
pub enum Intake {
    /// Forward to the planned replica.
    Forward,
    /// Already answered locally with this status.
    Answered(u16),
}

/// Runs the request phase; on `Intake::Forward` the ctx holds the plan and a slot.
pub async fn run(
    state: &AppState,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> pingora_error::Result<Intake> {
    match admit(state, session, ctx).await {
        Ok(Some(status)) => Ok(Intake::Answered(status)),
        Ok(None) => Ok(Intake::Forward),
        Err(e) => {
            if let GatewayError::RateLimited { kind, .. } = &e {
                let tenant = ctx.tenant.as_ref().map_or("", |t| t.id.as_str());
                state
                    .metrics
                    .limit_rejections
                    .with_label_values(&[tenant, kind.as_str()])
                    .inc();
            }
            // A body we did not read cannot be trusted to be drained: close after answering.
            let close = e.closes_connection() || (!ctx.body_read && !session.is_body_empty());
            respond::error(session, &e, &ctx.rate_headers, &ctx.request_id, close).await?;
            ctx.error_code = Some(e.code());
            Ok(Intake::Answered(e.status()))
        }
    }
}

fn check_framing(
    session: &Session,
    max_body: usize,
    max_header: usize,
) -> Result<(), GatewayError> {
    let req = session.req_header();
    let h = &req.headers;
    let header_bytes: usize = h
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum::<usize>()
        + req.uri.to_string().len();
    if header_bytes > max_header {
        return Err(GatewayError::HeadersTooLarge { limit: max_header });
    }
    let cl: Vec<_> = h.get_all("content-length").iter().collect();
    let te: Vec<_> = h.get_all("transfer-encoding").iter().collect();
    // Pingora drops Content-Length when Transfer-Encoding is present, so look at the raw
    // header block for the smuggling shape.
    let raw_cl = !te.is_empty() && raw_has_content_length(&session.as_downstream().to_h1_raw());
    if (!cl.is_empty() || raw_cl) && !te.is_empty() {
        return Err(GatewayError::AmbiguousFraming(
            "both Content-Length and Transfer-Encoding",
        ));
    }
    if cl.len() > 1 {
        return Err(GatewayError::AmbiguousFraming("duplicate Content-Length"));
    }
    if te.len() > 1
        || te
            .first()
            .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"chunked"))
    {
        return Err(GatewayError::AmbiguousFraming(
            "unsupported Transfer-Encoding",
        ));
    }
    if let Some(v) = cl.first() {
        let s = v.to_str().unwrap_or("x");
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(GatewayError::AmbiguousFraming("invalid Content-Length"));
        }
        if s.parse::<usize>().map_or(true, |n| n > max_body) {
            return Err(GatewayError::BodyTooLarge { limit: max_body });
        }
    }
    if h.contains_key("upgrade") {
        return Err(GatewayError::BadRequest(
            "protocol upgrades are not supported".into(),
        ));
    }
    Ok(())
}

/// Whether a raw HTTP/1 header block has a `Content-Length` line.
fn raw_has_content_length(raw: &[u8]) -> bool {
    raw.split(|&b| b == b'\n')
        .any(|line| line.len() >= 15 && line[..15].eq_ignore_ascii_case(b"content-length:"))
}

async fn read_body(
    session: &mut Session,
    max: usize,
    timeout: Duration,
) -> Result<Vec<u8>, GatewayError> {
    session.enable_retry_buffering();
    let deadline = Instant::now() + timeout;
    let mut body = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, session.read_request_body()).await {
            Err(_) => return Err(GatewayError::ClientTimeout),
            Ok(Err(e)) => {
                return Err(GatewayError::InvalidBody(format!(
                    "cannot read the body: {e}"
                )))
            }
            Ok(Ok(None)) => return Ok(body),
            Ok(Ok(Some(chunk))) => {
                if body.len() + chunk.len() > max {
                    return Err(GatewayError::BodyTooLarge { limit: max });
                }
                body.extend_from_slice(&chunk);
            }
        }
    }
}

/// `Ok(Some(status))`: answered locally; `Ok(None)`: forward.
async fn admit(
    state: &AppState,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<Option<u16>, GatewayError> {
    let cfg = state.config();
    let method = session.req_header().method.as_str().to_string();
    let path = session.req_header().uri.path().to_string();
    let endpoint = match (method.as_str(), path.as_str()) {
        ("POST", "/v1/chat/completions") => Some(Endpoint::Chat),
        ("POST", "/v1/completions") => Some(Endpoint::Completions),
        ("GET", "/v1/models") => None,
        ("GET", "/health") => {
            let _ = respond::json(session, 200, b"{\"status\":\"ok\"}".to_vec(), &[], false).await;
            return Ok(Some(200));
        }
        _ => return Err(GatewayError::NotFound { method, path }),
    };
    check_framing(
        session,
        cfg.limits.max_body_bytes,
        cfg.limits.max_header_bytes,
    )?;
    let tenant = state.tenants().authenticate(
        session
            .req_header()
            .headers
            .get("authorization")
            .map(|v| v.as_bytes()),
    )?;
    ctx.tenant = Some(tenant.clone());
    let Some(endpoint) = endpoint else {
        let models: Vec<String> = state
            .registry
            .models()
            .into_iter()
            .filter(|m| tenant.allows(m))
            .collect();
        let _ = respond::json(session, 200, respond::models_body(&models), &[], false).await;
        return Ok(Some(200));
    };
    let body = read_body(
        session,
        cfg.limits.max_body_bytes,
        Duration::from_millis(cfg.timeouts.client_read_ms),
    )
    .await?;
    ctx.body_read = true;
    let parsed = request::parse(endpoint, &body)?;
    ctx.model = parsed.model.clone();
    let mut plan = plan::build(state, &tenant, endpoint, &parsed, &ctx.request_id)?;
    let max_tokens = u64::from(parsed.max_tokens.unwrap_or(cfg.limits.default_max_tokens));
    let reserve = u64::from(plan.prompt_tokens) + max_tokens * u64::from(parsed.n);
    let (permit, rate_headers) = match limits::admit(&tenant, reserve) {
        Ok(ok) => ok,
        Err((e, h)) => {
            ctx.rate_headers = h.headers;
            return Err(e);
        }
    };
    ctx.rate_headers = rate_headers.headers;
    ctx.permit = Some(permit);
    let slot = plan::admit(state, &mut plan).await?;
    ctx.pending_slot = Some(slot);
    ctx.tracker = Some(ResponseTracker::new(plan.stream));
    ctx.plan = Some(plan);
    state.retry_budget.record_request(Instant::now());
    Ok(None)
}
