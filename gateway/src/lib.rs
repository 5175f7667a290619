//! # gateway
//!
//! Warmpath's prefix-aware, per-tenant OpenAI endpoint, built on one Pingora
//! [`pingora_proxy::ProxyHttp`] implementation ([`proxy::service::Gateway`]).
//!
//! A request is decided completely in the request phase, before Pingora connects upstream:
//! route table and framing checks, API key, bounded body read, tokenization exactly as the
//! replica does it, block hashes under the tenant's salt, tenant limits (reserve), the
//! routing policy, and an in-flight slot. Later phases only pick the attempt's replica
//! (retries go down the decision's try order), stamp headers, watch the response as it
//! streams through, and settle the reservation with actual usage.
//!
//! # Layout
//! Two planes meet only in the state both hold in this process (not the fleet's state in
//! Redis, which is [`fleet`]):
//! - [`proxy`]: the data plane, one folder with the request's phases in the order they
//!   run (accept, read, admit, prepare, route, send, response, finish).
//! - [`control`]: the control plane: replica registration, the KV event followers, load
//!   pollers and health probes, config reload. It imports nothing from [`proxy`].
//! - In-process state: [`state`] (one `AppState`), [`replicas`] (the replica set, health,
//!   in-flight slots), [`routing`] (prefix index and policy), [`tenants`] (keys, salts,
//!   limits), [`metrics`], [`retry`] (the retry budget and backoff); [`outcome`]: what became
//!   of one request, the value the data plane hands the shared sinks.
//! - [`api`]: the APIs the gateway serves by translating them to chat completions
//!   (the OpenAI Responses API).
//! - [`fleet`]: state a fleet of gateways shares in Redis or a Redis Cluster (tenant
//!   limits), with the degraded fallback when Redis is away.
//! - [`rollout`]: checkpoint rollouts (sticky canary shares, pre-warm from the hot
//!   prefixes the gateway records).
//! - [`engines`]: what the gateway reads from engines that are not Warmpath replicas (vLLM,
//!   SGLang, llama.cpp), such as their load from their Prometheus `/metrics`.
//! - What both read: [`config`] (the one config model), [`error`] (the one error enum and
//!   its HTTP/OpenAI mapping), [`body`] (what the gateway reads from bodies), [`tokenize`]
//!   (cached, replica-identical tokenization), [`headers`], [`trace`]; [`encoder`]: tokens or text units per checkpoint; [`engines`]: what
//!   fronting vLLM, SGLang, llama.cpp or any OpenAI server needs (tokenizer sources,
//!   their metrics and KV events).
//! - [`epp`]: the Endpoint Picker mode (Envoy ext_proc) over the same state and phases.
//! - The admin listener: [`admin`] and the routing [`dashboard`]; [`logging`]; [`server`]
//!   assembles and runs it all.

pub(crate) mod admin;
pub(crate) mod api;
pub(crate) mod body;
pub mod config;
pub(crate) mod control;
pub(crate) mod dashboard;
pub(crate) mod encoder;
pub(crate) mod engines;
pub(crate) mod epp;
pub(crate) mod error;
pub(crate) mod fleet;
pub(crate) mod flow;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod headers;
pub(crate) mod logging;
pub(crate) mod metrics;
pub(crate) mod outcome;
pub(crate) mod proxy;
pub(crate) mod replicas;
pub(crate) mod residency;
pub(crate) mod retry;
pub(crate) mod rollout;
pub(crate) mod routing;
pub(crate) mod server;
pub(crate) mod state;
pub(crate) mod tenants;
pub(crate) mod tokenize;
pub(crate) mod trace;

// The public surface, and all of it: what the gateway binary, its examples and tests, and
// the other crates of the workspace use ([`config`], the config model, stays a public
// module; `fuzzing` exists only with the `fuzzing` feature). Everything else is
// crate-private.
pub use config::{Config, EngineKind};
pub use engines::kv_events::config::ZmqEventsConfig;
pub use engines::kv_events::counters::{CounterSnapshot, SubscriberCounters};
pub use engines::kv_events::rehash::EventMapper;
pub use engines::kv_events::subscribe::ZmqSubscriber;
pub use epp::run as run_epp;
pub use logging::init as init_logging;
pub use proxy::upstream::{mark as mark_upstream, Connector as UpstreamConnector};
pub use routing::Router;
pub use server::run;
pub use tenants::{derive_salt, hash_key};
pub use tokenize::CachedTokenizer;
