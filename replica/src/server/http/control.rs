//! Control-plane endpoints: health, models, metrics, replica info/load/tokenizer, the KV
//! event stream and the cache reset.

use crate::server::error::ApiError;
use crate::server::state::AppState;
use crate::server::worker::WorkerMsg;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use std::sync::atomic::Ordering;
use warmpath_core::{Epoch, SeqNo};
use warmpath_protocol::openai::{ModelCard, ModelList};
use warmpath_protocol::replica_api::ReplicaLoad;

/// `GET /health`: 200 while the model is loaded and the engine loop runs, else 503.
pub async fn health(State(state): State<AppState>) -> Response {
    if state.shared.alive.load(Ordering::SeqCst) {
        (StatusCode::OK, Json(serde_json::json!({"status": "ok"}))).into_response()
    } else {
        ApiError::Unavailable.into_response()
    }
}

/// `GET /v1/models`.
pub async fn models(State(state): State<AppState>) -> Json<ModelList> {
    Json(ModelList {
        object: "list".into(),
        data: vec![ModelCard {
            id: state.facts.model_name.clone(),
            object: "model".into(),
            created: state.started,
            owned_by: "warmpath".into(),
        }],
    })
}

/// `GET /metrics`: Prometheus text format.
pub async fn metrics(State(state): State<AppState>) -> Response {
    let mut resp = state.metrics.render().into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    resp
}

/// `GET /v1/replica/info`.
pub async fn info(State(state): State<AppState>) -> Response {
    Json(state.info.clone()).into_response()
}

/// `GET /v1/replica/load`.
pub async fn load(State(state): State<AppState>) -> Response {
    let load = state
        .shared
        .load
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let load = ReplicaLoad {
        tier_tokens_per_s: state.tier.as_ref().map_or(0.0, |t| t.rate.get()),
        ..load
    };
    Json(load).into_response()
}

/// `GET /v1/replica/tokenizer`: the engine's tokenizer spec.
pub async fn tokenizer(State(state): State<AppState>) -> Response {
    Json(state.facts.tokenizer.spec().clone()).into_response()
}

/// `POST /v1/replica/reset_prefix_cache`: drop every cached block once no sequence holds
/// one; followers see `Cleared` under a new epoch.
pub async fn reset_cache(State(state): State<AppState>) -> Result<Response, ApiError> {
    state
        .submit
        .send(WorkerMsg::ClearCache)
        .map_err(|_| ApiError::Unavailable)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({"status": "scheduled"})),
    )
        .into_response())
}

/// Query of `GET /v1/kv/events`.
#[derive(Debug, Deserialize)]
pub struct EventsQuery {
    /// Epoch the client holds.
    pub epoch: Option<u64>,
    /// Last sequence number the client applied.
    pub from_seq: Option<u64>,
}

/// `GET /v1/kv/events`: NDJSON of `KvStreamMessage`: a snapshot (or the records after
/// `from_seq` when `epoch` matches and the ring still holds them), then live deltas.
pub async fn kv_events(State(state): State<AppState>, Query(q): Query<EventsQuery>) -> Response {
    let start = match (q.epoch, q.from_seq) {
        (Some(e), Some(s)) => Some((Epoch(e), SeqNo(s))),
        _ => None,
    };
    let log = state.events.clone();
    let rx = log.subscribe();
    let stream = futures_util::stream::unfold(
        (log, rx, start, true),
        |(log, mut rx, pos, first)| async move {
            loop {
                rx.mark_unchanged();
                let (msgs, now) = log.read(pos);
                if !msgs.is_empty() || first {
                    let mut out = Vec::new();
                    for m in &msgs {
                        if let Ok(line) = serde_json::to_vec(m) {
                            out.extend_from_slice(&line);
                            out.push(b'\n');
                        }
                    }
                    return Some((
                        Ok::<Bytes, std::convert::Infallible>(Bytes::from(out)),
                        (log, rx, Some(now), false),
                    ));
                }
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        },
    );
    let mut resp = Body::from_stream(stream).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    resp
}

#[cfg(test)]
mod tests {
    #[test]
    fn started_is_a_plausible_unix_time() {
        assert!(crate::server::state::unix_now() > 1_600_000_000);
    }
}
