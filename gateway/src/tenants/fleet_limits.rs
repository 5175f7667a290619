//! Admission against the fleet's shared limits (Redis): the decision of
//! [`crate::fleet::Fleet::admit`] as a permit or a 429, with the same `x-ratelimit-*`
//! headers the local limiter sends.

use super::limits::{format_secs, too_many_tokens, Permit, RateHeaders};
use super::Tenant;
use crate::error::{GatewayError, LimitKind};
use crate::fleet::limits::Refused;
use crate::fleet::Fleet;
use crate::headers;
use http::HeaderValue;
use std::sync::Arc;
use std::time::Duration;

/// What [`reserve`] concluded: a permit, or a refusal with its headers.
pub(crate) type Reserved = Result<(Permit, RateHeaders), (GatewayError, RateHeaders)>;

/// Whether `limits` limit anything (a tenant without limits never asks Redis).
fn limits_anything(t: &Tenant) -> bool {
    let l = &t.limits;
    l.requests_per_minute > 0 || l.tokens_per_minute > 0 || l.max_concurrent > 0
}

/// Reserves one request of up to `tokens` tokens for `tenant` on the fleet's limits.
/// `None` when Redis is unreachable: the caller admits with the local fallback limiter.
pub(crate) async fn reserve(fleet: &Arc<Fleet>, tenant: &Tenant, tokens: u64) -> Option<Reserved> {
    if !limits_anything(tenant) {
        return Some(Ok((Permit::shared(None, tokens), RateHeaders::default())));
    }
    let limits = &tenant.limits;
    if limits.tokens_per_minute > 0 && tokens > limits.tokens_per_minute {
        // Asked before Redis: no wait makes the tokens available (400, not 429).
        return Some(Err((
            too_many_tokens(&tenant.id, tokens, limits.tokens_per_minute),
            RateHeaders::default(),
        )));
    }
    let d = fleet.admit(&tenant.id, limits, tokens).await?;
    let mut hdrs = RateHeaders {
        headers: Vec::with_capacity(6),
    };
    if limits.requests_per_minute > 0 {
        hdrs.headers.push((
            headers::RATELIMIT_LIMIT_REQUESTS,
            HeaderValue::from(limits.requests_per_minute),
        ));
        hdrs.headers.push((
            headers::RATELIMIT_REMAINING_REQUESTS,
            HeaderValue::from(d.remaining_requests.unwrap_or(0)),
        ));
        if d.refused == Some(Refused::Requests) {
            hdrs.headers.push((
                headers::RATELIMIT_RESET_REQUESTS,
                format_secs(d.retry_after),
            ));
        }
    }
    if limits.tokens_per_minute > 0 {
        hdrs.headers.push((
            headers::RATELIMIT_LIMIT_TOKENS,
            HeaderValue::from(limits.tokens_per_minute),
        ));
        hdrs.headers.push((
            headers::RATELIMIT_REMAINING_TOKENS,
            HeaderValue::from(d.remaining_tokens.unwrap_or(0)),
        ));
        hdrs.headers
            .push((headers::RATELIMIT_RESET_TOKENS, format_secs(d.reset_tokens)));
    }
    let Some(refused) = d.refused else {
        return Some(Ok((Permit::shared(d.lease, tokens), hdrs)));
    };
    let (kind, detail) = match refused {
        Refused::Concurrency => (
            LimitKind::Concurrency,
            format!("at most {} concurrent requests", limits.max_concurrent),
        ),
        Refused::Tokens => (
            LimitKind::Tokens,
            format!(
                "request reserves {tokens} tokens; limit {} tokens per minute",
                limits.tokens_per_minute
            ),
        ),
        Refused::Requests => (
            LimitKind::Requests,
            format!("{} requests per minute", limits.requests_per_minute),
        ),
    };
    let retry_after = d.retry_after.max(Duration::from_millis(1));
    Some(Err((
        GatewayError::RateLimited {
            kind,
            retry_after,
            detail,
        },
        hdrs,
    )))
}
