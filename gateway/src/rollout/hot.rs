//! The hot prefixes of every checkpoint, recorded from the gateway's own traffic: what a
//! rollout replays to warm the next checkpoint. One [`HotPrefixes`] table per checkpoint
//! (a checkpoint's block hashes mean nothing to another), tagged with the tenant (its
//! cache salt, so a replay lands in that tenant's namespace on the new replicas, and its
//! residency, so a replay never leaves the tenant's regions).
//!
//! The table is this gateway's memory only: hot prefixes (prompt tokens, tenant data)
//! never go to Redis or another gateway, even in a fleet (the rollout's owner pre-warms
//! from its own history, `super::fleet`).

use crate::config::HotPrefixConfig;
use http::HeaderValue;
use parking_lot::Mutex;
use router_policy::HotPrefixes;
use std::collections::HashMap;
use std::sync::Arc;
use warmpath_core::{CheckpointId, RegionId, TokenId};

/// Checkpoints whose history is kept at once (a rollout needs two).
const MAX_CHECKPOINTS: usize = 16;

/// Whose prefix an entry is: what a replay needs of its tenant.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HotTag {
    /// The tenant's id (its residency is looked up again when the prefix is replayed).
    pub tenant: Arc<str>,
    /// The tenant's cache salt, as sent to replicas.
    pub salt: HeaderValue,
    /// The regions the tenant was pinned to when the prefix was recorded (empty: any).
    pub residency: Arc<[RegionId]>,
}

/// One prefix to replay: its tokens and its tenant.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Replay {
    /// The prompt tokens to prefill.
    pub tokens: Vec<TokenId>,
    /// Whose prefix it is.
    pub tag: HotTag,
    /// Requests that shared the prefix.
    pub count: u64,
}

/// Hot prefixes per checkpoint.
#[derive(Default)]
pub(crate) struct HotTable {
    capacity: usize,
    max_tokens: usize,
    by_checkpoint: Mutex<HashMap<CheckpointId, HotPrefixes<HotTag>>>,
}

impl HotTable {
    /// A table keeping `cfg.capacity` keys per checkpoint.
    pub(crate) fn new(cfg: &HotPrefixConfig) -> Self {
        Self {
            capacity: cfg.capacity,
            max_tokens: cfg.max_tokens,
            by_checkpoint: Mutex::default(),
        }
    }

    /// Counts one request of `checkpoint` with conversation key `key`, of the tenant
    /// `tag` describes.
    pub(crate) fn record(
        &self,
        checkpoint: &CheckpointId,
        key: u64,
        tokens: &[TokenId],
        tag: &HotTag,
    ) {
        if self.capacity == 0 {
            return;
        }
        let mut g = self.by_checkpoint.lock();
        if !g.contains_key(checkpoint) && g.len() >= MAX_CHECKPOINTS {
            return;
        }
        g.entry(checkpoint.clone())
            .or_insert_with(|| HotPrefixes::new(self.capacity, self.max_tokens))
            .record(key, tokens, tag);
    }

    /// The `n` hottest prefixes of `checkpoint` of at least `min_tokens` tokens.
    pub(crate) fn top(
        &self,
        checkpoint: &CheckpointId,
        n: usize,
        min_tokens: usize,
    ) -> Vec<Replay> {
        let g = self.by_checkpoint.lock();
        g.get(checkpoint).map_or_else(Vec::new, |h| {
            h.top(n, min_tokens)
                .into_iter()
                .map(|e| Replay {
                    tokens: e.tokens.clone(),
                    tag: e.tag.clone(),
                    count: e.count,
                })
                .collect()
        })
    }

    /// Forgets `checkpoint` (its last replica left).
    pub(crate) fn forget(&self, checkpoint: &CheckpointId) {
        self.by_checkpoint.lock().remove(checkpoint);
    }

    /// Keys held per checkpoint, by checkpoint id.
    pub(crate) fn counts(&self) -> std::collections::BTreeMap<String, usize> {
        self.by_checkpoint
            .lock()
            .iter()
            .map(|(c, h)| (c.to_string(), h.len()))
            .collect()
    }

    /// Keys held for `checkpoint`.
    #[cfg(test)]
    pub(crate) fn len(&self, checkpoint: &CheckpointId) -> usize {
        self.by_checkpoint
            .lock()
            .get(checkpoint)
            .map_or(0, |h| h.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_checkpoint_and_forgotten_with_it() {
        let t = HotTable::new(&HotPrefixConfig::default());
        let (a, b) = (CheckpointId::new("m@a"), CheckpointId::new("m@b"));
        let tag = HotTag {
            tenant: "t".into(),
            salt: HeaderValue::from_static("s1"),
            residency: Arc::from([RegionId::new("eu")]),
        };
        let toks: Vec<TokenId> = (0..64).map(TokenId).collect();
        for _ in 0..3 {
            t.record(&a, 1, &toks, &tag);
        }
        t.record(&b, 2, &toks[..40], &tag);
        let top = t.top(&a, 5, 32);
        assert_eq!(top.len(), 1);
        assert_eq!((top[0].count, top[0].tokens.len()), (3, 64));
        assert_eq!(top[0].tag, tag);
        assert_eq!(t.top(&b, 5, 50).len(), 0, "shorter than min_tokens");
        t.forget(&a);
        assert_eq!(t.len(&a), 0);
        assert_eq!(t.len(&b), 1);
    }
}
