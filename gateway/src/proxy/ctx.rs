//! One request's state across Pingora's phases: a few typed parts, each written by the
//! phase that owns it and read by the later ones.
//!
//! | part | written by |
//! |---|---|
//! | [`RequestCtx::id`], [`RequestCtx::trace`], [`RequestCtx::start`] | creation, the trace header |
//! | [`Read`] | [`super::read`]: the route table, the body read, the parse |
//! | [`Admission`] | [`super::admit`]: the tenant and its limits |
//! | [`RequestCtx::plan`] | [`super::route`]: the routing decision |
//! | [`Attempts`] | [`super::route`] (the try order, the first slot), [`super::send`] and [`super::failure`] (each attempt) |
//! | [`Seen`] | [`super::response`] and the phases that answer locally |
//! | [`RequestCtx::migration`] | [`super::request`] (a stream), [`super::migrate`] (each failure and event) |

use super::route::{Plan, TryOrder};
use crate::body::response::ResponseTracker;
use crate::headers::HeaderPairs;
use crate::replicas::{Replica, Slot};
use crate::tenants::limits::Permit;
use crate::tenants::Tenant;
use crate::trace::{RequestId, TraceContext};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use warmpath_core::ReplicaId;

/// Per-request state across phases.
#[derive(Debug)]
pub(crate) struct RequestCtx {
    /// Request id (the W3C trace id), as text and header value.
    pub id: RequestId,
    /// Trace context propagated upstream.
    pub trace: TraceContext,
    /// Arrival time.
    pub start: Instant,
    /// What was read of the request.
    pub read: Read,
    /// The tenant and what its limits granted.
    pub admission: Admission,
    /// The routing plan (forwarded requests only).
    pub plan: Option<Plan>,
    /// The attempts upstream and the retry state between them.
    pub attempts: Attempts,
    /// The response as the client sees it.
    pub seen: Seen,
    /// A stream that may continue on another replica (`retry.max_migrations`).
    pub migration: Option<Box<super::migrate::state::Migration>>,
    /// A `/v1/messages` request: its translation to and from a chat.
    pub messages: Option<Box<crate::api::messages::Exchange>>,
    /// A Responses API request: its translation and what it keeps (`super::responses`).
    pub responses: Option<Box<crate::api::responses::Exchange>>,
}

/// What the read phase learnt of the request.
#[derive(Debug)]
pub(crate) struct Read {
    /// A gateway control endpoint (`/health`, `/ready`): not API traffic, so kept out of
    /// request metrics, logs and the dashboard.
    pub control: bool,
    /// The API asked for (`chat`, `completions`, `responses`; empty for the gateway's
    /// own endpoints): the `api` label of `api_requests_total`.
    pub api: &'static str,
    /// Model asked for (empty until the body is parsed).
    pub model: Arc<str>,
    /// The whole body was read: its length (at most `limits.max_body_bytes`).
    pub body_len: Option<u32>,
    /// The body every attempt sends, kept by the gateway for retries: the client's, or the
    /// client's with the completion bound the admission reserved (see [`super::bound`]).
    pub upstream_body: Option<bytes::Bytes>,
    /// The attempt (its number) that [`Self::upstream_body`] was last sent on.
    pub upstream_sent: u32,
    /// This request's share of `limits.max_inflight_body_bytes`, given back when the
    /// request ends.
    pub body_budget: Option<crate::body::budget::BodyPermit>,
}

/// The authenticated tenant and what its limits granted.
#[derive(Debug, Default)]
pub(crate) struct Admission {
    /// Authenticated tenant.
    pub tenant: Option<Arc<Tenant>>,
    /// Token reservation, settled when the request ends.
    pub permit: Option<Permit>,
    /// `x-ratelimit-*` headers, sent with the answer whatever it is.
    pub rate_headers: HeaderPairs,
    /// Its class and TTFT objective (flow control, `crate::flow`).
    pub flow: crate::flow::FlowRequest,
    /// Its place among the requests in flight (flow control's reserve), from the slot's
    /// grant to the request's end.
    pub hold: Option<crate::flow::gate::Hold>,
}

/// The attempts upstream: which replicas are left to try, the slot each holds, and what
/// the next one must honour.
#[derive(Debug, Default)]
pub(crate) struct Attempts {
    /// Replicas in try order, and how many were tried.
    pub order: TryOrder,
    /// A slot already held for the next attempt (admission's, or a stale connection's).
    pub pending: Option<Slot>,
    /// Slot of the current attempt.
    pub slot: Option<Slot>,
    /// Replica of the latest attempt.
    pub replica: Option<Arc<Replica>>,
    /// Attempts made.
    pub count: u32,
    /// The replica the routing history already credited with the prompt when the request
    /// was decided (`super::request::decide`): the first attempt to it is not recorded twice.
    pub recorded: Option<ReplicaId>,
    /// Attempts whose request reached a replica that then failed to answer (a timeout, a
    /// reset): each replica ran, or was running, the prefill, so each is charged the prompt.
    pub unanswered: u32,
    /// A stale pooled connection was already retried.
    pub stale_retried: bool,
    /// The longest `Retry-After` a replica answered with (it cools that replica down, and
    /// is what the client is told when no attempt is left).
    pub upstream_retry_after: Option<Duration>,
}

/// The response as the client sees it.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// The response header went downstream: no more retries.
    pub started: bool,
    /// Status sent (0 while none).
    pub status: u16,
    /// Error code label when the gateway answered with an error.
    pub error_code: Option<&'static str>,
    /// Response observer (usage, `[DONE]`).
    pub tracker: Option<ResponseTracker>,
    /// The stream got its terminal error event.
    pub stream_error_sent: bool,
    /// Prompt tokens the replica loaded from the shared KV tier (its
    /// `x-warmpath-kv-tier-tokens`), when it said.
    pub tier_tokens: Option<u64>,
}

/// The model of a request not parsed (yet): one shared empty string, not one per request.
fn no_model() -> Arc<str> {
    static EMPTY: OnceLock<Arc<str>> = OnceLock::new();
    EMPTY.get_or_init(|| "".into()).clone()
}

impl RequestCtx {
    /// A fresh context with a new root trace.
    pub(crate) fn new() -> Self {
        let trace = TraceContext::new_root();
        Self {
            id: trace.request_id(),
            trace,
            start: Instant::now(),
            read: Read {
                control: false,
                api: "",
                model: no_model(),
                body_len: None,
                upstream_body: None,
                upstream_sent: 0,
                body_budget: None,
            },
            admission: Admission::default(),
            plan: None,
            attempts: Attempts::default(),
            seen: Seen::default(),
            migration: None,
            messages: None,
            responses: None,
        }
    }

    /// Continues the client's trace (`traceparent`): the request id becomes its trace id.
    pub(crate) fn continue_trace(&mut self, trace: TraceContext) {
        self.id = trace.request_id();
        self.trace = trace;
    }

    /// Whether the client asked for server-sent events.
    pub(crate) fn is_stream(&self) -> bool {
        self.plan.as_ref().is_some_and(|p| p.stream)
    }

    /// Whether another attempt may follow: nothing sent downstream yet, attempts left, and
    /// a replica left to try.
    pub(crate) fn can_retry(&self, max_attempts: u32) -> bool {
        !self.seen.started && self.attempts.count < max_attempts && !self.attempts.order.done()
    }
}

impl Default for RequestCtx {
    fn default() -> Self {
        Self::new()
    }
}
