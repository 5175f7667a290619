//! What became of one request, worked out once when it ends (by the data plane's
//! [`crate::proxy::finish`]). Accounting, metrics, the access log and the dashboard all
//! read this one value, so they never disagree on a status, a token count or a
//! prediction. A plain value: the metrics and the dashboard take it without knowing the
//! request's state.

use crate::body::response::Usage;
use crate::replicas::Replica;
use std::sync::Arc;
use std::time::Duration;

/// Status recorded for a request that got no answer (the client left first), as nginx does.
pub(crate) const CLIENT_CLOSED: u16 = 499;

/// One finished request.
#[derive(Debug)]
pub(crate) struct Outcome<'a> {
    /// Status the client got; [`CLIENT_CLOSED`] when it got none.
    pub status: u16,
    /// Error code: the gateway's own (`rate_limited`, ...) or Pingora's error type.
    pub error: Option<&'static str>,
    /// Tenant id, when authenticated.
    pub tenant: Option<&'a str>,
    /// Model asked for (empty when not parsed).
    pub model: &'a str,
    /// Replica of the latest attempt.
    pub replica: Option<&'a Arc<Replica>>,
    /// Attempts made upstream.
    pub attempts: u32,
    /// Prompt tokens as the gateway counted them (0 when not routed).
    pub prompt_tokens: u64,
    /// Tokens charged to the tenant's token limit.
    pub charged_tokens: u64,
    /// Usage the replica reported.
    pub usage: Option<Usage>,
    /// Prompt tokens the router predicted cached on [`Self::replica`] (routed requests).
    pub predicted_cached_tokens: Option<u64>,
    /// Of the reported cached tokens, those the replica loaded from the shared KV tier
    /// (`x-warmpath-kv-tier-tokens`); `None` from replicas without the tier.
    pub tier_cached_tokens: Option<u64>,
    /// The response header reached the client.
    pub response_started: bool,
    /// The replica served the request as it should: no error, no 5xx, no broken stream.
    /// `None` when the client's side failed, which says nothing of the replica.
    pub replica_ok: Option<bool>,
    /// From arrival to now.
    pub latency: Duration,
}

impl<'a> Outcome<'a> {
    /// The replica's label (`r0`, ...); empty before any attempt.
    pub(crate) fn replica_label(&self) -> &'a str {
        self.replica.map_or("", |r| r.label.as_str())
    }
}
