//! # gateway
//!
//! Warmpath's prefix-aware, per-tenant OpenAI endpoint, built on one Pingora
//! [`pingora_proxy::ProxyHttp`] implementation ([`proxy::Gateway`]).
//!
//! A request is decided completely in the request phase, before Pingora connects upstream:
//! route table and framing checks, API key, bounded body read, tokenization exactly as the
//! replica does it, block hashes under the tenant's salt, tenant limits (reserve), the
//! routing policy, and an in-flight slot. Later phases only pick the attempt's replica
//! (retries go down the decision's fallback list), stamp headers, watch the response as it
//! streams through, and settle the reservation with actual usage.
//!
//! # Layout
//! - [`config`]: the one config model and its validation.
//! - [`error`]: the one error enum and its HTTP/OpenAI mapping.
//! - [`proxy`], [`intake`], [`plan`], [`accounting`], [`respond`]: the request path.
//! - [`request`], [`response`]: what the gateway reads from bodies; [`headers`]: what it
//!   stamps on messages.
//! - [`tokenize`]: cached, replica-identical tokenization.
//! - [`connection`], [`deadline`], [`conn_cap`]: each client connection, from the accept
//!   (a per-IP connection cap, a total header deadline) to its last request.
//! - [`upstream`]: upstream connections that send a request header with its body.
//! - [`tenants`], [`limits`]: keys, salts, allowlists, rate limits.
//! - [`replicas`]: registry, health, event following, load polling, probes.
//! - [`routing`], [`retry`], [`metrics`], [`trace`], [`logging`], [`admin`], [`state`],
//!   [`server`].
//! - [`dashboard`]: the routing dashboard on the admin listener.

pub mod accounting;
pub mod admin;
pub mod config;
pub mod conn_cap;
pub mod connection;
pub mod dashboard;
pub mod deadline;
pub mod error;
pub mod gather;
pub mod headers;
pub mod intake;
pub mod limits;
pub mod logging;
pub mod metrics;
pub mod plan;
pub mod proxy;
pub mod replicas;
pub mod request;
pub mod respond;
pub mod response;
pub mod retry;
pub mod routing;
mod scan;
pub mod server;
pub mod state;
pub mod tenants;
pub mod tokenize;
pub mod trace;
pub mod upstream;
mod wrapped;

pub use config::Config;
pub use error::GatewayError;
