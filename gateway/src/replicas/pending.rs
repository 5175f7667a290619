//! What the gateway itself knows of an engine's prefill queue, for engines that do not
//! report one (every engine but Warmpath's replica): the prompt tokens it sent that the
//! engine has not started answering ([`PendingPrefill`]), and how much of the cache the
//! prefix index predicted the engine really had ([`CacheTruth`]).
//!
//! A request's tokens count from the moment its header is sent upstream until the
//! response header comes back (a streaming engine answers once the prefill is done;
//! a plain response arrives whole, so its tokens count a little longer) or the attempt
//! ends. Each counts its prompt less the cached tokens expected: the index's prediction
//! scaled by the engine's recent ratio of reported to predicted cached tokens, since an
//! engine that evicts what the routing history still holds (llama.cpp keeps one prompt per
//! slot) reuses less than predicted. Only this gateway's requests are counted: other
//! gateways' show in the engine's running and waiting requests.

use std::sync::atomic::{AtomicU64, Ordering};

/// Weight of the newest response in [`CacheTruth`].
const TRUTH_ALPHA: f64 = 0.2;

/// Prompt tokens sent to a replica whose response has not started.
#[derive(Debug, Default)]
pub(crate) struct PendingPrefill(AtomicU64);

impl PendingPrefill {
    /// Tokens pending now.
    pub(crate) fn tokens(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    pub(super) fn add(&self, tokens: u64) {
        self.0.fetch_add(tokens, Ordering::AcqRel);
    }

    pub(super) fn sub(&self, tokens: u64) {
        // Never below zero, whatever the interleaving of adds and subs.
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                Some(v.saturating_sub(tokens))
            });
    }
}

/// The recent ratio of cached tokens an engine reported to those the index predicted,
/// in `[0, 1]` (1 until a response says otherwise).
#[derive(Debug)]
pub(crate) struct CacheTruth(AtomicU64);

impl Default for CacheTruth {
    fn default() -> Self {
        Self(AtomicU64::new(1.0f64.to_bits()))
    }
}

impl CacheTruth {
    /// The current ratio.
    pub(crate) fn ratio(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }

    /// The cached tokens to expect of `predicted`.
    pub(crate) fn expected(&self, predicted: u64) -> u64 {
        (predicted as f64 * self.ratio()).round() as u64
    }

    /// A response reported `actual` cached tokens where the index predicted `predicted`
    /// (nothing is learned from a prediction of none). Concurrent updates may lose one
    /// sample; the average does not need every one.
    pub(crate) fn observe(&self, predicted: u64, actual: u64) {
        if predicted == 0 {
            return;
        }
        let sample = (actual as f64 / predicted as f64).min(1.0);
        let r = self.ratio();
        let next = r + TRUTH_ALPHA * (sample - r);
        self.0.store(next.to_bits(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_tokens_add_up_and_never_go_below_zero() {
        let p = PendingPrefill::default();
        p.add(400);
        p.add(100);
        p.sub(400);
        assert_eq!(p.tokens(), 100);
        p.sub(1000);
        assert_eq!(p.tokens(), 0);
    }

    #[test]
    fn the_ratio_follows_what_the_engine_reports() {
        let t = CacheTruth::default();
        assert_eq!(t.expected(400), 400);
        // The engine reuses a quarter of what was predicted, again and again.
        for _ in 0..30 {
            t.observe(400, 100);
        }
        assert!((t.ratio() - 0.25).abs() < 0.01, "{}", t.ratio());
        assert_eq!(t.expected(400), 100);
        // More than predicted counts as the prediction; no prediction teaches nothing.
        t.observe(0, 50);
        assert!((t.ratio() - 0.25).abs() < 0.01);
        for _ in 0..30 {
            t.observe(100, 300);
        }
        assert!(t.ratio() > 0.99, "{}", t.ratio());
    }

    /// The snapshot of an engine without a queue report carries the pending tokens; a
    /// Warmpath replica's carries its own report.
    #[test]
    fn pending_tokens_stand_in_for_the_queue_only_for_other_engines() {
        use crate::config::EngineKind;
        use crate::encoder::PromptEncoder;
        use crate::replicas::{Registry, ReplicaAddr, UpstreamMeta};
        use std::sync::Arc;
        use warmpath_core::{BlockSize, CheckpointId};
        use warmpath_protocol::replica_api::ReplicaInfo;

        let reg = Registry::new();
        let info = ReplicaInfo {
            model: "m".into(),
            checkpoint: CheckpointId::new("m@1"),
            block_size: BlockSize(16),
            hash_scheme: warmpath_core::SCHEME_VERSION,
            capacity_blocks: 1024,
            max_context: 4096,
            region: None,
            device: "cpu".into(),
            role: Default::default(),
            kv_store_region: None,
        };
        let add = |port: u16, engine: EngineKind| {
            let meta = UpstreamMeta {
                engine,
                ..UpstreamMeta::warmpath("m")
            };
            let addr = ReplicaAddr::parse(&format!("http://127.0.0.1:{port}")).unwrap();
            reg.insert_upstream(addr, info.clone(), Arc::new(PromptEncoder::TextUnits), meta)
                .unwrap()
        };
        let engine = add(9, EngineKind::Llamacpp);
        let own = add(10, EngineKind::Warmpath);
        let now = std::time::Instant::now();
        let a = reg.try_acquire(&engine, 8).unwrap();
        let b = reg.try_acquire(&engine, 8).unwrap();
        a.prefill_sent(400);
        b.prefill_sent(100);
        // A retry on the same slot replaces its tokens rather than adding them again.
        b.prefill_sent(100);
        assert_eq!(engine.snapshot(now, "m").queued_prefill_tokens, 500);
        a.prefill_done();
        assert_eq!(engine.snapshot(now, "m").queued_prefill_tokens, 100);
        drop(b);
        assert_eq!(engine.snapshot(now, "m").queued_prefill_tokens, 0);

        own.load.lock().queued_prefill_tokens = 7;
        let c = reg.try_acquire(&own, 8).unwrap();
        c.prefill_sent(400);
        assert_eq!(own.snapshot(now, "m").queued_prefill_tokens, 7);
    }
}
