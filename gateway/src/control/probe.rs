//! Health probes: every `health.probe_interval_ms`, an engine's `GET /health` (where it has
//! one) and then a one-token generation sent as a plain OpenAI request. A Warmpath
//! replica's late probe does not count while its engine steps keep advancing.
//!
//! llama.cpp is the exception: its KV cache is a few slots, each holding one prompt, and a
//! `ping` generation takes a slot over, evicting a whole cached prefix every interval. A
//! healthy `llama-server` is probed with `GET /health` alone (which fails while the model
//! loads or when the server is broken); the generation probe runs only while it is failing
//! or ejected, to prove it can generate before it is re-admitted.

use super::client;
use crate::replicas::Replica;
use crate::state::AppState;
use std::sync::Arc;
use std::time::Duration;

/// Probes `r` until it leaves the replica set, reporting each result to its health state.
pub(crate) async fn probe(state: Arc<AppState>, r: Arc<Replica>) {
    let body = serde_json::json!({
        "model": r.info.model, "prompt": "ping", "max_tokens": 1, "temperature": 0.0, "stream": false,
    })
    .to_string();
    while !r.is_removed() {
        let cfg = state.config();
        tokio::time::sleep(Duration::from_millis(cfg.health.probe_interval_ms)).await;
        if r.is_removed() {
            return;
        }
        let deadline = Duration::from_millis(cfg.health.probe_timeout_ms);
        if let Some(path) = engine_health_path(&r) {
            if let Err(e) =
                client::request(&r.addr.http(), http::Method::GET, path, None, deadline).await
            {
                tracing::debug!(replica = %r.id, error = %e, "engine health endpoint failed");
                state.report(&r, false);
                continue;
            }
        }
        if !generation_probe_due(&r) {
            state.report(&r, true);
            continue;
        }
        let steps_before = r.load.lock().steps;
        let res = client::request(
            &r.addr.http(),
            http::Method::POST,
            "/v1/completions",
            Some(body.as_bytes()),
            deadline,
        )
        .await;
        if let Err(e) = &res {
            // A busy replica answers the probe only after its queue. If its engine kept
            // stepping meanwhile (the load poller saw `steps` advance) it is slow, not
            // broken: neither a failure nor a success is recorded.
            if r.load.lock().steps > steps_before {
                tracing::debug!(replica = %r.id, error = %e, "health probe late; replica busy but progressing");
                continue;
            }
            tracing::debug!(replica = %r.id, error = %e, "health probe failed");
        }
        state.report(&r, res.is_ok());
    }
}

/// The health endpoint probed before the one-token request: other engines' `/health`
/// (vLLM, SGLang and llama.cpp answer 200 only once the model is loaded). A Warmpath
/// replica's generation probe already covers its health endpoint's checks.
fn engine_health_path(r: &Replica) -> Option<&'static str> {
    match r.upstream.engine {
        crate::config::EngineKind::Warmpath => None,
        e => e.health_path(),
    }
}

/// Whether this round sends the one-token generation (see the module doc).
fn generation_probe_due(r: &Replica) -> bool {
    if r.upstream.engine != crate::config::EngineKind::Llamacpp {
        return true;
    }
    let view = r.health.lock().view(std::time::Instant::now());
    view.state != "healthy" || view.consecutive_failures > 0
}
