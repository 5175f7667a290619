//! Finish: when a request ends, whatever happened, work out its [`Outcome`] once ([`outcome`]), then
//! settle the tenant's token reservation, report the replica's health, and hand the same
//! outcome to the metrics, the access log and the dashboard.

use super::ctx::RequestCtx;
use super::failure::{client_gone, client_side};
use crate::dashboard::snapshot::history_point;
use crate::outcome::{Outcome, CLIENT_CLOSED};
use crate::state::AppState;
use pingora_error::Error;
use std::time::Instant;

/// Runs in Pingora's logging phase, once per request.
pub(crate) fn finish(state: &AppState, e: Option<&Error>, ctx: &mut RequestCtx) {
    if ctx.read.control {
        return;
    }
    if let Some(t) = ctx.seen.tracker.as_mut() {
        t.finish();
    }
    let permit = ctx.admission.permit.take();
    let slot = ctx.attempts.slot.take();
    // One clock read for the settlement, the log line and the dashboard.
    let now = Instant::now();
    let outcome = outcome(ctx, e, now);
    if let Some(mut permit) = permit {
        let cost = state.config().admission.flow.tpm_cached_token_cost;
        let charged = crate::flow::request::tpm_charge(outcome.charged_tokens, outcome.usage, cost);
        permit.settle_at(charged, now);
    }
    if let Some(slot) = &slot {
        if let (Some(predicted), Some(actual)) = (
            outcome.predicted_cached_tokens,
            outcome.usage.and_then(|u| u.cached_tokens),
        ) {
            slot.replica().cache_truth.observe(predicted, actual);
        }
    }
    if let (Some(slot), Some(ok)) = (slot, outcome.replica_ok) {
        state.report(slot.replica(), ok);
    }
    state.metrics.record(&outcome);
    super::passthrough::count(state, ctx, outcome.status);
    if !ctx.read.api.is_empty() {
        let mut digits = itoa::Buffer::new();
        state
            .metrics
            .api_requests
            .with_label_values(&[ctx.read.api, digits.format(outcome.status)])
            .inc();
    }
    if let Some(m) = &ctx.migration {
        let completed = outcome.response_started
            && !ctx.seen.stream_error_sent
            && ctx.seen.tracker.as_ref().is_some_and(|t| t.saw_done());
        if let Some(label) = m.outcome(completed) {
            state
                .metrics
                .stream_migrations
                .with_label_values(&[label])
                .inc();
        }
        if let Some(d) = m.resume_latency {
            state
                .metrics
                .migration_resume_seconds
                .observe(d.as_secs_f64());
        }
    }
    log(ctx, &outcome);
    state
        .dashboard
        .record(&outcome, now, || history_point(&state.metrics));
}

/// The access log: one `request` line per request.
fn log(ctx: &RequestCtx, o: &Outcome<'_>) {
    tracing::info!(
        request_id = ctx.id.text(),
        tenant = o.tenant.unwrap_or(""),
        model = o.model,
        replica = o.replica_label(),
        status = o.status,
        attempts = o.attempts,
        prompt_tokens = o.prompt_tokens,
        charged_tokens = o.charged_tokens,
        cached_tokens = o.usage.and_then(|u| u.cached_tokens),
        error = o.error,
        migrations = ctx.migration.as_ref().map_or(0, |m| m.count),
        latency_ms = o.latency.as_millis() as u64,
        "request"
    );
}

/// The outcome of `ctx`, which ended with `e` (if it failed), at `now`.
pub(crate) fn outcome<'a>(ctx: &'a RequestCtx, e: Option<&Error>, now: Instant) -> Outcome<'a> {
    let prompt_tokens = ctx.plan.as_ref().map_or(0, |p| u64::from(p.prompt_tokens));
    let tracker = ctx.seen.tracker.as_ref();
    let answered = match tracker {
        Some(t) if ctx.seen.started => t.charged_tokens(prompt_tokens),
        // Sent to a replica, and the client left before the response header: the
        // replica ran (or was running) the prefill, so the prompt is charged.
        _ if ctx.attempts.count > 0 && e.is_some_and(client_gone) => prompt_tokens,
        _ => 0,
    };
    // Every attempt a replica took and then failed to answer (timed out, reset) ran its
    // prefill too: the prompt is charged once per such attempt; a migrated stream's
    // continuations prefilled the prompt and the tokens they carried.
    let reprefill = ctx.migration.as_ref().map_or(0, |m| m.reprefill_tokens);
    let charged_tokens = answered + u64::from(ctx.attempts.unanswered) * prompt_tokens + reprefill;
    let replica = ctx.attempts.replica.as_ref();
    let predicted_cached_tokens = match (&ctx.plan, replica) {
        (Some(plan), Some(r)) => Some(u64::from(plan.predicted_cached_tokens(r))),
        _ => None,
    };
    Outcome {
        status: match ctx.seen.status {
            0 => CLIENT_CLOSED,
            s => s,
        },
        error: ctx.seen.error_code.or(e.map(|e| e.etype().as_str())),
        tenant: ctx.admission.tenant.as_ref().map(|t| &*t.id),
        model: &ctx.read.model,
        replica,
        attempts: ctx.attempts.count,
        prompt_tokens,
        charged_tokens,
        usage: tracker.and_then(|t| t.usage()),
        predicted_cached_tokens,
        tier_cached_tokens: ctx.seen.tier_tokens,
        response_started: ctx.seen.started,
        replica_ok: (!e.is_some_and(client_side))
            .then(|| e.is_none() && ctx.seen.status < 500 && !ctx.seen.stream_error_sent),
        latency: now.saturating_duration_since(ctx.start),
    }
}
