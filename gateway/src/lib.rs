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
//! Two planes meet only in the shared state:
//! - [`proxy`]: the data plane, one folder with the request's phases in the order they
//!   run (accept, read, admit, prepare, route, send, response, finish).
//! - [`control`]: the control plane: replica registration, the KV event followers, load
//!   pollers and health probes, config reload. It imports nothing from [`proxy`].
//! - Shared state: [`state`] (one `AppState`), [`replicas`] (the replica set, health,
//!   in-flight slots), [`routing`] (prefix index and policy), [`tenants`] (keys, salts,
//!   limits), [`metrics`], [`retry`] (the retry budget and backoff); [`outcome`]: what became
//!   of one request, the value the data plane hands the shared sinks.
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
//! - The admin listener: [`admin`] and the routing [`dashboard`]; [`logging`]; [`server`]
//!   assembles and runs it all.

pub mod admin;
pub mod body;
pub mod config;
pub mod control;
pub mod dashboard;
pub mod encoder;
pub mod engines;
pub mod error;
pub mod fleet;
#[doc(hidden)]
pub mod fuzzing;
pub mod headers;
pub mod logging;
pub mod metrics;
pub mod outcome;
pub mod proxy;
pub mod replicas;
pub mod retry;
pub mod rollout;
pub mod routing;
pub mod server;
pub mod state;
pub mod tenants;
pub mod tokenize;
pub mod trace;

pub use config::Config;
pub use error::GatewayError;
