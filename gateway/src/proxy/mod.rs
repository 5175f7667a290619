//! The data plane: one request from its connection's accept to its end, as phases in the
//! order they run. Pingora calls the hooks of [`service::Gateway`], and each hook only
//! calls its phase.
//!
//! 1. [`accept`]: each client connection: a per-IP cap, a total header deadline, then
//!    Pingora's HTTP/1.1 loop over the proxy.
//! 2. [`read`]: the route table, framing and size checks, the bounded body read.
//! 3. [`admit`]: authenticate the API key; reserve the request's tokens against the
//!    tenant's limits; [`bound`]: the body forwarded carries the completion bound reserved;
//!    [`salt`]: a vLLM pool's body carries the tenant's `cache_salt`.
//! 4. [`prepare`]: tokenize exactly as the replica does ([`tokens`]); hash blocks under the
//!    tenant's namespace.
//! 5. [`route`]: the policy's decision and try order, an in-flight slot, the decision
//!    recorded; every attempt's replica comes from [`route::TryOrder::next_replica`].
//! 6. [`send`]: each attempt's peer (retries under a budget, with backoff) and the
//!    header the replica gets; [`upstream`] sends it with its body in one write.
//! 7. [`response`]: retry or pass on the replica's status; stamp the client's header;
//!    watch the body as it streams through.
//! 8. [`finish`]: the request's [`crate::outcome::Outcome`], computed once: settlement,
//!    health, metrics, access log, dashboard.
//!
//! [`responses`] hooks the Responses API's translation (`crate::api::responses`) into
//! phases 2, 5, 7 and 8. [`request`] runs phases 2 to 5 in order; [`failure`] handles what goes wrong after
//! them, and [`migrate`] continues a stream whose replica failed on another replica; [`respond`] writes the answers the gateway gives itself. The request's state is
//! one [`ctx::RequestCtx`], whose parts each belong to one phase.

pub(crate) mod accept;
pub(crate) mod admit;
pub(crate) mod bound;
pub(crate) mod ctx;
pub(crate) mod drain;
pub(crate) mod failure;
pub(crate) mod finish;
pub(crate) mod flow_wait;
pub(crate) mod migrate;
pub(crate) mod passthrough;
pub(crate) mod prepare;
pub(crate) mod read;
pub(crate) mod request;
pub(crate) mod respond;
pub(crate) mod response;
pub(crate) mod responses;
pub(crate) mod route;
pub(crate) mod salt;
pub(crate) mod send;
pub(crate) mod service;
pub(crate) mod tokens;
pub(crate) mod upstream;
mod wrapped;
