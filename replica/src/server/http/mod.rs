//! The HTTP API: OpenAI-compatible generation endpoints plus the replica's control plane.
//!
//! # Layout
//! - [`generate`]: `POST /v1/chat/completions` and `POST /v1/completions`: parsing,
//!   validation, submission to the engine loop.
//! - [`respond`]: turning the engine's token stream into OpenAI JSON or SSE.
//! - [`trace`]: the `traceparent` trace id on every request's log lines.
//! - [`control`]: health, models, metrics, replica info/load/tokenizer, KV events.
//! - `POST /v1/kv/prefill`: [`crate::server::transfer::serve`].

pub mod control;
pub mod generate;
pub mod respond;
pub mod trace;

use crate::server::error::ApiError;
use crate::server::events::EventLog;
use crate::server::metrics::Metrics;
use crate::server::worker::{ModelFacts, WorkerMsg, WorkerShared};
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use warmpath_protocol::openai::{PATH_CHAT_COMPLETIONS, PATH_COMPLETIONS, PATH_MODELS};
use warmpath_protocol::replica_api::ReplicaInfo;
use warmpath_protocol::replica_api::{
    PATH_INFO, PATH_KV_EVENTS, PATH_KV_PREFILL, PATH_LOAD, PATH_TOKENIZER,
};

/// `POST`: drop every cached block, as a weight reload does (new event epoch).
pub const PATH_RESET_CACHE: &str = "/v1/replica/reset_prefix_cache";

/// Everything a handler needs.
#[derive(Debug)]
pub struct AppInner {
    /// Facts about the loaded model.
    pub facts: ModelFacts,
    /// Replica info document.
    pub info: ReplicaInfo,
    /// Tokens per block.
    pub block_size: usize,
    /// Channel into the engine loop.
    pub submit: Sender<WorkerMsg>,
    /// KV event log.
    pub events: Arc<EventLog>,
    /// Metrics.
    pub metrics: Metrics,
    /// Engine loop liveness and load.
    pub shared: Arc<WorkerShared>,
    /// Unix seconds at start.
    pub started: u64,
    /// Role in a prefill/decode split.
    pub role: warmpath_core::ReplicaRole,
    /// Client for fetching KV from prefill replicas.
    pub http: reqwest::Client,
    /// How long a KV fetch may take (`--kv-transfer-timeout-ms`).
    pub kv_transfer_timeout_ms: u64,
    /// Test hook: cut every KV stream after this many blocks.
    pub fault_kv_cut_after_blocks: Option<u32>,
    /// The shared KV tier (`--kv-store`), when on.
    pub tier: Option<crate::server::tier::Tier>,
}

/// Shared handler state.
pub type AppState = Arc<AppInner>;

/// Unix seconds now.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The full router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(PATH_CHAT_COMPLETIONS, post(generate::chat_completions))
        .route(PATH_COMPLETIONS, post(generate::completions))
        .route_layer(axum::middleware::from_fn(trace::trace_request))
        .route(PATH_MODELS, get(control::models))
        .route("/health", get(control::health))
        .route("/metrics", get(control::metrics))
        .route(PATH_INFO, get(control::info))
        .route(PATH_LOAD, get(control::load))
        .route(PATH_TOKENIZER, get(control::tokenizer))
        .route(PATH_KV_EVENTS, get(control::kv_events))
        .route(PATH_RESET_CACHE, post(control::reset_cache))
        .route(
            PATH_KV_PREFILL,
            post(crate::server::transfer::serve::prefill),
        )
        .fallback(|uri: axum::http::Uri| async move { ApiError::NotFound(uri.path().to_string()) })
        .layer(DefaultBodyLimit::max(32 << 20))
        .with_state(state)
}
