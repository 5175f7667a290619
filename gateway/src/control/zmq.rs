//! Following a vLLM or SGLang server's KV cache events over ZeroMQ
//! ([`crate::engines::kv_events`]): stored blocks are re-hashed into Warmpath's contract in
//! the pool checkpoint's namespace (with each block's adapter and cache salt) and fed to the
//! precise index, exactly as a Warmpath replica's own event stream is.

use crate::engines::kv_events::{self, ZmqEventsConfig};
use crate::replicas::Replica;
use crate::state::AppState;
use std::sync::Arc;
use warmpath_core::{HashNamespace, Observation};

/// Engine blocks tracked per replica at least (the map from the engine's block hashes to
/// Warmpath's), whatever the pool's capacity estimate says.
const MIN_TRACKED_BLOCKS: usize = 1 << 16;

/// Subscribes to `r`'s KV event publisher until `r` leaves the replica set (started by
/// `super::tasks::spawn_all` for an upstream with `kv_events`).
pub(crate) async fn follow_zmq(state: Arc<AppState>, r: Arc<Replica>) {
    let Some(ep) = r.upstream.kv_events.clone() else {
        return;
    };
    let cfg = ZmqEventsConfig {
        endpoint: ep.endpoint,
        replay_endpoint: ep.replay_endpoint,
        topic: ep.topic,
        block_size: r.info.block_size,
        // Twice the capacity estimate: the engine may hold more than the pool says.
        max_tracked_blocks: usize::try_from(r.info.capacity_blocks.saturating_mul(2))
            .unwrap_or(usize::MAX)
            .max(MIN_TRACKED_BLOCKS),
        ..ZmqEventsConfig::default()
    };
    let mapper = cfg.mapper(HashNamespace::new(r.info.checkpoint.clone()));
    let (id, sink_state) = (r.id, state.clone());
    let sink = move |msg| {
        let obs = sink_state.router.apply_message(id, &msg);
        let label = match obs {
            Observation::Apply => "apply",
            Observation::Duplicate => "duplicate",
            Observation::Gap { .. } => "gap",
            Observation::NewEpoch => "new_epoch",
        };
        sink_state
            .metrics
            .kv_events
            .with_label_values(&[label])
            .inc();
    };
    tracing::info!(replica = %r.id, endpoint = %cfg.endpoint, "following the engine's KV events");
    let end = kv_events::run(cfg, mapper, sink, || r.is_removed()).await;
    tracing::info!(replica = %r.id, counters = ?end, "KV event subscriber stopped");
}
