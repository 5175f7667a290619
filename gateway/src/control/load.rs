//! Load pollers: a Warmpath replica's `GET /v1/replica/load`, or another engine's
//! Prometheus `GET /metrics` read with its metric names
//! ([`crate::engines::metrics`]). An engine whose metrics cannot be read keeps a zero load
//! report, so the policies see only the gateway's own in-flight count for it.

use super::client;
use crate::config::EngineKind;
use crate::engines::metrics::{self, MetricsDialect};
use crate::replicas::Replica;
use crate::state::AppState;
use std::sync::Arc;
use std::time::Duration;
use warmpath_protocol::replica_api::{ReplicaLoad, PATH_LOAD};

/// Polls a Warmpath replica's load endpoint every `load_poll_ms`.
pub(crate) async fn poll_load(state: Arc<AppState>, r: Arc<Replica>) {
    let mut conn = client::KeptAlive::new(r.addr.http());
    while !r.is_removed() {
        let every = Duration::from_millis(state.config().load_poll_ms);
        match conn
            .get_json::<ReplicaLoad>(PATH_LOAD, Duration::from_secs(1))
            .await
        {
            Ok(load) => *r.load.lock() = load,
            Err(e) => tracing::debug!(replica = %r.id, error = %e, "load poll failed"),
        }
        tokio::time::sleep(every).await;
    }
}

/// The metric names an engine exports, if it has a dialect the gateway reads.
pub(crate) fn dialect(engine: EngineKind) -> Option<MetricsDialect> {
    match engine {
        EngineKind::Vllm => Some(MetricsDialect::Vllm),
        EngineKind::Sglang => Some(MetricsDialect::Sglang),
        EngineKind::Llamacpp => Some(MetricsDialect::Llamacpp),
        EngineKind::Warmpath | EngineKind::Openai => None,
    }
}

/// Scrapes an engine's `/metrics` every `load_poll_ms` into its load report. After a
/// failed scrape the load is reset to zero (stale numbers would steer traffic away
/// forever); the in-flight count still reflects what this gateway sent.
pub(crate) async fn poll_metrics(state: Arc<AppState>, r: Arc<Replica>) {
    let Some(dialect) = dialect(r.upstream.engine) else {
        return;
    };
    let mut conn = client::KeptAlive::new(r.addr.http());
    let mut warned = false;
    let mut rate = metrics::PrefillRate::default();
    while !r.is_removed() {
        let every = Duration::from_millis(state.config().load_poll_ms);
        let scraped = conn
            .get_body("/metrics", Duration::from_secs(1))
            .await
            .map_err(|e| e.to_string())
            .and_then(|body| {
                let text = String::from_utf8_lossy(&body);
                metrics::parse_load(dialect, &text).map_err(|e| e.to_string())
            });
        match scraped {
            Ok(mut load) => {
                r.adapters
                    .report(load.adapters.take(), std::time::Instant::now());
                let per_s = rate.update(load.prefill);
                *r.load.lock() =
                    load.to_replica_load(r.info.block_size, r.info.capacity_blocks, per_s);
                warned = false;
            }
            Err(e) => {
                if !warned {
                    tracing::warn!(replica = %r.id, engine = r.upstream.engine.as_str(), error = %e,
                        "cannot read the engine's /metrics; routing on the gateway's own in-flight counts");
                    warned = true;
                }
                *r.load.lock() = ReplicaLoad::default();
            }
        }
        tokio::time::sleep(every).await;
    }
}
