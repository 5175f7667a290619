//! The full router: every endpoint to its handler.

use super::tokenize::{self, PATH_DETOKENIZE, PATH_TOKENIZE};
use super::{control, generate, kv_prefill, trace};
use crate::server::error::ApiError;
use crate::server::state::AppState;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use warmpath_protocol::openai::{PATH_CHAT_COMPLETIONS, PATH_COMPLETIONS, PATH_MODELS};
use warmpath_protocol::replica_api::{
    PATH_INFO, PATH_KV_EVENTS, PATH_KV_PREFILL, PATH_LOAD, PATH_TOKENIZER,
};

/// `POST`: drop every cached block, as a weight reload does (new event epoch).
pub const PATH_RESET_CACHE: &str = "/v1/replica/reset_prefix_cache";

/// The full router.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(PATH_CHAT_COMPLETIONS, post(generate::chat_completions))
        .route(PATH_COMPLETIONS, post(generate::completions))
        .route(PATH_TOKENIZE, post(tokenize::tokenize))
        .route(PATH_DETOKENIZE, post(tokenize::detokenize))
        .route_layer(axum::middleware::from_fn(trace::trace_request))
        .route(PATH_MODELS, get(control::models))
        .route("/health", get(control::health))
        .route("/metrics", get(control::metrics))
        .route(PATH_INFO, get(control::info))
        .route(PATH_LOAD, get(control::load))
        .route(PATH_TOKENIZER, get(control::tokenizer))
        .route(PATH_KV_EVENTS, get(control::kv_events))
        .route(PATH_RESET_CACHE, post(control::reset_cache))
        .route(PATH_KV_PREFILL, post(kv_prefill::prefill))
        .fallback(|uri: axum::http::Uri| async move { ApiError::NotFound(uri.path().to_string()) })
        .layer(DefaultBodyLimit::max(32 << 20))
        .with_state(state)
}
