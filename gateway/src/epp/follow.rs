//! Following a picked request's response as Envoy relays it (when the filter sends the
//! response phases): the endpoint that served (`x-gateway-destination-endpoint-served`),
//! the status, and the usage with its cached tokens. When the stream ends, whatever
//! happened, the request is settled as the gateway settles its own (`proxy::finish`): the
//! tenant's reservation with actual usage, the prediction against the reported cached
//! tokens, the replica's health, metrics and the dashboard, from one [`Outcome`].

use super::pick::Picked;
use crate::body::response::ResponseTracker;
use crate::dashboard::snapshot::history_point;
use crate::outcome::{Outcome, CLIENT_CLOSED};
use crate::state::AppState;
use std::time::Instant;

/// A picked request until its stream ends.
#[derive(Debug)]
pub(crate) struct Follow {
    picked: Picked,
    /// Index in `picked.replicas` of the replica that served (the primary until the data
    /// plane says otherwise).
    served: usize,
    status: Option<u16>,
    tracker: ResponseTracker,
    started: Instant,
}

impl Follow {
    /// Follows `picked`, which arrived at `started`.
    pub(crate) fn new(picked: Picked, started: Instant) -> Self {
        let tracker = ResponseTracker::new(picked.stream);
        Self {
            picked,
            served: 0,
            status: None,
            tracker,
            started,
        }
    }

    /// The response's head: its status and the endpoint that served it. Returns the
    /// headers to add to the client's response, as the gateway adds them.
    pub(crate) fn head(
        &mut self,
        status: Option<u16>,
        served: Option<&str>,
    ) -> Vec<(String, String)> {
        self.status = Some(status.unwrap_or(200));
        if let Some(s) = served {
            if let Some(i) = self
                .picked
                .replicas
                .iter()
                .position(|r| r.addr.authority() == s)
            {
                self.served = i;
            }
        }
        let mut h = self.picked.rate_headers.clone();
        h.push((
            crate::headers::REPLICA.to_string(),
            self.picked.replicas[self.served].label.clone(),
        ));
        h.push((
            crate::headers::PREDICTED_CACHED.to_string(),
            self.picked.predicted[self.served].to_string(),
        ));
        h
    }

    /// One chunk of the response body.
    pub(crate) fn body(&mut self, chunk: &[u8]) {
        self.tracker.observe(&bytes::Bytes::copy_from_slice(chunk));
    }

    /// Settles the request; `complete` when the response ended (else the client or Envoy
    /// went away first).
    pub(crate) fn finish(mut self, state: &AppState, complete: bool) {
        self.tracker.finish();
        let now = Instant::now();
        let replica = self.picked.replicas[self.served].clone();
        let prompt = u64::from(self.picked.prompt_tokens);
        let usage = self.tracker.usage();
        let charged = if self.status.is_some() {
            self.tracker.charged_tokens(prompt)
        } else {
            prompt
        };
        if let Some(mut permit) = self.picked.permit.take() {
            permit.settle_at(charged, now);
        }
        let predicted = u64::from(self.picked.predicted[self.served]);
        if let Some(actual) = usage.and_then(|u| u.cached_tokens) {
            replica.cache_truth.observe(predicted, actual);
        }
        let replica_ok = self
            .status
            .map(|s| s < 500 && !(self.picked.stream && complete && self.tracker.saw_error()));
        if let Some(ok) = replica_ok {
            state.report(&replica, ok);
        }
        let outcome = Outcome {
            status: match self.status {
                Some(s) if complete => s,
                _ => CLIENT_CLOSED,
            },
            error: None,
            tenant: Some(&self.picked.tenant.id),
            model: &self.picked.model,
            replica: Some(&replica),
            attempts: 1,
            prompt_tokens: prompt,
            charged_tokens: charged,
            usage,
            predicted_cached_tokens: Some(predicted),
            tier_cached_tokens: None,
            response_started: self.status.is_some(),
            replica_ok,
            latency: now.saturating_duration_since(self.started),
        };
        state.metrics.record(&outcome);
        state
            .dashboard
            .record(&outcome, now, || history_point(&state.metrics));
        tracing::info!(
            tenant = &*self.picked.tenant.id,
            model = &*self.picked.model,
            replica = replica.label.as_str(),
            status = outcome.status,
            prompt_tokens = prompt,
            predicted_cached_tokens = predicted,
            cached_tokens = usage.and_then(|u| u.cached_tokens),
            "epp request"
        );
        // The slot is released here, with the rest of the pick.
        drop(self.picked);
    }
}
