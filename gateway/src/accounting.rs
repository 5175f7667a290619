//! The end of a request: settle the token reservation with actual usage, report the
//! replica's health, record metrics (predicted vs reported cached tokens) and log.

use crate::proxy::RequestCtx;
use crate::state::AppState;
use pingora_error::{Error, ErrorSource};
use std::time::Instant;

/// Runs in Pingora's logging phase, once per request, whatever happened.
pub fn finish(state: &AppState, e: Option<&Error>, ctx: &mut RequestCtx) {
    if ctx.control {
        return;
    }
    if let Some(t) = ctx.tracker.as_mut() {
        t.finish();
    }
    let prompt_tokens = ctx.plan.as_ref().map_or(0, |p| u64::from(p.prompt_tokens));
    let charged = match &ctx.tracker {
        Some(t) if ctx.response_started => t.charged_tokens(prompt_tokens),
        _ => 0,
    };
    // One clock read for the settlement, the log line and the dashboard.
    let now = Instant::now();
    if let Some(mut permit) = ctx.permit.take() {
        permit.settle_at(charged, now);
    }
    let client_gone = e.is_some_and(|e| e.esource() == &ErrorSource::Downstream);
    if let Some(slot) = ctx.slot.take() {
        if !client_gone {
            let ok = e.is_none() && ctx.status < 500 && !ctx.stream_error_sent;
            state.report(slot.replica(), ok);
        }
    }
    let tenant = ctx.tenant.as_ref().map_or("", |t| &*t.id);
    let status = if ctx.status == 0 { 499 } else { ctx.status };
    state
        .metrics
        .request(tenant, &ctx.model, ctx.replica_label(), status)
        .inc();
    let usage = ctx.tracker.as_ref().and_then(|t| t.usage());
    if let (Some(u), false) = (usage, tenant.is_empty()) {
        let t = state.metrics.tenant(tenant);
        t.prompt.inc_by(u.prompt_tokens);
        t.completion.inc_by(u.completion_tokens);
        t.cached.inc_by(u.cached_tokens.unwrap_or(0));
    }
    if let (Some(plan), Some(u)) = (&ctx.plan, usage) {
        if let (Some(actual), Some(r)) = (u.cached_tokens, &ctx.replica) {
            let predicted = u64::from(plan.predicted_cached_tokens(r));
            let m = state.metrics.model(&plan.model);
            m.predicted_cached_tokens.inc_by(predicted);
            m.actual_cached_tokens.inc_by(actual);
            m.prompt_tokens.inc_by(u.prompt_tokens);
            m.prediction_error
                .observe(predicted.abs_diff(actual) as f64);
        }
    }
    tracing::info!(
        request_id = ctx.request_id.text(),
        tenant,
        model = %ctx.model,
        replica = ctx.replica_label(),
        status,
        attempts = ctx.attempts,
        prompt_tokens,
        charged_tokens = charged,
        cached_tokens = usage.and_then(|u| u.cached_tokens),
        error = ctx.error_code.or(e.map(|e| e.etype().as_str())),
        latency_ms = now.saturating_duration_since(ctx.start).as_millis() as u64,
        "request"
    );
    crate::dashboard::record(state, ctx, now);
}
